"""`bwn`: run the papers' scenarios and compare sender schemes.

    bwn list
    bwn run SCENARIO [--schemes ebn,newreno,vegas] [--duration 60] [--out DIR] [--pcap]
    bwn report DIR
    bwn reproduce PAPER [--quick] [--plan] [--out DIR]
    bwn reproduce-run PAPER/CASE/seedN/SCHEME
    bwn net SCENARIO     the scenario's network and the Mininet CLI, to try things by hand
    bwn doctor           what this machine has for bwn, component by component
"""
# Mininet is imported only where a network is built (it needs root and Debian's
# package): `bwn list`, `bwn report` and `--help` work on a machine without it.
from __future__ import annotations

import argparse
import inspect
import logging
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

from bwn import requirements
from bwn.analysis.report import write_report
from bwn.analysis.report.load import ReportError, load_run_dir
from bwn.cli import doctor, reproduce
from bwn.emulation import runner as experiment
from bwn.emulation.agents import parse_scheme
from bwn.emulation.session import run_session
from bwn.paths import REPO
from bwn.rundir import ExperimentDir, RunDir
from bwn.scenario.config import ConfigError, load_config
from hosts.cc.registry import ALGORITHMS, RegistryError, create
from hosts.cc.registry import load as load_algorithm

SCENARIO_DIR = REPO / "topologies" / "scenarios"


def scenario_files() -> dict[str, Path]:
    return {p.stem: p for p in sorted(SCENARIO_DIR.glob("*.toml"))}


def _describe(path: Path) -> str:
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            return line.lstrip("# ").strip()
    return ""


def scheme_names() -> list[str]:
    return list(ALGORITHMS)


def scheme_summary(name: str) -> str:
    """The first line of the scheme's class docstring (what `bwn list` prints)."""
    try:
        doc = inspect.getdoc(load_algorithm(name)) or ""
    except RegistryError as exc:
        return f"(unavailable: {exc})"
    return doc.strip().splitlines()[0] if doc.strip() else ""


def cmd_list(_: argparse.Namespace) -> int:
    print("scenarios (topologies/scenarios/*.toml, or pass a path to your own):")
    for name, path in scenario_files().items():
        print(f"  {name:<18} {_describe(path)}")
    print("\nschemes (hosts/cc/; parameters: `bwn-send --list-algos`; e.g. --schemes 'ebn:variant=relative'):")
    for name in scheme_names():
        print(f"  {name:<18} {scheme_summary(name)}")
    return 0


