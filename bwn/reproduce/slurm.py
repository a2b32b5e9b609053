"""Sweeps on Slurm: one job array, each task a command on its own exclusive node.

Generic over tasks: a :class:`Task` is a key (unique in the sweep), the argv its
node runs (``{out}`` and ``{run}`` stand for the output folder and the task's run
folder there) and the run folder it writes, relative to the output folder.
:func:`bwn.reproduce.slurm_sweep.run_sweep` writes the array's batch script, submits it with
``sbatch --array=0-N%K --exclusive --requeue`` (partition, time limit and any
other sbatch arguments passed through), follows it with ``squeue`` (queued,
running, done, failed, requeued by Slurm after a preemption or a node failure,
one progress line per change), submits again each task that failed, was
terminated or was lost, until it has had ``max_tries`` tries (a Slurm requeue
counts as one) and then reports it failed, and returns once every task has ended.

The node side is bwn/reproduce/slurm_node.py, run from the node's own checkout:
it refuses a task when the node's code fingerprint differs from the driver's,
records the node in the result and in the run folder (``slurm-task.json``), and
brings the run folder home (``transfer``):

* ``"shared"``: the output folder is on a filesystem every node mounts at the
  same path; the node writes there, and its result into the state folder.
* ``"srun"``: no shared filesystem. The node works in a node-local spool, packs
  result, log and run folder into one tar file and waits; the driver reads it
  with ``srun --jobid=JOB --overlap cat`` (Slurm's own I/O forwarding, over
  Slurm's authenticated connections; no ssh, no shared mount), unpacks it into
  the output folder and acknowledges; the node removes its spool.

State lives in the state folder (by default ``OUT/slurm/`` of the caller):
``state.json`` (every task's attempts: array job, index, node, outcome),
``submissions/NNNN.sh`` (each batch script as submitted), ``results/`` (each
attempt's result), ``logs/`` (batch output and each task's log). A driver that
is interrupted leaves its jobs queued and running; run it again with the same
tasks and it follows them by their keys instead of submitting them twice.
docs/cluster.md sets up the nodes.
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from bwn.paths import REPO

#: Slurm job states in which an attempt waits for a node.
QUEUED_STATES = {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD",
                 "SUSPENDED", "RESIZING"}
#: ... in which it runs.
RUNNING_STATES = {"RUNNING", "COMPLETING", "STAGE_OUT", "SIGNALING"}
#: An attempt's outcomes that end it (the others: "queued", "running").
ENDED = {"ok", "failed", "terminated", "lost", "refused", "cancelled"}
TRANSFERS = ("shared", "srun")


class SlurmError(RuntimeError):
    """Slurm refused or failed a command, or the sweep cannot be followed."""


class FingerprintMismatch(SlurmError):
    """A node runs other code than the driver: the sweep is stopped, naming the node."""

    def __init__(self, refusals: Mapping[str, str]):
        self.refusals = dict(refusals)            # node -> what it said
        super().__init__("a node's code differs from the driver's; the sweep is cancelled: "
                         + "; ".join(self.refusals.values())
                         + ". Check out the driver's commit on that node (docs/cluster.md)")

    @property
    def nodes(self) -> list[str]:
        return sorted(self.refusals)


@dataclass(frozen=True)
class Task:
    key: str
    argv: tuple[str, ...]
    run_folder: str                     # relative to the output folder, "/"-separated
    #: exit codes that mean the task did its work (any other is a failed try)
    ok_exit_codes: tuple[int, ...] = (0,)

    def __post_init__(self) -> None:
        if not self.key or "\n" in self.key:
            raise ValueError(f"a task's key must be one non-empty line, got {self.key!r}")
        if not self.argv:
            raise ValueError(f"task {self.key}: empty argv")
        folder = Path(self.run_folder)
        if folder.is_absolute() or ".." in folder.parts or not folder.parts:
            raise ValueError(f"task {self.key}: run folder must be relative, inside the output folder: "
                             f"{self.run_folder!r}")


@dataclass(frozen=True)
class SlurmOptions:
    partition: Optional[str] = None
    time_limit: Optional[str] = None              # sbatch --time (e.g. "30", "1:00:00")
    max_parallel: Optional[int] = None            # the array's %K: at most K tasks at a time
    sbatch_args: tuple[str, ...] = ()             # passed to sbatch as they are
    max_tries: int = 3                            # per task, Slurm's own requeues included
    transfer: str = "shared"
    node_spool: Optional[str] = None              # srun transfer: a node-local folder on every node
    node_repo: Optional[str] = None               # the checkout on the nodes (default: the driver's path)
    node_python: Optional[str] = None             # its Python (default: the driver's, when the paths match)
    job_name: str = "bwn"
    poll_s: float = 10.0
    fetch_wait_s: float = 1800.0                  # srun transfer: how long a node waits to be fetched
    lost_grace_s: float = 30.0                    # an ended attempt's result may take this long to appear
    env: Optional[Mapping[str, str]] = None       # environment of the Slurm commands (default: ours)

    def __post_init__(self) -> None:
        if self.max_tries < 1:
            raise ValueError(f"max_tries must be at least 1, got {self.max_tries}")
        if self.max_parallel is not None and self.max_parallel < 1:
            raise ValueError(f"max_parallel must be at least 1, got {self.max_parallel}")
        if self.transfer not in TRANSFERS:
            raise ValueError(f"transfer must be one of {', '.join(TRANSFERS)}, got {self.transfer!r}")
        if self.transfer == "srun" and not (self.node_spool and Path(self.node_spool).is_absolute()):
            raise ValueError("the srun transfer needs node_spool: an absolute node-local folder on every node")
        if not self.job_name or any(c.isspace() or c in ",%" for c in self.job_name):
            raise ValueError(f"job name must be one word without ',' or '%', got {self.job_name!r}")
        if self.poll_s <= 0:
            raise ValueError(f"poll_s must be positive, got {self.poll_s}")

    def repo(self) -> str:
        return self.node_repo or str(REPO)

    def python(self) -> str:
        if self.node_python:
            return self.node_python
        if Path(self.repo()).resolve() == REPO:
            return sys.executable
        return str(Path(self.repo()) / ".venv" / "bin" / "python")


@dataclass
class Attempt:
    submission: int
    array_job: str
    index: int
    state: str = "queued"                          # queued, running, or one of ENDED
    node: str = ""
    restarts: int = 0                              # Slurm's own requeues of this attempt
    detail: str = ""
    result: Optional[dict[str, Any]] = None
    ended_seen_s: Optional[float] = None           # when squeue first showed it ended without a result

    @property
    def tag(self) -> str:
        return f"{self.array_job}_{self.index}"

    @property
    def tries(self) -> int:
        return 1 + self.restarts


@dataclass
class TaskState:
    argv: list[str]
    run_folder: str
    attempts: list[Attempt] = field(default_factory=list)
    earlier: list[Attempt] = field(default_factory=list)     # attempts of earlier invocations
    final: Optional[str] = None                              # "done" or "failed" in this invocation

    def tries(self) -> int:
        return sum(a.tries for a in self.attempts)

    def outstanding(self) -> Optional[Attempt]:
        return self.attempts[-1] if self.attempts and self.attempts[-1].state not in ENDED else None


@dataclass
class SweepOutcome:
    done: dict[str, dict[str, Any]]               # key -> the result of its successful attempt
    failed: dict[str, str]                        # key -> why it failed, its last attempt and log
    nodes: dict[str, str]                         # key -> the node of its last attempt

    @property
    def ok(self) -> bool:
        return not self.failed


@dataclass
class _Row:
    job_id: str
    state: str
    node: str
    comment: str
    restarts: int
    reason: str


# ---------------------------------------------------------------------------------------
# Slurm's commands


class SlurmCli:
    """sbatch, squeue, scancel and srun, with the sweep's environment."""

    def __init__(self, env: Optional[Mapping[str, str]] = None):
        self.env = dict(os.environ if env is None else env)

    def missing(self, srun: bool) -> Optional[str]:
        tools = ["sbatch", "squeue", "scancel"] + (["srun"] if srun else [])
        gone = [t for t in tools if shutil.which(t, path=self.env.get("PATH")) is None]
        return f"Slurm's {', '.join(gone)} not on PATH (apt-get install slurm-client; docs/cluster.md)" \
            if gone else None

    def run(self, argv: Sequence[str], timeout_s: float = 120.0, **kw: Any) -> subprocess.CompletedProcess:
        try:
            return subprocess.run(list(argv), env=self.env, text=kw.pop("text", True), timeout=timeout_s,
                                  capture_output="stdout" not in kw, **kw)
        except subprocess.TimeoutExpired:
            raise SlurmError(f"{argv[0]} did not answer within {timeout_s:.0f} s: is slurmctld up?") from None

    def sbatch(self, argv: Sequence[str]) -> str:
        res = self.run(["sbatch", "--parsable", *argv])
        if res.returncode != 0:
            raise SlurmError(f"sbatch refused the sweep: {res.stderr.strip() or res.stdout.strip()}")
        job = res.stdout.strip().split(";")[0]
        if not job.isdigit():
            raise SlurmError(f"sbatch printed no job id: {res.stdout!r}")
        return job

    def squeue(self, job_name: str) -> dict[tuple[str, int], _Row]:
        """Every array task of our job name that Slurm still knows (recently ended ones too)."""
        fields = ("ArrayJobID", "ArrayTaskID", "JobID", "State", "NodeList", "RestartCnt", "Reason", "Comment")
        res = self.run(["squeue", "--noheader", "--array", "--states=all", f"--name={job_name}",
                        "--user", str(os.getuid()), "--Format=" + ",".join(f"{f}:|" for f in fields)],
                       timeout_s=60)
        if res.returncode != 0:
            raise SlurmError(f"squeue failed: {res.stderr.strip()}")
        rows: dict[tuple[str, int], _Row] = {}
        for line in res.stdout.splitlines():
            parts = [p.strip() for p in line.split("|")]
            if len(parts) < len(fields) or not parts[1].isdigit():
                continue                            # a pending array's compact row; -r lists its tasks
            comment = "|".join(parts[7:]).rstrip("|").strip()
            rows[(parts[0], int(parts[1]))] = _Row(parts[2], parts[3], parts[4] if parts[4] != "(null)" else "",
                                                   comment, int(parts[5]) if parts[5].isdigit() else 0,
                                                   parts[6])
        return rows

    def scancel(self, ids: Sequence[str]) -> None:
        if ids:
            self.run(["scancel", *ids])

    def srun_in(self, job_id: str, argv: Sequence[str], **kw: Any) -> subprocess.CompletedProcess:
        """A step inside a running job's allocation, beside its batch step."""
        return self.run(["srun", f"--jobid={job_id}", "--overlap", "--nodes=1", "--ntasks=1", "--quiet",
                         *argv], **kw)


