#!/usr/bin/env python3
"""Throughput and CPU cost of the host agents: one bwn-send -> bwn-recv pair.

Path: a veth pair between two fresh network namespaces (``--path netns``, needs
root and ``ip``; no emulator, no shaping) or 127.0.0.1 (``--path loopback``).
``--path auto`` (default) takes netns when it can.

Prints goodput, data packets per second, ACKs per second, and the CPU time
(user + system, from ``wait4`` rusage) of each process per packet it handled.

    .venv/bin/python benchmarks/agents_bench.py --seconds 10
    .venv/bin/python benchmarks/agents_bench.py --path loopback --algo reno --delayed-ack

The numbers in docs/transport.md ("Performance") come from this script.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Tuple

PY = sys.executable
PORT = 16983


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


class VethPair:
    """Two namespaces joined by one veth (10.78.0.1 <-> 10.78.0.2), removed on exit."""

    def __init__(self) -> None:
        tag = f"bwnb{os.getpid() % 100000}"
        self.ns_a, self.ns_b = f"{tag}-a", f"{tag}-b"
        self.if_a, self.if_b = f"{tag}a", f"{tag}b"
        self.ip_a, self.ip_b = "10.78.0.1", "10.78.0.2"

    def __enter__(self) -> "VethPair":
        try:
            for ns in (self.ns_a, self.ns_b):
                _ip("netns", "add", ns)
                _ip("-n", ns, "link", "set", "lo", "up")
            _ip("link", "add", self.if_a, "netns", self.ns_a, "type", "veth",
                "peer", "name", self.if_b, "netns", self.ns_b)
            for ns, ifn, addr in ((self.ns_a, self.if_a, self.ip_a), (self.ns_b, self.if_b, self.ip_b)):
                _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", ifn)
                _ip("-n", ns, "link", "set", ifn, "up")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        for ns in (self.ns_a, self.ns_b):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    def wrap(self, ns: str, argv: List[str]) -> List[str]:
        return ["ip", "netns", "exec", ns, *argv]


def _wait_rusage(proc: subprocess.Popen, timeout_s: float) -> Tuple[int, float]:
    """Wait for ``proc``; return (exit status, user + system CPU seconds)."""
    deadline = time.monotonic() + timeout_s
    while True:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, ru.ru_utime + ru.ru_stime
        if time.monotonic() > deadline:
            proc.kill()
        time.sleep(0.02)


def run(path: str, seconds: float, algo: str, mss: Optional[int], delayed_ack: bool,
        extra: List[str]) -> Dict[str, Any]:
    tmp = tempfile.mkdtemp(prefix="bwn-bench-")
    veth: Optional[VethPair] = None
    try:
        if path == "netns":
            veth = VethPair().__enter__()
            dst = veth.ip_b
            wrap_a = lambda argv: veth.wrap(veth.ns_a, argv)  # noqa: E731
            wrap_b = lambda argv: veth.wrap(veth.ns_b, argv)  # noqa: E731
        else:
            dst = "127.0.0.1"
            wrap_a = wrap_b = lambda argv: argv  # noqa: E731
        recv_json = os.path.join(tmp, "recv.json")
        send_json = os.path.join(tmp, "send.json")
        recv_argv = [PY, "-m", "hosts.recv", "--listen", f"{dst}:{PORT}", "--once",
                     "--linger", "0.2", "--summary-json", recv_json, "--quiet"]
        if delayed_ack:
            recv_argv.append("--delayed-ack")
        recv = subprocess.Popen(wrap_b(recv_argv))
        time.sleep(0.5)
        send_argv = [PY, "-m", "hosts.send", "--algo", algo, "--dst", f"{dst}:{PORT}",
                     "--duration", str(seconds), "--summary-json", send_json, "--quiet", *extra]
        if mss:
            send_argv += ["--mss", str(mss)]
        sender = subprocess.Popen(wrap_a(send_argv))
        s_rc, s_cpu = _wait_rusage(sender, seconds + 60)
        r_rc, r_cpu = _wait_rusage(recv, 30)
        if s_rc != 0:
            raise SystemExit(f"bwn-send exited with {s_rc}")
        with open(send_json) as fh:
            s = json.load(fh)
        with open(recv_json) as fh:
            r = json.load(fh)[0]
        dur = s["duration_s"]
        return {
            "path": path,
            "algo": algo,
            "delayed_ack": delayed_ack,
            "seconds": dur,
            "goodput_mbps": s["goodput_bps"] / 1e6,
            "data_pps": s["packets_sent"] / dur,
            "ack_pps": s["acks_received"] / dur,
            "retransmits": s["retransmits"],
            "timeouts": s["timeouts"],
            "rtt_p50_ms": s["rtt_p50_ms"],
            "sender_cpu_s": s_cpu,
            "receiver_cpu_s": r_cpu,
            "sender_cpu_util": s_cpu / dur,
            "receiver_cpu_util": r_cpu / dur,
            "sender_us_per_packet": s_cpu / max(s["packets_sent"] + s["acks_received"], 1) * 1e6,
            "sender_us_per_data_packet": s_cpu / max(s["packets_sent"], 1) * 1e6,
            "receiver_us_per_segment": r_cpu / max(r["segments"], 1) * 1e6,
            "receiver_segments": r["segments"],
        }
    finally:
        if veth is not None:
            veth.__exit__()
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--path", choices=("auto", "netns", "loopback"), default="auto")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--algo", default="newreno")
    p.add_argument("--mss", type=int, default=None)
    p.add_argument("--delayed-ack", action="store_true")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("extra", nargs="*", help="more bwn-send arguments (after --)")
    args = p.parse_args(argv)
    path = args.path
    if path == "auto":
        path = "netns" if os.geteuid() == 0 and shutil.which("ip") else "loopback"
    res = run(path, args.seconds, args.algo, args.mss, args.delayed_ack, args.extra)
    if args.json:
        print(json.dumps(res, indent=2))
    else:
        print(f"path {res['path']}, {res['algo']}, delayed ACKs {res['delayed_ack']}, "
              f"{res['seconds']:.2f} s (load average {os.getloadavg()[0]:.2f})")
        print(f"  goodput          {res['goodput_mbps']:8.1f} Mb/s")
        print(f"  data packets/s   {res['data_pps']:8.0f}   ACKs/s {res['ack_pps']:8.0f}")
        print(f"  retransmits      {res['retransmits']:8d}   timeouts {res['timeouts']}, "
              f"RTT p50 {res['rtt_p50_ms']} ms")
        print(f"  sender CPU       {res['sender_cpu_util'] * 100:8.1f} %   "
              f"{res['sender_us_per_data_packet']:.1f} us per data packet "
              f"({res['sender_us_per_packet']:.1f} us per packet sent or received)")
        print(f"  receiver CPU     {res['receiver_cpu_util'] * 100:8.1f} %   "
              f"{res['receiver_us_per_segment']:.1f} us per segment (incl. its ACK)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
