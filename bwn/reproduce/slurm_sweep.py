"""Running a sweep on Slurm: submit the job array, follow it, try failed tasks
again, bring the results home (the driver's side of :mod:`bwn.reproduce.slurm`,
whose docstring says how a sweep runs; the node's side is
:mod:`bwn.reproduce.slurm_node`).
"""
from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import shutil
import subprocess
import tarfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

from bwn.reproduce import slurm_node
from bwn.reproduce import fingerprint as fp
from bwn.reproduce.slurm_node import READY_COMMENT
from bwn.reproduce.slurm import (
    Attempt,
    ENDED,
    FingerprintMismatch,
    QUEUED_STATES,
    RUNNING_STATES,
    SlurmCli,
    SlurmError,
    SlurmOptions,
    SweepOutcome,
    Task,
    TaskState,
    _Row,
    batch_script,
    sbatch_arguments,
)


def run_sweep(tasks: Sequence[Task], out: Path, state_dir: Path, options: SlurmOptions,
              progress: Callable[[str], None] = print,
              describe: Optional[Callable[[Task, dict[str, Any]], str]] = None,
              make_room: Optional[Callable[[Path], None]] = None,
              cli: Optional[SlurmCli] = None) -> SweepOutcome:
    """Run every task on Slurm and wait until each has ended (done, or failed after
    ``max_tries``). ``describe(task, result)`` adds words to a task's "done" line
    (the caller's verdict of its run folder; the first word, before a ":", is
    counted in the progress line). ``make_room(folder)`` moves an earlier run
    folder out of the way when a node's bundle brings a new one home (default:
    into the state folder's ``replaced/``). Raises :class:`FingerprintMismatch`
    (after cancelling the sweep's jobs) when a node runs other code, and
    :class:`SlurmError` when Slurm cannot be used."""
    keys = [t.key for t in tasks]
    if len(set(keys)) != len(keys):
        dup = sorted({k for k in keys if keys.count(k) > 1})
        raise ValueError(f"task keys must be unique: {', '.join(dup)}")
    sweep = _Sweep(list(tasks), out, state_dir, options, progress, describe, cli or SlurmCli(options.env))
    if make_room is not None:
        sweep.make_room = make_room
    with sweep.locked():
        return sweep.run()


