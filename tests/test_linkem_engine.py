"""The link emulator's engine in this process (bwn.linkem.LinkEmulator): its raw
sockets, its two workers and its stats, on two veth pairs the test creates in the
root namespace. Frames of a local experimental EtherType (IEEE 802 0x88B5) go in
at one pair's far end and come out at the other's; no IP address is set, so
nothing else is routed over them.

The namespace tests (tests/test_linkem_netns.py) run `bwn-link` as a process and
check timing with real protocols; these check the engine's own contract, fast
enough for the mutation loop (scripts/mutants.py, module linkem)."""
from __future__ import annotations

import errno
import io
import itertools
import json
import os
import select
import socket
import struct
import subprocess
import sys
import threading
import time
import types
from pathlib import Path
from typing import Callable, Iterator

import pytest

from needs import missing, not_root

from bwn.linkem import Impairment, LinkEmulator, LinkGroup
from bwn.linkem import group_cli
from bwn.linkem import rawsock

ETHERTYPE = 0x88B5
PAYLOAD_BYTES = 100


@pytest.fixture(autouse=True)
def _needs_root():
    missing(not_root(), "link emulator engine test")


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def remove_stale_pairs() -> None:
    """Delete the pairs of test processes that died before their clean-up ran (a
    mutation run kills a test that hangs): named bwe<pid in hex><end>."""
    import re
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    for name, pid_hex in re.findall(r"^\d+: (bwe([0-9a-f]+)[a-d][01])@", links, re.M):
        if not os.path.exists(f"/proc/{int(pid_hex, 16)}"):
            subprocess.run(["ip", "link", "del", name], capture_output=True)
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    for name, pid_hex in re.findall(r"^(bwe([0-9a-f]+)n)\b", namespaces, re.M):
        if not os.path.exists(f"/proc/{int(pid_hex, 16)}"):
            subprocess.run(["ip", "netns", "del", name], capture_output=True)


@pytest.fixture
def pairs() -> Iterator[dict[str, str]]:
    """Two veth pairs: the emulator bridges a0 and b0; the test talks through a1, b1."""
    remove_stale_pairs()
    tag = f"{os.getpid():x}"          # at most 6 hex digits (pid_max 2^22): names within 15
    names = {k: f"bwe{tag}{k}" for k in ("a0", "a1", "b0", "b1")}
    made: list[str] = []
    try:
        for end in ("a", "b"):
            _ip("link", "add", names[f"{end}0"], "type", "veth", "peer", "name", names[f"{end}1"])
            made.append(names[f"{end}0"])
        for name in names.values():
            ipv6 = Path(f"/proc/sys/net/ipv6/conf/{name}/disable_ipv6")
            if ipv6.exists():                   # no router solicitations on the test's links
                ipv6.write_text("1\n")
            _ip("link", "set", name, "up")
        yield names
    finally:
        for name in made:
            subprocess.run(["ip", "link", "del", name], capture_output=True)


def _socket(ifname: str) -> socket.socket:
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETHERTYPE))
    sock.bind((ifname, ETHERTYPE))
    return sock


def _frame(seq: int, size: int = PAYLOAD_BYTES) -> bytes:
    payload = struct.pack("!I", seq) + bytes((seq + i) & 0xFF for i in range(size - 4))
    return b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01" + struct.pack("!H", ETHERTYPE) + payload


def _receive(sock: socket.socket, count: int, timeout_s: float = 5.0) -> list[tuple[float, bytes]]:
    got: list[tuple[float, bytes]] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count and time.monotonic() < deadline:
        if select.select([sock], [], [], max(0.0, deadline - time.monotonic()))[0]:
            got.append((time.monotonic(), sock.recv(65535)))
    return got


def _wait_count(emu: LinkEmulator, counter: str, n: int, timeout_s: float = 5.0) -> None:
    """Wait until the a_to_b direction's `counter` reaches n (the worker is a thread)."""
    deadline = time.monotonic() + timeout_s
    while emu.stats()["a_to_b"][counter] < n and time.monotonic() < deadline:
        time.sleep(0.01)


def test_frames_cross_each_way_after_their_delay_intact_and_in_order(pairs):
    a_in, b_out = _socket(pairs["a1"]), _socket(pairs["b1"])
    b_in, a_out = _socket(pairs["b1"]), _socket(pairs["a1"])
    emu = LinkEmulator(pairs["a0"], pairs["b0"], a_to_b=Impairment(delay_us=30_000),
                       b_to_a=Impairment(delay_us=5_000), seed=7, warn=lambda line: None)
    with emu:
        assert emu.running and emu.failed is None
        sent_s = []
        for seq in range(10):
            sent_s.append(time.monotonic())
            a_in.send(_frame(seq))
        got = _receive(b_out, 10)
        b_in.send(_frame(99, 200))
        back = _receive(a_out, 1)
        live = emu.stats()
        assert live["a_to_b"]["forwarded_frames"] == 10          # counters are live while it runs
    assert not emu.running
    assert [frame for _, frame in got] == [_frame(seq) for seq in range(10)]
    assert all(at - sent >= 0.030 for (at, _), sent in zip(got, sent_s))   # never early
    assert [frame for _, frame in back] == [_frame(99, 200)]
    stats = emu.final_stats
    assert emu.stop() is stats                        # stopping again changes nothing
    assert (stats["iface_a"], stats["iface_b"], stats["seed"]) == (pairs["a0"], pairs["b0"], 7)
    assert stats["duration_s"] > 0.03 and stats["schedule_started_s"] is None
    a_to_b, b_to_a = stats["a_to_b"], stats["b_to_a"]
    assert (a_to_b["forwarded_frames"], a_to_b["forwarded_bytes"]) == (10, 10 * len(_frame(0)))
    assert (b_to_a["forwarded_frames"], b_to_a["forwarded_bytes"]) == (1, len(_frame(99, 200)))
    assert a_to_b["config"]["delay_us"] == 30_000 and b_to_a["config"]["delay_us"] == 5_000
    assert a_to_b["lateness"]["frames"] == 10 and b_to_a["lateness"]["frames"] == 1
    for direction in (a_to_b, b_to_a):
        assert direction["pending_at_exit"] == 0 and direction["dropped_loss"] == 0
        assert direction["cpu_s"] >= 0 and direction["wakeups"] >= 1 and "error" not in direction
    assert (a_to_b["rx_frames"], b_to_a["rx_frames"]) == (10, 1)


def test_frames_still_delayed_at_stop_are_counted_not_sent(pairs):
    a_in, b_out = _socket(pairs["a1"]), _socket(pairs["b1"])
    emu = LinkEmulator(pairs["a0"], pairs["b0"], a_to_b=Impairment(delay_us=10_000_000), seed=1,
                       warn=lambda line: None).start()
    for seq in range(3):
        a_in.send(_frame(seq))
    _wait_count(emu, "rx_frames", 3)
    stats = emu.stop(timeout_s=5)
    assert stats["a_to_b"]["pending_at_exit"] == 3 and stats["a_to_b"]["forwarded_frames"] == 0
    assert _receive(b_out, 1, timeout_s=0.2) == []


def test_a_lossy_direction_drops_and_counts(pairs):
    a_in, b_out = _socket(pairs["a1"]), _socket(pairs["b1"])
    with LinkEmulator(pairs["a0"], pairs["b0"], a_to_b=Impairment(loss=1.0), b_to_a=Impairment(),
                      seed=3, warn=lambda line: None) as emu:
        for seq in range(5):
            a_in.send(_frame(seq))
        _wait_count(emu, "dropped_loss", 5)
    assert emu.final_stats["a_to_b"]["dropped_loss"] == 5 and emu.final_stats["a_to_b"]["forwarded_frames"] == 0
    assert _receive(b_out, 1, timeout_s=0.2) == []


