"""The link emulator's engine in this process (bwn.linkem.LinkEmulator): its raw
sockets, its two workers and its stats, on two veth pairs the test creates in the
root namespace. Frames of a local experimental EtherType (IEEE 802 0x88B5) go in
at one pair's far end and come out at the other's; no IP address is set, so
nothing else is routed over them.

The namespace tests (tests/test_linkem_netns.py) run `bwn-link` as a process and
check timing with real protocols; these check the engine's own contract, fast
enough for the mutation loop (scripts/mutants.py, module linkem)."""
from __future__ import annotations

import os
import select
import socket
import struct
import subprocess
import time
from pathlib import Path
from typing import Iterator

import pytest

from needs import missing, not_root

from bwn.linkem import Impairment, LinkEmulator

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
    for name, pid_hex in re.findall(r"^\d+: (bwe([0-9a-f]+)[ab]0)@", links, re.M):
        if not os.path.exists(f"/proc/{int(pid_hex, 16)}"):
            subprocess.run(["ip", "link", "del", name], capture_output=True)


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
