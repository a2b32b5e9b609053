"""`bwn reproduce PAPER`: run a paper's evaluation grid and judge its claims.

For each case of the grid (bwn/reproduce/grid.py, ``topologies/reproduce/PAPER.toml``), each
seed and each scheme, one `bwn run` (``bwn.emulation.runner.run_scheme``) writes
``OUT/PAPER/<case>/seed<k>/<scheme>/`` with its scenario, logs, report inputs and
fidelity verdict; ``OUT/PAPER/<case>/seed<k>/summary.md`` is the usual report of
that case and seed. A run already complete and valid is skipped, so an
interrupted reproduction resumes where it stopped; an incomplete or INVALID run
is moved to ``OUT/PAPER/superseded/`` and run again.

Then ``OUT/PAPER.md``, ``OUT/PAPER-runs.csv``, ``OUT/PAPER-claims.csv`` and
``OUT/PAPER-*.png``: per claim, the paper's statement, our mean and 95 % interval
over the valid seeds, the verdict and, where it is not reproduced, the runs and
metrics behind it (bwn/analysis/claims.py, bwn/analysis/stats.py, docs/reproduce.md).

The raw run folders stay out of git; ``OUT/PAPER-runs.csv`` is committed. A run
whose folder is not here (a new machine) but whose row in that table says it was
complete and of the planned duration is *carried*: shown in the report with the
metrics and verdict its own session computed; a valid one is counted and not run
again, an INVALID one is run again (``--no-carry`` ignores the table). So a grid longer than one session can be finished over several.

``--calibrate`` instead finds, per case, the largest rate scale at which a short
run keeps every fidelity invariant (docs/reproduce.md, "Calibration").
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import datetime as dt
import hashlib
import json
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import tomli_w

from bwn import requirements
from bwn.rundir import RunDir, RunMetaError
from bwn.analysis import claims as cl
from bwn.reproduce import grid as gr
from bwn.analysis import stats

#: Metrics every runs table shows (besides the claims' own).
STANDARD_METRICS = ("goodput_bps:all", "utilization:all", "retransmissions:all", "timeouts:all", "jain")
#: Wall time of one run beyond its duration (network, switches, controller, teardown),
#: for the plan's estimate (measured here: 4-7 s, up to 20 s while waiting for the lock).
OVERHEAD_S = 10.0
#: Pause between runs so that other experiments waiting for the lock get their turn.
LOCK_YIELD_S = 1.5


# ---------------------------------------------------------------------------------------
# Planning and running


def planned_runs(grid: gr.Grid, quick: bool, seeds: int,
                 cases: Optional[Sequence[gr.Case]] = None) -> list[tuple[gr.Case, int, str]]:
    """Every (case, seed, scheme) of `cases` (default: the grid's selection): `seeds`
    per case, or the case's own ``seeds`` where it asks for more; one with `quick`."""
    cases = grid.selected(quick) if cases is None else cases
    return [(case, seed, scheme) for case in cases
            for seed in range(1, (1 if quick else max(seeds, case.seeds or 0)) + 1)
            for scheme in case.schemes]


def run_dir(out: Path, case: gr.Case, seed: int, scheme: str) -> Path:
    return out / case.id / f"seed{seed}" / _safe(scheme)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def planned_duration_s(case: gr.Case, quick: bool) -> float:
    return case.quick_duration_s if quick else case.duration_s


def is_done(path: Path, duration_s: Optional[float] = None) -> bool:
    """Complete (every flow wrote its summary), every invariant held and, when
    ``duration_s`` is given, run for that long: a ``--quick`` run (shorter) in the
    same folder is not a run of the full grid, and is superseded by one."""
    run = RunDir(path)
    if not run.has_meta():
        return False
    try:
        meta = run.meta()
    except RunMetaError:
        return False
    if duration_s is not None and abs((meta.duration_s or 0.0) - duration_s) > 0.5:
        return False
    return meta.ok and (meta.fidelity or {}).get("valid") is True


def stored_fingerprint(path: Path, case: gr.Case) -> str:
    """The fingerprint of the scenario the run in ``path`` was made with (its
    scenario.toml, validated: defaults a later version added compare equal to
    their absence); "" when it has none that validates."""
    from bwn.scenario.config import ConfigError, validate
    try:
        stored_toml = RunDir(path).scenario_toml
        stored = validate(tomllib.loads(stored_toml.read_text()),
                          base_dir=gr.template_path(case.template).parent,
                          source=str(stored_toml))
    except (OSError, tomllib.TOMLDecodeError, ConfigError):
        return ""
    return scenario_fingerprint(stored)


def made_with(path: Path, case: gr.Case, cfg: Any) -> bool:
    """The run in ``path`` was made with the scenario ``cfg`` of ``case``. A run of
    an edited case must be made again, not kept."""
    return stored_fingerprint(path, case) == _fingerprint(cfg) != ""


#: Fields added to the scenario after runs were fingerprinted, with the value that
#: keeps the earlier behaviour: at that value a field is left out of the fingerprint,
#: so the runs made before it existed still match (any other value is a new scenario).
NEUTRAL_LATER_FIELDS = {"queue_lookahead": False, "linkem_shared": False}


def _as_run(cfg: Any) -> dict[str, Any]:
    """What makes one run of ``cfg``: not its source, nor the case's list of schemes
    (a run runs one; adding a scheme to a case does not change the others' runs),
    nor a later field at its neutral value (:data:`NEUTRAL_LATER_FIELDS`)."""
    run = dataclasses.asdict(dataclasses.replace(cfg, source=None, schemes=()))
    for name, neutral in NEUTRAL_LATER_FIELDS.items():
        if name in run and run[name] == neutral:
            del run[name]
    return run


def _fingerprint(cfg: Any) -> str:
    """The fingerprint, or "" (compared with nothing) for a config that is not an
    ExperimentConfig dataclass (a stand-in for config_for, as some tests use)."""
    return scenario_fingerprint(cfg) if dataclasses.is_dataclass(cfg) else ""


def scenario_fingerprint(cfg: Any) -> str:
    """A short hash of the validated scenario (as ``_as_run`` sees it), kept in
    PAPER-runs.csv so that a later session carries a run only while its case still
    renders to the same scenario. Conservative: a field a later version adds
    changes every fingerprint, and those runs are made again, unless it is listed
    with its neutral value in :data:`NEUTRAL_LATER_FIELDS`."""
    canonical = json.dumps(_as_run(cfg), sort_keys=True, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def supersede(out: Path, path: Path) -> Path:
    """Move an incomplete or invalid run out of the way (kept as evidence)."""
    stamp = dt.datetime.now().strftime("%Y%m%dT%H%M%S")
    rel = path.relative_to(out)
    dest = out / "superseded" / f"{'-'.join(rel.parts)}-{stamp}"
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(path), str(dest))
    return dest


#: Columns of PAPER-runs.csv that let a later session carry a run (besides the metrics).
CARRY_COLUMNS = ("duration_s", "made_by", "finished_utc", "scenario")
RunKey = tuple[str, int, str]


def carried_records(out_root: Path, paper: str, names: Sequence[str]) -> dict[RunKey, cl.RunRecord]:
    """The complete runs listed in OUT/PAPER-runs.csv, valid or INVALID, by (case,
    seed, scheme): the report shows both, `execute` skips only the valid ones. Rows
    written before the table had a duration (older pages) are not carried: a quick run
    could not be told from a full one."""
    table = out_root / f"{paper}-runs.csv"
    if not table.exists():
        return {}
    found: dict[RunKey, cl.RunRecord] = {}
    with table.open(newline="") as fh:
        for row in csv.DictReader(fh):
            try:
                if row.get("complete") != "1" or row.get("valid") not in ("0", "1") or not row.get("duration_s"):
                    continue
                metrics = {n: float(row[n]) if row.get(n) else None for n in names}
                record = cl.RunRecord(row["case"], int(row["seed"]), row["scheme"], out_root / row["path"],
                                      True, row["valid"] == "1", row.get("fidelity") or "", metrics,
                                      duration_s=float(row["duration_s"]), made_by=row.get("made_by") or "",
                                      finished_utc=row.get("finished_utc") or "", carried=True,
                                      scenario=row.get("scenario") or "")
            except (KeyError, ValueError):
                continue          # a row this version cannot read is not carried: the run is made again
            found[(record.case, record.seed, record.scheme)] = record
    return found


def _carried_for(carried: Optional[dict[RunKey, cl.RunRecord]], case: gr.Case, seed: int, scheme: str,
                 quick: bool, fingerprint: str) -> Optional[cl.RunRecord]:
    """The table's record of this run, if it is of the planned duration and (when
    the row has a fingerprint: rows written before 2026-11-26 have none) of the
    case's current scenario."""
    record = (carried or {}).get((case.id, seed, scheme))
    if record is None or record.duration_s is None:
        return None
    if record.scenario and record.scenario != fingerprint:
        return None
    return record if abs(record.duration_s - planned_duration_s(case, quick)) <= 0.5 else None


def estimate_s(plan: Sequence[tuple[gr.Case, int, str]], quick: bool, overhead_s: float = OVERHEAD_S) -> float:
    return sum(planned_duration_s(c, quick) + overhead_s for c, _, _ in plan)


def config_for(grid: gr.Grid, case: gr.Case, seed: int, scheme: str, quick: bool) -> tuple[dict, Any]:
    from bwn.scenario.config import validate
    data = gr.render(grid, case, seed, scheme, quick)
    cfg = validate(data, base_dir=gr.template_path(case.template).parent,
                   source=f"{grid.paper}:{case.id}:seed{seed}:{scheme}")
    return data, cfg


def done_where(out: Path, case: gr.Case, seed: int, scheme: str, quick: bool, cfg: Any,
               carried: Optional[dict[RunKey, cl.RunRecord]]) -> str:
    """Where a run that needs no making again was made ("" when it must be made):
    a complete, valid folder here of the planned duration and the case's scenario,
    or else a valid row of the committed table that vouches for the same."""
    path = run_dir(out, case, seed, scheme)
    if is_done(path, planned_duration_s(case, quick)) and made_with(path, case, cfg):
        return "before"
    carry = None if path.exists() else _carried_for(carried, case, seed, scheme, quick, _fingerprint(cfg))
    if carry is not None and carry.usable:
        return f"in an earlier session ({out.name}-runs.csv)"
    return ""


def execute(grid: gr.Grid, out: Path, plan: Sequence[tuple[gr.Case, int, str]], quick: bool,
            progress: Callable[[str], None] = print, command: str = "",
            carried: Optional[dict[RunKey, cl.RunRecord]] = None) -> dict[str, Any]:
    """Run what is not done yet; returns timings (also in OUT/PAPER/timing.json): per
    run its duration, wall time, the `command`, commit and machine that made it and
    when it finished, so a page made from several invocations can say which made what."""
    from bwn.emulation import runner as experiment
    from bwn.analysis import report
    timing_path = out / "timing.json"
    timing = json.loads(timing_path.read_text()) if timing_path.exists() else {"runs": {}}
    commit = commit_text(out.parent)                   # out is OUT/PAPER: OUT holds every page
    machine = machine_text()
    touched: set[Path] = set()
    for i, (case, seed, scheme) in enumerate(plan, start=1):
        path = run_dir(out, case, seed, scheme)
        tag = f"[{i}/{len(plan)}] {grid.paper} {case.id} seed{seed} {scheme}"
        data, cfg = config_for(grid, case, seed, scheme, quick)
        done = done_where(out, case, seed, scheme, quick, cfg, carried)
        if done:
            progress(f"{tag}: done {done}, skipped")
            continue
        if path.exists():
            moved = supersede(out, path)
            progress(f"{tag}: earlier attempt incomplete, INVALID, of another duration or made with "
                     f"another scenario, moved to {moved}")
        path.mkdir(parents=True, exist_ok=True)
        RunDir(path).scenario_toml.write_text(tomli_w.dumps(data))
        duration_s = cfg.duration_s
        progress(f"{tag}: {case.label}, {duration_s:.0f} s")
        started = time.monotonic()
        experiment.run_scheme(cfg, scheme, path, duration_s, progress=lambda m: progress(f"  {m}"))
        wall_s = time.monotonic() - started
        timing["runs"][str(path.relative_to(out))] = {
            "duration_s": duration_s, "wall_s": round(wall_s, 1), "command": command, "commit": commit,
            "machine": machine,
            "finished_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M")}
        timing_path.write_text(json.dumps(timing, indent=1))
        touched.add(path.parent)
        # Let an experiment waiting for the machine's lock (it polls every
        # 0.5 s, bwn/emulation/runlock.py) have it before our next run takes it again.
        time.sleep(LOCK_YIELD_S)
    for seed_dir in sorted(touched):
        try:
            report.write_report(seed_dir, report.load_run_dir(seed_dir))
        except report.ReportError as exc:
            progress(f"report of {seed_dir}: {exc}")
    return timing


