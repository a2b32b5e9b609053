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
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

SWITCH_BINARY = "simple_switch_grpc"
CLI_BINARY = "simple_switch_CLI"


def missing_tools(*names: str) -> list[str]:
    return [n for n in names if shutil.which(n) is None]


def bmv2_missing() -> list[str]:
    """Tools a BMv2 test needs that this machine lacks (empty when all present)."""
    return missing_tools(SWITCH_BINARY, CLI_BINARY)


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
    priority_queues: int = 8
    extra_args: Sequence[str] = ()
    proc: subprocess.Popen | None = field(default=None, init=False)

    @property
    def grpc_addr(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"{self.name}.log"

    def command(self) -> list[str]:
        cmd = [SWITCH_BINARY, "--device-id", str(self.device_id), "--thrift-port", str(self.thrift_port),
               "--log-file", str(self.log_dir / f"{self.name}-bmv2"), "--log-flush",
               "--log-level", self.log_level, "--no-p4"]
        for port, iface in sorted(self.ports.items()):
            cmd += ["-i", f"{port}@{iface}"]
        cmd += list(self.extra_args)
        cmd += ["--", "--grpc-server-addr", self.grpc_addr, "--cpu-port", "510"]
        if self.priority_queues > 1:
            cmd += ["--priority-queues", str(self.priority_queues)]
        if self.netns:
            cmd = ["ip", "netns", "exec", self.netns] + cmd
        return cmd

    def start(self, timeout_s: float = 20.0) -> "Bmv2Switch":
        missing = bmv2_missing()
        if missing:
            raise FileNotFoundError(f"BMv2 is not installed ({', '.join(missing)} not on PATH): see README")
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

    def cli(self, commands: str, timeout_s: float = 20.0) -> str:
        """Run simple_switch_CLI commands (Thrift) and return its output."""
        cmd = [CLI_BINARY, "--thrift-port", str(self.thrift_port)]
        if self.netns:
            cmd = ["ip", "netns", "exec", self.netns] + cmd
        res = subprocess.run(cmd, input=commands, capture_output=True, text=True, timeout=timeout_s)
        if res.returncode != 0 or "Error" in res.stdout or "Invalid" in res.stdout:
            raise RuntimeError(f"simple_switch_CLI on {self.name} failed for {commands!r}: "
                               f"{res.stdout.strip()} {res.stderr.strip()}")
        return res.stdout

    def set_queue(self, port: int, rate_pps: float, depth_packets: int) -> None:
        """Egress queue of `port`: service rate (packets per second) and depth (packets)."""
        if rate_pps <= 0 or depth_packets <= 0:
            raise ValueError(f"queue rate and depth must be positive (got {rate_pps} pps, {depth_packets} packets)")
        self.cli(f"set_queue_rate {max(1, round(rate_pps))} {port}\nset_queue_depth {depth_packets} {port}\n")

    def __enter__(self) -> "Bmv2Switch":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
