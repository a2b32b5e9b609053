"""The experiment runner: one scenario, several schemes, same conditions.

For each scheme it builds the scenario's Mininet network of BMv2 switches (and
`bwn-link` nodes for links with a propagation delay), runs the P4Runtime
controller with the links' rate schedules, starts `bwn-recv` and `bwn-send` for
every flow, waits, collects the flow logs and the switches' telemetry, tears
everything down, and finally writes the report (summary table and plots).

Bringing the network up and down is :class:`ScenarioNetwork`, shared with the
interactive `bwn net` (bwn/emulation/session.py). Teardown is unconditional (success,
failure, Ctrl-C, SIGTERM): agents and link emulators are ended by pid, switches
by pid, Mininet removes its links and host namespaces; on failure the switch
logs stay in the output folder.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Coroutine, Mapping, Optional, Sequence, TypeVar

from bwn.emulation import capture
from bwn.analysis import fidelity
from bwn.scenario import flowpaths
from bwn.scenario import seeding
from controller import entries as ent
from bwn.scenario.resolved import ExperimentConfig, LinkConfig
from controller.p4rt import pipeline_files
from bwn.scenario.schedule import ConstantSchedule, table_of
from controller.switchctl import BwnController, PortPlan, SwitchPlan
from bwn.protocol.wire import BWN_UDP_PORT

LOG = logging.getLogger(__name__)
T = TypeVar("T")
VENV_BIN = Path(sys.executable).parent
GRPC_PORT_BASE = 50100
THRIFT_PORT_BASE = 9190
GATEWAY_MAC = "00:00:00:00:00:fe"   # hosts send everything to this MAC; switches ignore dst MACs
AGENT_MSS_BYTES = 1000              # the papers' 1000-byte packets (NS-2 defaults)


class Interrupted(Exception):
    pass


@dataclass
class BuiltNetwork:
    net: Any
    plans: list[SwitchPlan]
    linkem_nodes: list[Any] = field(default_factory=list)
    # With `[experiment] linkem_shared`: the one bwn-links process for every linkem node.
    linkem_group: Any = None
    # Per link name: the interfaces at its a and b ends (through a bwn-link node if delayed).
    ends: dict[str, tuple[Any, Any]] = field(default_factory=dict)


def _frame_bytes(mss_bytes: int) -> int:
    # Ethernet 14 + IPv4 20 + UDP 8 + BWN 24 + transport header (docs/transport.md)
    from hosts.transport.wire import TRANSPORT_HEADER_LEN
    return mss_bytes + 14 + 20 + 8 + 24 + TRANSPORT_HEADER_LEN


def build_network(cfg: ExperimentConfig, log_dir: Path, frame_bytes: Optional[int] = None) -> BuiltNetwork:
    """Mininet network for `cfg` (not started). `frame_bytes`: the frame size that
    converts every port's rate to BMv2's packets/s; None: the agents' data frames on
    ports that carry a flow's data, ACK frames on the others."""
    from mininet.link import Link
    from mininet.net import Mininet

    from topologies.nodes import Bmv2MininetSwitch, BwnHost, LinkemNode

    net = Mininet(topo=None, controller=None, build=False, autoSetMacs=False, link=Link,
                  waitConnected=False)
    for i, sw in enumerate(cfg.switches):
        net.addSwitch(sw.name, cls=Bmv2MininetSwitch, dpid=f"{i + 1:016x}",
                      grpc_port=sw.grpc_port or GRPC_PORT_BASE + i,
                      thrift_port=sw.thrift_port or THRIFT_PORT_BASE + i,
                      device_id=sw.device_id, log_dir=str(log_dir))
    for h in cfg.hosts:
        net.addHost(h.name, cls=BwnHost, ip=str(h.ip))
    built = BuiltNetwork(net=net, plans=[])
    ends = built.ends
    for i, link in enumerate(cfg.links):
        a, b = net.get(link.a), net.get(link.b)
        if link.needs_emulator():
            em = net.addHost(f"em{i}", cls=LinkemNode, ip=None)
            em.link_config = link
            l1 = net.addLink(a, em, port1=link.a_port)
            l2 = net.addLink(em, b, port2=link.b_port)
            ends[link.name] = (l1.intf1, l2.intf2)
            built.linkem_nodes.append(em)
        else:
            l = net.addLink(a, b, port1=link.a_port, port2=link.b_port)
            ends[link.name] = (l.intf1, l.intf2)
    built.plans = _switch_plans(cfg, net, ends, frame_bytes)
    return built


