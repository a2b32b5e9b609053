"""The controller's eBPF target: p4src/psa/bwn.p4 run by NIKSS in the kernel.

The PSA program keeps the v1model program's tables, actions and parameters
where the two share a job, so the switch plans are the same (controller/
switchctl.py's SwitchPlan, PortPlan); this module holds what differs
(p4src/psa/README.md explains each):

* **names**: p4c-ebpf names objects ``<control>_<name>`` (``BwnIngress_ipv4_lpm``)
  and NIKSS takes action parameters in declaration order;
* **ports**: a PSA port is an ifindex; per-port state is indexed by the plan's
  port number (`pidx`, below MAX_PORTS, as BMv2's registers are indexed by the
  port), which every route carries with the ifindex;
* **routes**: one table for all IPv4, the MACs as two parameters;
* **capacity**: one ``set_port`` action whose bytes -> kb/s shift is a
  parameter (p4c-ebpf shifts by a runtime value), not one action per window;
* **the bottleneck**: the port's rate and FIFO are an ``htb`` class with a
  ``bfifo`` on its egress interface (:class:`PortQdisc`), in bytes; the program
  keeps a virtual copy of that queue (``port_queue``: the rate in bytes per ns
  and the FIFO's limit) for BI, the Assured Forwarding threshold (in bytes) and
  the queue-emptied count;
* **reservations**: an indirect meter per reservation, indexed by its entry;
* **telemetry**: a digest per port and closed window whose queue is in bytes;
* **one CPU per switch**: registers are read and written by separate map
  operations, so every port of a switch steers its packets to one CPU (RPS),
  which makes the switch's state single-writer (:func:`steer_to_cpu`).
"""
from __future__ import annotations

import asyncio
import ipaddress
import logging
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional, Sequence

from bwn.paths import BUILD
from bwn.protocol import dataplane_math as dm
from controller import entries as ent
from controller.nikss import Key, Pipeline
from controller.switchctl import BwnController, PortPlan, SwitchPlan

LOG = logging.getLogger("bwn.controller.ebpf")

INGRESS = "BwnIngress"
T_ROUTES = f"{INGRESS}_ipv4_lpm"
T_WINDOW = f"{INGRESS}_window_config"
T_PORT = f"{INGRESS}_port_config"
T_QUEUE = f"{INGRESS}_port_queue"
T_FLOWS_LOG = f"{INGRESS}_flows_log"
T_RESERVATIONS = f"{INGRESS}_reservations"
METER = f"{INGRESS}_reservation_meter"
DROP_COUNTER = f"{INGRESS}_drop_counter"
QUEUE_EMPTIED_COUNTER = f"{INGRESS}_queue_emptied"
QUEUE_FULL_COUNTER = f"{INGRESS}_queue_full"
QUEUE_DRY_REGISTER = f"{INGRESS}_queue_dry"
TELEMETRY_DIGEST = "BwnIngressDeparser_port_telemetry"
RESERVATION_METERS = 256          # p4src/psa/bwn.p4
QUEUE_FP_BITS = 16                # the virtual queue counts 2^-16 bytes
RATE_FP_BITS = 32                 # its rate is bytes per ns * 2^32
U64_MAX = 2**64 - 1


# ---- table entries ------------------------------------------------------------
@dataclass(frozen=True)
class Entry:
    """One NIKSS table write: table, action, key fields, action parameters (in
    the action's order), and the priority of a ternary entry."""

    table: str
    action: str
    keys: tuple[Key, ...]
    params: tuple[int, ...]
    priority: Optional[int] = None

    def add(self, pipe: Pipeline) -> None:
        pipe.table_add(self.table, self.action, self.keys, self.params, self.priority)

    def update(self, pipe: Pipeline) -> None:
        pipe.table_update(self.table, self.action, self.keys, self.params, self.priority)

    def set(self, pipe: Pipeline) -> None:
        """Add, or update when the key is there (libnikss prints its refusal of the add)."""
        pipe.table_set(self.table, self.action, self.keys, self.params, self.priority)


