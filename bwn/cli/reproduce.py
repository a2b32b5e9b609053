"""``bwn reproduce PAPER``: run a paper's evaluation grid and judge its claims;
``bwn reproduce-run KEY``: make exactly one of its runs (what a batch task runs).

The driver plans the grid's runs (bwn.reproduce.plan), reads the committed ledger
of attempts (bwn.reproduce.ledger), makes what no attempt by this code has made
validly yet (an executor: bwn.reproduce.execute), and writes the page
(bwn.reproduce.page), the claims and the ledger. docs/reproduce.md says how.
"""
from __future__ import annotations

import argparse
import datetime as dt
import logging
import shlex
import signal
import sys
import time
from pathlib import Path
from typing import Any, Optional, Sequence

from bwn import requirements
from bwn.analysis.report import write_report
from bwn.analysis.report.load import ReportError, load_run_dir
from bwn.paths import REPO
from bwn.reproduce import calibrate as cal
from bwn.reproduce import claims as cl
from bwn.reproduce import fingerprint as fp
from bwn.reproduce import grid as gr
from bwn.reproduce import ledger as lg
from bwn.reproduce import page, plots
from bwn.reproduce import slurm as sl
from bwn.reproduce.execute import LocalExecutor, make_run
from bwn.reproduce.plan import (
    OVERHEAD_S,
    PlannedRun,
    RunKey,
    config_for,
    estimate_s,
    find_run,
    planned_runs,
    run_dir,
    scenario_fingerprint,
    waiting_runs,
)
from bwn.reproduce.slurm_executor import SlurmExecutor

DEFAULT_OUT = REPO / "docs" / "results"
EXIT_CODES = """examples:
  bwn reproduce all --plan             what is left to run for every paper, and its time
  bwn reproduce sarbe --quick          a short pass of one paper (not judged against the paper)
  bwn reproduce obp --cases f3-single  one case of a paper's grid, every seed and scheme
  bwn reproduce compare --quick        the cross-scheme comparison (docs/compare.md), one short pass
  bwn reproduce ebn --report-only      rebuild the page from the runs on record

exit status:
  0  done: every planned run has a valid run (or, with --plan/--report-only, nothing went wrong)
  1  some planned run still has no valid run (INVALID or incomplete after its attempts)
  2  bad arguments or a grid/scenario that is not valid
  3  this machine cannot run it (root, BMv2, Mininet, the build), or the run code has
     uncommitted changes (the runs could not say what code made them); with
     --executor slurm: Slurm cannot be used, or a node runs other code than this checkout
  130 interrupted (finished runs stay; the same command resumes)"""


def metric_names(grid: gr.Grid) -> list[str]:
    names = list(lg.STANDARD_METRICS)
    for claim in grid.judged_claims:
        if claim.metric not in names:
            names.append(claim.metric)
    return names


