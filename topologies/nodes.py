"""Mininet node classes: BMv2 switches, quiet hosts, and link-emulator nodes.

* :class:`Bmv2Switch` runs one `simple_switch_grpc` (gRPC and Thrift on loopback)
  with the Mininet interfaces as its ports; it is started and ended by pid.
* :class:`BwnHost` is a Mininet host with IPv6 and NIC offloads off (real,
  MTU-sized frames; no router solicitations in the switches' counters).
* :class:`LinkemNode` is the "small node between the two ends of a link" that
  adds propagation delay (and loss, reordering...) in user space with
  `bwn-link`, for kernels without netem (issue 5).
"""
from __future__ import annotations

import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from mininet.node import Host, Switch

from bwn.bmv2 import experiment_switch_binary, stop_process_group, switch_command, wait_for_tcp

VENV_BIN = Path(sys.executable).parent


def quiet_interfaces(node: Any) -> None:
    """IPv6 off and offloads off on every interface of `node` (in its namespace)."""
    for intf in node.intfList():
        if intf.name == "lo":
            continue
        node.cmd(f"sysctl -qw net.ipv6.conf.{intf.name}.disable_ipv6=1")
        node.cmd(f"ethtool -K {intf.name} rx off tx off tso off gso off gro off >/dev/null 2>&1")


class BwnHost(Host):
    def config(self, **params: Any) -> Any:
        result = super().config(**params)
        self.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1")
        quiet_interfaces(self)
        return result


class LinkemNode(Host):
    """Two interfaces, no addresses, one `bwn-link` process bridging them."""

    def config(self, **params: Any) -> Any:
        # No IP configuration: the node is a wire, not a host.
        self.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1")
        for intf in self.intfList():
            if intf.name != "lo":
                self.cmd(f"ip link set {intf.name} up")
        quiet_interfaces(self)
        self.linkem_proc: subprocess.Popen | None = None
        return {}

    def start_linkem(self, args: list[str], log_path: Path, stats_path: Path) -> None:
        intfs = [i.name for i in self.intfList() if i.name != "lo"]
        if len(intfs) != 2:
            raise RuntimeError(f"link-emulator node {self.name} needs exactly 2 interfaces, has {intfs}")
        cmd = [str(VENV_BIN / "bwn-link"), intfs[0], intfs[1], *args, "--stats-json", str(stats_path)]
        log = open(log_path, "ab")
        self.linkem_proc = self.popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def stop_linkem(self) -> None:
        proc, self.linkem_proc = getattr(self, "linkem_proc", None), None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


class Bmv2MininetSwitch(Switch):
    """A BMv2 simple_switch_grpc switch in Mininet (root namespace, loopback control)."""

    def __init__(self, name: str, grpc_port: int = 50051, thrift_port: int = 9090,
                 device_id: int = 0, log_dir: str = "build/logs", log_level: str = "warn",
                 priority_queues: int = 1, binary: str | None = None, **params: Any) -> None:
        super().__init__(name, **params)
        # Experiments run the BMv2 built for speed when it is installed (BWN_BMV2=default|PATH).
        self.binary = binary or experiment_switch_binary()
        self.grpc_port = grpc_port
        self.thrift_port = thrift_port
        self.device_id = device_id
        self.log_dir = Path(log_dir)
        self.log_level = log_level
        self.priority_queues = priority_queues
        self.proc: subprocess.Popen | None = None

    @property
    def grpc_addr(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"{self.name}.log"

    def port_of(self, intf_name: str) -> int:
        for port, intf in self.intfs.items():
            if intf.name == intf_name:
                return port
        raise KeyError(f"{self.name} has no interface {intf_name}")

    def start(self, controllers: list) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        quiet_interfaces(self)
        ports = {port: intf.name for port, intf in self.intfs.items() if intf.name != "lo"}
        cmd = switch_command(ports, self.grpc_port, self.thrift_port, self.device_id,
                             self.log_level, self.priority_queues, self.binary)
        with open(self.log_path, "ab") as log:
            log.write(f"$ {shlex.join(cmd)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_for_tcp("127.0.0.1", self.grpc_port, 20, proc=self.proc)
            wait_for_tcp("127.0.0.1", self.thrift_port, 20, proc=self.proc)
        except BaseException:
            self.stop_process()
            raise

    def stop_process(self) -> None:
        proc, self.proc = self.proc, None
        stop_process_group(proc)

    def stop(self, deleteIntfs: bool = True) -> None:  # noqa: N803 (Mininet's signature)
        self.stop_process()
        super().stop(deleteIntfs)

    def restart_process(self) -> None:
        """Kill and start the switch again (tests of the controller's reconnect)."""
        self.stop_process()
        self.start([])