# ---------------------------------------------------------------------------------------
# Judging and writing


def metric_names(grid: gr.Grid) -> list[str]:
    names = list(STANDARD_METRICS)
    for claim in grid.claims:
        if claim.metric not in names:
            names.append(claim.metric)
    return names


def collect(grid: gr.Grid, out: Path, plan: Sequence[tuple[gr.Case, int, str]], quick: bool = False,
            carried: Optional[dict[RunKey, cl.RunRecord]] = None,
            timing: Optional[dict[str, Any]] = None) -> list[cl.RunRecord]:
    """A record per planned run: from its folder when it is here, else carried from
    the committed table when that has it (complete, same duration; valid or not)."""
    names = metric_names(grid)
    records = []
    for case, seed, scheme in plan:
        path = run_dir(out, case, seed, scheme)
        _, cfg = config_for(grid, case, seed, scheme, quick)
        fingerprint = _fingerprint(cfg)
        carry = None if RunDir(path).has_meta() else _carried_for(carried, case, seed, scheme, quick, fingerprint)
        if carry is not None:
            records.append(carry)
            continue
        record = cl.load_record(case.id, seed, scheme, path, names)
        record.scenario = stored_fingerprint(path, case)        # what the run was made with
        if record.complete and record.scenario != fingerprint:
            record.complete = False
            record.fidelity = "made with another scenario than its case's (bwn reproduce makes it again)"
        entry = (timing or {}).get("runs", {}).get(str(path.relative_to(out))) or {}
        if entry.get("command"):
            record.made_by = f"`{entry['command']}` at {entry.get('commit', 'unknown')}" + (
                f" on {entry['machine']}" if entry.get("machine") else "")
            record.finished_utc = entry.get("finished_utc", "")
        records.append(record)
    return records


