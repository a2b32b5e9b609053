"""``bwn-link``: the command-line front end of :class:`bwn.linkem.LinkEmulator`.

Every impairment option ``--X`` applies to both directions; ``--a-to-b-X`` and
``--b-to-a-X`` override it for one direction (A is the first interface given).
Usage errors print one line and exit with status 2, like argparse.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import socket
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

from bwn.cliargs import number
from bwn.scenario.config import schedule_from_json
from bwn.scenario.schedule import ScheduleError

from .config import DIRECTIONS, Impairment, LinkConfig
from .engine import LinkEmulator

__all__ = ["main", "build_parser", "config_from_args", "format_stats", "READY_MARKER"]

#: Printed (on stderr) once the sockets are open and frames flow.
READY_MARKER = "bwn-link: ready"

_PROG = "bwn-link"


def _finite_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def _milliseconds(text: str) -> float:
    value = _finite_float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text!r}")
    if value > 3_600_000:
        raise argparse.ArgumentTypeError(f"more than an hour, got {text!r}")
    return value


def _seconds(text: str) -> float:
    value = _finite_float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text!r}")
    return value


def _probability(text: str) -> float:
    value = _finite_float(text)
    if value < 0.0 or value > 1.0:
        raise argparse.ArgumentTypeError(
            f"must be a fraction in [0, 1] (0.01 = 1%), got {text!r}"
        )
    return value


def _mbit(text: str) -> float:
    value = _finite_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text!r}")
    return value


def _rate_schedule(text: str) -> Any:

    try:
        return schedule_from_json(text)
    except ScheduleError as exc:
        raise argparse.ArgumentTypeError(f"not a rate schedule: {exc}") from None


_positive_int = number(int, 1)
_nonneg_int = number(int, 0)


# (option name, type, metavar, help).  The option name is also the suffix of
# the per-direction overrides: --a-to-b-<name>, --b-to-a-<name>.
_IMPAIRMENT_OPTIONS: List[tuple] = [
    ("delay-ms", _milliseconds, "D", "one-way propagation delay in ms (default 0)"),
    ("jitter-ms", _milliseconds, "J",
     "add a uniform random delay in [-J, +J] ms (delay never below 0); frames keep "
     "their order unless --jitter-reorders (default 0)"),
    ("loss", _probability, "P", "probability (fraction in [0,1]) that a frame is dropped (default 0)"),
    ("reorder", _probability, "P",
     "probability (fraction in [0,1]) that a frame is held back an extra "
     "--reorder-hold-ms so later frames overtake it (default 0)"),
    ("reorder-hold-ms", _milliseconds, "H",
     "extra hold of a reordered frame in ms (default: the delay, at least 1 ms)"),
    ("duplicate", _probability, "P",
     "probability (fraction in [0,1]) that a frame is sent twice (default 0)"),
    ("rate-mbit", _mbit, "R",
     "serialize frames at R Mbit/s (Ethernet header to payload; no FCS, preamble or "
     "gap); needs --queue-packets (default: unlimited)"),
    ("rate-schedule", _rate_schedule, "JSON",
     "serialize frames at a rate that follows a schedule, read when each frame starts: "
     "a scenario's [links.schedule] table as JSON, kind constant, steps or sine, e.g. "
     "'{\"kind\": \"sine\", \"b_mbit\": 0.11, \"w_rad_s\": 1}'; its time 0 is the "
     "first SIGUSR1 (each one restarts it), before which the rate at time 0 holds; "
     "needs --queue-packets, excludes --rate-mbit"),
    ("queue-packets", _positive_int, "Q",
     "drop-tail queue of the rate limiter: at most Q frames wait behind the one "
     "being serialized; needs --rate-mbit or --rate-schedule"),
    ("limit-packets", _positive_int, "L",
     "at most L frames in flight in the delay line, more are dropped (memory "
     "safety, like netem's limit; default 100000)"),
]

_FLAG_OPTIONS: List[tuple] = [
    ("jitter-reorders", "let jitter reorder frames (netem's behaviour); by default a frame "
     "is never released before the frame ahead of it"),
]

_DIR_PREFIX = {"a_to_b": "a-to-b", "b_to_a": "b-to-a"}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=_PROG,
        usage=(
            "%(prog)s IFACE_A IFACE_B [--delay-ms D] [--jitter-ms J] [--loss P] [--reorder P]\n"
            "       [--duplicate P] [--rate-mbit R --queue-packets Q] [--seed S]\n"
            "       [--a-to-b-X V ...] [--b-to-a-X V ...] [--stats-json FILE] [other options]"
        ),
        description=(
            "User-space link emulator (netem replacement): bridges IFACE_A and IFACE_B "
            "with raw packet sockets and applies delay, jitter, loss, reordering, "
            "duplication and a rate limit per direction.  Every frame (ARP, IPv4, ...) "
            "is forwarded; checksums left to the hardware (checksum offload) are completed "
            "and GSO/GRO super-frames are cut into MTU-sized segments.  Runs until SIGINT/SIGTERM (or --duration-s), then prints "
            "per-direction counters.  Needs root (CAP_NET_RAW)."
        ),
        epilog=(
            "Per-direction overrides: every impairment option --X above also exists as "
            "--a-to-b-X (frames from IFACE_A to IFACE_B) and --b-to-a-X (IFACE_B to "
            "IFACE_A), overriding --X for that direction only; e.g. "
            "'--delay-ms 10 --b-to-a-loss 0.02'.  SIGUSR1 starts the rate schedules "
            "(--rate-schedule).  Probabilities are fractions in [0,1], "
            "not percentages.  Exit status: 0 after a clean stop, 2 on a usage error, "
            "1 on a runtime failure.  See docs/linkem.md."
        ),
    )
    parser.add_argument("iface_a", metavar="IFACE_A", help="first interface (end A)")
    parser.add_argument("iface_b", metavar="IFACE_B", help="second interface (end B)")
    both = parser.add_argument_group("impairments (both directions)")
    for name, typ, metavar, text in _IMPAIRMENT_OPTIONS:
        both.add_argument(f"--{name}", type=typ, metavar=metavar, default=None, help=text)
    for name, text in _FLAG_OPTIONS:
        both.add_argument(f"--{name}", action="store_true", default=None, help=text)
    for direction in DIRECTIONS:
        prefix = _DIR_PREFIX[direction]
        arrow = "A->B" if direction == "a_to_b" else "B->A"
        group = parser.add_argument_group(f"{arrow} overrides (--{prefix}-X overrides --X)")
        for name, typ, metavar, _text in _IMPAIRMENT_OPTIONS:
            group.add_argument(
                f"--{prefix}-{name}", type=typ, metavar=metavar, default=None,
                help=f"--{name} for {arrow} only",
            )
        for name, _text in _FLAG_OPTIONS:
            group.add_argument(
                f"--{prefix}-{name}", action="store_true", default=None,
                help=f"--{name} for {arrow} only",
            )
    run = parser.add_argument_group("run control")
    run.add_argument("--seed", type=int, default=None, metavar="S",
                     help="random seed (default: random, printed with the counters)")
    run.add_argument("--stats-json", metavar="FILE", default=None,
                     help="write the counters and configuration as JSON to FILE on exit")
    run.add_argument("--duration-s", type=_seconds, default=None, metavar="T",
                     help="stop by itself after T seconds")
    run.add_argument("--rt-priority", type=_nonneg_int, default=0, metavar="N",
                     help="run the workers with SCHED_FIFO priority N (1-99) for better "
                          "timing on a loaded machine (default 0: normal scheduling)")
    run.add_argument("--no-promisc", action="store_true",
                     help="do not put the interfaces in promiscuous mode")
    run.add_argument("--quiet", action="store_true", help="print nothing but errors")
    return parser


def _attr(name: str) -> str:
    return name.replace("-", "_")


def _direction_value(args: argparse.Namespace, direction: str, name: str) -> Any:
    override = getattr(args, _attr(f"{_DIR_PREFIX[direction]}-{name}"))
    return override if override is not None else getattr(args, _attr(name))


def _ms_to_us(value: Optional[float]) -> Optional[int]:
    return None if value is None else int(round(value * 1000))


def config_from_args(args: argparse.Namespace) -> LinkConfig:
    """Build and validate the :class:`LinkConfig` (ValueError on inconsistency)."""
    directions: Dict[str, Impairment] = {}
    for direction in DIRECTIONS:
        v: Callable[[str], Any] = lambda name: _direction_value(args, direction, name)
        rate = v("rate-mbit")
        limit = v("limit-packets")
        imp = Impairment(
            delay_us=_ms_to_us(v("delay-ms")) or 0,
            jitter_us=_ms_to_us(v("jitter-ms")) or 0,
            loss=v("loss") or 0.0,
            duplicate=v("duplicate") or 0.0,
            reorder=v("reorder") or 0.0,
            reorder_hold_us=_ms_to_us(v("reorder-hold-ms")),
            jitter_reorders=bool(v("jitter-reorders")),
            rate_bps=None if rate is None else int(round(rate * 1e6)),
            queue_packets=v("queue-packets"),
            limit_packets=100_000 if limit is None else limit,
            rate_schedule=v("rate-schedule"),
        )
        try:
            imp.validate()
        except ValueError as exc:
            raise ValueError(f"{_DIR_PREFIX[direction]}: {_cli_message(str(exc))}") from None
        directions[direction] = imp
    return LinkConfig(seed=args.seed, **directions).validate()


def _cli_message(msg: str) -> str:
    """Rephrase Impairment's field names as the CLI options."""
    for field, option in (
        ("queue_packets", "--queue-packets"),
        ("rate_bps", "--rate-mbit"),
        ("rate_schedule", "--rate-schedule"),
        ("reorder_hold_us", "--reorder-hold-ms"),
    ):
        msg = msg.replace(field, option)
    return msg


