"""The agents of a run: a bwn-recv per receiving host, a bwn-send per flow.

:func:`start_agents` starts them in the network's hosts with the run folder's
files (bwn/rundir.py: each sender's log and summary in ``flows/``, each
receiver's summary and every agent's output beside them), waits until every one
is ready and holds the senders until :func:`release_senders`; :func:`end_sender`
and :func:`stop_process` end them, by pid, however far a run got.
"""
from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from bwn.protocol.wire import BWN_UDP_PORT
from bwn.rundir import RunDir
from bwn.scenario import seeding
from bwn.scenario.resolved import ExperimentConfig
from hosts.transport.wire import TRANSPORT_HEADER_LEN

VENV_BIN = Path(sys.executable).parent
AGENT_MSS_BYTES = 1000              # the papers' 1000-byte packets (NS-2 defaults)


def frame_bytes(mss_bytes: int) -> int:
    """The Ethernet frame of an agent's segment of ``mss_bytes``: Ethernet 14 + IPv4 20
    + UDP 8 + BWN 24 + the transport header (docs/transport.md)."""
    return mss_bytes + 14 + 20 + 8 + 24 + TRANSPORT_HEADER_LEN


@dataclass
class Agent:
    name: str
    proc: subprocess.Popen
    log: Path


def parse_scheme(spec: str) -> tuple[str, list[str]]:
    """`algo` or `algo:key=value:key=value` (e.g. `ebn:variant=relative`) ->
    (algorithm, ["key=value", ...]) for bwn-send --param.

    `:` separates the parameters, so a spec needs no quoting in a shell; `;`
    is read the same way (the grids' run keys and older run folders use it)."""
    algo, _, params = spec.partition(":")
    items = [p for p in re.split(r"[:;]", params) if p]
    for item in items:
        if "=" not in item:
            raise ValueError(f"scheme {spec!r}: parameter {item!r} is not key=value")
    return algo, items


AGENT_READY_TIMEOUT_S = 60.0        # a loaded 2-core machine starts 20 Python agents in ~10 s


class AgentStartError(RuntimeError):
    """An agent exited, or did not get ready in time, before the flows were released."""


