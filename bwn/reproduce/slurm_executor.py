"""An executor that makes a plan's runs on a Slurm cluster (``--executor slurm``).

Each planned run becomes one task of a job array (bwn.reproduce.slurm): its node
runs ``bwn reproduce-run KEY`` (bwn/cli/reproduce.py), which plans and makes
exactly that run, from the node's checkout, and writes the ordinary run folder,
``attempt.json`` naming the node as its machine. An attempt that ends INVALID
or incomplete is a made attempt (the driver's rounds make it again, as a local
run's would, at most ``ledger.MAX_ATTEMPTS`` times); a task that fails,
is lost or is preempted is Slurm's business: tried again up to ``max_tries``,
then reported failed and not submitted again by this invocation.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from bwn.reproduce import fingerprint as fp
from bwn.reproduce import grid as gr
from bwn.reproduce import ledger as lg
from bwn.reproduce import slurm as sl
from bwn.reproduce import slurm_sweep as sweep
from bwn.reproduce.execute import Progress, supersede
from bwn.reproduce.plan import PlannedRun, RunKey, run_dir

#: ``bwn reproduce-run``'s exit codes for an attempt that was made: 0 valid, 1
#: INVALID or incomplete (the page's rounds decide whether to make it again).
MADE_EXIT_CODES = (0, 1)
#: The state folder of a paper's sweeps, inside OUT/PAPER.
STATE_FOLDER = "slurm"


def task_for(run: PlannedRun, out_root: Path, quick: bool, command: str, python: str) -> sl.Task:
    """The Slurm task of one planned run: ``bwn reproduce-run KEY`` into the output
    folder (``{out}``: the shared folder, or the node's spool without one)."""
    argv = [python, "-m", "bwn.cli.main", "reproduce-run", run.key.text(), "--out", "{out}",
            "--command", command, *(["--quick"] if quick else [])]
    folder = run_dir(out_root / run.key.paper, run.key).relative_to(out_root)
    return sl.Task(run.key.text(), tuple(argv), folder.as_posix(), MADE_EXIT_CODES)


class SlurmExecutor:
    """Makes a list of planned runs as one Slurm job array and waits for it."""

    def __init__(self, options: sl.SlurmOptions):
        self.options = options
        self.failed: dict[str, str] = {}      # key -> why, for this invocation's later rounds

    def run(self, grid: gr.Grid, out: Path, todo: Sequence[PlannedRun], quick: bool, command: str,
            state: fp.CodeState, progress: Progress = print) -> None:
        out_root = out.parent
        tasks = []
        for planned in todo:
            key = planned.key.text()
            if key in self.failed:
                progress(f"{key}: not submitted again: its {self.options.max_tries} tries on Slurm failed "
                         f"earlier in this invocation ({self.failed[key]})")
                continue
            path = run_dir(out, planned.key)
            if path.exists():                   # kept as evidence, as a local attempt's would be
                progress(f"{key}: the earlier attempt's folder is kept in {supersede(out, path)}")
            tasks.append(task_for(planned, out_root, quick, command, self.options.python()))
        if not tasks:
            return

        def describe(task: sl.Task, result: dict[str, Any]) -> str:
            path = out_root / task.run_folder
            if not (path / lg.ATTEMPT_FILE).exists():
                return f"no attempt: the run did not start (log {out / STATE_FOLDER / 'logs'})"
            attempt = lg.load_attempt(RunKey.parse(task.key), path, lg.STANDARD_METRICS, "")
            return attempt.status if attempt.status == lg.VALID else f"{attempt.status}: {attempt.reason[:160]}"

        outcome = sweep.run_sweep(tasks, out_root, out / STATE_FOLDER, self.options, progress, describe=describe,
                               make_room=lambda folder: progress(f"  the earlier attempt's folder is kept in "
                                                                 f"{supersede(out, folder)}"))
        self.failed.update(outcome.failed)
        for key, why in outcome.failed.items():
            progress(f"{key}: FAILED on Slurm after {self.options.max_tries} tries: {why}")
