"""A scenario's Mininet network: its build, its switch plans, and its life from start to teardown.

:func:`build_network` makes the Mininet network of switches (BMv2 processes, or
the PSA program in the kernel under NIKSS: the target) and hosts (and a
``bwn-link`` node for each link with a delay or a rate it serves), and
:func:`_switch_plans` what the controller programs into each switch: routes,
ports with their schedules, queues, frame sizes and loss, reservations.
:class:`ScenarioNetwork` brings the whole up (switches, hosts, link emulators,
the controller in its thread) and down again, for `bwn run`
(:mod:`bwn.emulation.runner`) and the interactive `bwn net`
(:mod:`bwn.emulation.session`). Teardown is unconditional (success, failure,
Ctrl-C, SIGTERM): link emulators and switches are ended by pid, Mininet removes
its links and host namespaces, then any process still in a host's namespace.
"""
from __future__ import annotations

import json
import logging
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from bwn.emulation.agents import AGENT_MSS_BYTES
from bwn.emulation.agents import frame_bytes as agent_frame_bytes
from bwn.emulation.controller_thread import ControllerThread
from bwn.paths import ebpf_object, pipeline_files
from bwn.protocol.wire import BWN_UDP_PORT
from bwn.rundir import RunDir
from bwn.scenario import seeding
from bwn.scenario.resolved import ExperimentConfig, LinkConfig
from bwn.scenario.schedule import ConstantSchedule, table_of
from controller import aqm
from controller import entries as ent
from controller.switchctl import BwnController, PortPlan, SwitchPlan
from controller.xr_math import RcpConfig, XcpConfig

LOG = logging.getLogger(__name__)
GRPC_PORT_BASE = 50100
THRIFT_PORT_BASE = 9190
GATEWAY_MAC = "00:00:00:00:00:fe"   # hosts send everything to this MAC; switches ignore dst MACs
#: the switches a network can be made of: BMv2 processes (p4src/v1model) or the
#: eBPF switch (p4src/psa under NIKSS, controller/ebpf.py)
TARGETS = ("bmv2", "ebpf")


def check_target(target: str) -> str:
    """`target` if it is one of :data:`TARGETS`; ValueError naming them if not."""
    if target not in TARGETS:
        raise ValueError(f"unknown switch target {target!r} (one of {', '.join(TARGETS)})")
    return target


def ebpf_unsupported(cfg: ExperimentConfig) -> list[str]:
    """The links of `cfg` the eBPF switch cannot serve: RED with ECN and the
    guaranteed service are the v1model program's only (p4src/psa has neither)."""
    return [f"link {link.name}: " + " and ".join(
                what for what, on in (('aqm = "red-ecn"', link.red_ecn), ('service = "guaranteed"', link.guaranteed))
                if on)
            for link in cfg.links if link.red_ecn or link.guaranteed]


@dataclass
class BuiltNetwork:
    net: Any
    plans: list[SwitchPlan]
    linkem_nodes: list[Any] = field(default_factory=list)
    # With `[experiment] linkem_shared`: the one bwn-links process for every linkem node.
    linkem_group: Any = None
    # Per link name: the interfaces at its a and b ends (through a bwn-link node if delayed).
    ends: dict[str, tuple[Any, Any]] = field(default_factory=dict)