def check_pidx(pidx: int) -> None:
    if not 0 <= pidx < dm.MAX_PORTS:
        raise dm.ConfigError(f"port {pidx} is out of range: the dataplane keeps state for "
                             f"ports 0..{dm.MAX_PORTS - 1}")


def route(prefix: str, ifindex: int, pidx: int, dst_mac: str, src_mac: str,
          options: ent.PortOptions = ent.PortOptions(), frame_bytes: int = 1514) -> Entry:
    """An ``ipv4_lpm`` entry: packets to `prefix` leave by the interface `ifindex`,
    whose state is at `pidx`. Options as on BMv2 (controller/entries.py), but the
    Assured Forwarding threshold is in bytes of the virtual queue: the port's
    `af_queue_packets` frames of `frame_bytes`."""
    check_pidx(pidx)
    net = ipaddress.IPv4Network(prefix, strict=False)
    key = (Key.lpm(int(net.network_address), net.prefixlen),)
    common = (ifindex, pidx, pidx * dm.FLOW_SLOTS, ent.mac_to_int(dst_mac), ent.mac_to_int(src_mac))
    if not options.any:
        return Entry(T_ROUTES, f"{INGRESS}_route", key, common)
    af_bytes = options.af_queue_packets * frame_bytes
    if af_bytes >= 2**31:
        raise dm.ConfigError(f"AF threshold {options.af_queue_packets} x {frame_bytes} B exceeds 2^31 - 1 bytes")
    word = (int(options.reservations) << 31) | af_bytes
    return Entry(T_ROUTES, f"{INGRESS}_route_checked", key, common + (dm.loss_threshold(options.loss), word))


def window_config(cfg: ent.WindowConfig) -> Entry:
    """The keyless ``window_config``'s default action (the windows in us, as BMv2's)."""
    return Entry(T_WINDOW, f"{INGRESS}_roll_window", (),
                 (dm.window_mask(cfg.window_us), cfg.window_us,
                  dm.window_mask(cfg.flow_window_us) & dm.U32_MAX, cfg.flow_window_us))


def port_capacity(pidx: int, capacity_bps: float, window: ent.WindowConfig) -> Entry:
    """IC of the port at `pidx` (bytes per window, kb/s, log7) and the window's
    bytes -> kb/s shift (K - 6 for a window of 2^K us)."""
    check_pidx(pidx)
    cap = dm.PortCapacity.from_bps(capacity_bps, window.window_us)
    return Entry(T_PORT, f"{INGRESS}_set_port", (Key.exact(pidx),),
                 (cap.cap_bytes, cap.cap_kbps, cap.cap_log7, window.window_log2 - 6))