def test_an_mtu_mismatch_is_warned_and_frames_too_big_for_the_far_side_are_dropped(pairs):
    _ip("link", "set", pairs["b0"], "mtu", "1400")
    warnings: list[str] = []
    a_in, b_out = _socket(pairs["a1"]), _socket(pairs["b1"])
    with LinkEmulator(pairs["a0"], pairs["b0"], seed=2, warn=warnings.append) as emu:
        a_in.send(_frame(1, 1500))      # fits a0's MTU of 1500, not b0's 1400
        a_in.send(_frame(2, 1000))
        got = _receive(b_out, 1)
    assert [frame for _, frame in got] == [_frame(2, 1000)]
    assert emu.final_stats["a_to_b"]["dropped_oversize"] == 1
    assert warnings[0] == (
        f"bwn-link: warning: MTU 1500 on {pairs['a0']} but 1400 on {pairs['b0']}: frames from "
        f"{pairs['a0']} longer than {pairs['b0']} allows are dropped and counted as oversize "
        f"(ip link set {pairs['b0']} mtu 1500 if the far end takes it)")


def test_a_schedule_started_before_the_workers_is_reported(pairs):
    emu = LinkEmulator(pairs["a0"], pairs["b0"], seed=5, warn=lambda line: None)
    emu.start_schedule(time.monotonic_ns() + 1_000_000_000)      # time 0 one second ahead
    with emu:
        pass
    assert 0.9 < emu.final_stats["schedule_started_s"] < 1.1


def test_bad_interfaces_are_refused_and_nothing_is_left_open(pairs):
    with pytest.raises(ValueError, match="^no such network interface: 'bwe-nope'$"):
        LinkEmulator(pairs["a0"], "bwe-nope").start()
    with pytest.raises(ValueError, match=f"^interface '{pairs['a0']}' given twice: the two ends must differ$"):
        LinkEmulator(pairs["a0"], pairs["a0"])
    emu = LinkEmulator(pairs["a0"], pairs["b0"], warn=lambda line: None)
    assert isinstance(emu.config.seed, int)              # drawn, so the run can be replayed
    with emu:
        with pytest.raises(RuntimeError, match="^emulator already started$"):
            emu.start()


# -- bwn-link's main, in this process ----------------------------------------------------------

@pytest.fixture
def signal_handlers() -> Iterator[None]:
    """bwn-link's main installs its own handlers; the test runner's come back after."""
    import signal
    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1)
    saved = {s: signal.getsignal(s) for s in sigs}
    yield
    for s, handler in saved.items():
        signal.signal(s, handler)


def test_bwn_link_main_runs_for_its_duration_and_writes_its_stats(pairs, signal_handlers, tmp_path, capsys):
    import json
    import threading
    from bwn.linkem import cli
    a_in, b_out = _socket(pairs["a1"]), _socket(pairs["b1"])
    stats_path = tmp_path / "stats.json"
    sender = threading.Timer(0.3, lambda: a_in.send(_frame(5)))
    sender.start()
    code = cli.main([pairs["a0"], pairs["b0"], "--delay-ms", "2", "--seed", "9", "--duration-s", "1",
                     "--stats-json", str(stats_path)])
    sender.join()
    assert code == 0
    assert [frame for _, frame in _receive(b_out, 1, timeout_s=0.5)] == [_frame(5)]
    stats = json.loads(stats_path.read_text())
    assert stats_path.read_text() == json.dumps(stats, indent=2, sort_keys=True) + "\n"
    assert not list(tmp_path.glob("stats.json.tmp*"))            # written whole, then renamed
    assert stats["exit"] == "stopped" and stats["seed"] == 9 and 1.0 <= stats["duration_s"] < 3.0
    assert stats["a_to_b"]["forwarded_frames"] == 1 and stats["a_to_b"]["config"]["delay_us"] == 2000
    out, err = capsys.readouterr()
    assert err.startswith(f"bwn-link: ready: {pairs['a0']} <-> {pairs['b0']} (seed 9, pid {os.getpid()}); "
                          "SIGINT/SIGTERM to stop\n")
    assert out == cli.format_stats({k: v for k, v in stats.items() if k != "exit"}) + "\n"


def test_bwn_link_main_quiet_prints_nothing_and_sigterm_stops_it(pairs, signal_handlers, capsys):
    import signal
    import threading
    from bwn.linkem import cli
    threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGTERM)).start()
    started = time.monotonic()
    assert cli.main([pairs["a0"], pairs["b0"], "--quiet"]) == 0         # no --duration-s: until signalled
    assert time.monotonic() - started < 5
    assert capsys.readouterr() == ("", "")


def test_bwn_link_main_refuses_what_it_cannot_run(pairs, signal_handlers, capsys):
    from bwn.linkem import cli
    with pytest.raises(SystemExit) as exit_:
        cli.main([pairs["a0"], pairs["b0"], "--rt-priority", "100"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.endswith("bwn-link: error: --rt-priority must be between 0 and 99\n")


def _promiscuity(ifname: str) -> int:
    import json
    out = subprocess.run(["ip", "-j", "-d", "link", "show", "dev", ifname], capture_output=True, text=True).stdout
    return json.loads(out)[0]["promiscuity"]


def test_bwn_link_main_listens_promiscuously_unless_told_and_sigusr1_starts_the_schedules(
        pairs, signal_handlers, tmp_path):
    """Promiscuous by default (frames for the far end's MAC must be read), released at
    exit; SIGUSR1 gives the rate schedules their time 0; priority 99 is allowed."""
    import json
    import signal
    import threading
    from bwn.linkem import cli
    seen: dict[str, int] = {}

    def during() -> None:
        seen["a0"] = _promiscuity(pairs["a0"])
        os.kill(os.getpid(), signal.SIGUSR1)
    threading.Timer(0.3, during).start()
    stats_path = tmp_path / "s.json"
    assert cli.main([pairs["a0"], pairs["b0"], "--duration-s", "0.8", "--quiet", "--rt-priority", "99",
                     "--stats-json", str(stats_path)]) == 0
    stats = json.loads(stats_path.read_text())
    assert seen["a0"] == 1 and _promiscuity(pairs["a0"]) == 0
    assert 0.2 < stats["schedule_started_s"] < 0.8
    threading.Timer(0.3, lambda: seen.update(quiet=_promiscuity(pairs["a0"]))).start()
    assert cli.main([pairs["a0"], pairs["b0"], "--duration-s", "0.6", "--quiet", "--no-promisc"]) == 0
    assert seen["quiet"] == 0


def test_the_same_seed_drops_the_same_frames(pairs):
    """A run is replayable: each direction's draws come from the link's seed."""
    a_in, b_out = _socket(pairs["a1"]), _socket(pairs["b1"])
    kept = []
    for _ in range(2):
        with LinkEmulator(pairs["a0"], pairs["b0"], a_to_b=Impairment(loss=0.5), b_to_a=Impairment(),
                          seed=11, warn=lambda line: None) as emu:
            for seq in range(40):
                a_in.send(_frame(seq))
            _wait_count(emu, "rx_frames", 40)
            got = _receive(b_out, 40 - emu.stats()["a_to_b"]["dropped_loss"])
        kept.append([struct.unpack("!I", frame[14:18])[0] for _, frame in got])
    assert kept[0] == kept[1] and 5 < len(kept[0]) < 35


def test_defaults_promiscuous_normal_priority_and_a_32_bit_seed(pairs):
    emu = LinkEmulator(pairs["a0"], pairs["b0"], warn=lambda line: None)
    assert 0 <= emu.config.seed < 2 ** 32
    with emu:
        out = subprocess.run(["ip", "-d", "link", "show", "dev", pairs["b0"]], capture_output=True, text=True).stdout
        assert "promiscuity 1" in out
    assert emu.final_stats["realtime"] is False


def test_the_mtu_warning_names_the_larger_side_either_way(pairs):
    _ip("link", "set", pairs["a0"], "mtu", "1300")
    warnings: list[str] = []
    with LinkEmulator(pairs["a0"], pairs["b0"], seed=2, warn=warnings.append):
        pass
    assert warnings[0].startswith(f"bwn-link: warning: MTU 1500 on {pairs['b0']} but 1300 on {pairs['a0']}: ")


def test_a_config_or_per_direction_impairments_not_both():
    from bwn.linkem import LinkConfig
    config = LinkConfig.symmetric(Impairment(delay_us=5))
    assert config.a_to_b == config.b_to_a == Impairment(delay_us=5)
    for kw in ({"a_to_b": Impairment()}, {"b_to_a": Impairment()}, {"seed": 3}):
        with pytest.raises(ValueError, match="^give either config or a_to_b/b_to_a/seed, not both$"):
            LinkEmulator("x0", "x1", config=config, **kw)


def test_raw_sockets_ignore_their_own_output_and_get_their_buffers(pairs):
    from bwn.linkem import rawsock
    rx, ignores = rawsock.open_rx_socket(pairs["a0"])
    tx = rawsock.open_tx_socket(pairs["a0"])
    try:
        assert ignores is True                 # PACKET_IGNORE_OUTGOING: Linux >= 4.20, as here
        assert rx.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) >= rawsock.RX_BUFFER_BYTES
        assert tx.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) >= rawsock.TX_BUFFER_BYTES
        assert rawsock.kernel_drops(rx) == 0
        assert rawsock.interface_mtu(pairs["a0"]) == 1500
    finally:
        rx.close()
        tx.close()
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        assert rawsock.kernel_drops(udp) == 0          # not a packet socket: nothing to count
        # without the right to force a size, the plain option (capped by net.core.rmem_max)
        rawsock._set_buffer(udp, 0x7FFF, socket.SO_RCVBUF, 65536)
        assert udp.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) >= 65536
    finally:
        udp.close()


