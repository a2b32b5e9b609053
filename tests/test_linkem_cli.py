"""Command line of the link emulator: validation, help, argv round trip (no root)."""

from __future__ import annotations

import dataclasses
import io
import json
import signal
import socket
import subprocess
import sys
import types
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest

from bwn.linkem import Impairment, LinkConfig
from bwn.linkem import cli
from bwn.linkem.cli import READY_MARKER, build_parser, config_from_args, format_stats
from bwn.linkem.netns import linkem_command


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bwn.linkem", *args], capture_output=True,
                          text=True, timeout=30)


def test_help_explains_options():
    res = run_cli("--help")
    assert res.returncode == 0
    for needle in ("--delay-ms", "--jitter-ms", "--loss", "--reorder", "--duplicate", "--rate-mbit",
                   "--queue-packets", "--seed", "--stats-json", "--a-to-b-delay-ms",
                   "--b-to-a-loss", "fraction in [0,1]"):
        assert needle in res.stdout, needle


BAD_VALUES = [
        (["--loss", "1.5"], "fraction in [0, 1]"),
        (["--loss", "-0.1"], "fraction in [0, 1]"),
        (["--reorder", "nan"], "finite"),
        (["--duplicate", "2"], "fraction in [0, 1]"),
        (["--b-to-a-loss", "7"], "fraction in [0, 1]"),
        (["--delay-ms", "-1"], "must not be negative"),
        (["--jitter-ms", "abc"], "not a number"),
        (["--rate-mbit", "10"], "needs a queue size (--queue-packets)"),
        (["--queue-packets", "10"], "--queue-packets only makes sense with a rate limit"),
        (["--rate-mbit", "0", "--queue-packets", "5"], "must be positive"),
        (["--a-to-b-rate-mbit", "5"], "a-to-b: a rate limit needs"),
        (["--rate-schedule", '{"kind": "sine", "b_mbit": 1, "w_rad_s": 1}'],
         "a rate schedule needs a queue size (--queue-packets)"),
        (["--rate-schedule", '{"kind": "constant", "rate_mbit": 1}', "--rate-mbit", "1",
          "--queue-packets", "5"], "either a rate (--rate-mbit) or a rate schedule (--rate-schedule)"),
        (["--rate-schedule", "sine"], "not a rate schedule: "),
        (["--rate-schedule", '{"kind": "trace", "path": "x"}'],
         "not a rate schedule: kind: expected one of: constant, steps, sine (a trace is a file"),
        (["--rate-schedule", '{"kind": "sine", "b_mbit": 1}'], "not a rate schedule: w_rad_s: missing (required)"),
        (["--rate-schedule", '{"kind": "sine", "b_mbit": -1, "w_rad_s": 1}'], "not a rate schedule: "),
        (["--rate-schedule", '{"kind": "steps", "steps": [{"t_s": 1, "rate_mbit": 2}]}'],
         "the first step must be at t_s = 0"),
]


@pytest.mark.parametrize("args, fragment", BAD_VALUES)
def test_bad_values_exit_2_with_one_line_error(args, fragment):
    res = run_cli("lo", "nonexistent0", *args)
    assert res.returncode == 2, res.stderr
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("bwn-link: error:"), res.stderr
    assert fragment in last, last
    assert "Traceback" not in res.stderr


def test_same_interface_twice_is_rejected():
    res = run_cli("lo", "lo", "--delay-ms", "1")
    assert res.returncode == 2
    assert "same interface" in res.stderr.strip().splitlines()[-1]


def test_nonexistent_interface_is_rejected():
    res = run_cli("lo", "nosuchif9z", "--delay-ms", "1")
    assert res.returncode == 2
    assert "no such network interface" in res.stderr.strip().splitlines()[-1]
    assert "nosuchif9z" in res.stderr


def test_console_script_and_module_agree():
    import shutil

    script = shutil.which("bwn-link") or str(__import__("pathlib").Path(sys.executable).with_name("bwn-link"))
    res = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0 and res.stdout == run_cli("--help").stdout


