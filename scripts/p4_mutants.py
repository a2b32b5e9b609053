#!/usr/bin/env python3
"""Mutation testing of the switch program: does the PTF suite catch each fault?

    sudo .venv/bin/python scripts/p4_mutants.py [--only NAME ...] [--list] [--resume]
        [--no-baseline] [--all-failures] [--out build/p4-mutants.json]

Each mutant is one small change to one file of the BMv2 program
(`p4src/v1model/bwn.p4` and the files it includes: a relational operator, a
dropped statement, a swapped constant, each stamp and each drop), written here
as (name, file, exact text, replacement). For each: copy p4src/ to a temporary
folder, apply it, compile with p4c, run the PTF suite on the result
(`ptf-tests/run_ptf.py --build-dir`). The mutant is

  killed     the suite failed,
  survived   the suite passed (a fault the tests do not see),
  timeout    the suite ran past --timeout,
  invalid    the mutant does not compile (not counted),
  stale      its text is no longer in its file (the list needs updating; an error).

The score is killed / (killed + survived + timeout), equivalent mutants
(listed in EQUIVALENT, each with its reason) excluded. docs/testing.md records
the scores and the survivors. Not run by CI: each mutant takes minutes.

First the unmutated program is compiled and run against the same suite (the
baseline): if it fails, every mutant would count as killed, so the run stops.
The suite stops at its first failure (PTF's --failfast): one is a kill, and a
killed mutant then costs seconds instead of the whole suite; --all-failures
runs every test and lists up to five that failed.

Each result records the SHA-256 of the program's files (p4src/v1model and
p4src/shared) and of ptf-tests/*.py it was run against. --resume keeps the
results in --out whose hashes are today's and runs the rest, so an interrupted
run goes on where it stopped and a run made before the program or the tests
changed is made again.
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
PROGRAM = Path("v1model") / "bwn.p4"                 # what p4c compiles, under p4src/
PROGRAM_DIRS = (Path("v1model"), Path("shared"))     # every file it includes, under p4src/
EXIT_SKIPPED = 77   # run_ptf.py: a tool is missing


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str               # under p4src/v1model/ (the files the program is made of)
    find: str
    replace: str
    every: bool = False     # the text occurs more than once: change every occurrence

    @property
    def path(self) -> Path:
        """The mutated file, relative to p4src/."""
        return Path("v1model") / self.file


# Files of the program, under p4src/v1model/.
_TOP = "bwn.p4"
_PARSER = "include/parser.p4"
_CHECKSUM = "include/checksum.p4"
_MALFORMED = "include/control/malformed.p4"
_ROUTING = "include/control/routing.p4"
_LOSS = "include/control/random_loss.p4"
_RESERVATIONS = "include/control/reservations.p4"
_WINDOW = "include/control/window.p4"
_FLOWS = "include/control/flows.p4"
_TELEMETRY = "include/control/telemetry.p4"
_QUEUE = "include/control/queue.p4"
_STAMP = "include/control/stamp.p4"
_RED = "include/control/red_ecn.p4"
_GUARANTEED = "include/control/guaranteed.p4"
_COUNTERS = "include/control/port_counters.p4"

_TTL_LINE = "        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;\n"
_TTL_CSUM = ("        hdr.ipv4.hdr_checksum = hdr.ipv4.hdr_checksum\n"
             "                                + (hdr.ipv4.hdr_checksum < 16w0xFEFF ? 16w0x0100 : 16w0x0101);\n")
_AB = "SIGNED_BYTES_PER_WINDOW_TO_KBPS(cap_bytes - meta.window.br_bytes - meta.window.bi_bytes, K)"
_UDP_ZERO = "        hdr.udp.checksum = 0;\n"

MUTANTS: list[Mutant] = [
    # -- forwarding, TTL, checksums
    Mutant("ttl-not-decremented", _ROUTING, _TTL_LINE, ""),
    Mutant("protocol-decremented", _ROUTING, _TTL_LINE, _TTL_LINE + "        hdr.ipv4.protocol = hdr.ipv4.protocol - 1;\n"),
    Mutant("ttl-checksum-not-updated", _ROUTING, _TTL_CSUM, ""),
    Mutant("ttl-checksum-carry-dropped", _ROUTING, "(hdr.ipv4.hdr_checksum < 16w0xFEFF ?", "(hdr.ipv4.hdr_checksum <= 16w0xFFFF ?"),
    Mutant("ttl-checksum-carry-off-by-one", _ROUTING, "(hdr.ipv4.hdr_checksum < 16w0xFEFF ?", "(hdr.ipv4.hdr_checksum <= 16w0xFEFF ?"),
    Mutant("ttl-1-forwarded", _PARSER, "(_, 0 .. 1, _, _, _): ttl_expired;", "(_, 0 .. 0, _, _, _): ttl_expired;"),
    Mutant("ttl-2-dropped", _PARSER, "(_, 0 .. 1, _, _, _): ttl_expired;", "(_, 0 .. 2, _, _, _): ttl_expired;"),
    Mutant("macs-not-rewritten", _ROUTING,
           "        hdr.ethernet.dst_addr = macs[95:48];\n        hdr.ethernet.src_addr = macs[47:0];\n", ""),
    Mutant("egress-port-not-set", _ROUTING, "        standard_metadata.egress_spec = port;\n", ""),
    Mutant("checksum-not-verified", _TOP,
           "standard_metadata.parser_error != error.NoError || standard_metadata.checksum_error == 1",
           "standard_metadata.parser_error != error.NoError"),
    Mutant("checksum-verified-without-addresses", _CHECKSUM,
           "              hdr.ipv4.src_addr,\n              hdr.ipv4.dst_addr },\n",
           "              hdr.ipv4.src_addr },\n"),
    Mutant("dscp-remark-checksum-not-updated", _RESERVATIONS,
           "        hdr.ipv4.hdr_checksum = ~meta.reservation.csum_sum[15:0];\n", ""),
    # -- parser and drops
    Mutant("ihl-4-accepted", _PARSER, "(0 .. 4, _, _, _, _): ipv4_too_short;", "(0 .. 3, _, _, _, _): ipv4_too_short;"),
    Mutant("options-not-parsed", _PARSER, "packet.extract(hdr.ipv4_options, ((bit<32>)hdr.ipv4.ihl - 5) * 32);",
           "packet.extract(hdr.ipv4_options, 0);"),
    Mutant("non-ipv4-accepted", _PARSER, "        verify(false, error.NotIPv4);\n", ""),
    Mutant("bwn-on-any-udp-port", _PARSER, "            BWN_UDP_PORT: parse_bwn;\n            default: accept;",
           "            default: parse_bwn;"),
    Mutant("fragments-parsed", _PARSER, "(5, _, 0, 0, IP_PROTO_UDP): parse_udp;", "(5, _, _, _, IP_PROTO_UDP): parse_udp;"),
    Mutant("udp-by-ttl", _PARSER, "(5, _, 0, 0, IP_PROTO_UDP): parse_udp;", "(5, IP_PROTO_UDP, 0, 0, _): parse_udp;"),
    Mutant("drop-reason-ttl-wrong", _MALFORMED, "drop_malformed(DROP_TTL);", "drop_malformed(DROP_IPV4_MALFORMED);"),
    Mutant("drop-reason-bwn-wrong", _MALFORMED, "drop_malformed(DROP_BWN_MALFORMED);", "drop_malformed(DROP_IPV4_MALFORMED);"),
    Mutant("drop-not-counted", _TOP, "        drop_counter.count(meta.drop_reason);\n", ""),
    Mutant("malformed-not-dropped", _TOP, "        mark_to_drop(standard_metadata);\n", ""),
    # -- loss
    Mutant("loss-compare-inverted", _LOSS, "if (meta.loss_draw < meta.route.loss_threshold) {",
           "if (meta.loss_draw >= meta.route.loss_threshold) {"),
    Mutant("loss-never-drawn", _LOSS, "if (meta.route.loss_threshold != 0) {", "if (meta.route.loss_threshold == 0) {"),
    Mutant("loss-draw-clobbers-flow-slot", _LOSS,
           "random(meta.loss_draw, 32w0, 32w0xFFFFFFFF);\n        if (meta.loss_draw < meta.route.loss_threshold) {",
           "random(meta.route.slot_base, 32w0, 32w0xFFFFFFFF);\n"
           "        if (meta.route.slot_base < meta.route.loss_threshold) {"),
    # -- OBP: BR, BI, AB, windows
    Mutant("br-not-counted", _WINDOW,
           "        meta.window.rx_bytes = meta.window.rx_bytes + meta.window.charge_bytes;\n", ""),
    Mutant("br-counts-this-packet-twice", _WINDOW,
           "meta.window.rx_before = meta.window.rx_bytes - meta.window.charge_bytes;",
           "meta.window.rx_before = meta.window.rx_bytes;"),
    Mutant("slot-counts-the-packets-length", _WINDOW,
           "        meta.window.charge_bytes = slot_bytes;",
           "        meta.window.charge_bytes = (bit<32>)standard_metadata.packet_length;"),
    Mutant("ab-without-bi", _WINDOW, _AB, _AB.replace(" - meta.window.bi_bytes", "")),
    Mutant("ab-without-br", _WINDOW, _AB, _AB.replace(" - meta.window.br_bytes", "")),
    Mutant("idle-gap-not-zeroed", _WINDOW,
           "            meta.window.br_bytes = 0;          /* whole windows without a packet: the latest was idle */\n", ""),
    Mutant("window-never-closes", _WINDOW,
           "if (!meta.drop && standard_metadata.ingress_global_timestamp >= meta.window.end_us) {",
           "if (!meta.drop && standard_metadata.ingress_global_timestamp < 0) {"),
    Mutant("drop-opens-the-rare-path", _WINDOW,
           "if (!meta.drop && standard_metadata.ingress_global_timestamp >= meta.window.end_us) {",
           "if (standard_metadata.ingress_global_timestamp >= meta.window.end_us) {"),
    Mutant("drop-leaves-slot-seen", _TOP,
           "                if (!meta.drop) {\n                    flows.apply(",
           "                {\n                    flows.apply("),
    Mutant("loss-drop-keeps-options", _TOP,
           "                    if (!meta.drop) {\n                        reservations.apply(",
           "                    {\n                        reservations.apply("),
    Mutant("queue-key-not-set", _WINDOW, 'key = { meta.window.queue_pkts : exact @name("queue"); }',
           'key = { meta.window.bi_bytes[18:0] : exact @name("queue"); }'),
    Mutant("window-flag-left-from-another-packet", _TELEMETRY,
           "if (meta.window.closed && meta.stamp.narrow_kbps != 0) {",
           "if (meta.flows.is_new || meta.window.closed && meta.stamp.narrow_kbps != 0) {"),
    Mutant("window-end-not-stored", _WINDOW,
           "        window_end.write(standard_metadata.egress_spec, meta.window.end_us);\n", ""),
    Mutant("queue-not-sampled", _STAMP,
           "        queue_depth.write(standard_metadata.egress_port, standard_metadata.deq_qdepth);\n", ""),
    Mutant("ab-unsigned-shift", _WINDOW, _AB, _AB.replace("SIGNED_BYTES_PER_WINDOW_TO_KBPS", "BYTES_PER_WINDOW_TO_KBPS")),
    # -- EBN: flows and share
    Mutant("flow-not-counted", _FLOWS, "        meta.flows.current = meta.flows.current + 1;\n", ""),
    Mutant("flow-slot-not-marked", _FLOWS, "        flow_slot.write(meta.flows.slot_index, meta.flows.epoch);\n", ""),
    Mutant("flows-last-ignored", _FLOWS, "        if (meta.flows.last > meta.flows.n) {",
           "        if (meta.flows.current == 0) {"),
    Mutant("flow-window-not-rolled", _FLOWS, "            meta.flows.current = 0;\n", ""),
    Mutant("share-not-rounded", _FLOWS, "(meta.flows.share_log7 + 8) >> LOG7_TO_EBN_SHIFT",
           "meta.flows.share_log7 >> LOG7_TO_EBN_SHIFT"),
    Mutant("stamp-register-not-written", _FLOWS, "            write_share();\n", ""),
    Mutant("stamp-register-without-share", _FLOWS, "        meta.stamp.ebn_code = meta.flows.share_log7[7:0];\n", ""),
    Mutant("stamp-read-not-widened", _FLOWS,
           "        capacity_log7.read(meta.window.cap_log7, standard_metadata.egress_spec);\n", ""),
    Mutant("share-ignores-flows", _FLOWS, "(bit<32>)meta.window.cap_log7 - (bit<32>)log7;", "(bit<32>)meta.window.cap_log7;"),
    # -- stamps
    Mutant("stamp-on-acks", _STAMP, " && hdr.bwn.kind == BWN_KIND_DATA", ""),
    Mutant("stamp-any-version", _STAMP, " && hdr.bwn.version == BWN_VERSION", ""),
    Mutant("stamp-unconfigured-port", _STAMP, "            if (meta.stamp.narrow_kbps != 0) {\n                stamp_packet();",
           "            if (true) {\n                stamp_packet();"),
    Mutant("hop-not-saturating", _STAMP, "hdr.bwn.hop_count = hdr.bwn.hop_count |+| 1;",
           "hdr.bwn.hop_count = hdr.bwn.hop_count + 1;"),
    Mutant("hop-not-incremented", _STAMP, "        hdr.bwn.hop_count = hdr.bwn.hop_count |+| 1;\n", ""),
    Mutant("ebn-max-not-min", _STAMP, "if (meta.stamp.ebn_code < hdr.bwn.ebn_code) {",
           "if (meta.stamp.ebn_code > hdr.bwn.ebn_code) {"),
    Mutant("narrow-max-not-min", _STAMP, "if (meta.stamp.narrow_kbps < hdr.bwn.narrow_kbps) {",
           "if (meta.stamp.narrow_kbps > hdr.bwn.narrow_kbps) {"),
    Mutant("tight-unsigned-min", _STAMP, "if ((int<32>)meta.stamp.tight_kbps < (int<32>)hdr.bwn.tight_kbps) {",
           "if (meta.stamp.tight_kbps < hdr.bwn.tight_kbps) {"),
    Mutant("tight-not-stamped", _STAMP, "            hdr.bwn.tight_kbps = meta.stamp.tight_kbps;\n", ""),
    Mutant("udp-checksum-kept", _STAMP, _UDP_ZERO, ""),
    Mutant("udp-length-zeroed", _STAMP, _UDP_ZERO, _UDP_ZERO + "        hdr.udp.length = 0;\n"),
    Mutant("echo-zeroed", _STAMP, _UDP_ZERO,
           _UDP_ZERO + "        hdr.bwn.echo_narrow_kbps = 0;\n        hdr.bwn.echo_tight_kbps = 0;\n"
           "        hdr.bwn.echo_hop_count = 0;\n        hdr.bwn.flags = 0;\n        hdr.bwn.reserved = 0;\n"),
    # -- reservations and Assured Forwarding
    Mutant("reservations-never-looked-up", _RESERVATIONS, "            reservations.apply();\n", ""),
    Mutant("reservation-key-on-ttl", _RESERVATIONS, 'hdr.ipv4.protocol     : ternary @name("protocol");',
           'hdr.ipv4.ttl          : ternary @name("protocol");'),
    Mutant("green-marked-out-of-profile", _RESERVATIONS, "if (meta.reservation.color == METER_GREEN) {",
           "if (meta.reservation.color != METER_GREEN) {"),
    Mutant("dscp-remark-on-the-wrong-bits", _RESERVATIONS,
           "        hdr.ipv4.dscp = DSCP_AF13;\n        if (meta.reservation.color == METER_GREEN) {\n"
           "            hdr.ipv4.dscp = dscp;\n",
           "        hdr.ipv4.dscp = DSCP_AF13 >> 1;\n        if (meta.reservation.color == METER_GREEN) {\n"
           "            hdr.ipv4.dscp = dscp >> 1;\n"),
    Mutant("af-never-drops", _RESERVATIONS,
           "            meta.drop = true;\n            meta.drop_reason = DROP_AF_OUT_OF_PROFILE;\n", ""),
    Mutant("af-drops-in-profile-too", _RESERVATIONS,
           "if (meta.route.af_threshold_pkts != 0 && hdr.ipv4.dscp != DSCP_AF11) {",
           "if (meta.route.af_threshold_pkts != 0) {"),
    Mutant("af-threshold-off-by-far", _RESERVATIONS,
           "if ((bit<31>)meta.window.queue_pkts >= meta.route.af_threshold_pkts) {",
           "if ((bit<31>)meta.window.queue_pkts >= meta.route.af_threshold_pkts + 50) {"),
    Mutant("queue-emptied-at-depth-1", _QUEUE, "if (standard_metadata.deq_qdepth == 0) {",
           "if (standard_metadata.deq_qdepth <= 1) {"),
    Mutant("queue-emptied-never-counted", _QUEUE, "            queue_emptied.count(standard_metadata.egress_port);\n", ""),
    Mutant("queue-emptied-by-ingress-port", _QUEUE, "queue_emptied.count(standard_metadata.egress_port);",
           "queue_emptied.count(standard_metadata.ingress_port);"),
    # -- RED with ECN marking
    Mutant("red-never-applied", _TOP, "                    if (meta.route.red == 1) {\n                        red_ecn.apply(",
           "                    if (meta.route.red == 2) {\n                        red_ecn.apply("),
    Mutant("red-departures-not-noted", _TOP, "        if (meta.route.red == 1) {\n            red_departure.apply(",
           "        if (meta.route.red == 2) {\n            red_departure.apply("),
    Mutant("red-on-every-port", _ROUTING, "        meta.route.red = options[29:29];\n", "        meta.route.red = 1;\n"),
    Mutant("red-weight-halved", _RED, "((meta.red.sample - meta.red.avg) >> K)", "((meta.red.sample - meta.red.avg) >> (K + 1))"),
    Mutant("red-weight-doubled", _RED, "((meta.red.sample - meta.red.avg) >> K)",
           "((meta.red.sample - meta.red.avg) >> (K == 0 ? 0 : K - 1))"),
    Mutant("red-average-not-stored", _RED, "            store_average();\n", ""),
    Mutant("red-sample-without-arrivals", _RED,
           "        meta.red.queue_pkts = meta.red.queue_pkts |+| meta.red.arrivals;\n", ""),
    Mutant("red-arrivals-not-counted", _RED, "            count_arrival();\n", ""),
    Mutant("red-arrivals-not-cleared", _RED, "        red_arrivals.write(standard_metadata.egress_port, 0);\n", ""),
    Mutant("red-departure-queue-not-written", _RED,
           "        red_queue.write(standard_metadata.egress_port, standard_metadata.deq_qdepth);\n", ""),
    Mutant("red-drop-enters-the-queue", _TOP,
           "        if (meta.red.dropped) {\n            mark_to_drop(standard_metadata);",
           "        if (false) {\n            mark_to_drop(standard_metadata);"),
    Mutant("red-level-halved", _RED, "meta.red.level = meta.red.avg >> RED_LEVEL_SHIFT;",
           "meta.red.level = meta.red.avg >> (RED_LEVEL_SHIFT + 1);"),
    Mutant("red-top-threshold-late", _RED, "} else if (meta.red.level >= meta.red.top_level) {",
           "} else if (meta.red.level >= meta.red.top_level + 8) {"),
    Mutant("red-never-forced", _RED, "} else if (meta.red.level >= meta.red.top_level) {", "} else if (false) {"),
    Mutant("red-forced-marks-ect", _RED, "        meta.red.decision = RED_FORCED;\n", "        meta.red.decision = RED_SIGNAL;\n"),
    Mutant("red-count-not-reset-by-a-mark", _RED,
           "        meta.red.decision = RED_SIGNAL;\n        meta.red.since_mark = 0;\n",
           "        meta.red.decision = RED_SIGNAL;\n"),
    Mutant("red-drops-ect", _RED, "if (meta.red.decision == RED_SIGNAL && hdr.ipv4.ecn != ECN_NOT_ECT) {",
           "if (meta.red.decision == RED_SIGNAL && hdr.ipv4.ecn == ECN_CE) {"),
    Mutant("red-marks-not-ect", _RED, "if (meta.red.decision == RED_SIGNAL && hdr.ipv4.ecn != ECN_NOT_ECT) {",
           "if (meta.red.decision == RED_SIGNAL) {"),
    Mutant("red-ce-not-set", _RED, "        hdr.ipv4.ecn = ECN_CE;\n", ""),
    Mutant("red-mark-checksum-not-updated", _RED, "        hdr.ipv4.hdr_checksum = ~meta.red.csum_sum[15:0];\n", ""),
    Mutant("red-marks-not-counted", _RED, "        red_marked.count(standard_metadata.egress_spec);\n", ""),
    Mutant("red-idle-decay-ignored", _RED, "            red_idle.apply();\n", ""),
    Mutant("red-idle-start-not-noted", _RED, "            note_idle();\n", ""),
    # -- the guaranteed service
    Mutant("guaranteed-priority-never-set", _GUARANTEED,
           "        standard_metadata.priority = PRIORITY_GUARANTEED;\n", ""),
    Mutant("guaranteed-for-every-colour", _GUARANTEED,
           "if (meta.route.guaranteed == 1 && hdr.ipv4.dscp == DSCP_AF11) {", "if (meta.route.guaranteed == 1) {"),
    Mutant("guaranteed-at-every-port", _GUARANTEED,
           "if (meta.route.guaranteed == 1 && hdr.ipv4.dscp == DSCP_AF11) {", "if (hdr.ipv4.dscp == DSCP_AF11) {"),
    Mutant("guaranteed-option-from-the-edge-bit", _ROUTING, "meta.route.guaranteed = options[30:30];",
           "meta.route.guaranteed = options[31:31];"),
    # -- per-port counts
    Mutant("port-enqueued-counts-drops", _COUNTERS, "        if (!meta.drop && !meta.red.dropped) {\n            count_enqueued();",
           "        if (!meta.red.dropped) {\n            count_enqueued();"),
    Mutant("port-enqueued-counts-red-drops", _COUNTERS,
           "        if (!meta.drop && !meta.red.dropped) {\n            count_enqueued();",
           "        if (!meta.drop) {\n            count_enqueued();"),
    Mutant("port-dequeued-never-counted", _QUEUE, "        port_dequeued.count(standard_metadata.egress_port);\n", ""),
    Mutant("port-drops-without-reason", _COUNTERS,
           "(bit<32>)standard_metadata.egress_spec * DROP_REASONS + (bit<32>)meta.drop_reason",
           "(bit<32>)standard_metadata.egress_spec * DROP_REASONS"),
    Mutant("port-drops-after-the-drop", _TOP,
           "        port_counters.apply(meta, standard_metadata);   /* before a drop clears egress_spec */\n"
           "        if (meta.drop) {\n            count_and_drop();\n        }\n",
           "        if (meta.drop) {\n            count_and_drop();\n        }\n"
           "        port_counters.apply(meta, standard_metadata);\n"),
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
_RED_TESTS = ["red_tests.RedMarksEctAndDropsTheRestTest", "red_tests.RedAverageAndForcedDropTest",
        "red_tests.RedIdleDecayTest", "red_tests.RedShortIdleKeepsTheAverageTest", "red_tests.RedOnlyAtItsPortTest",
        "red_tests.RedDropTakesNoDepartureSlotTest"]
HINTS: dict[str, list[str]] = {
    "ttl-checksum-carry-dropped": ["queue_tests.TtlChecksumCarryTest"],
    "ttl-checksum-carry-off-by-one": ["queue_tests.TtlChecksumCarryTest"],
    "ttl-1-forwarded": _TTL, "ttl-2-dropped": _TTL, "drop-reason-ttl-wrong": _TTL,
    "checksum-not-verified": _MALFORMED, "checksum-verified-without-addresses": _MALFORMED,
    "ihl-4-accepted": ["bwn_tests.MalformedReasonOrderTest"], "options-not-parsed": _MALFORMED, "non-ipv4-accepted": _MALFORMED,
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
    "drop-opens-the-rare-path": ["bwn_tests.LossyPortReportsEveryWindowTest"],
    "drop-leaves-slot-seen": ["bwn_tests.DroppedPacketsLeaveNoFlowTest", "queue_tests.AfDroppedFlowIsNotCountedTest"],
    "loss-drop-keeps-options": ["queue_tests.LossAndAfCountEachDropOnceTest",
                                "queue_tests.LossOnAnAfPortIsCountedAsLossTest"],
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
    **{name: _RED_TESTS for name in (
        "red-never-applied", "red-on-every-port", "red-weight-halved", "red-weight-doubled", "red-average-not-stored",
        "red-departures-not-noted", "red-sample-without-arrivals", "red-arrivals-not-counted",
        "red-arrivals-not-cleared", "red-departure-queue-not-written", "red-drop-enters-the-queue",
        "port-enqueued-counts-red-drops", "red-level-halved", "red-top-threshold-late", "red-never-forced",
        "red-forced-marks-ect", "red-count-not-reset-by-a-mark", "red-drops-ect", "red-marks-not-ect",
        "red-ce-not-set", "red-mark-checksum-not-updated", "red-marks-not-counted", "red-idle-decay-ignored",
        "red-idle-start-not-noted")},
    **{name: ["service_tests.GuaranteedServiceTest"] for name in (
        "guaranteed-priority-never-set", "guaranteed-for-every-colour")},
    "guaranteed-at-every-port": _AF, "guaranteed-option-from-the-edge-bit": _AF,
    **{name: ["service_tests.PortDropCountersTest"] for name in (
        "port-enqueued-counts-drops", "port-dequeued-never-counted", "port-drops-without-reason",
        "port-drops-after-the-drop")},
}

# Mutants that cannot change what the switch does, with the reason.
EQUIVALENT: dict[str, str] = {}


def apply(mutant: Mutant, src: str) -> str | None:
    n = src.count(mutant.find)
    if n == 0 or (n > 1 and not mutant.every):
        return None
    return src.replace(mutant.find, mutant.replace)


def program_files() -> list[Path]:
    """Every file of the BMv2 program, relative to p4src/, sorted."""
    root = REPO / "p4src"
    return sorted(f.relative_to(root) for d in PROGRAM_DIRS for f in (root / d).rglob("*.p4"))


def fingerprint() -> dict[str, str]:
    """What a result depends on: the program's files and the PTF suite, by SHA-256."""
    program, tests = hashlib.sha256(), hashlib.sha256()
    for f in program_files():
        program.update(str(f).encode() + b"\0" + (REPO / "p4src" / f).read_bytes())
    for f in sorted((REPO / "ptf-tests").glob("*.py")):
        tests.update(f.name.encode() + b"\0" + f.read_bytes())
    return {"program_sha256": program.hexdigest(), "tests_sha256": tests.hexdigest()}


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
    name = mutant.name if mutant else "baseline"
    if mutant:
        original = (REPO / "p4src" / mutant.path).read_text()
        mutated = apply(mutant, original)
        if mutated is None:
            return {"name": name, "result": "stale",
                    "detail": f"text found {original.count(mutant.find)} times in {mutant.path}"}
    work = Path(tempfile.mkdtemp(prefix=f"bwn-mutant-{name}-"))
    t0 = time.monotonic()
    try:
        shutil.copytree(REPO / "p4src", work / "p4src")
        if mutant:
            (work / "p4src" / mutant.path).write_text(mutated)
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
    names = {m.name for m in MUTANTS}
    unknown = [n for n in args.only if n not in names]
    if unknown:
        ap.error(f"unknown mutant(s): {', '.join(unknown)} (--list shows them)")
    if args.list:
        for m in MUTANTS:
            src = (REPO / "p4src" / m.path).read_text() if (REPO / "p4src" / m.path).exists() else ""
            print(f"{m.name:36s} {str(m.path):44s} {'ok' if apply(m, src) is not None else 'STALE'}")
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
