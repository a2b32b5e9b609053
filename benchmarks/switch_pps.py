#!/usr/bin/env python3
"""Forwarding rate and CPU per packet of bwn.p4 against a plain IPv4 router on BMv2,
and of bwn on eBPF against bwn on the fast BMv2.

    sudo .venv/bin/python benchmarks/switch_pps.py [--seconds 8] [--rounds 7]
        [--builds default,fast] [--programs plain,bwn] [--classes data,plain,window-first,xcp,rcp]
        [--callgrind 2000] [--candidate build/try] [--threads] [--target ebpf]
        [--generator python|c] [--loop frame|batched|open] [--rate PPS] [--generator-cpu N]

--target ebpf adds a build `ebpf`: p4src/psa/bwn.p4 (build/ebpf/bwn.o) loaded by
NIKSS on the same two ports, configured as the controller configures it, its
packets steered to one CPU (as in experiments), measured in the same rounds and
on the same traffic as the BMv2 builds (program bwn only: there is no plain PSA
router). It has no process: its CPU per packet is the machine's busy time (all
CPUs, /proc/stat) less the generator's, over the frames; "machine CPU/packet"
(every build) is the busy time with the generator's included, the figure that
compares the two on equal terms. Two more eBPF builds undo one choice of the
switch each, measured in the same rounds: `ebpf-xdp` keeps NIKSS's XDP helper on
its ports, `ebpf-unsteered` lets the kernel run its ports' packets on any CPU
(`--builds fast,ebpf,ebpf-xdp,ebpf-unsteered`).

Method. One `simple_switch_grpc` in a private network namespace, two veth ports.
A closed-loop generator (AF_PACKET) keeps `--inflight` 1000-byte
frames inside the switch: it sends into port 1 whenever fewer than that many have
come out of port 2, so the switch always has work and its queues never overflow
(a top-speed sender would burn a core that the switch needs, on 2 cores). The
rate is frames out of port 2 per second; CPU per packet is the switch process's
user+system time (all its threads, /proc/PID/stat) over those frames, with the
user part (the pipeline's own work; system time is BMv2's thread hand-offs and
packet I/O) in brackets. Programs
and builds are interleaved round by round, each round starting one case later,
so that drift of the machine hits all of them alike; the table gives the median
and the min..max of the rounds.

Generators (--generator). `python`: this process, one send and one recv call per
frame (--loop frame, the default for BMv2 alone, as every BMv2 figure was
measured) or sendmmsg/recvmmsg of --batch frames (--loop batched). `c`:
benchmarks/pktgen/bwn_pktgen.c (`make pktgen`, which this script runs), the
default when an eBPF build is measured: the same frames (a template file written
from the same list, sent in the same order), the same closed loop (batched) or an
open one (--loop open: --rate frames/s, 0 = flat out, counted at port 2's peer),
at a fraction of the CPU per frame, so that the eBPF switch, which forwards in
the sending call's own softirq or on its CPU, is measured rather than the
generator. On 2 cores the generator and the datapath share the machine: the C
generator is pinned to the last CPU (--generator-cpu), the eBPF switch's ports
are steered to the first, and BMv2's threads run where the kernel puts them, in
every build's rounds alike; "machine CPU/packet" counts the generator too, and
--threads prints each CPU's busy share and the machine's CPU per packet by kind
(user, system, softirq), which say which side bounds the rate.
--write-template DIR writes the C generator's template of each class and exits.

Traffic classes (bwn.p4 only; the plain program forwards them all alike):
  data          BWN DATA packets (UDP 16983) that every switch stamps, 8 flows;
  plain         UDP packets of 8 flows that are not BWN (forwarded, counted, not stamped);
  window-first  BWN DATA with 1 us measurement and flow windows, so that every
                packet is the first of its window (the window-close path);
  xcp           BWN DATA with the XR header of an XCP sender (RTT 10 ms, a 50 kB
                window): every packet gets XCP's per-packet feedback, and the
                port's control interval (10 ms) closes about every 10 ms;
  rcp           BWN DATA with the XR header of an RCP sender (RTT 10 ms): every
                packet is stamped with the port's rate, which is updated about
                every 10 ms.

--candidate DIR adds a third program, `candidate`: bwn.p4 as compiled into DIR
(bwn.json and bwn.p4info.txtpb, e.g. `p4c ... -o build/try` from a changed copy),
measured in the same rounds as the other two, so that a change to the program is
judged by its own paired ratio against the plain router, next to the committed
program's, rather than against a figure from another day (the VM's speed drifts
by tens of per cent between days).

--threads also prints where the CPU goes: the CPU per packet of the switch's four
busiest threads (packet in, ingress, egress, transmit: the order simple_switch
starts them) and of the generator, from /proc/PID/task/*/stat; and for every
build each CPU's busy share and the machine's CPU per packet by kind (/proc/stat).

--callgrind N runs each (program, class) once more under valgrind's callgrind
on the fast build and counts the instructions the switch executes per packet
over N packets: a figure that does not depend on the machine's load (valgrind
counts instructions, not time), and a profile (`--profile-dir`) that shows which
BMv2 functions the cost goes to.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from controller.bmv2 import SWITCH_BINARY, Bmv2Switch, fast_switch_binary  # noqa: E402
from bwn.emulation.probes import CPU_TIME_FIELDS, read_proc_stat  # noqa: E402
from bwn.emulation.netns import NetnsSet  # noqa: E402
from bwn.requirements import netns_missing  # noqa: E402
from bwn.analysis.stats import mean_interval  # noqa: E402

FRAME_BYTES = 1000
N_FLOWS = 8
CLONE_NEWNET = 0x40000000
ETH_P_ALL = 0x0003
SW_MAC = "00:00:00:00:01:01"
H2_MAC = "00:00:00:00:00:02"
DST_IP = "10.0.2.2"
PROGRAMS = ("plain", "bwn")
PKTGEN = REPO / "build" / "bwn_pktgen"   # the C generator (make pktgen; benchmarks/pktgen/)
LOOPS = ("frame", "batched", "open")     # how a generator sends (--loop)
EBPF = "ebpf"                 # the eBPF "build" (--target ebpf)
# The eBPF switch as experiments run it, and with one of its two choices undone
# (controller/ebpf.py, EbpfSwitch): (steered to one CPU, NIKSS's XDP helper kept).
EBPF_BUILDS = {EBPF: (True, False), "ebpf-xdp": (True, True), "ebpf-unsteered": (False, False)}
# BMv2's threads that work per packet: packet in, ingress, the egress port's egress
# thread, transmit (simple_switch starts them in this order; --threads).
BUSY_THREADS = 4


# ----------------------------------------------------------------------------- netns
class InNetns:
    """Run the enclosed code (socket creation) in network namespace `name`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._libc = ctypes.CDLL("libc.so.6", use_errno=True)

    def __enter__(self) -> "InNetns":
        self._home = os.open("/proc/self/ns/net", os.O_RDONLY)
        fd = os.open(f"/run/netns/{self.name}", os.O_RDONLY)
        try:
            if self._libc.setns(fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), f"setns into {self.name} failed")
        finally:
            os.close(fd)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self._libc.setns(self._home, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back to the original namespace failed")
        finally:
            os.close(self._home)


# ----------------------------------------------------------------------------- frames
def frames(traffic: str) -> list[bytes]:
    """One frame per flow (distinct UDP source ports), FRAME_BYTES long each."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    from bwn.protocol.scapy_layer import BWN, XR
    from bwn.protocol.wire import BWN_UDP_PORT, FLAG_XR

    out = []
    for i in range(N_FLOWS):
        l2l3 = Ether(src="00:00:00:00:00:01", dst=SW_MAC) / IP(src="10.0.1.1", dst=DST_IP, ttl=64)
        if traffic == "plain":
            pkt = l2l3 / UDP(sport=40000 + i, dport=5001)
        elif traffic in ("xcp", "rcp"):
            xr = XR(rtt_us=10_000, cwnd_bytes=50_000 if traffic == "xcp" else 0)
            pkt = l2l3 / UDP(sport=40000 + i, dport=BWN_UDP_PORT) / BWN(kind=0, flags=FLAG_XR) / xr
        else:
            pkt = l2l3 / UDP(sport=40000 + i, dport=BWN_UDP_PORT) / BWN(kind=0)
        pad = FRAME_BYTES - len(pkt)
        out.append(bytes(pkt / (b"\x00" * pad)))
    return out


def write_template(path: Path, pkts: list[bytes]) -> Path:
    """The C generator's template file (benchmarks/pktgen/bwn_pktgen.c): one frame
    per line in hex, sent in this order, cyclically, as the Python generator sends them."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# switch_pps.py frames: {len(pkts)} frames, sent in this order, cyclically\n"
                    + "".join(p.hex() + "\n" for p in pkts))
    return path


