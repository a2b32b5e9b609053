#!/usr/bin/env python3
"""Mutation testing of the switch program: does the PTF suite catch each fault?

    sudo .venv/bin/python scripts/p4_mutants.py [--only NAME ...] [--list] [--resume]
        [--no-baseline] [--all-failures] [--out build/p4-mutants.json]

Each mutant is one small change to `p4src/v1model/bwn.p4` (a relational
operator, a dropped statement, a swapped constant, each stamp and each drop),
written here as (name, exact text, replacement). For each: copy p4src/ to a
temporary folder, apply it, compile with p4c, run the PTF suite on the result
(`ptf-tests/run_ptf.py --build-dir`). The mutant is

  killed     the suite failed,
  survived   the suite passed (a fault the tests do not see),
  timeout    the suite ran past --timeout,
  invalid    the mutant does not compile (not counted),
  stale      its text is no longer in bwn.p4 (the list needs updating; an error).

The score is killed / (killed + survived + timeout), equivalent mutants
(listed in EQUIVALENT, each with its reason) excluded. docs/testing.md records
the scores and the survivors. Not run by CI: each mutant takes minutes.

First the unmutated program is compiled and run against the same suite (the
baseline): if it fails, every mutant would count as killed, so the run stops.
The suite stops at its first failure (PTF's --failfast): one is a kill, and a
killed mutant then costs seconds instead of the whole suite; --all-failures
runs every test and lists up to five that failed.

Each result records the SHA-256 of bwn.p4 and of ptf-tests/*.py it was run
against. --resume keeps the results in --out whose hashes are today's and runs
the rest, so an interrupted run goes on where it stopped and a run made before
the program or the tests changed is made again.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROGRAM = Path("v1model") / "bwn.p4"
EXIT_SKIPPED = 77   # run_ptf.py: a tool is missing


@dataclass(frozen=True)
class Mutant:
    name: str
    find: str
    replace: str
    every: bool = False     # the text occurs more than once: change every occurrence


MUTANTS: list[Mutant] = [
    # -- forwarding, TTL, checksums (TTL ++ protocol ++ checksum is one word: one addition)
    Mutant("ttl-not-decremented", "? 32w0xFF000100 : 32w0xFEFF0101", "? 32w0x00000100 : 32w0xFFFF0101"),
    Mutant("protocol-decremented", "? 32w0xFF000100 : 32w0xFEFF0101", "? 32w0xFEFF0100 : 32w0xFEFE0101"),
    Mutant("ttl-checksum-not-updated", "? 32w0xFF000100 : 32w0xFEFF0101", "? 32w0xFF000000 : 32w0xFF000000"),
    Mutant("ttl-checksum-carry-dropped", "(IP_CSUM(hdr.ipv4) < 16w0xFEFF ?", "(IP_CSUM(hdr.ipv4) <= 16w0xFFFF ?"),
    Mutant("ttl-checksum-carry-off-by-one", "(IP_CSUM(hdr.ipv4) < 16w0xFEFF ?", "(IP_CSUM(hdr.ipv4) <= 16w0xFEFF ?"),
    Mutant("ttl-1-forwarded", "(_, 32w0 &&& 32w0xFE000000): ttl_expired;", "(_, 32w0 &&& 32w0xFF000000): ttl_expired;"),
    Mutant("ttl-2-dropped", "(_, 32w0 &&& 32w0xFE000000): ttl_expired;", "(_, 32w0 &&& 32w0xFC000000): ttl_expired;"),
    Mutant("macs-not-rewritten", "hdr.ethernet.macs = macs;", ""),
    Mutant("egress-port-not-set", "standard_metadata.egress_spec = port;", ""),
    Mutant("checksum-not-verified",
           "standard_metadata.parser_error != error.NoError || standard_metadata.checksum_error == 1",
           "standard_metadata.parser_error != error.NoError"),
    Mutant("checksum-verified-without-addresses", "{ hdr.ipv4.head, hdr.ipv4.ttl_csum, hdr.fk.src_addr, hdr.fk.dst_addr },",
           "{ hdr.ipv4.head, hdr.ipv4.ttl_csum, hdr.fk.src_addr },"),
    Mutant("dscp-remark-checksum-not-updated", "IP_CSUM(hdr.ipv4) = ~(hdr.w.t[15:0]);", ""),
    # -- parser and drops
    Mutant("ihl-4-accepted", "(IHL_4 &&& IHL_MASK, _): ipv4_too_short;", "(IHL_4 &&& IHL_MASK, _): parse_addrs;"),
    Mutant("options-not-parsed", "packet.extract(hdr.addrs, ((bit<32>)IP_IHL(hdr.ipv4) - 5) * 32);",
           "packet.extract(hdr.addrs, 0);"),
    Mutant("non-ipv4-accepted", "verify(false, error.NotIPv4);", ""),
    Mutant("bwn-on-any-udp-port", "            BWN_UDP_PORT: parse_bwn;\n            default: accept;",
           "            default: parse_bwn;"),
    Mutant("fragments-parsed", "(IHL_5 &&& IHL_MF_FRAG_MASK, PROTO_UDP_WORD &&& PROTO_MASK): parse_udp;",
           "(IHL_5 &&& IHL_MASK, PROTO_UDP_WORD &&& PROTO_MASK): parse_udp;"),
    Mutant("udp-by-ttl", "(IHL_5 &&& IHL_MF_FRAG_MASK, PROTO_UDP_WORD &&& PROTO_MASK): parse_udp;",
           "(IHL_5 &&& IHL_MF_FRAG_MASK, 32w0x11000000 &&& 32w0xFF000000): parse_udp;"),
    Mutant("drop-reason-ttl-wrong", "drop_with(DROP_TTL);", "drop_with(DROP_IPV4_MALFORMED);"),
    Mutant("drop-reason-bwn-wrong", "drop_with(DROP_BWN_MALFORMED);", "drop_with(DROP_IPV4_MALFORMED);"),
    Mutant("drop-not-counted", "drop_counter.count(reason);", ""),
    Mutant("malformed-not-dropped", "mark_to_drop(standard_metadata);", ""),
    # -- loss
    Mutant("loss-compare-inverted", "if (hdr.w.t < (bit<256>)hdr.w.a) {", "if (hdr.w.t >= (bit<256>)hdr.w.a) {"),
    Mutant("loss-never-drawn", "                        if (hdr.w.a != 0) {\n                            random_loss();",
           "                        if (hdr.w.a == 0) {\n                            random_loss();", every=True),
    Mutant("loss-draw-clobbers-flow-slot",
           "random(hdr.w.t, 256w0, 256w0xFFFFFFFF);\n        if (hdr.w.t < (bit<256>)hdr.w.a) {",
           "random(hdr.w.slot_seen, 32w0, 32w0xFFFFFFFF);\n        if (hdr.w.slot_seen < hdr.w.a) {"),
    # -- OBP: BR, BI, AB, windows
    Mutant("br-not-counted", "hdr.w.ps = hdr.w.ps + ((bit<176>)standard_metadata.packet_length << 144);", ""),
    Mutant("br-counts-this-packet-twice", "hdr.w.b = PS_RX(hdr.w.ps) - standard_metadata.packet_length;",
           "hdr.w.b = PS_RX(hdr.w.ps);"),
    Mutant("ab-without-bi", "hdr.w.b = cap_bytes - hdr.w.a - hdr.w.b;", "hdr.w.b = cap_bytes - hdr.w.a;"),
    Mutant("ab-without-br", "hdr.w.b = cap_bytes - hdr.w.a - hdr.w.b;", "hdr.w.b = cap_bytes - hdr.w.b;"),
    Mutant("idle-gap-not-zeroed", "            hdr.w.a = 0;\n        }\n        PS_END(hdr.w.ps)",
           "        }\n        PS_END(hdr.w.ps)"),
    Mutant("window-never-closes", "standard_metadata.ingress_global_timestamp >= PS_END(hdr.w.ps)\n",
           "standard_metadata.ingress_global_timestamp < 0\n"),
    Mutant("drop-opens-the-rare-path", "        hdr.w.ps = PS_NEVER_RARE;", ""),
    Mutant("drop-leaves-slot-seen", "        hdr.w.slot_seen = 0;\n    }", "    }"),
    Mutant("loss-drop-keeps-options", "            drop_with(DROP_RANDOM_LOSS);\n            hdr.w.b = 0;",
           "            drop_with(DROP_RANDOM_LOSS);"),
    Mutant("queue-key-not-set", "        meta.k = (bit<32>)hdr.w.q;\n", ""),
    Mutant("window-flag-left-from-another-packet", "        hdr.w.q = 0;", ""),
    Mutant("window-end-not-stored",
           "        port_state.write(standard_metadata.egress_spec, hdr.w.ps);\n"
           "        queue_depth.read(hdr.w.q, standard_metadata.egress_spec);",
           "        queue_depth.read(hdr.w.q, standard_metadata.egress_spec);"),
    Mutant("queue-not-sampled", "        queue_depth.write(standard_metadata.egress_port, standard_metadata.deq_qdepth);", ""),
    Mutant("ab-unsigned-shift", "(bit<32>)(int<32>)(((int<64>)(int<32>)hdr.w.b * 125) >> (K - 6))",
           "(bit<32>)(((bit<64>)hdr.w.b * 125) >> (K - 6))"),
    # -- EBN: flows and share
    Mutant("flow-not-counted", "PS_CURRENT(hdr.w.ps) = PS_CURRENT(hdr.w.ps) + 1;", ""),
    Mutant("flow-slot-not-marked", "flow_slot.write(hdr.w.slot_idx, hdr.w.slot_seen);", ""),
    Mutant("flows-last-ignored", "        if ((bit<32>)PS_CURRENT(hdr.w.ps) > meta.k) {\n            meta.k = (bit<32>)PS_CURRENT(hdr.w.ps);",
           "        if ((bit<32>)PS_CURRENT(hdr.w.ps) > 0) {\n            meta.k = (bit<32>)PS_CURRENT(hdr.w.ps);"),
    Mutant("flow-window-not-rolled", "            PS_CURRENT(hdr.w.ps) = 0;\n", ""),
    Mutant("share-not-rounded", "hdr.w.a = (bit<32>)ST_LOG7(hdr.w.t) - (bit<32>)log7 + 8;",
           "hdr.w.a = (bit<32>)ST_LOG7(hdr.w.t) - (bit<32>)log7;"),
    Mutant("stamp-register-not-written", "                write_stamp();\n", ""),
    Mutant("stamp-register-without-share", "        hdr.w.s = hdr.w.t[223:0];\n", ""),
    Mutant("stamp-read-not-widened", "        hdr.w.t = (bit<256>)hdr.w.s;\n", ""),
    Mutant("share-ignores-flows", "hdr.w.a = (bit<32>)ST_LOG7(hdr.w.t) - (bit<32>)log7 + 8;",
           "hdr.w.a = (bit<32>)ST_LOG7(hdr.w.t) + 8;"),
    # -- stamps: one expression over `all` (UDP tail ++ BWN header), each part under its mask
    Mutant("stamp-on-acks", "(hdr.bwn.all & BWN_KIND_WORD) == BWN_DATA_WORD",
           "(hdr.bwn.all & (224w0xF0 << 184)) == BWN_DATA_WORD"),
    Mutant("stamp-any-version", "(hdr.bwn.all & BWN_KIND_WORD) == BWN_DATA_WORD",
           "(hdr.bwn.all & (224w0x0F << 184)) == (BWN_DATA_WORD & (224w0x0F << 184))"),
    Mutant("stamp-unconfigured-port", "        if (hdr.w.s & BWN_NARROW != 0) {\n            hdr.bwn.all =",
           "        if (true) {\n            hdr.bwn.all ="),
    Mutant("hop-not-saturating", "((hdr.bwn.all & BWN_HOP) < BWN_HOP ? hdr.bwn.all + BWN_HOP_ONE : hdr.bwn.all)",
           "(hdr.bwn.all + BWN_HOP_ONE)"),
    Mutant("hop-not-incremented", "? hdr.bwn.all + BWN_HOP_ONE : hdr.bwn.all)", "? hdr.bwn.all : hdr.bwn.all)"),
    Mutant("ebn-max-not-min", "? hdr.w.s & BWN_EBN : hdr.bwn.all & BWN_EBN)",
           "? hdr.bwn.all & BWN_EBN : hdr.w.s & BWN_EBN)"),
    Mutant("narrow-max-not-min", "? hdr.w.s & BWN_NARROW : hdr.bwn.all & BWN_NARROW)",
           "? hdr.bwn.all & BWN_NARROW : hdr.w.s & BWN_NARROW)"),
    Mutant("tight-unsigned-min",
           "(((hdr.w.s ^ BWN_TIGHT_SIGN) & BWN_TIGHT) < ((hdr.bwn.all ^ BWN_TIGHT_SIGN) & BWN_TIGHT)",
           "((hdr.w.s & BWN_TIGHT) < (hdr.bwn.all & BWN_TIGHT)"),
    Mutant("tight-not-stamped", "? hdr.w.s & BWN_TIGHT : hdr.bwn.all & BWN_TIGHT)",
           "? hdr.bwn.all & BWN_TIGHT : hdr.bwn.all & BWN_TIGHT)"),
    Mutant("udp-checksum-kept", " & BWN_KEPT\n", " & (BWN_KEPT | (224w0xFFFF << 192))\n"),
    Mutant("udp-length-zeroed", " & BWN_KEPT\n", " & (BWN_KEPT & ~(224w0xFFFF << 208))\n"),
    Mutant("echo-zeroed", " & BWN_KEPT\n", " & (BWN_KEPT & ~((224w1 << 96) - 1))\n"),
    # -- reservations and Assured Forwarding
    Mutant("reservations-never-looked-up", "                        if (hdr.w.b[31:31] == 1) {", "                        if (hdr.w.b[31:31] == 2) {"),
    Mutant("reservation-key-on-ttl", "hdr.ipv4.ttl_csum & PROTO_MASK : ternary", "hdr.ipv4.ttl_csum & 32w0xFF000000 : ternary"),
    Mutant("green-marked-out-of-profile", "        if (hdr.w.a == METER_GREEN) {\n            IP_DSCP(hdr.ipv4) = dscp;",
           "        if (hdr.w.a != METER_GREEN) {\n            IP_DSCP(hdr.ipv4) = dscp;"),
    Mutant("dscp-remark-on-the-wrong-bits", "#define IP_DSCP(h)     h.head[55:50]", "#define IP_DSCP(h)     h.head[54:49]"),
    Mutant("af-never-drops", "            drop_with(DROP_AF_OUT_OF_PROFILE);", ""),
    Mutant("af-drops-in-profile-too", "if (hdr.w.b[30:0] != 0 && IP_DSCP(hdr.ipv4) != DSCP_AF11) {\n                            assured",
           "if (hdr.w.b[30:0] != 0) {\n                            assured", every=True),
    Mutant("af-threshold-off-by-far", "if ((bit<32>)hdr.w.q >= (hdr.w.b & 0x7FFFFFFF)) {", "if ((bit<32>)hdr.w.q >= (hdr.w.b & 0x7FFFFFFF) + 50) {"),
    Mutant("queue-emptied-at-depth-1", "if (standard_metadata.deq_qdepth == 0) {", "if (standard_metadata.deq_qdepth <= 1) {"),
    Mutant("queue-emptied-never-counted", "queue_emptied.count(standard_metadata.egress_port);", ""),
    Mutant("queue-emptied-by-ingress-port", "queue_emptied.count(standard_metadata.egress_port);",
           "queue_emptied.count(standard_metadata.ingress_port);"),
]

# The PTF tests written for a mutant (or that killed it before), tried first, alone:
# a kill by one of them takes seconds where the whole suite takes minutes (queue_tests,
# which most of these are in, runs last). Not a verdict: when the tests named here
# pass, the whole suite runs. A hint set is only used if it passes on the unmutated
# program (checked once per run, beside the baseline).
_TTL = ["queue_tests.TtlTest"]
_MALFORMED = ["bwn_tests.MalformedPacketsTest", "fuzz_tests.FuzzCorpusTest"]
_AF = ["queue_tests.AssuredForwardingTest", "queue_tests.AfThresholdTest", "bwn_tests.ReservationMeterTest"]
_STAMP = ["bwn_tests.StampMinimumTest", "bwn_tests.UdpChecksumRuleTest", "bwn_tests.PathMinimumTwoSwitchesTest"]
HINTS: dict[str, list[str]] = {
    "ttl-checksum-carry-dropped": ["queue_tests.TtlChecksumCarryTest"],
    "ttl-checksum-carry-off-by-one": ["queue_tests.TtlChecksumCarryTest"],
    "ttl-1-forwarded": _TTL, "ttl-2-dropped": _TTL, "drop-reason-ttl-wrong": _TTL,
    "checksum-not-verified": _MALFORMED, "checksum-verified-without-addresses": _MALFORMED,
    "ihl-4-accepted": _MALFORMED, "options-not-parsed": _MALFORMED, "non-ipv4-accepted": _MALFORMED,
    "fragments-parsed": _MALFORMED, "udp-by-ttl": _MALFORMED, "drop-reason-bwn-wrong": _MALFORMED,
    "drop-not-counted": _MALFORMED, "malformed-not-dropped": _MALFORMED,
    "bwn-on-any-udp-port": ["bwn_tests.NonBwnTrafficUntouchedTest"],
    "stamp-on-acks": ["bwn_tests.NonBwnTrafficUntouchedTest"],
    "stamp-read-not-widened": ["bwn_tests.NewFlowKeepsThePortsStampTest"],
    "dscp-remark-checksum-not-updated": _AF,
    "loss-draw-clobbers-flow-slot": ["bwn_tests.RandomLossCountsFlowsOnceTest"],
    "ab-without-bi": ["queue_tests.QueueBiTermTest"], "queue-not-sampled": ["queue_tests.QueueBiTermTest"],
    "queue-key-not-set": ["queue_tests.QueueBiTermTest", "bwn_tests.AvailableBandwidthTest"],
    "ab-unsigned-shift": ["queue_tests.QueueBiTermTest"],
    "idle-gap-not-zeroed": ["queue_tests.IdleLinkTest"],
    "drop-opens-the-rare-path": ["bwn_tests.DroppedPacketsLeaveNoFlowTest"],
    "drop-leaves-slot-seen": ["bwn_tests.DroppedPacketsLeaveNoFlowTest"],
    "loss-drop-keeps-options": ["queue_tests.LossAndAfCountEachDropOnceTest"],
    "window-flag-left-from-another-packet": ["bwn_tests.TelemetryOncePerWindowTest"],
    "flows-last-ignored": ["bwn_tests.EbnShareHalvesTest"],
    "hop-not-saturating": ["queue_tests.HopCountSaturatesTest"],
    "udp-checksum-kept": _STAMP, "udp-length-zeroed": _STAMP, "echo-zeroed": _STAMP,
    "reservations-never-looked-up": _AF, "reservation-key-on-ttl": _AF,
    "green-marked-out-of-profile": _AF, "dscp-remark-on-the-wrong-bits": _AF,
    "af-never-drops": _AF, "af-drops-in-profile-too": _AF, "af-threshold-off-by-far": _AF,
    "queue-emptied-at-depth-1": ["queue_tests.QueueEmptiedCounterTest"],
    "queue-emptied-never-counted": ["queue_tests.QueueEmptiedCounterTest"],
    "queue-emptied-by-ingress-port": ["queue_tests.QueueEmptiedCounterTest"],
}

# Mutants that cannot change what the switch does, with the reason.
EQUIVALENT: dict[str, str] = {
    "ihl-4-accepted": "an IHL of 4 sent to parse_addrs still ends in a parser error: the options "
                      "length (IHL - 5) * 32 underflows, the varbit extract fails, and the packet "
                      "is dropped as ipv4_malformed, exactly as before",
}


def apply(mutant: Mutant, src: str) -> str | None:
    n = src.count(mutant.find)
    if n == 0 or (n > 1 and not mutant.every):
        return None
    return src.replace(mutant.find, mutant.replace)


def fingerprint() -> dict[str, str]:
    """What a result depends on: the program and the PTF suite, by SHA-256."""
    tests = hashlib.sha256()
    for f in sorted((REPO / "ptf-tests").glob("*.py")):
        tests.update(f.name.encode() + b"\0" + f.read_bytes())
    return {"program_sha256": hashlib.sha256((REPO / "p4src" / PROGRAM).read_bytes()).hexdigest(),
            "tests_sha256": tests.hexdigest()}


def reusable(previous: list[dict], names: set[str], now: dict[str, str]) -> dict[str, dict]:
    """The earlier results --resume keeps: a mutant still in the list, a verdict
    (not stale), and made against today's program and suite."""
    return {r["name"]: r for r in previous
            if r.get("name") in names and r.get("result") in ("killed", "survived", "timeout", "invalid")
            and all(r.get(k) == v for k, v in now.items())}