def default_run_out(scenario: Path, now: Optional[float] = None) -> Path:
    """`runs/<scenario>-<UTC time>` under the working directory: `bwn run`'s --out
    when none is given (one new folder per run; an old run is never overwritten)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(time.time() if now is None else now))
    return Path("runs") / f"{scenario.stem}-{stamp}"


def resolve_scenario(name: str, command: str = "run") -> Path:
    files = scenario_files()
    if name in files:
        return files[name]
    path = Path(name)
    if path.suffix == ".toml" and path.exists():
        return path
    print(f"bwn {command}: unknown scenario {name!r}; known: {', '.join(files)} (or a path to a .toml)",
          file=sys.stderr)
    raise SystemExit(2)


def cmd_run(args: argparse.Namespace) -> int:

    path = resolve_scenario(args.scenario)
    try:
        cfg = load_config(path)
    except ConfigError as exc:
        print(f"bwn run: {path}: {exc}", file=sys.stderr)
        return 2
    schemes = [s for s in (args.schemes.split(",") if args.schemes else cfg.schemes) if s]
    if not schemes:
        print("bwn run: no schemes given (--schemes) and none in the scenario", file=sys.stderr)
        return 2
    known = set(scheme_names())
    try:
        unknown = [s for s in schemes if parse_scheme(s)[0] not in known]
        for s in schemes:
            algo, params = parse_scheme(s)
            if algo in known:
                create(algo, params)  # rejects unknown or ill-typed parameters now, not mid-run
    except (ValueError, RegistryError) as exc:
        print(f"bwn run: {exc}", file=sys.stderr)
        return 2
    if unknown:
        print(f"bwn run: unknown scheme(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}",
              file=sys.stderr)
        return 2
    conflicts = cfg.shaper_conflicts(schemes)
    for message in conflicts:
        print(f"bwn run: {path}: {message}", file=sys.stderr)
    if conflicts:
        return 2
    duration_s = args.duration if args.duration is not None else cfg.duration_s
    if duration_s <= 0:
        print("bwn run: --duration must be positive", file=sys.stderr)
        return 2
    why = requirements.experiment_missing()
    if why is None and args.pcap:
        why = requirements.tcpdump_missing()
    if why:
        print(f"bwn run: cannot run here: {why}", file=sys.stderr)
        return 3

    # imported here: Mininet is Debian's and needs root, which list, report and --help do not
    from mininet.log import setLogLevel


    setLogLevel("warning")
    logging.getLogger("finsy").setLevel(logging.ERROR)  # e.g. "gNMI is not implemented" on BMv2
    out = Path(args.out) if args.out else default_run_out(path)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(path, ExperimentDir(out).scenario_toml)

    def on_term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    failed: list[str] = []
    invalid: list[str] = []
    started = time.monotonic()
    try:
        for i, scheme in enumerate(schemes):
            print(f"== {i + 1}/{len(schemes)}: {scheme} ({path.stem}, {duration_s:.0f} s)", flush=True)
            meta = experiment.run_scheme(cfg, scheme, ExperimentDir(out).run(scheme).path, duration_s,
                                         progress=lambda m: print(m, flush=True), pcap=args.pcap)
            if not meta.ok:
                failed.append(scheme)
            elif meta.validity[0] is False:
                invalid.append(scheme)
    except KeyboardInterrupt:
        print("interrupted: torn down; partial results stay in", out, file=sys.stderr)
        return 130
    runs = load_run_dir(out)
    summary = write_report(out, runs)
    print(f"== done in {time.monotonic() - started:.0f} s: {summary}")
    print((out / "summary.md").read_text())
    if failed:
        print(f"bwn run: some flows did not complete for: {', '.join(failed)}", file=sys.stderr)
    if invalid:
        print(f"bwn run: INVALID (the emulation broke an invariant; docs/fidelity.md): "
              f"{', '.join(invalid)}", file=sys.stderr)
    return 1 if failed or invalid else 0


def cmd_net(args: argparse.Namespace) -> int:

    path = resolve_scenario(args.scenario, "net")
    try:
        cfg = load_config(path)
    except ConfigError as exc:
        print(f"bwn net: {path}: {exc}", file=sys.stderr)
        return 2
    why = requirements.experiment_missing()
    if why:
        print(f"bwn net: cannot run here: {why}", file=sys.stderr)
        return 3

    # imported here: Mininet is Debian's and needs root, which list, report and --help do not
    from mininet.log import setLogLevel


    setLogLevel("output")   # Mininet's command output (pingall, ...), not its build steps
    logging.getLogger("finsy").setLevel(logging.ERROR)
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix=f"bwn-net-{cfg.name}-"))
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(path, RunDir(out).scenario_toml)
    try:
        return run_session(cfg, out, progress=lambda m: print(m, flush=True))
    except Exception as exc:  # torn down already; say what failed
        print(f"bwn net: failed: {type(exc).__name__}: {exc} (switch logs in {RunDir(out).switch_logs})",
              file=sys.stderr)
        return 1


def cmd_report(args: argparse.Namespace) -> int:
    out = Path(args.dir)
    try:
        summary = write_report(out, load_run_dir(out))
    except ReportError as exc:   # a folder that is not a run, or a broken file in it
        print(f"bwn report: {exc}", file=sys.stderr)
        return 1
    print(summary.read_text())
    return 0


RUN_EPILOG = """examples:
  bwn run smoke --duration 10
  bwn run obp-single --schemes obp,newreno --out /tmp/obp
  bwn run ebn-sine --schemes ebn,ebn:variant=relative,newreno --pcap

exit status:
  0    every scheme's run completed and is valid
  1    some run is INVALID (the emulation broke an invariant: docs/fidelity.md)
       or did not complete; the report is written all the same
  2    bad arguments or scenario
  3    this machine cannot run experiments (it says what is missing)
  130  interrupted (Ctrl-C or SIGTERM): torn down, partial results kept"""


def version() -> str:
    """The installed distribution's version (pyproject.toml)."""
    from importlib import metadata
    try:
        return metadata.version("bwn")
    except metadata.PackageNotFoundError:
        return "unknown (not installed: pip install -e .)"


