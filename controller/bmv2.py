"""Start, reach and stop BMv2 `simple_switch_grpc` processes.

Used by the PTF runner, the controller's switch tests and the Mininet
topologies. Every process is started by us and ended by its pid (never by name).
Queue rate and depth are set through simple_switch's Thrift runtime
(`simple_switch_CLI`), the only interface BMv2 offers for them; note BMv2's
queue rate is in **packets per second**.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SWITCH_BINARY = "simple_switch_grpc"
CLI_BINARY = "simple_switch_CLI"
# BMv2 built for speed (logging macros and the event logger compiled out, -O3;
# BMv2's docs/performance.md), installed beside the default build by
# scripts/p4-toolchain.sh. Experiments use it when it is there.
FAST_SWITCH_BINARY = os.environ.get("BWN_BMV2_FAST", "/opt/bmv2-perf/bin/simple_switch_grpc")


def fast_switch_binary() -> str | None:
    """The BMv2 built for speed, if installed (None otherwise)."""
    return FAST_SWITCH_BINARY if os.access(FAST_SWITCH_BINARY, os.X_OK) else None


def experiment_switch_binary() -> str:
    """What experiments run: the fast BMv2 when installed, unless BWN_BMV2=default|PATH says otherwise."""
    choice = os.environ.get("BWN_BMV2", "fast")
    if choice == "default":
        return SWITCH_BINARY
    if choice == "fast":
        return fast_switch_binary() or SWITCH_BINARY
    return choice




def wait_for_tcp(host: str, port: int, timeout_s: float, netns: str | None = None,
                 proc: subprocess.Popen | None = None) -> None:
    """Wait until something accepts TCP connections on host:port (in `netns`)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process {proc.pid} exited with {proc.returncode} before listening on {port}")
        if netns is None:
            try:
                with socket.create_connection((host, port), timeout=0.5):
                    return
            except OSError:
                pass
        else:
            rc = subprocess.run(["ip", "netns", "exec", netns, "bash", "-c",
                                 f"exec 3<>/dev/tcp/{host}/{port}"], capture_output=True).returncode
            if rc == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listens on {host}:{port} after {timeout_s:.0f} s")