def test_per_direction_overrides():
    args = build_parser().parse_args(
        ["x", "y", "--delay-ms", "10", "--loss", "0.01", "--b-to-a-delay-ms", "2.5",
         "--a-to-b-loss", "0", "--rate-mbit", "20", "--queue-packets", "50", "--seed", "4"]
    )
    cfg = config_from_args(args)
    assert cfg.a_to_b == Impairment(delay_us=10_000, loss=0.0, rate_bps=20_000_000, queue_packets=50)
    assert cfg.b_to_a == Impairment(delay_us=2_500, loss=0.01, rate_bps=20_000_000, queue_packets=50)
    assert cfg.seed == 4


def test_linkem_command_round_trips():
    cfg = LinkConfig(
        a_to_b=Impairment(delay_us=1_234_567, jitter_us=1, loss=0.125, reorder=0.3, reorder_hold_us=7,
                          duplicate=1e-4, rate_bps=12_345_678, queue_packets=9, jitter_reorders=True),
        b_to_a=Impairment(delay_us=3, limit_packets=77),
        seed=99,
    )
    argv = linkem_command("ea", "eb", cfg)
    assert argv[1:3] == ["-m", "bwn.linkem"]
    parsed = config_from_args(build_parser().parse_args(argv[3:]))
    assert parsed == cfg


def test_linkem_command_round_trips_a_rate_schedule():
    from bwn.scenario.schedule import SineSchedule, StepSchedule

    cfg = LinkConfig(
        a_to_b=Impairment(delay_us=20_000, rate_schedule=SineSchedule(2e6, 3.0, 0.5, 0.25), queue_packets=50),
        b_to_a=Impairment(rate_schedule=StepSchedule([(0, 1e6), (2.5, 3e6)]), queue_packets=7),
        seed=1,
    )
    argv = linkem_command("ea", "eb", cfg)
    parsed = config_from_args(build_parser().parse_args(argv[3:]))
    assert parsed == cfg


def test_format_stats_has_one_line_per_direction():
    counters = {k: 0 for k in ("rx_frames", "forwarded_frames")}
    text = format_stats({"iface_a": "a", "iface_b": "b", "seed": 1, "duration_s": 1.0,
                         "a_to_b": dict(counters, rx_frames=5), "b_to_a": counters})
    lines = text.splitlines()
    assert len(lines) == 4 and lines[2].startswith("a->b") and lines[3].startswith("b->a")


@pytest.mark.parametrize("args, fragment", BAD_VALUES)
def test_bad_values_are_refused_before_anything_opens(args, fragment, capsys):
    """The same refusals in this process (what the mutation loop can trace): each value
    is refused by bwn-link's own parser before any socket, signal or interface."""
    from bwn.linkem import cli
    with pytest.raises(SystemExit) as exit_:
        cli.main(["lo", "nonexistent0", *args])
    assert exit_.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("bwn-link: error: ") and fragment in last, last


def test_format_stats_columns_and_names():
    counters = {"rx_frames": 5, "forwarded_frames": 4, "dropped_loss": 1}
    text = format_stats({"iface_a": "veth-long-a", "iface_b": "b", "seed": 1, "duration_s": 1.23456,
                         "a_to_b": counters, "b_to_a": {}})
    titles = ("received", "forwarded", "lost", "queue-drop", "limit-drop", "reordered", "duplicated",
              "tx-errors", "kernel-drop", "pending", "csum-fixed", "gso-split", "segments", "offload-drop",
              "oversize")
    assert text.splitlines() == [
        "bwn-link: stopped after 1.235 s (seed 1)",
        f"{'direction':<14} " + " ".join(f"{t:>12}" for t in titles),     # as wide as the longest name
        f"{'veth-long-a->b':<14} " + " ".join(f"{n:>12}" for n in (5, 4, 1) + (0,) * 12),
        f"{'b->veth-long-a':<14} " + " ".join(f"{0:>12}" for _ in titles),
    ]
    short = format_stats({"iface_a": "a", "iface_b": "b", "seed": 2, "duration_s": 0.0, "a_to_b": {}, "b_to_a": {}})
    assert short.splitlines()[1:3] == [                            # at least "direction"'s 9
        "direction " + " ".join(f"{t:>12}" for t in titles),
        "a->b      " + " ".join(f"{0:>12}" for _ in titles)]