# ----------------------------------------------------------------------------- programming
def program_switch(sw: Bmv2Switch, program: str, window_us: int | None,
                   candidate_dir: Path | None = None) -> object:
    """Push the pipeline and the state a one-route experiment has; returns the session.
    Program `candidate` is bwn.p4 as compiled into `candidate_dir` (--candidate)."""
    from controller import entries as ent
    from controller.p4rt import SyncSwitch, pipeline_files

    if program == "plain":
        p4info, blob = pipeline_files(REPO / "build" / "plain", "plain_ipv4")
        s = SyncSwitch(sw.name, sw.grpc_addr, p4info=p4info, p4blob=blob)
        import finsy as fy
        s.insert([fy.P4TableEntry("PlainIngress.ipv4_lpm",
                                  match=fy.P4TableMatch(dst_addr=(0x0A000200, 24)),
                                  action=fy.P4TableAction("PlainIngress.route", port=2,
                                                          dst_mac=ent.mac_to_int(H2_MAC),
                                                          src_mac=ent.mac_to_int(SW_MAC)))])
        return s
    p4info, blob = pipeline_files(candidate_dir) if program == "candidate" else pipeline_files()
    s = SyncSwitch(sw.name, sw.grpc_addr, p4info=p4info, p4blob=blob)
    window = ent.WindowConfig()
    # What the controller installs (controller/switchctl.py, _on_ready).
    s.modify(ent.window_config(window))
    s.insert(ent.static_tables(window))
    s.insert(ent.route("10.0.2.0/24", 2, H2_MAC, SW_MAC) + [ent.port_capacity(2, 1e9, window)]
             + [ent.xcp_port(2), ent.rcp_port(2)])     # the xcp and rcp classes' routers
    s.insert([ent.telemetry_digest()])
    s.digests = s.start_digests(ent.TELEMETRY_DIGEST)
    if window_us == 1:
        # Every packet closes a window (1 us windows; the controller allows >= 64 us).
        import finsy as fy
        s.modify([fy.P4TableEntry(f"{ent.INGRESS}.window_config", is_default_action=True,
                                  action=fy.P4TableAction(f"{ent.INGRESS}.roll_window", mask=(1 << 48) - 1,
                                                          window_us=1, flow_mask=(1 << 32) - 1,
                                                          flow_window_us=1))])
    return s