def stop_process_group(proc: subprocess.Popen | None, timeout_s: float = 5.0) -> None:
    """SIGTERM the process group that `proc` leads (started with start_new_session),
    SIGKILL if it does not end within `timeout_s`."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout_s)


def switch_command(ports: dict[int, str], grpc_port: int, thrift_port: int, device_id: int = 0,
                   log_level: str = "warn", priority_queues: int = 1,
                   binary: str = SWITCH_BINARY) -> list[str]:
    """The simple_switch_grpc command line: no program (the controller pushes it),
    gRPC and Thrift on loopback, one FIFO per port (`priority_queues` > 1: that many
    strict-priority queues; the program uses none: reservations share the FIFO, RFC 2597)."""
    cmd = [binary, "--device-id", str(device_id), "--thrift-port", str(thrift_port),
           "--log-console", "--log-level", log_level, "--no-p4"]
    for port, iface in sorted(ports.items()):
        cmd += ["-i", f"{port}@{iface}"]
    cmd += ["--", "--grpc-server-addr", f"127.0.0.1:{grpc_port}", "--cpu-port", "510"]
    if priority_queues > 1:
        cmd += ["--priority-queues", str(priority_queues)]
    return cmd


@dataclass
class Bmv2Switch:
    """One simple_switch_grpc process.

    `ports` maps BMv2 port numbers to interface names. gRPC and Thrift listen on
    loopback only (inside `netns` when given).
    """

    name: str
    ports: dict[int, str]
    grpc_port: int
    thrift_port: int
    device_id: int = 0
    netns: str | None = None
    log_dir: Path = Path("build/logs")
    log_level: str = "warn"
    priority_queues: int = 1
    binary: str = SWITCH_BINARY
    wrapper: list[str] = field(default_factory=list)  # e.g. valgrind's command line
    proc: subprocess.Popen | None = field(default=None, init=False)

    @property
    def grpc_addr(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"{self.name}.log"

    def command(self) -> list[str]:
        cmd = self.wrapper + switch_command(self.ports, self.grpc_port, self.thrift_port, self.device_id,
                                            self.log_level, self.priority_queues, self.binary)
        if self.netns:
            cmd = ["ip", "netns", "exec", self.netns] + cmd
        return cmd

    def start(self, timeout_s: float = 20.0) -> "Bmv2Switch":
        if shutil.which(self.binary) is None:
            raise FileNotFoundError(f"BMv2 is not installed ({self.binary} not on PATH): see README")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        out = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        out.close()
        try:
            wait_for_tcp("127.0.0.1", self.grpc_port, timeout_s, self.netns, self.proc)
            wait_for_tcp("127.0.0.1", self.thrift_port, timeout_s, self.netns, self.proc)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        """End this switch (its own pid and process group only)."""
        proc, self.proc = self.proc, None
        stop_process_group(proc, timeout_s)

    def cli(self, commands: str, timeout_s: float = 20.0) -> str:
        """Run simple_switch_CLI commands (Thrift) and return its output."""
        # Run the CLI script with this interpreter: it sees BMv2's Thrift modules
        # (system site-packages), which a `python3` first on PATH may not.
        cmd = [sys.executable, shutil.which(CLI_BINARY) or CLI_BINARY, "--thrift-port", str(self.thrift_port)]
        if self.netns:
            cmd = ["ip", "netns", "exec", self.netns] + cmd
        res = subprocess.run(cmd, input=commands, capture_output=True, text=True, timeout=timeout_s)
        if res.returncode != 0 or "Error" in res.stdout or "Invalid" in res.stdout:
            raise RuntimeError(f"simple_switch_CLI on {self.name} failed for {commands!r}: "
                               f"{res.stdout.strip()} {res.stderr.strip()}")
        return res.stdout

    def set_queue(self, port: int, rate_pps: float, depth_packets: int, priority: int | None = None) -> None:
        """Egress queue of `port` (one priority queue, or all of them): service rate
        (packets per second) and depth (packets), through simple_switch_CLI."""
        if rate_pps <= 0 or depth_packets <= 0:
            raise ValueError(f"queue rate and depth must be positive (got {rate_pps} pps, {depth_packets} packets)")
        prio = "" if priority is None else f" {priority}"
        self.cli(f"set_queue_rate {max(1, round(rate_pps))} {port}{prio}\n"
                 f"set_queue_depth {depth_packets} {port}{prio}\n")

    def __enter__(self) -> "Bmv2Switch":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _thrift_client(host: str, thrift_port: int, service: str) -> tuple[Any, Any]:
    """(open transport, client) of one of simple_switch's Thrift services: "simple_switch"
    (queue rates and depths, `sswitch_runtime`) or "standard" (registers, `bm_runtime`).

    Uses the Thrift stubs BMv2 installs and Debian's python3-thrift, which only
    /usr/bin/python3 with BMv2 installed sees (the project's venv is made with
    --system-site-packages); imported here so that the rest of bwn runs without them."""
    try:
        if service == "simple_switch":
            from sswitch_runtime import SimpleSwitch as stubs  # type: ignore[import-not-found]
        else:
            from bm_runtime.standard import Standard as stubs  # type: ignore[import-not-found]
        from thrift.protocol import TBinaryProtocol, TMultiplexedProtocol
        from thrift.transport import TSocket, TTransport
    except ImportError as exc:
        raise ImportError(f"BMv2's Thrift runtime is not importable ({exc}); install BMv2 with its "
                          f"Python modules and python3-thrift, and use a venv with system site-packages") from exc
    transport = TTransport.TBufferedTransport(TSocket.TSocket(host, thrift_port))
    protocol = TMultiplexedProtocol.TMultiplexedProtocol(TBinaryProtocol.TBinaryProtocol(transport), service)
    client = stubs.Client(protocol)
    transport.open()
    return transport, client


class QueueControl:
    """A persistent Thrift connection to simple_switch's runtime, for changing queue
    rates many times a second (a time-varying link) without starting a CLI each time.

    Uses the Thrift stubs BMv2 installs (`sswitch_runtime`, seen by Debian's python3
    and by the project's venv, which is made with --system-site-packages)."""

    def __init__(self, thrift_port: int, host: str = "127.0.0.1") -> None:
        self._transport, self._client = _thrift_client(host, thrift_port, "simple_switch")

    def set_rate(self, port: int, rate_pps: float, priority: int | None = None) -> None:
        pps = max(1, round(rate_pps))
        if priority is None:
            self._client.set_egress_queue_rate(port, pps)
        else:
            self._client.set_egress_priority_queue_rate(port, priority, pps)

    def set_depth(self, port: int, depth_packets: int, priority: int | None = None) -> None:
        if priority is None:
            self._client.set_egress_queue_depth(port, depth_packets)
        else:
            self._client.set_egress_priority_queue_depth(port, priority, depth_packets)

    def close(self) -> None:
        self._transport.close()


class RegisterAccess:
    """BMv2's registers over Thrift (its standard runtime): BMv2's P4Runtime server
    cannot read them. The PTF tests read XCP's and RCP's per-port state with it
    (p4src/v1model/include/control/xcp.p4, rcp.p4) and reset it between tests."""

    def __init__(self, thrift_port: int, host: str = "127.0.0.1") -> None:
        self._transport, self._client = _thrift_client(host, thrift_port, "standard")

    def read(self, name: str, index: int) -> int:
        """Register array `name` (its full name, e.g. "BwnEgress.xcp_d_us") at `index`."""
        return int(self._client.bm_register_read(0, name, index))

    def reset(self, name: str) -> None:
        """Every cell of register array `name` back to 0."""
        self._client.bm_register_reset(0, name)

    def close(self) -> None:
        self._transport.close()
