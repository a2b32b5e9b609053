#!/usr/bin/env python3
"""Soak: a BMv2 + bwn-link + agents run for minutes, watching every process.

Brings a scenario's network up with the project's machinery
(``bwn.emulation.network.ScenarioNetwork``: BMv2 switches, a bwn-link per delayed link,
the controller following the links' schedules), starts the scenario's flows
(``start_agents``) and, while they run, records every ``--interval-s`` the RSS
and CPU time of each process of the run: every simple_switch_grpc, bwn-link,
bwn-send and bwn-recv, and this process (the runner: controller, fidelity
sampler, Mininet). The run's fidelity checks are those of every ``bwn run``
(``bwn.emulation.monitor.Monitor``). At the end it accounts for every byte the senders
handed over (lost bytes must be 0: the transport is reliable) and prints a table.

Outputs in ``--out``: ``soak.csv`` (time series, one row per process and
sample, written as it goes), ``soak.json`` (summary, series, flows, fidelity),
and the run's usual files (telemetry.csv, capacity.csv, flows/, bwn-link logs
and statistics, receivers' summaries). docs/soak.md explains the figures.

Exit status: 0 soak passed (every process lived to the end, every flow
accounted for, 0 bytes lost; the fidelity verdict is reported, not judged
here), 1 soak failed, 2 bad arguments, 3 cannot run here (root, BMv2, Mininet,
``make build``), 130 interrupted (Ctrl-C), 128 + N after signal N (SIGTERM,
SIGHUP). Whatever the outcome, nothing of the run is left: processes, host
namespaces and interfaces are removed.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import shlex
import shutil
import signal
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bwn import requirements  # noqa: E402
from bwn.analysis import soak  # noqa: E402
from bwn.cliargs import OneLineErrorParser, number  # noqa: E402
from bwn.emulation.runlock import experiment_lock  # noqa: E402
from bwn.linkem.cli import build_parser as linkem_parser  # noqa: E402
from bwn.linkem.cli import config_from_args  # noqa: E402
from bwn.rundir import RunDir, dumps  # noqa: E402
from bwn.scenario import seeding  # noqa: E402
from bwn.scenario.config import ConfigError, load_config  # noqa: E402

# The emulation (Mininet, and P4Runtime through the controller) is imported where a
# soak runs, once the arguments are checked and the machine is known to have it:
# the argument checks are tested where neither is installed.
if TYPE_CHECKING:  # annotations only
    from bwn.emulation.monitor import Monitor
    from bwn.emulation.probes import Recorder

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SCENARIO = REPO / "topologies" / "scenarios" / "soak.toml"
# The soak scenario's wan emulator adds what bwn-link can do besides delay
# (docs/soak.md): its own random loss, jitter, duplicates, reordering.
DEFAULT_LINKEM_ARGS = ["wan:--jitter-ms 1 --loss 0.001 --duplicate 0.001 --reorder 0.001"]
# Options of bwn-link the runner itself sets (ScenarioNetwork.start, LinkemNode).
DEFAULT_WARMUP_S = 60.0
RESERVED_LINKEM_OPTIONS = ("--delay-ms", "--seed", "--stats-json", "--duration-s")

_positive = number(float, 0, low_open=True)
_nonneg = number(float, 0)


class SoakFailure(Exception):
    """Something of the run ended or broke before the soak did."""


def build_parser() -> argparse.ArgumentParser:
    p = OneLineErrorParser(
        prog="benchmarks/soak.py",
        description=(__doc__ or "").split("\n\n")[0].strip() + " Measures, per process, memory "
        "growth per hour (least-squares fit with its standard error) and CPU seconds; bytes "
        "lost; the run's fidelity verdict. Needs root, BMv2, Mininet and `make build`; holds "
        "the machine's experiment lock (waits for other bwn experiments).",
        epilog=(
            "Examples:  .venv/bin/python benchmarks/soak.py --minutes 60 --out runs/soak-60  |  "
            ".venv/bin/python benchmarks/soak.py --minutes 1 --interval-s 2 --warmup-s 10.  "
            "Exit status: 0 passed, 1 failed (a process ended early, a flow unaccounted for, "
            "bytes lost), 2 usage, 3 cannot run here, 130 Ctrl-C, 128+N signal N. "
            "Outputs and their meaning: docs/soak.md."))
    p.add_argument("--minutes", type=_positive, required=True, metavar="M",
                   help="how long the flows run, minutes (e.g. 60; fractions allowed)")
    p.add_argument("--interval-s", type=_positive, default=10.0, metavar="S",
                   help="seconds between two samples of every process's RSS and CPU time "
                        "(default 10)")
    p.add_argument("--warmup-s", type=_nonneg, default=None, metavar="S",
                   help="samples before this time (since the flows started) are recorded but "
                        "left out of the growth fit and of 'RSS start': start-up allocations "
                        "(imports, tables, windows opening) are not growth (default 60, or a "
                        "fifth of the run if that is shorter)")
    p.add_argument("--drain-s", type=_nonneg, default=30.0, metavar="S",
                   help="after the flows' time, wait this long for the senders to have every "
                        "byte acknowledged before ending them (default 30)")
    p.add_argument("--scenario", default=str(DEFAULT_SCENARIO), metavar="TOML",
                   help="scenario file (default topologies/scenarios/soak.toml: 8 flows of 8 "
                        "algorithms, 2 switches, 2 bwn-link emulators); its duration is replaced "
                        "by --minutes; flows marked under-test run its first scheme")
    p.add_argument("--linkem-args", action="append", metavar="LINK:OPTIONS",
                   help="more bwn-link options for one delayed link's emulator, repeatable "
                        f"(default {DEFAULT_LINKEM_ARGS[0]!r}; 'none' for no extra options). "
                        f"Not allowed: {', '.join(RESERVED_LINKEM_OPTIONS)} (the scenario sets them)")
    p.add_argument("--flow-log-interval-ms", type=_positive, default=1000.0, metavar="MS",
                   help="at most one row per this many ms in each sender's flow log (default "
                        "1000; a `bwn run` logs every 10 ms, ~1 GB an hour for 8 flows)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="output folder (default runs/soak-<UTC date and time>)")
    return p


def parse_linkem_args(specs: list[str], cfg: Any) -> dict[str, list[str]]:
    """`LINK:OPTIONS` items -> {link: [options]}, each checked against the scenario
    (a delayed link, so it has an emulator) and bwn-link's own parser."""
    out: dict[str, list[str]] = {}
    delayed = {link.name for link in cfg.links if link.needs_emulator()}
    for spec in specs:
        if spec.strip().lower() == "none":
            continue
        link, sep, options = spec.partition(":")
        if not sep or not link:
            raise ValueError(f"--linkem-args {spec!r}: expected LINK:OPTIONS, e.g. 'wan:--loss 0.001'")
        if link not in delayed:
            raise ValueError(f"--linkem-args: link {link!r} has no bwn-link in this scenario "
                             f"(delayed links: {', '.join(sorted(delayed)) or 'none'})")
        args = shlex.split(options)
        taken = [a for a in args if a.split("=")[0] in RESERVED_LINKEM_OPTIONS]
        if taken:
            raise ValueError(f"--linkem-args {link}: {', '.join(taken)} is set by the scenario")
        parser = linkem_parser()
        parser.error = lambda message: (_ for _ in ()).throw(ValueError(message))  # type: ignore[method-assign]
        try:
            config_from_args(parser.parse_args(["a", "b", *args]))
        except (ValueError, SystemExit) as exc:
            raise ValueError(f"--linkem-args {link}: bwn-link rejects {options!r}: {exc}") from None
        out[link] = out.get(link, []) + args
    return out


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def _watch_network(network: Any) -> list[soak.Watched]:
    out = [soak.Watched("runner", "runner", os.getpid())]
    for sw in network.net.switches:
        if sw.proc is not None:
            out.append(soak.Watched(sw.name, "switch", sw.proc.pid, sw.proc.poll))
    for em in network.built.linkem_nodes:
        proc = em.linkem_proc
        if proc is not None:
            out.append(soak.Watched(em.name, "bwn-link", proc.pid, proc.poll))
    group = getattr(network.built, "linkem_group", None)
    if group is not None and group.proc is not None:      # [experiment] linkem_shared
        out.append(soak.Watched("bwn-links", "bwn-link", group.proc.pid, group.proc.poll))
    return out


