"""bwn-send -> bwn-recv over real UDP sockets on 127.0.0.1 (subprocesses)."""
from __future__ import annotations

import ctypes
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, List, Optional, Tuple

import pytest

from hosts import recv as recv_mod
from hosts import send as send_mod
from hosts.startup import NotStarted
from hosts.transport.loop import open_udp_socket
from hosts.transport.source import pattern_bytes
from bwn.protocol.wire import BWN_UDP_PORT

PY = sys.executable
TIMEOUT_S = 60
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """preexec_fn of every agent started here: the kernel kills it when the test's
    process dies, so a test killed from outside (a mutation run's timeout, a
    Ctrl-C'd run) leaves no receiver waiting for a sender that never comes."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def popen(args: List[str], **kw: Any) -> subprocess.Popen:
    return subprocess.Popen(args, preexec_fn=die_with_parent, **kw)


def start_recv(*args: str) -> Tuple[subprocess.Popen, int]:
    """Start bwn-recv on an ephemeral port; returns the process and the port."""
    proc = popen([PY, "-m", "hosts.recv", "--listen", "127.0.0.1:0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    ready, _, _ = select.select([proc.stderr], [], [], 20)
    line = proc.stderr.readline() if ready else ""
    if "listening on" not in line:
        proc.kill()
        raise AssertionError(f"bwn-recv did not start: {line!r}")
    return proc, int(line.strip().rsplit(":", 1)[1])


def send(port: int, *args: str, wait: bool = True) -> subprocess.Popen:
    proc = popen([PY, "-m", "hosts.send", "--dst", f"127.0.0.1:{port}", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if wait:
        proc.wait(TIMEOUT_S)
    return proc


def finish(proc: subprocess.Popen) -> Tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"timed out: {out} {err}")
    return proc.returncode, out, err


def wait_for_data(path: Path) -> None:
    """Until the receiver has written some of the stream to `path` (its file is
    buffered: the first 8 KiB or so)."""
    deadline = time.monotonic() + TIMEOUT_S
    while not (path.exists() and path.stat().st_size > 0):
        assert time.monotonic() < deadline, f"no data reached {path} in {TIMEOUT_S} s"
        time.sleep(0.1)


def test_file_transfer_is_exact(tmp_path: Path) -> None:
    src = tmp_path / "in.bin"
    src.write_bytes(os.urandom(3_000_000 + 17))
    out = tmp_path / "out.bin"
    recv, port = start_recv("--out", str(out), "--once", "--linger", "0.2",
                            "--summary-json", str(tmp_path / "recv.json"),
                            "--stats-json", str(tmp_path / "stats.json"))
    s = send(port, "--algo", "newreno", "--input", str(src), "--flow-id", "42",
             "--log", str(tmp_path / "flow.csv"), "--summary-json", str(tmp_path / "send.json"))
    rc, so, se = finish(s)
    assert rc == 0, se
    assert "goodput" in so and "complete" in so
    rrc, rso, rse = finish(recv)
    assert rrc == 0, rse
    assert out.read_bytes() == src.read_bytes()
    summary = json.loads((tmp_path / "send.json").read_text())
    assert summary["bytes"] == src.stat().st_size and summary["flow_id"] == 42
    for key in ("goodput_bps", "duration_s", "retransmits", "timeouts", "rtt_p50_ms",
                "rtt_p95_ms", "rtt_p99_ms", "rtt_mean_ms"):
        assert key in summary
    rsum = json.loads((tmp_path / "recv.json").read_text())
    assert rsum[0]["status"] == "complete" and rsum[0]["bytes"] == src.stat().st_size
    # SACK was negotiated, and the receiver's counters reached the sender's summary.
    assert summary["sack"] is True and rsum[0]["sack"] is True
    # (as of the FIN|ACK: a FIN retransmitted on a loaded machine may add one or two)
    assert 0 <= rsum[0]["segments"] - summary["receiver_segments"] <= 3
    assert summary["receiver_segments"] > 2000
    assert summary["duplicate_segments"] <= rsum[0]["duplicate_segments"]
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["flows_completed"] == 1 and stats["malformed"] == 0
    assert stats["datagrams"] == rsum[0]["segments"] + stats["syn_received"]
    assert "receiver:" in rso
    rows = (tmp_path / "flow.csv").read_text().splitlines()
    assert rows[0].startswith("time_s,flow_id,algo,cwnd") and len(rows) > 2


def test_concurrent_flows_with_delayed_acks(tmp_path: Path) -> None:
    recv, port = start_recv("--out", str(tmp_path / "out-{flow_id}.bin"), "--delayed-ack",
                            "--log", str(tmp_path / "recv.jsonl"))
    try:
        senders: List[subprocess.Popen] = []
        sizes = {1: 2_000_000, 2: 1_500_001, 3: 700_000}
        for fid, n in sizes.items():
            senders.append(send(port, "--algo", "reno" if fid == 2 else "newreno",
                                "--bytes", str(n), "--flow-id", str(fid), wait=False))
        for proc in senders:
            rc, so, se = finish(proc)
            assert rc == 0, se
    finally:
        recv.send_signal(signal.SIGTERM)
        finish(recv)
    for fid, n in sizes.items():
        assert (tmp_path / f"out-{fid}.bin").read_bytes() == pattern_bytes(0, n)
    assert (tmp_path / "recv.jsonl").read_text().count("\n") >= 3


def test_sigint_ends_the_stream_cleanly(tmp_path: Path) -> None:
    out = tmp_path / "out.bin"
    recv, port = start_recv("--out", str(out), "--once", "--linger", "0.2")
    s = send(port, "--algo", "newreno", "--duration", "30", "--summary-json",
             str(tmp_path / "s.json"), wait=False)
    # SIGINT once data flows, not after a fixed sleep: on a loaded machine the sender
    # may still be starting Python after 1.5 s, and a SIGINT then is not this test's case.
    wait_for_data(out)
    time.sleep(0.5)
    s.send_signal(signal.SIGINT)
    t0 = time.monotonic()
    rc, so, se = finish(s)
    assert rc == 0, se
    assert time.monotonic() - t0 < 10
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["status"] == "interrupted" and summary["bytes"] > 0
    rrc, _, rse = finish(recv)
    assert rrc == 0, rse
    data = out.read_bytes()
    assert len(data) == summary["bytes"] and data == pattern_bytes(0, len(data))


def test_sender_reports_reset_when_receiver_restarts(tmp_path: Path) -> None:
    out = tmp_path / "out.bin"
    recv, port = start_recv("--out", str(out))
    s = send(port, "--algo", "newreno", "--duration", "20", wait=False)
    wait_for_data(out)      # the first receiver has the flow (not a slow start of the sender)
    recv.send_signal(signal.SIGTERM)
    finish(recv)
    recv2 = popen([PY, "-m", "hosts.recv", "--listen", f"127.0.0.1:{port}"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        rc, so, se = finish(s)
        assert rc == 1 and "reset" in se
    finally:
        recv2.send_signal(signal.SIGTERM)
        finish(recv2)


def _wait_for_file(path: Path, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not path.exists():
        assert proc.poll() is None, f"exited with {proc.returncode} before writing {path}"
        assert time.monotonic() < deadline, f"{path} not written in {TIMEOUT_S} s"
        time.sleep(0.05)


def test_held_sender_starts_only_after_go_and_its_delay(tmp_path: Path) -> None:
    """--ready-file appears once the agents are up; a --wait-go sender sends nothing
    until a line on stdin, then waits --start-delay-s, then runs its flow whole."""
    recv_ready, send_ready = tmp_path / "recv.ready", tmp_path / "send.ready"
    recv, port = start_recv("--once", "--linger", "0.2", "--ready-file", str(recv_ready))
    _wait_for_file(recv_ready, recv)
    assert int(recv_ready.read_text()) == recv.pid
    s = popen([PY, "-m", "hosts.send", "--dst", f"127.0.0.1:{port}", "--algo", "newreno",
                          "--bytes", "50000", "--summary-json", str(tmp_path / "s.json"),
                          "--ready-file", str(send_ready), "--wait-go", "--start-delay-s", "0.4"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for_file(send_ready, s)
    time.sleep(1.0)                      # 50 kB over loopback takes milliseconds once it starts
    assert s.poll() is None and not (tmp_path / "s.json").exists(), "the held sender did not wait"
    released = time.monotonic()
    _, se = s.communicate("go\n", timeout=TIMEOUT_S)
    assert s.returncode == 0, se
    assert time.monotonic() - released >= 0.4
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["bytes"] == 50000 and summary["status"] == "complete"
    rrc, _, rse = finish(recv)
    assert rrc == 0, rse


def test_held_sender_interrupted_before_its_start_says_so(tmp_path: Path) -> None:
    """SIGINT, or the runner closing stdin, before the release: exit 1, nothing sent."""
    for how in ("sigint", "eof"):
        ready = tmp_path / f"{how}.ready"
        s = popen([PY, "-m", "hosts.send", "--dst", "127.0.0.1:9", "--algo", "newreno",
                              "--bytes", "1000", "--ready-file", str(ready), "--wait-go"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _wait_for_file(ready, s)
        if how == "sigint":
            s.send_signal(signal.SIGINT)
        _, se = s.communicate("", timeout=TIMEOUT_S)      # then end of file on stdin
        assert s.returncode == 1, se
        expected = "interrupted" if how == "sigint" else "the runner closed stdin before saying go"
        assert f"bwn-send: {expected} before the flow started: nothing sent" in se, se


# -- the same agents' main() run in this process (mutation testing traces only what
#    runs in the test's own process), each against the other as a subprocess --------

def _free_udp_port() -> int:
    import socket
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_send_main_in_process(tmp_path: Path, capsys) -> None:
    """bwn-send's main: exit 0 on a complete flow, its summary on stdout and in
    --summary-json, its time series in --log, the file delivered exactly."""
    src = tmp_path / "in.bin"
    src.write_bytes(os.urandom(400_000 + 3))
    out = tmp_path / "out.bin"
    recv, port = start_recv("--out", str(out), "--once", "--linger", "0.2")
    rc = send_mod.main(["--dst", f"127.0.0.1:{port}", "--algo", "westwood", "--input", str(src),
                        "--param", "variant=westwood+", "--param", "beta=0.9",
                        "--flow-id", "77", "--mss", "1000", "--log", str(tmp_path / "flow.jsonl"),
                        "--log-interval-ms", "0", "--summary-json", str(tmp_path / "send.json")])
    stdout = capsys.readouterr().out
    assert rc == 0
    assert finish(recv)[0] == 0 and out.read_bytes() == src.read_bytes()
    summary = json.loads((tmp_path / "send.json").read_text())
    assert (summary["flow_id"], summary["algo"], summary["bytes"], summary["status"]) == (
        77, "westwood", src.stat().st_size, "complete")
    assert summary["goodput_bps"] == pytest.approx(8 * summary["bytes"] / summary["duration_s"], rel=1e-3)
    assert summary["dst"] == f"127.0.0.1:{port}"
    assert summary["params"] == {"variant": "westwood+", "beta": 0.9}                      # as given
    assert 0 < summary["cpu_s"] == round(summary["cpu_s"], 3)
    assert (tmp_path / "send.json").read_text().splitlines()[1].startswith('  "')          # indent=2
    assert stdout.strip().splitlines()[-1].startswith(
        f"bwn-send: flow 77 westwood: {src.stat().st_size} bytes in ")
    rows = [json.loads(line) for line in (tmp_path / "flow.jsonl").read_text().splitlines()]
    assert len(rows) >= 400_003 // 1000 // 2 and {r["flow_id"] for r in rows} == {77}
    assert rows[-1]["delivered_bytes"] == src.stat().st_size
    assert [r["time_s"] for r in rows] == sorted(r["time_s"] for r in rows)


def test_recv_main_in_process(tmp_path: Path, capsys) -> None:
    """bwn-recv's main with --once: the stream written to --out, each flow's line and
    the receiver's counters on stdout, --summary-json and --stats-json written, its
    --log rows, exit 0 after the flow completed."""
    import threading
    port = _free_udp_port()
    ready = tmp_path / "recv.ready"
    sender = popen([PY, "-m", "hosts.send", "--dst", f"127.0.0.1:{port}", "--bytes", "300k",
                               "--algo", "newreno", "--flow-id", "91", "--wait-go", "--quiet"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)

    def release() -> None:                      # "go" once the receiver listens
        deadline = time.monotonic() + TIMEOUT_S
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sender.stdin is not None
        sender.stdin.write("go\n")
        sender.stdin.flush()

    threading.Thread(target=release, daemon=True).start()
    try:
        rc = recv_mod.main(["--listen", f"127.0.0.1:{port}", "--once", "--linger", "0.2",
                            "--out", str(tmp_path / "out-{flow_id}.bin"), "--ready-file", str(ready),
                            "--log", str(tmp_path / "recv.csv"), "--log-interval-ms", "0",
                            "--summary-json", str(tmp_path / "recv.json"),
                            "--stats-json", str(tmp_path / "stats.json")])
    finally:
        src_rc = finish(sender)[0]
    assert rc == 0 and src_rc == 0
    data = (tmp_path / "out-91.bin").read_bytes()
    assert data == pattern_bytes(0, 300_000)
    (summary,) = json.loads((tmp_path / "recv.json").read_text())
    assert (summary["flow_id"], summary["bytes"], summary["status"]) == (91, 300_000, "complete")
    assert summary["out"] == str(tmp_path / "out-91.bin")
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["flows_completed"] == 1 and stats["malformed"] == 0
    lines = capsys.readouterr()
    assert f"bwn-recv: listening on 127.0.0.1:{port}" in lines.err
    assert "bwn-recv: flow 91 from 127.0.0.1:" in lines.out
    assert "complete: 300000 bytes in " in lines.out and f"-> {tmp_path / 'out-91.bin'}" in lines.out
    assert "bwn-recv: receiver: " in lines.out
    rows = (tmp_path / "recv.csv").read_text().splitlines()
    assert rows[0].startswith("time_s,flow_id") and len(rows) > 100


def test_recv_options_reach_the_receiver(tmp_path: Path, monkeypatch, capsys) -> None:
    """Each bwn-recv option is handed to the receiver in its unit (ms and s to us), and
    a receiver that sees garbage says so on stderr, at most once per interval."""
    made = {}

    class Recording(recv_mod.Receiver):
        def __init__(self, emit, sinks, **kw):
            made.update(kw, sinks=sinks)
            super().__init__(emit, sinks, **kw)

    def loop(receiver, sock, wake, should_stop):            # no traffic: garbage, then stop
        receiver.stats.malformed_short += 3
        assert should_stop(recv_mod.WARN_INTERVAL_US) is False
        receiver.stats.unknown_flow += 2
        should_stop(recv_mod.WARN_INTERVAL_US + 1)            # within the interval: quiet
        should_stop(2 * recv_mod.WARN_INTERVAL_US)
        made["sock_port"] = sock.getsockname()[1]

    monkeypatch.setattr(recv_mod, "Receiver", Recording)
    monkeypatch.setattr(recv_mod, "run_receiver", loop)
    rc = recv_mod.main(["--listen", "127.0.0.1:0", "--window-bytes", "48k", "--delayed-ack",
                        "--delack-ms", "200", "--max-flows", "7", "--max-half-open", "9",
                        "--max-ooo-bytes", "1M", "--idle-timeout", "2.5",
                        "--log", str(tmp_path / "r.jsonl")])
    assert rc == 0
    assert {k: made[k] for k in ("window_bytes", "delayed_ack", "delack_us", "max_flows", "max_half_open",
                                 "max_ooo_bytes", "idle_timeout_us")} == {
        "window_bytes": 48_000, "delayed_ack": True, "delack_us": 200_000, "max_flows": 7,
        "max_half_open": 9, "max_ooo_bytes": 1_000_000, "idle_timeout_us": 2_500_000}
    assert made["log"] is not None and made["on_flow_end"] is not None and made["sock_port"] > 0
    assert made["sinks"].pattern is None                     # no --out: nothing written
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert [w.split(" datagrams")[0] for w in warnings] == ["bwn-recv: warning: 3", "bwn-recv: warning: 2"]


# -- bwn-send's main at its seams: each option reaches its part, each failure exits 1 --

class Refused(OSError):
    pass


def refusing_socket(opened: dict[str, Any], error: OSError):
    """An open_udp_socket that records its arguments in `opened` and raises `error`."""
    def open_socket(**kw: Any) -> socket.socket:
        opened.update(kw)
        raise error
    return open_socket


def test_addresses_and_log_interval_reach_socket_and_log_in_their_units(tmp_path: Path, monkeypatch, capsys):
    opened: dict[str, Any] = {}
    logs: list[Any] = []

    class RecordingLog(send_mod.TimeSeriesLog):
        def __init__(self, path: str, fields: Any, interval_us: int) -> None:
            super().__init__(path, fields, interval_us)
            logs.append(self)

    monkeypatch.setattr(send_mod, "open_udp_socket", refusing_socket(opened, Refused("refused for the test")))
    monkeypatch.setattr(send_mod, "TimeSeriesLog", RecordingLog)
    rc = send_mod.main(["--algo", "newreno", "--dst", "127.0.0.1", "--bind", "127.0.0.2", "--bytes", "10k",
                        "--log", str(tmp_path / "flow.csv"), "--log-interval-ms", "50"])
    assert rc == 1
    assert capsys.readouterr().err == ("bwn-send: error: cannot open a socket to 127.0.0.1: "
                                       "refused for the test\n")
    assert opened == {"bind": ("127.0.0.2", 0), "connect": ("127.0.0.1", BWN_UDP_PORT)}
    assert [log.interval_us for log in logs] == [50_000]


def test_without_bind_the_socket_is_not_bound(monkeypatch, capsys):
    opened: dict[str, Any] = {}

    monkeypatch.setattr(send_mod, "open_udp_socket", refusing_socket(opened, Refused("no")))
    assert send_mod.main(["--algo", "newreno", "--dst", "127.0.0.1:5000", "--bytes", "1k"]) == 1
    assert opened == {"bind": None, "connect": ("127.0.0.1", 5000)}


def test_stopped_before_go_writes_ready_file_closes_everything_and_sends_nothing(tmp_path: Path, monkeypatch,
                                                                               capsys):
    waited: list[tuple[Any, ...]] = []
    logs: list[Any] = []
    sockets: list[socket.socket] = []

    def stopped(wait_go: bool, delay_s: float) -> None:
        waited.append((wait_go, delay_s))
        raise NotStarted("stopped for the test")

    class RecordingLog(send_mod.TimeSeriesLog):
        def __init__(self, *a: Any) -> None:
            super().__init__(*a)
            logs.append(self)

    def real_socket(**kw: Any) -> socket.socket:
        sockets.append(open_udp_socket(**kw))
        return sockets[-1]

    monkeypatch.setattr(send_mod, "wait_for_start", stopped)
    monkeypatch.setattr(send_mod, "TimeSeriesLog", RecordingLog)
    monkeypatch.setattr(send_mod, "open_udp_socket", real_socket)
    ready = tmp_path / "send.ready"
    rc = send_mod.main(["--algo", "newreno", "--dst", "127.0.0.1:9", "--bytes", "1k", "--ready-file", str(ready), "--wait-go",
                        "--start-delay-s", "0.25", "--log", str(tmp_path / "flow.csv")])
    assert rc == 1
    assert capsys.readouterr().err == "bwn-send: stopped for the test before the flow started: nothing sent\n"
    assert ready.read_text() == f"{os.getpid()}\n"
    assert waited == [(True, 0.25)]
    assert logs and logs[0]._fh.closed and sockets and sockets[0].fileno() == -1


def test_send_an_unwritable_ready_file_is_an_error_before_anything_is_sent(tmp_path: Path, capsys):
    rc = send_mod.main(["--algo", "newreno", "--dst", "127.0.0.1:9", "--bytes", "1k", "--ready-file", str(tmp_path / "no" / "r")])
    assert rc == 1
    assert capsys.readouterr().err == (f"bwn-send: error: cannot write --ready-file {tmp_path / 'no' / 'r'}: "
                                       "No such file or directory\n")


def test_send_an_unwritable_log_is_a_usage_error(tmp_path: Path, capsys):
    with pytest.raises(SystemExit) as exc:
        send_mod.main(["--algo", "newreno", "--dst", "127.0.0.1:9", "--bytes", "1k", "--log", str(tmp_path / "no" / "flow.csv")])
    assert exc.value.code == 2
    assert "bwn-send: error: cannot write --log file: [Errno 2] " in capsys.readouterr().err


# -- bwn-recv's main at its seams: the flow line, --once's linger, the warnings' pacing --

WARN = recv_mod.WARN_INTERVAL_US


class FakeFlow:
    """What on_flow_end and the exit status read of a flow: its summary at a time."""

    def __init__(self, status: str, goodput_bps: Optional[float], out: Optional[str]) -> None:
        self.status, self.goodput_bps, self.out = status, goodput_bps, out
        self.asked_at: list[Any] = []

    def summary(self, t_us: Any) -> dict[str, Any]:
        self.asked_at.append(t_us)
        return {"flow_id": 7, "peer": "10.0.0.1:4000", "status": self.status, "bytes": 1500,
                "duration_s": 0.25, "goodput_bps": self.goodput_bps, "out": self.out}


def run_main(monkeypatch, argv: list[str], loop) -> int:
    """main with the socket loop replaced by `loop(made, should_stop, clock)`: `made` holds
    the Receiver's arguments, `clock` sets now_us."""
    made: dict[str, Any] = {}
    clock = {"now": 1_000_000}

    class Recording(recv_mod.Receiver):
        def __init__(self, emit, sinks, **kw):
            made.update(kw, sinks=sinks, receiver=self)
            super().__init__(emit, sinks, **kw)

    monkeypatch.setattr(recv_mod, "Receiver", Recording)
    monkeypatch.setattr(recv_mod, "now_us", lambda: clock["now"])
    monkeypatch.setattr(recv_mod, "run_receiver", lambda receiver, sock, wake, should_stop:
                        loop(made, should_stop, clock))
    return recv_mod.main(["--listen", "127.0.0.1:0", *argv])


