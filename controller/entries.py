"""P4Runtime entities for p4src/v1model/bwn.p4, built with finsy.

Each function returns the finsy entities for one piece of switch state; the
controller (controller/switchctl.py) and the PTF tests (ptf-tests/) both use
them, so the tests exercise exactly what the controller installs.

finsy (https://github.com/byllyfish/finsy) is the P4Runtime client: it is
maintained, asyncio-native (one controller drives many switches), resolves
names through the P4Info, and re-runs a switch's ready handler after the switch
reconnects, which is how the controller re-pushes state when a BMv2 restarts.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Iterable

import finsy as fy

from bwn.protocol import dataplane_math as dm
from controller import aqm
from controller.xr_math import RcpConfig, XcpConfig

INGRESS = "BwnIngress"
EGRESS = "BwnEgress"

DROP_COUNTER = f"{INGRESS}.drop_counter"
QUEUE_EMPTIED_COUNTER = f"{EGRESS}.queue_emptied"   # by port: packets that left its queue empty
# Per-port counts (p4src/v1model/include/control/port_counters.p4, queue.p4, red_ecn.p4):
# packets handed to each egress port, packets that left its queue (their difference,
# less the packets still queued, is its tail drops), the drops decided after routing
# by port (index port * len(DROP_REASONS) + reason), RED's marks and drops by port
# (RED decides in the ingress: a packet it drops is not handed to the port).
PORT_ENQUEUED_COUNTER = f"{INGRESS}.port_enqueued"
PORT_DEQUEUED_COUNTER = f"{EGRESS}.port_dequeued"
PORT_DROPS_COUNTER = f"{INGRESS}.port_drops"
RED_MARKED_COUNTER = f"{INGRESS}.red_marked"
RED_DROPPED_COUNTER = f"{INGRESS}.red_dropped"
DROP_REASONS = {0: "no_route", 1: "ttl", 2: "ipv4_malformed", 3: "bwn_malformed",
                4: "random_loss", 5: "not_ipv4", 6: "af_out_of_profile", 7: "ipv4_checksum"}
DROP_REASON_CODES = {name: code for code, name in DROP_REASONS.items()}


def port_drops_index(port: int, reason: str) -> int:
    """The `port_drops` counter's index of `reason`'s drops at `port`."""
    return port * len(DROP_REASONS) + DROP_REASON_CODES[reason]

# RFC 2597 Assured Forwarding code points (p4src/shared/define.p4): a reservation's
# in-profile packets are marked AF11, its excess AF13.
DSCP_AF11 = 10
DSCP_AF13 = 14
# The guaranteed service's strict-priority queue (p4src/shared/define.p4): in-profile
# packets at a guaranteed-service port; everything else takes priority 0.
PRIORITY_GUARANTEED = 1


def mac_to_int(mac: str) -> int:
    parts = mac.split(":")
    if len(parts) != 6 or not all(len(p) == 2 for p in parts):
        raise ValueError(f"not a MAC address: {mac!r} (expected aa:bb:cc:dd:ee:ff)")
    return int("".join(parts), 16)


def _check_port(port: int) -> None:
    if not 0 <= port < dm.MAX_PORTS:
        raise dm.ConfigError(f"port {port} is out of range: the dataplane keeps state for "
                             f"ports 0..{dm.MAX_PORTS - 1}")


def port_index(port: int) -> int:
    """The per-port register index of `port` on BMv2: the port number itself."""
    _check_port(port)
    return port


MAX_AF_QUEUE_PACKETS = (1 << 29) - 1   # bits 28..0 of the options word


@dataclass(frozen=True)
class PortOptions:
    """What a route to a port must check besides forwarding (all off by default)."""

    loss: float = 0.0                 # random loss probability of the port
    reservations: bool = False        # this switch is the edge of reservations to this destination
    af_queue_packets: int = 0         # Assured Forwarding threshold of the port (0 = off)
    guaranteed: bool = False          # in-profile (AF11) packets take the port's priority queue
    red: bool = False                 # the port runs RED with ECN marking (its red_config entries)

    def __post_init__(self) -> None:
        if not 0 <= self.af_queue_packets <= MAX_AF_QUEUE_PACKETS:
            raise dm.ConfigError(f"AF queue threshold must be 0..{MAX_AF_QUEUE_PACKETS} packets, "
                                 f"got {self.af_queue_packets}")
        if self.guaranteed and self.af_queue_packets:
            raise dm.ConfigError("a port with the guaranteed service has no Assured Forwarding threshold: "
                                 "in-profile packets take its priority queue, the rest share a FIFO with tail drop")
        dm.loss_threshold(self.loss)  # validates

    @property
    def any(self) -> bool:
        return self.loss > 0 or self.reservations or self.af_queue_packets > 0 or self.guaranteed or self.red

    @property
    def options_word(self) -> int:
        """route_checked's `options` (p4src/shared/define.p4): bit 31 reservations, bit 30
        the guaranteed service, bit 29 RED, bits 28..0 the AF threshold."""
        return ((int(self.reservations) << 31) | (int(self.guaranteed) << 30) | (int(self.red) << 29)
                | self.af_queue_packets)


ROUTE_TABLES = (f"{INGRESS}.ipv4_lpm", f"{INGRESS}.ipv4_lpm_other")


def route_params(prefix: str, port: int, pidx: int, dst_mac: str, src_mac: str,
                 options: PortOptions) -> tuple[fy.P4TableMatch, dict[str, int], dict[str, int]]:
    """What every target's route entry carries: the LPM match, the parameters of
    every route action (egress port, port index, both MACs in one 96-bit word)
    and those of the `..._checked` actions for a port with options (loss
    threshold, options word; empty when the port has none). bwn.p4 on BMv2
    indexes its per-port state by the port itself, so :func:`route` drops the
    port index; the TNA program's routes keep it."""
    net = ipaddress.IPv4Network(prefix, strict=False)
    match = fy.P4TableMatch(dst_addr=(int(net.network_address), net.prefixlen))
    common = dict(port=port, pidx=pidx, macs=(mac_to_int(dst_mac) << 48) | mac_to_int(src_mac))
    checked = (dict(loss_threshold=dm.loss_threshold(options.loss), options=options.options_word)
               if options.any else {})
    return match, common, checked


