#!/usr/bin/env python3
"""The eBPF switch's bottleneck and state, measured (docs/dataplane.md, "PSA on eBPF").

    sudo .venv/bin/python benchmarks/ebpf_queue.py queue [--rates 1e6,10e6,50e6] [--seconds 4]
    sudo .venv/bin/python benchmarks/ebpf_queue.py race [--packets 200000]

A switch (p4src/psa/bwn.p4 under NIKSS, build/ebpf/bwn.o) in a network
namespace made for the run, with three hosts on veths, all removed at the end:

* ``queue``: port 2 is a bottleneck, an ``htb`` class at the rate with a
  ``bfifo`` of `--queue-frames` frames (controller/ebpf.py, PortQdisc), and the
  program's virtual queue of the same rate and limit. Host 1 sends 1066-byte
  BWN DATA frames at `--offered` times the rate, each carrying the time it was
  sent; host 2 captures them. Printed per rate: the rate the qdisc delivered
  while backlogged (as a fraction of the rate), the frames the qdisc dropped
  against those the virtual queue called full, and how far each frame's real
  wait departs from a fluid FIFO's at the rate (the virtual queue's model), in
  bytes at the rate: the error of BI and of the AF threshold.
* ``race``: two hosts send as fast as they can, pinned to two CPUs, through the
  switch to host 3 (no qdisc). The port's received-bytes register (BR) against
  what host 3's interface received, with the switch's ports steered to one CPU
  (RPS, as experiments run it) and without: the register updates two CPUs lose
  when they read and write it at once.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from controller import ebpf as eb  # noqa: E402
from controller import entries as ent  # noqa: E402
from controller.nikss import Pipeline, nikss_missing  # noqa: E402
from bwn.emulation.netns import NetnsSet  # noqa: E402
from bwn.requirements import netns_missing  # noqa: E402

FRAME_BYTES = 1066
SWITCH_MAC = "00:00:00:00:01:01"
HEADER_BYTES = 14 + 20 + 8 + 24          # Ethernet, IPv4, UDP, BWN: the stamp follows
STAMP = struct.Struct("!IQq")             # index, monotonic send time (ns), realtime - monotonic (ns)


# ---- helpers that run inside a host's namespace ---------------------------------
def _frame(src: str, dst: str, sport: int, size: int) -> bytes:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    from bwn.protocol.scapy_layer import BWN
    from bwn.protocol.wire import BWN_UDP_PORT
    pkt = Ether(src="00:00:00:00:00:01", dst=SWITCH_MAC) / IP(src=src, dst=dst, ttl=64) \
        / UDP(sport=sport, dport=BWN_UDP_PORT) / BWN()
    return bytes(pkt / (b"\0" * (size - len(pkt))))


def send_paced(iface: str, src: str, dst: str, rate_bps: float, seconds: float, size: int) -> None:
    """Frames of `size` bytes at `rate_bps`, each stamped with its send time."""
    frame = _frame(src, dst, 40000, size)
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    sock.bind((iface, 0))
    pps = rate_bps / (8 * size)
    offset_ns = time.time_ns() - time.monotonic_ns()
    start = time.monotonic()
    for i in range(int(pps * seconds)):
        delay = start + i / pps - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        sock.send(frame[:HEADER_BYTES] + STAMP.pack(i, time.monotonic_ns(), offset_ns)
                  + frame[HEADER_BYTES + STAMP.size:])


def blast(iface: str, src: str, dst: str, packets: int, size: int) -> None:
    frame = _frame(src, dst, 40001, size)
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    sock.bind((iface, 0))
    for _ in range(packets):
        try:
            sock.send(frame)
        except OSError:
            pass


# ---- the topology ---------------------------------------------------------------
class Rig:
    """Namespace `sw` with ports s1..s3 to hosts h1..h3 (10.0.i.i), the switch on them."""

    def __init__(self, obj: Path, log_dir: Path) -> None:
        self.nets = NetnsSet()
        self.sw = self.nets.add_netns("bwqsw")
        self.hosts = {i: self.nets.add_netns(f"bwqh{i}") for i in (1, 2, 3)}
        for i, ns in self.hosts.items():
            self.nets.veth(f"s{i}", f"h{i}eth", self.sw, ns)
        self.switch = eb.EbpfSwitch("ebpf-queue", {i: f"s{i}" for i in (1, 2, 3)}, eb.pipeline_id(90),
                                    netns=self.sw, cpu=None, obj=obj, log_dir=log_dir)

    def start(self) -> Pipeline:
        self.switch.start()
        pipe = Pipeline(self.switch.pipe_id)
        ifx = self.switch.ifindexes()
        for i, ns in self.hosts.items():
            mac = self.nets.exec(ns, ["cat", f"/sys/class/net/h{i}eth/address"]).stdout.strip()
            eb.route(f"10.0.{i}.{i}/32", ifx[i], i, mac, SWITCH_MAC).add(pipe)
        window = ent.WindowConfig()
        pipe.table_default(eb.T_WINDOW, eb.window_config(window).action, eb.window_config(window).params)
        for e in eb.static_tables(window):
            e.add(pipe)
        return pipe

    def host_python(self, i: int, *args: str, cpu: int | None = None) -> list[str]:
        pin = ["taskset", "-c", str(cpu)] if cpu is not None else []
        return ["ip", "netns", "exec", self.hosts[i], *pin, sys.executable, str(Path(__file__).resolve()), *args]

    def close(self) -> None:
        try:
            self.switch.stop()
        finally:
            self.nets.close()


def fluid_errors(pcap: Path, rate_bps: float, limit_bytes: int) -> tuple[list[float], int, int]:
    """Per received frame: its real wait minus a fluid FIFO's at `rate_bps` (in bytes
    at the rate); the frames received, and those the fluid FIFO drops."""
    import scapy.layers.l2  # noqa: F401  (reads the capture's frames as Ethernet)
    from scapy.utils import rdpcap
    got: dict[int, tuple[int, int]] = {}
    for p in rdpcap(str(pcap)):
        raw = bytes(p)
        if len(raw) < HEADER_BYTES + STAMP.size:
            continue
        i, sent_ns, offset_ns = STAMP.unpack(raw[HEADER_BYTES:HEADER_BYTES + STAMP.size])
        got[i] = (int(p.time * 1e9) - offset_ns, sent_ns)
    if len(got) < 2:
        raise RuntimeError(f"{pcap}: {len(got)} frames captured")
    ids = sorted(got)
    sent = {i: got[i][1] for i in ids}
    # the send times of frames the qdisc dropped: between their received neighbours
    known = ids
    for i in range(ids[0], ids[-1] + 1):
        if i not in sent:
            lo = max(k for k in known if k < i)
            hi = min(k for k in known if k > i)
            sent[i] = sent[lo] + (sent[hi] - sent[lo]) * (i - lo) // (hi - lo)
    per_ns = rate_bps / 8e9
    queue, last, model, dropped = 0.0, None, {}, 0
    for i in range(ids[0], ids[-1] + 1):
        t = sent[i]
        if last is not None:
            queue = max(0.0, queue - (t - last) * per_ns)
        last = t
        if queue + FRAME_BYTES <= limit_bytes:
            model[i] = queue          # the bytes ahead of it
            queue += FRAME_BYTES
        else:
            dropped += 1
    errors = [((got[i][0] - got[i][1]) * per_ns - model[i]) for i in ids if i in model]
    return errors, len(got), dropped


def run_queue(args: argparse.Namespace) -> None:
    rig = Rig(args.obj, args.log_dir)
    try:
        pipe = rig.start()
        ifx = rig.switch.ifindexes()
        print(f"| rate | delivered / rate | qdisc drops / virtual queue full | real - fluid wait ahead, bytes: "
              f"median [p1, p99] (min..max) |")
        print("|---|---|---|---|")
        for rate in args.rates:
            limit = args.queue_frames * FRAME_BYTES
            qd = rig.switch.add_qdisc(2, rate, limit)
            eb.VirtualQueue.of(rate, limit).entry(2).set(pipe)
            full0 = pipe.counter_get(eb.QUEUE_FULL_COUNTER, 2)[0]
            with tempfile.TemporaryDirectory() as tmp:
                pcap = Path(tmp) / "h2.pcap"
                cap = subprocess.Popen(["ip", "netns", "exec", rig.hosts[2], "tcpdump", "-i", "h2eth", "-w",
                                        str(pcap), "-s", "128", "-B", "16384", "udp"],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                try:
                    time.sleep(0.5)
                    subprocess.run(rig.host_python(1, "_send", "h1eth", "10.0.1.1", "10.0.2.2",
                                                   str(rate * args.offered), str(args.seconds)), check=True)
                    time.sleep(limit * 8 / rate + 0.5)
                finally:
                    cap.terminate()
                    cap.wait()
                stats = json.loads(subprocess.run(
                    ["ip", "netns", "exec", rig.sw, "tc", "-s", "-j", "qdisc", "show", "dev", "s2"],
                    capture_output=True, text=True, check=True).stdout)
                qdisc_drops = sum(q.get("drops", 0) for q in stats if q.get("kind") == "bfifo")
                errors, received, _ = fluid_errors(pcap, rate, limit)
                from scapy.utils import rdpcap
                times = sorted(float(p.time) for p in rdpcap(str(pcap)))
            full = pipe.counter_get(eb.QUEUE_FULL_COUNTER, 2)[0] - full0
            busy = [t for t in times if times[0] + 0.5 < t < times[0] + args.seconds - 0.2]
            delivered = (len(busy) - 1) * FRAME_BYTES * 8 / (busy[-1] - busy[0])
            errors.sort()
            print(f"| {rate / 1e6:g} Mb/s | {delivered / rate:.4f} | {qdisc_drops} / {full} | "
                  f"{statistics.median(errors):.0f} [{errors[len(errors) // 100]:.0f}, "
                  f"{errors[len(errors) * 99 // 100]:.0f}] ({errors[0]:.0f}..{errors[-1]:.0f}) |", flush=True)
            qd.remove()
            pipe.table_clear(eb.T_QUEUE)
    finally:
        rig.close()


def rx_bytes(rig: Rig, host: int) -> int:
    return int(rig.nets.exec(rig.hosts[host], ["cat", f"/sys/class/net/h{host}eth/statistics/rx_bytes"]).stdout)


def run_race(args: argparse.Namespace) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit("race needs two CPUs")
    rig = Rig(args.obj, args.log_dir)
    try:
        pipe = rig.start()
        print("| switch's ports | frames sent | bytes host 3 received | BR register grew by | lost |")
        print("|---|---|---|---|---|")
        for steered in (False, True):
            if steered:
                eb.steer_to_cpu(rig.switch.ports.values(), cpus[0], rig.sw)
            before_reg, before_rx = pipe.register_get("BwnIngress_rx_bytes", 3), rx_bytes(rig, 3)
            senders = [subprocess.Popen(rig.host_python(h, "_blast", f"h{h}eth", f"10.0.{h}.{h}", "10.0.3.3",
                                                        str(args.packets), "200", cpu=cpus[k]))
                       for k, h in enumerate((1, 2))]
            for s in senders:
                s.wait()
            time.sleep(0.5)
            reg = pipe.register_get("BwnIngress_rx_bytes", 3) - before_reg
            got = rx_bytes(rig, 3) - before_rx
            print(f"| {'steered to CPU %d' % cpus[0] if steered else 'not steered'} | {2 * args.packets} | {got} | "
                  f"{reg} | {got - reg} bytes ({(got - reg) / got * 100:.3f} %) |", flush=True)
            if steered:
                eb.steer_to_cpu_off(rig.switch.ports.values(), rig.sw)
    finally:
        rig.close()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_send":          # inside host 1's namespace
        send_paced(argv[1], argv[2], argv[3], float(argv[4]), float(argv[5]), FRAME_BYTES)
        return 0
    if argv and argv[0] == "_blast":
        blast(argv[1], argv[2], argv[3], int(argv[4]), int(argv[5]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--obj", type=Path, default=eb.default_object(), help="the BPF object (make build-ebpf)")
    parser.add_argument("--log-dir", type=Path, default=REPO / "build" / "ebpf-queue")
    sub = parser.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("queue", help="htb + bfifo against the virtual queue")
    q.add_argument("--rates", type=lambda s: [float(x) for x in s.split(",")], default=[1e6, 10e6, 50e6],
                   help="port rates, b/s, comma-separated")
    q.add_argument("--offered", type=float, default=1.5, help="offered load / rate")
    q.add_argument("--seconds", type=float, default=4.0)
    q.add_argument("--queue-frames", type=int, default=100, help="the FIFO, in 1066-byte frames")
    r = sub.add_parser("race", help="lost register updates with and without steering to one CPU")
    r.add_argument("--packets", type=int, default=200_000, help="frames per sender")
    args = parser.parse_args(argv)
    why = netns_missing() or nikss_missing() or (None if shutil.which("tcpdump") else "tcpdump is not installed")
    if why:
        print(f"SKIPPED: {why}")
        return 77
    if not args.obj.exists():
        print(f"{args.obj} missing: run `make build-ebpf`")
        return 2
    {"queue": run_queue, "race": run_race}[args.cmd](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