class _Sweep:
    def __init__(self, tasks: list[Task], out: Path, state_dir: Path, options: SlurmOptions,
                 progress: Callable[[str], None], describe: Optional[Callable[[Task, dict[str, Any]], str]],
                 cli: SlurmCli):
        self.tasks = {t.key: t for t in tasks}
        self.out, self.dir, self.opt = out, state_dir, options
        self.progress, self.describe, self.cli = progress, describe, cli
        self.states: dict[str, TaskState] = {}
        self.submissions: list[dict[str, Any]] = []
        self.refusals: dict[str, str] = {}
        self.fingerprint = ""
        self.labels: dict[str, str] = {}              # key -> describe()'s word for a done task
        self.make_room: Callable[[Path], None] = self._set_aside
        self._last_summary = ""

    # -- state on disk ---------------------------------------------------------------

    @property
    def state_path(self) -> Path:
        return self.dir / "state.json"

    def locked(self) -> "_Lock":
        return _Lock(self.dir / "driver.lock")

    def load(self) -> None:
        if not self.state_path.exists():
            return
        try:
            data = json.loads(self.state_path.read_text())
            self.submissions = data.get("submissions", [])
            for key, raw in data.get("tasks", {}).items():
                self.states[key] = TaskState(raw["argv"], raw["run_folder"],
                                             [Attempt(**a) for a in raw.get("attempts", [])],
                                             [Attempt(**a) for a in raw.get("earlier", [])], raw.get("final"))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise SlurmError(f"{self.state_path} cannot be read ({exc}); move it away to start the sweep "
                             "afresh (its jobs, if any still run, are then not followed)") from None

    def save(self) -> None:
        data = {"format": 1, "fingerprint": self.fingerprint, "submissions": self.submissions,
                "tasks": {k: dataclasses.asdict(s) for k, s in self.states.items()}}
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, self.state_path)

    # -- the sweep -------------------------------------------------------------------

    def run(self) -> SweepOutcome:
        why = self.cli.missing(srun=self.opt.transfer == "srun")
        if why:
            raise SlurmError(why)
        try:
            state = fp.code_state()
        except fp.FingerprintError as exc:
            raise SlurmError(f"the driver's checkout has no code fingerprint: {exc}") from None
        self.fingerprint, dirty = state.fingerprint, state.dirty
        if dirty:
            raise SlurmError("the driver's run code differs from its commit, so no node can be checked "
                             f"against it: commit or stash {', '.join(dirty)}")
        for sub in ("submissions", "results", "logs"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        self.load()
        self._adopt()
        self.save()
        try:
            while True:
                self._poll()
                if self.refusals:
                    self._cancel_all()
                    self.save()
                    raise FingerprintMismatch(self.refusals)
                self._resubmit()
                self.save()
                self._report_counts()
                if all(self.states[k].final for k in self.tasks):
                    break
                time.sleep(self.opt.poll_s)
        except KeyboardInterrupt:
            self.save()
            jobs = sorted({a.array_job for k in self.tasks for a in self.states[k].attempts
                           if a.state not in ENDED})
            if jobs:
                self.progress(f"interrupted: Slurm job(s) {', '.join(jobs)} keep running; the same command "
                              f"follows them again, `scancel {' '.join(jobs)}` stops them")
            raise
        return self._outcome()

    def _adopt(self) -> None:
        """Take over what an earlier invocation left: a task still queued or running
        is followed, not submitted again; a task asked for no more is cancelled."""
        for key, task in self.tasks.items():
            st = self.states.get(key)
            if st is None:
                self.states[key] = TaskState(list(task.argv), task.run_folder)
                continue
            st.argv, st.run_folder, st.final = list(task.argv), task.run_folder, None
            running = st.outstanding()
            st.earlier += [a for a in st.attempts if a is not running]
            st.attempts = [running] if running else []
            if running:
                self.progress(f"{key}: following its attempt from an earlier invocation "
                              f"(Slurm job {running.tag})")
        orphans = [(k, st.outstanding()) for k, st in self.states.items() if k not in self.tasks]
        for key, att in orphans:
            if att is not None:
                self.cli.scancel([att.tag])
                att.state, att.detail = "cancelled", "no longer asked for"
                self.progress(f"{key}: no longer asked for; its Slurm job {att.tag} cancelled")

    def _poll(self) -> None:
        if not any(self.states[k].outstanding() for k in self.tasks):
            return
        rows = self.cli.squeue(self.opt.job_name)
        for key in self.tasks:
            st = self.states[key]
            att = st.outstanding()
            if att is not None:
                self._update(key, st, att, rows.get((att.array_job, att.index)))

    def _update(self, key: str, st: TaskState, att: Attempt, row: Optional[_Row]) -> None:
        if row is not None and row.restarts > att.restarts:
            att.restarts = row.restarts
            why = row.reason if row.reason not in ("", "None") else "preempted, requeued or its node failed"
            self.progress(f"{key}: requeued by Slurm ({why}; try {st.tries()}/{self.opt.max_tries})")
            if st.tries() > self.opt.max_tries:
                self.cli.scancel([att.tag])
                self._end(key, st, att, "cancelled", f"requeued by Slurm beyond {self.opt.max_tries} tries")
                return
        if row is not None and row.state in QUEUED_STATES:
            att.state = "queued"
            return
        if row is not None and row.state in RUNNING_STATES:
            if att.state != "running" or att.node != row.node:
                att.state, att.node = "running", row.node
                self.progress(f"{key}: running on {row.node} (Slurm job {att.tag}, "
                              f"try {st.tries()}/{self.opt.max_tries})")
            if row.state == "RUNNING" and row.comment == f"{READY_COMMENT}:{row.restarts}":
                result = self._fetch(att, row)
                if result is not None:
                    self._finish(key, st, att, result)
            return
        result = self._result(att)
        if result is not None:
            self._finish(key, st, att, result)
            return
        # Ended (or forgotten by Slurm) without a result: give a shared filesystem
        # a moment to show it, then count the attempt as lost.
        now = time.monotonic()
        if att.ended_seen_s is None:
            att.ended_seen_s = now
        if now - att.ended_seen_s < self.opt.lost_grace_s:
            return
        how = f"Slurm state {row.state}" + (f" ({row.reason})" if row.reason and row.reason != "None" else "") \
            if row is not None else "no longer known to Slurm"
        hint = ("; the batch log is on the node: " + f"{self.opt.node_spool}/bwn-{att.tag}.out"
                if self.opt.transfer == "srun" else
                f"; batch log {self.dir / 'logs' / (att.tag + '.out')} (is the output folder on a "
                "filesystem every node shares? If not, use the srun transfer)")
        self._end(key, st, att, "lost", f"ended without a result ({how}){hint}")

    def _result(self, att: Attempt) -> Optional[dict[str, Any]]:
        path = self.dir / "results" / f"{att.tag}.json"
        try:
            result = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return result if int(result.get("restart_count", 0)) >= att.restarts else None

    def _finish(self, key: str, st: TaskState, att: Attempt, result: dict[str, Any]) -> None:
        att.result, att.node = result, result.get("node") or att.node
        status = result.get("status")
        if status == "ok":
            self._end(key, st, att, "ok", f"done on {att.node} in {float(result.get('wall_s', 0)):.0f} s")
        elif status == "refused":
            self.refusals[att.node] = str(result.get("detail"))
            self._end(key, st, att, "refused", str(result.get("detail")))
        else:
            log = self.dir / "logs" / f"{att.tag}.task.log"
            self._end(key, st, att, "terminated" if status == "terminated" else "failed",
                      f"exit {result.get('exit_code')} on {att.node}"
                      f"{' (terminated by Slurm)' if status == 'terminated' else ''}; log {log}")

    def _end(self, key: str, st: TaskState, att: Attempt, state: str, detail: str) -> None:
        att.state, att.detail = state, detail
        if state == "ok":
            st.final = "done"
            extra = self.describe(self.tasks[key], att.result or {}) if self.describe else ""
            self.labels[key] = extra.split(":")[0].strip()
            self.progress(f"{key}: {detail}{': ' + extra if extra else ''}")
        else:
            self.progress(f"{key}: try {st.tries()}/{self.opt.max_tries} {state}: {detail}")

    def _resubmit(self) -> None:
        due: list[Task] = []
        for key, task in self.tasks.items():
            st = self.states[key]
            if st.final or st.outstanding() or any(a.state == "refused" for a in st.attempts):
                continue
            if st.tries() >= self.opt.max_tries:
                st.final = "failed"
                self.progress(f"{key}: FAILED after {st.tries()} tries; last: {st.attempts[-1].detail}")
                continue
            due.append(task)
        if due:
            self._submit(due)

    def _submit(self, tasks: list[Task]) -> None:
        n = len(self.submissions) + 1
        script = self.dir / "submissions" / f"{n:04d}.sh"
        script.write_text(batch_script(tasks, self.opt, self.fingerprint, self.out, self.dir))
        job = self.cli.sbatch(sbatch_arguments(len(tasks), self.opt, script, self.dir))
        self.submissions.append({"n": n, "array_job": job, "keys": [t.key for t in tasks],
                                 "script": str(script.relative_to(self.dir)), "transfer": self.opt.transfer,
                                 "submitted_utc": slurm_node._utc()})
        for i, task in enumerate(tasks):
            self.states[task.key].attempts.append(Attempt(n, job, i))
        self.progress(f"submitted {len(tasks)} task(s) as Slurm job array {job}"
                      + (f" (at most {self.opt.max_parallel} at a time)" if self.opt.max_parallel else ""))

    def _cancel_all(self) -> None:
        for key in self.tasks:
            st = self.states[key]
            att = st.outstanding()
            if att is not None:
                self.cli.scancel([att.tag])
                att.state, att.detail = "cancelled", "the sweep stopped: a node runs other code"
                st.final = "failed"

    def _report_counts(self) -> None:
        counts = {"queued": 0, "running": 0, "done": 0, "failed": 0}
        for key in self.tasks:
            st = self.states[key]
            att = st.outstanding()
            bucket = (st.final if st.final else att.state if att is not None and att.state in counts
                      else "queued")
            counts[bucket] += 1
        labels: dict[str, int] = {}
        for key in self.tasks:
            if self.states[key].final == "done" and self.labels.get(key):
                labels[self.labels[key]] = labels.get(self.labels[key], 0) + 1
        parts = [f"{v} {k}" for k, v in counts.items()]
        if labels:
            parts[2] += " (" + ", ".join(f"{v} {k}" for k, v in sorted(labels.items())) + ")"
        summary = "slurm: " + ", ".join(parts) + f" of {len(self.tasks)}"
        if summary != self._last_summary:
            self._last_summary = summary
            self.progress(summary)

    def _outcome(self) -> SweepOutcome:
        done, failed, nodes = {}, {}, {}
        for key in self.tasks:
            st = self.states[key]
            last = st.attempts[-1] if st.attempts else None
            if last is not None:
                nodes[key] = last.node
            if st.final == "done" and last is not None:
                done[key] = last.result or {}
            else:
                failed[key] = last.detail if last is not None else "never submitted"
        return SweepOutcome(done, failed, nodes)

    # -- bringing a run home without a shared filesystem ------------------------------

    def _set_aside(self, folder: Path) -> None:
        aside = self.dir / "replaced" / f"{'-'.join(folder.relative_to(self.out).parts)}-{int(time.time())}"
        aside.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(folder), str(aside))

    def _fetch(self, att: Attempt, row: _Row) -> Optional[dict[str, Any]]:
        """Read a ready node's bundle through ``srun --overlap`` into the output
        folder, then acknowledge so that the node ends the task and cleans up."""
        spool = f"{self.opt.node_spool}/{att.tag}"
        recorded = self.dir / "results" / f"{att.tag}.json"
        if not recorded.exists():                  # not fetched by an earlier, interrupted driver
            incoming = self.dir / "incoming" / att.tag
            shutil.rmtree(incoming, ignore_errors=True)
            incoming.mkdir(parents=True)
            bundle = incoming.with_suffix(".tar")
            with bundle.open("wb") as fh:
                res = self.cli.srun_in(row.job_id, ["cat", f"{spool}/bundle.tar"], stdout=fh, text=False,
                                       stderr=subprocess.PIPE, timeout_s=3600)
            if res.returncode != 0:
                why = res.stderr.decode(errors="replace").strip()[-300:]
                if att.detail != f"fetch failed: {why}":      # once, not at every poll
                    att.detail = f"fetch failed: {why}"
                    self.progress(f"{att.tag}: fetching its result failed ({why}); trying again at each poll")
                return None
            try:
                _unpack(bundle, incoming)
                result = json.loads((incoming / "result.json").read_text())
            except (OSError, ValueError, tarfile.TarError) as exc:
                self.progress(f"{att.tag}: its result did not unpack ({exc}); trying again at the next poll")
                return None
            if (incoming / "task.log").exists():
                shutil.move(str(incoming / "task.log"), str(self.dir / "logs" / f"{att.tag}.task.log"))
            if (incoming / "run").is_dir():
                dest = self.out / self.states[str(result["key"])].run_folder
                if dest.exists():
                    self.make_room(dest)
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(str(incoming / "run"), str(dest))
            slurm_node._write_json(recorded, result)
            shutil.rmtree(incoming, ignore_errors=True)
            bundle.unlink()
            _remove_if_empty(incoming.parent)
        ack = self.cli.srun_in(row.job_id, ["touch", f"{spool}/fetched"])
        if ack.returncode != 0:
            self.progress(f"{att.tag}: fetched, but the node did not take the acknowledgement "
                          f"({ack.stderr.strip()[-300:]}); it ends on its own after its wait")
        return json.loads(recorded.read_text())


