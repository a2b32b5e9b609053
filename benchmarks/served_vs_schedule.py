#!/usr/bin/env python3
"""How much of its schedule a BMv2 queue served, from finished runs.

    .venv/bin/python benchmarks/served_vs_schedule.py RUN_DIR [RUN_DIR ...] [--port C:3]
        [--frame-bytes 1102]

A RUN_DIR is one scheme's run (`run.json`, `capacity.csv`). For each rate-limited
port in `run.json` (`fidelity.measurements.ports`; `--port SWITCH:PORT` picks
one), prints the packets it sent and two ratios:

* ``per written rate``: packets sent / the integral of ``capacity.csv``'s
  ``queue_pps``, the rate the controller wrote to BMv2's queue;
* ``per schedule``: packets sent / the integral of the schedule's rate of the
  moment (``capacity.csv``'s ``rate_bps`` / (8 * frame bytes)).

run.json's own ``utilization`` is the first for runs made before capacity.csv had
a ``schedule_pps`` column, the second since (docs/fidelity.md).

The two agree unless the controller wrote the queue something other than the
schedule's rate of the moment, as its reverted look-ahead (commit 8269d68) did:
the rate at t + D, D the queue's drain time. Then only the second says what
the link carried against what it should have (docs/fidelity.md, invariant 4).

run.json keeps the packets the port was due (``due_pkts``) but not the window
they were counted over, so the other count is ``due_pkts`` scaled by the ratio
of the two integrals over the run's window as far as it is known (from the
first flow's start for ``wall_s`` seconds); the window's error cancels in the
ratio.
"""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from typing import Any, Optional

from bwn.analysis.fidelity import integral_steps
from bwn.rundir import RunDir, RunMeta


def _series(rows: list[dict[str, str]], switch: str, port: int, column: str,
            scale: float = 1.0) -> list[tuple[float, float]]:
    return sorted((float(r["t_s"]), float(r[column]) * scale) for r in rows
                  if r.get("switch") == switch and r.get("port") == str(port) and r.get(column))


def served(run_dir: Path, frame_bytes: int, only: Optional[str] = None) -> list[dict[str, Any]]:
    """One row per rate-limited port of the run (see the module's docstring)."""
    run = RunDir(run_dir)
    meta = RunMeta.load(run.run_json)       # OSError when it has none
    measurements = (meta.fidelity or {}).get("measurements") or {}
    with open(run.capacity_csv, newline="") as fh:
        capacity = list(csv.DictReader(fh))
    starts = meta.flow_starts_s.values()
    t0 = min(starts) if starts else 0.0
    t1 = t0 + float(measurements.get("wall_s") or 0.0)
    by_schedule = any(r.get("schedule_pps") for r in capacity)      # the run's due_pkts count the schedule
    out = []
    for key, port in sorted((measurements.get("ports") or {}).items()):
        if only is not None and key != only:
            continue
        switch, _, number = key.partition(":")
        written = integral_steps(_series(capacity, switch, int(number), "queue_pps"), t0, t1)
        schedule = integral_steps(_series(capacity, switch, int(number), "rate_bps", 1 / (8 * frame_bytes)),
                                  t0, t1)
        sent, due = port.get("tx_pkts"), port.get("due_pkts")
        if not (sent and due and written > 0 and schedule > 0):
            per_written = per_schedule = None
        elif by_schedule:
            per_schedule, per_written = sent / due, sent / (due * written / schedule)
        else:
            per_written, per_schedule = sent / due, sent / (due * schedule / written)
        out.append({"run": str(run_dir), "port": key, "tx_pkts": sent,
                    "per_written_rate": None if per_written is None else round(per_written, 4),
                    "per_schedule": None if per_schedule is None else round(per_schedule, 4)})
    return out


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR")
    p.add_argument("--port", metavar="SWITCH:PORT", help="only this port (default: every rate-limited port)")
    p.add_argument("--frame-bytes", type=int, default=1102,
                   help="frame size the schedule's bits are counted in (default 1102: 1000-byte payloads)")
    args = p.parse_args(argv)
    if args.frame_bytes <= 0:
        p.error("--frame-bytes must be positive")
    print("run | port | packets sent | per written rate | per schedule")
    for run_dir in args.runs:
        try:
            rows = served(run_dir, args.frame_bytes, args.port)
        except (OSError, ValueError, KeyError) as exc:
            print(f"{run_dir}: cannot read: {exc}", file=sys.stderr)
            return 1
        for r in rows:
            print(f"{r['run']} | {r['port']} | {r['tx_pkts']} | {r['per_written_rate']} | {r['per_schedule']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