def _end_senders(procs: list[Any], grace_s: float = 3.0) -> None:
    """`bwn.emulation.runner.end_sender` for all senders at once: SIGINT (end the stream),
    SIGINT again (abort; both write the summary), then SIGKILL, `grace_s` apart."""
    for sig in (signal.SIGINT, signal.SIGINT, signal.SIGKILL):
        running = [p for p in procs if p.poll() is None]
        for p in running:
            p.send_signal(sig)
        deadline = time.monotonic() + grace_s
        while any(p.poll() is None for p in running) and time.monotonic() < deadline:
            time.sleep(0.05)


def run_soak(cfg: Any, out_dir: Path, args: argparse.Namespace, linkem_args: dict[str, list[str]],
             progress: Callable[[str], None]) -> tuple[int, dict[str, Any]]:
    """One soak, holding the experiment lock. Returns (exit status, soak.json)."""
    from bwn.emulation.session import Terminated, _terminate   # the emulation (see the top)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _terminate)
    try:
        with experiment_lock(progress):
            return _run_locked(cfg, out_dir, args, linkem_args, progress)
    except KeyboardInterrupt:
        return 130, _read_json(out_dir / "soak.json") or {}
    except Terminated as exc:
        return 128 + exc.signum, _read_json(out_dir / "soak.json") or {}