def test_stats_before_the_start_and_rounded_after_it(pairs):
    emu = LinkEmulator(pairs["a0"], pairs["b0"], seed=1, warn=lambda line: None)
    before = emu.stats()
    assert before["duration_s"] == 0.0 and before["schedule_started_s"] is None and before["realtime"] is False
    assert "lateness" not in before["a_to_b"]                       # no worker yet
    emu.start_schedule(time.monotonic_ns())
    with emu:
        time.sleep(0.05)
    stats = emu.final_stats
    for value in (stats["duration_s"], stats["schedule_started_s"]):
        assert value == round(value, 6)
    assert stats["schedule_started_s"] <= 0.0                      # time 0 came before the start
    for direction in ("a_to_b", "b_to_a"):
        assert stats[direction]["cpu_s"] == round(stats[direction]["cpu_s"], 4)


def _can_run_realtime() -> bool:
    """Whether a thread of this process may take SCHED_FIFO (CAP_SYS_NICE, no RT throttling refusal)."""
    import threading
    result: list[bool] = []

    def probe() -> None:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
            result.append(True)
        except OSError:
            result.append(False)
    t = threading.Thread(target=probe)
    t.start()
    t.join()
    return result[0]


def test_workers_are_named_daemon_threads_and_take_the_priority_asked(pairs):
    import threading
    with LinkEmulator(pairs["a0"], pairs["b0"], seed=1, rt_priority=1, warn=lambda line: None) as emu:
        threads = {t.name: t for t in threading.enumerate() if t.name.startswith("linkem-")}
        assert set(threads) == {"linkem-a_to_b", "linkem-b_to_a"}
        assert all(t.daemon for t in threads.values())      # never holds the process up
    assert emu.final_stats["realtime"] is _can_run_realtime()


# -- the engine's parts, each seen from outside ------------------------------------------------

def _until(predicate: Callable[[], bool], timeout_s: float = 2.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.002)
    return True


def _rounded_as_documented(stats: dict) -> None:
    """Durations in microseconds, CPU times in tenths of a millisecond."""
    assert stats["duration_s"] == round(stats["duration_s"], 6)
    for direction in ("a_to_b", "b_to_a"):
        if "cpu_s" in stats[direction]:
            assert stats[direction]["cpu_s"] == round(stats[direction]["cpu_s"], 4)


class _ScriptedRx:
    """Stands for a worker's receive socket: what the test feeds comes out of recv() in
    order, each frame behind its virtio_net_hdr, with the errors a packet socket reports
    where the test puts them. A datagram socket pair keeps the order and the readiness."""

    def __init__(self) -> None:
        self._out, self._in = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._out.setblocking(False)
        self._in.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
        self._errors: list[BaseException] = []
        self._calls: list[Callable[[], None]] = []

    def fileno(self) -> int:
        return self._out.fileno()

    def frame(self, frame: bytes, vnet_hdr: bytes = bytes(10)) -> None:
        self.read(vnet_hdr + frame)

    def read(self, data: bytes) -> None:
        """What one recv() returns (a virtio_net_hdr and a frame, or whatever)."""
        self._in.send(b"R" + data)

    def error(self, exc: BaseException) -> None:
        self._errors.append(exc)
        self._in.send(b"E")

    def call(self, fn: Callable[[], None]) -> None:
        """Run fn in the worker's thread at this point of its reads."""
        self._calls.append(fn)
        self._in.send(b"C")

    def recv(self, bufsize: int) -> bytes:
        item = self._out.recv(bufsize + 1)      # longer reads are cut at bufsize, as by the kernel
        if item == b"E":
            raise self._errors.pop(0)
        if item == b"C":
            self._calls.pop(0)()
            return self.recv(bufsize)
        return item[1:]

    def recvfrom(self, bufsize: int) -> tuple[bytes, tuple]:
        return self.recv(bufsize), ("fake0", 3, 0, 1, b"")        # PACKET_HOST

    def close(self) -> None:
        self._out.close()
        self._in.close()