# -- main() in this process: every way it ends, with a fake emulator (no root, no sockets) ---------


ERR = "bwn-link: error: "


class FakeClock:
    """``time.monotonic`` and ``threading.Event`` for main's wait loop: waiting moves the
    clock on by the time waited (or to the next scheduled action, e.g. a signal)."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.waits = 0
        self.actions: List[Tuple[float, Callable[[], None]]] = []

    def monotonic(self) -> float:
        return self.now

    def at(self, t: float, action: Callable[[], None]) -> None:
        self.actions.append((t, action))

    def event(self) -> "FakeEvent":
        return FakeEvent(self)


class FakeEvent:
    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.flag = False

    def is_set(self) -> bool:
        return self.flag

    def set(self) -> None:
        self.flag = True

    def wait(self, timeout: float) -> bool:
        clock = self.clock
        clock.waits += 1
        if clock.waits > 200:     # a coarse clock that does not move while main waits 0 s
            raise AssertionError("main keeps waiting without end")
        due = [a for a in clock.actions if a[0] <= clock.now + timeout]
        if due:
            t, action = min(due, key=lambda a: a[0])
            clock.actions.remove((t, action))
            clock.now = max(clock.now, t)
            action()
        else:
            clock.now += timeout
        return self.flag


class FakeLink:
    """What the fake emulator does (set before main runs) and what main did with it."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.start_error: Optional[BaseException] = None
        self.dies_after_s = float("inf")            # the workers end by themselves after this
        self.worker_error: Optional[BaseException] = None
        self.emulator: Optional["FakeEmulator"] = None
        self.handlers: Dict[int, Any] = {}
        self.on_first_poll: Callable[[], None] = lambda: None


class FakeEmulator:
    """Stands in for LinkEmulator, with its signature's defaults."""

    def __init__(self, link: FakeLink, iface_a: str, iface_b: str, *, config: LinkConfig,
                 promiscuous: bool = True, rt_priority: int = 0) -> None:
        self.link = link
        self.iface_a, self.iface_b = iface_a, iface_b
        self.config = config if config.seed is not None else dataclasses.replace(config, seed=77)
        self.promiscuous = promiscuous
        self.rt_priority = rt_priority
        self.started_at: Optional[float] = None
        self.stopped_at: Optional[float] = None
        self.stop_requests = 0
        self.polls = 0

    def start(self) -> "FakeEmulator":
        if self.link.start_error is not None:
            raise self.link.start_error
        self.started_at = self.link.clock.now
        return self

    def _dead(self) -> bool:
        assert self.started_at is not None
        return self.link.clock.now >= self.started_at + self.link.dies_after_s

    @property
    def running(self) -> bool:
        self.polls += 1
        if self.polls == 1:
            self.link.on_first_poll()
        return self.stopped_at is None and not self._dead()

    @property
    def failed(self) -> Optional[BaseException]:
        return self.link.worker_error if self._dead() else None

    def request_stop(self) -> None:
        self.stop_requests += 1

    def start_schedule(self) -> None:
        pass

    def stop(self) -> Dict[str, Any]:
        assert self.started_at is not None
        self.stopped_at = self.link.clock.now
        return {"iface_a": self.iface_a, "iface_b": self.iface_b, "seed": self.config.seed,
                "duration_s": self.stopped_at - self.started_at,
                "a_to_b": {"rx_frames": 3, "forwarded_frames": 2, "dropped_loss": 1}, "b_to_a": {}}