def judge_all(grid: gr.Grid, cases: list[gr.Case], records: list[cl.RunRecord]) -> list[cl.ClaimJudgement]:
    return [cl.judge(grid, claim, cases, records) for claim in grid.claims]


def _fmt_metric(name: str, value: Optional[float]) -> str:
    if value is None:
        return "-"
    if name.startswith("goodput_bps"):
        return f"{value / 1e6:.3f} Mb/s"
    if name.startswith(("retransmissions", "timeouts")):
        return f"{value:.0f}"
    return f"{value:.3g}"


def _est_text(claim: gr.Claim, est: stats.Estimate) -> str:
    if claim.kind == "better":
        return est.text(percent=True, digits=3)
    if claim.metric.startswith("goodput_bps"):
        return est.text(scale=1e-6) + (" Mb/s" if est.mean is not None else "")
    return est.text()


def evidence(claim: gr.Claim, j: cl.CaseJudgement, out: Path) -> str:
    """What the runs of one case show, for a claim that did not hold there."""
    schemes = [claim.scheme] + ([claim.versus] if claim.versus else [])
    parts = []
    for scheme in schemes:
        runs = [r for r in j.runs if r.scheme == scheme]
        usable = [r for r in runs if r.usable]
        figures = []
        for name in (claim.metric, "retransmissions:all", "timeouts:all", "utilization:all"):
            est = stats.mean_interval([r.metrics.get(name) for r in usable if r.metrics.get(name) is not None])
            if est.mean is not None:
                figures.append(f"{name.split(':')[0]} {_fmt_metric(name, est.mean)}")
        paths = ", ".join(f"`{r.path.relative_to(out.parent)}`" for r in runs[:3])
        invalid = [r for r in runs if r.valid is False]
        incomplete = [r for r in runs if not r.complete]
        line = f"{scheme}: " + ("; ".join(figures) if figures else "no valid run")
        if invalid:
            seen = [_fmt_metric(claim.metric, r.metrics.get(claim.metric)) for r in invalid]
            line += (f"; {len(invalid)} INVALID, {claim.metric.split(':')[0]} there (not averaged): "
                     f"{', '.join(seen)} ({invalid[0].fidelity[:160]})")
        if incomplete:
            line += f"; {len(incomplete)} incomplete"
        parts.append(f"{line} [{paths}]")
    seeds = [(r.seed, _seed_quantity(claim, r, j.runs)) for r in j.runs if r.scheme == claim.scheme and r.usable]
    shown = [f"seed {seed} {_quantity_text(claim, q)}" for seed, q in sorted(seeds) if q is not None]
    if shown:
        parts.insert(0, "the quantity per valid seed: " + ", ".join(shown))
    return " / ".join(parts)