def _run_locked(cfg: Any, out_dir: Path, args: argparse.Namespace, linkem_args: dict[str, list[str]],
                progress: Callable[[str], None]) -> tuple[int, dict[str, Any]]:
    from bwn.emulation import agents, network as scenario_network   # the emulation (see the top)
    from bwn.emulation.monitor import Monitor
    from bwn.emulation.probes import Recorder
    from bwn.emulation.session import Terminated, _deferred_signals, _ignore_signals

    duration_s = cfg.duration_s
    scheme = cfg.schemes[0] if cfg.schemes else "newreno"   # only flows marked "under-test" use it
    network: Optional[scenario_network.ScenarioNetwork] = None
    monitor: Optional[Monitor] = None
    recorder = Recorder(out_dir / "soak.csv")
    senders: list[agents.Agent] = []
    receivers: list[agents.Agent] = []
    status, problems = "failed", []
    exited: dict[str, str] = {}
    started = time.monotonic()
    started_utc = datetime.now(timezone.utc).isoformat(timespec="seconds")
    wall_s = 0.0
    try:
        with _deferred_signals():    # a node half made by Mininet would escape the teardown
            network = scenario_network.ScenarioNetwork(cfg, out_dir, progress, label="[soak] ",
                                                 linkem_args=linkem_args)
        network.start()
        controller, controller_thread = network.controller, network.controller_thread
        assert controller is not None and controller_thread is not None
        monitor = Monitor.for_network(out_dir, network.built, cfg.telemetry.interval_s)
        monitor.time_origin_s = controller.t0
        senders, receivers = agents.start_agents(cfg, network.net, scheme, out_dir, duration_s,
                                                     log_interval_ms=args.flow_log_interval_ms)
        monitor.start()
        controller.schedule_origin_s = controller.now_s()
        agents.release_senders(senders)
        recorder.watch(_watch_network(network))
        recorder.watch(soak.Watched(f"send-{a.name}", "bwn-send", a.proc.pid, a.proc.poll) for a in senders)
        recorder.watch(soak.Watched(f"recv-{a.name}", "bwn-recv", a.proc.pid, a.proc.poll) for a in receivers)
        progress(f"[soak] {len(recorder.watched)} processes watched; flows run for {duration_s / 60:g} min, "
                 f"a sample every {args.interval_s:g} s into {out_dir / 'soak.csv'}")
        started = time.monotonic()
        recorder.sample(0.0)
        next_sample_s = args.interval_s
        next_report_s = 60.0
        while (elapsed_s := time.monotonic() - started) < duration_s:
            time.sleep(min(0.5, max(duration_s - elapsed_s, 0.0)))
            elapsed_s = time.monotonic() - started
            if controller_thread.error is not None:
                raise SoakFailure(f"the controller failed at t={elapsed_s:.0f} s: {controller_thread.error}")
            ended = recorder.ended()
            if ended:
                for p, code in ended:
                    exited[p.name] = f"exit status {code} at t={elapsed_s:.0f} s"
                raise SoakFailure("ended before the soak did: " + ", ".join(
                    f"{p.name} (pid {p.pid}, {exited[p.name]})" for p, _ in ended))
            if elapsed_s >= next_sample_s:
                recorder.sample(elapsed_s)
                next_sample_s += args.interval_s
            if elapsed_s >= next_report_s:
                progress(f"[soak] {elapsed_s / 60:.0f}/{duration_s / 60:g} min")
                next_report_s += 60.0
        wall_s = time.monotonic() - started
        recorder.sample(wall_s)
        # The senders end their streams at their --duration and exit once every
        # byte is acknowledged; one still repairing losses after --drain-s is ended
        # (SIGINT: the stream ends at the bytes sent; they are then acknowledged).
        deadline = time.monotonic() + args.drain_s
        while any(s.proc.poll() is None for s in senders) and time.monotonic() < deadline:
            time.sleep(0.25)
        _end_senders([agent.proc for agent in senders])
        status = "complete"
    except SoakFailure as exc:
        problems.append(str(exc))
        progress(f"[soak] FAILED: {exc}")
    except (KeyboardInterrupt, Terminated) as exc:
        status = "interrupted"
        problems.append(f"by {exc}" if isinstance(exc, Terminated) else "by Ctrl-C (SIGINT)")
        progress(f"[soak] interrupted {problems[-1]}: tearing down")
        raise
    except Exception as exc:
        problems.append(f"{type(exc).__name__}: {exc}")
        progress(f"[soak] FAILED: {type(exc).__name__}: {exc}")
    finally:
        _ignore_signals()            # from here the teardown runs to its end
        wall_s = wall_s or time.monotonic() - started
        # Senders first (SIGINT, a second one aborts: either way bwn-send writes its
        # summary), then the receivers (SIGINT: they write theirs).
        _end_senders([agent.proc for agent in senders])
        for agent in receivers:
            agents.stop_process(agent.proc)
        sampler_bytes = None
        if monitor is not None:
            try:
                monitor.stop()
                sampler_bytes = soak.deep_size_bytes(monitor.cpu) + soak.deep_size_bytes(dict(monitor.tx))
            except Exception as exc:  # the teardown goes on; result() says what is missing
                progress(f"[soak] fidelity sampler: {exc!r}")
        try:
            if network is not None:
                progress("[soak] tearing down: link emulators, controller, switches, hosts")
                network.stop()
        finally:
            recorder.close()
            result = _finish(cfg, out_dir, args, linkem_args, recorder, monitor, exited, wall_s,
                             status, problems, sampler_bytes, started_utc, progress)
    return (0 if result["passed"] else 1), result