@pytest.fixture
def link(monkeypatch: pytest.MonkeyPatch) -> FakeLink:
    """main() against a fake emulator and clock, interfaces "ea" and "eb" present; no signal
    handler of this process is touched (main's are recorded in link.handlers)."""
    clock = FakeClock()
    fake = FakeLink(clock)

    def if_nametoindex(name: str) -> int:
        if name not in ("ea", "eb"):
            raise OSError(19, "No such device")
        return 7 if name == "ea" else 8

    def make(*args: Any, **kwargs: Any) -> FakeEmulator:
        fake.emulator = FakeEmulator(fake, *args, **kwargs)
        return fake.emulator

    monkeypatch.setattr(socket, "if_nametoindex", if_nametoindex)
    monkeypatch.setattr(cli, "LinkEmulator", make)
    monkeypatch.setattr(signal, "signal", lambda sig, handler: fake.handlers.__setitem__(sig, handler))
    monkeypatch.setattr(cli, "time", types.SimpleNamespace(monotonic=clock.monotonic))
    monkeypatch.setattr(cli, "threading", types.SimpleNamespace(Event=clock.event))
    return fake


def usage_error(argv: List[str], capsys: pytest.CaptureFixture[str]) -> str:
    """main's one-line refusal of a command line (exit status 2, stderr only)."""
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    return err.strip().splitlines()[-1]


def test_same_interface_twice_is_named_in_the_error(capsys):
    assert usage_error(["lo", "lo", "--delay-ms", "1"], capsys) == (
        ERR + "IFACE_A and IFACE_B are the same interface ('lo')")


def test_an_unknown_interface_is_named_before_any_socket_opens(monkeypatch, capsys):
    monkeypatch.setattr(cli, "LinkEmulator", lambda *a, **kw: pytest.fail("emulator built"))
    assert usage_error(["lo", "nosuchif9z", "--delay-ms", "1"], capsys) == (
        ERR + "no such network interface in this namespace: 'nosuchif9z'")


@pytest.mark.parametrize("args, line", [
    (["--rate-mbit", "0", "--queue-packets", "5"], "argument --rate-mbit: must be positive, got '0'"),
    (["--delay-ms", "3600000.5"], "argument --delay-ms: more than an hour, got '3600000.5'"),
    (["--loss", "1.5"], "argument --loss: must be a fraction in [0, 1] (0.01 = 1%), got '1.5'"),
    (["--b-to-a-duplicate", "-0.5"],
     "argument --b-to-a-duplicate: must be a fraction in [0, 1] (0.01 = 1%), got '-0.5'"),
    (["--duration-s", "-1"], "argument --duration-s: must not be negative, got '-1'"),
    (["--reorder", "0.5", "--reorder-hold-ms", "0"],
     "a-to-b: --reorder-hold-ms must be positive when reorder > 0"),
    (["--rate-mbit", "1", "--queue-packets", "5", "--rt-priority", "100"],
     "--rt-priority must be between 0 and 99"),
])
def test_each_refusal_word_for_word(args, line, link, capsys):
    """The option (as typed, not the config field) and the offending value are named."""
    assert usage_error(["ea", "eb", *args], capsys) == ERR + line
    assert link.emulator is None


def test_the_edges_of_each_range_are_accepted():
    args = build_parser().parse_args(
        ["x", "y", "--delay-ms", "3600000", "--loss", "1", "--duplicate", "0", "--b-to-a-reorder", "1",
         "--duration-s", "0", "--rate-mbit", "0.001", "--queue-packets", "1"])
    assert args.duration_s == 0.0
    cfg = config_from_args(args)
    assert cfg.a_to_b == Impairment(delay_us=3_600_000_000, loss=1.0, rate_bps=1000, queue_packets=1)
    assert cfg.b_to_a.reorder == 1.0 and cfg.b_to_a.loss == 1.0