def _quantity_text(claim: gr.Claim, value: float) -> str:
    """A claim's quantity in one seed: a paired gain in percent, else the metric itself."""
    return f"{value * 100:+.1f} %" if claim.kind == "better" else _fmt_metric(claim.metric, value)


def write_outputs(grid: gr.Grid, out_root: Path, cases: list[gr.Case], records: list[cl.RunRecord],
                  judgements: list[cl.ClaimJudgement], header: dict[str, Any]) -> Path:
    out = out_root / grid.paper
    md = out_root / f"{grid.paper}.md"
    names = metric_names(grid)
    # -- CSVs
    with (out_root / f"{grid.paper}-runs.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["paper", "case", "label", "seed", "scheme", "complete", "valid", "fidelity", "path",
                    *CARRY_COLUMNS] + names)
        labels = {c.id: c.label for c in cases}
        for r in records:
            w.writerow([grid.paper, r.case, labels.get(r.case, ""), r.seed, r.scheme, int(r.complete),
                        "" if r.valid is None else int(r.valid), r.fidelity, str(r.path.relative_to(out_root)),
                        "" if r.duration_s is None else f"{r.duration_s:g}", r.made_by, r.finished_utc,
                        r.scenario]
                       + ["" if r.metrics.get(n) is None else f"{r.metrics[n]:.6g}" for n in names])
    with (out_root / f"{grid.paper}-claims.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["paper", "claim", "verdict", "case", "label", "quantity", "n", "mean", "ci_low", "ci_high",
                    "outcome", "invalid_runs"])
        for jc in judgements:
            quantity = f"gain vs {jc.claim.versus}" if jc.claim.kind == "better" else jc.claim.metric
            for j in jc.cases:
                e = j.estimate
                w.writerow([grid.paper, jc.claim.id, jc.verdict, j.case.id, j.case.label, quantity, e.n,
                            _num(e.mean), _num(e.low), _num(e.high), j.outcome, len(j.invalid_runs)])
    plots = write_plots(grid, out_root, cases, records, judgements)
    # -- markdown
    valid = sum(1 for r in records if r.usable)
    invalid = [r for r in records if r.complete and r.valid is False]
    missing = [r for r in records if not r.complete]
    lines = [f"# Reproduction: {grid.title}", "",
             f"{grid.citation}", "",
             "| | |", "|---|---|"]
    for key, value in header.items():
        lines.append(f"| {key} | {value} |")
    lines += ["", f"**Scaling.** {grid.scaling}", ""]
    for note in grid.notes:
        lines += [f"* {note}"]
    carried = sum(1 for r in records if r.carried)
    carried_text = (f" ({carried} of them carried from an earlier session's {grid.paper}-runs.csv: "
                    f"their folders are not on this machine)" if carried else "")
    lines += ["", f"Runs: {len(records)} planned, {valid} valid, {len(invalid)} INVALID (never averaged), "
              f"{len(missing)} missing or incomplete{carried_text}.", "",
              "## Verdicts", "",
              "Rules (docs/reproduce.md): per case, *yes* when the 95 % interval (Student-t over the "
              "valid seeds) lies wholly on the claim's side, *no* when wholly on the other, *unclear* "
              "otherwise; for a comparison, *equal* when the gain's whole interval lies within the "
              "claim's margin of practical equivalence (± 1 % unless the claim says otherwise): the "
              "schemes tie. With one seed the point estimate decides (n=1). A claim is **reproduced** "
              "when every case is *yes*, **not reproduced** when none is and some is *no* or *equal*, "
              "**inconclusive** when every judged case is *unclear*, **partly** otherwise.", "",
              "| claim | the paper | source | ours (per case) | verdict |", "|---|---|---|---|---|"]
    for jc in judgements:
        per_case = "; ".join(f"{j.case.id}: {_est_text(jc.claim, j.estimate)} {j.outcome}" for j in jc.cases) \
            or "no case of this claim in the selection"
        paper = jc.claim.statement + (f" ({jc.claim.paper_value})" if jc.claim.paper_value else "")
        lines.append(f"| {jc.claim.id} | {paper} | {jc.claim.source} | {per_case} | **{jc.verdict}** |")
    lines += ["", "## Claims in detail", ""]
    for jc in judgements:
        c = jc.claim
        lines += [f"### {c.id}: {jc.verdict}", "", f"*{c.statement}* ({c.source})", "",
                  "Judged: " + _rule_text(c), ""]
        if not jc.cases:
            lines += ["No case of this claim was run in this selection.", ""]
            continue
        head = "| case | label | quantity (mean [95 % interval]) | outcome |"
        lines += [head + (" " + c.scheme + " | " + c.versus + " |" if c.kind == "better" else ""),
                  "|---|---|---|---|" + ("---|---|" if c.kind == "better" else "")]
        for j in jc.cases:
            row = f"| {j.case.id} | {j.case.label} | {_est_text(c, j.estimate)} | {j.outcome} |"
            if c.kind == "better":
                row += f" {_est_text(_plain(c), j.scheme_estimate)} | {_est_text(_plain(c), j.versus_estimate)} |"
            lines.append(row)
        failing = [j for j in jc.cases if j.outcome != stats.YES]
        if failing:
            lines += ["", "Evidence where it did not hold:", ""]
            for j in failing:
                lines.append(f"* case {j.case.id} ({j.outcome}): {evidence(c, j, out)}")
        if c.id in plots:
            lines += ["", f"![{c.id}]({plots[c.id].name})"]
        lines.append("")
    if "timeseries" in plots:
        lines += ["## Throughput over time", ""]
        if "timeseries kept" in plots:
            lines += ["Drawn where the runs' folders were: some of them are not on the machine that "
                      "wrote this page, so the figure is kept as it was.", ""]
        lines += [f"![throughput over time]({plots['timeseries'].name})", ""]
    lines += ["## Runs", "", "Every run (INVALID ones are listed, never averaged). Each folder is a `bwn run` "
              "output: its `summary.md`, logs and `run.json` (fidelity figures).", "",
              "| case | seed | scheme | valid | goodput | utilization | retransmissions | claims' metrics | fidelity | folder |",
              "|---|---|---|---|---:|---:|---:|---|---|---|"]
    claim_metrics = [n for n in names if n not in STANDARD_METRICS]
    for r in records:
        status = "-" if not r.complete else ("yes" if r.valid else ("**INVALID**" if r.valid is False else "?"))
        own = ", ".join(f"{n} {_fmt_metric(n, r.metrics.get(n))}" for n in claim_metrics
                        if r.metrics.get(n) is not None)
        lines.append(f"| {r.case} | {r.seed} | {r.scheme} | {status} | "
                     f"{_fmt_metric('goodput_bps', r.metrics.get('goodput_bps:all'))} | "
                     f"{_fmt_metric('utilization', r.metrics.get('utilization:all'))} | "
                     f"{_fmt_metric('retransmissions', r.metrics.get('retransmissions:all'))} | {own} | "
                     f"{r.fidelity[:200] if r.complete else 'not run or incomplete'} | "
                     f"`{r.path.relative_to(out_root)}`{' (earlier session)' if r.carried else ''} |")
    lines += ["", "## Cases", "", "| case | label | template | parameters | schemes | duration (s), full / quick | note |",
              "|---|---|---|---|---|---|---|"]
    for c in cases:
        params = ", ".join(f"{k}={v}" for k, v in c.params.items())
        lines.append(f"| {c.id} | {c.label} | {c.template} | {params} | {', '.join(c.schemes)} | "
                     f"{c.duration_s:g} / {c.quick_duration_s:g} | {c.note} |")
    md.write_text("\n".join(lines) + "\n")
    return md


