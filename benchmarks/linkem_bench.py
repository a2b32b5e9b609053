#!/usr/bin/env python3
"""Benchmark of the user-space link emulator (bwn-link).  Needs root.

Two measurements, each in a fresh namespace topology
(hostA --veth-- [bwn-link] --veth-- hostB, see bwn.linkem.netns):

(a) ``rtt``:  ping RTT minus 2*D at delays D = 0, 5, 20, 100 ms, without and
    with background load (a paced UDP stream of 100-byte frames, A->B, at
    ``--load-pps`` packets/s, default 10000).
(b) ``rate``: a paced UDP stream of 100-byte frames (58-byte payload carrying
    a sequence number and the CLOCK_REALTIME send time) at increasing rates;
    the receiver takes kernel receive timestamps (SO_TIMESTAMPNS), so the
    one-way delay minus D is the delay the emulator adds (plus two veth hops).
    The maximum rate is the highest offered rate at which the 99th percentile
    of that excess stays below 1 ms and fewer than 0.1 % of frames are lost.
(c) ``tcp``:  kernel TCP (iperf3) A->B for ``--tcp-s`` seconds at D = 5 ms:
    goodput and the emulator's CPU time per forwarded frame.
(d) ``offload``: no sockets, no root: CPU time per frame of the engine's
    per-frame dispatch (the virtio_net_hdr test and slice every frame pays),
    of checksum completion (100- and 1514-byte UDP frames) and of cutting a
    64 KiB TSO super-frame, per segment (bwn.linkem.offload).

``--default-offloads`` leaves the veths' offloads as the kernel makes them
(checksum offload, TSO, GSO on) instead of turning them off: every UDP frame
then reaches bwn-link with a partial checksum to complete, and TCP comes as
GSO super-frames to cut.  ``--payload-bytes`` sets the UDP payload of (b)
(default 58: 100-byte frames; 1472 makes 1514-byte frames).

Usage::

    sudo .venv/bin/python benchmarks/linkem_bench.py            # both, ~2 min
    sudo .venv/bin/python benchmarks/linkem_bench.py rtt
    sudo .venv/bin/python benchmarks/linkem_bench.py rate --rates 5000,10000,20000
    sudo .venv/bin/python benchmarks/linkem_bench.py tcp --default-offloads
    ... --rt-priority 10     # run the emulator with SCHED_FIFO
    ... --default-offloads   # leave checksum offload and TSO/GSO on (see above)

This is not a test: it prints a table and asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bwn.linkem import Impairment  # noqa: E402
from bwn.linkem.netns import Topology  # noqa: E402
from bwn.requirements import linkem_netns_missing  # noqa: E402

PORT = 5999
PAYLOAD = 58  # 14 Ethernet + 20 IPv4 + 8 UDP + 58 = 100-byte frame
SO_TIMESTAMPNS = 35


# -- roles run inside the namespaces ------------------------------------------

def role_send(dst: str, pps: float, seconds: float) -> None:
    """Paced UDP sender: catch up to pps * elapsed, in bursts of at most 64."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    s.connect((dst, PORT))
    send = s.send
    pack = struct.Struct("!QQ42x").pack
    now_rt = time.time_ns
    mono = time.monotonic
    t0 = mono()
    end = t0 + seconds
    seq = 0
    errors = 0
    while True:
        now = mono()
        if now >= end:
            break
        target = int((now - t0) * pps)
        burst = min(target - seq, 64)
        if burst <= 0:
            time.sleep(min(0.0005, (seq + 1) / pps - (now - t0)))
            continue
        for _ in range(burst):
            try:
                send(pack(seq, now_rt()))
            except OSError:
                errors += 1
            seq += 1
    print(json.dumps({"sent": seq, "send_errors": errors, "seconds": mono() - t0}))


def _icmp_checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