def switch_cpu_s(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of process `pid`, all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def thread_cpu_s(pid: int) -> dict[int, float]:
    """User + system CPU seconds of each thread of process `pid`, by thread id."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:      # the thread ended
            continue
        out[int(tid)] = (int(fields[11]) + int(fields[12])) / tick
    return out


def busiest_threads_us(before: dict[int, float], after: dict[int, float], packets: int,
                       n: int = BUSY_THREADS) -> list[float]:
    """CPU us per packet of the `n` threads that used the most CPU between two
    `thread_cpu_s` readings, in thread-id order (the order BMv2 started them)."""
    used = {tid: after[tid] - before.get(tid, 0.0) for tid in after}
    top = sorted(sorted(used, key=used.__getitem__, reverse=True)[:n])
    return [used[tid] / packets * 1e6 for tid in top]


# ----------------------------------------------------------------------------- measurement
@dataclass
class Sample:
    pps: float
    cpu_us_per_pkt: float
    lost: int
    user_us_per_pkt: float = 0.0    # of cpu_us_per_pkt: the switch in user space (the pipeline)
    generator_us_per_pkt: float = 0.0   # this process (the closed-loop generator), user + system
    threads_us_per_pkt: tuple[float, ...] = ()   # the switch's busiest threads, in start order
    machine_us_per_pkt: float = 0.0     # every CPU's busy time, generator included
    cpu_busy: tuple[float, ...] = ()    # each CPU's busy fraction over the measurement
    kinds_us_per_pkt: dict[str, float] | None = None   # the machine's busy time by kind (/proc/stat)


def closed_loop(tx: socket.socket, rx: socket.socket, pkts: list[bytes], seconds: float,
                inflight: int, count: int | None = None) -> tuple[int, int, float]:
    """Keep `inflight` frames in the switch for `seconds` (or until `count` came out).
    Returns (frames out, frames lost, elapsed s)."""
    rx.settimeout(0.2)
    buf = bytearray(2048)
    sent = got = lost = 0
    t0 = time.monotonic()
    end = t0 + seconds
    while time.monotonic() < end and (count is None or got < count):
        while sent - got - lost < inflight:
            tx.send(pkts[sent % len(pkts)])
            sent += 1
        try:
            n = rx.recv_into(buf)
        except socket.timeout:
            lost = sent - got  # nothing came out for 0.2 s: whatever is in flight is gone
            continue
        if n >= 34 and buf[12:14] == b"\x08\x00":
            got += 1
    return got, lost, time.monotonic() - t0


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class _Msghdr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32), ("iov", ctypes.POINTER(_Iovec)),
                ("iovlen", ctypes.c_size_t), ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                ("flags", ctypes.c_int)]


class _Mmsghdr(ctypes.Structure):
    _fields_ = [("hdr", _Msghdr), ("len", ctypes.c_uint)]


MSG_WAITFORONE = 0x10000


class Batched:
    """The generator's socket calls in batches (sendmmsg, recvmmsg through ctypes):
    its cost per frame is then the kernel's, not Python's, so that a switch that
    forwards faster than a frame-by-frame Python loop can send is still measured
    (the eBPF switch forwards in the sending call's own softirq). Receiving blocks
    (up to 0.2 s) until at least one frame is there, as the frame loop's recv does."""

    def __init__(self, tx: socket.socket, rx: socket.socket, pkts: list[bytes], batch: int) -> None:
        self.libc = ctypes.CDLL("libc.so.6", use_errno=True)
        self.batch = batch
        self.tx_fd, self.rx_fd = tx.fileno(), rx.fileno()
        rx.setblocking(True)
        tv = (ctypes.c_long * 2)(0, 200_000)            # SO_RCVTIMEO: 0.2 s
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, bytes(tv))
        self._bufs = [ctypes.create_string_buffer(p, len(p)) for p in pkts]
        self._tx_iov = (_Iovec * batch)()
        self._tx = (_Mmsghdr * batch)()
        for i in range(batch):
            b = self._bufs[i % len(self._bufs)]
            self._tx_iov[i].base, self._tx_iov[i].len = ctypes.addressof(b), len(pkts[i % len(pkts)])
            self._tx[i].hdr.iov, self._tx[i].hdr.iovlen = ctypes.pointer(self._tx_iov[i]), 1
        self._rx_bufs = [ctypes.create_string_buffer(2048) for _ in range(batch)]
        self._rx_iov = (_Iovec * batch)()
        self._rx = (_Mmsghdr * batch)()
        for i, b in enumerate(self._rx_bufs):
            self._rx_iov[i].base, self._rx_iov[i].len = ctypes.addressof(b), 2048
            self._rx[i].hdr.iov, self._rx[i].hdr.iovlen = ctypes.pointer(self._rx_iov[i]), 1

    def send(self, n: int) -> int:
        sent = self.libc.sendmmsg(self.tx_fd, self._tx, min(n, self.batch), 0)
        return max(sent, 0)

    def recv(self) -> int:
        """IPv4 frames received in one call; -1 when none came for 0.2 s."""
        n = self.libc.recvmmsg(self.rx_fd, self._rx, self.batch, MSG_WAITFORONE, None)
        if n <= 0:
            return -1
        return sum(1 for i in range(n) if self._rx[i].len >= 34 and self._rx_bufs[i].raw[12:14] == b"\x08\x00")


def closed_loop_batched(gen: Batched, seconds: float, inflight: int) -> tuple[int, int, float]:
    """closed_loop with batched calls: keep `inflight` frames in the switch."""
    sent = got = lost = 0
    t0 = time.monotonic()
    end = t0 + seconds
    while time.monotonic() < end:
        room = inflight - (sent - got - lost)
        if room > 0:
            sent += gen.send(room)
        n = gen.recv()
        if n < 0:
            lost = sent - got
            continue
        got += n
    return got, lost, time.monotonic() - t0


def open_loop(gen: Batched, rx_packets: "Callable[[], int]", seconds: float) -> tuple[int, int, float]:
    """Send as fast as the batched calls go for `seconds`, whatever comes out;
    count what port 2 delivered from its peer's interface counter (no receiving
    socket: its copies would be the generator's cost). What the switch could not
    take is lost (its input queues overflowed)."""
    before = rx_packets()
    sent = 0
    t0 = time.monotonic()
    end = t0 + seconds
    while time.monotonic() < end:
        sent += gen.send(gen.batch)
    elapsed = time.monotonic() - t0
    time.sleep(0.5)                     # what is still queued in the switch comes out
    got = rx_packets() - before
    return got, max(0, sent - got), elapsed


def drain(rx: socket.socket) -> None:
    rx.settimeout(0.3)
    try:
        while True:
            rx.recv(2048)
    except socket.timeout:
        pass


SO_ATTACH_FILTER, SO_DETACH_FILTER = 26, 27


def mute(sock: socket.socket, on: bool) -> None:
    """Make the Python generator's receiving socket drop every frame in the kernel
    (a classic BPF filter `ret #0`) while the C generator runs, so that it does not
    copy the frames the C generator counts (`on` False: take the filter off)."""
    if not on:
        sock.setsockopt(socket.SOL_SOCKET, SO_DETACH_FILTER, 0)
        return
    code = ctypes.create_string_buffer(struct.pack("HBBI", 0x06, 0, 0, 0), 8)   # BPF_RET|BPF_K, 0
    prog = struct.pack("HxxxxxxQ", 1, ctypes.addressof(code))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, prog)


