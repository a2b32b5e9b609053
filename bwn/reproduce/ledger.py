"""Every attempt at every run, and which of them a page counts.

``bwn reproduce`` makes a run by its key (bwn.reproduce.plan); each time it does,
it is an *attempt*, with an id of its own written to ``attempt.json`` in the run
folder beside ``run.json``: the code it ran (bwn.reproduce.fingerprint), the
commit, the machine, the command, when it finished. An attempt that is
incomplete or INVALID stays: its folder moves to ``OUT/PAPER/superseded/`` and
the key is made again, at most :data:`MAX_ATTEMPTS` times.

``OUT/PAPER-runs.csv`` is the ledger: one row per attempt, INVALID and
incomplete ones included, each with its reason and metrics. It is committed; the
raw folders are not. So a page written on another machine still knows every
attempt, and *carries* the valid ones whose folders are not there.

A page counts, per key, the latest valid attempt made by the code this checkout
holds (the same code fingerprint), with the case's current scenario and the
planned duration. Attempts by other code are listed and never pooled;
:func:`other_code` says which files differ. Where the fidelity checks have changed
since an attempt was judged, an attempt whose folder is here is judged again from
its recorded measurements; a carried one cannot be, and is made again.
"""
from __future__ import annotations

import csv
import datetime as dt
import json
import os
import platform
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

from bwn.reproduce import claims as cl
from bwn.analysis import fidelity
from bwn.reproduce import fingerprint as fp
from bwn.reproduce.plan import PlannedRun, RunKey, run_dir, stored_fingerprint
from bwn.rundir import RunDir

#: The most attempts at one key: after this many INVALID or incomplete ones the
#: key has no valid run, and the page says so (a re-roll without end could select
#: the runs the machine happened to keep up with).
MAX_ATTEMPTS = 3
ATTEMPT_FILE = "attempt.json"
#: Metrics every ledger row has (besides the claims' own).
STANDARD_METRICS = ("goodput_bps:all", "utilization:all", "retransmissions:all", "timeouts:all", "jain")
COLUMNS = ("paper", "case", "seed", "scheme", "attempt", "status", "reason", "path", "duration_s", "wall_s",
           "code", "commit", "machine", "command", "finished_utc", "scenario", "checker")
VALID, INVALID, INCOMPLETE = "valid", "INVALID", "incomplete"