def command_line(args: argparse.Namespace, paper: str) -> str:
    """The invocation for one paper, as a user would type it (`all` becomes the paper)."""
    words = ["bwn", "reproduce", paper]
    if args.quick:
        words.append("--quick")
    if args.cases:
        words += ["--cases", args.cases]
    if args.report_only:
        words.append("--report-only")
    if args.no_carry:
        words.append("--no-carry")
    if Path(args.out).resolve() != DEFAULT_OUT.resolve():
        words += ["--out", str(args.out)]
    if getattr(args, "executor", "local") != "local":
        words += ["--executor", args.executor]
    return shlex.join(words)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paper", help=f"one of {', '.join(gr.GRIDS)}, or 'all' (the papers: "
                                 f"{', '.join(gr.PAPERS)})")
    p.add_argument("--quick", action="store_true",
                   help="the grid's quick subset, one seed, short durations (< 15 min per paper): a smoke "
                        "test of the pipeline, not the grid's verdicts")
    p.add_argument("--out", default=str(DEFAULT_OUT),
                   help="results folder (default: the committed pages, docs/results)")
    p.add_argument("--plan", action="store_true", help="list the runs left to make and their time; run nothing")
    p.add_argument("--report-only", action="store_true",
                   help="judge the claims from the attempts already made; run nothing")
    p.add_argument("--calibrate", action="store_true",
                   help="per case, find the largest rate scale at which every invariant holds")
    p.add_argument("--scales", default="1,0.5,0.25",
                   help="calibration: rate scales to try, largest first (default 1,0.5,0.25)")
    p.add_argument("--calibrate-duration", type=float, default=20.0,
                   help="calibration: seconds per trial run (default 20)")
    p.add_argument("--no-carry", action="store_true",
                   help="ignore the committed ledger (OUT/PAPER-runs.csv): runs whose folders are not here "
                        "are made again")
    p.add_argument("--cases", help="comma-separated case ids to make runs for (the page still judges the "
                                   "whole grid from every attempt it has)")
    p.add_argument("--allow-dirty", action="store_true",
                   help="run although the run code has uncommitted changes; such runs are recorded with no "
                        "code fingerprint and never counted on a page")
    g = p.add_argument_group("where the runs are made")
    g.add_argument("--executor", choices=("local", "slurm"), default="local",
                   help="local: one run after another on this machine (default); slurm: each run a task of a "
                        "Slurm job array on a node of its own (docs/cluster.md)")
    g.add_argument("--partition", help="slurm: the partition (sbatch --partition)")
    g.add_argument("--time-limit", help="slurm: each task's time limit (sbatch --time, e.g. 30 or 1:00:00)")
    g.add_argument("--max-parallel", type=_positive_int, metavar="K",
                   help="slurm: at most K runs at a time (the array's %%K; default: as many as there are nodes)")
    g.add_argument("--sbatch-arg", action="append", default=[], metavar="ARG",
                   help="slurm: one more sbatch argument, passed as it is (repeatable: --sbatch-arg=--qos=x)")
    g.add_argument("--max-tries", type=_positive_int, default=3, metavar="N",
                   help="slurm: tries per run when its task fails, is lost or is preempted (default 3); "
                        "then it is reported failed")
    g.add_argument("--transfer", choices=sl.TRANSFERS, default="shared",
                   help="slurm: how run folders come home: shared (--out is on a filesystem every node "
                        "mounts at the same path; default) or srun (through Slurm, from --node-spool)")
    g.add_argument("--node-spool", metavar="DIR",
                   help="slurm, --transfer srun: a node-local folder that exists on every node")
    g.add_argument("--poll", type=float, default=10.0, metavar="SECONDS",
                   help="slurm: seconds between looks at the queue (default 10)")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


SLURM_ONLY = ("partition", "time_limit", "max_parallel", "node_spool")


def slurm_executor(args: argparse.Namespace) -> Any:
    """The executor the arguments ask for (None: local), or a ValueError saying
    what is wrong with them."""
    if args.executor != "slurm":
        given = [f"--{n.replace('_', '-')}" for n in SLURM_ONLY if getattr(args, n) is not None]
        given += ["--sbatch-arg"] if args.sbatch_arg else []
        given += ["--transfer"] if args.transfer != "shared" else []
        if given:
            raise ValueError(f"{', '.join(given)} only with --executor slurm")
        return None
    if args.calibrate:
        raise ValueError("--calibrate runs on this machine, not with --executor slurm")
    if args.transfer == "srun" and not (args.node_spool and Path(args.node_spool).is_absolute()):
        raise ValueError("--transfer srun needs --node-spool DIR, an absolute folder that exists on every node")
    if args.poll <= 0:
        raise ValueError(f"--poll must be positive, got {args.poll:g}")
    return SlurmExecutor(sl.SlurmOptions(
        partition=args.partition, time_limit=args.time_limit, max_parallel=args.max_parallel,
        sbatch_args=tuple(args.sbatch_arg), max_tries=args.max_tries, transfer=args.transfer,
        node_spool=args.node_spool, poll_s=args.poll, job_name=f"bwn-{args.paper}"))


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("key", help="PAPER/CASE/seedN/SCHEME, e.g. sarbe/l1e-2/seed1/sarbe")
    p.add_argument("--quick", action="store_true", help="the run of the --quick grid (short duration)")
    p.add_argument("--out", default=str(DEFAULT_OUT), help="results folder (default: docs/results)")
    p.add_argument("--command", default="", help="the driver's command, recorded in attempt.json")
    p.add_argument("--allow-dirty", action="store_true", help="as for bwn reproduce")