def route(prefix: str, port: int, dst_mac: str, src_mac: str,
          options: PortOptions = PortOptions()) -> list[fy.P4TableEntry]:
    """IPv4 LPM route: packets to `prefix` leave by `port` with these MACs. The
    switch has two routing tables with the same routes (TCP/UDP without IPv4
    options, where the flow is counted; everything else), so a route is two
    entries. A route to a port with options (loss, reservations, AF) uses the
    `..._checked` actions, every other one the cheaper plain ones
    (p4src/v1model/bwn.p4)."""
    pidx = port_index(port)
    match, common, extra = route_params(prefix, port, pidx, dst_mac, src_mac, options)
    del common["pidx"]   # bwn.p4 on BMv2 indexes per-port state by the port itself
    if extra:
        flows = fy.P4TableAction(f"{INGRESS}.route_checked", **common, slot_base=pidx * dm.FLOW_SLOTS, **extra)
        other = fy.P4TableAction(f"{INGRESS}.route_other_checked", **common, **extra)
    else:
        flows = fy.P4TableAction(f"{INGRESS}.route", **common, slot_base=pidx * dm.FLOW_SLOTS)
        other = fy.P4TableAction(f"{INGRESS}.route_other", **common)
    return [fy.P4TableEntry(ROUTE_TABLES[0], match=match, action=flows),
            fy.P4TableEntry(ROUTE_TABLES[1], match=match, action=other)]


@dataclass(frozen=True)
class WindowConfig:
    """Measurement windows, both powers of two in microseconds, and the frame
    size BMv2's queue depth (in packets) is converted with."""

    window_us: int = 16_384
    flow_window_us: int = 131_072
    queue_unit_bytes: int = 1514

    def __post_init__(self) -> None:
        dm.check_power_of_two_us("window_us", self.window_us)
        dm.check_power_of_two_us("flow_window_us", self.flow_window_us)
        if self.queue_unit_bytes <= 0:
            raise dm.ConfigError(f"queue_unit_bytes must be positive, got {self.queue_unit_bytes}")

    @property
    def window_log2(self) -> int:
        return self.window_us.bit_length() - 1


def port_capacity(port: int, capacity_bps: float, window: WindowConfig) -> fy.P4TableEntry:
    """IC of `port` (bytes per window, kb/s, log7) for the window in `window`; the
    action is the one of the window's size (its bytes -> kb/s shift)."""
    _check_port(port)
    cap = dm.PortCapacity.from_bps(capacity_bps, window.window_us)
    return fy.P4TableEntry(
        f"{INGRESS}.port_config",
        match=fy.P4TableMatch(egress_port=port),
        action=fy.P4TableAction(f"{INGRESS}.set_port_{window.window_log2}", cap_bytes=cap.cap_bytes,
                                cap_kbps=cap.cap_kbps, cap_log7=cap.cap_log7),
    )