def _ptf(build: Path, timeout_s: float, failfast: bool, tests: list[str]) -> tuple[int, list[str]]:
    """Run the PTF suite (or `tests`) on a compiled program: (exit status, failed tests)."""
    res = subprocess.run([sys.executable, str(REPO / "ptf-tests" / "run_ptf.py"), "--build-dir", str(build),
                          *(["--failfast"] if failfast else []), *(["--test-spec", *tests] if tests else [])],
                         capture_output=True, text=True, timeout=timeout_s)
    failed = [line.split(":", 1)[1].strip() for line in (res.stdout + res.stderr).splitlines()
              if line.startswith(("FAIL:", "ERROR:"))]
    return res.returncode, failed


def run_mutant(mutant: Mutant | None, timeout_s: float, keep: bool, failfast: bool = True,
               hints: list[str] | None = None, hints_only: bool = False) -> dict:
    """Compile bwn.p4 with `mutant` applied (None: the program as it is, the
    baseline) and run the PTF suite on it; with `hints`, those tests alone first
    (a failure there is the kill; otherwise the whole suite decides)."""
    original = (REPO / "p4src" / PROGRAM).read_text()
    name = mutant.name if mutant else "baseline"
    mutated = apply(mutant, original) if mutant else original
    if mutated is None:
        return {"name": name, "result": "stale",
                "detail": f"text found {original.count(mutant.find)} times"}
    work = Path(tempfile.mkdtemp(prefix=f"bwn-mutant-{name}-"))
    t0 = time.monotonic()
    try:
        shutil.copytree(REPO / "p4src", work / "p4src")
        (work / "p4src" / PROGRAM).write_text(mutated)
        build = work / "build"
        build.mkdir()
        comp = subprocess.run(["p4c", "--target", "bmv2", "--arch", "v1model", "--std", "p4-16",
                               "--p4runtime-files", str(build / "bwn.p4info.txtpb"), "-o", str(build),
                               str(work / "p4src" / PROGRAM)], capture_output=True, text=True, timeout=600)
        if comp.returncode != 0:
            return {"name": name, "result": "invalid", "detail": comp.stderr.strip()[-400:],
                    "seconds": round(time.monotonic() - t0)}
        try:
            if hints:
                rc, failed = _ptf(build, timeout_s, True, hints)
                if rc not in (0, EXIT_SKIPPED) or hints_only:
                    return {"name": name, "result": "survived" if rc == 0 else "killed", "killed_by": failed[:5],
                            "by_hint": True, "seconds": round(time.monotonic() - t0)}
            rc, failed = _ptf(build, timeout_s, failfast, [])
        except subprocess.TimeoutExpired:
            return {"name": name, "result": "timeout", "seconds": round(time.monotonic() - t0)}
        return {"name": name, "result": "survived" if rc == 0 else "killed",
                "killed_by": failed[:5], "seconds": round(time.monotonic() - t0)}
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", default=[], help="run only these mutants (names)")
    ap.add_argument("--list", action="store_true", help="list the mutants and whether each still applies")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per PTF run")
    ap.add_argument("--out", type=Path, default=REPO / "build" / "p4-mutants.json")
    ap.add_argument("--keep", action="store_true", help="keep each mutant's folder (debugging)")
    ap.add_argument("--resume", action="store_true",
                    help="keep the results in --out made against today's program and tests; run the rest")
    ap.add_argument("--no-baseline", action="store_true",
                    help="skip the check that the suite passes on the unmutated program")
    ap.add_argument("--all-failures", action="store_true",
                    help="run the whole suite for each mutant (default: stop at its first failure)")
    args = ap.parse_args(argv)
    if args.timeout <= 0:
        ap.error("--timeout must be positive (seconds per PTF run)")
    src = (REPO / "p4src" / PROGRAM).read_text()
    names = {m.name for m in MUTANTS}
    unknown = [n for n in args.only if n not in names]
    if unknown:
        ap.error(f"unknown mutant(s): {', '.join(unknown)} (--list shows them)")
    if args.list:
        for m in MUTANTS:
            print(f"{m.name:36s} {'ok' if apply(m, src) is not None else 'STALE'}")
        return 0
    chosen = [m for m in MUTANTS if not args.only or m.name in args.only]
    now = fingerprint()
    kept: dict[str, dict] = {}
    if args.resume and args.out.exists():
        try:
            kept = reusable(json.loads(args.out.read_text()), {m.name for m in chosen}, now)
        except (json.JSONDecodeError, TypeError, AttributeError) as e:
            ap.error(f"--resume: {args.out} is not a results file of this script ({e}); move it or drop --resume")
        print(f"resuming: {len(kept)} of {len(chosen)} results kept from {args.out}", flush=True)
    results = []
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if not args.no_baseline and len(kept) < len(chosen):
        base = run_mutant(None, args.timeout, args.keep, failfast=not args.all_failures)
        print(f"[baseline] unmutated program: {base['result']} in {base.get('seconds', 0)} s", flush=True)
        if base["result"] != "survived":
            print(f"the PTF suite does not pass on the unmutated program ({base['result']}: "
                  f"{', '.join(base.get('killed_by', [])) or base.get('detail', '')}); "
                  "every mutant would count as killed. Fix that first (ptf-tests/run_ptf.py).", file=sys.stderr)
            return 1
    usable = set()
    if not args.no_baseline:
        wanted = {tuple(HINTS[m.name]) for m in chosen if m.name in HINTS and m.name not in kept}
        for hint in sorted(wanted):
            base = run_mutant(None, args.timeout, args.keep, hints=list(hint), hints_only=True)
            ok = base["result"] == "survived"
            print(f"[baseline] {' '.join(hint)}: {'passes' if ok else 'FAILS alone: not used as a hint'}", flush=True)
            if ok:
                usable.add(hint)
    for i, m in enumerate(chosen, 1):
        hint = list(HINTS.get(m.name, [])) if tuple(HINTS.get(m.name, [])) in usable else None
        r = kept.get(m.name) or {**run_mutant(m, args.timeout, args.keep, failfast=not args.all_failures,
                                              hints=hint), **now}
        if m.name in EQUIVALENT:
            r["equivalent"] = EQUIVALENT[m.name]
        results.append(r)
        print(f"[{i}/{len(chosen)}] {m.name:36s} {r['result']:9s} {r.get('seconds', 0):4d} s "
              f"{', '.join(r.get('killed_by', []))[:80]}", flush=True)
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    counted = [r for r in results if r["result"] in ("killed", "survived", "timeout") and "equivalent" not in r]
    killed = sum(r["result"] in ("killed", "timeout") for r in counted)
    stale = [r["name"] for r in results if r["result"] == "stale"]
    print(f"\nkilled {killed} / {len(counted)} = {killed / max(1, len(counted)):.1%} "
          f"(survived {sum(r['result'] == 'survived' for r in counted)}, "
          f"invalid {sum(r['result'] == 'invalid' for r in results)}, "
          f"equivalent {sum('equivalent' in r for r in results)}, stale {len(stale)})")
    for r in results:
        if r["result"] == "survived":
            print(f"  SURVIVED {r['name']}" + (f" (equivalent: {r['equivalent']})" if "equivalent" in r else ""))
    if stale:
        print(f"  STALE (update the list): {', '.join(stale)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