class _Wire:
    """Stands for a worker's transmit socket."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []

    def send(self, frame: bytes) -> int:
        self.frames.append(bytes(frame))
        return len(frame)


@pytest.fixture
def rig() -> Iterator[Callable[..., types.SimpleNamespace]]:
    """Makes one DirectionWorker between a _ScriptedRx and a _Wire (its thread not yet
    started); stops and closes them all at the end."""
    from bwn.linkem import DirectionScheduler
    from bwn.linkem.worker import DirectionWorker
    from bwn.linkem.offload import IngressOffload
    made: list[types.SimpleNamespace] = []

    def make(impairment: Impairment | None = None, bufsize: int = 2048, offload: bool = True,
             **kw) -> types.SimpleNamespace:
        r = types.SimpleNamespace(rx=_ScriptedRx(), wire=_Wire(), warnings=[], wake=os.pipe())
        made.append(r)
        r.sched = DirectionScheduler(impairment or Impairment(), 1)
        fix = IngressOffload(r.sched.counters, 1514, "in0", "out0", r.warnings.append, bufsize) if offload else None
        r.worker = DirectionWorker("a_to_b", r.rx, r.wire, r.sched, r.wake[0], bufsize, offload=fix, **kw)
        r.thread = threading.Thread(target=r.worker.run, daemon=True)
        return r
    yield make
    for r in made:
        _stop_worker(r)
        r.rx.close()
        for fd in r.wake:
            os.close(fd)


def _stop_worker(r: types.SimpleNamespace) -> None:
    r.worker.stopping = True
    os.write(r.wake[1], b"x")
    if r.thread.ident is not None:
        r.thread.join(2)
        assert not r.thread.is_alive()


def test_a_worker_made_alone_runs_at_normal_priority_and_takes_any_frame_up_to_64_kib(rig, capsys):
    r = rig(bufsize=70_000, offload=False)
    w = r.worker
    assert (w.name, w.rt_priority, w.rt_active, w.stopping) == ("a_to_b", 0, False, False)
    assert (w.wakeups, w.cpu_s, w.error) == (0, None, None)           # nothing run yet
    largest = _frame(1, 65535 + 4)          # 64 KiB and a VLAN tag's room, with its Ethernet header
    small = _frame(3)
    r.rx.frame(largest)
    r.rx.frame(_frame(2, 65535 + 5))        # one byte more: dropped as oversize
    r.rx.read(bytes(10) + bytes(70_000))    # fills the whole receive buffer: cut, so dropped
    r.rx.frame(small)
    r.thread.start()
    c = r.sched.counters
    assert _until(lambda: c.rx_frames == 4 and len(r.wire.frames) == 2)
    _stop_worker(r)
    assert r.wire.frames == [largest, small]
    assert (c.dropped_oversize, c.dropped_offload, c.forwarded_frames) == (1, 1, 2)
    assert w.error is None and w.rt_active is False
    capsys.readouterr()


def test_a_worker_rides_out_a_link_down_and_frames_the_kernel_cannot_describe(rig):
    from bwn.linkem.offload import DATA_VALID, GSO_TCPV4, vnet_header
    r = rig()
    frames = [_frame(i) for i in range(3)]
    not_tcp = _frame(9)
    r.rx.error(OSError(errno.ENETDOWN, "Network is down"))       # link set down: wait for it
    r.rx.frame(frames[0])
    r.rx.error(OSError(errno.EINVAL, "Invalid argument"))        # no virtio_net_hdr for that one
    r.rx.error(InterruptedError())
    r.rx.frame(frames[1])
    r.rx.error(OSError(errno.EINVAL, "Invalid argument"))
    r.rx.frame(not_tcp, vnet_header(DATA_VALID, GSO_TCPV4))         # marked GSO: never sent as is
    r.rx.frame(frames[2])
    r.thread.start()
    assert _until(lambda: len(r.wire.frames) == 3)
    assert r.wire.frames == frames
    c = r.sched.counters
    assert (c.dropped_offload, c.rx_frames) == (3, 6)
    assert c.rx_bytes == sum(map(len, frames)) + len(not_tcp)      # what recv never returned weighs 0
    assert r.warnings == [
        "bwn-link: in0->out0: dropped a frame bwn-link cannot complete (offload state the kernel "
        "cannot describe in a virtio_net_hdr (tunnel GSO?)); counted as offload-drop, further ones silently"]
    assert r.thread.is_alive() and r.worker.error is None
    # Any other error ends the worker; it is kept for LinkEmulator.failed.
    r.rx.error(OSError(errno.EIO, "Input/output error"))
    r.thread.join(2)
    assert not r.thread.is_alive()
    assert isinstance(r.worker.error, OSError) and r.worker.error.errno == errno.EIO
    assert r.worker.cpu_s is not None


def test_a_worker_counts_its_sleeps_and_its_cpu_time(rig):
    r = rig()
    seen: dict[str, float] = {}

    def work_in_the_kernel() -> None:          # system time, in the worker's thread
        buf = bytearray(1 << 23)
        begin = time.thread_time()
        with open("/dev/zero", "rb", buffering=0) as zero:
            while time.thread_time() - begin < 0.03:
                zero.readinto(buf)
        seen["cpu_s"] = time.thread_time()

    r.rx.call(work_in_the_kernel)
    r.rx.frame(_frame(0))
    r.thread.start()
    assert _until(lambda: len(r.wire.frames) == 1)
    for seq in (1, 2):                          # one frame at a time: one sleep each
        r.rx.frame(_frame(seq))
        assert _until(lambda: len(r.wire.frames) == seq + 1)
    _stop_worker(r)
    assert r.worker.wakeups == 4                # 3 frames, and the sleep the stop ended
    assert r.worker.cpu_s >= seen["cpu_s"] - 1e-5


def test_a_frame_falling_due_during_a_slow_burst_of_reads_is_not_held_back(rig):
    r = rig(Impairment(delay_us=50_000))
    frames = [_frame(i) for i in range(3)]
    r.thread.start()
    r.rx.frame(frames[0])
    assert _until(lambda: r.sched.counters.rx_frames == 1)
    r.rx.call(lambda: time.sleep(0.06))        # frame 0 falls due while the next read lasts
    r.rx.frame(frames[1])
    r.rx.call(lambda: time.sleep(0.01))        # frame 2 comes 10 ms after frame 1, so leaves after it
    r.rx.frame(frames[2])
    assert _until(lambda: len(r.wire.frames) == 3, 1.0)
    assert r.wire.frames == frames and r.thread.is_alive()


def test_a_frame_falling_due_while_the_worker_works_out_its_sleep_is_still_sent(rig, monkeypatch):
    """The clock steps 0.6 us per reading: the frame (1 us of delay) is not due when the
    worker looks, and overdue by the time it computes how long to sleep."""
    from bwn.linkem import worker
    ticks = itertools.count()
    base = time.monotonic_ns()
    monkeypatch.setattr(worker, "time", types.SimpleNamespace(monotonic_ns=lambda: base + 600 * next(ticks)))
    r = rig(Impairment(delay_us=1))
    r.thread.start()
    r.rx.frame(_frame(0))
    assert _until(lambda: r.wire.frames == [_frame(0)], 1.0)
    assert r.thread.is_alive()
    _stop_worker(r)


def test_frames_that_arrive_apart_leave_apart(pairs):
    a_in, b_out = _socket(pairs["a1"]), _socket(pairs["b1"])
    with LinkEmulator(pairs["a0"], pairs["b0"], a_to_b=Impairment(delay_us=30_000), seed=4,
                      warn=lambda line: None) as emu:
        first = time.monotonic()
        a_in.send(_frame(0))
        time.sleep(0.015)
        second = time.monotonic()
        a_in.send(_frame(1))
        got = _receive(b_out, 2, timeout_s=5.0)
    assert [frame for _, frame in got] == [_frame(0), _frame(1)]
    assert got[0][0] - first >= 0.030 and got[1][0] - second >= 0.030
    _rounded_as_documented(emu.final_stats)


# -- the timer slack and the priority of the workers -------------------------------------------

def _timer_slack_ns(tid: int) -> int:
    return int(Path(f"/proc/{tid}/timerslack_ns").read_text())


def test_set_timer_slack_ns_sets_the_calling_threads_slack(monkeypatch):
    from bwn.linkem import rawsock
    monkeypatch.setattr(rawsock, "_libc", None)          # as in a fresh process: libc not loaded yet
    seen: list = []

    def probe() -> None:
        for slack_ns in (1234, 2345):                    # the second time with libc already loaded
            seen.append(rawsock.set_timer_slack_ns(slack_ns))
            seen.append(_timer_slack_ns(threading.get_native_id()))
    t = threading.Thread(target=probe)
    t.start()
    t.join()
    assert seen == [True, 1234, True, 2345]


def test_set_timer_slack_ns_says_false_without_a_libc(monkeypatch):
    import ctypes
    from bwn.linkem import rawsock

    def no_library(*args, **kw):
        raise OSError("libc.so.6: cannot open shared object file")
    monkeypatch.setattr(rawsock, "_libc", None)
    monkeypatch.setattr(ctypes, "CDLL", no_library)
    assert rawsock.set_timer_slack_ns(1000) is False


def _worker_tids() -> dict[str, int]:
    return {t.name: t.native_id for t in threading.enumerate() if t.name.startswith("linkem-")}


def test_workers_sleep_with_a_timer_slack_of_1_us(pairs):
    default = _timer_slack_ns(threading.get_native_id())     # what a new thread inherits
    with LinkEmulator(pairs["a0"], pairs["b0"], seed=1, warn=lambda line: None) as emu:
        tids = _worker_tids()
        assert _until(lambda: all(_timer_slack_ns(tid) != default for tid in tids.values()), 1.0)
        assert {name: _timer_slack_ns(tid) for name, tid in tids.items()} == \
            {"linkem-a_to_b": 1000, "linkem-b_to_a": 1000}
        assert {name: w.name for name, w in emu.workers.items()} == {"a_to_b": "a_to_b", "b_to_a": "b_to_a"}
    _rounded_as_documented(emu.final_stats)


def test_workers_take_sched_fifo_at_the_priority_asked(pairs):
    if not _can_run_realtime():
        pytest.skip("this machine refuses SCHED_FIFO")
    with LinkEmulator(pairs["a0"], pairs["b0"], seed=1, rt_priority=1, warn=lambda line: None) as emu:
        tids = _worker_tids()
        assert _until(lambda: all(os.sched_getscheduler(tid) == os.SCHED_FIFO for tid in tids.values()), 1.0)
        assert [os.sched_getparam(tid).sched_priority for tid in tids.values()] == [1, 1]
    assert emu.final_stats["realtime"] is True


def test_workers_refused_realtime_run_normally_and_say_so(pairs, monkeypatch):
    def refuse(*args):
        raise PermissionError(errno.EPERM, "Operation not permitted")
    monkeypatch.setattr(os, "sched_setscheduler", refuse)
    a_in, b_out = _socket(pairs["a1"]), _socket(pairs["b1"])
    with LinkEmulator(pairs["a0"], pairs["b0"], seed=1, rt_priority=50, warn=lambda line: None) as emu:
        a_in.send(_frame(1))
        assert [frame for _, frame in _receive(b_out, 1)] == [_frame(1)]
    assert emu.final_stats["realtime"] is False
    assert [w.rt_active for w in emu.workers.values()] == [False, False]


# -- LinkEmulator: warnings, MTU, schedules, stats, failures ---------------------------------------

def test_warnings_go_to_standard_error_at_once_by_default(pairs, monkeypatch, capsys):
    _ip("link", "set", pairs["b0"], "mtu", "1400")
    written = io.BytesIO()
    monkeypatch.setattr(sys, "stderr", io.TextIOWrapper(written, encoding="utf-8"))   # block-buffered, as a log file
    with LinkEmulator(pairs["a0"], pairs["b0"], seed=2):
        assert written.getvalue().decode() == (
            f"bwn-link: warning: MTU 1500 on {pairs['a0']} but 1400 on {pairs['b0']}: frames from "
            f"{pairs['a0']} longer than {pairs['b0']} allows are dropped and counted as oversize "
            f"(ip link set {pairs['b0']} mtu 1500 if the far end takes it)\n")
    assert capsys.readouterr().out == ""


def test_a_frame_as_long_as_the_far_mtu_passes_and_the_first_longer_one_is_warned_of(pairs):
    _ip("link", "set", pairs["b0"], "mtu", "1400")
    a0, b0 = pairs["a0"], pairs["b0"]
    warnings: list[str] = []
    a_in, b_out = _socket(pairs["a1"]), _socket(pairs["b1"])
    with LinkEmulator(a0, b0, seed=2, warn=warnings.append) as emu:
        a_in.send(_frame(1, 1400))          # 1400 bytes and the Ethernet header: b0's MTU exactly
        a_in.send(_frame(2, 1401))
        got = _receive(b_out, 1)
        _wait_count(emu, "dropped_oversize", 1)
    assert [frame for _, frame in got] == [_frame(1, 1400)]
    assert warnings[1:] == [
        f"bwn-link: {a0}->{b0}: dropped a 1415-byte frame: larger than {b0}'s MTU allows (1400 + 14-byte "
        f"Ethernet header); a super-frame without segmentation metadata (LRO?) or a larger MTU on {a0}: "
        f"run 'ethtool -K {a0} lro off gro off' in its namespace, or give both links the same MTU "
        f"(ip link set DEV mtu N); counted as oversize"]
    _rounded_as_documented(emu.final_stats)


def _tcp_superframe(payload_bytes: int) -> bytes:
    """An Ethernet/IPv4/TCP frame as TSO hands it over: IP length of the whole, the TCP
    checksum field seeded with the pseudo-header sum. Documentation addresses, and a
    foreign destination MAC: no host's IP stack takes it."""
    from bwn.linkem.offload import inet_checksum
    src, dst = bytes([192, 0, 2, 1]), bytes([192, 0, 2, 2])
    tcp_len = 20 + payload_bytes
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + tcp_len, 1, 0x4000, 64, 6, 0, src, dst)
    ip = ip[:10] + inet_checksum(ip).to_bytes(2, "big") + ip[12:]
    pseudo_sum = 0xFFFF - inet_checksum(struct.pack("!4s4sBBH", src, dst, 0, 6, tcp_len))
    tcp = struct.pack("!HHIIBBHHH", 40000, 5001, 1, 0, 5 << 4, 0x18, 65535, pseudo_sum, 0)
    payload = bytes(i & 0xFF for i in range(payload_bytes))
    return b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01" + b"\x08\x00" + ip + tcp + payload