_COLUMNS = [
    ("rx_frames", "received"),
    ("forwarded_frames", "forwarded"),
    ("dropped_loss", "lost"),
    ("dropped_queue", "queue-drop"),
    ("dropped_limit", "limit-drop"),
    ("reordered", "reordered"),
    ("duplicated", "duplicated"),
    ("tx_errors", "tx-errors"),
    ("kernel_drops", "kernel-drop"),
    ("pending_at_exit", "pending"),
    ("csum_completed", "csum-fixed"),
    ("gso_superframes", "gso-split"),
    ("gso_segments", "segments"),
    ("dropped_offload", "offload-drop"),
    ("dropped_oversize", "oversize"),
]


def format_stats(stats: Dict[str, Any]) -> str:
    """Human-readable counter table (one header line, one line per direction)."""
    a, b = stats["iface_a"], stats["iface_b"]
    names = {"a_to_b": f"{a}->{b}", "b_to_a": f"{b}->{a}"}
    width = max(9, *(len(n) for n in names.values()))
    lines = [
        f"{_PROG}: stopped after {stats['duration_s']:.3f} s (seed {stats['seed']})",
        f"{'direction':<{width}} " + " ".join(f"{title:>12}" for _, title in _COLUMNS),
    ]
    for direction in DIRECTIONS:
        d = stats[direction]
        lines.append(
            f"{names[direction]:<{width}} " + " ".join(f"{d.get(k, 0):>12}" for k, _ in _COLUMNS)
        )
    return "\n".join(lines)