def _plain(claim: gr.Claim) -> gr.Claim:
    """The claim as a plain value claim (for showing each side of a comparison)."""
    from dataclasses import replace
    return replace(claim, kind="at_least")


def _rule_text(c: gr.Claim) -> str:
    if c.kind == "better":
        side = "lower" if c.lower_is_better else "higher"
        gain = "1 - ours/theirs" if c.lower_is_better else "ours/theirs - 1"
        return (f"`{c.metric}` of {c.scheme} {side} than {c.versus}'s: the paired relative gain "
                f"({gain}, same seed) above 0; *equal* within ± {c.margin * 100:g} %.")
    if c.kind == "at_least":
        return f"`{c.metric}` of {c.scheme} at least {c.threshold:g}."
    if c.kind == "at_most":
        return f"`{c.metric}` of {c.scheme} at most {c.threshold:g}."
    return f"`{c.metric}` of {c.scheme} within {c.tolerance:.0%} of {c.target:g}."


def _num(v: Optional[float]) -> str:
    return "" if v is None else f"{v:.6g}"


def write_plots(grid: gr.Grid, out_root: Path, cases: list[gr.Case], records: list[cl.RunRecord],
                judgements: list[cl.ClaimJudgement]) -> dict[str, Path]:
    """One PNG per claim (per case: mean and interval of the judged quantity, every
    seed as a dot, INVALID seeds as red crosses at their value, excluded from the
    mean) and, for grids with a ``timeseries_flow``, throughput over time."""
    try:
        import matplotlib
    except ModuleNotFoundError:
        return {}
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    paths: dict[str, Path] = {}
    for jc in judgements:
        if not jc.cases:
            continue
        c = jc.claim
        fig, ax = plt.subplots(figsize=(max(4.0, 1.1 * len(jc.cases) + 2), 3.6))
        for x, j in enumerate(jc.cases):
            e = j.estimate
            if e.mean is not None:
                err = None if e.low is None else [[e.mean - e.low], [e.high - e.mean]]
                ax.errorbar([x], [e.mean], yerr=err, fmt="o", color="black", capsize=5)
            for r in j.runs:
                if r.scheme != c.scheme:
                    continue
                value = _seed_quantity(c, r, j.runs)
                if value is None:
                    continue
                if r.usable:
                    ax.plot([x + 0.15], [value], ".", color="C0")
                elif r.valid is False:
                    ax.plot([x + 0.15], [value], "x", color="red")
        ref = 0.0 if c.kind == "better" else (c.threshold if c.kind != "near" else c.target)
        if ref is not None:
            ax.axhline(ref, color="grey", linestyle="--", linewidth=1)
        # case ids, not labels: a label is a sentence, and a few of them squeeze the
        # axes to nothing (the page's tables give each id's label)
        ax.set_xticks(range(len(jc.cases)), [j.case.id for j in jc.cases], rotation=20, ha="right",
                      fontsize="small")
        ylabel = f"gain vs {c.versus}" if c.kind == "better" else c.metric
        ax.set_ylabel(ylabel)
        n_invalid = sum(len(j.invalid_runs) for j in jc.cases)
        title = f"{c.id}: {jc.verdict}"
        if n_invalid:
            title += f" ({n_invalid} INVALID runs: red x, not averaged)"
        ax.set_title(title, fontsize="small")
        ax.grid(True, alpha=0.3)
        fig.tight_layout()
        path = out_root / f"{grid.paper}-{_safe(c.id)}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths[c.id] = path
    if grid.timeseries_flow:
        path, drawn_here = _plot_timeseries(grid, out_root, cases, records)
        if path is not None:
            paths["timeseries"] = path
            if not drawn_here:
                paths["timeseries kept"] = path
    return paths