def role_ping(dst: str, count: int, interval: float) -> None:
    """ICMP echo with nanosecond RTTs (iputils ping prints 1 ms steps above 100 ms).

    The reply is timestamped by the kernel (SO_TIMESTAMPNS) and the request
    carries its CLOCK_REALTIME send time, so userspace latency on the way back
    does not count.  Host B's kernel answers, no process there is involved.
    """
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    ident = os.getpid() & 0xFFFF
    rtts: Dict[int, float] = {}
    sent = 0
    start = time.monotonic()
    end = start + count * interval + 2.0
    while time.monotonic() < end and len(rtts) < count:
        now = time.monotonic()
        if sent < count and now >= start + sent * interval:
            body = struct.pack("!Q", time.time_ns()) + bytes(48)
            hdr = struct.pack("!BBHHH", 8, 0, 0, ident, sent)
            pkt = struct.pack("!BBHHH", 8, 0, _icmp_checksum(hdr + body), ident, sent) + body
            s.sendto(pkt, (dst, 0))
            sent += 1
            continue
        wait = (start + sent * interval - now) if sent < count else end - now
        r, _, _ = select.select([s], [], [], max(0.0, wait))
        if not r:
            continue
        data, anc, _f, _a = s.recvmsg(2048, 64)
        ihl = (data[0] & 0x0F) * 4
        typ, _code, _ck, rid, seq = struct.unpack_from("!BBHHH", data, ihl)
        if typ != 0 or rid != ident:
            continue
        (t_sent,) = struct.unpack_from("!Q", data, ihl + 8)
        rx = time.time_ns()
        for level, kind, val in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                sec, nsec = struct.unpack("qq", val[:16])
                rx = sec * 1_000_000_000 + nsec
        rtts[seq] = (rx - t_sent) / 1e6
    print(json.dumps([rtts[k] for k in sorted(rtts)]))