def handle_signals(emulator: Any) -> threading.Event:
    """SIGINT, SIGTERM, SIGHUP stop ``emulator`` (a LinkEmulator or LinkGroup) and set
    the event returned; SIGUSR1 starts its rate schedules (``bwn run`` sends it when
    the flows start)."""
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        stop.set()
        emulator.request_stop()

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    signal.signal(signal.SIGUSR1, lambda _signum, _frame: emulator.start_schedule())
    return stop


def run_until_stopped(emulator: Any, stop: threading.Event, duration_s: Optional[float]) -> None:
    """Until a signal (``stop``), ``duration_s`` or the emulator's end."""
    deadline = None if duration_s is None else time.monotonic() + duration_s
    while not stop.is_set() and emulator.running:
        timeout = 0.5 if deadline is None else min(0.5, deadline - time.monotonic())
        if timeout <= 0:
            break
        stop.wait(timeout)


def write_stats_json(path: str, stats: Dict[str, Any]) -> None:
    """``stats`` to ``path`` whole or not at all (a temporary file, then a rename)."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as fh:
        json.dump(stats, fh, indent=2, sort_keys=True)
        fh.write("\n")
    os.replace(tmp, path)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.iface_a == args.iface_b:
        parser.error(f"IFACE_A and IFACE_B are the same interface ({args.iface_a!r})")
    try:
        config = config_from_args(args)
    except ValueError as exc:
        parser.error(str(exc))

    for name in (args.iface_a, args.iface_b):
        try:
            socket.if_nametoindex(name)
        except OSError:
            parser.error(f"no such network interface in this namespace: {name!r}")
    if args.rt_priority > 99:
        parser.error("--rt-priority must be between 0 and 99")

    emulator = LinkEmulator(
        args.iface_a, args.iface_b, config=config,
        promiscuous=not args.no_promisc, rt_priority=args.rt_priority,
    )
    stop = handle_signals(emulator)
    try:
        emulator.start()
    except PermissionError:
        print(f"{_PROG}: error: raw packet sockets need root (CAP_NET_RAW)", file=sys.stderr)
        return 1
    except (OSError, ValueError) as exc:
        print(f"{_PROG}: error: {exc}", file=sys.stderr)
        return 1
    if not args.quiet:
        print(
            f"{READY_MARKER}: {args.iface_a} <-> {args.iface_b} (seed {emulator.config.seed}, "
            f"pid {os.getpid()}); SIGINT/SIGTERM to stop",
            file=sys.stderr, flush=True,
        )
    run_until_stopped(emulator, stop, args.duration_s)
    failure = emulator.failed
    stats = emulator.stop()
    stats["exit"] = "error" if failure else "stopped"
    if args.stats_json:
        write_stats_json(args.stats_json, stats)
    if not args.quiet:
        print(format_stats(stats), flush=True)
    if failure is not None:
        print(f"{_PROG}: error: worker failed: {failure!r}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