def _unpack(bundle: Path, dest: Path) -> None:
    """Extract a node's bundle; a member that would land outside ``dest`` (absolute,
    ``..``, links) is refused."""
    with tarfile.open(bundle) as tar:
        members = tar.getmembers()
        for m in members:
            path = Path(m.name)
            if path.is_absolute() or ".." in path.parts or m.islnk() or m.isdev():
                raise tarfile.TarError(f"unsafe member {m.name!r}")
            if m.issym() and (Path(m.linkname).is_absolute() or ".." in Path(m.linkname).parts):
                raise tarfile.TarError(f"unsafe link {m.name!r} -> {m.linkname!r}")
        tar.extractall(dest, members=members)


def _remove_if_empty(path: Path) -> None:
    try:
        path.rmdir()
    except OSError:
        pass


class _Lock:
    """One driver per state folder."""

    def __init__(self, path: Path):
        self.path = path
        self.fh: Any = None

    def __enter__(self) -> "_Lock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fh = self.path.open("a+")
        try:
            fcntl.flock(self.fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.fh.seek(0)
            holder = self.fh.read().strip()
            self.fh.close()
            raise SlurmError(f"another driver follows this sweep ({holder or 'unknown pid'}; {self.path})") \
                from None
        self.fh.seek(0)
        self.fh.truncate()
        self.fh.write(f"pid {os.getpid()}\n")
        self.fh.flush()
        return self

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fh, fcntl.LOCK_UN)
        self.fh.close()


def iter_attempts(state_dir: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(key, attempt) of every attempt a sweep's state records, earlier invocations'
    first: what ran where, for reports and tests."""
    data = json.loads((state_dir / "state.json").read_text())
    for key, st in data["tasks"].items():
        for att in [*st.get("earlier", []), *st.get("attempts", [])]:
            yield key, att