def _seed_quantity(c: gr.Claim, r: cl.RunRecord, runs: list[cl.RunRecord]) -> Optional[float]:
    value = r.metrics.get(c.metric)
    if value is None:
        return None
    if c.kind != "better":
        return value
    # Paired with the other scheme's run of the same seed only when that run counts too:
    # an INVALID partner gives no valid seed's quantity (the claim's n leaves it out).
    other = next((o for o in runs if o.scheme == c.versus and o.seed == r.seed and o.usable), None)
    theirs = None if other is None else other.metrics.get(c.metric)
    if not theirs:
        return None
    return 1.0 - value / theirs if c.lower_is_better else value / theirs - 1.0


def _plot_timeseries(grid: gr.Grid, out_root: Path, cases: list[gr.Case],
                     records: list[cl.RunRecord]) -> tuple[Optional[Path], bool]:
    """The figure of the cases' throughput over time, drawn from the run folders
    here; (its path, True). When some case has no run folder here (its runs carried
    from the committed table), the figure drawn where they were is kept whole:
    (its path, False); with no such figure, the cases that have folders are drawn,
    and (None, False) when none has."""
    import matplotlib.pyplot as plt

    from bwn.analysis import report
    path = out_root / f"{grid.paper}-throughput-over-time.png"
    here = [c for c in cases if any(r.case == c.id and r.complete and not r.carried for r in records)]
    if len(here) < len(cases) and path.exists():
        return path, False
    if not here:
        return None, False
    cases = here
    fig, axes = plt.subplots(len(cases), 1, figsize=(11, 2.6 * len(cases)), squeeze=False)
    drawn = False
    for ax, case in zip(axes[:, 0], cases):
        runs = [r for r in records if r.case == case.id and r.complete and not r.carried]
        seed = min((r.seed for r in runs), default=None)
        capacity_drawn = False
        for r in runs:
            if r.seed != seed:
                continue
            try:
                run = report.load_scheme_run(r.path, r.scheme)
            except report.ReportError:
                continue
            flow = next((f for f in run.flows if f.name == grid.timeseries_flow), None)
            if flow is None:
                continue
            xs, ys = report.throughput_series(flow, 1.0)
            label = r.scheme + (" [INVALID]" if r.valid is False else "")
            ax.plot(xs, [y / 1e3 for y in ys], label=label, linestyle=":" if r.valid is False else "-")
            drawn = True
            _, curve = report.bottleneck(run)
            if curve is not None and not capacity_drawn and xs:
                cx, cy = curve.steps(max(xs))
                ax.step(cx, [y / 1e3 for y in cy], where="post", color="black", linewidth=1, label="capacity")
                capacity_drawn = True
        ax.set_title(f"{case.id}: {case.label} (seed {seed}, {grid.timeseries_flow}, 1 s bins)", fontsize="small")
        ax.set_ylabel("kb/s")
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    axes[-1, 0].set_xlabel("time since experiment start (s)")
    if not drawn:
        plt.close(fig)
        return (path if path.exists() else None), False
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path, True


# ---------------------------------------------------------------------------------------
# Calibration


def scaled_case(case: gr.Case, scale: float) -> gr.Case:
    """The case with every ``*_mbit`` parameter times ``scale`` and every ``*_ms``
    parameter divided by it: the same bandwidth-delay product and buffer in packets
    at a lower packet rate."""
    from dataclasses import replace
    params = {}
    for key, value in case.params.items():
        if key.endswith("_mbit") and isinstance(value, (int, float)):
            params[key] = round(value * scale, 6)
        elif key.endswith("_ms") and isinstance(value, (int, float)):
            params[key] = round(value / scale, 3)
        else:
            params[key] = value
    return replace(case, params=params, id=f"{case.id}@x{scale:g}")