@dataclass(frozen=True)
class VirtualQueue:
    """The ``port_queue`` entry of a port: the virtual copy of its qdisc."""

    rate_fp: int        # bytes per ns * 2^32
    idle_ns: int        # a gap this long empties the queue (and keeps gap * rate in 64 bits)
    limit_bytes: int    # the FIFO's limit
    drain_fp: int       # ns per 2^-16 byte * 2^32: the queue_dry register's drain time

    @classmethod
    def of(cls, rate_bps: float, limit_bytes: int) -> "VirtualQueue":
        if rate_bps <= 0:
            raise dm.ConfigError(f"a port's rate must be positive, got {rate_bps} b/s")
        if not 0 < limit_bytes < 2**32:
            raise dm.ConfigError(f"a port's queue must hold 1 .. 2^32 - 1 bytes, got {limit_bytes}")
        rate_fp = max(1, round(rate_bps / 8e9 * 2**RATE_FP_BITS))
        # gap * rate_fp + 2^15 must stay below 2^64; the queue is empty long before
        idle_ns = (U64_MAX - (1 << (QUEUE_FP_BITS - 1))) // rate_fp
        drain_ns = limit_bytes * 8e9 / rate_bps
        if drain_ns >= idle_ns:
            raise dm.ConfigError(f"a queue of {limit_bytes} B at {rate_bps:g} b/s drains in {drain_ns / 1e9:.0f} s, "
                                 f"longer than the virtual queue can measure ({idle_ns / 1e9:.0f} s)")
        # the program's drain time of q: ((q >> 8) * drain_fp) >> 24 = q * drain_fp / 2^32 ns
        drain_fp = round(8e9 * 2**QUEUE_FP_BITS / rate_bps)
        if ((limit_bytes << QUEUE_FP_BITS) >> 8) * drain_fp >= 2**64:
            raise dm.ConfigError(f"a queue of {limit_bytes} B at {rate_bps:g} b/s is too slow for the "
                                 f"virtual queue's drain time (64 bits)")
        return cls(rate_fp, idle_ns, limit_bytes, drain_fp)

    @property
    def rate_bps(self) -> float:
        return self.rate_fp * 8e9 / 2**RATE_FP_BITS

    def entry(self, pidx: int) -> Entry:
        check_pidx(pidx)
        return Entry(T_QUEUE, f"{INGRESS}_set_queue", (Key.exact(pidx),),
                     (self.rate_fp, self.idle_ns, self.limit_bytes, self.drain_fp))


def flows_log_table() -> list[Entry]:
    return [Entry(T_FLOWS_LOG, f"{INGRESS}_set_share", (Key.exact(z),), (v,))
            for z, v in dm.flows_log7_table().items()]


def static_tables(cfg: ent.WindowConfig) -> list[Entry]:
    """Everything that depends only on the window configuration."""
    return flows_log_table()


def reservation(res: ent.Reservation, meter_index: int) -> tuple[Entry, dm.MeterRates]:
    """The ``reservations`` entry that marks the flow (its meter at `meter_index`)
    and that meter's trTCM rates (bytes/s and bytes, CIR = PIR)."""
    if not 0 <= meter_index < RESERVATION_METERS:
        raise dm.ConfigError(f"at most {RESERVATION_METERS} reservations per switch")
    if not 0 <= res.dscp < 64:
        raise dm.ConfigError(f"DSCP must be 0..63, got {res.dscp}")
    # keys in the table's order: src_addr, dst_addr, src_port, dst_port, protocol
    keys = (Key.ternary(int(ipaddress.IPv4Address(res.src)), 0xFFFFFFFF),
            Key.ternary(int(ipaddress.IPv4Address(res.dst)), 0xFFFFFFFF),
            Key.ternary(res.src_port or 0, 0xFFFF if res.src_port is not None else 0),
            Key.ternary(res.dst_port or 0, 0xFFFF if res.dst_port is not None else 0),
            Key.ternary(res.protocol or 0, 0xFF if res.protocol is not None else 0))
    entry = Entry(T_RESERVATIONS, f"{INGRESS}_reserved_flow", keys, (meter_index, res.dscp),
                  priority=res.priority)
    return entry, dm.MeterRates.for_reservation(res.rate_bps, res.burst_bytes)


def install_reservation(pipe: Pipeline, res: ent.Reservation, meter_index: int) -> None:
    entry, rates = reservation(res, meter_index)
    pipe.meter_update(METER, meter_index, rates.pir_bytes_per_s, rates.pburst_bytes,
                      rates.cir_bytes_per_s, rates.cburst_bytes)
    entry.add(pipe)


# ---- telemetry ----------------------------------------------------------------
def _int32(value: int) -> int:
    value &= dm.U32_MAX
    return value - (1 << 32) if value >= 1 << 31 else value