def test_a_64_kib_tso_super_frame_crosses_cut_into_mtu_sized_segments(pairs):
    from bwn.linkem.offload import GSO_TCPV4, NEEDS_CSUM, vnet_header
    frame = _tcp_superframe(65535 - 54)                  # the longest frame GSO makes: 64 KiB - 1
    tso = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    tso.setsockopt(263, 15, 1)                            # PACKET_VNET_HDR: hand over a super-frame
    tso.bind((pairs["a1"], 0))
    ipv4_out = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
    ipv4_out.bind((pairs["b1"], 0x0800))
    with tso, ipv4_out:
        with LinkEmulator(pairs["a0"], pairs["b0"], seed=1, warn=lambda line: None) as emu:
            tso.send(vnet_header(NEEDS_CSUM, GSO_TCPV4, 54, 1448, 34, 16) + frame)
            got = [f for _, f in _receive(ipv4_out, 46)]
    assert len(got) == 46 and max(map(len, got)) == 1448 + 54
    assert b"".join(seg[54:] for seg in got) == frame[54:]
    a_to_b = emu.final_stats["a_to_b"]
    assert (a_to_b["gso_superframes"], a_to_b["gso_segments"], a_to_b["forwarded_frames"]) == (1, 46, 46)
    assert a_to_b["dropped_offload"] == 0


def test_rate_schedules_run_from_the_time_0_given_before_or_after_the_start(pairs):
    from bwn.scenario.schedule import StepSchedule
    # 1 kb/s for the schedule's first second (a frame would take about 0.9 s), then 1 Gb/s.
    slow_then_fast = Impairment(rate_schedule=StepSchedule([(0, 1000), (1.0, 1e9)]), queue_packets=10)
    a_in, b_out = _socket(pairs["a1"]), _socket(pairs["b1"])
    for before_start in (True, False):
        emu = LinkEmulator(pairs["a0"], pairs["b0"], a_to_b=slow_then_fast, b_to_a=Impairment(), seed=6,
                           warn=lambda line: None)
        if before_start:
            emu.start_schedule(time.monotonic_ns() - 2_000_000_000)      # 2 s into the schedule
        with emu:
            if not before_start:
                emu.start_schedule(time.monotonic_ns() - 2_000_000_000)
            a_in.send(_frame(7))
            got = _receive(b_out, 1, timeout_s=0.5)
        assert [frame for _, frame in got] == [_frame(7)], f"time 0 given before the start: {before_start}"