# ---------------------------------------------------------------------------------------
# The batch script


def batch_script(tasks: Sequence[Task], options: SlurmOptions, fingerprint: str, out: Path,
                 state_dir: Path) -> str:
    """One submission's batch script: its tasks travel inside it (sbatch copies the
    script to the node), so a node needs no shared filesystem to learn its task."""
    config = {"format": 1, "fingerprint": fingerprint, "transfer": options.transfer,
              "out": str(out.resolve()), "state": str(state_dir.resolve()), "spool": options.node_spool,
              "fetch_wait_s": options.fetch_wait_s,
              "tasks": [{"key": t.key, "argv": list(t.argv), "run_folder": t.run_folder,
                         "ok_exit_codes": list(t.ok_exit_codes)} for t in tasks]}
    repo, python = options.repo(), options.python()
    return "\n".join([
        "#!/bin/bash",
        "# A bwn sweep (bwn/reproduce/slurm.py): array index i runs task i below on its node,",
        "# from the node's checkout, which must hold the driver's code (its fingerprint is checked).",
        "set -u",
        f"BWN_REPO={shlex.quote(repo)}",
        f"BWN_PYTHON={shlex.quote(python)}",
        'cd "$BWN_REPO" || { echo "bwn: no checkout at $BWN_REPO on $(hostname)" >&2; exit 78; }',
        "# -m with the checkout as the working folder: the node's own bwn is imported",
        'exec "$BWN_PYTHON" -m bwn.reproduce.slurm_node task --index "$SLURM_ARRAY_TASK_ID" <<\'BWN_SWEEP\'',
        json.dumps(config),
        "BWN_SWEEP",
        ""])


def sbatch_arguments(n_tasks: int, options: SlurmOptions, script: Path, state_dir: Path) -> list[str]:
    output = (f"{state_dir.resolve()}/logs/%A_%a.out" if options.transfer == "shared"
              else f"{options.node_spool}/bwn-%A_%a.out")
    array = f"0-{n_tasks - 1}" + (f"%{options.max_parallel}" if options.max_parallel else "")
    argv = [f"--array={array}", "--exclusive", "--requeue", "--nodes=1", "--ntasks=1",
            f"--job-name={options.job_name}", f"--output={output}", f"--chdir={options.repo()}"]
    if options.partition:
        argv.append(f"--partition={options.partition}")
    if options.time_limit:
        argv.append(f"--time={options.time_limit}")
    return [*argv, *options.sbatch_args, str(script)]


# ---------------------------------------------------------------------------------------
# The driver
