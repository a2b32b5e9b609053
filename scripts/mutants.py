#!/usr/bin/env python3
"""Mutation testing of the Python core with mutmut 3: do the fast unit tests catch each fault?

    nice -n 10 .venv/bin/python scripts/mutants.py [MODULE ...] [--jobs 2]
        [--retest] [--fresh] [--report-only] [--survivors]

MODULE is one of: wire report experiment linkem scenario controller hosts (default:
all, in that order). Each module has its own mutmut work folder under
build/mutation/MODULE/, so a run can be stopped (Ctrl-C) and started again: mutmut
keeps every result and only tests the mutants that have none yet, or whose
function changed since.

Why a staging copy: mutmut copies the code it mutates to `mutants/` and puts that
folder first on sys.path. This script stages the project's packages (`bwn`, `hosts`,
`controller`, `topologies`), tests/ and the data the tests read in
build/mutation/MODULE/ and runs mutmut there, so the worktree itself is never
touched and you can keep working meanwhile. mutmut names each mutant after its
module (`hosts.flowlog.x...`).

The inner loop is the fast unit tests only (FAST_TESTS: no root, netns, Mininet,
BMv2 or PTF); mutmut runs, for each mutant, only the tests that call the mutated
function. Code that only those slow tests reach shows up as "no tests"
(counted as not killed).

Each mutant is
  killed     a test failed (or the type of crash pytest reports as an error),
  timeout    the tests ran past mutmut's limit, or one test past --test-cpu-limit seconds
             of CPU (counted as killed: the fault is seen),
  survived   every test passed,
  no tests   no fast test calls the mutated function (counted as not killed),
  equivalent listed in EQUIVALENT_FILE with the reason it cannot change behaviour
             ([mutant."NAME"]), or every mutant of a function that runs only while
             its module is imported ([import_time."FUNCTION"]): mutmut imports the
             tests once and forks a child per mutant, so such a function ran before
             any mutant was switched on and no test can see one here; the entry
             names the ordinary test that checks what the function builds instead.
             Excluded from the score.
Score = (killed + timeout) / (all - equivalent - not checked).

--retest       forget the test/function map (new tests are seen) and run the
               survivors and the "no tests" mutants again: use it after adding tests.
--only-survivors  the same, without first checking the mutants not checked yet
               (a partly run module: count what new tests kill, leave the rest).
--match GLOB   with --retest or --only-survivors: only the survivors whose mutant name
               matches (the tests just written for one module, say).
--fresh        delete the module's work folder and start over.
--report-only  print the scores from the results so far, run nothing.
--survivors    also print each surviving mutant's diff.
Exit status: 0 when done (whatever the score), 1 when mutmut itself failed.
Not run by CI: a full run takes hours on two shared cores.
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import os
import random
import shutil
import signal
import subprocess
import sys
try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser, as a package
    import tomli as tomllib  # type: ignore[no-redef]
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from scipy.stats import binomtest

REPO = Path(__file__).resolve().parents[1]
WORK = REPO / "build" / "mutation"
EQUIVALENT_FILE = REPO / "scripts" / "mutants_equivalent.toml"

# Module -> the files it mutates, as paths in the staged package.
MODULES: dict[str, list[str]] = {
    "wire": ["bwn/protocol/wire.py", "bwn/protocol/dataplane_math.py"],
    "report": ["bwn/analysis/report/*"],
    "experiment": ["bwn/emulation/runner.py", "bwn/emulation/network.py", "bwn/emulation/agents.py",
                   "bwn/emulation/controller_thread.py"],
    "linkem": ["bwn/linkem/*"],
    "scenario": ["bwn/scenario/*"],
    "controller": ["controller/*"],
    "hosts": ["hosts/*"],
}

# The inner loop: unit tests that need no root, namespaces, Mininet, BMv2, PTF,
# tshark or p4c, and run in about a minute together.
FAST_TESTS: list[str] = [
    "tests/test_cc_dft.py", "tests/test_cc_ebn.py", "tests/test_cc_gtcp.py", "tests/test_cc_obp.py",
    "tests/test_cc_sarbe.py", "tests/test_cc_sim.py", "tests/test_cc_vegas.py",
    "tests/test_cc_westwood.py", "tests/test_config.py", "tests/test_dataplane_math.py",
    "tests/test_entries.py", "tests/test_experiment.py", "tests/test_fairshare.py", "tests/test_fidelity.py",
    "tests/test_hosts_e2e.py", "tests/test_linkem_cli.py", "tests/test_linkem_offload.py",
    "tests/test_linkem_sched.py", "tests/test_report.py",
    "tests/test_scenario_schema.py", "tests/test_schedule.py", "tests/test_session_commands.py",
    "tests/test_switchctl_unit.py", "tests/test_transport.py", "tests/test_transport_algos.py",
    "tests/test_transport_cli.py", "tests/test_wire.py", "tests/test_cli.py", "tests/test_needs.py",
    "tests/test_runlock.py",
]

# More fast tests for one module only (a change of a module's test list makes mutmut
# forget that module's results, so the shared list above stays put).
MODULE_TESTS: dict[str, list[str]] = {
    "controller": ["tests/test_p4rt_sync.py", "tests/test_tofino_controller.py"],
    # The engine on veth pairs and the namespace rig, in this process (need root, as
    # the machine running the loop has; about 8 s together): sockets, workers, stats, cleanup.
    "linkem": ["tests/test_linkem_engine.py", "tests/test_linkem_topology.py"],
    "hosts": ["tests/test_forged_feedback.py", "tests/test_netsim.py", "tests/test_receiver_garbage.py",
              "tests/test_transport_sack.py", "tests/test_transport_wire.py"],
}

# The import packages of the repository (pyproject.toml), staged as they are.
PACKAGES = ["bwn", "hosts", "controller", "topologies"]
# Read by the tests from the repository root.
DATA_DIRS = ["tests", "topologies", "docs", "ptf-tests", "scripts", "benchmarks"]
DATA_FILES = [".taplo.toml", "Makefile", "README.md"]

STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests", 34: "skipped",
          36: "timeout", 24: "timeout", -24: "timeout", 152: "timeout", 255: "timeout",
          37: "killed", None: "not checked"}


@dataclass
class Score:
    counts: Counter[str]
    equivalent: list[str]
    survivors: list[str]

    @property
    def tested(self) -> int:
        return sum(n for s, n in self.counts.items() if s not in ("not checked", "skipped"))

    @property
    def percent(self) -> float:
        seen = self.counts["killed"] + self.counts["timeout"]
        return 100.0 * seen / self.tested if self.tested else 0.0


def _sync_tree(src: Path, dst: Path) -> None:
    """Make `dst` a copy of `src` (files only, no caches), keeping the mtime of unchanged
    files so that mutmut keeps the results of functions that did not change."""
    dst.mkdir(parents=True, exist_ok=True)
    wanted: set[Path] = set()
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if "__pycache__" in rel.parts or path.suffix in (".pyc",) or not path.is_file():
            continue
        wanted.add(rel)
        out = dst / rel
        if out.exists() and out.stat().st_size == path.stat().st_size \
                and out.read_bytes() == path.read_bytes():
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, out)
    for path in sorted(dst.rglob("*"), reverse=True):
        rel = path.relative_to(dst)
        if path.is_file() and rel not in wanted and "__pycache__" not in rel.parts:
            path.unlink()


def _stage(module: str, timeout_multiplier: float = 10.0) -> Path:
    """build/mutation/MODULE/ with bwn/ laid out as one package, tests and data, and the
    mutmut configuration for MODULE."""
    stage = WORK / module
    for package in PACKAGES:
        _sync_tree(REPO / package, stage / package)
    for folder in DATA_DIRS:
        if (REPO / folder).is_dir():
            _sync_tree(REPO / folder, stage / folder)
    for name in DATA_FILES:
        if (REPO / name).is_file() and (not (stage / name).exists()
                                        or (stage / name).read_bytes() != (REPO / name).read_bytes()):
            shutil.copy2(REPO / name, stage / name)
    tests = [t for t in FAST_TESTS + MODULE_TESTS.get(module, []) if (REPO / t).exists()]
    config = "\n".join([
        "# Written by scripts/mutants.py; edit that script, not this file.",
        "[tool.mutmut]",
        f"source_paths = {json.dumps(PACKAGES)}",
        f"only_mutate = {json.dumps(MODULES[module])}",
        f"also_copy = {json.dumps(DATA_DIRS + DATA_FILES)}",
        f"pytest_add_cli_args_test_selection = {json.dumps(tests)}",
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-p", "no:randomly"]',
        f"timeout_multiplier = {timeout_multiplier!r}",
        "timeout_constant = 5.0",
        "",
        "[tool.pytest.ini_options]",
        'addopts = "-q"',
        'markers = ["scenario: a whole simulated scenario (tests/conftest.py)"]',
        "",
    ])
    pyproject = stage / "pyproject.toml"
    if not pyproject.exists() or pyproject.read_text() != config:
        pyproject.write_text(config)
    return stage


@dataclass
class Equivalents:
    """EQUIVALENT_FILE: single mutants, and functions whose every mutant is import-time."""

    mutants: dict[str, str]
    import_time: dict[str, str]

    def reason(self, name: str) -> str | None:
        if name in self.mutants:
            return self.mutants[name]
        function = name.rsplit("__mutmut_", 1)[0]
        return self.import_time.get(function)


def _equivalents() -> Equivalents:
    if not EQUIVALENT_FILE.exists():
        return Equivalents({}, {})
    data = tomllib.loads(EQUIVALENT_FILE.read_text())
    return Equivalents({name: entry["reason"] for name, entry in data.get("mutant", {}).items()},
                       {name: entry["reason"] for name, entry in data.get("import_time", {}).items()})


def _results(stage: Path) -> dict[str, int | None]:
    """mutant name -> mutmut exit code, from the .meta files mutmut keeps beside each mutated file."""
    out: dict[str, int | None] = {}
    for meta in sorted((stage / "mutants").rglob("*.py.meta")):
        data = json.loads(meta.read_text())
        out.update(data.get("exit_code_by_key", {}))
    return out


def score(module: str, stage: Path, equivalents: Equivalents) -> Score:
    counts: Counter[str] = Counter()
    listed: list[str] = []
    survivors: list[str] = []
    for name, code in sorted(_results(stage).items()):
        status = STATUS.get(code, "suspicious")
        if equivalents.reason(name) is not None:
            if status in ("killed", "timeout"):
                print(f"  NOTE {name} is listed as equivalent in {EQUIVALENT_FILE.name} but a test "
                      f"kills it: remove it from the list", file=sys.stderr)
                counts[status] += 1
            else:
                listed.append(name)
            continue
        counts[status] += 1
        if status in ("survived", "no tests", "suspicious"):
            survivors.append(name)
    return Score(counts, listed, survivors)


def _mutmut(stage: Path, args: list[str], test_cpu_s: float) -> int:
    cmd = [str(Path(sys.executable).parent / "mutmut"), *args]
    print(f"  [{stage.name}] $ {' '.join(cmd)}", flush=True)
    # SIGINT back to its default: a shell starts background jobs with it ignored, and
    # children inherit that, so tests that end a child with SIGINT would hang.
    # The inner loop leaves out the tests marked `scenario` (tests/conftest.py): whole
    # simulated scenarios of 15-50 s each, which every surviving mutant of the sender or
    # receiver would otherwise run (about 3 minutes a survivor). A mutant that only
    # they would catch counts as survived: the score is a lower bound. A test that uses
    # more than test_cpu_s of CPU ends the mutant's run as a timeout (tests/conftest.py).
    # PYTHONPATH: the tests that run a CLI in a subprocess (`bwn-send`, `python -m ...`)
    # import the mutated copy too; mutmut names the mutant in MUTANT_UNDER_TEST, which
    # the subprocess inherits. Without it they ran the worktree's code through the
    # editable install, so no CLI mutant could fail them.
    # The folder must exist before mutmut starts: a PYTHONPATH entry that is missing
    # when Python starts is cached as unusable, and mutmut (which creates it on a first
    # run) would then test the worktree's code and find no test for any mutant.
    (stage / "mutants").mkdir(exist_ok=True)
    env = dict(os.environ, BWN_MUTATION_INNER_LOOP="1", BWN_MUTATION_TEST_CPU_S=str(test_cpu_s),
               PYTHONPATH=os.pathsep.join(p for p in (str(stage / "mutants"), os.environ.get("PYTHONPATH"))
                                          if p))
    return subprocess.call(cmd, cwd=stage, env=env,
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


@dataclass(frozen=True)
class RunOptions:
    """How to run one module's mutants (the command line's options)."""

    jobs: int = 2
    retest: bool = False
    fresh: bool = False
    only_survivors: bool = False
    match: str = "*"
    timeout_multiplier: float = 10.0
    test_cpu_s: float = 30.0
    sample: int = 0          # > 0: only that many unchecked mutants, drawn at random
    seed: int = 1


def _sample_file(stage: Path, seed: int) -> Path:
    return stage / f"sample-seed{seed}.json"


def draw_sample(stage: Path, equivalents: Equivalents, n: int, seed: int) -> list[str]:
    """``n`` of the module's unchecked mutants (not listed as equivalent), drawn
    uniformly with ``seed``, and remembered in sample-seedSEED.json for the report (an
    estimate of the rest's score with its interval). A sample already drawn with
    the same seed and size is reused, so an interrupted sample resumes."""
    path = _sample_file(stage, seed)
    if path.exists():
        kept = json.loads(path.read_text())
        if kept.get("seed") == seed and len(kept.get("mutants", [])) == n:
            return list(kept["mutants"])
    unchecked = sorted(name for name, code in _results(stage).items()
                       if code is None and equivalents.reason(name) is None)
    chosen = sorted(random.Random(seed).sample(unchecked, min(n, len(unchecked))))
    path.write_text(json.dumps({"seed": seed, "population": len(unchecked), "mutants": chosen}, indent=1))
    return chosen


def run_module(module: str, opts: RunOptions) -> int:
    if opts.fresh and (WORK / module).exists():
        shutil.rmtree(WORK / module)
    stage = _stage(module, opts.timeout_multiplier)
    run = ["run", "--max-children", str(opts.jobs)]
    if opts.sample:
        if not _results(stage):
            print(f"mutants: {module} has no mutants generated yet, so none to draw: run "
                  f"`scripts/mutants.py {module}` once (it may be stopped once it tests)", file=sys.stderr)
            return 1
        chosen = draw_sample(stage, _equivalents(), opts.sample, opts.seed)
        if opts.only_survivors:
            # The sample's survivors again, with the tests written since (mapped afresh).
            (stage / "mutants" / "mutmut-stats.json").unlink(missing_ok=True)
            survivors = set(score(module, stage, _equivalents()).survivors)
            chosen = [n for n in chosen if n in survivors]
        return _mutmut(stage, [*run, *chosen], opts.test_cpu_s) if chosen else 0
    rc = 0 if opts.only_survivors else _mutmut(stage, run, opts.test_cpu_s)
    if rc != 0:
        return rc
    if opts.retest or opts.only_survivors:
        # New tests: mutmut must learn again which tests call which function.
        (stage / "mutants" / "mutmut-stats.json").unlink(missing_ok=True)
        again = [n for n in score(module, stage, _equivalents()).survivors
                 if fnmatch.fnmatchcase(n, opts.match)]
        if again:
            rc = _mutmut(stage, [*run, *again], opts.test_cpu_s)
    return rc


def sample_estimates(stage: Path, equivalents: Equivalents) -> list[str]:
    """Each drawn sample's outcome, as an estimate for the unchecked mutants it was drawn from."""
    return [_sample_estimate(json.loads(path.read_text()), stage, equivalents)
            for path in sorted(stage.glob("sample-seed*.json"))]


def _sample_estimate(kept: dict, stage: Path, equivalents: Equivalents) -> str:
    results = _results(stage)
    statuses = Counter(STATUS.get(results.get(name), "suspicious") for name in kept["mutants"]
                       if equivalents.reason(name) is None)
    done = sum(n for st, n in statuses.items() if st not in ("not checked", "skipped"))
    if not done:
        return f"sample of {len(kept['mutants'])} (seed {kept['seed']}): none checked yet"
    seen = statuses["killed"] + statuses["timeout"]
    ci = binomtest(seen, done).proportion_ci(confidence_level=0.95, method="wilson")
    return (f"sample of {len(kept['mutants'])} of the {kept['population']} unchecked when drawn "
            f"(seed {kept['seed']}): {done} checked, {seen} killed or timed out = {100 * seen / done:.1f} % "
            f"[95 % Wilson {100 * ci.low:.1f}, {100 * ci.high:.1f}]")


def print_scores(modules: list[str], show_diffs: bool) -> None:
    equivalents = _equivalents()
    total: Counter[str] = Counter()
    n_equivalent = 0
    print(f"\n{'module':<12}{'mutants':>8}{'killed':>8}{'timeout':>8}{'survived':>9}"
          f"{'no tests':>9}{'equiv.':>7}{'score':>8}")
    for module in modules:
        stage = WORK / module
        if not (stage / "mutants").is_dir():
            print(f"{module:<12}  (not run yet)")
            continue
        s = score(module, stage, equivalents)
        total += s.counts
        n_equivalent += len(s.equivalent)
        n = sum(s.counts.values()) + len(s.equivalent)
        print(f"{module:<12}{n:>8}{s.counts['killed']:>8}{s.counts['timeout']:>8}"
              f"{s.counts['survived'] + s.counts['suspicious']:>9}{s.counts['no tests']:>9}"
              f"{len(s.equivalent):>7}{s.percent:>7.1f}%")
        if s.counts["not checked"]:
            print(f"{'':<12}  {s.counts['not checked']} not checked yet (run again to resume)")
        for estimate in sample_estimates(stage, equivalents):
            print(f"{'':<12}  {estimate}")
        for name in s.survivors:
            print(f"    survived: {name}")
            if show_diffs:
                subprocess.call([str(Path(sys.executable).parent / "mutmut"), "show", name], cwd=stage)
    if len(modules) > 1:
        all_s = Score(total, [], [])
        print(f"{'all':<12}{sum(total.values()) + n_equivalent:>8}{total['killed']:>8}{total['timeout']:>8}"
              f"{total['survived'] + total['suspicious']:>9}{total['no tests']:>9}{n_equivalent:>7}"
              f"{all_s.percent:>7.1f}%")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("modules", nargs="*", metavar="MODULE",
                    help=f"modules to mutate (default: all): {', '.join(MODULES)}")
    ap.add_argument("--jobs", type=int, default=2, help="mutants tested at once (default 2)")
    ap.add_argument("--retest", action="store_true",
                    help="re-map tests to functions and re-run survivors (after adding tests)")
    ap.add_argument("--only-survivors", action="store_true",
                    help="like --retest, but leave the mutants not checked yet for later")
    ap.add_argument("--match", default="*", metavar="GLOB",
                    help="with --retest/--only-survivors: re-test only the survivors whose name matches "
                         "(e.g. 'hosts.flowlog.*'; default: all)")
    ap.add_argument("--fresh", action="store_true", help="discard the module's results and start over")
    ap.add_argument("--report-only", action="store_true", help="print the scores so far; run nothing")
    ap.add_argument("--survivors", action="store_true", help="print each survivor's diff")
    ap.add_argument("--timeout-multiplier", type=float, default=10.0, metavar="X",
                    help="mutmut's limit is (the mutant's tests' own time + 5 s) * X * 2 CPU "
                         "seconds (default 10: a hanging mutant of the transport's event loop then "
                         "runs for 5-15 min; 3 still allows 6x the tests' time)")
    ap.add_argument("--test-cpu-limit", type=float, default=30.0, metavar="S",
                    help="a single test that uses more than S seconds of CPU ends the mutant's run "
                         "as a timeout (default 30; the slowest fast test takes under 10 s; 0: off)")
    ap.add_argument("--sample", type=int, default=0, metavar="N",
                    help="test only N of the module's unchecked mutants, drawn at random (--seed); "
                         "the report then estimates the unchecked rest's score from them, with a "
                         "95 %% interval (for modules too slow to check whole in one sitting); with "
                         "--only-survivors, re-test the survivors of that same sample")
    ap.add_argument("--seed", type=int, default=1, help="the sample's seed (default 1)")
    args = ap.parse_args(argv)
    unknown = [m for m in args.modules if m not in MODULES]
    if unknown:
        ap.error(f"unknown module {', '.join(unknown)}; choose from {', '.join(MODULES)}")
    if args.jobs < 1:
        ap.error("--jobs must be at least 1")
    if args.sample < 0:
        ap.error("--sample must be >= 0 (0: no sample, every unchecked mutant)")
    if args.sample and (args.retest or args.fresh):
        ap.error("--sample is a draw of unchecked mutants: not with --retest or --fresh "
                 "(with --only-survivors it re-tests the sample's survivors)")
    if args.test_cpu_limit < 0:
        ap.error("--test-cpu-limit must be >= 0 (0: off)")
    if args.timeout_multiplier < 1:
        ap.error("--timeout-multiplier must be at least 1 (below, a slow but passing test run "
                 "would count as a timeout)")
    if shutil.which("mutmut", path=str(Path(sys.executable).parent)) is None:
        print("mutants: mutmut is not installed in this venv: .venv/bin/pip install -e '.[mutation]'",
              file=sys.stderr)
        return 1
    modules = args.modules or list(MODULES)
    failed: list[str] = []
    if not args.report_only:
        for module in modules:
            print(f"== {module}: {', '.join(MODULES[module])}", flush=True)
            rc = run_module(module, RunOptions(
                jobs=args.jobs, retest=args.retest, fresh=args.fresh, only_survivors=args.only_survivors,
                match=args.match, timeout_multiplier=args.timeout_multiplier,
                test_cpu_s=args.test_cpu_limit, sample=args.sample, seed=args.seed))
            if rc != 0:
                print(f"mutants: mutmut failed on {module} (exit {rc}); its output is above", file=sys.stderr)
                failed.append(module)
    print_scores(modules, args.survivors)
    if failed:
        print(f"mutants: mutmut failed on {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