def test_stats_duration_runs_while_the_emulator_does_and_then_stands_still(pairs):
    a_in, b_in = _socket(pairs["a1"]), _socket(pairs["b1"])
    b_out, a_out = _socket(pairs["b1"]), _socket(pairs["a1"])
    emu = LinkEmulator(pairs["a0"], pairs["b0"], seed=8, warn=lambda line: None)
    with emu:
        live = []
        for _ in range(10):
            live.append(emu.stats()["duration_s"])
            time.sleep(0.001)
        assert all(0 < d == round(d, 6) for d in live) and live == sorted(live)
        origin = time.monotonic_ns()
        started = []
        for k in range(10):                     # time 0 moved by 0.1 us at a time
            emu.start_schedule(origin + 100 * k)
            started.append(emu.stats()["schedule_started_s"])
        assert all(0 < s == round(s, 6) for s in started)
        for seq in range(20):                   # some work for both workers
            a_in.send(_frame(seq))
            b_in.send(_frame(seq))
        assert len(_receive(b_out, 20)) == 20 and len(_receive(a_out, 20)) == 20
    final = emu.final_stats
    time.sleep(0.01)
    assert emu.stats()["duration_s"] == final["duration_s"] >= live[-1]
    _rounded_as_documented(final)
    for direction in ("a_to_b", "b_to_a"):
        assert 0 < final[direction]["cpu_s"] <= final["duration_s"]


class _Tapped:
    """A receive socket whose reads first call `before_recv`, in the worker's thread."""

    def __init__(self, sock: socket.socket, before_recv: Callable[[], None]) -> None:
        self._sock = sock
        self._before_recv = before_recv

    def recv(self, *args):
        self._before_recv()
        return self._sock.recv(*args)

    def recvfrom(self, *args):
        self._before_recv()
        return self._sock.recvfrom(*args)

    def __getattr__(self, name: str):
        return getattr(self._sock, name)


def _tap_rx(monkeypatch, ifname: str, before_recv: Callable[[], None]) -> None:
    from bwn.linkem import rawsock
    real = rawsock.open_rx_socket

    def open_rx_socket(name: str, promiscuous: bool = True):
        sock, ignores = real(name, promiscuous)
        return (_Tapped(sock, before_recv) if name == ifname else sock), ignores
    monkeypatch.setattr(rawsock, "open_rx_socket", open_rx_socket)


def test_a_worker_that_fails_is_reported_and_the_other_direction_goes_on(pairs, monkeypatch):
    def fail() -> None:
        raise OSError(errno.EIO, "injected")
    _tap_rx(monkeypatch, pairs["a0"], fail)
    a_in, b_in, a_out = _socket(pairs["a1"]), _socket(pairs["b1"]), _socket(pairs["a1"])
    with LinkEmulator(pairs["a0"], pairs["b0"], seed=1, warn=lambda line: None) as emu:
        a_in.send(_frame(1))
        assert _until(lambda: emu.failed is not None)
        b_in.send(_frame(2))
        back = _receive(a_out, 1)
        live = emu.stats()
    assert isinstance(emu.failed, OSError) and emu.failed.errno == errno.EIO
    assert [frame for _, frame in back] == [_frame(2)]
    for stats in (live, emu.final_stats):
        assert stats["a_to_b"]["error"] == "OSError(5, 'injected')" and "error" not in stats["b_to_a"]


def test_stop_gives_up_on_a_stuck_worker_after_its_timeout_and_counts_the_kernels_drops(pairs, monkeypatch):
    stuck, release = threading.Event(), threading.Event()

    def stall() -> None:
        if not stuck.is_set():
            stuck.set()
            release.wait(10.0)                  # released by the test's end, not by time
    _tap_rx(monkeypatch, pairs["a0"], stall)
    a_in = _socket(pairs["a1"])
    emu = LinkEmulator(pairs["a0"], pairs["b0"], seed=1, warn=lambda line: None).start()
    try:
        emu.workers["a_to_b"].rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 0)   # room for a few frames
        a_in.send(_frame(0))
        assert stuck.wait(10.0)                 # the a_to_b worker hangs in a read
        for seq in range(1, 40):
            a_in.send(_frame(seq))
        began = time.monotonic()
        stats = emu.stop(timeout_s=0.3)
        took = time.monotonic() - began
        assert emu.running                      # left behind (a daemon thread)
    finally:
        release.set()
        for t in threading.enumerate():
            if t.name.startswith("linkem-"):
                t.join(2)
    assert 0.25 <= took < 5.0                   # gave up at its timeout: the worker is held 10 s
    assert "cpu_s" not in stats["a_to_b"] and "cpu_s" in stats["b_to_a"]
    assert 0 < stats["a_to_b"]["kernel_drops"] < 40


def test_a_start_that_fails_lets_everything_go_and_can_be_tried_again(pairs, monkeypatch):
    from bwn.linkem import rawsock
    interval = sys.getswitchinterval()
    emu = LinkEmulator(pairs["a0"], pairs["b0"], seed=1, warn=lambda line: None)
    emu.request_stop()                          # a signal before the start: nothing to stop yet
    real = rawsock.open_tx_socket

    def no_buffers(name: str):
        raise OSError(errno.ENOBUFS, "No buffer space available")
    monkeypatch.setattr(rawsock, "open_tx_socket", no_buffers)
    with pytest.raises(OSError, match="No buffer space available"):
        emu.start()
    assert (_promiscuity(pairs["a0"]), _promiscuity(pairs["b0"])) == (0, 0)   # receive sockets closed
    assert not emu.running and sys.getswitchinterval() == interval
    monkeypatch.setattr(rawsock, "open_tx_socket", real)
    a_in, b_out = _socket(pairs["a1"]), _socket(pairs["b1"])
    with emu:
        a_in.send(_frame(1))
        got = _receive(b_out, 1)
    assert [frame for _, frame in got] == [_frame(1)]
    emu.request_stop()                          # a signal that comes late is harmless
    assert emu.stop() is emu.final_stats and sys.getswitchinterval() == interval


def test_not_promiscuous_leaves_both_interfaces_alone(pairs):
    from bwn.linkem import rawsock
    rx, _ = rawsock.open_rx_socket(pairs["a0"])
    assert _promiscuity(pairs["a0"]) == 1        # by default, for as long as the socket is open
    rx.close()
    assert _promiscuity(pairs["a0"]) == 0
    with LinkEmulator(pairs["a0"], pairs["b0"], promiscuous=False, seed=1, warn=lambda line: None):
        assert (_promiscuity(pairs["a0"]), _promiscuity(pairs["b0"])) == (0, 0)


def test_b_to_a_defaults_to_a_to_b_when_the_seed_is_drawn():
    emu = LinkEmulator("x0", "x1", a_to_b=Impairment(delay_us=5))
    assert emu.config.a_to_b == emu.config.b_to_a == Impairment(delay_us=5)
    emu = LinkEmulator("x0", "x1", a_to_b=Impairment(delay_us=5), b_to_a=Impairment(loss=0.5))
    assert (emu.config.a_to_b, emu.config.b_to_a) == (Impairment(delay_us=5), Impairment(loss=0.5))


# -- raw sockets as an older or stricter kernel would give them -------------------------------------

SOL_PACKET, PACKET_VNET_HDR, PACKET_IGNORE_OUTGOING = 263, 15, 23