def _switch_plans(cfg: ExperimentConfig, net: Any, ends: dict[str, tuple[Any, Any]],
                  frame_bytes: Optional[int] = None) -> list[SwitchPlan]:
    data_frame_bytes = frame_bytes or _frame_bytes(AGENT_MSS_BYTES)
    ack_frame_bytes = frame_bytes or _frame_bytes(0)
    plans = []
    for sw_cfg in cfg.switches:
        sw = net.get(sw_cfg.name)
        plan = SwitchPlan(name=sw.name, grpc_addr=sw.grpc_addr, thrift_port=sw.thrift_port,
                          device_id=sw.device_id)
        for h in cfg.hosts:
            path = cfg.path_links(sw.name, h.name)
            if not path:
                continue
            first = path[0]
            mine, other = ends[first.name] if first.a == sw.name else ends[first.name][::-1]
            nxt = first.b if first.a == sw.name else first.a
            dst_mac = net.get(h.name).MAC() if nxt == h.name else GATEWAY_MAC
            plan.routes.append((f"{h.ip.ip}/32", sw.port_of(mine.name), dst_mac, mine.MAC()))
        for link in cfg.links:
            if sw.name not in (link.a, link.b):
                continue
            mine = ends[link.name][0] if link.a == sw.name else ends[link.name][1]
            applies = not link.apply_at or sw.name in link.apply_at
            # GTCP reservations as Assured Forwarding (RFC 2597): a port that reserved
            # flows leave by drops out-of-profile and best-effort packets first, once
            # its queue holds af_queue_packets (half of it unless the scenario says;
            # docs/dataplane.md, "Reservations").
            carries_reserved = any(_on_path(cfg, r.src, r.dst, link, sw.name) for r in cfg.reservations)
            # BMv2 rate-limits queues in packets/s. A port that no flow's data
            # leaves by carries only ACKs (102-byte frames): converting its rate
            # with the data frame size would let ACKs fill the packet budget
            # at a tenth of the link's bit rate (seen in the parking lot).
            carries_data = any(_on_path(cfg, f.src, f.dst, link, sw.name) for f in cfg.flows)
            plan.ports.append(PortPlan(port=sw.port_of(mine.name), link=link.name,
                                       schedule=link.capacity.schedule if applies else None,
                                       queue_packets=link.queue_packets,
                                       frame_bytes=data_frame_bytes if carries_data else ack_frame_bytes,
                                       loss=link.loss,
                                       af_queue_packets=link.af_queue_packets if carries_reserved else 0,
                                       shaped_by_switch=not link.shaped_by_link))
        for r in cfg.reservations:
            first_switch = _first_switch(cfg, r.src, r.dst)
            if first_switch == sw.name:
                plan.reservations.append(ent.Reservation(
                    src=str(cfg.host(r.src).ip.ip), dst=str(cfg.host(r.dst).ip.ip), rate_bps=r.rate_mbit * 1e6,
                    src_port=r.src_port, dst_port=r.dst_port if r.dst_port is not None else BWN_UDP_PORT))
        plans.append(plan)
    return plans


def linkem_options(link: LinkConfig, rt_priority: int = 0) -> list[str]:
    """`bwn-link`'s options for `link`: its delay each way and, when it serves the
    link's rate (shaper = "link"), the rate and the queue in each direction that a
    switch end applying the schedule sends into, as that switch's egress queue
    would have (bwn-link's first interface faces end a); `rt_priority` > 0 runs it
    with that SCHED_FIFO priority (`[experiment] linkem_rt_priority`)."""
    options = ["--delay-ms", f"{link.delay_ms:g}"]
    if rt_priority:
        options += ["--rt-priority", str(rt_priority)]
    schedule = link.served_schedule
    if schedule is not None:
        # A constant rate as --rate-mbit; a time-varying one as its schedule, whose
        # time 0 the run sets with SIGUSR1 when the flows start (start_link_schedules).
        rate = ["rate-mbit", f"{schedule.rate / 1e6:.9g}"] if isinstance(schedule, ConstantSchedule) \
            else ["rate-schedule", json.dumps(table_of(schedule), separators=(",", ":"))]
        for end, direction in ((link.a, "a-to-b"), (link.b, "b-to-a")):
            if end in link.apply_at:
                options += [f"--{direction}-{rate[0]}", rate[1],
                            f"--{direction}-queue-packets", str(link.queue_packets)]
    return options