@dataclass(frozen=True)
class EbpfTelemetry:
    """One telemetry digest of the PSA program (`psa_port_telemetry_t`,
    p4src/psa/include/types.p4)."""

    ifindex: int
    pidx: int
    window_start_us: int
    capacity_kbps: int
    rate_kbps: int
    avail_kbps: int
    queue_bytes: int
    flows_current: int
    flows_last: int
    ebn_code: int

    @classmethod
    def from_digest(cls, d: dict[str, int]) -> "EbpfTelemetry":
        return cls(ifindex=d["port"], pidx=d["pidx"], window_start_us=d["window_start_us"],
                   capacity_kbps=d["capacity_kbps"], rate_kbps=d["rate_kbps"],
                   avail_kbps=_int32(d["avail_kbps"]), queue_bytes=d["queue_bytes"],
                   flows_current=d["flows_current"], flows_last=d["flows_last"], ebn_code=d["ebn_code"])

    def as_port_telemetry(self, queue_unit_bytes: int) -> ent.PortTelemetry:
        """The target-neutral record (its port is the plan's port, `pidx`; the
        queue in packets of `queue_unit_bytes`, rounded)."""
        return ent.PortTelemetry(port=self.pidx, window_start_us=self.window_start_us,
                                 capacity_kbps=float(self.capacity_kbps), rate_kbps=float(self.rate_kbps),
                                 avail_kbps=float(self.avail_kbps),
                                 queue_pkts=round(self.queue_bytes / queue_unit_bytes),
                                 flows=max(self.flows_current, self.flows_last), ebn_code=self.ebn_code)


# ---- the kernel's side of a port -------------------------------------------------
def _netns_cmd(netns: Optional[str], *cmd: str) -> list[str]:
    return ["ip", "netns", "exec", netns, *cmd] if netns else list(cmd)


def _run(cmd: list[str], what: str) -> None:
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"{what}: `{' '.join(cmd)}` failed: {res.stderr.strip() or res.stdout.strip()}")


# htb's class and the FIFO under it. Every class_of_service the program sets
# (0 best effort and AF13, 1 in-profile AF11) lands in this one class: the
# class_of_service becomes skb->priority, which names no class of this qdisc,
# so htb gives the packet to its default class. One FIFO per port, as RFC 2597
# asks (a flow is never reordered); the program drops out-of-profile packets
# above the AF threshold, as on BMv2.
HTB_HANDLE = "1:"
HTB_CLASS = "1:10"
FIFO_HANDLE = "10:"
CLASS_OF_SERVICE_TO_CLASS = {0: HTB_CLASS, 1: HTB_CLASS}


@dataclass
class PortQdisc:
    """The bottleneck of one egress interface: an ``htb`` class at the port's rate
    (burst: one frame, so the rate holds over any span longer than a frame's
    time) with a ``bfifo`` of `limit_bytes` under it, in `netns`."""

    ifname: str
    limit_bytes: int
    netns: Optional[str] = None
    burst_bytes: int = 1514

    def _tc(self, *args: str) -> list[str]:
        return _netns_cmd(self.netns, "tc", *args)

    def _class_args(self, rate_bps: float) -> list[str]:
        rate = f"{max(1, round(rate_bps))}bit"
        return ["htb", "rate", rate, "ceil", rate, "burst", str(self.burst_bytes), "cburst", str(self.burst_bytes)]

    def install(self, rate_bps: float) -> None:
        self.remove()
        _run(self._tc("qdisc", "add", "dev", self.ifname, "root", "handle", HTB_HANDLE, "htb",
                      "default", HTB_CLASS.split(":")[1]), f"{self.ifname}: htb")
        _run(self._tc("class", "add", "dev", self.ifname, "parent", HTB_HANDLE, "classid", HTB_CLASS,
                      *self._class_args(rate_bps)), f"{self.ifname}: htb class")
        _run(self._tc("qdisc", "add", "dev", self.ifname, "parent", HTB_CLASS, "handle", FIFO_HANDLE,
                      "bfifo", "limit", str(self.limit_bytes)), f"{self.ifname}: bfifo")

    def set_rate(self, rate_bps: float) -> None:
        """A new rate; the queue stays."""
        _run(self._tc("class", "change", "dev", self.ifname, "parent", HTB_HANDLE, "classid", HTB_CLASS,
                      *self._class_args(rate_bps)), f"{self.ifname}: htb rate")

    def remove(self) -> None:
        """Delete the root qdisc, if any (an interface that is gone has none)."""
        subprocess.run(self._tc("qdisc", "del", "dev", self.ifname, "root"), capture_output=True)


