"""The experiment runner: one scenario, several schemes, same conditions.

For each scheme, :func:`run_scheme` brings up the scenario's network
(:class:`bwn.emulation.network.ScenarioNetwork`: BMv2 or eBPF switches, `bwn-link`
nodes, the P4Runtime controller with the links' rate schedules), starts
`bwn-recv` and `bwn-send` for every flow (:mod:`bwn.emulation.agents`), samples
the run's fidelity while the flows run (:mod:`bwn.emulation.monitor`), waits,
tears everything down and writes the run's folder (bwn/rundir.py): the flows'
logs and summaries, the controller's telemetry and capacity, and run.json
(:class:`bwn.rundir.RunMeta`) with the fidelity verdict. ``bwn run`` then
writes the report (summary table and plots).

Teardown is unconditional (success, failure, Ctrl-C, SIGTERM): agents are ended
by pid, then the network (see ScenarioNetwork); on failure the switch logs stay
in the run's folder.
"""
from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any, Callable, Optional

from bwn.emulation import capture
from bwn.emulation.agents import (
    AGENT_MSS_BYTES,
    Agent,
    end_sender,
    frame_bytes,
    parse_scheme,
    release_senders,
    start_agents,
    stop_process,
)
from bwn.emulation.monitor import Monitor
from bwn.emulation.network import ScenarioNetwork, start_link_schedules
from bwn.emulation.probes import process_cpu_s
from bwn.emulation.runlock import experiment_lock
from bwn.linkem import netem_available
from bwn.rundir import RunDir, RunMeta
from bwn.scenario import flowpaths, seeding
from bwn.scenario.config import ConfigError
from bwn.scenario.resolved import ExperimentConfig


def _fidelity_json(monitor: Monitor, progress: Callable[[str], None], scheme: str) -> dict[str, Any]:
    """The run's fidelity verdict for run.json; a failure to judge is said, not hidden."""
    try:
        result = monitor.result()
    except Exception as exc:  # never lose a run's files over its fidelity check
        progress(f"[{scheme}] fidelity check failed: {exc!r}")
        return {"valid": False, "summary": f"INVALID: fidelity check failed: {exc!r}", "broken": ["check"]}
    progress(f"[{scheme}] fidelity: {result.summary()}")
    return result.to_json()


def run_scheme(cfg: ExperimentConfig, scheme: str, out_dir: Path, duration_s: float,
               progress: Callable[[str], None] = print, pcap: bool = False,
               target: str = "bmv2") -> RunMeta:
    """One run of the scenario with `scheme` for the flows under test; `pcap`:
    capture the bottleneck links (bwn/emulation/capture.py); `target`: the switches
    (BMv2 or eBPF: :data:`bwn.emulation.network.TARGETS`)."""
    conflicts = cfg.shaper_conflicts([scheme])
    if conflicts:
        raise ConfigError(conflicts, str(cfg.source or cfg.name))
    routers = sorted({parse_scheme(f.algorithm(scheme))[0] for f in cfg.flows} & {"xcp", "rcp"})
    if target == "ebpf" and routers:   # p4src/psa has no XCP or RCP router
        raise ValueError(f"{scheme}: the eBPF switch has no {' or '.join(r.upper() for r in routers)} "
                         f"router (BMv2 only: --target bmv2)")
    with experiment_lock(progress):
        return _run_scheme_locked(cfg, scheme, out_dir, duration_s, progress, pcap, target)


