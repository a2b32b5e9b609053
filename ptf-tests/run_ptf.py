#!/usr/bin/env python3
"""Run the PTF suite against two real switches of one target.

    .venv/bin/python ptf-tests/run_ptf.py [--target bmv2|ebpf] [--test-spec NAME ...] [--keep-logs]

Targets: `bmv2` (default), two simple_switch_grpc processes running
p4src/v1model/bwn.p4; `ebpf`, two NIKSS pipelines of p4src/psa/bwn.p4
(build/ebpf/bwn.o), each switch's ports steered to a CPU of its own.

Everything lives in one network namespace made for the run: the two switches,
the veth pairs that are PTF's ports, and PTF itself. The namespace (and with it
every veth), the switch processes or pipelines (programs, maps, pins, qdiscs)
are removed on success, failure and Ctrl-C/SIGTERM. For `ebpf`, PTF enters the
namespace with `nsenter --net` (not `ip netns exec`, which would mount another
/sys and hide the pipelines' pins from the tests' libnikss).

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
from controller.ebpf import EbpfSwitch, pipeline_id, switch_cpu  # noqa: E402
from bwn.emulation.netns import NetnsSet  # noqa: E402
from bwn.requirements import (bmv2_missing, ebpf_missing, ebpf_program_missing, netns_missing,  # noqa: E402
                              ptf_missing)

EXIT_SKIPPED = 77
PTF_QUEUE_DEPTH = 10_000
SW1_PTF_PORTS = (1, 2, 3, 4)
SW1_UPLINK = 5
SW2_PTF_PORT = 2
PTF_PORT_OF_SW2 = 6


TARGETS = ("bmv2", "ebpf")
# NIKSS pipeline ids of the eBPF run's two switches (experiments use pipeline_id(0..)).
PTF_PIPELINE_INDEX = 80


def missing_prerequisites(build_dir: Path, target: str = "bmv2") -> str | None:
    if target == "ebpf":
        return netns_missing() or ebpf_missing() or ptf_missing() or ebpf_program_missing(build_dir)
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
    parser.add_argument("--target", choices=TARGETS, default="bmv2",
                        help="the switches: BMv2 (p4src/v1model) or eBPF under NIKSS (p4src/psa)")
    parser.add_argument("--build-dir", type=Path, default=REPO / "build")
    parser.add_argument("--test-spec", nargs="*", default=[], help="PTF tests to run (default: all)")
    parser.add_argument("--keep-logs", action="store_true", help="keep switch logs even on success")
    parser.add_argument("--log-level", default="warn", help="BMv2 log level (trace|debug|info|warn|error|off)")
    parser.add_argument("--failfast", action="store_true",
                        help="stop at the first failing test (mutation runs: a kill needs only one); "
                             "PTF 0.12 accepts its own --failfast but ignores it, so this watches the "
                             "test results as they print and stops PTF at the first FAIL or ERROR")
    args = parser.parse_args(argv)

    why = missing_prerequisites(args.build_dir, args.target)
    if why:
        print(f"SKIPPED PTF suite: {why}", flush=True)
        return EXIT_SKIPPED

    log_dir = args.build_dir / ("ptf-logs" if args.target == "bmv2" else f"ptf-logs-{args.target}")
    if log_dir.exists():
        shutil.rmtree(log_dir)
    log_dir.mkdir(parents=True)

    def on_term(signum, frame):  # turn SIGTERM into the same cleanup as Ctrl-C
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    nets = NetnsSet()
    switches: list[Bmv2Switch] = []
    pipelines: list[EbpfSwitch] = []
    rc = 1
    try:
        ns = nets.add_netns("bwnptf")
        # NIKSS attaches an XDP program to each eBPF port, which a veth refuses
        # while its peer's MTU exceeds a page's worth: keep Ethernet's there.
        mtu = 1500 if args.target == "ebpf" else 9000
        for p in SW1_PTF_PORTS:
            nets.veth(f"s1p{p}", f"t1p{p}", ns, ns, mtu=mtu)
        nets.veth(f"s1p{SW1_UPLINK}", "s2p1", ns, ns, mtu=mtu)
        nets.veth(f"s2p{SW2_PTF_PORT}", f"t2p{SW2_PTF_PORT}", ns, ns, mtu=mtu)
        ports1 = {p: f"s1p{p}" for p in (*SW1_PTF_PORTS, SW1_UPLINK)}
        ports2 = {1: "s2p1", SW2_PTF_PORT: f"s2p{SW2_PTF_PORT}"}
        ptf = Path(sys.executable).parent / "ptf"
        common = [f"netns='{ns}'", f"uplink_port={SW1_UPLINK}", f"sw2_port={PTF_PORT_OF_SW2}",
                  f"target='{args.target}'"]
        if args.target == "ebpf":
            for i, ports in enumerate((ports1, ports2)):
                sw = EbpfSwitch(f"sw{i + 1}", ports, pipeline_id(PTF_PIPELINE_INDEX + i), netns=ns,
                                cpu=switch_cpu(i), obj=args.build_dir / "ebpf" / "bwn.o", log_dir=log_dir)
                pipelines.append(sw)
                sw.start()

            def port_list(ports: dict[int, str]) -> str:
                return ",".join(f"{p}:{name}" for p, name in sorted(ports.items()))

            params = ";".join(common + [
                f"pipe={pipelines[0].pipe_id}", f"pipe2={pipelines[1].pipe_id}",
                f"ports='{port_list(ports1)}'", f"ports2='{port_list(ports2)}'"])
            enter = ["nsenter", f"--net=/run/netns/{ns}"]
        else:
            # Two priority queues per port on sw1: the guaranteed service's (service_tests.py);
            # every other test's packets take priority 0, one FIFO as before.
            sw1 = Bmv2Switch("sw1", ports1, grpc_port=50061, thrift_port=9091, netns=ns, log_dir=log_dir,
                             log_level=args.log_level, priority_queues=2)
            sw2 = Bmv2Switch("sw2", ports2, grpc_port=50062, thrift_port=9092, netns=ns, log_dir=log_dir,
                             log_level=args.log_level)
            for sw in (sw1, sw2):
                switches.append(sw.start())
                # Deep egress queues: on a loaded machine a paced test must not lose
                # packets to BMv2's 64-packet default (tests that build a queue set their own).
                sw.cli(f"set_queue_depth {PTF_QUEUE_DEPTH}\n")
            params = ";".join(common + [
                f"grpc_addr='{sw1.grpc_addr}'", f"grpc_addr2='{sw2.grpc_addr}'",
                f"thrift_port={sw1.thrift_port}", f"thrift_port2={sw2.thrift_port}",
                f"p4info='{args.build_dir / 'bwn.p4info.txtpb'}'", f"p4blob='{args.build_dir / 'bwn.json'}'"])
            enter = ["ip", "netns", "exec", ns]
        cmd = [*enter, str(ptf if ptf.exists() else "ptf"),
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
        for pipe in pipelines:
            try:
                pipe.stop()
            except Exception as exc:  # the namespace must still go
                print(f"{pipe.name}: teardown: {exc}", flush=True)
                rc = rc or 1
        nets.close()
        if rc == 0 and not args.keep_logs:
            shutil.rmtree(log_dir, ignore_errors=True)
        elif rc not in (0, EXIT_SKIPPED):
            print(f"switch and PTF logs kept in {log_dir}")


if __name__ == "__main__":
    sys.exit(main())