def test_once_lingers_exactly_then_stops_and_reports_the_flow(monkeypatch, capsys):
    flow = FakeFlow("complete", 48_000.0, "/tmp/out-7.bin")

    def loop(made, should_stop, clock):
        clock["now"] = 5_000_000
        made["on_flow_end"](flow)
        assert flow.asked_at == [5_000_000]
        assert should_stop(5_000_000 + 499_999) is False
        assert should_stop(5_000_000 + 500_000) is True

    assert run_main(monkeypatch, ["--once", "--linger", "0.5"], loop) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == ("bwn-recv: flow 7 from 10.0.0.1:4000 complete: 1500 bytes in 0.250 s, "
                      "0.048 Mb/s -> /tmp/out-7.bin")
    assert out[1].startswith("bwn-recv: receiver: ")


def test_a_flow_without_goodput_or_file_says_neither(monkeypatch, capsys):
    def loop(made, should_stop, clock):
        made["on_flow_end"](FakeFlow("complete", None, None))

    assert run_main(monkeypatch, [], loop) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        "bwn-recv: flow 7 from 10.0.0.1:4000 complete: 1500 bytes in 0.250 s")


def test_once_without_an_ended_flow_never_stops_and_without_once_nothing_stops(monkeypatch, capsys):
    def loop(made, should_stop, clock):
        assert should_stop(10 * WARN) is False                     # --once, no flow yet
    assert run_main(monkeypatch, ["--once", "--linger", "0"], loop) == 0

    def loop2(made, should_stop, clock):
        made["on_flow_end"](FakeFlow("complete", 1.0, None))
        assert should_stop(10 * WARN) is False                     # not --once: serve on
    assert run_main(monkeypatch, [], loop2) == 0