def machine_text() -> str:
    """This machine, as a page names it: host, CPUs and model, kernel."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{platform.node()}: {os.cpu_count()} CPUs {model}, Linux {platform.release()}"


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


@dataclass
class Attempt:
    """One attempt at one run: where it is, what it found, what made it."""

    key: RunKey
    attempt_id: str
    path: Path
    status: str
    reason: str
    metrics: dict[str, Optional[float]] = field(default_factory=dict)
    duration_s: Optional[float] = None
    wall_s: Optional[float] = None
    code: str = ""
    commit: str = ""
    machine: str = ""
    command: str = ""
    finished_utc: str = ""
    scenario: str = ""
    checker: str = ""
    #: read from the ledger: the folder is not on this machine
    carried: bool = False
    #: why the page does not count it ("" when it does): other code, scenario, ...
    not_counted: str = ""

    @property
    def counted(self) -> bool:
        return self.status == VALID and not self.not_counted

    def record(self) -> cl.RunRecord:
        """As the claims' judge reads a run (bwn/reproduce/claims.py): usable only
        when counted; an INVALID attempt is complete and not valid; an attempt the
        page does not count has no verdict there, and says why."""
        valid = True if self.counted else (False if self.status == INVALID else None)
        reason = self.not_counted if self.status == VALID and self.not_counted else self.reason
        return cl.RunRecord(self.key.case, self.key.seed, self.key.scheme, self.path,
                            self.status in (VALID, INVALID), valid, reason, dict(self.metrics), self.duration_s,
                            f"`{self.command}` at {self.commit}" if self.command else "", self.finished_utc,
                            self.carried, self.scenario)


def new_attempt_id() -> str:
    return uuid.uuid4().hex[:12]


def write_attempt_file(path: Path, key: RunKey, attempt_id: str, state: fp.CodeState, command: str) -> None:
    """attempt.json at the start of an attempt (its end is added by :func:`finish_attempt_file`)."""
    (path / ATTEMPT_FILE).write_text(json.dumps({
        "attempt": attempt_id, "key": key.text(), "code": state.fingerprint if state.clean else "",
        "commit": state.commit + ("-dirty" if not state.clean else ""), "dirty": list(state.dirty),
        "machine": machine_text(), "command": command, "started_utc": utc_now()}, indent=1))


def finish_attempt_file(path: Path, wall_s: float) -> None:
    info = read_attempt_file(path)
    info.update({"finished_utc": utc_now(), "wall_s": round(wall_s, 1)})
    (path / ATTEMPT_FILE).write_text(json.dumps(info, indent=1))


def read_attempt_file(path: Path) -> dict[str, Any]:
    try:
        info = json.loads((path / ATTEMPT_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def load_attempt(key: RunKey, path: Path, metric_names: Sequence[str], scenario: str,
                 params: Optional[Mapping[str, Any]] = None) -> Attempt:
    """An attempt from its folder: metrics recomputed (``params``: the case's), validity
    judged again from the recorded measurements by the current checks."""
    info = read_attempt_file(path)
    record = cl.load_record(key.case, key.seed, key.scheme, path, list(metric_names), params)
    if record.complete:
        status = VALID if record.valid else (INVALID if record.valid is False else INCOMPLETE)
    else:
        status = INCOMPLETE
    reason = record.fidelity if record.complete else (record.fidelity or "incomplete: not every flow finished")
    return Attempt(key, str(info.get("attempt") or f"unrecorded-{path.name}"), path, status, reason,
                   record.metrics, record.duration_s, info.get("wall_s"), str(info.get("code", "")),
                   str(info.get("commit", "")), str(info.get("machine", "")), str(info.get("command", "")),
                   str(info.get("finished_utc", "")), scenario, str(getattr(fidelity, "CHECKS_VERSION", "")))


def read_ledger(out_root: Path, paper: str, metric_names: Sequence[str]) -> list[Attempt]:
    """The committed ledger's attempts (their folders may not be here: ``carried``)."""
    table = out_root / f"{paper}-runs.csv"
    if not table.exists():
        return []
    found = []
    with table.open(newline="") as fh:
        for row in csv.DictReader(fh):
            try:
                key = RunKey(row["paper"], row["case"], int(row["seed"]), row["scheme"])
                metrics = {n: float(row[n]) if row.get(n) else None for n in metric_names}
                found.append(Attempt(
                    key, row["attempt"], out_root / row["path"], row["status"], row.get("reason", ""), metrics,
                    _float(row.get("duration_s")), _float(row.get("wall_s")), row.get("code", ""),
                    row.get("commit", ""), row.get("machine", ""), row.get("command", ""),
                    row.get("finished_utc", ""), row.get("scenario", ""), row.get("checker", ""), carried=True))
            except (KeyError, ValueError):
                continue      # a row of an older table: not an attempt this ledger can read
    return found


def _float(text: Optional[str]) -> Optional[float]:
    return float(text) if text else None


def write_ledger(out_root: Path, paper: str, attempts: Sequence[Attempt], metric_names: Sequence[str]) -> Path:
    path = out_root / f"{paper}-runs.csv"
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow([*COLUMNS, "counted", *metric_names])
        for a in sorted(attempts, key=lambda a: (a.key, a.finished_utc, a.attempt_id)):
            try:
                rel = str(a.path.relative_to(out_root))
            except ValueError:
                rel = str(a.path)
            w.writerow([a.key.paper, a.key.case, a.key.seed, a.key.scheme, a.attempt_id, a.status, a.reason, rel,
                        "" if a.duration_s is None else f"{a.duration_s:g}",
                        "" if a.wall_s is None else f"{a.wall_s:g}", a.code, a.commit, a.machine, a.command,
                        a.finished_utc, a.scenario, a.checker, "1" if a.counted else "0"]
                       + ["" if a.metrics.get(n) is None else f"{a.metrics[n]:.6g}" for n in metric_names])
    return path


def folders_here(out: Path, key: RunKey) -> list[Path]:
    """The run folder of ``key`` and its superseded attempts' folders, here."""
    found = []
    current = run_dir(out, key)
    if RunDir(current).has_meta() or (current / ATTEMPT_FILE).exists():
        found.append(current)
    prefix = "-".join(current.relative_to(out).parts) + "-"
    superseded = out / "superseded"
    if superseded.is_dir():
        for p in sorted(superseded.iterdir()):
            if not p.is_dir():
                continue
            recorded = read_attempt_file(p).get("key")
            # an attempt says whose it is; a folder from before attempt.json, by its name
            if recorded == key.text() or (recorded is None and p.name.startswith(prefix)):
                found.append(p)
    return found


@dataclass
class Pool:
    """A page's attempts and, per key, the one it counts."""

    attempts: list[Attempt]
    counted: dict[RunKey, Attempt]

    def records(self, plan: Sequence[PlannedRun]) -> list[cl.RunRecord]:
        """One record per planned key: its counted attempt, else its latest INVALID
        or incomplete one (shown, never averaged), else an empty incomplete record."""
        out = []
        for run in plan:
            if run.key in self.counted:
                out.append(self.counted[run.key].record())
                continue
            mine = [a for a in self.attempts if a.key == run.key]
            if mine:
                out.append(mine[-1].record())
            else:
                out.append(cl.RunRecord(run.key.case, run.key.seed, run.key.scheme, Path(), False, None,
                                        cl.NOT_RUN))
        return out

    def counts(self, plan: Sequence[PlannedRun]) -> dict[str, int]:
        keys = {r.key for r in plan}
        mine = [a for a in self.attempts if a.key in keys]
        per_key: dict[RunKey, int] = {}
        for a in mine:
            per_key[a.key] = per_key.get(a.key, 0) + 1
        return {"planned": len(keys), "attempts": len(mine),
                "valid": sum(1 for k in keys if k in self.counted),
                "INVALID": sum(1 for a in mine if a.status == INVALID),
                "incomplete": sum(1 for a in mine if a.status == INCOMPLETE),
                "remade": sum(1 for n in per_key.values() if n > 1),
                "other code": sum(1 for a in mine if a.status == VALID and a.not_counted)}


def pool(out: Path, plan: Sequence[PlannedRun], ledger: Iterable[Attempt], state: fp.CodeState,
         scenarios: dict[RunKey, str], metric_names: Sequence[str]) -> Pool:
    """Every attempt of the plan (folders here first, then the ledger's rows whose
    folders are not here) and the one per key the page counts."""
    by_id: dict[str, Attempt] = {}
    for run in plan:
        for path in folders_here(out, run.key):
            a = load_attempt(run.key, path, metric_names, _stored_scenario(path, run), run.case.params)
            by_id[a.attempt_id] = a
    planned = {r.key: r for r in plan}
    for a in ledger:
        if a.key in planned and a.attempt_id not in by_id:
            by_id[a.attempt_id] = a
    attempts = sorted(by_id.values(), key=lambda a: (a.key, a.finished_utc, a.attempt_id))
    checker = str(getattr(fidelity, "CHECKS_VERSION", ""))
    counted: dict[RunKey, Attempt] = {}
    for a in attempts:
        run = planned.get(a.key)
        if run is None:
            continue
        a.not_counted = _why_not_counted(a, run, state, scenarios.get(a.key, ""), checker)
        if a.counted:
            counted[a.key] = a        # the latest valid one wins (attempts are in time order)
    return Pool(attempts, counted)


def _stored_scenario(path: Path, run: PlannedRun) -> str:
    return stored_fingerprint(path, run.case) or ""


def _why_not_counted(a: Attempt, run: PlannedRun, state: fp.CodeState, scenario: str, checker: str) -> str:
    if a.status != VALID:
        return ""
    if not a.code:
        return "made from a tree with uncommitted run code"
    if a.code != state.fingerprint:
        return f"made by other code ({a.code}, at {a.commit or 'an unknown commit'})"
    if scenario and a.scenario != scenario:
        return "made with another scenario than its case's"
    if a.duration_s is None or abs(a.duration_s - run.duration_s) > 0.5:
        return f"lasted {a.duration_s} s, not the planned {run.duration_s:g} s"
    if a.carried and checker and a.checker and a.checker != checker:
        return (f"judged by fidelity checks {a.checker}, now {checker}; its measurements are not on this "
                "machine to judge again")
    return ""


def other_code(attempts: Sequence[Attempt], state: fp.CodeState) -> dict[str, Optional[list[str]]]:
    """commit -> the run-code files that differ from this checkout (None: the commit
    is not in this repository), for every valid attempt made by other code."""
    out: dict[str, Optional[list[str]]] = {}
    for a in attempts:
        if a.status == VALID and a.code and a.code != state.fingerprint and a.commit not in out:
            out[a.commit] = fp.files_differing(a.commit.removesuffix("-dirty")) if a.commit else None
    return out


def attempts_of(attempts: Sequence[Attempt], key: RunKey) -> list[Attempt]:
    return [a for a in attempts if a.key == key]


def needs_run(pool_: Pool, run: PlannedRun, state: fp.CodeState) -> Optional[str]:
    """Why ``run`` must be made now, or None when it is counted, or when this code
    has used its :data:`MAX_ATTEMPTS` on it."""
    if run.key in pool_.counted:
        return None
    mine = [a for a in attempts_of(pool_.attempts, run.key) if a.code == state.fingerprint]
    if len(mine) >= MAX_ATTEMPTS:
        return None
    if mine:
        return f"attempt {len(mine)} was {mine[-1].status}: {mine[-1].reason[:120]}"
    others = [a for a in attempts_of(pool_.attempts, run.key) if a.not_counted]
    return others[-1].not_counted if others else "not run yet"


