"""Making runs: one attempt at one key, and executors that make a plan's runs.

:func:`make_run` is one attempt at one planned run: the run folder (an earlier
attempt's is moved to ``OUT/PAPER/superseded/``, kept), the scenario it runs,
``attempt.json`` (bwn.reproduce.ledger), then one ``bwn run`` of one scheme
(``bwn.emulation.runner.run_scheme``), which takes the machine's experiment
lock for its own duration only. :class:`LocalExecutor` makes a list of runs one
after the other on this machine; ``bwn reproduce-run KEY`` makes exactly one,
which is what a batch system's task runs (bwn.reproduce.slurm).
"""
from __future__ import annotations

import datetime as dt
import shutil
import time
from pathlib import Path
from typing import Callable, Protocol, Sequence

import tomli_w

from bwn.emulation import runner
from bwn.reproduce import fingerprint as fp
from bwn.reproduce import grid as gr
from bwn.reproduce import ledger
from bwn.reproduce.plan import PlannedRun, config_for, run_dir
from bwn.rundir import RunDir

#: Pause between runs so that other experiments waiting for the lock get their turn
#: (the lock is polled every 0.5 s, bwn/emulation/runlock.py).
LOCK_YIELD_S = 1.5
Progress = Callable[[str], None]


def supersede(out: Path, path: Path) -> Path:
    """Move an earlier attempt out of the way (kept as evidence; the ledger lists it)."""
    stamp = dt.datetime.now().strftime("%Y%m%dT%H%M%S")
    attempt = ledger.read_attempt_file(path).get("attempt") or "unrecorded"
    rel = path.relative_to(out)
    dest = out / "superseded" / f"{'-'.join(rel.parts)}-{stamp}-{attempt}"
    n = 1
    while dest.exists():                       # two attempts in one second without attempt ids
        dest = dest.with_name(f"{dest.name}.{n}")
        n += 1
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(path), str(dest))
    return dest


def make_run(grid: gr.Grid, out: Path, run: PlannedRun, quick: bool, command: str, state: fp.CodeState,
             progress: Progress = print) -> Path:
    """One attempt at ``run``; returns its folder (``out`` is OUT/PAPER)."""
    path = run_dir(out, run.key)
    if path.exists():
        moved = supersede(out, path)
        progress(f"  the earlier attempt's folder is kept in {moved}")
    path.mkdir(parents=True, exist_ok=True)
    data, cfg = config_for(grid, run.case, run.key.seed, run.key.scheme, quick)
    RunDir(path).scenario_toml.write_text(tomli_w.dumps(data))
    ledger.write_attempt_file(path, run.key, ledger.new_attempt_id(), state, command)
    started = time.monotonic()
    try:
        runner.run_scheme(cfg, grid.algorithm(run.key.scheme), path, cfg.duration_s,
                          progress=lambda m: progress(f"  {m}"), target=run.case.target)
    finally:
        ledger.finish_attempt_file(path, time.monotonic() - started)
    return path


class Executor(Protocol):
    """Makes a list of planned runs (one attempt each), then returns."""

    def run(self, grid: gr.Grid, out: Path, todo: Sequence[PlannedRun], quick: bool, command: str,
            state: fp.CodeState, progress: Progress) -> None: ...


class LocalExecutor:
    """One run after another on this machine."""

    def run(self, grid: gr.Grid, out: Path, todo: Sequence[PlannedRun], quick: bool, command: str,
            state: fp.CodeState, progress: Progress = print) -> None:
        for i, planned in enumerate(todo, start=1):
            progress(f"[{i}/{len(todo)}] {planned.key.text()}: {planned.case.label}, {planned.duration_s:g} s")
            make_run(grid, out, planned, quick, command, state, progress)
            time.sleep(LOCK_YIELD_S)