def build_parser() -> argparse.ArgumentParser:
    """`bwn` and its subcommands (docs/cli.md shows their --help)."""
    parser = argparse.ArgumentParser(prog="bwn", description=__doc__,
                                     epilog="Each command's --help ends with its exit status. "
                                            "Documentation: docs/README.md.",
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"bwn {version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("list", help="name the scenarios and schemes", epilog="exit status: 0")
    p.set_defaults(func=cmd_list)
    p = sub.add_parser("run", help="run a scenario once per scheme and write the report",
                       epilog=RUN_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scenario", help="scenario name (bwn list) or path to a TOML config")
    p.add_argument("--schemes", help="comma-separated sender algorithms for the flows under test, "
                                     "each optionally with parameters: ebn,newreno,ebn:variant=relative "
                                     "(several parameters: algo:k=v:k=v) (default: the scenario's)")
    p.add_argument("--duration", type=float, help="seconds per scheme (default: the scenario's)")
    p.add_argument("--out", help="output folder (summary.md, summary.csv, plots, logs) "
                                 "(default: runs/<scenario>-<UTC time>)")
    p.add_argument("--pcap", action="store_true",
                   help="keep a headers-only capture of each bottleneck link (or the scenario's "
                        "[capture] links) in OUT/<scheme>/capture/ and draw seq-<scheme>.png "
                        "from it; needs tcpdump")
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("reproduce", help="run a paper's evaluation grid over seeds and judge its claims "
                                         "(docs/reproduce.md)", epilog=reproduce.EXIT_CODES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    reproduce.add_arguments(p)
    p.set_defaults(func=reproduce.main)
    p = sub.add_parser("reproduce-run", help="make exactly one run of a paper's grid, by its key (what a batch "
                                             "task runs; docs/cluster.md)",
                       epilog="exit status: 0 the run is valid, 1 it is INVALID or incomplete, 2 bad key, "
                              "3 cannot run here, 130 interrupted (Ctrl-C or SIGTERM: torn down)", formatter_class=argparse.RawDescriptionHelpFormatter)
    reproduce.add_run_arguments(p)
    p.set_defaults(func=reproduce.run_one)
    p = sub.add_parser("net", help="bring a scenario's network up and open the Mininet CLI (as root)",
                       description="Bring the scenario's network up as `bwn run` does (BMv2 switches "
                       "programmed by the controller, bwn-link nodes for delayed links, hosts with static "
                       "ARP; the controller keeps applying the links' schedules) without starting its "
                       "flows, and open the Mininet CLI. Every host has bwn-send, bwn-recv, iperf3, ping "
                       "and tcpdump. Extra commands: `bwn status`, `bwn rate LINK MBIT`, "
                       "`bwn rate LINK schedule`, `bwn loss LINK P` (`help bwn` at the prompt). exit, "
                       "Ctrl-D or Ctrl-C at the prompt, SIGTERM or SIGHUP tear everything down; a Ctrl-C "
                       "while a command runs interrupts that command. Commands may come on standard "
                       "input (a here-doc). Exit status: 0 after exit or Ctrl-D, 130 after Ctrl-C, 128 + "
                       "the signal after SIGTERM/SIGHUP, 1 if the network could not come up.")
    p.add_argument("scenario", help="scenario name (bwn list) or path to a TOML config")
    p.add_argument("--out", help="folder for the controller's capacity.csv and telemetry.csv and the "
                                 "switch logs (default: a new folder under the system's temp dir)")
    p.set_defaults(func=cmd_net)
    p = sub.add_parser("doctor", help="what this machine has for bwn, component by component",
                       description=doctor.__doc__, epilog=doctor.EXIT_CODES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    doctor.add_arguments(p)
    p.set_defaults(func=doctor.main)
    p = sub.add_parser("report", help="regenerate the summary and plots of a finished run",
                       epilog="exit status: 0 written, 1 the folder is not a run (or a file in it is broken), "
                              "2 bad arguments")
    p.add_argument("dir", help="a `bwn run` output folder (its <scheme>/ folders are read)")
    p.set_defaults(func=cmd_report)
    return parser


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    # Ctrl-C (SIGINT) stops any command and tears its network down, whatever this
    # process inherited: a shell without job control starts background commands
    # with SIGINT ignored, and Python keeps it so (`bwn run ... &` then `kill -INT`).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