def _finish(cfg: Any, out_dir: Path, args: argparse.Namespace, linkem_args: dict[str, list[str]],
            recorder: Recorder, monitor: Optional[Monitor], exited: dict[str, str],
            wall_s: float, status: str, problems: list[str], sampler_bytes: Optional[int],
            started_utc: str, progress: Callable[[str], None]) -> dict[str, Any]:
    """Judge, write soak.json, print the table."""
    fid: dict[str, Any]
    if monitor is None:
        fid = {"valid": False, "summary": "INVALID: not measured (the network did not come up)"}
    else:
        try:
            fid = monitor.result().to_json()
        except Exception as exc:  # never lose the soak's figures over its fidelity check
            fid = {"valid": False, "summary": f"INVALID: fidelity check failed: {exc!r}"}
    processes = [soak.summarize_process(p, recorder.series[name], args.warmup_s, exited.get(name))
                 for name, p in recorder.watched.items()]
    flows = soak.account_flows(
        [(f.name, seeding.flow_id(cfg.seed, i), f.dst) for i, f in enumerate(cfg.flows)],
        {f.name: _read_json(RunDir(out_dir).flow_summary(f.name)) for f in cfg.flows},
        {h: _read_json(RunDir(out_dir).receiver_summary(h)) or [] for h in {f.dst for f in cfg.flows}})
    if status == "complete":
        problems = problems + [f"flow {f.flow}: {p}" for f in flows for p in f.problems]
    report = soak.Report(processes, flows, wall_s, args.warmup_s, str(fid.get("summary")),
                         status, problems)
    passed = status == "complete" and not problems and report.lost_bytes == 0
    sampled_s = (fid.get("measurements") or {}).get("wall_s")
    result = {
        "passed": passed, "status": status, "problems": problems,
        "command": " ".join(shlex.quote(a) for a in sys.argv),
        "scenario": cfg.name, "minutes": args.minutes, "interval_s": args.interval_s,
        "warmup_s": args.warmup_s, "drain_s": args.drain_s, "linkem_args": linkem_args,
        "started_utc": started_utc,
        "ended_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "wall_s": round(wall_s, 1),
        "lost_bytes": report.lost_bytes,
        "handed_over_bytes": sum(f.handed_over_bytes or 0 for f in flows),
        "processes": [dataclasses.asdict(p) for p in processes],
        "flows": [f.to_json() for f in flows],
        "fidelity": fid,
        # The runner keeps the fidelity sampler's samples in memory (part of its growth).
        "fidelity_sampler_bytes": sampler_bytes,
        "fidelity_sampled_s": sampled_s,
        "series": {name: {"kind": recorder.watched[name].kind, "pid": recorder.watched[name].pid,
                          "t_s": [s.t_s for s in samples], "rss_bytes": [s.rss_bytes for s in samples],
                          "anon_bytes": [s.anon_bytes for s in samples], "cpu_s": [s.cpu_s for s in samples]}
                   for name, samples in recorder.series.items()},
    }
    (out_dir / "soak.json").write_text(dumps(result) + "\n")   # series on one line each
    if passed:   # as `bwn run`: the switch logs are kept only when something went wrong
        shutil.rmtree(RunDir(out_dir).switch_logs, ignore_errors=True)
    progress("")
    progress(report.table())
    if sampler_bytes is not None and sampled_s:
        progress(f"runner: the fidelity sampler held {sampler_bytes / soak.MIB:.1f} MiB of samples after "
                 f"{sampled_s:.0f} s, {sampler_bytes / soak.MIB / sampled_s * 3600:.1f} MiB/h of the "
                 f"runner's growth by design (docs/soak.md)")
    progress(f"soak.json, soak.csv and the run's files: {out_dir}")
    return result