def calibrate(grid: gr.Grid, out_root: Path, cases: list[gr.Case], scales: Sequence[float],
              duration_s: float, progress: Callable[[str], None] = print) -> Path:
    """Per case, a short run of its first scheme at each scale (largest first) until
    every invariant holds; writes OUT/PAPER-calibration.csv and .md."""
    from dataclasses import replace

    from bwn.emulation import runner as experiment
    out = out_root / grid.paper / "calibration"
    rows = []
    for case in cases:
        scheme = case.schemes[0]
        chosen = None
        for scale in sorted(scales, reverse=True):
            trial = replace(scaled_case(case, scale), duration_s=duration_s, quick_duration_s=duration_s)
            path = out / trial.id / _safe(scheme)
            if path.exists():
                shutil.rmtree(path)
            data, cfg = config_for(grid, trial, 1, scheme, quick=True)
            path.mkdir(parents=True, exist_ok=True)
            RunDir(path).scenario_toml.write_text(tomli_w.dumps(data))
            progress(f"calibrate {grid.paper} {case.id} x{scale:g} ({scheme}, {duration_s:.0f} s)")
            experiment.run_scheme(cfg, scheme, path, duration_s, progress=lambda m: progress(f"  {m}"))
            meta = RunDir(path).meta()
            fid = meta.fidelity or {}
            valid = meta.ok and fid.get("valid") is True
            rows.append({"case": case.id, "scale": scale, "scheme": scheme, "valid": int(valid),
                         "summary": fid.get("summary", "no fidelity verdict"),
                         "params": json.dumps(trial.params)})
            if valid:
                chosen = scale
                break
        rows.append({"case": case.id, "scale": chosen if chosen is not None else "", "scheme": scheme,
                     "valid": "", "summary": "chosen" if chosen is not None else "no scale held",
                     "params": ""})
    csv_path = out_root / f"{grid.paper}-calibration.csv"
    with csv_path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["case", "scale", "scheme", "valid", "summary", "params"])
        w.writeheader()
        w.writerows(rows)
    md = out_root / f"{grid.paper}-calibration.md"
    lines = [f"# Calibration: {grid.paper}", "",
             f"Per case, a {duration_s:g} s run of its first scheme at each rate scale (rates x scale, "
             "delays / scale: same BDP and buffer in packets), largest first, until every fidelity "
             "invariant held (docs/reproduce.md).", "",
             "| case | scale | valid | fidelity |", "|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['case']} | {r['scale']} | {r['valid']} | {r['summary'][:200]} |")
    md.write_text("\n".join(lines) + "\n")
    return md


# ---------------------------------------------------------------------------------------
# Command line


def machine_text() -> str:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{platform.node()}: {os.cpu_count()} CPUs {model}, Linux {platform.release()}"


