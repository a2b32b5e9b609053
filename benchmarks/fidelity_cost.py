#!/usr/bin/env python3
"""What the fidelity checks cost (docs/fidelity.md, "Cost").

(a) ``linkem``: bwn-link's release path per frame, with the lateness histogram
    (``DirectionScheduler.release_due``) and without it (the same loop minus the
    three lines that record lateness), for release batches of 1 and 16 frames.
(b) ``sampler``: the runner's sampler thread (``bwn.emulation.monitor.Monitor``) for
    ``--seconds`` at its default 0.1 s interval, reading /proc/stat and the
    tx_packets counter of ``--ports`` interfaces (loopback stands in for switch
    ports): CPU time per tick and as a share of one core.

Usage::

    .venv/bin/python benchmarks/fidelity_cost.py            # both
    .venv/bin/python benchmarks/fidelity_cost.py linkem --frames 200000
    .venv/bin/python benchmarks/fidelity_cost.py sampler --seconds 20 --ports 8

This is not a test: it prints figures and asserts nothing.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import deque
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bwn.emulation.monitor import Monitor, PortSpec  # noqa: E402
from bwn.linkem.config import Impairment  # noqa: E402
from bwn.linkem.scheduler import DirectionScheduler  # noqa: E402


def release_without_lateness(sched: DirectionScheduler, now_ns: int, send) -> int:
    """The fast path as it was before the histogram (reference)."""
    fifo = sched.fifo
    c = sched.counters
    n = nbytes = errors = 0
    while fifo and fifo[0][0] <= now_ns:
        frame = fifo.popleft()[1]
        try:
            send(frame)
        except OSError:
            errors += 1
            continue
        n += 1
        nbytes += len(frame)
    if n:
        c.forwarded_frames += n
        c.forwarded_bytes += nbytes
    return n + errors


def bench_linkem(frames: int, batch: int, with_lateness: bool, rounds: int = 5) -> float:
    """ns per released frame (median of rounds)."""
    results = []
    frame = b"x" * 1100
    sink = [].append
    for _ in range(rounds):
        sched = DirectionScheduler(Impairment(delay_us=1000), seed=1)
        sched.fifo = deque((i, frame) for i in range(frames))
        t0 = time.perf_counter_ns()
        now = 0
        while sched.fifo:
            now += batch
            if with_lateness:
                sched.release_due(now + 5000, sink)
            else:
                release_without_lateness(sched, now + 5000, sink)
        results.append((time.perf_counter_ns() - t0) / frames)
    return statistics.median(results)


def bench_sampler(seconds: float, n_ports: int) -> dict:
    ports = [PortSpec("s1", i, "lo", True, 50) for i in range(n_ports)]
    monitor = Monitor(Path("/nonexistent"), [], ports)
    monitor.start()
    time.sleep(seconds)
    monitor.stop()
    ticks = max(monitor.sampler_ticks, 1)
    return {"ticks": monitor.sampler_ticks, "cpu_s": monitor.sampler_cpu_s,
            "us_per_tick": 1e6 * monitor.sampler_cpu_s / ticks,
            "core_share": monitor.sampler_cpu_s / seconds}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", nargs="?", choices=("linkem", "sampler", "all"), default="all")
    p.add_argument("--frames", type=int, default=200_000, help="frames per linkem round (default 200000)")
    p.add_argument("--seconds", type=float, default=10.0, help="sampler run time (default 10)")
    p.add_argument("--ports", type=int, default=4, help="rate-limited ports the sampler reads (default 4)")
    args = p.parse_args()
    if args.what in ("linkem", "all"):
        print("bwn-link release path, ns per frame (median of 5 rounds):")
        print(f"{'batch':>6} {'without':>9} {'with lateness':>14} {'added':>7}")
        for batch in (1, 16):
            without = bench_linkem(args.frames, batch, False)
            with_late = bench_linkem(args.frames, batch, True)
            print(f"{batch:>6} {without:>9.0f} {with_late:>14.0f} {with_late - without:>7.0f}")
    if args.what in ("sampler", "all"):
        r = bench_sampler(args.seconds, args.ports)
        print(f"sampler: {r['ticks']} ticks in {args.seconds:g} s, {r['us_per_tick']:.0f} us CPU per tick, "
              f"{r['core_share']:.3%} of one core ({args.ports} ports)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