def start_link_schedules(linkem_nodes: Sequence[Any], group: Any = None) -> list[str]:
    """Give time 0 to the time-varying rates bwn-link serves (SIGUSR1 to each
    bwn-link serving one, or once to the `group`'s bwn-links serving them all), at
    the instant the controller starts the switches' schedules; the names of the
    links signalled."""
    started = []
    group_proc = getattr(group, "proc", None)
    for em in linkem_nodes:
        schedule = em.link_config.served_schedule
        proc = group_proc if group is not None else getattr(em, "linkem_proc", None)
        if schedule is None or isinstance(schedule, ConstantSchedule) or proc is None:
            continue
        if proc.poll() is None:
            if proc is not group_proc or not started:
                proc.send_signal(signal.SIGUSR1)
            started.append(em.link_config.name)
    return started


def _first_switch(cfg: ExperimentConfig, src: str, dst: str) -> Optional[str]:
    """The edge switch where a flow from host `src` enters the network."""
    path = cfg.path_links(src, dst)
    if not path:
        return None
    first = path[0]
    return first.b if first.a == src else first.a


def _on_path(cfg: ExperimentConfig, src: str, dst: str, link: LinkConfig, switch: str) -> bool:
    """Whether `link` is on the src->dst path and is left by `switch` in that direction."""
    node = src
    for hop in cfg.path_links(src, dst):
        nxt = hop.b if hop.a == node else hop.a
        if hop is link:
            return node == switch
        node = nxt
    return False


def configure_hosts(cfg: ExperimentConfig, net: Any) -> None:
    """Default route on each host's only interface and static ARP for every other
    host (the switches route on IP and ignore destination MACs)."""
    for h in cfg.hosts:
        node = net.get(h.name)
        intf = node.defaultIntf().name
        node.cmd(f"ip route replace default dev {intf}")
        for other in cfg.hosts:
            if other.name != h.name:
                node.cmd(f"ip neigh replace {other.ip.ip} lladdr {GATEWAY_MAC} dev {intf} nud permanent")


@dataclass
class Agent:
    name: str
    proc: subprocess.Popen
    log: Path


def parse_scheme(spec: str) -> tuple[str, list[str]]:
    """`algo` or `algo:key=value;key=value` (e.g. `ebn:variant=relative`) ->
    (algorithm, ["key=value", ...]) for bwn-send --param."""
    algo, _, params = spec.partition(":")
    items = [p for p in params.split(";") if p]
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
    flows_dir = out_dir / "flows"
    flows_dir.mkdir(parents=True, exist_ok=True)
    ready_dir = out_dir / "ready"
    shutil.rmtree(ready_dir, ignore_errors=True)
    ready_dir.mkdir()
    receivers: list[Agent] = []
    senders: list[Agent] = []
    ready_files: list[tuple[Agent, Path]] = []
    try:
        for dst in sorted({f.dst for f in cfg.flows}):
            node = net.get(dst)
            log = out_dir / f"recv-{dst}.log"
            ready = ready_dir / f"recv-{dst}"
            with open(log, "wb") as fh:
                cmd = [str(VENV_BIN / "bwn-recv"), "--listen", f"{cfg.host(dst).ip.ip}:{BWN_UDP_PORT}",
                       "--summary-json", str(out_dir / f"recv-{dst}.summary.json"),
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
                   "--log", str(flows_dir / f"{f.name}.jsonl"),
                   "--summary-json", str(flows_dir / f"{f.name}.summary.json"),
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
            log = out_dir / f"send-{f.name}.log"
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


class ControllerThread:
    """The asyncio controller in a thread of its own, so Mininet stays blocking."""

    def __init__(self, controller: BwnController) -> None:
        self.controller = controller
        self.ready = threading.Event()
        self.error: Optional[BaseException] = None
        self._loop = asyncio.new_event_loop()
        self._task: Optional[asyncio.Task] = None
        self._thread = threading.Thread(target=self._main, name="controller", daemon=True)

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        ready = asyncio.Event()

        async def main() -> None:
            waiter = asyncio.create_task(ready.wait())
            self._task = asyncio.create_task(self.controller.run(ready=ready))
            await asyncio.wait([waiter, self._task], return_when=asyncio.FIRST_COMPLETED)
            if ready.is_set():
                self.ready.set()
            await self._task

        try:
            self._loop.run_until_complete(main())
        except asyncio.CancelledError:
            pass
        except BaseException as exc:  # reported to the runner
            self.error = exc
        finally:
            self.ready.set()

    def start(self, timeout_s: float = 60.0) -> None:
        self._thread.start()
        if not self.ready.wait(timeout_s):
            raise TimeoutError("the controller could not configure every switch in time")
        if self.error is not None:
            raise RuntimeError(f"controller failed: {self.error}") from self.error

    def call(self, coro: Coroutine[Any, Any, T], timeout_s: float = 15.0) -> T:
        """Run `coro` (e.g. `controller.set_link_rate(...)`) on the controller's loop,
        from another thread, and return its result or raise its exception."""
        if not self._loop.is_running():
            coro.close()
            raise RuntimeError("the controller is not running" +
                               (f" (it failed: {self.error})" if self.error is not None else ""))
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"the controller did not answer within {timeout_s:.0f} s") from None

    def stop(self) -> None:
        if self._task is not None:
            self._loop.call_soon_threadsafe(self._task.cancel)
        self._thread.join(timeout=10)