def _kernel(monkeypatch, refuse: dict[tuple[int, int], int] | None = None,
            before_bind: Callable[[], None] | None = None,
            recv_errors: tuple[BaseException, ...] = ()) -> list[socket.socket]:
    """rawsock's sockets refuse the options in `refuse` (with that errno), call `before_bind`
    just before they are bound, and raise `recv_errors` from their first reads. Returns the
    sockets made."""
    from bwn.linkem import rawsock
    refuse = refuse or {}
    errors = list(recv_errors)
    made: list[socket.socket] = []

    class Socket(socket.socket):
        def __init__(self, *args, **kw) -> None:
            super().__init__(*args, **kw)
            made.append(self)

        def setsockopt(self, level, option, *value):
            if (level, option) in refuse:
                code = refuse[(level, option)]
                raise OSError(code, os.strerror(code))
            return super().setsockopt(level, option, *value)

        def bind(self, address) -> None:
            if before_bind is not None:
                before_bind()
            super().bind(address)

        def recv(self, *args):
            if errors:
                raise errors.pop(0)
            return super().recv(*args)
    module = types.SimpleNamespace(**{k: getattr(socket, k) for k in dir(socket) if not k.startswith("__")})
    module.socket = Socket
    monkeypatch.setattr(rawsock, "socket", module)
    return made


def test_an_rx_socket_without_packet_vnet_hdr_is_refused_with_the_reason(pairs, monkeypatch):
    from bwn.linkem import rawsock
    made = _kernel(monkeypatch, refuse={(SOL_PACKET, PACKET_VNET_HDR): errno.ENOPROTOOPT})
    with pytest.raises(OSError) as refused:
        rawsock.open_rx_socket(pairs["a0"])
    assert refused.value.errno == errno.ENOPROTOOPT
    assert str(refused.value) == (
        "[Errno 92] packet socket option PACKET_VNET_HDR refused (Protocol not available): "
        "bwn-link needs it to see checksum and segmentation offloads")
    assert [s.fileno() for s in made] == [-1]          # closed


def test_without_packet_ignore_outgoing_the_emulator_still_never_hears_itself(pairs, monkeypatch):
    from bwn.linkem import rawsock
    _kernel(monkeypatch, refuse={(SOL_PACKET, PACKET_IGNORE_OUTGOING): errno.ENOPROTOOPT})   # Linux < 4.20
    rx, ignores = rawsock.open_rx_socket(pairs["a0"])
    rx.close()
    assert ignores is False
    a_in, b_out, a_out = _socket(pairs["a1"]), _socket(pairs["b1"]), _socket(pairs["a1"])
    with LinkEmulator(pairs["a0"], pairs["b0"], seed=1, warn=lambda line: None) as emu:
        a_in.send(_frame(1))
        got = _receive(b_out, 2, timeout_s=0.2)       # once, not looped back and forth
        back = _receive(a_out, 1, timeout_s=0.05)
    assert [frame for _, frame in got] == [_frame(1)] and back == []
    assert (emu.final_stats["a_to_b"]["rx_frames"], emu.final_stats["b_to_a"]["rx_frames"]) == (1, 0)
    _rounded_as_documented(emu.final_stats)


def test_without_the_right_to_force_buffer_sizes_the_sockets_take_what_they_may(pairs, monkeypatch):
    from bwn.linkem import rawsock
    _kernel(monkeypatch, refuse={(socket.SOL_SOCKET, rawsock.SO_RCVBUFFORCE): errno.EPERM,
                                 (socket.SOL_SOCKET, rawsock.SO_SNDBUFFORCE): errno.EPERM})
    rmem_max = int(Path("/proc/sys/net/core/rmem_max").read_text())
    wmem_max = int(Path("/proc/sys/net/core/wmem_max").read_text())
    rx, _ = rawsock.open_rx_socket(pairs["a0"])
    tx = rawsock.open_tx_socket(pairs["a0"])
    with rx, tx:                                # the kernel doubles what it is given
        assert rx.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) == 2 * min(rawsock.RX_BUFFER_BYTES, rmem_max)
        assert tx.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) == 2 * min(rawsock.TX_BUFFER_BYTES, wmem_max)


def test_an_rx_socket_yields_no_frame_that_reached_it_before_it_was_bound(pairs, monkeypatch):
    from bwn.linkem import rawsock
    b_in = _socket(pairs["b1"])
    # A frame on another interface while the socket is not yet bound, and a read the
    # kernel could not describe in a virtio_net_hdr (EINVAL, consumed) before it.
    _kernel(monkeypatch, before_bind=lambda: b_in.send(_frame(9)),
            recv_errors=(OSError(errno.EINVAL, "Invalid argument"),))
    rx, _ = rawsock.open_rx_socket(pairs["a0"])
    with rx:
        assert select.select([rx], [], [], 0.05)[0] == []
    # Another error ends the draining, not the opening.
    _kernel(monkeypatch, recv_errors=(OSError(errno.ENETDOWN, "Network is down"),))
    rx, ignores = rawsock.open_rx_socket(pairs["a0"])
    rx.close()
    assert ignores is True


def test_a_tx_socket_hears_nothing_not_even_raw_802_3(pairs):
    from bwn.linkem import rawsock
    rx, _ = rawsock.open_rx_socket(pairs["a0"])
    tx = rawsock.open_tx_socket(pairs["a0"])
    a_out = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    a_out.bind((pairs["a1"], 0))
    raw_802_3 = b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01" + b"\x00\x2e" + b"\xff\xff" + bytes(44)
    with rx, tx, a_out:
        a_out.send(_frame(1))
        a_out.send(raw_802_3)
        assert [data[10:] for _, data in _receive(rx, 2, timeout_s=1.0)] == [_frame(1), raw_802_3]
        assert select.select([tx], [], [], 0.05)[0] == []


def test_kernel_drops_counts_the_frames_a_full_buffer_lost_once(pairs):
    from bwn.linkem import rawsock
    rx, _ = rawsock.open_rx_socket(pairs["a0"])
    a_in = _socket(pairs["a1"])
    with rx:
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 0)      # room for a few frames only
        for seq in range(50):
            a_in.send(_frame(seq))
        queued = 0
        while select.select([rx], [], [], 0)[0]:
            rx.recv(65536)
            queued += 1
        drops = rawsock.kernel_drops(rx)
        assert drops > 0 and queued + drops == 50
        assert rawsock.kernel_drops(rx) == 0                        # counted since the last call


def test_a_start_that_fails_after_its_first_worker_ran_stops_that_worker(pairs, monkeypatch):
    """The machine refuses the second thread: the first, already in select() on the
    sockets, is stopped and joined before they close (else it would wake on closed,
    perhaps reused, descriptors and end with EBADF)."""
    from bwn.linkem import engine
    started: list[threading.Thread] = []

    class SecondRefused(threading.Thread):
        def start(self) -> None:
            if started:
                raise RuntimeError("can't start new thread")
            started.append(self)
            super().start()
    monkeypatch.setattr(engine.threading, "Thread", SecondRefused)
    emu = LinkEmulator(pairs["a0"], pairs["b0"], seed=1, warn=lambda line: None)
    with pytest.raises(RuntimeError, match="can't start new thread"):
        emu.start()
    assert len(started) == 1 and not started[0].is_alive()
    assert [w.error for w in emu.workers.values()] == [None, None]   # stopped, not failed
    assert not emu.running
    assert (_promiscuity(pairs["a0"]), _promiscuity(pairs["b0"])) == (0, 0)   # its sockets closed


# ---- one thread for several links (LinkGroup, bwn-links) ----------------------------