def build_network(cfg: ExperimentConfig, log_dir: Path, frame_bytes: Optional[int] = None,
                  target: str = "bmv2") -> BuiltNetwork:
    """Mininet network for `cfg` (not started). `frame_bytes`: the frame size that
    converts every port's rate to BMv2's packets/s (and sizes the eBPF switch's
    queues in bytes); None: the agents' data frames on ports that carry a flow's
    data, ACK frames on the others. `target`: the switches, BMv2 processes
    ("bmv2") or the PSA program in the kernel under NIKSS ("ebpf"), each
    switch's packets on a CPU of its own in turn."""
    # Mininet only when a network is built: the runner's other parts (switch plans,
    # options, the run's bookkeeping) are used and tested where it is not installed.
    from mininet.link import Link
    # imported here: Mininet is Debian's and needs root; the rest of the module does not
    from mininet.net import Mininet

    from topologies.nodes import Bmv2MininetSwitch, BwnHost, EbpfMininetSwitch, LinkemNode

    check_target(target)
    net = Mininet(topo=None, controller=None, build=False, autoSetMacs=False, link=Link,
                  waitConnected=False)
    for i, sw in enumerate(cfg.switches):
        if target == "ebpf":
            # imported here: the eBPF adapters are not BMv2's run code (bwn.reproduce.fingerprint),
            # so a BMv2 run does not load them
            from controller.ebpf import pipeline_id, switch_cpu
            net.addSwitch(sw.name, cls=EbpfMininetSwitch, dpid=f"{i + 1:016x}", pipe_id=pipeline_id(i),
                          cpu=switch_cpu(i), log_dir=str(log_dir))
        else:
            net.addSwitch(sw.name, cls=Bmv2MininetSwitch, dpid=f"{i + 1:016x}",
                          grpc_port=sw.grpc_port or GRPC_PORT_BASE + i,
                          thrift_port=sw.thrift_port or THRIFT_PORT_BASE + i,
                          device_id=sw.device_id, log_dir=str(log_dir),
                          priority_queues=priority_queues(cfg, sw.name))
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


def _new_plan(sw: Any) -> SwitchPlan:
    """The plan of Mininet switch `sw`, without its routes, ports and reservations."""
    if getattr(sw, "pipe_id", None) is not None:     # topologies.nodes.EbpfMininetSwitch
        return SwitchPlan(name=sw.name, target="ebpf", pipe_id=sw.pipe_id, ifnames=sw.ifnames())
    return SwitchPlan(name=sw.name, grpc_addr=sw.grpc_addr, thrift_port=sw.thrift_port, device_id=sw.device_id)


def _switch_plans(cfg: ExperimentConfig, net: Any, ends: dict[str, tuple[Any, Any]],
                  frame_bytes: Optional[int] = None) -> list[SwitchPlan]:
    data_frame_bytes = frame_bytes or agent_frame_bytes(AGENT_MSS_BYTES)
    ack_frame_bytes = frame_bytes or agent_frame_bytes(0)
    # XCP's and RCP's routers at every port that applies a capacity ([dataplane]
    # explicit_feedback), their queue counted as the windows' is.
    queue_unit = cfg.dataplane.queue_unit_bytes or data_frame_bytes
    xcp = XcpConfig(queue_unit_bytes=queue_unit) if "xcp" in cfg.dataplane.explicit_feedback else None
    rcp = RcpConfig(queue_unit_bytes=queue_unit) if "rcp" in cfg.dataplane.explicit_feedback else None
    plans = []
    for sw_cfg in cfg.switches:
        sw = net.get(sw_cfg.name)
        plan = _new_plan(sw)
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
            # The guaranteed service instead of AF (service = "guaranteed"): in-profile
            # packets in the priority queue at the link's rate, the rest in priority 0's
            # FIFO at the rate less the reservations that leave by the port.
            guaranteed = carries_reserved and link.guaranteed
            reserved_bps = sum(r.rate_bps for r in cfg.reservations
                               if _on_path(cfg, r.src, r.dst, link, sw.name)) if guaranteed else 0.0
            plan.ports.append(PortPlan(port=sw.port_of(mine.name), link=link.name,
                                       schedule=link.capacity.schedule if applies else None,
                                       xcp=xcp if applies else None, rcp=rcp if applies else None,
                                       queue_packets=link.queue_packets,
                                       frame_bytes=data_frame_bytes if carries_data else ack_frame_bytes,
                                       loss=link.loss,
                                       af_queue_packets=link.af_queue_packets if carries_reserved and not guaranteed else 0,
                                       shaped_by_switch=not link.shaped_by_link,
                                       red=red_params(link, data_frame_bytes) if link.red_ecn else None,
                                       guaranteed=guaranteed, reserved_bps=reserved_bps))
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


def red_params(link: LinkConfig, frame_bytes: int) -> aqm.RedParams:
    """RED's parameters at a port of `link` (aqm = "red-ecn"): NS-2's automatic setting
    (controller/aqm.py) for the link's rate at the schedule's start, in packets of the
    agents' data frames (docs/dataplane.md, "RED with ECN marking")."""
    return aqm.RedParams.automatic(link.capacity.schedule.rate_bps(0.0), frame_bytes)


