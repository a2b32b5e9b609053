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

import ipaddress
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional, Sequence

from controller import dataplane_math as dm
from controller import entries as ent
from controller.nikss import Key, Pipeline

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
TELEMETRY_DIGEST = "BwnIngressDeparser_port_telemetry"
RESERVATION_METERS = 256          # p4src/psa/bwn.p4
QUEUE_FP_BITS = 16                # the virtual queue counts 2^-16 bytes
RATE_FP_BITS = 32                 # its rate is bytes per ns * 2^32
U64_MAX = 2**64 - 1
ETHERNET_BYTES = 14


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

    def set(self, pipe: Pipeline) -> None:
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
        return cls(rate_fp, idle_ns, limit_bytes)

    @property
    def rate_bps(self) -> float:
        return self.rate_fp * 8e9 / 2**RATE_FP_BITS

    def entry(self, pidx: int) -> Entry:
        check_pidx(pidx)
        return Entry(T_QUEUE, f"{INGRESS}_set_queue", (Key.exact(pidx),),
                     (self.rate_fp, self.idle_ns, self.limit_bytes))


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
    """One telemetry digest of the PSA program (`port_telemetry_t`)."""

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


def frame_bytes_of_ipv4(total_len: int) -> int:
    """What the program counts for a frame (and the qdisc, on a veth): IPv4's total length + 14."""
    return total_len + ETHERNET_BYTES


def switch_cpu(index: int, cpus: Optional[Sequence[int]] = None) -> int:
    """The CPU the `index`-th switch's packets are steered to: round robin."""
    import os
    cpus = list(cpus) if cpus is not None else sorted(os.sched_getaffinity(0))
    return cpus[index % len(cpus)]


def pipeline_id(index: int, base: int = 100) -> int:
    """NIKSS pipeline id of the `index`-th switch of an experiment."""
    return base + index


def default_object() -> Path:
    return Path(__file__).resolve().parents[1] / "build" / "ebpf" / "bwn.o"


# ---- one switch: a pipeline on a set of interfaces -----------------------------
class EbpfSwitch:
    """p4src/psa/bwn.p4 loaded by NIKSS as pipeline `pipe_id` and attached to
    `ports` (port number -> interface name) in `netns` (None: this process's
    namespace), its packets steered to `cpu` (None: not steered).

    :meth:`start` loads and attaches (a stale pipeline of the same id, left by a
    run that was killed, is detached and unloaded first, and said so in the
    log); :meth:`stop` detaches every port, unloads the pipeline (its pins
    under /sys/fs/bpf go with it) and deletes the ports' root qdiscs: nothing
    of it is left. Both are safe to call again."""

    def __init__(self, name: str, ports: dict[int, str], pipe_id: int, netns: Optional[str] = None,
                 cpu: Optional[int] = None, obj: Optional[Path] = None, log_dir: Path = Path("build/logs")) -> None:
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
            for port in list(self.qdiscs):
                self.qdiscs.pop(port).remove()
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