@pytest.fixture
def ns_pairs(pairs) -> Iterator[dict[str, str]]:
    """`pairs`, and two more veth pairs whose emulator ends (c0, d0) are in a network
    namespace the test creates (netns: its file); the test talks through c1 and d1,
    which stay in this namespace."""
    tag = f"{os.getpid():x}"
    ns = f"bwe{tag}n"
    names = {k: f"bwe{tag}{k}" for k in ("c0", "c1", "d0", "d1")}
    made: list[str] = []
    try:
        _ip("netns", "add", ns)
        subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                        "net.ipv6.conf.default.disable_ipv6=1"], check=True, capture_output=True)
        for end in ("c", "d"):
            _ip("link", "add", names[f"{end}0"], "type", "veth", "peer", "name", names[f"{end}1"])
            made.append(names[f"{end}1"])
            _ip("link", "set", names[f"{end}0"], "netns", ns)
            Path(f"/proc/sys/net/ipv6/conf/{names[f'{end}1']}/disable_ipv6").write_text("1\n")
            _ip("link", "set", names[f"{end}1"], "up")
            _ip("-n", ns, "link", "set", names[f"{end}0"], "up")
        yield {**pairs, **names, "netns": f"/run/netns/{ns}"}
    finally:
        for name in made:
            subprocess.run(["ip", "link", "del", name], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def _thread_netns() -> int:
    return os.stat("/proc/thread-self/ns/net").st_ino


def test_a_link_group_serves_links_of_two_namespaces_each_with_its_own_model_in_one_thread(ns_pairs):
    p = ns_pairs
    home = _thread_netns()
    here = LinkEmulator(p["a0"], p["b0"], a_to_b=Impairment(delay_us=20_000), seed=11,
                        warn=lambda line: None)
    there = LinkEmulator(p["c0"], p["d0"], a_to_b=Impairment(delay_us=60_000), seed=12,
                         netns=p["netns"], warn=lambda line: None)
    a_in, b_out = _socket(p["a1"]), _socket(p["b1"])
    c_in, d_out = _socket(p["c1"]), _socket(p["d1"])
    threads = threading.active_count()
    group = LinkGroup({"here": here, "there": there})
    with group:
        assert group.running and group.failed is None
        assert threading.active_count() == threads + 1            # one thread for both links
        assert _thread_netns() == home                              # the caller came back home
        sent_s = time.monotonic()
        for seq in range(5):
            a_in.send(_frame(seq))
            c_in.send(_frame(100 + seq))
        got_here = _receive(b_out, 5)
        got_there = _receive(d_out, 5)
    assert not group.running
    assert [f for _, f in got_here] == [_frame(seq) for seq in range(5)]
    assert [f for _, f in got_there] == [_frame(100 + seq) for seq in range(5)]
    assert min(t for t, _ in got_here) - sent_s >= 0.020            # each link its own delay
    assert min(t for t, _ in got_there) - sent_s >= 0.060
    assert max(t for t, _ in got_here) < min(t for t, _ in got_there)
    stats = group.stop()                                            # the same, once stopped
    assert stats is group.final_stats and set(stats) == {"here", "there"}
    assert stats["here"]["seed"] == 11 and stats["there"]["seed"] == 12
    assert stats["here"]["a_to_b"]["forwarded_frames"] == 5
    assert stats["there"]["a_to_b"]["forwarded_frames"] == 5
    assert stats["there"]["iface_a"] == p["c0"] and stats["there"]["a_to_b"]["config"]["delay_us"] == 60_000
    assert stats["here"]["a_to_b"]["lateness"]["frames"] == 5
    shared = stats["here"]["group"]
    assert shared is stats["there"]["group"] and shared["links"] == 2
    assert shared["wakeups"] >= 2 and shared["cpu_s"] is not None and shared["realtime"] is False
    assert here._sockets == [] and there._sockets == []              # every socket closed


def test_a_link_group_that_cannot_open_a_link_opens_none_and_starts_no_thread(ns_pairs):
    p = ns_pairs
    interval = sys.getswitchinterval()
    here = LinkEmulator(p["a0"], p["b0"], warn=lambda line: None)
    missing_end = LinkEmulator(p["c0"], "bwe-none", netns=p["netns"], warn=lambda line: None)
    threads = threading.active_count()
    group = LinkGroup({"here": here, "broken": missing_end})
    with pytest.raises(ValueError, match="no such network interface: 'bwe-none'"):
        group.start()
    assert threading.active_count() == threads and not group.running
    assert here._sockets == [] and missing_end._sockets == [] and sys.getswitchinterval() == interval
    with pytest.raises(ValueError, match="at least one link"):
        LinkGroup({})


def test_in_netns_enters_the_namespace_for_its_body_only_and_names_a_bad_one(ns_pairs):
    home = _thread_netns()
    with rawsock.in_netns(ns_pairs["netns"]):
        assert _thread_netns() != home
        assert socket.if_nametoindex(ns_pairs["c0"]) > 0            # its interfaces are seen
    assert _thread_netns() == home
    with rawsock.in_netns(None):
        assert _thread_netns() == home
    with pytest.raises(OSError, match="network namespace /run/netns/bwe-none"):
        with rawsock.in_netns("/run/netns/bwe-none"):
            pass
    assert _thread_netns() == home


def test_bwn_links_runs_a_spec_and_writes_each_links_stats(ns_pairs, tmp_path, capsys):
    p = ns_pairs
    spec = tmp_path / "links.json"
    spec.write_text(json.dumps({"links": [
        {"name": "em0", "args": [p["a0"], p["b0"], "--delay-ms", "5", "--seed", "3",
                                 "--stats-json", str(tmp_path / "em0.json")]},
        {"name": "em1", "netns": p["netns"], "args": [p["c0"], p["d0"], "--b-to-a-loss", "1",
                                                      "--stats-json", str(tmp_path / "em1.json")]},
    ]}))
    a_in, b_out = _socket(p["a1"]), _socket(p["b1"])
    # main() takes the signals, so it runs in this thread; a frame goes in once it is up.
    sender = threading.Timer(0.8, lambda: a_in.send(_frame(7)))
    sender.start()
    try:
        assert group_cli.main([str(spec), "--duration-s", "1.6"]) == 0
    finally:
        sender.cancel()
    assert [f for _, f in _receive(b_out, 1, timeout_s=0.5)] == [_frame(7)]
    printed = capsys.readouterr()
    assert "bwn-link: ready: 2 links in one process (em0 seed 3, em1 seed " in printed.err
    em0 = json.loads((tmp_path / "em0.json").read_text())
    em1 = json.loads((tmp_path / "em1.json").read_text())
    assert em0["exit"] == em1["exit"] == "stopped"
    assert em0["seed"] == 3 and em0["a_to_b"]["config"]["delay_us"] == 5000
    assert em0["a_to_b"]["forwarded_frames"] == 1
    assert em1["b_to_a"]["config"]["loss"] == 1.0 and em1["iface_a"] == p["c0"]
    assert em0["group"]["links"] == 2 and em1["group"] == em0["group"]
    assert "em0: bwn-link: stopped after" in printed.out and "em1: bwn-link: stopped after" in printed.out


def test_a_link_groups_schedules_all_start_at_one_time_0():
    here = LinkEmulator("x0", "x1", warn=lambda line: None)
    there = LinkEmulator("y0", "y1", warn=lambda line: None)
    group = LinkGroup({"here": here, "there": there})
    group.start_schedule(123_456_789)
    assert here._schedule_origin_ns == there._schedule_origin_ns == 123_456_789
    before = time.monotonic_ns()
    group.start_schedule()
    after = time.monotonic_ns()
    assert before <= here._schedule_origin_ns == there._schedule_origin_ns <= after


def test_bwn_links_whose_thread_fails_says_so_exits_1_and_still_writes_the_stats(pairs, tmp_path, capsys,
                                                                                  monkeypatch):
    from bwn.linkem import engine

    def broken(owner, lanes):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(engine, "serve", broken)
    spec = tmp_path / "links.json"
    spec.write_text(json.dumps({"links": [{"name": "em0", "args": [
        pairs["a0"], pairs["b0"], "--stats-json", str(tmp_path / "em0.json")]}]}))
    assert group_cli.main([str(spec), "--duration-s", "5", "--quiet"]) == 1
    assert capsys.readouterr().err == ("bwn-links: error: the thread failed: "
                                       "OSError(5, 'Input/output error')\n")
    stats = json.loads((tmp_path / "em0.json").read_text())
    assert stats["exit"] == "error" and stats["group"]["links"] == 1