def steer_to_cpu(ifnames: Iterable[str], cpu: int, netns: Optional[str] = None) -> None:
    """Receive Packet Steering: every packet arriving on `ifnames` is processed
    (PSA-eBPF's TC ingress included) on `cpu`, so the switch's registers have one
    writer. The mask is written on every receive queue of each interface."""
    mask = format(1 << cpu, "x")
    for name in ifnames:
        script = (f"for q in /sys/class/net/{name}/queues/rx-*; do echo {mask} > $q/rps_cpus || exit 1; done")
        _run(_netns_cmd(netns, "sh", "-c", script), f"{name}: RPS to CPU {cpu}")


def ifindex(ifname: str, netns: Optional[str] = None) -> int:
    res = subprocess.run(_netns_cmd(netns, "cat", f"/sys/class/net/{ifname}/ifindex"),
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"no interface {ifname}{f' in {netns}' if netns else ''}")
    return int(res.stdout)


def switch_cpu(index: int, cpus: Optional[Sequence[int]] = None) -> int:
    """The CPU the `index`-th switch's packets are steered to: round robin."""
    import os
    cpus = list(cpus) if cpus is not None else sorted(os.sched_getaffinity(0))
    return cpus[index % len(cpus)]


def pipeline_id(index: int, base: int = 100) -> int:
    """NIKSS pipeline id of the `index`-th switch of an experiment."""
    return base + index


def default_object() -> Path:
    """build/ebpf/bwn.o, what `make build-ebpf` writes (it may not exist yet)."""
    return BUILD / "ebpf" / "bwn.o"