def role_recv(seconds: float, delay_ms: float) -> None:
    """Count frames and one-way delay excess (kernel rx timestamp - send time - D)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    s.bind(("0.0.0.0", PORT))
    s.settimeout(0.2)
    print("ready", flush=True)
    unpack = struct.Struct("!QQ").unpack_from
    delay_ns = int(delay_ms * 1e6)
    excess: List[int] = []
    seen = 0
    max_seq = -1
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            data, anc, _flags, _addr = s.recvmsg(128, 64)
        except socket.timeout:
            continue
        seq, sent = unpack(data)
        rx = None
        for level, typ, val in anc:
            if level == socket.SOL_SOCKET and typ == SO_TIMESTAMPNS:
                sec, nsec = struct.unpack("qq", val[:16])
                rx = sec * 1_000_000_000 + nsec
        if rx is None:
            rx = time.time_ns()
        seen += 1
        max_seq = max(max_seq, seq)
        excess.append(rx - sent - delay_ns)
    excess.sort()
    n = len(excess)
    pct = lambda p: excess[min(n - 1, int(p * n))] / 1e6 if n else float("nan")  # noqa: E731
    print(json.dumps({
        "received": seen, "p50_ms": pct(0.5), "p99_ms": pct(0.99),
        "max_ms": excess[-1] / 1e6 if n else float("nan"),
    }))


# -- orchestration -------------------------------------------------------------

def _bench_cmd(*args: str) -> List[str]:
    return [sys.executable, str(Path(__file__).resolve()), *args]


def _start_load(topo: Topology, pps: float, seconds: float) -> subprocess.Popen:
    return topo.popen(topo.ns_a, _bench_cmd("_send", topo.ip_b, str(pps), str(seconds)),
                      stdout=subprocess.PIPE, text=True)


def _ping(topo: Topology, count: int, interval: float) -> List[float]:
    """RTTs in ms, nanosecond resolution (see role_ping)."""
    out = topo.run(topo.ns_a, _bench_cmd("_ping", topo.ip_b, str(count), str(interval)),
                   check=False, timeout=120).stdout
    return json.loads(out) if out.strip() else []


def _topology(args: argparse.Namespace) -> Topology:
    return Topology(default_offloads=True) if args.default_offloads else Topology()


def bench_rtt(args: argparse.Namespace) -> List[Dict[str, Any]]:
    rows = []
    with _topology(args) as topo:
        for delay_ms in args.delays:
            for load in (0, args.load_pps):
                emu = topo.start_emulator(Impairment(delay_us=int(delay_ms * 1000)),
                                          rt_priority=args.rt_priority)
                _ping(topo, 2, 0.05)  # ARP
                load_proc = None
                recv_proc = None
                if load:
                    recv_proc = topo.popen(topo.ns_b, _bench_cmd("_recv", str(args.ping_s + 3), str(delay_ms)),
                                           stdout=subprocess.PIPE, text=True)
                    recv_proc.stdout.readline()
                    load_proc = _start_load(topo, load, args.ping_s + 1)
                    time.sleep(0.3)
                count = int(args.ping_s / 0.01)
                rtts = _ping(topo, count, 0.01)
                if load_proc:
                    load_proc.communicate(timeout=30)
                    recv_proc.communicate(timeout=30)
                stats = emu.stop()
                added = sorted(r - 2 * delay_ms for r in rtts)
                n = len(added)
                row = {
                    "delay_ms": delay_ms, "load_pps": load, "pings": n, "lost": count - n,
                    "min": added[0] if n else None,
                    "p50": added[n // 2] if n else None,
                    "p99": added[min(n - 1, int(0.99 * n))] if n else None,
                    "max": added[-1] if n else None,
                    "kernel_drops": stats["a_to_b"]["kernel_drops"] + stats["b_to_a"]["kernel_drops"],
                }
                rows.append(row)
                print(f"  rtt D={delay_ms:>5} ms load={load:>6} pps: +{row['p50']:.3f} ms median, "
                      f"+{row['p99']:.3f} p99, +{row['max']:.3f} max ({n} pings)", flush=True)
    return rows


def _iperf_udp_counts(report: Dict[str, Any]) -> Dict[str, float]:
    end = report.get("end", {})
    summ = end.get("sum_received") or end.get("sum") or {}
    sent = end.get("sum_sent") or {}
    return {"packets": summ.get("packets", 0), "lost": summ.get("lost_packets", 0),
            "sent_packets": sent.get("packets", summ.get("packets", 0)),
            "seconds": summ.get("seconds", 0.0) or 1.0}


def _udp_rcvbuf_errors(topo: Topology, ns: str) -> int:
    """UDP datagrams dropped by full socket buffers in ``ns`` (receiver too slow)."""
    lines = [ln.split() for ln in topo.run(ns, ["cat", "/proc/net/snmp"]).stdout.splitlines()
             if ln.startswith("Udp:")]
    return int(dict(zip(lines[0][1:], lines[1][1:]))["RcvbufErrors"])


def bench_rate(args: argparse.Namespace) -> List[Dict[str, Any]]:
    """Flood A->B with iperf3 UDP (100-byte frames) plus timestamped probes."""
    rows = []
    with _topology(args) as topo:
        for pps in args.rates:
            emu = topo.start_emulator(Impairment(delay_us=int(args.rate_delay_ms * 1000)),
                                      rt_priority=args.rt_priority)
            _ping(topo, 2, 0.05)  # ARP, both ways
            rcvbuf_before = _udp_rcvbuf_errors(topo, topo.ns_b)
            server = topo.popen(topo.ns_b, ["iperf3", "-s", "-1", "-J"], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
            probe_rx = topo.popen(topo.ns_b, _bench_cmd("_recv", str(args.rate_s + 2.5),
                                                        str(args.rate_delay_ms)),
                                  stdout=subprocess.PIPE, text=True)
            probe_rx.stdout.readline()
            time.sleep(0.3)  # iperf3 server listening
            flood = topo.popen(topo.ns_a, [
                "iperf3", "-c", topo.ip_b, "-u", "-l", str(args.payload_bytes),
                "-b", str(int(pps * args.payload_bytes * 8)),
                "-t", str(args.rate_s), "-J"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            time.sleep(0.5)  # probes only while the flood runs
            probes = topo.run(topo.ns_a, _bench_cmd("_send", topo.ip_b, str(args.probe_pps),
                                                    str(max(0.5, args.rate_s - 1.0))),
                              timeout=args.rate_s + 30)
            flood.communicate(timeout=args.rate_s + 30)
            srv_out = server.communicate(timeout=30)[0]
            probe = json.loads(probe_rx.communicate(timeout=30)[0])
            stats = emu.stop()
            a2b = stats["a_to_b"]
            rcvbuf_errors = _udp_rcvbuf_errors(topo, topo.ns_b) - rcvbuf_before
            try:
                counts = _iperf_udp_counts(json.loads(srv_out))
            except ValueError:
                counts = {"packets": 0, "lost": 0, "sent_packets": 0, "seconds": 1.0}
            sent_probes = json.loads(probes.stdout)["sent"]
            offered = counts["packets"]  # iperf3 server's view: packets it expected
            lost = counts["lost"]
            loss = lost / offered if offered else 1.0
            probe_loss = 1 - probe["received"] / sent_probes if sent_probes else 1.0
            row = {
                "offered_pps": pps,
                "sent_pps": offered / counts["seconds"],
                "received_pps": (offered - lost) / counts["seconds"],
                "loss_pct": 100 * loss,
                "probe_loss_pct": 100 * probe_loss,
                "p50_ms": probe["p50_ms"], "p99_ms": probe["p99_ms"], "max_ms": probe["max_ms"],
                "kernel_drops": a2b["kernel_drops"],
                "receiver_drops": rcvbuf_errors,
                "emulator_fwd_pps": a2b["forwarded_frames"] / counts["seconds"],
                "csum_completed": a2b.get("csum_completed", 0),
                "cpu_us_per_frame": 1e6 * a2b.get("cpu_s", 0) / max(1, a2b["rx_frames"]),
                "wakeups_per_frame": a2b.get("wakeups", 0) / max(1, a2b["rx_frames"]),
                "emulator_drop_pct": 100 * (a2b["kernel_drops"] + a2b["tx_errors"]) / max(1, a2b["rx_frames"]),
                # Judged on the emulator alone: drops in the iperf3 receiver
                # (a slow process on a busy machine) are not the link's.
                "ok": probe["p99_ms"] < 1.0 and a2b["kernel_drops"] + a2b["tx_errors"]
                <= 0.001 * a2b["rx_frames"] and probe_loss < 0.01,
            }
            rows.append(row)
            print(f"  rate {pps:>7} pps: sent {row['sent_pps']:.0f}/s, recv {row['received_pps']:.0f}/s, "
                  f"loss {row['loss_pct']:.2f}%, probe excess p50 {row['p50_ms']:.3f} p99 "
                  f"{row['p99_ms']:.3f} max {row['max_ms']:.3f} ms, kernel drops {row['kernel_drops']}, "
                  f"receiver drops {row['receiver_drops']}, emulator CPU {row['cpu_us_per_frame']:.1f} us/frame, "
                  f"{row['wakeups_per_frame']:.2f} wake-ups/frame", flush=True)
    return rows


def bench_tcp(args: argparse.Namespace) -> List[Dict[str, Any]]:
    """Kernel TCP (iperf3) A->B through the emulator at D = 5 ms each way."""
    rows = []
    with _topology(args) as topo:
        emu = topo.start_emulator(Impairment(delay_us=5000), rt_priority=args.rt_priority)
        server = topo.popen(topo.ns_b, ["iperf3", "-s", "-1"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        res = topo.run(topo.ns_a, ["iperf3", "-c", topo.ip_b, "-t", str(args.tcp_s), "-J",
                                   "--connect-timeout", "3000"], check=False, timeout=args.tcp_s + 30)
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
        time.sleep(0.3)
        stats = emu.stop()
        a2b, b2a = stats["a_to_b"], stats["b_to_a"]
        try:
            report = json.loads(res.stdout)
            mbit = report["end"]["sum_received"]["bits_per_second"] / 1e6
        except (ValueError, KeyError):
            mbit = 0.0
        cpu_s = a2b.get("cpu_s", 0) + b2a.get("cpu_s", 0)
        frames = a2b["forwarded_frames"] + b2a["forwarded_frames"]
        row = {
            "goodput_mbit": mbit,
            "a2b_frames": a2b["forwarded_frames"], "b2a_frames": b2a["forwarded_frames"],
            "gso_superframes": a2b.get("gso_superframes", 0), "gso_segments": a2b.get("gso_segments", 0),
            "csum_completed": a2b.get("csum_completed", 0) + b2a.get("csum_completed", 0),
            "a2b_cpu_us_per_frame": 1e6 * a2b.get("cpu_s", 0) / max(1, a2b["forwarded_frames"]),
            "cpu_us_per_frame": 1e6 * cpu_s / max(1, frames),
            "kernel_drops": a2b["kernel_drops"] + b2a["kernel_drops"],
            "tx_errors": a2b["tx_errors"] + b2a["tx_errors"],
        }
        rows.append(row)
        print(f"  tcp: {mbit:.1f} Mbit/s, A->B {row['a2b_frames']} frames ({row['gso_superframes']} "
              f"super-frames cut into {row['gso_segments']}), {row['csum_completed']} checksums completed, "
              f"A->B CPU {row['a2b_cpu_us_per_frame']:.2f} us/frame, both {row['cpu_us_per_frame']:.2f} us/frame",
              flush=True)
    return rows


def bench_offload(args: argparse.Namespace) -> List[Dict[str, Any]]:
    """In-process cost of the offload paths, best of 5 runs of ``--offload-n`` frames."""
    from bwn.linkem.offload import GSO_TCPV4, NEEDS_CSUM, IngressOffload, vnet_header
    from bwn.linkem.scheduler import Counters

    def udp_frame(payload: int) -> bytes:
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 28 + payload, 1, 0x4000, 64, 17, 0,
                         socket.inet_aton("10.0.0.1"), socket.inet_aton("10.0.0.2"))
        return bytes(12) + b"\x08\x00" + ip + struct.pack("!HHHH", 1, 2, 8 + payload, 0x1234) + bytes(payload)

    def tcp_frame(payload: int) -> bytes:
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 52 + payload, 1, 0x4000, 64, 6, 0,
                         socket.inet_aton("10.0.0.1"), socket.inet_aton("10.0.0.2"))
        tcp = struct.pack("!HHIIBBHHH", 1, 2, 1000, 1, 8 << 4, 0x18, 500, 0x1234, 0) + bytes(12)
        return bytes(12) + b"\x08\x00" + ip + tcp + bytes(range(256)) * (payload // 256) + bytes(payload % 256)

    stage = IngressOffload(Counters(), 1514, warn=lambda _line: None)
    n = args.offload_n
    cases = [
        ("dispatch, complete 100-byte frame (fast path)", vnet_header() + udp_frame(58), "fast", 1),
        ("dispatch, complete 1514-byte frame (fast path)", vnet_header() + udp_frame(1472), "fast", 1),
        ("complete checksum, 100-byte UDP frame", vnet_header(NEEDS_CSUM, 0, 0, 0, 34, 6) + udp_frame(58), "slow", 1),
        ("complete checksum, 1514-byte UDP frame", vnet_header(NEEDS_CSUM, 0, 0, 0, 34, 6) + udp_frame(1472),
         "slow", 1),
        ("cut 64 KiB TSO super-frame, per segment",
         vnet_header(NEEDS_CSUM, GSO_TCPV4, 66, 1448, 34, 16) + tcp_frame(45 * 1448), "slow", 45),
    ]
    rows = []
    for name, data, path, segs in cases:
        fast_max = 10 + 1514
        best = float("inf")
        for _ in range(5):
            t0 = time.process_time()
            if path == "fast":
                for _ in range(n):
                    if data[0] & 1 or data[1] or len(data) > fast_max:
                        raise AssertionError("fast-path frame took the slow path")
                    data[10:]
            else:
                reps = max(1, n // segs)
                for _ in range(reps):
                    if data[0] & 1 or data[1] or len(data) > fast_max:
                        out = stage.frames(data)
                assert len(out) == segs
            dt = time.process_time() - t0
            best = min(best, dt / (n if path == "fast" else reps * segs))
        rows.append({"case": name, "us_per_frame": best * 1e6})
        print(f"  {name:<48} {best * 1e6:6.2f} us/frame", flush=True)
    return rows


def print_tables(rtt: List[Dict[str, Any]], rate: List[Dict[str, Any]], payload_bytes: int = PAYLOAD) -> None:
    if rtt:
        print("\n(a) ICMP echo RTT added by bwn-link beyond 2*D (ms), 10 ms interval")
        print(f"{'D ms':>6} {'load pps':>9} {'pings':>6} {'min':>7} {'median':>7} {'p99':>7} {'max':>7}")
        for r in rtt:
            print(f"{r['delay_ms']:>6} {r['load_pps']:>9} {r['pings']:>6} {r['min']:>7.3f} "
                  f"{r['p50']:>7.3f} {r['p99']:>7.3f} {r['max']:>7.3f}")
    if rate:
        print(f"\n(b) {payload_bytes + 42}-byte UDP frames A->B (iperf3 -u -l {payload_bytes}) + 500/s "
              "timestamped probes: one-way delay beyond D (ms)")
        print(f"{'offered':>8} {'sent/s':>8} {'emu fwd/s':>9} {'emu drop%':>9} {'rcvr drop':>9} "
              f"{'p50':>7} {'p99':>7} {'max':>8} {'us/frame':>8} {'ok':>3}")
        for r in rate:
            print(f"{r['offered_pps']:>8} {r['sent_pps']:>8.0f} {r['emulator_fwd_pps']:>9.0f} "
                  f"{r['emulator_drop_pct']:>9.2f} {r['receiver_drops']:>9} {r['p50_ms']:>7.3f} "
                  f"{r['p99_ms']:>7.3f} {r['max_ms']:>8.3f} {r['cpu_us_per_frame']:>8.1f} "
                  f"{'yes' if r['ok'] else 'no':>3}")
        ok = [r["offered_pps"] for r in rate if r["ok"]]
        print(f"max rate with probe p99 excess < 1 ms and emulator drops < 0.1 %: "
              f"{max(ok) if ok else 'none'} pps")


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_send":
        role_send(argv[1], float(argv[2]), float(argv[3]))
        return 0
    if argv and argv[0] == "_ping":
        role_ping(argv[1], int(argv[2]), float(argv[3]))
        return 0
    if argv and argv[0] == "_recv":
        role_recv(float(argv[1]), float(argv[2]))
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", nargs="?", choices=["rtt", "rate", "tcp", "offload", "all"], default="all",
                   help="all = rtt and rate")
    p.add_argument("--delays", default="0,5,20,100", help="ms, comma separated")
    p.add_argument("--load-pps", type=float, default=10000)
    p.add_argument("--ping-s", type=float, default=3.0, help="seconds of pings per row")
    p.add_argument("--rates", default="2000,5000,10000,20000,30000,40000,60000,80000")
    p.add_argument("--rate-s", type=float, default=3.0, help="seconds per rate step")
    p.add_argument("--rate-delay-ms", type=float, default=10.0)
    p.add_argument("--probe-pps", type=float, default=500, help="timestamped probes during the flood")
    p.add_argument("--rt-priority", type=int, default=0)
    p.add_argument("--default-offloads", action="store_true",
                   help="leave checksum offload and TSO/GSO on the veths (default: off)")
    p.add_argument("--payload-bytes", type=int, default=PAYLOAD,
                   help="UDP payload of the rate flood (58: 100-byte frames)")
    p.add_argument("--tcp-s", type=float, default=5.0, help="seconds of iperf3 TCP in 'tcp'")
    p.add_argument("--offload-n", type=int, default=20000, help="frames per run in 'offload'")
    p.add_argument("--json", help="also write the rows to this file")
    args = p.parse_args(argv)
    if args.what == "offload":
        print(f"bwn-link offload paths: load average {os.getloadavg()[0]:.2f}, CPU time per frame "
              f"(best of 5 x {args.offload_n})", flush=True)
        rows = bench_offload(args)
        if args.json:
            Path(args.json).write_text(json.dumps({"offload": rows}, indent=2))
        return 0
    reason = linkem_netns_missing()
    if reason:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    args.delays = [float(x) if "." in x else int(x) for x in args.delays.split(",")]
    args.rates = [int(x) for x in args.rates.split(",")]
    print(f"bwn-link benchmark: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}, "
          f"rt_priority={args.rt_priority}, offloads {'default' if args.default_offloads else 'off'}",
          flush=True)
    rtt = bench_rtt(args) if args.what in ("rtt", "all") else []
    rate = bench_rate(args) if args.what in ("rate", "all") else []
    tcp = bench_tcp(args) if args.what == "tcp" else []
    print_tables(rtt, rate, args.payload_bytes)
    if args.json:
        Path(args.json).write_text(json.dumps({"rtt": rtt, "rate": rate, "tcp": tcp}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