def test_once_exits_1_when_its_flow_did_not_complete(monkeypatch, capsys):
    flow = FakeFlow("failed: reset by the sender", None, None)

    def loop(made, should_stop, clock):
        made["on_flow_end"](flow)
        clock["now"] = 9_000_000

    assert run_main(monkeypatch, ["--once"], loop) == 1
    assert flow.asked_at == [1_000_000, 9_000_000]                # at its end, then at exit


def test_unusable_datagrams_are_reported_once_per_interval_and_only_when_new(monkeypatch, capsys):
    said: list[str] = []

    def told() -> str:
        return "".join(line for line in capsys.readouterr().err.splitlines(True) if "warning" in line)

    def loop(made, should_stop, clock):
        stats = made["receiver"].stats
        should_stop(WARN)                                          # nothing unusable yet: quiet
        said.append(told())
        stats.malformed_short += 3
        should_stop(WARN + 1)                                      # within the interval: quiet
        said.append(told())
        should_stop(2 * WARN + 1)
        said.append(told())
        stats.unknown_flow += 2
        should_stop(3 * WARN)                                      # 1 us short of the interval
        said.append(told())
        should_stop(3 * WARN + 1)
        said.append(told())
        should_stop(4 * WARN + 1)                                  # nothing new: quiet
        said.append(told())

    assert run_main(monkeypatch, [], loop) == 0
    assert [s.split(" datagrams")[0] for s in said] == [
        "", "", "bwn-recv: warning: 3", "", "bwn-recv: warning: 2", ""]


