"""Command line of the link emulator: validation, help, argv round trip (no root)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bwn.linkem import Impairment, LinkConfig
from bwn.linkem.cli import build_parser, config_from_args, format_stats
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
    from bwn.controller.schedule import SineSchedule, StepSchedule

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
