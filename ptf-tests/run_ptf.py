#!/usr/bin/env python3
"""Run the PTF suite against two real simple_switch_grpc processes.

    .venv/bin/python ptf-tests/run_ptf.py [--test-spec NAME ...] [--keep-logs]

Everything lives in one network namespace made for the run: the two BMv2
switches, the veth pairs that are PTF's ports, and PTF itself. The namespace
(and with it every veth) and the switch processes are removed on success,
failure and Ctrl-C/SIGTERM.

    PTF port 1..4 <-> sw1 port 1..4        sw1 port 5 <-> sw2 port 1
    PTF port 6    <-> sw2 port 2

Exit status: PTF's (0 when every test passed); 77 when a tool is missing
(printed on one line), so that callers can tell "skipped" from "failed".
"""
from __future__ import annotations

import argparse
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from controller.bmv2 import Bmv2Switch  # noqa: E402
from bwn.emulation.netns import NetnsSet  # noqa: E402
from bwn.requirements import bmv2_missing, netns_missing, ptf_missing  # noqa: E402

EXIT_SKIPPED = 77
PTF_QUEUE_DEPTH = 10_000
SW1_PTF_PORTS = (1, 2, 3, 4)
SW1_UPLINK = 5
SW2_PTF_PORT = 2
PTF_PORT_OF_SW2 = 6


def missing_prerequisites(build_dir: Path) -> str | None:
    why = netns_missing() or bmv2_missing() or ptf_missing()
    if why:
        return why
    if not (build_dir / "bwn.json").exists():
        return f"{build_dir / 'bwn.json'} missing: run `make build` (needs p4c)"
    return None


# unittest's verbose result line for one test: "<test name> ... FAIL" (or ERROR); a
# test with a docstring prints its name on one line and "<docstring line> ... FAIL" on the next.
_FAILED_RESULT = re.compile(r"^(.*) \.\.\. (FAIL|ERROR)\s*$")


def run_until_first_failure(cmd: list[str]) -> int:
    """Run PTF, echo its output, and stop it at the first failing test: print
    "FAIL: <test>" and return 1. The return code of PTF otherwise."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    assert proc.stdout is not None
    previous = ""
    try:
        for line in proc.stdout:
            sys.stdout.write(line)
            m = _FAILED_RESULT.match(line.rstrip("\n"))
            if m:
                name = m.group(1) if " " not in m.group(1).strip() else previous.strip()
                sys.stdout.write(f"{m.group(2)}: {name}\nstopped at the first failure (--failfast)\n")
                sys.stdout.flush()
                return 1
            previous = line
        return proc.wait()
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        proc.stdout.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build-dir", type=Path, default=REPO / "build")
    parser.add_argument("--test-spec", nargs="*", default=[], help="PTF tests to run (default: all)")
    parser.add_argument("--keep-logs", action="store_true", help="keep switch logs even on success")
    parser.add_argument("--log-level", default="warn", help="BMv2 log level (trace|debug|info|warn|error|off)")
    parser.add_argument("--failfast", action="store_true",
                        help="stop at the first failing test (mutation runs: a kill needs only one); "
                             "PTF 0.12 accepts its own --failfast but ignores it, so this watches the "
                             "test results as they print and stops PTF at the first FAIL or ERROR")
    args = parser.parse_args(argv)

    why = missing_prerequisites(args.build_dir)
    if why:
        print(f"SKIPPED PTF suite: {why}", flush=True)
        return EXIT_SKIPPED

    log_dir = args.build_dir / "ptf-logs"
    if log_dir.exists():
        shutil.rmtree(log_dir)
    log_dir.mkdir(parents=True)

    def on_term(signum, frame):  # turn SIGTERM into the same cleanup as Ctrl-C
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    nets = NetnsSet()
    switches: list[Bmv2Switch] = []
    rc = 1
    try:
        ns = nets.add_netns("bwnptf")
        for p in SW1_PTF_PORTS:
            nets.veth(f"s1p{p}", f"t1p{p}", ns, ns, mtu=9000)
        nets.veth(f"s1p{SW1_UPLINK}", "s2p1", ns, ns, mtu=9000)
        nets.veth(f"s2p{SW2_PTF_PORT}", f"t2p{SW2_PTF_PORT}", ns, ns, mtu=9000)
        # Two priority queues per port on sw1: the guaranteed service's (service_tests.py);
        # every other test's packets take priority 0, one FIFO as before.
        sw1 = Bmv2Switch("sw1", {p: f"s1p{p}" for p in (*SW1_PTF_PORTS, SW1_UPLINK)},
                         grpc_port=50061, thrift_port=9091, netns=ns, log_dir=log_dir,
                         log_level=args.log_level, priority_queues=2)
        sw2 = Bmv2Switch("sw2", {1: "s2p1", SW2_PTF_PORT: f"s2p{SW2_PTF_PORT}"},
                         grpc_port=50062, thrift_port=9092, netns=ns, log_dir=log_dir,
                         log_level=args.log_level)
        for sw in (sw1, sw2):
            switches.append(sw.start())
            # Deep egress queues: on a loaded machine a paced test must not lose
            # packets to BMv2's 64-packet default (tests that build a queue set their own).
            sw.cli(f"set_queue_depth {PTF_QUEUE_DEPTH}\n")

        ptf = Path(sys.executable).parent / "ptf"
        params = ";".join([
            f"grpc_addr='{sw1.grpc_addr}'", f"grpc_addr2='{sw2.grpc_addr}'",
            f"thrift_port={sw1.thrift_port}", f"thrift_port2={sw2.thrift_port}",
            f"netns='{ns}'",
            f"p4info='{args.build_dir / 'bwn.p4info.txtpb'}'", f"p4blob='{args.build_dir / 'bwn.json'}'",
            f"uplink_port={SW1_UPLINK}", f"sw2_port={PTF_PORT_OF_SW2}",
        ])
        cmd = ["ip", "netns", "exec", ns, str(ptf if ptf.exists() else "ptf"),
               "--test-dir", str(REPO / "ptf-tests"), "--pypath", str(REPO),
               "--qlen", "100000", "--log-file", str(log_dir / "ptf.log"),
               "--test-params", params]
        for p in SW1_PTF_PORTS:
            cmd += ["--interface", f"{p}@t1p{p}"]
        cmd += ["--interface", f"{PTF_PORT_OF_SW2}@t2p{SW2_PTF_PORT}"]
        cmd += args.test_spec
        rc = run_until_first_failure(cmd) if args.failfast else subprocess.run(cmd).returncode
        for sw in switches:
            if sw.proc is not None and sw.proc.poll() is not None:
                print(f"switch {sw.name} died during the run (exit {sw.proc.returncode}); log: {sw.log_path}")
                rc = rc or 1
        return rc
    except KeyboardInterrupt:
        print("interrupted: cleaning up", flush=True)
        rc = 130
        return rc
    finally:
        for sw in switches:
            sw.stop()
        nets.close()
        if rc == 0 and not args.keep_logs:
            shutil.rmtree(log_dir, ignore_errors=True)
        elif rc not in (0, EXIT_SKIPPED):
            print(f"switch and PTF logs kept in {log_dir}")


if __name__ == "__main__":
    sys.exit(main())