def test_quiet_says_nothing_about_unusable_datagrams(monkeypatch, capsys):
    def loop(made, should_stop, clock):
        made["receiver"].stats.malformed_short += 3
        should_stop(WARN)
        should_stop(2 * WARN)

    assert run_main(monkeypatch, ["--quiet"], loop) == 0
    assert capsys.readouterr() == ("", "")


def test_summary_and_stats_files_are_indented_json_and_the_log_is_closed(tmp_path: Path, monkeypatch,
                                                                        capsys):
    logs: list[Any] = []

    class RecordingLog(recv_mod.TimeSeriesLog):
        def __init__(self, path: str, fields: Any, interval_us: int) -> None:
            super().__init__(path, fields, interval_us)
            logs.append(self)

    monkeypatch.setattr(recv_mod, "TimeSeriesLog", RecordingLog)

    def loop(made, should_stop, clock):
        made["on_flow_end"](FakeFlow("complete", 8.0, None))

    assert run_main(monkeypatch, ["--summary-json", str(tmp_path / "s.json"), "--stats-json",
                                  str(tmp_path / "st.json"), "--log", str(tmp_path / "r.csv"),
                                  "--log-interval-ms", "50"], loop) == 0
    for name in ("s.json", "st.json"):
        text = (tmp_path / name).read_text()
        assert json.loads(text) and text.endswith("\n") and text.splitlines()[1].startswith("  ")
        assert not text.splitlines()[1].startswith("   ")
    assert json.loads((tmp_path / "s.json").read_text())[0]["flow_id"] == 7
    assert [log.interval_us for log in logs] == [50_000] and logs[0]._fh.closed