def test_jitter_reorders_applies_to_both_directions_unless_overridden_for_one():
    def flags(*argv: str) -> Tuple[bool, bool]:
        cfg = config_from_args(build_parser().parse_args(["x", "y", "--jitter-ms", "1", *argv]))
        return cfg.a_to_b.jitter_reorders, cfg.b_to_a.jitter_reorders

    assert flags() == (False, False)
    assert flags("--jitter-reorders") == (True, True)
    assert flags("--b-to-a-jitter-reorders") == (False, True)
    assert flags("--a-to-b-jitter-reorders") == (True, False)


def test_run_options_reach_the_emulator(link):
    assert cli.main(["ea", "eb", "--seed", "3", "--duration-s", "0", "--quiet"]) == 0
    emu = link.emulator
    assert emu is not None
    assert (emu.iface_a, emu.iface_b, emu.promiscuous, emu.rt_priority) == ("ea", "eb", True, 0)
    assert emu.config == LinkConfig(seed=3)
    assert cli.main(["ea", "eb", "--duration-s", "0", "--quiet", "--rt-priority", "7", "--no-promisc",
                     "--delay-ms", "2"]) == 0
    emu = link.emulator
    assert (emu.promiscuous, emu.rt_priority) == (False, 7)
    assert emu.config.a_to_b == emu.config.b_to_a == Impairment(delay_us=2000)


