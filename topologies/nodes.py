"""Mininet node classes: BMv2 switches, quiet hosts, and link-emulator nodes.

* :class:`Bmv2Switch` runs one `simple_switch_grpc` (gRPC and Thrift on loopback)
  with the Mininet interfaces as its ports; it is started and ended by pid.
* :class:`BwnHost` is a Mininet host with IPv6 and NIC offloads off (real,
  MTU-sized frames; no router solicitations in the switches' counters).
* :class:`LinkemNode` is the "small node between the two ends of a link" that
  adds propagation delay (and loss, reordering...) in user space with
  `bwn-link`, for kernels without netem; :class:`LinkemGroup` serves
  the links of several such nodes from one `bwn-links` process.
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterable, Optional

from mininet.node import Host, Switch

from bwn.linkem.cli import READY_MARKER
from controller.bmv2 import experiment_switch_binary, stop_process_group, switch_command, wait_for_tcp

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
        # bwn-send, bwn-recv (and bwn-link) by name in the host's shell (`bwn net`).
        self.cmd(f'export PATH={shlex.quote(str(VENV_BIN))}:"$PATH"')
        return result


def _descendants(pid: int) -> list[int]:
    """The processes below `pid` (children, theirs, ...), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(f"/proc/{entry.name}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _drain(node: Any, timeout_s: float) -> bool:
    """Read `node`'s shell output until its command ended (True) or `timeout_s` passed."""
    deadline = time.monotonic() + timeout_s
    while node.waiting and time.monotonic() < deadline:
        node.monitor(timeoutms=100)
    return not node.waiting


def interrupt_command(node: Any, timeout_s: float = 3.0) -> None:
    """If `node`'s shell still runs a command (a CLI command cut short by a signal),
    end it so that the teardown can use the shell: Ctrl-C, then SIGKILL to every
    process below the shell. Raises if the shell still does not answer."""
    if not getattr(node, "waiting", False) or getattr(node, "shell", None) is None:
        return
    node.sendInt()
    if _drain(node, timeout_s):
        return
    for pid in _descendants(node.shell.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if not _drain(node, timeout_s):
        raise RuntimeError(f"{node.name}'s shell does not answer after its command was killed")


def netns_inode(pid: int) -> Optional[int]:
    """The inode of process `pid`'s network namespace, or None if it is gone."""
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def node_namespaces(nodes: Iterable[Any]) -> dict[int, str]:
    """Network namespace inode -> node name, for the nodes in a namespace of their own."""
    root = netns_inode(os.getpid())
    found = {}
    for node in nodes:
        ino = netns_inode(node.pid) if getattr(node, "inNamespace", False) and node.pid else None
        if ino is not None and ino != root:
            found[ino] = node.name
    return found


def end_processes_in(namespaces: dict[int, str], grace_s: float = 2.0) -> list[str]:
    """End every process still in one of `namespaces` (after the nodes' shells were
    told to stop): SIGTERM, then SIGKILL after `grace_s`. A process that left its
    shell's session (a daemon a user started) would otherwise keep the namespace.
    Returns one line per process ended."""
    def members() -> dict[int, str]:
        found = {}
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                ino = netns_inode(int(entry.name))
                if ino in namespaces:
                    found[int(entry.name)] = namespaces[ino]
        return found

    deadline = time.monotonic() + 0.5          # the shells' own exit, after their SIGHUP
    left = members()
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = members()
    ended = []
    for pid, node in left.items():
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        ended.append(f"pid {pid} left in {node}'s namespace: {args.strip()}")
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, grace_s)):
        for pid in left:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait_s
        while left and time.monotonic() < deadline:
            time.sleep(0.05)
            left = members()
        if not left:
            break
    return ended


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
        self.linkem_log = log_path
        self.linkem_proc = self.popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def wait_linkem_ready(self, timeout_s: float = 30.0) -> None:
        """Until `bwn-link` says its sockets are open (frames sent before are lost)."""
        wait_linkem_ready(self.linkem_proc, self.linkem_log, f"bwn-link on {self.name}", timeout_s)

    def stop_linkem(self) -> None:
        proc, self.linkem_proc = getattr(self, "linkem_proc", None), None
        stop_linkem_process(proc)


def wait_linkem_ready(proc: Optional[subprocess.Popen], log_path: Path, who: str,
                      timeout_s: float = 30.0) -> None:
    """Until the emulator `proc` writes its ready line to `log_path`."""

    deadline = time.monotonic() + timeout_s
    while READY_MARKER not in log_path.read_text(errors="replace"):
        if proc is None or proc.poll() is not None:
            raise RuntimeError(f"{who} exited: see {log_path}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{who} not ready after {timeout_s:.0f} s: see {log_path}")
        time.sleep(0.05)


def stop_linkem_process(proc: Optional[subprocess.Popen]) -> None:
    """SIGTERM (it writes its statistics), then SIGKILL after 5 s."""
    if proc is not None and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


class LinkemGroup:
    """One `bwn-links` process serving the links of several :class:`LinkemNode`s
    (`[experiment] linkem_shared`): it runs in this namespace and opens each link's
    sockets in its node's namespace, so the nodes and their interfaces are the same
    as with a `bwn-link` per node. Each link's statistics go where that node's
    `bwn-link` would write them. It ends with the process that started it."""

    def __init__(self, nodes: list[LinkemNode]) -> None:
        self.nodes = list(nodes)
        self.proc: subprocess.Popen | None = None
        self.log_path: Path | None = None

    def start(self, args_by_node: dict[str, list[str]], stats_paths: dict[str, Path],
              spec_path: Path, log_path: Path, rt_priority: int = 0) -> None:

        links = []
        for em in self.nodes:
            intfs = [i.name for i in em.intfList() if i.name != "lo"]
            if len(intfs) != 2:
                raise RuntimeError(f"link-emulator node {em.name} needs exactly 2 interfaces, has {intfs}")
            links.append({"name": em.name, "netns": f"/proc/{em.pid}/ns/net",
                          "args": [*intfs, *args_by_node[em.name], "--stats-json", str(stats_paths[em.name])]})
        spec_path.write_text(json.dumps({"links": links}, indent=1) + "\n")
        # It ends with this process even if this one is killed (as bwn/emulation/capture.py's captures).
        guard = ["setpriv", "--pdeathsig", "TERM", "--"] if shutil.which("setpriv") else []
        cmd = [*guard, str(VENV_BIN / "bwn-links"), str(spec_path)]
        if rt_priority:
            cmd += ["--rt-priority", str(rt_priority)]
        self.log_path = log_path
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        assert self.log_path is not None, "start() first"
        wait_linkem_ready(self.proc, self.log_path, "bwn-links", timeout_s)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        stop_linkem_process(proc)


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