def port_service(port: int, slot_bytes: int) -> fy.P4TableEntry:
    """`port` is served in packets (BMv2's queue rate): every packet routed to it
    counts `slot_bytes`, the frame size its packet rate was derived from, in the
    bytes it received (OBP's BR, XCP's and RCP's y). A port without this entry
    counts each packet's length (a link served in bytes)."""
    _check_port(port)
    if slot_bytes <= 0:
        raise dm.ConfigError(f"port {port}: a packet slot must be positive, got {slot_bytes} bytes")
    return fy.P4TableEntry(f"{INGRESS}.port_service", match=fy.P4TableMatch(egress_port=port),
                           action=fy.P4TableAction(f"{INGRESS}.serve_packets", slot_bytes=slot_bytes))


def window_config(cfg: WindowConfig) -> list[fy.P4TableEntry]:
    """The keyless table the controller sets by its default action: the masks and
    lengths of the rate window and of the flow window."""
    return [fy.P4TableEntry(f"{INGRESS}.window_config", is_default_action=True,
                            action=fy.P4TableAction(f"{INGRESS}.roll_window",
                                                    mask=dm.window_mask(cfg.window_us),
                                                    window_us=cfg.window_us,
                                                    flow_mask=dm.window_mask(cfg.flow_window_us) & dm.U32_MAX,
                                                    flow_window_us=cfg.flow_window_us))]


def queue_tables(cfg: WindowConfig) -> list[fy.P4TableEntry]:
    """Queue depth (packets on BMv2) -> bytes, the BI of OBP eq. 6."""
    return [fy.P4TableEntry(f"{INGRESS}.queue_bytes", match=fy.P4TableMatch(queue=q),
                            action=fy.P4TableAction(f"{INGRESS}.set_queue_bytes", bytes=q * cfg.queue_unit_bytes))
            for q in range(1, dm.QUEUE_TABLE_SIZE)]


def flows_log_table() -> list[fy.P4TableEntry]:
    return [fy.P4TableEntry(f"{INGRESS}.flows_log", match=fy.P4TableMatch(flows=z),
                            action=fy.P4TableAction(f"{INGRESS}.set_share", log7=v))
            for z, v in dm.flows_log7_table().items()]


def static_tables(cfg: WindowConfig) -> list[fy.P4TableEntry]:
    """Everything that depends only on the window configuration (no topology)."""
    return queue_tables(cfg) + flows_log_table()


XCP_PORT_TABLE = f"{EGRESS}.xcp_port"
RCP_PORT_TABLE = f"{EGRESS}.rcp_port"


def xcp_port(port: int, cfg: XcpConfig = XcpConfig()) -> fy.P4TableEntry:
    """XCP on egress `port` (Katabi, Handley, Rohrs; p4src/v1model/include/control/xcp.p4):
    its packets with an XCP sender's XR header get the port's feedback. The port's
    capacity C is the one `port_capacity` installs (the stamp's narrow link)."""
    _check_port(port)
    return fy.P4TableEntry(XCP_PORT_TABLE, match=fy.P4TableMatch(port=port),
                           action=fy.P4TableAction(f"{EGRESS}.set_xcp", **cfg.params))


def rcp_port(port: int, cfg: RcpConfig = RcpConfig()) -> fy.P4TableEntry:
    """RCP on egress `port` (Dukkipati, McKeown; p4src/v1model/include/control/rcp.p4):
    its packets with an RCP sender's XR header are stamped with the port's rate R(t),
    which starts at and never exceeds the capacity `port_capacity` installs."""
    _check_port(port)
    return fy.P4TableEntry(RCP_PORT_TABLE, match=fy.P4TableMatch(port=port),
                           action=fy.P4TableAction(f"{EGRESS}.set_rcp", **cfg.params))


@dataclass(frozen=True)
class Reservation:
    """A GTCP bandwidth reservation, metered at the edge switch."""

    src: str
    dst: str
    rate_bps: float
    protocol: int | None = 17
    src_port: int | None = None
    dst_port: int | None = None
    dscp: int = DSCP_AF11
    burst_bytes: int = 15_000
    priority: int = 10