@pytest.mark.parametrize("error, line", [
    (PermissionError(1, "Operation not permitted"), "raw packet sockets need root (CAP_NET_RAW)"),
    (OSError(19, "No such device"), "[Errno 19] No such device"),
    (ValueError("no such network interface: 'eb'"), "no such network interface: 'eb'"),
])
def test_a_failed_start_is_one_line_on_stderr_and_status_1(error, line, link, tmp_path, capsys):
    stats = tmp_path / "stats.json"
    link.start_error = error
    assert cli.main(["ea", "eb", "--stats-json", str(stats)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == ERR + line + "\n"
    assert not stats.exists()                       # nothing ran, nothing to report


def test_a_worker_failure_ends_the_run_with_status_1_and_says_why(link, tmp_path, capsys):
    stats = tmp_path / "stats.json"
    link.dies_after_s = 0.2
    link.worker_error = RuntimeError("recv failed")
    assert cli.main(["ea", "eb", "--seed", "5", "--stats-json", str(stats)]) == 1
    out, err = capsys.readouterr()
    assert err.splitlines()[0].startswith(f"{READY_MARKER}: ea <-> eb (seed 5, pid ")
    assert err.splitlines()[1:] == [ERR + "worker failed: RuntimeError('recv failed')"]
    assert "worker failed" not in out
    assert out.splitlines()[0].startswith("bwn-link: stopped after ")      # the counters still print
    report = json.loads(stats.read_text())
    assert report["exit"] == "error" and report["seed"] == 5 and report["a_to_b"]["rx_frames"] == 3
    assert [p.name for p in tmp_path.iterdir()] == ["stats.json"]        # no temporary file left


def test_a_dead_worker_is_noticed_within_half_a_second(link, capsys):
    link.dies_after_s = 0.2
    link.worker_error = OSError(100, "Network is down")
    assert cli.main(["ea", "eb", "--quiet"]) == 1
    emu = link.emulator
    assert emu is not None and emu.started_at is not None and emu.stopped_at is not None
    assert emu.stopped_at - emu.started_at <= 0.5
    assert capsys.readouterr().err == ERR + "worker failed: OSError(100, 'Network is down')\n"
    # Also while a --duration-s is far off.
    assert cli.main(["ea", "eb", "--quiet", "--duration-s", "60"]) == 1
    emu = link.emulator
    assert emu is not None and emu.started_at is not None and emu.stopped_at is not None
    assert emu.stopped_at - emu.started_at <= 0.5


def test_workers_that_end_without_an_error_end_the_run(link, capsys):
    link.dies_after_s = 0.2
    assert cli.main(["ea", "eb", "--quiet"]) == 0
    assert capsys.readouterr() == ("", "")


def test_duration_stops_the_run_cleanly_at_the_deadline(link, tmp_path, capsys):
    stats = tmp_path / "s.json"
    assert cli.main(["ea", "eb", "--duration-s", "2", "--seed", "1", "--stats-json", str(stats)]) == 0
    emu = link.emulator
    assert emu is not None and emu.started_at is not None and emu.stopped_at is not None
    assert emu.stopped_at - emu.started_at == 2.0
    report = json.loads(stats.read_text())
    assert report["exit"] == "stopped" and report["duration_s"] == 2.0
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == "bwn-link: stopped after 2.000 s (seed 1)"
    assert len(err.splitlines()) == 1 and err.startswith(READY_MARKER)


def test_sigterm_stops_the_run_cleanly(link, tmp_path, capsys):
    stats = tmp_path / "s.json"

    def sigterm() -> None:
        link.handlers[signal.SIGTERM](signal.SIGTERM, None)

    link.clock.at(link.clock.now + 1.25, sigterm)
    assert cli.main(["ea", "eb", "--quiet", "--stats-json", str(stats)]) == 0
    emu = link.emulator
    assert emu is not None and emu.stopped_at is not None and emu.started_at is not None
    assert emu.stopped_at - emu.started_at == 1.25 and emu.stop_requests >= 1
    assert set(link.handlers) >= {signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1}
    assert json.loads(stats.read_text())["exit"] == "stopped"
    assert capsys.readouterr() == ("", "")


class Pipe(io.StringIO):
    """A stream read by another process: text arrives in ``transcript`` when flushed
    (block-buffered), or as it is written (``immediate``, like a line-buffered stderr)."""

    def __init__(self, transcript: List[str], immediate: bool = False) -> None:
        super().__init__()
        self.transcript = transcript
        self.immediate = immediate
        self.sent = 0

    def write(self, s: str) -> int:
        n = super().write(s)
        if self.immediate:
            self.flush()
        return n

    def flush(self) -> None:
        pending = self.getvalue()[self.sent:]
        if pending:
            self.transcript.append(pending)
            self.sent += len(pending)


def test_the_ready_line_is_flushed_before_the_emulator_is_watched(link, monkeypatch):
    """A parent waits for READY_MARKER on bwn-link's stderr: it must arrive even when
    stderr is block-buffered, not at exit."""
    transcript: List[str] = []
    monkeypatch.setattr(sys, "stderr", Pipe(transcript))
    monkeypatch.setattr(sys, "stdout", Pipe(transcript))
    arrived_by_first_poll: List[str] = []
    link.on_first_poll = lambda: arrived_by_first_poll.append("".join(transcript))
    assert cli.main(["ea", "eb", "--duration-s", "1"]) == 0
    assert arrived_by_first_poll and arrived_by_first_poll[0].startswith(f"{READY_MARKER}: ea <-> eb")


def test_the_counters_arrive_before_the_error_line(link, monkeypatch):
    """stdout to a pipe is block-buffered; the table is flushed, so a reader of both streams
    sees it before the worker's error, not after it at exit."""
    transcript: List[str] = []
    out = Pipe(transcript)
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", Pipe(transcript, immediate=True))
    link.dies_after_s = 0.0
    link.worker_error = RuntimeError("boom")
    assert cli.main(["ea", "eb", "--seed", "2"]) == 1
    out.flush()                                     # at exit
    lines = "".join(transcript).splitlines()
    assert lines[0].startswith(READY_MARKER)
    assert lines[1] == "bwn-link: stopped after 0.000 s (seed 2)"
    assert lines[-1] == ERR + "worker failed: RuntimeError('boom')"
    assert len(lines) == 6


# ---- bwn-links: several links in one process (bwn.linkem.group_cli) ------------------

from bwn.linkem import group_cli  # noqa: E402


def _spec(tmp_path: Any, data: Any) -> str:
    path = tmp_path / "links.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(path)


def test_a_spec_gives_each_link_its_namespace_interfaces_and_bwn_link_options(tmp_path):
    path = _spec(tmp_path, {"links": [
        {"name": "em0", "netns": "/proc/1/ns/net",
         "args": ["x0", "x1", "--delay-ms", "10", "--b-to-a-loss", "0.5", "--seed", "9",
                  "--stats-json", "em0.json"]},
        {"args": ["y0", "y1", "--rate-mbit", "2", "--queue-packets", "30", "--no-promisc"]},
    ]})
    em0, second = group_cli.load_spec(path)
    assert (em0.name, em0.netns, em0.iface_a, em0.iface_b) == ("em0", "/proc/1/ns/net", "x0", "x1")
    assert em0.stats_json == "em0.json" and em0.promiscuous
    assert em0.config.seed == 9 and em0.config.a_to_b.delay_us == 10_000
    assert em0.config.a_to_b.loss == 0.0 and em0.config.b_to_a.loss == 0.5
    assert (second.name, second.netns, second.stats_json) == ("link1", None, None)
    assert second.config.a_to_b.rate_bps == 2_000_000 and second.config.b_to_a.queue_packets == 30
    assert not second.promiscuous


SPEC_ERRORS = [
    ("{", "is not JSON: "),
    ([], 'expected {"links": [{"name": ..., "args": [...]}, ...]} with at least one link'),
    ({"links": []}, 'expected {"links": [{"name": ..., "args": [...]}, ...]} with at least one link'),
    ({"links": ["x0 x1"]}, "link 0 is not an object"),
    ({"links": [{"args": ["a", "b"], "delay": 1}]}, "link 0: unknown key(s) delay (name, netns, args)"),
    ({"links": [{"name": "", "args": ["a", "b"]}]}, "link 0: name must be a non-empty string"),
    ({"links": [{"name": "e", "args": ["a", "b"]}, {"name": "e", "args": ["c", "d"]}]},
     "link name 'e' given twice"),
    ({"links": [{"name": "e", "netns": 5, "args": ["a", "b"]}]},
     "link 'e': netns must be a path (/proc/PID/ns/net)"),
    ({"links": [{"name": "e", "args": "a b"}]},
     "link 'e': args must be a list of strings (bwn-link's arguments: IFACE_A IFACE_B [options])"),
    ({"links": [{"name": "e", "args": ["a"]}]},
     "link 'e': the following arguments are required: IFACE_B"),
    ({"links": [{"name": "e", "args": ["a", "a"]}]},
     "link 'e': IFACE_A and IFACE_B are the same interface ('a')"),
    ({"links": [{"name": "e", "args": ["a", "b", "--loss", "2"]}]},
     "link 'e': argument --loss: must be a fraction in [0, 1] (0.01 = 1%), got '2'"),
    ({"links": [{"name": "e", "args": ["a", "b", "--queue-packets", "5"]}]}, "link 'e': a-to-b: "),
    ({"links": [{"name": "e", "args": ["a", "b", "--rt-priority", "5", "--quiet"]}]},
     "link 'e': --rt-priority, --quiet belong to the process: give them once on the bwn-links command line"),
    ({"links": [{"name": "e", "args": ["a", "b", "--duration-s", "3"]}]},
     "link 'e': --duration-s belong to the process"),
    ({"links": [{"name": "e", "args": ["a", "b"]}, {"name": "f", "args": ["b", "c"]}]},
     "interface 'b' is in links 'e' and 'f': each interface belongs to one link"),
]


@pytest.mark.parametrize("data,message", SPEC_ERRORS)
def test_a_bad_spec_is_refused_naming_the_link_and_what_to_fix(tmp_path, data, message):
    path = _spec(tmp_path, data)
    with pytest.raises(group_cli.SpecError) as err:
        group_cli.load_spec(path)
    assert str(err.value).startswith(f"{path}: ") or str(err.value).startswith(f"{path} is not JSON")
    assert message in str(err.value)


def test_the_same_interface_names_in_two_namespaces_are_two_links(tmp_path):
    path = _spec(tmp_path, {"links": [{"name": "e", "netns": "/run/netns/n1", "args": ["a", "b"]},
                                      {"name": "f", "netns": "/run/netns/n2", "args": ["a", "b"]}]})
    assert [s.name for s in group_cli.load_spec(path)] == ["e", "f"]


def test_bwn_links_usage_errors_exit_2_with_one_line(tmp_path, capsys):
    for argv, message in (
        ([str(tmp_path / "none.json")], f"cannot read {tmp_path / 'none.json'}: No such file or directory"),
        ([_spec(tmp_path, {"links": [{"args": ["a", "b"]}]}), "--rt-priority", "100"],
         "--rt-priority must be between 0 and 99"),
        ([_spec(tmp_path, {"links": [{"args": ["a"]}]})],
         f"{tmp_path / 'links.json'}: link 'link0': the following arguments are required: IFACE_B"),
    ):
        with pytest.raises(SystemExit) as exit_:
            group_cli.main(argv)
        assert exit_.value.code == 2
        assert f"bwn-links: error: {message}" in capsys.readouterr().err


def test_bwn_links_says_what_is_missing_and_exits_1(tmp_path, capsys, monkeypatch):
    def refuse(self: Any) -> None:
        raise ValueError("no such network interface: 'a'")

    monkeypatch.setattr(group_cli.LinkEmulator, "open", refuse)
    assert group_cli.main([_spec(tmp_path, {"links": [{"args": ["a", "b"]}]})]) == 1
    assert capsys.readouterr().err == "bwn-links: error: no such network interface: 'a'\n"

    def not_root(self: Any) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(group_cli.LinkEmulator, "open", not_root)
    assert group_cli.main([_spec(tmp_path, {"links": [{"args": ["a", "b"]}]})]) == 1
    assert capsys.readouterr().err == ("bwn-links: error: raw packet sockets and network namespaces "
                                       "need root (CAP_NET_RAW, CAP_SYS_ADMIN)\n")


def test_bwn_links_console_script_answers_help():
    res = subprocess.run([sys.executable, "-m", "bwn.linkem.group_cli", "--help"], capture_output=True,
                         text=True, timeout=30)
    assert res.returncode == 0
    for needle in ("SPEC.json", "--rt-priority", "--duration-s", "one thread serves them all"):
        assert needle in res.stdout.replace("\n", " ").replace("  ", " "), needle


class _Running:
    """An emulator as run_until_stopped sees it: running until `ends_after` polls."""

    def __init__(self, ends_after: Optional[int] = None) -> None:
        self.polls, self.ends_after = 0, ends_after

    @property
    def running(self) -> bool:
        self.polls += 1
        return self.ends_after is None or self.polls <= self.ends_after


def test_run_until_stopped_ends_on_a_signal_on_the_emulators_end_or_after_its_duration():
    import threading
    import time as clock

    stop = threading.Event()
    stop.set()
    emulator = _Running()
    cli.run_until_stopped(emulator, stop, None)            # a signal came first: no wait
    assert emulator.polls == 0
    emulator = _Running(ends_after=2)
    started = clock.monotonic()
    cli.run_until_stopped(emulator, threading.Event(), None)   # ends when the emulator does
    assert emulator.polls == 3 and clock.monotonic() - started < 5
    started = clock.monotonic()
    cli.run_until_stopped(_Running(), threading.Event(), 0.3)  # or after its duration
    assert clock.monotonic() - started >= 0.3
    later = threading.Event()
    threading.Timer(0.2, later.set).start()
    started = clock.monotonic()
    cli.run_until_stopped(_Running(), later, None)         # a signal wakes the wait at once
    assert clock.monotonic() - started < 5