def _fidelity_json(monitor: fidelity.Monitor, progress: Callable[[str], None], scheme: str) -> dict[str, Any]:
    """The run's fidelity verdict for run.json; a failure to judge is said, not hidden."""
    try:
        result = monitor.result()
    except Exception as exc:  # never lose a run's files over its fidelity check
        progress(f"[{scheme}] fidelity check failed: {exc!r}")
        return {"valid": False, "summary": f"INVALID: fidelity check failed: {exc!r}", "broken": ["check"]}
    progress(f"[{scheme}] fidelity: {result.summary()}")
    return result.to_json()


class ScenarioNetwork:
    """A scenario's network, from build to teardown; `bwn run` and `bwn net` share it.

    The constructor builds the Mininet network (nothing runs yet). :meth:`start`
    starts the BMv2 switches and hosts, gives each host a default route and static
    ARP, starts a `bwn-link` per delayed link and the controller (in its thread:
    pipeline, routes, schedules, telemetry). :meth:`stop` ends all of it, however
    far `start` got: link emulators, controller, then Mininet (switch processes,
    links, host namespaces), then any process still in a host's namespace (e.g.
    one a user daemonized); it is safe to call twice. The caller holds the
    experiment lock (bwn/emulation/runlock.py). Outputs in `out_dir`: capacity.csv,
    telemetry.csv, the emulators' logs, switch logs in `switch-logs/`.
    `frame_bytes`: see :func:`build_network`. `linkem_args`: link name -> more
    `bwn-link` options for that link's emulator (e.g. the soak's jitter and loss,
    benchmarks/soak.py); the scenario's delay and seed are always given."""

    def __init__(self, cfg: ExperimentConfig, out_dir: Path, progress: Callable[[str], None] = print,
                 label: str = "", frame_bytes: Optional[int] = None,
                 linkem_args: Optional[Mapping[str, Sequence[str]]] = None) -> None:
        self.cfg = cfg
        self.out_dir = out_dir
        self.log_dir = out_dir / "switch-logs"
        self.progress = progress
        self.label = label
        self.p4info, self.p4blob = pipeline_files()
        self.frame_bytes = frame_bytes
        self.linkem_args = {name: list(args) for name, args in (linkem_args or {}).items()}
        self.built = build_network(cfg, self.log_dir, frame_bytes)
        self.controller: Optional[BwnController] = None
        self.controller_thread: Optional[ControllerThread] = None
        self._stopped = False

    @property
    def net(self) -> Any:
        return self.built.net

    def start(self) -> None:
        cfg, net = self.cfg, self.net
        self.progress(f"{self.label}starting {len(cfg.switches)} BMv2 switches and {len(cfg.hosts)} hosts")
        net.start()
        configure_hosts(cfg, net)
        self._start_linkems()
        window = ent.WindowConfig(cfg.dataplane.window_us, cfg.dataplane.flow_window_us,
                                  cfg.dataplane.queue_unit_bytes or self.frame_bytes
                                  or _frame_bytes(AGENT_MSS_BYTES))
        self.controller = BwnController(self.built.plans, self.p4info, self.p4blob, self.out_dir, window,
                                        telemetry_interval_s=cfg.telemetry.interval_s,
                                        queue_lookahead=cfg.queue_lookahead)
        self.controller_thread = ControllerThread(self.controller)
        self.controller_thread.start()
        if self.built.linkem_group is not None:
            self.built.linkem_group.wait_ready()
        for em in self.built.linkem_nodes:
            if self.built.linkem_group is None:
                em.wait_linkem_ready()

    def _start_linkems(self) -> None:
        """A `bwn-link` per delayed link, or with `[experiment] linkem_shared` one
        `bwn-links` for them all (the same options per link, its SCHED_FIFO priority
        given once); each link's statistics in `<node>-linkem.json` either way."""
        cfg, nodes = self.cfg, self.built.linkem_nodes
        shared = cfg.linkem_shared and bool(nodes)
        args: dict[str, list[str]] = {}
        for em in nodes:
            link: LinkConfig = em.link_config
            em_seed = seeding.linkem_seed(cfg.seed, em.name)
            args[em.name] = (linkem_options(link, 0 if shared else cfg.linkem_rt_priority)
                             + (["--seed", str(em_seed)] if em_seed is not None else [])
                             + self.linkem_args.get(link.name, []))
        stats = {em.name: self.out_dir / f"{em.name}-linkem.json" for em in nodes}
        if shared:
            from topologies.nodes import LinkemGroup

            self.built.linkem_group = LinkemGroup(nodes)
            self.built.linkem_group.start(args, stats, self.out_dir / "linkem-links.json",
                                          self.out_dir / "linkem.log", cfg.linkem_rt_priority)
            return
        for em in nodes:
            em.start_linkem(args[em.name], self.out_dir / f"{em.name}-linkem.log", stats[em.name])

    def stop_linkems(self) -> None:
        """End the link emulators only (a run stops its captures after them); `stop`
        does it too."""
        if self.built.linkem_group is not None:
            self.built.linkem_group.stop()
        for em in self.built.linkem_nodes:
            em.stop_linkem()

    def stop(self) -> None:
        """Every step is tried even if one before it failed; the first failure is
        raised at the end. Mininet's own teardown uses the nodes' shells, so a
        command still running in one (a CLI command cut short) is ended first; if
        that teardown breaks off, switches and nodes are ended directly and the
        switches' interfaces deleted."""
        if self._stopped:
            return
        self._stopped = True
        from topologies.nodes import end_processes_in, interrupt_command, node_namespaces
        errors: list[Exception] = []

        def attempt(step: Callable[..., Any], *args: Any) -> None:
            try:
                step(*args)
            except Exception as exc:  # go on tearing down; raised below
                LOG.warning("teardown: %s failed: %s", getattr(step, "__name__", step), exc)
                errors.append(exc)

        net = self.net
        for node in net.values():
            attempt(interrupt_command, node)
        attempt(self.stop_linkems)
        if self.controller_thread is not None:
            attempt(self.controller_thread.stop)
        namespaces = node_namespaces(net.hosts)
        attempt(net.stop)
        if errors:
            for sw in net.switches:
                attempt(sw.stop_process)
            for node in net.hosts + net.switches:
                attempt(node.terminate)
            attempt(_delete_root_interfaces, net)
        for line in end_processes_in(namespaces):
            self.progress(f"{self.label}ended {line}")
        if errors:
            raise errors[0]

    def __enter__(self) -> "ScenarioNetwork":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _delete_root_interfaces(net: Any) -> None:
    """Delete the switches' interfaces (in the root namespace) that still exist."""
    for sw in net.switches:
        for intf in sw.intfList():
            if intf.name != "lo" and subprocess.run(["ip", "link", "show", intf.name],
                                                     capture_output=True).returncode == 0:
                subprocess.run(["ip", "link", "del", intf.name], capture_output=True)