def test_listen_address_default_port_and_failure(monkeypatch, capsys):
    opened: dict[str, Any] = {}

    monkeypatch.setattr(recv_mod, "open_udp_socket", refusing_socket(opened, OSError("in use for the test")))
    assert recv_mod.main(["--listen", "127.0.0.1"]) == 1
    assert opened == {"bind": ("127.0.0.1", BWN_UDP_PORT)}
    assert capsys.readouterr().err == "bwn-recv: error: cannot listen on 127.0.0.1: in use for the test\n"


def test_out_whose_directory_is_a_file_is_a_usage_error(tmp_path: Path, capsys):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(SystemExit) as exc:
        recv_mod.main(["--listen", "127.0.0.1:0", "--out", str(tmp_path / "afile" / "out.bin")])
    assert exc.value.code == 2
    assert (f"bwn-recv: error: cannot write --out '{tmp_path / 'afile' / 'out.bin'}': no writable "
            f"directory '{tmp_path / 'afile'}'") in capsys.readouterr().err


def test_recv_an_unwritable_log_is_a_usage_error(tmp_path: Path, capsys):
    with pytest.raises(SystemExit) as exc:
        recv_mod.main(["--listen", "127.0.0.1:0", "--log", str(tmp_path / "no" / "r.csv")])
    assert exc.value.code == 2
    assert "bwn-recv: error: cannot write --log file: [Errno 2] " in capsys.readouterr().err