# ---- one switch: a pipeline on a set of interfaces -----------------------------
class EbpfSwitch:
    """p4src/psa/bwn.p4 loaded by NIKSS as pipeline `pipe_id` and attached to
    `ports` (port number -> interface name) in `netns` (None: this process's
    namespace), its packets steered to `cpu` (None: not steered).

    :meth:`start` loads and attaches (a stale pipeline of the same id, left by a
    run that was killed, is detached and unloaded first, and said so in the
    log); :meth:`stop` detaches every port, unloads the pipeline (its pins
    under /sys/fs/bpf go with it) and deletes the ports' root qdiscs: nothing
    of it is left. Both are safe to call again.

    NIKSS attaches, with the TC program, an XDP "helper" to each port that
    gives non-IPv4 frames the IPv4 EtherType for TC's sake and keeps the real
    one aside. bwn drops non-IPv4 frames in its parser, which it does as well
    with their own EtherType, so the helper is detached again (`xdp_helper`
    False): a veth that runs an XDP program copies every frame it receives
    into XDP's buffer first, which cost 1.2-1.6 times the CPU per frame here
    (docs/dataplane.md, "Forwarding rate against the fast BMv2")."""

    def __init__(self, name: str, ports: dict[int, str], pipe_id: int, netns: Optional[str] = None,
                 cpu: Optional[int] = None, obj: Optional[Path] = None, log_dir: Path = Path("build/logs"),
                 xdp_helper: bool = False) -> None:
        for port in ports:
            check_pidx(port)
        self.name = name
        self.ports = dict(ports)
        self.pipe_id = pipe_id
        self.netns = netns
        self.cpu = cpu
        self.obj = Path(obj) if obj is not None else default_object()
        self.log_dir = Path(log_dir)
        self.qdiscs: dict[int, PortQdisc] = {}
        self.xdp_helper = xdp_helper
        self.started = False
        from controller.nikss import PipelineProcess
        self.process = PipelineProcess(pipe_id, netns, self.log_path)

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"{self.name}.log"

    def ifindexes(self) -> dict[int, int]:
        return {port: ifindex(name, self.netns) for port, name in self.ports.items()}

    def start(self) -> "EbpfSwitch":
        from controller.nikss import ensure_bpf_fs, nikss_missing
        why = nikss_missing()
        if why:
            raise FileNotFoundError(why)
        if not self.obj.exists():
            raise FileNotFoundError(f"{self.obj}: no BPF object (run `make build-ebpf`)")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        ensure_bpf_fs()
        if self.process.exists():
            with open(self.log_path, "a") as f:
                f.write(f"pipeline {self.pipe_id} was loaded already (a run that ended without its "
                        f"teardown?): detaching and unloading it first\n")
            self._detach_and_unload()
        self.started = True
        try:
            self.process.load(self.obj)
            for name in self.ports.values():
                self.process.add_port(name)
                if not self.xdp_helper:
                    _run(_netns_cmd(self.netns, "ip", "link", "set", "dev", name, "xdp", "off"),
                         f"{name}: detach NIKSS's XDP helper")
            if self.cpu is not None:
                steer_to_cpu(self.ports.values(), self.cpu, self.netns)
        except BaseException:
            self.stop()
            raise
        return self

    def _detach_and_unload(self) -> None:
        errors = []
        for name in self.ports.values():
            try:
                self.process.del_port(name)
            except Exception as exc:   # go on: the unload and the others still have to happen
                errors.append(exc)
        try:
            self.process.unload()
        except Exception as exc:
            errors.append(exc)
        if errors:
            raise errors[0]

    def add_qdisc(self, port: int, rate_bps: float, limit_bytes: int) -> PortQdisc:
        """The bottleneck on `port`'s interface (htb at `rate_bps`, a bfifo of `limit_bytes`)."""
        q = PortQdisc(self.ports[port], limit_bytes, self.netns)
        self.qdiscs[port] = q
        q.install(rate_bps)
        return q

    def stop(self) -> None:
        if not self.started:
            return
        self.started = False
        try:
            self._detach_and_unload()
        finally:
            # every port's root qdisc, whoever added it (the controller adds the
            # bottleneck's): the interfaces may outlive this switch
            self.qdiscs.clear()
            for name in self.ports.values():
                PortQdisc(name, 1, self.netns).remove()
            if self.cpu is not None:
                try:
                    steer_to_cpu_off(self.ports.values(), self.netns)
                except RuntimeError:
                    pass    # the interfaces may be gone already

    def leftovers(self) -> list[str]:
        """What of this switch is still loaded or attached (empty after stop())."""
        from controller.nikss import pinned_path
        left = []
        if pinned_path(self.pipe_id).exists():
            left.append(f"pins {pinned_path(self.pipe_id)}")
        for name in self.ports.values():
            res = subprocess.run(_netns_cmd(self.netns, "tc", "qdisc", "show", "dev", name),
                                 capture_output=True, text=True)
            if res.returncode == 0 and ("clsact" in res.stdout or "htb" in res.stdout):
                left.append(f"{name}: {' '.join(res.stdout.split()[:2])} qdisc")
            res = subprocess.run(_netns_cmd(self.netns, "ip", "link", "show", "dev", name),
                                 capture_output=True, text=True)
            if res.returncode == 0 and " xdp" in res.stdout:
                left.append(f"{name}: an XDP program")
        return left

    def __enter__(self) -> "EbpfSwitch":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def steer_to_cpu_off(ifnames: Iterable[str], netns: Optional[str] = None) -> None:
    """Undo :func:`steer_to_cpu` (RPS off: the mask 0)."""
    for name in ifnames:
        script = f"for q in /sys/class/net/{name}/queues/rx-*; do echo 0 > $q/rps_cpus || exit 1; done"
        _run(_netns_cmd(netns, "sh", "-c", script), f"{name}: RPS off")