class PythonGenerator:
    """The generator in this process (--generator python): --loop frame, batched or
    open; a second of the frame loop first (the warm-up)."""

    def __init__(self, bench: "Bench", pkts: list[bytes]) -> None:
        self.bench, self.pkts = bench, pkts

    def start(self) -> None:
        closed_loop(self.bench.tx, self.bench.rx, self.pkts, 1.0, self.bench.args.inflight)  # warm up
        drain(self.bench.rx)

    def run(self) -> tuple[int, int, float, float]:
        """(frames out, frames lost, elapsed s, the generator's CPU s)."""
        t0 = os.times()
        got, lost, elapsed = self.bench.loop(self.pkts)
        t1 = os.times()
        return got, lost, elapsed, (t1.user - t0.user) + (t1.system - t0.system)

    def close(self) -> None:
        drain(self.bench.rx)


class CGenerator:
    """benchmarks/pktgen/bwn_pktgen.c (--generator c) on the same ports and the same
    frames (a template file written from frames()), in the generator's namespace,
    pinned to --generator-cpu; its warm-up is the same mode for a second. It waits
    after the warm-up until run() says go, so that the switch's and the machine's
    counters are read when its measurement starts; its CPU is its own getrusage."""

    def __init__(self, bench: "Bench", traffic: str, pkts: list[bytes]) -> None:
        a = bench.args
        tpl = write_template(Path(a.log_dir) / f"pktgen-{traffic}.tpl", pkts)
        self.cmd = [str(a.pktgen), "--template", str(tpl), "--netns", bench.ns, "--tx", "hp1", "--rx", "hp2",
                    "--seconds", f"{a.seconds:g}", "--batch", str(a.batch), "--warmup", "1", "--wait-go"]
        if a.loop == "open":
            self.cmd += ["--mode", "open", "--rate", f"{a.rate:g}"]
        else:
            self.cmd += ["--mode", "closed", "--inflight", str(a.inflight)]
        if a.generator_cpu >= 0:
            self.cmd += ["--cpu", str(a.generator_cpu)]
        self.bench = bench
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        mute(self.bench.rx, True)
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            self.proc.wait(timeout=10)
            raise RuntimeError(f"{' '.join(self.cmd)}: {line.strip()} {self.proc.stderr.read().strip()}")

    def run(self) -> tuple[int, int, float, float]:
        assert self.proc is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=10)
            raise RuntimeError(f"{' '.join(self.cmd)} failed: {self.proc.stderr.read().strip()}")
        r = json.loads(line)
        return r["received"], r["lost"], r["elapsed_s"], r["user_s"] + r["sys_s"]

    def close(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()                 # this one process, by its pid
            self.proc.wait()
            for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                f.close()
        mute(self.bench.rx, False)


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.nets = NetnsSet()
        self.ns = self.nets.add_netns("bwnpps")
        # The switch runs in the root namespace (as in Mininet), so that its gRPC and
        # Thrift servers are on this process's loopback; the generator's ends are in ns.
        tag = self.nets.tag
        self.sw_ports = {1: f"pps{tag}s1", 2: f"pps{tag}s2"}
        # NIKSS's XDP helper needs the veth peer's MTU under a page (eBPF build).
        mtu = 1500 if set(args.builds.split(",")) & set(EBPF_BUILDS) else 9000
        self.nets.veth(self.sw_ports[1], "hp1", None, self.ns, mtu=mtu)
        self.nets.veth(self.sw_ports[2], "hp2", None, self.ns, mtu=mtu)
        with InNetns(self.ns):
            self.tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
            self.tx.bind(("hp1", 0))
            self.rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            self.rx.bind(("hp2", 0))
            self.rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
            # hp2's counters, read from here later (a /proc/net file is bound to the
            # namespace of the thread that opened it)
            self.net_dev_fd = os.open("/proc/thread-self/net/dev", os.O_RDONLY)
        self.log_dir = Path(args.log_dir)
        self.port = 50300 + (os.getpid() % 500) * 4

    def switch(self, binary: str, wrapper: list[str] | None = None) -> Bmv2Switch:
        self.port += 2
        sw = Bmv2Switch("pps", dict(self.sw_ports), grpc_port=self.port, thrift_port=self.port + 1,
                        log_dir=self.log_dir, binary=binary, wrapper=wrapper or [])
        return sw.start(timeout_s=600 if wrapper else 30)

    def hp2_rx_packets(self) -> int:
        for line in os.pread(self.net_dev_fd, 65536, 0).decode().splitlines():
            name, _, rest = line.partition(":")
            if name.strip() == "hp2":
                return int(rest.split()[1])
        raise RuntimeError("hp2 is not in the generator's namespace")

    def loop(self, pkts: list[bytes]) -> tuple[int, int, float]:
        """One measurement of the Python generator, the way --loop names."""
        if self.args.loop == "open":
            return open_loop(Batched(self.tx, self.rx, pkts, self.args.batch), self.hp2_rx_packets,
                             self.args.seconds)
        if self.args.loop == "batched":
            got, lost, elapsed = closed_loop_batched(Batched(self.tx, self.rx, pkts, self.args.batch),
                                                     self.args.seconds, self.args.inflight)
            self.rx.settimeout(None)
            return got, lost, elapsed
        return closed_loop(self.tx, self.rx, pkts, self.args.seconds, self.args.inflight)

    def generator(self, traffic: str, pkts: list[bytes]) -> "PythonGenerator | CGenerator":
        if self.args.generator == "c":
            return CGenerator(self, traffic, pkts)
        return PythonGenerator(self, pkts)

    def measure(self, binary: str, program: str, traffic: str) -> Sample:
        if binary in EBPF_BUILDS:
            return self.measure_ebpf(traffic, *EBPF_BUILDS[binary])
        sw = self.switch(binary)
        try:
            session = program_switch(sw, program, 1 if traffic == "window-first" else None,
                                     Path(self.args.candidate) if self.args.candidate else None)
            try:
                sw.cli("set_queue_depth 1000\n")
                pkts = frames("data" if traffic == "window-first" else traffic)
                gen = self.generator(traffic, pkts)
                try:
                    gen.start()
                    cpu0, threads0 = switch_cpu_s(sw.proc.pid), thread_cpu_s(sw.proc.pid)
                    stat0, cpus0, w0 = read_proc_stat(), read_cpus(), time.monotonic()
                    got, lost, elapsed, gen_s = gen.run()
                    stat1, cpus1, w1 = read_proc_stat(), read_cpus(), time.monotonic()
                    cpu1, threads1 = switch_cpu_s(sw.proc.pid), thread_cpu_s(sw.proc.pid)
                finally:
                    gen.close()
            finally:
                session.close()
        finally:
            sw.stop()
        if got == 0:
            raise RuntimeError(f"{program}/{traffic}: no frame came out of port 2 (see {sw.log_path})")
        user_s, sys_s = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
        return Sample(got / elapsed, (user_s + sys_s) / got * 1e6, lost, user_s / got * 1e6,
                      gen_s / got * 1e6, tuple(busiest_threads_us(threads0, threads1, got)),
                      busy_s(stat0, stat1) / got * 1e6, *cpu_usage(cpus0, cpus1, got, w1 - w0))

    def measure_ebpf(self, traffic: str, steered: bool, xdp_helper: bool) -> Sample:
        """bwn on eBPF: the PSA program under NIKSS on the same ports."""
        from controller import ebpf as eb
        from controller import entries as ent
        from controller.nikss import Pipeline

        sw = eb.EbpfSwitch("pps-ebpf", dict(self.sw_ports), eb.pipeline_id(95),
                           cpu=eb.switch_cpu(0) if steered else None,
                           log_dir=self.log_dir, xdp_helper=xdp_helper).start()
        try:
            with Pipeline(sw.pipe_id) as pipe:
                window = ent.WindowConfig()
                wc = eb.window_config(window)
                if traffic == "window-first":   # every packet closes a window (1 us windows)
                    wc = eb.Entry(wc.table, wc.action, (), ((1 << 64) - 1, 1, (1 << 32) - 1, 1))
                pipe.table_default(wc.table, wc.action, wc.params)
                for e in eb.static_tables(window):
                    e.add(pipe)
                ifx = sw.ifindexes()
                eb.route("10.0.2.0/24", ifx[2], 2, H2_MAC, SW_MAC).add(pipe)
                eb.port_capacity(2, 1e9, window).add(pipe)
                pkts = frames("data" if traffic == "window-first" else traffic)
                gen = self.generator(traffic, pkts)
                try:
                    gen.start()
                    stat0, cpus0, w0 = read_proc_stat(), read_cpus(), time.monotonic()
                    got, lost, elapsed, gen_s = gen.run()
                    stat1, cpus1, w1 = read_proc_stat(), read_cpus(), time.monotonic()
                finally:
                    gen.close()
        finally:
            sw.stop()
        if got == 0:
            raise RuntimeError(f"ebpf/{traffic}: no frame came out of port 2 (see {sw.log_path})")
        machine_s = busy_s(stat0, stat1)
        return Sample(got / elapsed, max(0.0, machine_s - gen_s) / got * 1e6, lost, 0.0, gen_s / got * 1e6,
                      (), machine_s / got * 1e6, *cpu_usage(cpus0, cpus1, got, w1 - w0))

    def callgrind(self, binary: str, program: str, traffic: str, n: int, out: Path) -> float:
        """Instructions per packet over `n` packets (after warm-up), profile in `out`."""
        wrapper = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"]
        sw = self.switch(binary, wrapper)
        try:
            session = program_switch(sw, program, 1 if traffic == "window-first" else None,
                                     Path(self.args.candidate) if self.args.candidate else None)
            try:
                sw.cli("set_queue_depth 1000\n")
                pkts = frames("data" if traffic == "window-first" else traffic)
                closed_loop(self.tx, self.rx, pkts, 60.0, 8, count=50)
                drain(self.rx)
                pid = sw.proc.pid
                subprocess.run(["callgrind_control", "-i", "on", str(pid)], check=True, capture_output=True)
                got, _, _ = closed_loop(self.tx, self.rx, pkts, 600.0, 8, count=n)
                subprocess.run(["callgrind_control", "-i", "off", str(pid)], check=True, capture_output=True)
                drain(self.rx)
            finally:
                session.close()
        finally:
            sw.stop(timeout_s=60)
        total = 0
        for f in out.parent.glob(out.name + "*"):
            for line in f.read_text().splitlines():
                if line.startswith("summary:") or line.startswith("totals:"):
                    total = max(total, int(line.split()[1]))
        return total / got

    def close(self) -> None:
        self.tx.close()
        self.rx.close()
        os.close(self.net_dev_fd)
        self.nets.close()


def read_cpus() -> dict[str, list[int]]:
    """/proc/stat's per-CPU lines: CPU name (cpu0, ...) -> ticks of each kind
    (probes.CPU_TIME_FIELDS: user, nice, system, idle, iowait, irq, softirq, steal)."""
    out = {}
    with open("/proc/stat", "rb") as fh:
        for line in fh.read().decode().splitlines():
            name, _, rest = line.partition(" ")
            if name.startswith("cpu") and name != "cpu":
                out[name] = [int(v) for v in rest.split()[:len(CPU_TIME_FIELDS)]]
    return out


def cpu_usage(before: dict[str, list[int]], after: dict[str, list[int]], packets: int,
              window_s: float) -> tuple[tuple[float, ...], dict[str, float]]:
    """Where the machine's CPU went between two read_cpus() readings `window_s`
    apart: each CPU's busy fraction (in CPU order), and us per packet of each busy
    kind over all CPUs (user with nice, system, softirq with irq: softirq is where
    the kernel's packet paths run, the eBPF switch's included, and steal).

    A CPU's busy fraction is 1 - its idle time / the window: a tickless kernel
    measures idle time exactly, while it samples busy time at its ticks, which
    miss short bursts between idle periods (a CPU that the eBPF switch's packets
    wake up thousands of times a second: its ticks then add up to well under the
    window). The busy kinds, like "machine CPU/packet", are the sampled ticks."""
    tick = os.sysconf("SC_CLK_TCK")
    idle = {CPU_TIME_FIELDS.index("idle"), CPU_TIME_FIELDS.index("iowait")}
    busy = []
    kinds = dict.fromkeys(("user", "system", "softirq", "steal"), 0.0)
    merge = {"user": "user", "nice": "user", "system": "system", "irq": "softirq", "softirq": "softirq",
             "steal": "steal"}
    for cpu in sorted(after, key=lambda c: int(c[3:])):
        d = [a - b for a, b in zip(after[cpu], before.get(cpu, after[cpu]))]
        busy.append(min(1.0, max(0.0, 1.0 - sum(d[i] for i in idle) / tick / window_s)) if window_s > 0 else 0.0)
        for i, v in enumerate(d):
            if CPU_TIME_FIELDS[i] in merge:
                kinds[merge[CPU_TIME_FIELDS[i]]] += v / tick / max(packets, 1) * 1e6
    return tuple(busy), kinds


def busy_s(before: tuple[float, float], after: tuple[float, float]) -> float:
    """Busy CPU seconds of all CPUs between two read_proc_stat() readings."""
    tick = os.sysconf("SC_CLK_TCK")
    return ((after[0] - before[0]) - (after[1] - before[1])) / tick


def paired_ratio(pps: list[float], plain_pps: list[float]) -> str:
    """Mean and 95 % t-interval of the per-round ratios pps / plain router's pps:
    both were measured in the same round, so drift of the machine between rounds
    cancels in each ratio (it does not in the ratio of the two medians)."""
    return mean_interval([a / b for a, b in zip(pps, plain_pps)]).text()


def print_threads(results: dict[tuple[str, str, str], list[Sample]]) -> None:
    """Where a packet's CPU goes: the switch's busiest threads (in the order BMv2
    started them: packet in, ingress, egress, transmit) and the generator, median
    over the rounds. A program whose threads together need more CPU per packet
    than another's forwards fewer packets on the same cores."""
    print(f"\n| BMv2 build | program | traffic | us CPU/packet of the switch's {BUSY_THREADS} busiest threads "
          "(start order) | their sum | generator |")
    print("|---|---|---|---|---|---|")
    for (b, p, c), ss in results.items():
        ss = [s for s in ss if len(s.threads_us_per_pkt) == BUSY_THREADS]
        if not ss:
            continue
        per_thread = [statistics.median(s.threads_us_per_pkt[i] for s in ss) for i in range(BUSY_THREADS)]
        print(f"| {b} | {p} | {c} | {' / '.join(f'{x:.2f}' for x in per_thread)} | "
              f"{statistics.median(sum(s.threads_us_per_pkt) for s in ss):.2f} | "
              f"{statistics.median(s.generator_us_per_pkt for s in ss):.2f} |")


def print_cpus(results: dict[tuple[str, str, str], list[Sample]]) -> None:
    """Where the machine's CPU went (every build): each CPU's busy share, and the
    machine's busy time per packet by kind, median over the rounds. A CPU busy all
    the time is what bounds the rate; with the C generator pinned, it has one CPU
    and the switch (the eBPF switch's ports are steered to the first) the other."""
    n = max((len(s.cpu_busy) for ss in results.values() for s in ss), default=0)
    if not n:
        return
    print(f"\n| build | program | traffic | busy % (1 - idle) of {' / '.join(f'CPU {i}' for i in range(n))} "
          "| machine us CPU/packet: user / system / softirq (+irq) / steal | generator us CPU/packet |")
    print("|---|---|---|---|---|---|")
    for (b, p, c), ss in results.items():
        ss = [s for s in ss if len(s.cpu_busy) == n and s.kinds_us_per_pkt]
        if not ss:
            continue
        busy = " / ".join(f"{100 * statistics.median(s.cpu_busy[i] for s in ss):.0f}" for i in range(n))
        kinds = " / ".join(f"{statistics.median(s.kinds_us_per_pkt[k] for s in ss):.2f}"
                           for k in ("user", "system", "softirq", "steal"))
        print(f"| {b} | {p} | {c} | {busy} | {kinds} | "
              f"{statistics.median(s.generator_us_per_pkt for s in ss):.2f} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=8.0, help="measurement per (build, program, class, round)")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved repetitions (median and range reported)")
    ap.add_argument("--builds", default="default,fast",
                    help="BMv2 builds: default (on PATH), fast (/opt/bmv2-perf); the eBPF switch: ebpf (as "
                         "experiments run it), ebpf-xdp (NIKSS's XDP helper kept on its ports), ebpf-unsteered "
                         "(its ports not steered to one CPU)")
    ap.add_argument("--classes", default="data,plain,window-first", help="traffic classes (see above)")
    ap.add_argument("--programs", default="plain,bwn", help="programs to measure: plain, bwn (default both)")
    ap.add_argument("--inflight", type=int, default=32, help="frames kept inside the switch")
    ap.add_argument("--callgrind", type=int, default=0, metavar="N",
                    help="also count instructions per packet over N packets under callgrind (fast build)")
    ap.add_argument("--candidate", metavar="DIR", help="also measure bwn.p4 as compiled into DIR (program `candidate`)")
    ap.add_argument("--threads", action="store_true",
                    help="also print CPU per packet of the switch's busiest threads and of the generator")
    ap.add_argument("--profile-dir", default="build/switch-pps", help="callgrind profiles and switch logs")
    ap.add_argument("--log-dir", default="build/switch-pps")
    ap.add_argument("--target", choices=("bmv2", EBPF), default="bmv2",
                    help="ebpf: also measure bwn on eBPF (build `ebpf`, make build-ebpf) beside the BMv2 builds "
                         "(and use the C generator, batched, unless --generator and --loop say otherwise)")
    ap.add_argument("--generator", choices=("python", "c") + LOOPS,
                    help="python: this process sends and counts (the default for BMv2 alone, as every figure "
                         "before the eBPF target); c: benchmarks/pktgen/bwn_pktgen.c (make pktgen, run by this "
                         "script when needed), the same frames from a template file, the default when an eBPF "
                         "build is measured (a Python sender cannot keep that switch busy). --generator "
                         "frame|batched|open is read as --generator python --loop ...")
    ap.add_argument("--loop", choices=LOOPS,
                    help="frame: one send and one recv call per frame (Python only; its default for BMv2 "
                         "alone); batched: keep --inflight frames in the switch with sendmmsg/recvmmsg of "
                         "--batch frames (the default otherwise); open: sendmmsg at --rate (0: as fast as "
                         "it goes), frames out counted at port 2's peer (a switch's rate under overload: "
                         "what it takes of what is offered; --inflight does not apply)")
    ap.add_argument("--batch", type=int, default=32, help="frames per call of the batched generator")
    ap.add_argument("--rate", type=float, default=0.0,
                    help="C generator, --loop open: frames offered per second (0: as fast as it goes)")
    ap.add_argument("--generator-cpu", type=int,
                    help="C generator: the CPU it is pinned to (-1: not pinned). Default: the last CPU this "
                         "process may use when there are two or more, which is not the CPU the eBPF switch's "
                         "ports are steered to (the first), in every build's rounds alike")
    ap.add_argument("--write-template", metavar="DIR",
                    help="only write the C generator's template of each --classes class, DIR/CLASS.tpl, and exit")
    args = ap.parse_args(argv)
    if args.target == EBPF and EBPF not in args.builds.split(","):
        args.builds += f",{EBPF}"
    if args.generator in LOOPS:                       # the former spelling
        if args.loop and args.loop != args.generator:
            ap.error(f"--generator {args.generator} and --loop {args.loop} contradict each other")
        args.generator, args.loop = "python", args.generator
    with_ebpf = bool(set(args.builds.split(",")) & set(EBPF_BUILDS))
    if args.generator is None:
        args.generator = "c" if with_ebpf else "python"
    if args.loop is None:
        args.loop = "batched" if with_ebpf or args.generator == "c" else "frame"
    if args.generator == "c" and args.loop == "frame":
        ap.error("the C generator always batches: --loop batched --batch 1 sends one frame per call")
    if args.rate and not (args.generator == "c" and args.loop == "open"):
        ap.error("--rate applies to --generator c --loop open")
    if args.generator_cpu is None:
        cpus = sorted(os.sched_getaffinity(0))
        args.generator_cpu = cpus[-1] if len(cpus) > 1 else -1
    if args.write_template:
        for c in [c for c in args.classes.split(",") if c]:
            print(write_template(Path(args.write_template) / f"{c}.tpl",
                                 frames("data" if c == "window-first" else c)))
        return 0
    args.pktgen = PKTGEN
    if args.generator == "c":
        res = subprocess.run(["make", "--no-print-directory", "-C", str(REPO), "pktgen"],
                             capture_output=True, text=True)
        if res.returncode != 0 or not PKTGEN.exists():
            ap.error(f"make pktgen failed (the C generator):\n{res.stdout}{res.stderr}")
    why = netns_missing()
    if why:
        print(f"switch_pps: {why}", file=sys.stderr)
        return 2
    builds = {}
    for b in args.builds.split(","):
        if b == "default":
            builds[b] = shutil.which(SWITCH_BINARY)
        elif b == "fast":
            builds[b] = fast_switch_binary()
        elif b in EBPF_BUILDS:
            from bwn.requirements import ebpf_missing, ebpf_program_missing
            why = ebpf_missing() or ebpf_program_missing()
            if why:
                ap.error(f"the eBPF switch cannot run here: {why}")
            builds[b] = b
        else:
            ap.error(f"unknown build {b!r} (default, fast, {', '.join(EBPF_BUILDS)})")
        if not builds[b]:
            ap.error(f"BMv2 build {b!r} is not installed (scripts/p4-toolchain.sh installs both)")
    classes = [c for c in args.classes.split(",") if c]
    for c in classes:
        if c not in ("data", "plain", "window-first", "xcp", "rcp"):
            ap.error(f"unknown traffic class {c!r}")
    programs = [p for p in args.programs.split(",") if p]
    if args.candidate:
        for f in ("bwn.json", "bwn.p4info.txtpb"):
            if not (Path(args.candidate) / f).exists():
                ap.error(f"--candidate {args.candidate}: {Path(args.candidate) / f} missing "
                         f"(compile bwn.p4 with p4c -o {args.candidate})")
        programs.append("candidate")
    for p in programs:
        if p not in PROGRAMS and p != "candidate":
            ap.error(f"unknown program {p!r} (plain, bwn)")
    for prog, path in (("plain", REPO / "build/plain/plain_ipv4.json"), ("bwn", REPO / "build/bwn.json")):
        if prog in programs and not path.exists():
            ap.error(f"{path} missing: run `make build` (and `make build-bench` for the plain program)")
    Path(args.profile_dir).mkdir(parents=True, exist_ok=True)

    cases = [(b, p, c) for b in builds for p in programs for c in classes
             if not (p == "plain" and c == "window-first") and not (b in EBPF_BUILDS and p != "bwn")]
    results: dict[tuple[str, str, str], list[Sample]] = {k: [] for k in cases}
    # The machine's experiment lock for the whole measurement: an experiment running
    # beside it would take the CPU it measures (and be judged on a CPU this takes).
    from bwn.emulation.runlock import experiment_lock
    lock = experiment_lock(progress=lambda m: print(m, flush=True))
    lock.__enter__()
    bench = Bench(args)
    try:
        for r in range(args.rounds):
            # Each round starts one case later, so that no case always runs first
            # (or right after the same neighbour) when the machine drifts within a round.
            for case in cases[r % len(cases):] + cases[:r % len(cases)]:
                s = bench.measure(builds[case[0]], case[1], case[2])
                results[case].append(s)
                print(f"round {r + 1}: {case[0]:7s} {case[1]:5s} {case[2]:12s} {s.pps:8.0f} pps "
                      f"{s.cpu_us_per_pkt:6.1f} us CPU/pkt ({s.user_us_per_pkt:4.1f} user)  lost {s.lost}",
                      flush=True)
        ir: dict[tuple[str, str], float] = {}
        if args.callgrind:
            fast = builds.get("fast") or fast_switch_binary()
            for p in programs:
                for c in classes:
                    if p == "plain" and c == "window-first":
                        continue
                    out = Path(args.profile_dir) / f"callgrind.{p}.{c}.out"
                    ir[(p, c)] = bench.callgrind(fast, p, c, args.callgrind, out)
                    print(f"callgrind: {p:5s} {c:12s} {ir[(p, c)]:10.0f} instructions/packet ({out})", flush=True)
    finally:
        bench.close()
        lock.__exit__(None, None, None)

    gen_text = (f"the {args.generator} generator, {args.loop} loop"
                + (f" (offered {args.rate:g} frames/s)" if args.loop == "open" and args.rate else "")
                + (f", {args.inflight} frames in flight" if args.loop != "open" else "")
                + (f", pinned to CPU {args.generator_cpu}" if args.generator == "c" and args.generator_cpu >= 0
                   else ""))

    def med(xs: list[float]) -> str:
        return f"{statistics.median(xs):,.0f} ({min(xs):,.0f}..{max(xs):,.0f})".replace(",", " ")

    print(f"\n### switch_pps: {FRAME_BYTES}-byte frames, {args.rounds} interleaved rounds of {args.seconds:g} s, "
          f"{gen_text}; median (min..max)\n")
    print("| BMv2 build | program | traffic | pps | us CPU/packet (user) | machine us CPU/packet "
          "| pps / plain router, same traffic | per-round ratio, mean [95 % CI] |")
    print("|---|---|---|---|---|---|---|---|")
    for (b, p, c), ss in results.items():
        if not ss:
            continue
        plain = results.get((b, "plain", "data" if c == "window-first" else c))   # the same traffic
        ratio = (f"{statistics.median(s.pps for s in ss) / statistics.median(s.pps for s in plain):.2f}"
                 if plain else "-")
        print(f"| {b} | {p} | {c} | {med([s.pps for s in ss])} | "
              f"{statistics.median(s.cpu_us_per_pkt for s in ss):.1f} "
              f"({statistics.median(s.user_us_per_pkt for s in ss):.1f}) | "
              f"{statistics.median(s.machine_us_per_pkt for s in ss):.1f} | {ratio} | "
              f"{paired_ratio([x.pps for x in ss], [x.pps for x in plain]) if plain else '-'} |")
    ebpf_pairs = [(c, results[(EBPF, "bwn", c)], results.get(("fast", "bwn", c))) for c in classes
                  if results.get((EBPF, "bwn", c))]
    if any(fast for _, _, fast in ebpf_pairs):
        print("\n| traffic | bwn on eBPF / bwn on the fast BMv2: per-round pps ratio, mean [95 % CI] "
              "| per-round machine CPU/packet ratio |")
        print("|---|---|---|")
        for c, ebpf, fast in ebpf_pairs:
            if fast:
                print(f"| {c} | {paired_ratio([x.pps for x in ebpf], [x.pps for x in fast])} | "
                      f"{paired_ratio([x.machine_us_per_pkt for x in ebpf], [x.machine_us_per_pkt for x in fast])} |")
    variants = [(c, b, results[(b, "bwn", c)], results.get((EBPF, "bwn", c))) for c in classes
                for b in EBPF_BUILDS if b != EBPF and results.get((b, "bwn", c))]
    if any(ref for *_, ref in variants):
        print("\n| traffic | eBPF switch | / as experiments run it: per-round pps ratio, mean [95 % CI] "
              "| per-round machine CPU/packet ratio |")
        print("|---|---|---|---|")
        for c, b, ss, ref in variants:
            if ref:
                print(f"| {c} | {b} | {paired_ratio([x.pps for x in ss], [x.pps for x in ref])} | "
                      f"{paired_ratio([x.machine_us_per_pkt for x in ss], [x.machine_us_per_pkt for x in ref])} |")
    if args.threads and args.rounds:
        print_threads(results)
        print_cpus(results)
    pairs = [(k, results.get((k[0], "bwn", k[2]))) for k in results if k[1] == "candidate"]
    if pairs:
        print("\n| BMv2 build | traffic | candidate / bwn.p4, per-round pps ratio, mean [95 % CI] "
              "| per-round CPU/packet ratio |")
        print("|---|---|---|---|")
        for (b, _, c), bwn in pairs:
            cand = results[(b, "candidate", c)]
            if cand and bwn:
                print(f"| {b} | {c} | {paired_ratio([x.pps for x in cand], [x.pps for x in bwn])} | "
                      f"{paired_ratio([x.cpu_us_per_pkt for x in cand], [x.cpu_us_per_pkt for x in bwn])} |")
    if ir:
        print("\n| program | traffic | instructions/packet (callgrind, fast build) | / plain |")
        print("|---|---|---|---|")
        base = ir.get(("plain", "data"))
        for (p, c), v in ir.items():
            ratio = f"{v / base:.2f}" if base else "-"
            print(f"| {p} | {c} | {v:,.0f} | {ratio} |".replace(",", " "))
    return 0


if __name__ == "__main__":
    sys.exit(main())
