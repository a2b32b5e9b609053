#!/usr/bin/env python3
"""How long a full grid takes on N nodes: runs x its longest run / N.

For each paper, one run of a full-length case with the most flows or links
(every case of the full grids lasts 60 s; these take the longest to set up and
tear down) is made exactly as ``bwn reproduce PAPER --executor slurm`` makes it:
a task of a Slurm job array on an exclusive node, ``bwn reproduce-run KEY``
(bwn/reproduce/slurm_executor.py). The Slurm is the tests' single node, brought
up from Debian's packages and removed afterwards (tests/slurm_cluster.py), so
the figures are this machine's. Printed per run: its task's wall time (the
node's wall clock from start to end of ``bwn reproduce-run``) and the time from
the previous task's end to its start (Slurm's scheduling), and whether the run
waited for another experiment's hold on this machine's experiment lock (then its
wall time includes that wait); per paper: the full
grid's runs (bwn.reproduce.plan) and runs x (longest task + scheduling) / N for
a few N, the time of the grid on N such nodes when every run is valid at its
first attempt (an INVALID run is made again, up to 3 times). A run that waited
for the lock is made again (``--rounds``), so that the figure is the run's own.

Needs root, BMv2, Mininet, ``make build``, slurm-wlm and munge, and committed run
code (the nodes are checked against it). About 6 minutes. Exit status: 0 done, 1 a
run failed, 3 cannot run here.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from slurm_cluster import SlurmCluster, slurm_missing  # noqa: E402

from bwn import requirements  # noqa: E402
from bwn.reproduce import grid as gr  # noqa: E402
from bwn.reproduce import slurm as sl  # noqa: E402
from bwn.reproduce import slurm_sweep as sweep
from bwn.reproduce.plan import RunKey, find_run, planned_runs  # noqa: E402
from bwn.reproduce.slurm_executor import task_for  # noqa: E402

#: Per paper, a run of a full-length case with the most flows or links.
LONGEST = {
    "ebn": "ebn/g-w/seed1/ebn",                 # 200 ms bottleneck delay, 2 flows, bwn-link
    "obp": "obp/parking-x0.5/seed1/obp",        # 3 bottlenecks, 9 links, 4 flows
    "dft": "dft/cluster20/seed1/dft",           # 20 flows
    "gtcp": "gtcp/basic/seed1/gtcp",            # 6 flows, 3 with reservations
    "sarbe": "sarbe/jain10/seed1/sarbe",        # 10 flows over a lossy last hop
}
NODES = (1, 4, 16, 64)


def _utc(text: str) -> dt.datetime:
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--papers", default=",".join(LONGEST), help="comma-separated (default: all five)")
    parser.add_argument("--out", help="results folder (default: a temporary one, removed)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="make a run again while it waited for another experiment's lock, up to this "
                             "many times in all (default 3)")
    args = parser.parse_args()
    papers = [p for p in args.papers.split(",") if p]
    unknown = [p for p in papers if p not in LONGEST]
    if unknown:
        print(f"unknown paper(s) {', '.join(unknown)}; known: {', '.join(LONGEST)}", file=sys.stderr)
        return 2
    why = slurm_missing() or requirements.experiment_missing()
    if why:
        print(f"cannot run here: {why}", file=sys.stderr)
        return 3
    grids = {p: gr.load_grid(p) for p in papers}
    runs = {p: find_run(grids[p], RunKey.parse(LONGEST[p]), quick=False) for p in papers}
    measured: dict[str, tuple[float, float, bool]] = {}        # paper -> task wall, scheduling, waited
    with tempfile.TemporaryDirectory(prefix="bwn-slurm-time.") as tmp, SlurmCluster() as cluster:
        out = Path(args.out or tmp)
        options = sl.SlurmOptions(env=cluster.env, poll_s=1.0, job_name="bwn-time")
        for _ in range(args.rounds):
            due = [p for p in papers if p not in measured or measured[p][2]]
            if not due:
                break
            tasks = {p: task_for(runs[p], out, False, "benchmarks/slurm_sweep_time.py", options.python())
                     for p in due}
            outcome = sweep.run_sweep(list(tasks.values()), out, out / "slurm", options,
                                   progress=lambda m: print(m, flush=True))
            if not outcome.ok:
                print(f"failed: {outcome.failed}", file=sys.stderr)
                return 1
            submitted = _utc(json.loads((out / "slurm" / "state.json").read_text())["submissions"][-1]
                             ["submitted_utc"])
            previous_end = submitted
            for p in sorted(due, key=lambda p: outcome.done[tasks[p].key]["started_utc"]):
                result = outcome.done[tasks[p].key]
                start, end = _utc(result["started_utc"]), _utc(result["ended_utc"])
                log = (out / "slurm" / "logs" / f"{result['job']}.task.log").read_text()
                waited = "waiting for another bwn experiment" in log
                if p not in measured or measured[p][2]:
                    measured[p] = (float(result["wall_s"]), max(0.0, (start - previous_end).total_seconds()),
                                   waited)
                previous_end = end
    print(f"\nOn this machine's single-node Slurm ({cluster.node}), {dt.date.today()}; minutes for the full grid "
          "on N nodes = grid runs x (task wall + scheduling) / N:")
    print(f"{'paper':<6} {'run':<28} {'duration':>8} {'task wall':>9} {'sched.':>6} {'grid runs':>9}  "
          + "  ".join(f"{'N=' + str(n):>6}" for n in NODES))
    for p in papers:
        wall_s, sched_s, waited = measured[p]
        n_runs = len(planned_runs(grids[p], quick=False))
        print(f"{p:<6} {LONGEST[p]:<28} {runs[p].duration_s:>7.0f}s {wall_s:>8.1f}s {sched_s:>5.0f}s {n_runs:>9}  "
              + "  ".join(f"{n_runs * (wall_s + sched_s) / n / 60:>5.0f}m" for n in NODES)
              + ("  (waited for another experiment's lock)" if waited else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