# ---- the controller's eBPF backend ----------------------------------------------
def route_entries(plan: SwitchPlan, frame_bytes_of: dict[int, int], only_port: Optional[int] = None) -> list[Entry]:
    """The routing entries of a SwitchPlan for the PSA program (those that leave
    by `only_port`, if given), each with its port's options, as
    controller/switchctl.py's route_entries does for BMv2."""
    ports = {pp.port: pp for pp in plan.ports}
    reserved_dsts = {r.dst for r in plan.reservations}
    out = []
    for prefix, port, dst_mac, src_mac in plan.routes:
        if only_port is not None and port != only_port:
            continue
        pp = ports.get(port)
        options = ent.PortOptions(loss=pp.loss if pp else 0.0,
                                  reservations=prefix.split("/")[0] in reserved_dsts,
                                  af_queue_packets=pp.af_queue_packets if pp else 0)
        out.append(route(prefix, ifindex(plan.ifnames[port]), port, dst_mac, src_mac, options,
                         frame_bytes_of.get(port, 1514)))
    return out


class _NoQueueControl:
    """The eBPF switch's queues are its ports' qdiscs, set with each rate (no connection)."""

    def close(self) -> None:
        pass


class EbpfHandle:
    """The controller's side of one eBPF switch: its pipeline's tables through
    libnikss, its telemetry digests, and its ports' qdiscs."""

    def __init__(self, plan: SwitchPlan) -> None:
        if plan.pipe_id is None:
            raise ValueError(f"{plan.name}: an eBPF switch plan needs its pipeline id")
        missing = [p for p in (pp.port for pp in plan.ports) if p not in plan.ifnames]
        if missing:
            raise ValueError(f"{plan.name}: ports {missing} have no interface in the plan")
        self.name = plan.name
        self.plan = plan
        self.is_up = False
        self.pipe: Optional[Pipeline] = None
        self.digests = None
        self.qdiscs: dict[int, PortQdisc] = {}

    def open(self) -> Pipeline:
        if self.pipe is None:
            pipe = Pipeline(self.plan.pipe_id)
            if not pipe.exists():
                pipe.close()
                raise RuntimeError(f"{self.name}: NIKSS pipeline {self.plan.pipe_id} is not loaded")
            self.pipe = pipe
            self.digests = pipe.digests(TELEMETRY_DIGEST)
        return self.pipe

    def close(self) -> None:
        if self.digests is not None:
            self.digests.close()
            self.digests = None
        if self.pipe is not None:
            self.pipe.close()
            self.pipe = None
        self.is_up = False