def test_recv_an_unwritable_ready_file_is_an_error_and_the_socket_is_closed(tmp_path: Path, monkeypatch, capsys):
    sockets: list[socket.socket] = []
    real = recv_mod.open_udp_socket

    def keep(**kw: Any) -> socket.socket:
        sockets.append(real(**kw))
        return sockets[-1]

    monkeypatch.setattr(recv_mod, "open_udp_socket", keep)
    path = tmp_path / "no" / "r"
    assert recv_mod.main(["--listen", "127.0.0.1:0", "--ready-file", str(path)]) == 1
    assert capsys.readouterr().err == (f"bwn-recv: error: cannot write --ready-file {path}: "
                                       "No such file or directory\n")
    assert sockets[0].fileno() == -1


class LineRecorder:
    """A stdout that records its writes and flushes, to see a line flushed as it is
    printed (a runner reads the agents' lines through a pipe while they run)."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def write(self, text: str) -> int:
        self.events.append(text)
        return len(text)

    def flush(self) -> None:
        self.events.append("<flush>")

    def flushed_lines(self) -> list[str]:
        """The lines followed by a flush before anything else is written."""
        out, line = [], ""
        for i, event in enumerate(self.events):
            if event == "<flush>":
                continue
            line += event
            if line.endswith("\n"):
                if i + 1 < len(self.events) and self.events[i + 1] == "<flush>":
                    out.append(line.rstrip("\n"))
                line = ""
        return out


def test_recv_flushes_each_flow_line_and_its_counters_as_it_prints_them(monkeypatch):
    recorder = LineRecorder()
    monkeypatch.setattr(sys, "stdout", recorder)

    def loop(made, should_stop, clock):
        made["on_flow_end"](FakeFlow("complete", 8e6, None))

    assert run_main(monkeypatch, [], loop) == 0
    flushed = recorder.flushed_lines()
    assert flushed[0].startswith("bwn-recv: flow 7 from 10.0.0.1:4000 complete") and len(flushed) == 2
    assert flushed[1].startswith("bwn-recv: receiver: ")


def test_send_flushes_its_summary_line(tmp_path: Path, monkeypatch):
    recorder = LineRecorder()
    out = tmp_path / "out.bin"
    recv, port = start_recv("--out", str(out), "--once", "--linger", "0.2")
    monkeypatch.setattr(sys, "stdout", recorder)
    rc = send_mod.main(["--dst", f"127.0.0.1:{port}", "--algo", "newreno", "--bytes", "20k", "--flow-id", "5"])
    assert rc == 0 and finish(recv)[0] == 0
    (line,) = recorder.flushed_lines()
    assert line.startswith("bwn-send: flow 5 newreno: 20000 bytes in ")


# -- bwn-send's main with its socket loop replaced: what it builds from its options --------

class SendRun:
    """What send_mod.main built: the Sender (its config, flow id, source, log), the
    start-up wait it asked for, and the times the sender was told of a refusal."""

    def __init__(self) -> None:
        self.sender: Any = None
        self.waited: list[tuple[bool, float]] = []
        self.unreachable_at: list[Any] = []


def run_send(monkeypatch, argv: list[str], loop=None, clock_us: int = 5_000_000) -> tuple[int, SendRun]:
    """send_mod.main with run_sender replaced by `loop(sender, sock)` (default: return at
    once, nothing sent), the start-up wait recorded and now_us fixed at `clock_us`."""
    run = SendRun()

    class Recording(send_mod.Sender):
        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(*a, **kw)
            run.sender = self

        def on_unreachable(self, now_us: int) -> None:
            run.unreachable_at.append(now_us)
            super().on_unreachable(now_us)

    monkeypatch.setattr(send_mod, "Sender", Recording)
    monkeypatch.setattr(send_mod, "now_us", lambda: clock_us)
    monkeypatch.setattr(send_mod, "wait_for_start", lambda wait_go, delay_s: run.waited.append((wait_go, delay_s)))
    monkeypatch.setattr(send_mod, "run_sender",
                        lambda sender, sock, wake: loop(sender, sock) if loop is not None else None)
    return send_mod.main(argv), run


def usage_error(argv: list[str], capsys) -> str:
    """main's exit status must be 2; returns its one stderr line."""
    with pytest.raises(SystemExit) as exc:
        send_mod.main(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err


def test_send_options_reach_the_sender_in_its_units(monkeypatch, capsys) -> None:
    """ms and s become us, Mb/s becomes b/s, --no-sack turns SACK off, --flow-id is
    read in any base; the start-up wait gets --start-delay-s."""
    rc, run = run_send(monkeypatch, [
        "--algo", "newreno", "--dst", "127.0.0.1:9", "--duration", "7.25", "--mss", "1000",
        "--min-rto-ms", "150", "--initial-rto-ms", "2500", "--connect-timeout", "3.5",
        "--app-rate-mbit", "2.5", "--no-sack", "--flow-id", "0x2a", "--start-delay-s", "0.5", "--quiet"])
    assert rc == 0 and capsys.readouterr().out == ""
    assert run.sender.cfg == send_mod.SenderConfig(
        mss_bytes=1000, min_rto_us=150_000, initial_rto_us=2_500_000, connect_timeout_us=3_500_000,
        duration_us=7_250_000, app_rate_bps=2_500_000.0, sack=False)
    assert run.sender.flow_id == 42 and run.sender.source.length_bytes is None    # --duration: open-ended
    assert run.waited == [(False, 0.5)]


def test_send_defaults_are_the_documented_ones(tmp_path: Path, monkeypatch, capsys) -> None:
    """Without options (as --help says): the default MSS, RTO floor 200 ms, first RTO 1 s,
    connect timeout 10 s, SACK offered, no start delay, a log row at most every 10 ms."""
    rc, run = run_send(monkeypatch, ["--algo", "newreno", "--dst", "127.0.0.1:9", "--bytes", "3k",
                                     "--log", str(tmp_path / "flow.csv")])
    assert rc == 0
    cfg = run.sender.cfg
    assert (cfg.mss_bytes, cfg.min_rto_us, cfg.initial_rto_us, cfg.connect_timeout_us) == (
        send_mod.DEFAULT_MSS_BYTES, 200_000, 1_000_000, 10_000_000)
    assert cfg.sack is True and cfg.duration_us is None and cfg.app_rate_bps is None
    assert run.sender.source.length_bytes == 3000
    assert run.waited == [(False, 0.0)]
    assert run.sender.log.interval_us == 10_000


def test_a_min_rto_of_60000_ms_is_the_most_accepted(monkeypatch, capsys) -> None:
    rc, run = run_send(monkeypatch, ["--algo", "newreno", "--dst", "127.0.0.1:9", "--bytes", "1k",
                                     "--min-rto-ms", "60000", "--quiet"])
    assert rc == 0 and run.sender.cfg.min_rto_us == 60_000_000
    assert usage_error(["--algo", "newreno", "--dst", "127.0.0.1:9", "--bytes", "1k",
                        "--min-rto-ms", "60000.5"], capsys) == (
        "bwn-send: error: --min-rto-ms must be at most 60000 (see --help)\n")


@pytest.mark.parametrize("option", ["--duration", "--app-rate-mbit", "--min-rto-ms", "--initial-rto-ms",
                                    "--reserved-rate-mbit"])
def test_send_numeric_options_refuse_text_and_negatives(option: str, capsys) -> None:
    for bad in ("soon", "-1"):
        err = usage_error(["--algo", "gtcp", "--dst", "127.0.0.1:9", "--bytes", "1k", option, bad], capsys)
        assert err.startswith(f"bwn-send: error: argument {option}: ") and err.count("\n") == 1


def test_dst_port_0_is_a_usage_error(capsys) -> None:
    assert usage_error(["--algo", "newreno", "--dst", "127.0.0.1:0", "--bytes", "1k"], capsys) == (
        "bwn-send: error: --dst port must not be 0 (see --help)\n")


def test_input_shorter_than_bytes_is_a_usage_error_and_bytes_cut_a_longer_one(tmp_path: Path, monkeypatch,
                                                                              capsys) -> None:
    src = tmp_path / "in.bin"
    src.write_bytes(bytes(1000))
    assert usage_error(["--algo", "newreno", "--dst", "127.0.0.1:9", "--input", str(src), "--bytes", "2000"],
                       capsys) == f"bwn-send: error: --bytes 2000 is more than the 1000 bytes of {src} (see --help)\n"
    rc, run = run_send(monkeypatch, ["--algo", "newreno", "--dst", "127.0.0.1:9", "--input", str(src),
                                     "--bytes", "300", "--quiet"])
    assert rc == 0 and run.sender.source.length_bytes == 300


def test_list_algos_prints_the_algorithms_and_exits_0(capsys) -> None:
    assert send_mod.main(["--list-algos"]) == 0
    out = capsys.readouterr().out
    assert out == send_mod.registry.describe_all() + "\n"
    assert all(name in out for name in ("newreno", "gtcp", "westwood"))


def test_reserved_rate_is_gtcps_rate_in_bits_and_appears_in_the_summary_params(tmp_path: Path, monkeypatch,
                                                                             capsys) -> None:
    rc, run = run_send(monkeypatch, ["--algo", "gtcp", "--dst", "127.0.0.1:9", "--bytes", "1k",
                                     "--reserved-rate-mbit", "2.5", "--quiet",
                                     "--summary-json", str(tmp_path / "s.json")])
    assert rc == 0
    assert json.loads((tmp_path / "s.json").read_text())["params"] == {"rate_g_bps": 2_500_000.0}


def test_summary_json_and_line_of_a_flow_that_never_started(tmp_path: Path, monkeypatch, capsys) -> None:
    """A flow the loop left unconnected: status incomplete (exit 0), its line with '-'
    for what was never measured, cpu_s to the millisecond, dst as given."""
    monkeypatch.setattr(send_mod, "time", type("FakeTime", (), {"process_time": staticmethod(lambda: 1.23456)}))
    rc, run = run_send(monkeypatch, ["--algo", "newreno", "--dst", "127.0.0.1:9", "--bytes", "1k",
                                     "--flow-id", "7", "--summary-json", str(tmp_path / "s.json")])
    assert rc == 0
    summary = json.loads((tmp_path / "s.json").read_text())
    assert (summary["status"], summary["cpu_s"], summary["dst"], summary["duration_s"]) == (
        "incomplete", 1.235, "127.0.0.1:9", None)
    assert capsys.readouterr().out == (
        "bwn-send: flow 7 newreno: 0 bytes in - s, goodput - Mb/s, retransmits 0, timeouts 0, "
        f"{'SACK' if summary['sack'] else 'no SACK'}, RTT p50/p95/p99/mean -/-/-/- ms (incomplete)\n")


def test_a_random_flow_id_is_32_bits_and_the_same_on_the_error_line_and_in_the_summary(
        tmp_path: Path, monkeypatch, capsys) -> None:
    """Without --flow-id the id is random; with the generator at its largest the id
    still fits the header's 32 bits, and the failure line names that id."""
    monkeypatch.setattr(send_mod.random, "getrandbits", lambda k: (1 << k) - 1)
    rc, run = run_send(monkeypatch, ["--algo", "newreno", "--dst", "127.0.0.1:9", "--bytes", "1k", "--quiet",
                                     "--summary-json", str(tmp_path / "s.json")],
                       loop=lambda sender, sock: sender.abort(5_000_000, "given up for the test"))
    assert rc == 1
    assert json.loads((tmp_path / "s.json").read_text())["flow_id"] == 0xFFFFFFFF
    assert capsys.readouterr().err == "bwn-send: error: flow 4294967295 failed: given up for the test\n"


def test_a_refused_datagram_tells_the_sender_at_the_current_time(monkeypatch, capsys) -> None:
    """The kernel's ICMP port unreachable (no receiver any more) reaches the sender,
    stamped with the clock, so it can end a fully acknowledged flow."""
    port = _free_udp_port()                                   # nobody listens there

    def loop(sender: Any, sock: socket.socket) -> None:
        for _ in range(3):                                    # the 2nd send sees the refusal
            sender.emit(memoryview(b"x"))

    rc, run = run_send(monkeypatch, ["--algo", "newreno", "--dst", f"127.0.0.1:{port}", "--bytes", "1k",
                                     "--quiet"], loop=loop, clock_us=7_000_000)
    assert rc == 0
    assert run.unreachable_at and set(run.unreachable_at) == {7_000_000}


def test_summary_json_is_standard_json_an_infinite_param_a_string(tmp_path: Path, monkeypatch, capsys) -> None:
    """--summary-json never holds the NaN / Infinity tokens other JSON readers refuse:
    an infinite figure is "inf" / "-inf", a NaN is null, inside dicts and lists too."""
    rc, run = run_send(monkeypatch, ["--algo", "gtcp", "--dst", "127.0.0.1:9", "--bytes", "1k", "--quiet",
                                     "--param", "initial_ssthresh=inf", "--summary-json", str(tmp_path / "s.json")])
    assert rc == 0
    text = (tmp_path / "s.json").read_text()
    assert "Infinity" not in text and "NaN" not in text
    assert json.loads(text)["params"] == {"initial_ssthresh": "inf"}
    inf, nan = float("inf"), float("nan")
    assert send_mod._jsonable({"a": [nan, -inf, 1.5], "b": (2, inf), "c": {"d": nan}, "e": "x"}) == {
        "a": [None, "-inf", 1.5], "b": [2, "inf"], "c": {"d": None}, "e": "x"}