def _cases(grid: gr.Grid, args: argparse.Namespace) -> list[gr.Case]:
    cases = grid.selected(args.quick)
    if args.cases:
        wanted = [c for c in args.cases.split(",") if c]
        unknown = [c for c in wanted if c not in [x.id for x in grid.cases]]
        if unknown:
            raise gr.GridError(f"{grid.paper} has no case(s) {', '.join(unknown)}; known: "
                               f"{', '.join(c.id for c in grid.cases)}")
        waiting = [c for c in grid.cases if c.id in wanted and c.waiting]
        if waiting:
            raise gr.GridError("; ".join(f"{grid.paper}: case {c.id} waits for {gr.machinery_text(c.waiting)}"
                                         for c in waiting))
        cases = [c for c in grid.cases if c.id in wanted]         # evidence cases too, when named
    return cases


def _scenarios(grid: gr.Grid, plan: Sequence[PlannedRun], quick: bool) -> dict[RunKey, str]:
    return {r.key: scenario_fingerprint(config_for(grid, r.case, r.key.seed, r.key.scheme, quick)[1])
            for r in plan}


def _refuse_dirty(state: fp.CodeState, allow: bool, who: str) -> Optional[int]:
    if state.clean or allow:
        return None
    shown = ", ".join(state.dirty[:10]) + (f" and {len(state.dirty) - 10} more" if len(state.dirty) > 10 else "")
    print(f"{who}: cannot run here: the run code has uncommitted changes ({shown}); commit them (a run must say "
          "what code made it), or pass --allow-dirty for runs that no page will count", file=sys.stderr)
    return 3


def _quiet_mininet() -> None:
    # Mininet and finsy are imported only where experiments run (their import is slow
    # and Mininet needs root).
    from mininet.log import setLogLevel
    setLogLevel("warning")
    logging.getLogger("finsy").setLevel(logging.ERROR)