def commit_text(out: Optional[Path] = None) -> str:
    """The checkout's commit, ``-dirty`` when a tracked file differs from it. Files
    under ``out`` (the results this command writes, e.g. docs/results) do not count:
    regenerating a committed page must not mark the code that made it as changed."""
    def git(*words: str) -> str:
        return subprocess.run(["git", "-C", str(gr.REPO), *words], capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
    try:
        head = git("rev-parse", "--short", "HEAD")
        pathspec = [":/"]
        if out is not None:
            try:
                pathspec.append(f":(exclude){Path(out).resolve().relative_to(gr.REPO.resolve())}")
            except ValueError:
                pass                                   # results outside the checkout
        changed = git("status", "--porcelain", "--untracked-files=no", "--", *pathspec)
    except (OSError, subprocess.TimeoutExpired, subprocess.CalledProcessError):
        return "unknown"
    return f"{head}-dirty" if changed else (head or "unknown")


def command_line(args: argparse.Namespace, paper: str) -> str:
    """The invocation for one paper, as a user would type it (`all` becomes the paper)."""
    words = ["bwn", "reproduce", paper]
    if args.quick:
        words.append("--quick")
    if args.seeds != 3:
        words += ["--seeds", str(args.seeds)]
    if args.cases:
        words += ["--cases", args.cases]
    if args.report_only:
        words.append("--report-only")
    if args.no_carry:
        words.append("--no-carry")
    words += ["--out", str(args.out)]
    return shlex.join(words)


def runs_made_by(records: Sequence[cl.RunRecord]) -> str:
    """Which invocations ("`command` at commit", first-last finish) made the complete
    runs; runs with no record of it (made before it was kept) are counted apart."""
    groups: dict[str, list[str]] = {}
    unknown = 0
    for r in records:
        if not r.complete:
            continue
        if not r.made_by:
            unknown += 1
            continue
        groups.setdefault(r.made_by, []).append(r.finished_utc)
    parts = []
    for made_by, finished in groups.items():
        stamps = sorted(f for f in finished if f)
        when = f", finished {stamps[0]} - {stamps[-1][-5:]} UTC" if stamps else ""
        parts.append(f"{made_by} ({len(finished)} runs{when})")
    if unknown:
        parts.append(f"{unknown} runs without a record of their command (made before it was kept)")
    return "; ".join(parts) or "no run recorded"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paper", help=f"one of {', '.join(gr.PAPERS)}, or 'all'")
    p.add_argument("--seeds", type=_positive_int, default=3,
                   help="seeds per case and scheme (default 3; a case of the grid may ask for more)")
    p.add_argument("--quick", action="store_true",
                   help="the grid's quick subset, one seed, short durations (< 15 min per paper)")
    p.add_argument("--out", default="results", help="output folder (default: results)")
    p.add_argument("--plan", action="store_true", help="list the runs and the time they take; run nothing")
    p.add_argument("--report-only", action="store_true",
                   help="judge the claims from the runs already in --out; run nothing")
    p.add_argument("--calibrate", action="store_true",
                   help="per case, find the largest rate scale at which every invariant holds")
    p.add_argument("--scales", default="1,0.5,0.25",
                   help="calibration: rate scales to try, largest first (default 1,0.5,0.25)")
    p.add_argument("--calibrate-duration", type=float, default=20.0,
                   help="calibration: seconds per trial run (default 20)")
    p.add_argument("--no-carry", action="store_true",
                   help="ignore OUT/PAPER-runs.csv: runs whose folders are not here are made again, "
                        "not carried from an earlier session")
    p.add_argument("--cases", help="comma-separated case ids (default: the whole grid, or its quick subset)")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def main(args: argparse.Namespace) -> int:
    papers = list(gr.PAPERS) if args.paper == "all" else [args.paper]
    if any(p not in gr.PAPERS for p in papers):
        print(f"bwn reproduce: unknown paper {args.paper!r}; known: {', '.join(gr.PAPERS)}, all", file=sys.stderr)
        return 2
    try:
        scales = [float(s) for s in args.scales.split(",") if s]
    except ValueError:
        print(f"bwn reproduce: --scales must be numbers, got {args.scales!r}", file=sys.stderr)
        return 2
    if not scales or any(not 0 < s <= 10 for s in scales):
        print("bwn reproduce: --scales must be in (0, 10]", file=sys.stderr)
        return 2
    out_root = Path(args.out)
    grids = []
    for paper in papers:
        try:
            grid = gr.load_grid(paper)
            cases = grid.selected(args.quick)
            if args.cases:
                wanted = [c for c in args.cases.split(",") if c]
                unknown = [c for c in wanted if c not in [x.id for x in grid.cases]]
                if unknown:
                    print(f"bwn reproduce: {paper} has no case(s) {', '.join(unknown)}; known: "
                          f"{', '.join(c.id for c in grid.cases)}", file=sys.stderr)
                    return 2
                cases = [c for c in grid.cases if c.id in wanted]
            for case in cases:                     # render and validate every scenario now
                for scheme in case.schemes:
                    config_for(grid, case, 1, scheme, args.quick)
        except gr.GridError as exc:
            print(f"bwn reproduce: {exc}", file=sys.stderr)
            return 2
        except ValueError as exc:                  # ConfigError
            print(f"bwn reproduce: {paper}: a generated scenario is not valid: {exc}", file=sys.stderr)
            return 2
        grids.append((grid, cases))
    # Runs are made for the cases asked for (--cases); the page always judges the
    # whole selection (full grid or quick subset, plus any case asked for outside
    # it) from the runs here and the carried ones, so an invocation for a few cases
    # neither drops the others from the page nor from PAPER-runs.csv.
    plans = [(grid, cases, planned_runs(grid, args.quick, args.seeds, cases)) for grid, cases in grids]
    if args.plan:
        for grid, cases, plan in plans:
            carried = {} if args.no_carry else carried_records(out_root, grid.paper, metric_names(grid))
            todo = [p for p in plan
                    if not done_where(out_root / grid.paper, *p, args.quick,
                                      config_for(grid, *p, args.quick)[1], carried)]
            print(f"{grid.paper}: {len(cases)} cases, {len(plan)} runs ({len(plan) - len(todo)} done), "
                  f"about {estimate_s(todo, args.quick) / 60:.0f} min left "
                  f"({OVERHEAD_S:.0f} s per run beyond its duration)")
            for case in cases:
                print(f"  {case.id:<10} {case.label:<28} {', '.join(case.schemes):<32} "
                      f"{case.quick_duration_s if args.quick else case.duration_s:g} s")
        return 0
    if not args.report_only:
        why = requirements.experiment_missing()
        if why:
            print(f"bwn reproduce: cannot run here: {why}", file=sys.stderr)
            return 3
        from mininet.log import setLogLevel
        setLogLevel("warning")
        import logging
        logging.getLogger("finsy").setLevel(logging.ERROR)

        def on_term(signum: int, frame: object) -> None:
            raise KeyboardInterrupt
        signal.signal(signal.SIGTERM, on_term)
    out_root.mkdir(parents=True, exist_ok=True)
    status = 0
    for grid, cases, plan in plans:
        started = time.monotonic()
        try:
            if args.calibrate:
                md = calibrate(grid, out_root, cases, scales, args.calibrate_duration,
                               progress=lambda m: print(m, flush=True))
                print(md.read_text())
                continue
            carried = {} if args.no_carry else carried_records(out_root, grid.paper, metric_names(grid))
            if not args.report_only:
                execute(grid, out_root / grid.paper, plan, args.quick, progress=lambda m: print(m, flush=True),
                        command=command_line(args, grid.paper), carried=carried)
        except KeyboardInterrupt:
            print("interrupted: torn down; finished runs stay and a re-run resumes", file=sys.stderr)
            return 130
        timing_path = out_root / grid.paper / "timing.json"
        timing = json.loads(timing_path.read_text()) if timing_path.exists() else {"runs": {}}
        selected = grid.selected(args.quick)
        report_cases = [c for c in grid.cases if c in selected or c in cases]
        report_plan = planned_runs(grid, args.quick, args.seeds, report_cases)
        records = collect(grid, out_root / grid.paper, report_plan, args.quick, carried, timing)
        judgements = judge_all(grid, report_cases, records)
        run_wall_s = sum(v["wall_s"] for v in timing["runs"].values())
        n_carried = sum(1 for r in records if r.carried)
        header = {
            "command": command_line(args, grid.paper),
            "runs made by": runs_made_by(records),
            # The page's own making: with runs carried or made by other invocations,
            # not the commit and machine of its runs ('runs made by' has those).
            "page written": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "page written at commit": commit_text(out_root),
            "page written on": machine_text(),
            "selection": ("quick subset, 1 seed" if args.quick else f"full grid, {args.seeds} seeds"
                          + "".join(f" ({c.id}: {c.seeds})" for c in grid.cases
                                    if c.seeds and c.seeds > args.seeds))
                         + (f"; this invocation: cases {args.cases}" if args.cases else ""),
            "run time": f"{run_wall_s / 60:.1f} min of runs recorded in timing.json on this machine "
                        f"(this invocation: {(time.monotonic() - started) / 60:.1f} min)"
                        + (f"; {n_carried} runs carried from earlier sessions (see 'runs made by')"
                           if n_carried else ""),
        }
        md = write_outputs(grid, out_root, report_cases, records, judgements, header)
        print(f"== {grid.paper}: {md}")
        for jc in judgements:
            print(f"  {jc.claim.id:<28} {jc.verdict}")
        asked = {(c.id, seed, scheme) for c, seed, scheme in plan}
        if not args.report_only and any(not r.complete for r in records if (r.case, r.seed, r.scheme) in asked):
            status = 1
    return status