def reservation(res: Reservation) -> tuple[fy.P4TableEntry, fy.P4DirectMeterEntry]:
    """Table entry that marks the flow, and the trTCM rates of its direct meter."""
    match: dict[str, object] = {
        "src_addr": (int(ipaddress.IPv4Address(res.src)), 0xFFFFFFFF),
        "dst_addr": (int(ipaddress.IPv4Address(res.dst)), 0xFFFFFFFF),
    }
    if res.protocol is not None:
        match["protocol"] = (res.protocol, 0xFF)
    if res.src_port is not None:
        match["src_port"] = (res.src_port, 0xFFFF)
    if res.dst_port is not None:
        match["dst_port"] = (res.dst_port, 0xFFFF)
    if not 0 <= res.dscp < 64:
        raise dm.ConfigError(f"DSCP must be 0..63, got {res.dscp}")
    entry = fy.P4TableEntry(
        f"{INGRESS}.reservations",
        match=fy.P4TableMatch(match),
        action=fy.P4TableAction(f"{INGRESS}.reserved_flow", dscp=res.dscp),
        priority=res.priority,
    )
    rates = dm.MeterRates.for_reservation(res.rate_bps, res.burst_bytes)
    meter = fy.P4DirectMeterEntry(
        table_entry=entry,
        config=fy.P4MeterConfig(cir=rates.cir_bytes_per_s, cburst=rates.cburst_bytes,
                                pir=rates.pir_bytes_per_s, pburst=rates.pburst_bytes),
    )
    return entry, meter


def red_entries(port: int, params: aqm.RedParams) -> list[fy.P4TableEntry]:
    """RED at `port` (p4src/v1model/include/control/red_ecn.p4): its weight and
    thresholds (`red_config`), its marking probability per 1/4 packet of the
    average from min_th to 2 max_th (`red_probability`), and the decay of the
    average after the queue was idle (`red_idle`). The port's routes carry the
    RED option (PortOptions.red)."""
    _check_port(port)
    config = fy.P4TableEntry(f"{INGRESS}.red_config", match=fy.P4TableMatch(egress_port=port),
                             action=fy.P4TableAction(f"{INGRESS}.red_weight_{params.weight_log2}",
                                                     min_level=params.min_level, top_level=params.top_level))
    probability = [fy.P4TableEntry(f"{INGRESS}.red_probability", match=fy.P4TableMatch(egress_port=port, level=level),
                                   action=fy.P4TableAction(f"{INGRESS}.red_mark_probability", prob=prob))
                   for level, prob in params.probability_table().items()]
    idle = [fy.P4TableEntry(f"{INGRESS}.red_idle", match=fy.P4TableMatch(egress_port=port, idle_us=(lo, hi)),
                            action=fy.P4TableAction(f"{INGRESS}.red_idle_clear" if j is None
                                                    else f"{INGRESS}.red_idle_decay_{j}"),
                            priority=1)
            for lo, hi, j in params.idle_ranges()]
    return [config, *probability, *idle]


# Telemetry: one digest per egress port and closed measurement window
# (`port_telemetry_t`, p4src/shared/telemetry.p4: the window's figures, one field
# each). BMv2's P4Runtime server cannot read registers, so the switch pushes them;
# the digest costs the switch nothing on packets that do not close a window.
TELEMETRY_DIGEST = "port_telemetry_t"


def telemetry_digest(max_timeout_ns: int = 0) -> fy.P4DigestEntry:
    """Enable the telemetry digest: one report per list, sent at once."""
    return fy.P4DigestEntry(TELEMETRY_DIGEST, max_list_size=1, max_timeout_ns=max_timeout_ns,
                            ack_timeout_ns=10_000_000)


def _int32(value: int) -> int:
    value &= dm.U32_MAX
    return value - (1 << 32) if value >= 1 << 31 else value


@dataclass(frozen=True)
class PortTelemetry:
    """One port's measurements over one closed window, in wire units (kb/s)."""

    port: int
    window_start_us: int      # switch clock, low 32 bits
    capacity_kbps: float
    rate_kbps: float          # BR: bytes received for the port, as a rate
    avail_kbps: float         # OBP AB, negative under overload
    queue_pkts: int           # BI's queue, at the window's start
    flows: int                # EBN's N (occupied hash slots)
    ebn_code: int

    @classmethod
    def from_digest(cls, data: dict) -> "PortTelemetry":
        """Decode one `port_telemetry_t` digest (p4src/shared/telemetry.p4), by field name."""
        return cls(port=int(data["port"]), window_start_us=int(data["window_start_us"]),
                   capacity_kbps=float(data["capacity_kbps"]), rate_kbps=float(data["rate_kbps"]),
                   avail_kbps=float(_int32(int(data["avail_kbps"]))), queue_pkts=int(data["queue_pkts"]),
                   flows=int(data["flows"]), ebn_code=int(data["ebn_code"]))


def chunks(entities: Iterable, size: int = 200) -> Iterable[list]:
    batch: list = []
    for e in entities:
        batch.append(e)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