def _header(args: argparse.Namespace, grid: gr.Grid, state: fp.CodeState, pool: lg.Pool,
            plan: Sequence[PlannedRun], started: float) -> dict[str, Any]:
    keys = {r.key for r in plan}
    counted = [pool.counted[k] for k in keys if k in pool.counted]
    machines = sorted({a.machine for a in counted if a.machine})
    commits = sorted({a.commit for a in counted if a.commit})
    wall = sum(a.wall_s or 0.0 for a in pool.attempts if a.key in keys)
    return {
        "command": command_line(args, grid.paper),
        "code": f"fingerprint {state.fingerprint} (bwn/reproduce/fingerprint.py), here at commit {state.commit}"
                + ("" if state.clean else " with uncommitted run code"),
        "runs made at": ", ".join(commits) or "-",
        "runs made on": "; ".join(machines) or "-",
        "selection": ("quick subset, 1 seed: a smoke test, not the grid's verdicts" if args.quick
                      else "full grid, seeds per case as declared in the grid (at least 5)"),
        "run time": f"{wall / 60:.1f} min of attempts in all (this invocation: {(time.monotonic() - started) / 60:.1f} min)",
        "page written": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def _write_summaries(out: Path, plan: Sequence[PlannedRun], progress: Any) -> None:
    """The usual report of each case and seed whose runs are here (summary.md)."""
    for seed_dir in sorted({run_dir(out, r.key).parent for r in plan if run_dir(out, r.key).exists()}):
        try:
            write_report(seed_dir, load_run_dir(seed_dir))
        except ReportError as exc:
            progress(f"report of {seed_dir}: {exc}")


def run_paper(args: argparse.Namespace, grid: gr.Grid, cases: list[gr.Case], state: fp.CodeState,
              executor: Any) -> int:
    out_root = Path(args.out)
    out = out_root / grid.paper
    names = metric_names(grid)
    started = time.monotonic()
    progress = (lambda m: print(m, flush=True))
    plan = planned_runs(grid, args.quick, cases)
    selected = grid.selected(args.quick)
    ledger_rows = [] if args.no_carry else lg.read_ledger(out_root, grid.paper, names)
    made = {a.key.case for a in ledger_rows}
    if out.is_dir():
        made |= {p.name for p in out.iterdir() if p.is_dir()}
    # evidence cases are on the page when they have attempts (or are run now)
    page_cases = [c for c in grid.cases if c in selected or c in cases or (c.evidence and c.id in made)]
    page_plan = planned_runs(grid, args.quick, page_cases)
    scenarios = _scenarios(grid, page_plan, args.quick)

    def current_pool() -> lg.Pool:
        return lg.pool(out, page_plan, ledger_rows, state, scenarios, names)

    if args.plan:
        pool = current_pool()
        todo = [(r, lg.needs_run(pool, r, state)) for r in plan]
        todo = [(r, why) for r, why in todo if why]
        print(f"{grid.paper}: {len(cases)} cases, {len(plan)} runs ({len(plan) - len(todo)} done or out of "
              f"attempts), about {estimate_s([r for r, _ in todo]) / 60:.0f} min left ({OVERHEAD_S:.0f} s per run "
              "beyond its duration)")
        for case in cases:
            print(f"  {case.id:<14} {case.label[:40]:<40} {', '.join(case.schemes):<34} x{case.seeds if not args.quick else 1} "
                  f"{case.quick_duration_s if args.quick else case.duration_s:g} s")
        full, quick = planned_runs(grid, False), planned_runs(grid, True)
        print(f"  the grid: {len(full)} runs at the declared seeds, {estimate_s(full) / 3600:.1f} h; "
              f"--quick: {len(quick)} runs, {estimate_s(quick) / 60:.0f} min")
        waiting = waiting_runs(grid)
        if waiting:
            keys = {r.key: r for runs in waiting.values() for r in runs}
            print(f"  waiting for machinery (declared, not planned): {len(keys)} runs, "
                  f"{estimate_s(list(keys.values())) / 3600:.1f} h more when all of it is built")
            for name, runs in waiting.items():
                print(f"    {name}: {len(runs)} runs, {estimate_s(runs) / 3600:.1f} h ({gr.MACHINERY[name]})")
        reasons: dict[str, int] = {}
        for _, why in todo:
            reasons[why.split(":")[0]] = reasons.get(why.split(":")[0], 0) + 1
        for why, n in sorted(reasons.items()):
            print(f"  to make: {n} ({why})")
        for commit, files in lg.other_code(pool.attempts, state).items():
            print(f"  not carried: valid runs made at {commit}, whose run code differs from this checkout's in "
                  + ("files of a commit not in this repository" if files is None else ", ".join(files[:8])))
        return 0
    if not args.report_only:
        if not isinstance(executor, SlurmExecutor):
            for target in sorted({r.case.target for r in plan} - {"bmv2"}):   # BMv2: checked in main
                why = requirements.experiment_missing(target)
                if why:
                    print(f"bwn reproduce: cannot run {grid.paper}'s {target} cases here: {why}", file=sys.stderr)
                    return 3
        for attempt_round in range(lg.MAX_ATTEMPTS):
            pool = current_pool()
            todo = [r for r in plan if lg.needs_run(pool, r, state)]
            if not todo:
                break
            progress(f"== {grid.paper}: {len(todo)} runs to make (round {attempt_round + 1})")
            executor.run(grid, out, todo, args.quick, command_line(args, grid.paper), state, progress)
        _write_summaries(out, plan, progress)
    pool = current_pool()
    records = pool.records(page_plan)
    judgements = [cl.judge(grid, claim, page_cases, records) for claim in grid.claims]
    figures = plots.write_claim_figures(grid, out_root, judgements)
    path, drawn_here = plots.timeseries_figure(grid, out_root, page_cases, records)
    if path is not None:
        figures["timeseries"] = path
        if not drawn_here:
            figures["timeseries kept"] = path
    lg.write_ledger(out_root, grid.paper, pool.attempts, names)
    page.write_claims_csv(out_root, grid, judgements)
    md = page.write_page(grid, out_root, page_cases, records, judgements, pool, pool.counts(page_plan),
                         _header(args, grid, state, pool, page_plan, started), figures,
                         lg.other_code(pool.attempts, state))
    print(f"== {grid.paper}: {md}")
    for jc in judgements:
        print(f"  {jc.claim.id:<32} {jc.verdict}")
    asked = {r.key for r in plan}
    missing = [k for k in asked if k not in pool.counted]
    return 1 if missing and not args.report_only else 0


def main(args: argparse.Namespace, executor: Any = None) -> int:
    papers = list(gr.PAPERS) if args.paper == "all" else [args.paper]
    if any(p not in gr.GRIDS for p in papers):
        print(f"bwn reproduce: unknown paper {args.paper!r}; known: {', '.join(gr.GRIDS)}, all", file=sys.stderr)
        return 2
    try:
        scales = [float(s) for s in args.scales.split(",") if s]
    except ValueError:
        print(f"bwn reproduce: --scales must be numbers, got {args.scales!r}", file=sys.stderr)
        return 2
    if not scales or any(not 0 < s <= 10 for s in scales):
        print("bwn reproduce: --scales must be in (0, 10]", file=sys.stderr)
        return 2
    grids = []
    for paper in papers:
        try:
            grid = gr.load_grid(paper)
            cases = _cases(grid, args)
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
    try:
        state = fp.code_state()
    except fp.FingerprintError as exc:
        print(f"bwn reproduce: cannot tell what code this checkout holds: {exc}", file=sys.stderr)
        return 3
    try:
        executor = executor or slurm_executor(args)
    except ValueError as exc:
        print(f"bwn reproduce: {exc}", file=sys.stderr)
        return 2
    runs = not (args.plan or args.report_only)
    if runs:
        refused = _refuse_dirty(state, args.allow_dirty, "bwn reproduce")
        if refused:
            return refused
        if not isinstance(executor, SlurmExecutor):          # a cluster's nodes make the runs
            why = requirements.experiment_missing()
            if why:
                print(f"bwn reproduce: cannot run here: {why}", file=sys.stderr)
                return 3
            _quiet_mininet()

        def on_term(signum: int, frame: object) -> None:
            raise KeyboardInterrupt
        signal.signal(signal.SIGTERM, on_term)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    status = 0
    written = False
    for grid, cases in grids:
        try:
            if args.calibrate:
                md = cal.calibrate(grid, Path(args.out), cases, scales, args.calibrate_duration,
                                   progress=lambda m: print(m, flush=True))
                print(md.read_text())
                continue
            status = max(status, run_paper(args, grid, cases, state, executor or LocalExecutor()))
            written = written or not args.plan
        except KeyboardInterrupt:
            print("interrupted: torn down; finished runs stay and the same command resumes", file=sys.stderr)
            return 130
        except sl.SlurmError as exc:
            print(f"bwn reproduce: slurm: {exc}", file=sys.stderr)
            return 3
    if written and not args.quick:
        page.write_index(Path(args.out))
    return status


def run_one(args: argparse.Namespace) -> int:
    """``bwn reproduce-run KEY``: one attempt at one planned run."""
    try:
        key = RunKey.parse(args.key)
        if key.paper not in gr.GRIDS:
            raise ValueError(f"unknown paper {key.paper!r}; known: {', '.join(gr.GRIDS)}")
        grid = gr.load_grid(key.paper)
        planned = find_run(grid, key, args.quick)
    except (ValueError, gr.GridError) as exc:
        print(f"bwn reproduce-run: {exc}", file=sys.stderr)
        return 2
    try:
        state = fp.code_state()
    except fp.FingerprintError as exc:
        print(f"bwn reproduce-run: cannot tell what code this checkout holds: {exc}", file=sys.stderr)
        return 3
    refused = _refuse_dirty(state, args.allow_dirty, "bwn reproduce-run")
    if refused:
        return refused
    why = requirements.experiment_missing(planned.case.target)
    if why:
        print(f"bwn reproduce-run: cannot run here: {why}", file=sys.stderr)
        return 3
    _quiet_mininet()

    # A batch system ends a task with SIGTERM (cancel, preemption, time limit): the
    # run tears its network down as after Ctrl-C, not left for the next run to trip on.
    def on_term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    out = Path(args.out) / grid.paper
    try:
        path = make_run(grid, out, planned, args.quick, args.command or f"bwn reproduce-run {key.text()}", state,
                        progress=lambda m: print(m, flush=True))
    except KeyboardInterrupt:
        print(f"{key.text()}: interrupted: torn down", file=sys.stderr)
        return 130
    attempt = lg.load_attempt(key, path, metric_names(grid), "", planned.case.params)
    print(f"{key.text()}: {attempt.status}: {attempt.reason[:200]} ({path})")
    return 0 if attempt.status == lg.VALID else 1
