"""A run's fidelity record, and judging it (again) from run.json alone.

The fidelity sampler (:mod:`bwn.emulation.monitor`) hands the invariants of
:mod:`bwn.analysis.fidelity` a :class:`Recording`: every sample they read (the
CPU ticks, each switch's counters, each rate-limited port's departures, queue
and configured rate, the bwn-links' statistics cut to the figures the checks
read). :func:`judge` gives the verdict; the runner writes the verdict and the
recording into ``run.json["fidelity"]`` (``recorded``, with ``checks_version``).

So a run can be judged again when a check is fixed or a threshold moves,
without running it again: :func:`rejudge` reads the recording back from a
:class:`bwn.rundir.RunMeta` and judges it with the checks of today, and
``python -m bwn.analysis.rejudge RUN_DIR [--write]`` does it for run folders,
printing each old and new verdict (``--write`` stores the new one). A recording
judged by the same checks gives the same verdict: JSON keeps every number as it
was (tests/test_fidelity.py checks it end to end).
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from bwn.analysis.fidelity import (
    CHECKS_VERSION,
    DIRECTIONS,
    PORT_SERIES,
    FidelityRecordError,
    Recording,
    DEFAULT_THRESHOLDS,
    LINKEM_OFFLOAD_COUNTERS,
    FidelityResult,
    Thresholds,
    evaluate,
    integral_steps,
    linkem_offload_drops,
)
from bwn.rundir import ExperimentDir, RunDir, RunMeta, RunMetaError







def linkem_record(stats: Mapping[str, Any]) -> dict[str, Any]:
    """The figures of a bwn-link's ``--stats-json`` that the checks read: per
    direction its lateness (without the histogram's bins), ``rx_frames``, the
    offload counters and the rate schedule's table; when its schedule started."""
    out: dict[str, Any] = {}
    if "schedule_started_s" in stats:
        out["schedule_started_s"] = stats["schedule_started_s"]
    for direction in DIRECTIONS:
        d = stats.get(direction)
        if not isinstance(d, Mapping):
            continue
        kept: dict[str, Any] = {}
        late = d.get("lateness")
        if late:
            kept["lateness"] = {k: v for k, v in late.items() if k != "bins"}
        for key in ("rx_frames",) + LINKEM_OFFLOAD_COUNTERS:
            if key in d:
                kept[key] = d[key]
        table = (d.get("config") or {}).get("rate_schedule")
        if table:
            kept["config"] = {"rate_schedule": table}
        out[direction] = kept
    return out


def recorded_measurements(rec: Recording) -> dict[str, Any]:
    """The measurements that follow from a recording: each rate-limited port's
    queue (mean, max, share of its capacity) and utilization (packets sent /
    packets its schedule allowed over the sampled window, in frames, so ACKs and
    headers count as on a real link), and the bwn-links' offload drops."""
    queues = {}
    for key, p in rec.ports.items():
        q = [v for _, v in p["queue"]]
        if q:
            queues[key] = {"mean_pkts": round(sum(q) / len(q), 2), "max_pkts": max(q),
                           "capacity_pkts": p["queue_capacity_pkts"],
                           "mean_fraction": round(sum(q) / len(q) / p["queue_capacity_pkts"], 4)}
    links = {}
    for key, p in rec.ports.items():
        tx = p["tx"]
        if len(tx) < 2 or not p["schedule_pps"]:
            continue
        # due by the schedule, not by the rate written to the queue: the look-ahead
        # writes the schedule shifted by the queue's drain time, whose integral over
        # a run exceeds the schedule's (by 2-3 % on EBN's case h, docs/fidelity.md)
        due = integral_steps(p["schedule_pps"], tx[0][0], tx[-1][0])
        sent = tx[-1][1] - tx[0][1]
        links[key] = {"link": p["link"], "tx_pkts": sent, "due_pkts": round(due, 1),
                      "utilization": round(sent / due, 4) if due > 0 else None}
    # frames each bwn-link dropped before its link model (also judged: linkem_offload_drops)
    return {"queues": queues, "ports": links, "linkem_offload_drops": linkem_offload_drops(rec.linkem)}


def judge(rec: Recording, thresholds: Thresholds = DEFAULT_THRESHOLDS,
          measurements: Optional[dict[str, Any]] = None) -> FidelityResult:
    """The verdict on ``rec``, which the result carries (run.json records it)."""
    result = evaluate(rec.cpu, rec.linkem, rec.switches, rec.ports, thresholds, measurements,
                      rec.telemetry_interval_s)
    result.recording = rec
    return result


def rejudge(meta: RunMeta, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> FidelityResult:
    """Judge a run again from its run.json, with today's checks and ``thresholds``;
    the measurements the recording gives are computed again, the sampler's own
    (CPU of each process, the sampler's cost) kept. FidelityRecordError when the
    run has no recording (not checked, or checked before runs recorded one)."""
    fid = meta.fidelity
    if fid is None:
        raise FidelityRecordError("no fidelity verdict in run.json (not checked)")
    if "recorded" not in fid:
        raise FidelityRecordError("run.json has a verdict but not what it was judged from "
                                  "(made before runs recorded their measurements)")
    rec = Recording.from_json(fid["recorded"])
    measurements = {**(fid.get("measurements") or {}), **recorded_measurements(rec)}
    return judge(rec, thresholds, measurements)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bwn.analysis.rejudge",
        description="Judge runs again from their run.json alone, with today's fidelity checks "
                    f"(version {CHECKS_VERSION}); print each old and new verdict.")
    parser.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR",
                        help="a run's folder (with run.json), or a folder of them (bwn run's --out)")
    parser.add_argument("--write", action="store_true",
                        help="store each new verdict in its run.json")
    return parser


def _runs(path: Path) -> list[RunDir]:
    run = RunDir(path)
    if run.has_meta() or not path.is_dir():
        return [run]
    return [r for r in ExperimentDir(path).runs() if r.has_meta()] or [run]


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    failed = 0
    for run in (r for path in args.run_dirs for r in _runs(path)):
        try:
            meta = run.meta() if run.has_meta() else None
            if meta is None:
                raise FidelityRecordError("no run.json")
            old_version = (meta.fidelity or {}).get("checks_version")
            old = meta.validity[1]
            new = rejudge(meta)
        except (OSError, RunMetaError, FidelityRecordError) as exc:
            print(f"{run.path}: cannot judge again: {exc}", file=sys.stderr)
            failed += 1
            continue
        was = "" if new.summary() == old else f"; was: {old} [checks v{old_version}]"
        print(f"{run.path}: {new.summary()} [checks v{CHECKS_VERSION}]{was}")
        if args.write:
            meta.fidelity = new.to_json()
            run.write_meta(meta)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