def main(argv: Optional[list[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        cfg = load_config(args.scenario)
    except ConfigError as exc:
        print(f"soak: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        parser.error(f"--scenario: cannot read {args.scenario!r}: {exc}")
    duration_s = args.minutes * 60.0
    late = [f.name for f in cfg.flows if f.start_s >= duration_s]
    if late:
        parser.error(f"--minutes {args.minutes:g}: flows {', '.join(late)} would start after the soak ends")
    if not cfg.flows:
        parser.error(f"--scenario {args.scenario}: no [[flows]] to run")
    if args.warmup_s is None:
        args.warmup_s = min(DEFAULT_WARMUP_S, duration_s / 5)
    if args.warmup_s >= duration_s:
        parser.error(f"--warmup-s {args.warmup_s:g} leaves no sample to fit in {duration_s:g} s")
    specs = args.linkem_args
    if specs is None:   # the defaults name the soak scenario's links
        specs = DEFAULT_LINKEM_ARGS if Path(args.scenario).resolve() == DEFAULT_SCENARIO.resolve() else []
    try:
        linkem_args = parse_linkem_args(specs, cfg)
    except ValueError as exc:
        parser.error(str(exc))
    cfg = dataclasses.replace(cfg, duration_s=duration_s)
    why = requirements.experiment_missing()
    if why:
        print(f"soak: cannot run here: {why}", file=sys.stderr)
        return 3
    from mininet.log import setLogLevel   # Mininet (see the top)

    setLogLevel("warning")
    logging.getLogger("finsy").setLevel(logging.ERROR)
    out_dir = Path(args.out or f"runs/soak-{datetime.now(timezone.utc):%Y%m%d-%H%M%S}")
    out_dir.mkdir(parents=True, exist_ok=True)
    RunDir(out_dir).scenario_toml.write_bytes(Path(args.scenario).read_bytes())

    def progress(message: str) -> None:
        try:
            print(message, flush=True)
        except OSError:   # the terminal is gone (SIGHUP): the soak and its teardown go on
            pass

    code, result = run_soak(cfg, out_dir, args, linkem_args, progress)
    if code == 1:
        print(f"soak: FAILED: {'; '.join(result.get('problems') or ['see the table'])}", file=sys.stderr)
    elif code >= 128:
        print(f"soak: interrupted; torn down; what was measured is in {out_dir}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