def _run_scheme_locked(cfg: ExperimentConfig, scheme: str, out_dir: Path, duration_s: float,
                       progress: Callable[[str], None], pcap: bool = False,
                       target: str = "bmv2") -> RunMeta:
    out_dir.mkdir(parents=True, exist_ok=True)
    network = ScenarioNetwork(cfg, out_dir, progress, label=f"[{scheme}] ", target=target)
    log_dir = network.log_dir
    captures: Optional[capture.Captures] = None
    monitor: Optional[Monitor] = None
    senders: list[Agent] = []
    receivers: list[Agent] = []
    ok = False
    interrupted = False
    run = RunDir(out_dir)
    meta = RunMeta(scheme=scheme, duration_s=duration_s, target=target,
                   delay_emulator=("none" if not network.built.linkem_nodes
                                   else "bwn-links" if cfg.linkem_shared else "bwn-link"),
                   linkem_rt_priority=cfg.linkem_rt_priority if network.built.linkem_nodes else None,
                   queue_lookahead=cfg.queue_lookahead,
                   netem_available=netem_available(),
                   seed=cfg.seed,
                   flow_ids={f.name: seeding.flow_id(cfg.seed, i) for i, f in enumerate(cfg.flows)},
                   **flowpaths.run_meta(cfg, AGENT_MSS_BYTES, frame_bytes(AGENT_MSS_BYTES)))
    try:
        network.start()
        net, controller, controller_thread = network.net, network.controller, network.controller_thread
        assert controller is not None and controller_thread is not None
        progress(f"[{scheme}] switches configured; running {len(cfg.flows)} flows for {duration_s:.0f} s")
        if pcap:
            captures = capture.start_for_run(cfg, network.built.ends, out_dir, duration_s)
            progress(f"[{scheme}] capturing {', '.join(p.link for p in captures.points)}")
        # Capture timestamps are wall-clock; the controller's clock is the experiment's.
        meta.clock_offset_s = time.time() - controller.now_s()
        # Every agent is started and ready before the measurement starts; the
        # senders are held until then (start_agents).
        senders, receivers = start_agents(cfg, net, scheme, out_dir, duration_s)
        # Fidelity sampling (bwn/emulation/monitor.py) while the flows run; telemetry's time base.
        monitor = Monitor.for_network(out_dir, network.built, cfg.telemetry.interval_s)
        monitor.time_origin_s = controller.t0
        monitor.start()
        launched_s = controller.now_s()
        controller.schedule_origin_s = launched_s   # the links' schedules start with the flows
        meta.link_schedules_started = start_link_schedules(network.built.linkem_nodes,
                                                              network.built.linkem_group)  # bwn-link's
        release_senders(senders)
        # Flow logs count time from each flow's start; the report aligns them with
        # the controller's clock (telemetry.csv, capacity.csv) through these.
        meta.flow_starts_s = {f.name: round(launched_s + f.start_s, 3) for f in cfg.flows}
        started = time.monotonic()
        deadline = started + duration_s + 3.0
        next_report_s = 10.0
        while any(s.proc.poll() is None for s in senders) and time.monotonic() < deadline:
            time.sleep(0.25)
            elapsed_s = time.monotonic() - started
            if elapsed_s >= next_report_s and elapsed_s < duration_s:
                progress(f"[{scheme}] {elapsed_s:.0f}/{duration_s:.0f} s")
                next_report_s += 10.0
            if controller_thread.error is not None:
                raise RuntimeError(f"controller failed: {controller_thread.error}")
        # Flows still running at the end of the experiment (e.g. still repairing
        # losses) are ended: first a graceful end of stream, then an abort; both
        # make bwn-send write its summary.
        for agent in senders:
            end_sender(agent.proc)
        meta.sender_exit_codes = {s.name: s.proc.poll() for s in senders}
        # A flow ended at the experiment's end is a result, not a failure; a
        # sender that could not run at all (no summary) is.
        missing = [f.name for f in cfg.flows if not run.flow_summary(f.name).exists()]
        meta.flows_without_summary = missing
        ok = not missing
        return meta
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        # Receivers' CPU over their life (= the run); senders write theirs in their summaries.
        for agent in receivers:
            cpu_s = process_cpu_s(agent.proc.pid) if agent.proc.poll() is None else None
            if cpu_s is not None:
                meta.receiver_cpu_s[agent.name] = round(cpu_s, 3)
        for agent in senders + receivers:
            stop_process(agent.proc)
        if monitor is not None:
            try:
                monitor.stop()
            except Exception as exc:  # teardown goes on; result() then says what is missing
                progress(f"[{scheme}] fidelity sampler: {exc!r}")
        try:
            network.stop_linkems()
            if captures is not None:
                finished = capture.finish_for_run(captures, out_dir)
                meta.captures = finished["captures"]
                meta.capture_snap_bytes = finished["capture_snap_bytes"]
                meta.capture_stats = finished["capture_stats"]
        finally:
            network.stop()
        if monitor is not None:
            meta.fidelity = _fidelity_json(monitor, progress, scheme)
        meta.ok = ok
        run.write_meta(meta)
        if ok:
            shutil.rmtree(log_dir, ignore_errors=True)
        elif interrupted:
            progress(f"[{scheme}] interrupted: switch logs kept in {log_dir}")
        else:
            progress(f"[{scheme}] something failed: switch logs kept in {log_dir}")