class EbpfController(BwnController):
    """controller/switchctl.py's controller for eBPF switches: the same plans,
    schedules, pins, telemetry files and status; the switches' state goes
    through libnikss, and a port's rate and queue are its htb + bfifo qdisc and
    the program's virtual copy of them (in bits/s and bytes).

    Differences from BMv2: no sessions to lose (the pipeline lives in the kernel,
    loaded by the switch's node before the controller starts); no queue
    look-ahead (htb serves the packets already queued at the new rate at once,
    where BMv2 fixes a packet's departure when it is enqueued); telemetry is
    polled from the digest queue every `poll_interval_s`."""

    target = "ebpf"
    poll_interval_s = 0.02

    def _make_switches(self, plans: list[SwitchPlan], p4info: Optional[Path], p4blob: Optional[Path]) -> list:
        return [EbpfHandle(p) for p in plans]

    def _queue_control(self, plan: SwitchPlan) -> _NoQueueControl:  # type: ignore[override]
        return _NoQueueControl()

    def _queue_target_bps(self, plan: SwitchPlan, pp: PortPlan, t_s: float) -> float:
        return self._target_bps(pp, t_s)

    def _frame_bytes(self, plan: SwitchPlan) -> dict[int, int]:
        return {pp.port: pp.frame_bytes for pp in plan.ports}

    async def _start_sessions(self):
        for sw in self.switches:
            await self._install(sw)
        return asyncio.create_task(asyncio.Event().wait(), name="ebpf-pipelines")

    async def _install(self, sw: EbpfHandle) -> None:
        """The switch's whole state in its freshly loaded pipeline: the window
        configuration, EBN's table, the routes, the reservations and each port's
        capacity and queue."""
        plan = sw.plan
        pipe = sw.open()         # loaded by the switch's node for this run: its tables are empty
        wc = window_config(self.window)
        pipe.table_default(wc.table, wc.action, wc.params)
        for e in static_tables(self.window):
            e.add(pipe)
        for e in route_entries(plan, self._frame_bytes(plan)):
            e.add(pipe)
        for i, res in enumerate(plan.reservations):
            install_reservation(pipe, res, i)
        sw.digests.poll()            # reports of a pipeline's earlier life
        sw.is_up = True
        for pp in plan.ports:
            if pp.schedule is not None:
                await self._apply_rate(sw, plan, pp, self._target_bps(pp, 0.0), _NoQueueControl(), first=True)
        self.ready_count[sw.name] += 1

    async def _apply_rate(self, sw: EbpfHandle, plan: SwitchPlan, pp: PortPlan,  # type: ignore[override]
                          rate_bps: float, queues: object, first: bool = False,
                          queue_rate_bps: Optional[float] = None) -> Optional[float]:
        """The port's capacity (what it stamps) and, when the switch shapes the
        link, its qdisc's rate and the virtual queue's; returns the rate in
        frames of the port's size per second (capacity.csv's queue_pps, as BMv2's)."""
        pipe = sw.open()
        write = Entry.add if first else Entry.update
        write(port_capacity(pp.port, rate_bps, self.window), pipe)
        pps: Optional[float] = None
        if pp.shaped_by_switch:
            limit = pp.queue_packets * pp.frame_bytes
            q = sw.qdiscs.get(pp.port)
            if q is None:
                q = sw.qdiscs[pp.port] = PortQdisc(plan.ifnames[pp.port], limit)
                q.install(rate_bps)
            else:
                q.set_rate(rate_bps)
            write(VirtualQueue.of(rate_bps, limit).entry(pp.port), pipe)
            pps = rate_bps / (8 * pp.frame_bytes)
            self.applied_queue_bps[(plan.name, pp.port)] = rate_bps
        self.applied_bps[(plan.name, pp.port)] = rate_bps
        self._log_rate(plan, pp, rate_bps, pps, pps)
        return pps

    async def _write_routes(self, sw: EbpfHandle, plan: SwitchPlan, only_port: int) -> int:  # type: ignore[override]
        pipe = sw.open()
        entries = route_entries(plan, self._frame_bytes(plan), only_port=only_port)
        for e in entries:
            pipe.table_update(e.table, e.action, e.keys, e.params)
        return len(entries)

    async def _telemetry(self, sw: EbpfHandle) -> None:
        last_row_s: dict[int, float] = {}
        ports = {pp.port for pp in sw.plan.ports}
        unit = self.window.queue_unit_bytes
        while True:
            await asyncio.sleep(self.poll_interval_s)
            try:
                items = sw.digests.poll() if sw.digests is not None else []
            except Exception as exc:   # the pipeline is gone (a teardown under way)
                LOG.warning("%s: telemetry digests: %s", sw.name, exc)
                await asyncio.sleep(0.5)
                continue
            if items:
                self._record_telemetry(sw.name, [EbpfTelemetry.from_digest(d).as_port_telemetry(unit)
                                                 for d in items], ports, last_row_s)

    async def run(self, duration_s: Optional[float] = None, ready: Optional[asyncio.Event] = None) -> None:
        try:
            await super().run(duration_s, ready)
        finally:
            for sw in self.switches:
                sw.close()