def priority_queues(cfg: ExperimentConfig, switch: str) -> int:
    """BMv2's priority queues per port of `switch`: 2 when one of its links has the
    guaranteed service (its priority queue), else 1 (one FIFO)."""
    return 2 if any(link.guaranteed and switch in (link.a, link.b) for link in cfg.links) else 1


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
class ScenarioNetwork:
    """A scenario's network, from build to teardown; `bwn run` and `bwn net` share it.

    The constructor builds the Mininet network (nothing runs yet). :meth:`start`
    starts the switches (of the target) and hosts, gives each host a default route and static
    ARP, starts a `bwn-link` per delayed link and the controller (in its thread:
    pipeline, routes, schedules, telemetry). :meth:`stop` ends all of it, however
    far `start` got: link emulators, controller, then Mininet (switch processes,
    links, host namespaces), then any process still in a host's namespace (e.g.
    one a user daemonized); it is safe to call twice. The caller holds the
    experiment lock (bwn/emulation/runlock.py). Outputs in `out_dir`: capacity.csv,
    telemetry.csv, the emulators' logs, switch logs in `switch-logs/`.
    `frame_bytes`: see :func:`build_network`. `linkem_args`: link name -> more
    `bwn-link` options for that link's emulator (e.g. the soak's jitter and loss,
    benchmarks/soak.py); the scenario's delay and seed are always given. `target`:
    BMv2 switches ("bmv2") or the eBPF switch ("ebpf": controller/ebpf.py)."""

    def __init__(self, cfg: ExperimentConfig, out_dir: Path, progress: Callable[[str], None] = print,
                 label: str = "", frame_bytes: Optional[int] = None,
                 linkem_args: Optional[Mapping[str, Sequence[str]]] = None, target: str = "bmv2") -> None:
        self.cfg = cfg
        self.out_dir = out_dir
        self.run_dir = RunDir(out_dir)
        self.log_dir = self.run_dir.switch_logs
        self.progress = progress
        self.label = label
        self.target = check_target(target)
        self.p4info: Optional[Path] = None
        self.p4blob: Optional[Path] = None
        if target == "ebpf":
            unsupported = ebpf_unsupported(cfg)
            if unsupported:
                raise ValueError(f"the eBPF switch cannot run {'; '.join(unsupported)} (BMv2 only: --target bmv2)")
            ebpf_object()       # a clear error now if `make build-ebpf` has not run
        else:
            self.p4info, self.p4blob = pipeline_files()
        self.frame_bytes = frame_bytes
        self.linkem_args = {name: list(args) for name, args in (linkem_args or {}).items()}
        self.built = build_network(cfg, self.log_dir, frame_bytes, target)
        self.controller: Optional[BwnController] = None
        self.controller_thread: Optional[ControllerThread] = None
        self._stopped = False

    @property
    def net(self) -> Any:
        return self.built.net

    def start(self) -> None:
        cfg, net = self.cfg, self.net
        kind = "eBPF (NIKSS)" if self.target == "ebpf" else "BMv2"
        self.progress(f"{self.label}starting {len(cfg.switches)} {kind} switches and {len(cfg.hosts)} hosts")
        net.start()
        configure_hosts(cfg, net)
        self._start_linkems()
        window = ent.WindowConfig(cfg.dataplane.window_us, cfg.dataplane.flow_window_us,
                                  cfg.dataplane.queue_unit_bytes or self.frame_bytes
                                  or agent_frame_bytes(AGENT_MSS_BYTES))
        controller_class = BwnController
        if self.target == "ebpf":
            from controller.ebpf import EbpfController  # not BMv2's run code (see build_network)
            controller_class = EbpfController
        self.controller = controller_class(self.built.plans, self.p4info, self.p4blob, self.out_dir, window,
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
        run = self.run_dir
        stats = {em.name: run.linkem_stats(em.name) for em in nodes}
        if shared:
            from topologies.nodes import LinkemGroup  # Mininet's (see build_network)

            self.built.linkem_group = LinkemGroup(nodes)
            self.built.linkem_group.start(args, stats, run.linkem_group_stats,
                                          run.linkem_group_log, cfg.linkem_rt_priority)
            return
        for em in nodes:
            em.start_linkem(args[em.name], run.linkem_log(em.name), stats[em.name])

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
        from topologies.nodes import end_processes_in, interrupt_command, node_namespaces  # Mininet's
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