def run_scheme(cfg: ExperimentConfig, scheme: str, out_dir: Path, duration_s: float,
               progress: Callable[[str], None] = print, pcap: bool = False) -> dict[str, Any]:
    """One run of the scenario with `scheme` for the flows under test; `pcap`:
    capture the bottleneck links (bwn/emulation/capture.py)."""

    from bwn.scenario.config import ConfigError
    from bwn.emulation.runlock import experiment_lock

    conflicts = cfg.shaper_conflicts([scheme])
    if conflicts:
        raise ConfigError(conflicts, str(cfg.source or cfg.name))
    with experiment_lock(progress):
        return _run_scheme_locked(cfg, scheme, out_dir, duration_s, progress, pcap)


def _run_scheme_locked(cfg: ExperimentConfig, scheme: str, out_dir: Path, duration_s: float,
                       progress: Callable[[str], None], pcap: bool = False) -> dict[str, Any]:
    from bwn.linkem import netem_available

    out_dir.mkdir(parents=True, exist_ok=True)
    network = ScenarioNetwork(cfg, out_dir, progress, label=f"[{scheme}] ")
    log_dir = network.log_dir
    captures: Optional[capture.Captures] = None
    monitor: Optional[fidelity.Monitor] = None
    senders: list[Agent] = []
    receivers: list[Agent] = []
    ok = False
    interrupted = False
    meta: dict[str, Any] = {"scheme": scheme, "duration_s": duration_s,
                            "delay_emulator": ("none" if not network.built.linkem_nodes
                                               else "bwn-links" if cfg.linkem_shared else "bwn-link"),
                            "linkem_rt_priority": cfg.linkem_rt_priority if network.built.linkem_nodes else None,
                            "queue_lookahead": cfg.queue_lookahead,
                            "netem_available": netem_available(),
                            "seed": cfg.seed,
                            "flow_ids": {f.name: seeding.flow_id(cfg.seed, i) for i, f in enumerate(cfg.flows)},
                            **flowpaths.run_meta(cfg, AGENT_MSS_BYTES, _frame_bytes(AGENT_MSS_BYTES))}
    try:
        network.start()
        net, controller, controller_thread = network.net, network.controller, network.controller_thread
        assert controller is not None and controller_thread is not None
        progress(f"[{scheme}] switches configured; running {len(cfg.flows)} flows for {duration_s:.0f} s")
        if pcap:
            captures = capture.start_for_run(cfg, network.built.ends, out_dir, duration_s)
            progress(f"[{scheme}] capturing {', '.join(p.link for p in captures.points)}")
        # Capture timestamps are wall-clock; the controller's clock is the experiment's.
        meta["clock_offset_s"] = time.time() - controller.now_s()
        # Every agent is started and ready before the measurement starts; the
        # senders are held until then (start_agents).
        senders, receivers = start_agents(cfg, net, scheme, out_dir, duration_s)
        # Fidelity sampling (bwn/analysis/fidelity.py) while the flows run; telemetry's time base.
        monitor = fidelity.Monitor.for_network(out_dir, network.built, cfg.telemetry.interval_s)
        monitor.time_origin_s = controller.t0
        monitor.start()
        launched_s = controller.now_s()
        controller.schedule_origin_s = launched_s   # the links' schedules start with the flows
        meta["link_schedules_started"] = start_link_schedules(network.built.linkem_nodes,
                                                              network.built.linkem_group)  # bwn-link's
        release_senders(senders)
        # Flow logs count time from each flow's start; the report aligns them with
        # the controller's clock (telemetry.csv, capacity.csv) through these.
        meta["flow_starts_s"] = {f.name: round(launched_s + f.start_s, 3) for f in cfg.flows}
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
        meta["sender_exit_codes"] = {s.name: s.proc.poll() for s in senders}
        # A flow ended at the experiment's end is a result, not a failure; a
        # sender that could not run at all (no summary) is.
        missing = [f.name for f in cfg.flows if not (out_dir / "flows" / f"{f.name}.summary.json").exists()]
        meta["flows_without_summary"] = missing
        ok = not missing
        return meta
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        # Receivers' CPU over their life (= the run); senders write theirs in their summaries.
        for agent in receivers:
            cpu_s = fidelity.process_cpu_s(agent.proc.pid) if agent.proc.poll() is None else None
            if cpu_s is not None:
                meta.setdefault("receiver_cpu_s", {})[agent.name] = round(cpu_s, 3)
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
                meta.update(capture.finish_for_run(captures, out_dir))
        finally:
            network.stop()
        if monitor is not None:
            meta["fidelity"] = _fidelity_json(monitor, progress, scheme)
        meta["ok"] = ok
        (out_dir / "run.json").write_text(json.dumps(meta, indent=2))
        if ok:
            shutil.rmtree(log_dir, ignore_errors=True)
        elif interrupted:
            progress(f"[{scheme}] interrupted: switch logs kept in {log_dir}")
        else:
            progress(f"[{scheme}] something failed: switch logs kept in {log_dir}")