def start_agents(cfg: ExperimentConfig, net: Any, scheme: str, out_dir: Path,
                 duration_s: float, log_interval_ms: Optional[float] = None) -> tuple[list[Agent], list[Agent]]:
    """A `bwn-recv` per destination host (its summary of every flow, written when it
    ends, in `recv-<host>.summary.json`), then a `bwn-send` per flow (log and summary
    in `flows/`). `log_interval_ms`: the senders' `--log-interval-ms` (None: theirs,
    10 ms; a long soak logs less often).

    Returns once every agent is up (each wrote its `--ready-file`); the senders are
    held (`--wait-go`) until `release_senders`, so the CPU that starting many Python
    processes costs is spent before the measurement starts, not inside it
    (hosts/startup.py). Raises AgentStartError, with every agent stopped, when one
    exits or is not ready within AGENT_READY_TIMEOUT_S."""
    run = RunDir(out_dir)
    run.flows_dir.mkdir(parents=True, exist_ok=True)
    ready_dir = run.ready_dir
    shutil.rmtree(ready_dir, ignore_errors=True)
    ready_dir.mkdir()
    receivers: list[Agent] = []
    senders: list[Agent] = []
    ready_files: list[tuple[Agent, Path]] = []
    try:
        for dst in sorted({f.dst for f in cfg.flows}):
            node = net.get(dst)
            log = run.receiver_log(dst)
            ready = ready_dir / f"recv-{dst}"
            with open(log, "wb") as fh:
                cmd = [str(VENV_BIN / "bwn-recv"), "--listen", f"{cfg.host(dst).ip.ip}:{BWN_UDP_PORT}",
                       "--summary-json", str(run.receiver_summary(dst)),
                       "--ready-file", str(ready)]
                if cfg.receive_window_bytes:
                    cmd += ["--window-bytes", str(cfg.receive_window_bytes)]
                proc = node.popen(cmd, stdout=fh, stderr=subprocess.STDOUT)
            receivers.append(Agent(dst, proc, log))
            ready_files.append((receivers[-1], ready))
        for i, f in enumerate(cfg.flows):
            algo, scheme_params = parse_scheme(f.algorithm(scheme))
            ready = ready_dir / f"send-{f.name}"
            cmd = [str(VENV_BIN / "bwn-send"), "--algo", algo, "--dst", f"{cfg.host(f.dst).ip.ip}:{BWN_UDP_PORT}",
                   "--mss", str(AGENT_MSS_BYTES), "--flow-id", str(seeding.flow_id(cfg.seed, i)),
                   "--log", str(run.flow_log(f.name)),
                   "--summary-json", str(run.flow_summary(f.name)),
                   "--ready-file", str(ready), "--wait-go", "--start-delay-s", f"{f.start_s:.3f}"]
            if log_interval_ms is not None:
                cmd += ["--log-interval-ms", f"{log_interval_ms:g}"]
            if f.bytes is not None:
                cmd += ["--bytes", str(f.bytes)]
            else:
                cmd += ["--duration", f"{(f.duration_s or duration_s - f.start_s):.3f}"]
            if f.reserved_rate_mbit:
                cmd += ["--reserved-rate-mbit", str(f.reserved_rate_mbit)]
            if f.src_port:
                cmd += ["--bind", f"0.0.0.0:{f.src_port}"]
            if f.app_rate_mbit:
                cmd += ["--app-rate-mbit", str(f.app_rate_mbit)]
            if not cfg.sack:
                cmd += ["--no-sack"]
            for k, v in f.params.items():
                cmd += ["--param", f"{k}={v}"]
            for item in scheme_params if f.scheme == "under-test" else []:
                cmd += ["--param", item]
            log = run.sender_log(f.name)
            with open(log, "wb") as fh:
                proc = net.get(f.src).popen(cmd, stdin=subprocess.PIPE, stdout=fh, stderr=subprocess.STDOUT)
            senders.append(Agent(f.name, proc, log))
            ready_files.append((senders[-1], ready))
        _wait_ready(ready_files, AGENT_READY_TIMEOUT_S)
    except BaseException:
        for agent in senders + receivers:
            stop_process(agent.proc)
        raise
    finally:
        shutil.rmtree(ready_dir, ignore_errors=True)
    return senders, receivers


def _wait_ready(ready_files: Sequence[tuple[Agent, Path]], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    waiting = list(ready_files)
    while True:
        waiting = [(agent, path) for agent, path in waiting if not path.exists()]
        if not waiting:
            return
        for agent, path in waiting:
            code = agent.proc.poll()
            if code is not None and not path.exists():   # (it may have got ready, then ended)
                raise AgentStartError(f"agent {agent.name} exited with status {code} before it was "
                                      f"ready; its output is in {agent.log}")
        if time.monotonic() > deadline:
            names = ", ".join(agent.name for agent, _ in waiting)
            raise AgentStartError(f"agents not ready after {timeout_s:.0f} s: {names} "
                                  f"(their output: {waiting[0][0].log.parent}/*.log)")
        time.sleep(0.05)


def release_senders(senders: Sequence[Agent]) -> None:
    """Let the held senders go (each then waits its own --start-delay-s)."""
    for agent in senders:
        if agent.proc.stdin is None:
            continue
        try:
            agent.proc.stdin.write(b"go\n")
            agent.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass  # it already exited: its missing summary says so


def end_sender(proc: subprocess.Popen, grace_s: float = 3.0) -> None:
    """SIGINT (end the stream), then SIGINT again (abort), then SIGKILL."""
    for _ in range(2):
        if proc.poll() is not None:
            return
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            pass
    stop_process(proc, signal.SIGKILL)


def stop_process(proc: subprocess.Popen, sig: int = signal.SIGINT, timeout_s: float = 5.0) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout_s)
