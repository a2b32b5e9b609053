#!/usr/bin/env python3
"""CPU per forwarded packet of every process of an experiment, from its runs.

    .venv/bin/python benchmarks/cpu_per_packet.py RUN_DIR [RUN_DIR ...] [--markdown]

A RUN_DIR is one scheme's run (`run.json` and the flows' summaries; `bwn run` or
`bwn reproduce` write them). Per component, over the runs given:

* CPU seconds (utime + stime) during the run, and as % of one core;
* us of CPU per packet *that component handled*: a switch per frame it sent, a
  bwn-link per frame it forwarded (both directions), senders per DATA segment
  sent plus ACK received, receivers per segment received plus ACK sent;
* us per *end-to-end packet*: every DATA segment the senders sent plus every ACK
  the receivers sent, the unit all components serve; its sum is the machine's
  CPU cost of one packet of the experiment.

Where the numbers come from: `run.json` `fidelity.measurements.process_cpu_s`
(switches, bwn-link emulators, the runner: controller, telemetry, fidelity
sampler, Mininet), `receiver_cpu_s` (bwn-recv processes, read just before they
are stopped) and each flow's `cpu_s` in `flows/*.summary.json` (bwn-send's own
`time.process_time()`). Runs older than these fields show "-".
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, Optional

from bwn.rundir import RunDir, RunMeta, RunMetaError


def load(run_dir: Path) -> RunMeta:
    run = RunDir(run_dir)
    if not run.has_meta():
        raise SystemExit(f"{run_dir}: no run.json (give a scheme's run folder, e.g. results/obp/parking/seed1/obp)")
    try:
        return run.meta()
    except RunMetaError as exc:
        raise SystemExit(str(exc)) from None


def one_run(run_dir: Path) -> dict[str, dict[str, Optional[float]]]:
    """component -> {"cpu_s", "packets", "wall_s"} of one run; plus "_e2e" packets."""
    meta = load(run_dir)
    run = RunDir(run_dir)
    fid = meta.fidelity or {}
    m = fid.get("measurements") or {}
    wall_s = m.get("wall_s")
    cpu = m.get("process_cpu_s") or {}
    checks = fid.get("checks") or {}
    switch_out = {i["switch"]: i.get("out_pkts") for i in (checks.get("switch_rx_drops") or {}).get("items", [])
                  if "switch" in i}
    out: dict[str, dict[str, Optional[float]]] = {}
    for name, cpu_s in cpu.items():
        if name == "runner":
            out["runner"] = {"cpu_s": cpu_s, "packets": None, "wall_s": wall_s}
        elif name in switch_out:
            out[f"switch {name}"] = {"cpu_s": cpu_s, "packets": switch_out.get(name), "wall_s": wall_s}
        elif name == "bwn-links":       # one process for every link: all their frames
            frames = 0
            for stats_path in run.linkem_stats_files().values():
                stats = json.loads(stats_path.read_text())
                frames += sum((stats.get(d) or {}).get("forwarded_frames", 0) for d in ("a_to_b", "b_to_a"))
            out["bwn-links (every link)"] = {"cpu_s": cpu_s, "packets": frames, "wall_s": wall_s}
        else:
            frames = None
            stats_path = run.linkem_stats(name)
            if stats_path.exists():
                stats = json.loads(stats_path.read_text())
                frames = sum((stats.get(d) or {}).get("forwarded_frames", 0) for d in ("a_to_b", "b_to_a"))
            out[f"bwn-link {name}"] = {"cpu_s": cpu_s, "packets": frames, "wall_s": wall_s}
    data_sent = acks_received = 0
    send_cpu: Optional[float] = 0.0
    for summary in run.flow_summaries():
        s = json.loads(summary.read_text())
        data_sent += int(s.get("packets_sent") or 0)
        acks_received += int(s.get("acks_received") or 0)
        send_cpu = None if send_cpu is None or s.get("cpu_s") is None else send_cpu + float(s["cpu_s"])
    out["senders (all)"] = {"cpu_s": send_cpu, "packets": data_sent + acks_received, "wall_s": wall_s}
    segments = acks_sent = 0
    for summary in run.receiver_summaries():
        for flow in json.loads(summary.read_text()):
            segments += int(flow.get("segments") or 0)
            acks_sent += int(flow.get("acks_sent") or 0)
    recv_cpu = meta.receiver_cpu_s
    out["receivers (all)"] = {"cpu_s": sum(recv_cpu.values()) if recv_cpu else None,
                              "packets": segments + acks_sent, "wall_s": wall_s}
    out["_e2e"] = {"cpu_s": None, "packets": data_sent + acks_sent, "wall_s": wall_s}
    return out


def mean(values: list[Optional[float]]) -> Optional[float]:
    got = [v for v in values if v is not None]
    return statistics.fmean(got) if got and len(got) == len(values) else None


def table(run_dirs: list[Path]) -> list[dict[str, Any]]:
    runs = [one_run(d) for d in run_dirs]
    names: dict[str, None] = {}
    for r in runs:
        names.update(dict.fromkeys(k for k in r if k != "_e2e"))
    rows = []
    per: dict[str, list[dict[str, Optional[float]]]] = defaultdict(list)
    for r in runs:
        for name in names:
            per[name].append(r.get(name) or {"cpu_s": None, "packets": None, "wall_s": None})
    e2e = [r["_e2e"]["packets"] for r in runs]
    for name in names:
        items = per[name]
        cpu = mean([i["cpu_s"] for i in items])
        share = mean([100 * i["cpu_s"] / i["wall_s"] if i["cpu_s"] is not None and i["wall_s"] else None
                      for i in items])
        own = mean([1e6 * i["cpu_s"] / i["packets"] if i["cpu_s"] is not None and i["packets"] else None
                    for i in items])
        end = mean([1e6 * i["cpu_s"] / p if i["cpu_s"] is not None and p else None for i, p in zip(items, e2e)])
        rows.append({"component": name, "cpu_s": cpu, "core_pct": share, "us_per_own_packet": own,
                     "us_per_e2e_packet": end})
    total = [r["us_per_e2e_packet"] for r in rows]
    rows.append({"component": "total", "cpu_s": sum(r["cpu_s"] for r in rows if r["cpu_s"] is not None),
                 "core_pct": sum(r["core_pct"] for r in rows if r["core_pct"] is not None),
                 "us_per_own_packet": None,
                 "us_per_e2e_packet": sum(t for t in total if t is not None) if total else None})
    return rows


def fmt(v: Optional[float], digits: int = 1) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="Means over the runs given; see the module docstring for the sources.")
    ap.add_argument("run_dirs", nargs="+", type=Path, help="scheme run folders (each with run.json)")
    ap.add_argument("--markdown", action="store_true", help="print a markdown table")
    args = ap.parse_args(argv)
    rows = table(args.run_dirs)
    if args.markdown:
        print("| component | CPU s | % of one core | us per packet it handled | us per end-to-end packet |")
        print("|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['component']} | {fmt(r['cpu_s'])} | {fmt(r['core_pct'])} | "
                  f"{fmt(r['us_per_own_packet'])} | {fmt(r['us_per_e2e_packet'])} |")
    else:
        print(f"{'component':<18} {'CPU s':>8} {'%core':>7} {'us/own pkt':>11} {'us/e2e pkt':>11}")
        for r in rows:
            print(f"{r['component']:<18} {fmt(r['cpu_s']):>8} {fmt(r['core_pct']):>7} "
                  f"{fmt(r['us_per_own_packet']):>11} {fmt(r['us_per_e2e_packet']):>11}")
    print(f"({len(args.run_dirs)} run(s))", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
