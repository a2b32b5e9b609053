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

from bwn.controller import dataplane_math as dm

INGRESS = "BwnIngress"
EGRESS = "BwnEgress"

# Telemetry: one digest per egress port and closed measurement window
# (p4src/v1model/bwn.p4, `port_telemetry_t`); BMv2's P4Runtime server cannot
# read registers, so the switch pushes them.
TELEMETRY_DIGEST = "port_telemetry_t"
DROP_COUNTER = f"{INGRESS}.drop_counter"
DROP_REASONS = {0: "no_route", 1: "ttl", 2: "ipv4_malformed", 3: "bwn_malformed",
                4: "random_loss", 5: "not_ipv4"}

DSCP_EF = 46


def mac_to_int(mac: str) -> int:
    parts = mac.split(":")
    if len(parts) != 6 or not all(len(p) == 2 for p in parts):
        raise ValueError(f"not a MAC address: {mac!r} (expected aa:bb:cc:dd:ee:ff)")
    return int("".join(parts), 16)


def _check_port(port: int) -> None:
    if not 0 <= port < dm.MAX_PORTS:
        raise dm.ConfigError(f"port {port} is out of range: the dataplane keeps state for "
                             f"ports 0..{dm.MAX_PORTS - 1}")


def route(prefix: str, port: int, dst_mac: str, src_mac: str) -> fy.P4TableEntry:
    """IPv4 LPM route: packets to `prefix` leave by `port` with these MACs."""
    net = ipaddress.IPv4Network(prefix, strict=False)
    _check_port(port)
    return fy.P4TableEntry(
        f"{INGRESS}.ipv4_lpm",
        match=fy.P4TableMatch(dst_addr=(int(net.network_address), net.prefixlen)),
        action=fy.P4TableAction(f"{INGRESS}.route", port=port,
                                dst_mac=mac_to_int(dst_mac), src_mac=mac_to_int(src_mac)),
    )


def port_capacity(port: int, capacity_bps: float) -> fy.P4TableEntry:
    _check_port(port)
    cap = dm.PortCapacity.from_bps(capacity_bps)
    return fy.P4TableEntry(
        f"{EGRESS}.port_config",
        match=fy.P4TableMatch(egress_port=port),
        action=fy.P4TableAction(f"{EGRESS}.set_port", cap_qkbps=cap.cap_qkbps,
                                cap_kbps=cap.cap_kbps, cap_log7=cap.cap_log7),
    )


def port_loss(port: int, probability: float) -> fy.P4TableEntry:
    _check_port(port)
    return fy.P4TableEntry(
        f"{INGRESS}.port_loss",
        match=fy.P4TableMatch(egress_port=port),
        action=fy.P4TableAction(f"{INGRESS}.set_loss", threshold=dm.loss_threshold(probability)),
    )


@dataclass(frozen=True)
class WindowConfig:
    """Measurement windows, both powers of two in microseconds."""

    window_us: int = 16_384
    flow_window_us: int = 131_072
    queue_unit_bytes: int = 1514

    def __post_init__(self) -> None:
        dm.check_power_of_two_us("window_us", self.window_us)
        dm.check_power_of_two_us("flow_window_us", self.flow_window_us)


def window_config(cfg: WindowConfig) -> fy.P4TableEntry:
    return fy.P4TableEntry(
        f"{EGRESS}.window_config",
        action=fy.P4TableAction(f"{EGRESS}.set_window",
                                mask=dm.window_mask(cfg.window_us), window_us=cfg.window_us,
                                flow_mask=dm.window_mask(cfg.flow_window_us),
                                flow_window_us=cfg.flow_window_us),
        is_default_action=True,
    )


def _split_lut_entries(table_hi: str, action_hi: str, key_hi: str,
                       table_lo: str, action_lo: str, key_lo: str,
                       lut: dm.SplitLut) -> list[fy.P4TableEntry]:
    entries = [fy.P4TableEntry(f"{EGRESS}.{table_hi}", match=fy.P4TableMatch(**{key_hi: i}),
                               action=fy.P4TableAction(f"{EGRESS}.{action_hi}", qkbps=v))
               for i, v in enumerate(lut.hi)]
    entries += [fy.P4TableEntry(f"{EGRESS}.{table_lo}", match=fy.P4TableMatch(**{key_lo: i}),
                                action=fy.P4TableAction(f"{EGRESS}.{action_lo}", qkbps=v))
                for i, v in enumerate(lut.lo)]
    return entries


def rate_luts(cfg: WindowConfig) -> list[fy.P4TableEntry]:
    """Length and queue -> rate tables for the window in `cfg` (insert once, then modify)."""
    return (_split_lut_entries("len_rate_hi", "set_len_hi", "len_hi",
                               "len_rate_lo", "set_len_lo", "len_lo", dm.length_lut(cfg.window_us))
            + _split_lut_entries("queue_rate_hi", "set_q_hi", "q_hi",
                                 "queue_rate_lo", "set_q_lo", "q_lo",
                                 dm.queue_lut(cfg.window_us, cfg.queue_unit_bytes)))


def flows_log_table() -> list[fy.P4TableEntry]:
    return [fy.P4TableEntry(f"{EGRESS}.flows_log", match=fy.P4TableMatch(flows=z),
                            action=fy.P4TableAction(f"{EGRESS}.set_flows_log7", log7=v))
            for z, v in dm.flows_log7_table().items()]


def static_tables(cfg: WindowConfig) -> list[fy.P4TableEntry]:
    """Everything that depends only on the window configuration (no topology)."""
    return rate_luts(cfg) + flows_log_table()


@dataclass(frozen=True)
class Reservation:
    """A GTCP bandwidth reservation, metered at the edge switch."""

    src: str
    dst: str
    rate_bps: float
    protocol: int | None = 17
    src_port: int | None = None
    dst_port: int | None = None
    dscp: int = DSCP_EF
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


def telemetry_digest(max_timeout_ns: int = 0) -> fy.P4DigestEntry:
    """Enable the telemetry digest: one report per list, sent at once."""
    return fy.P4DigestEntry(TELEMETRY_DIGEST, max_list_size=1, max_timeout_ns=max_timeout_ns,
                            ack_timeout_ns=10_000_000)


@dataclass(frozen=True)
class PortTelemetry:
    """One port's measurements over one closed window, in wire units (kb/s)."""

    port: int
    window_start_us: int      # switch clock
    capacity_kbps: float
    rate_kbps: float
    avail_kbps: float         # OBP AB, negative under overload
    queue_pkts: int
    flows: int
    ebn_code: int

    @classmethod
    def from_digest(cls, data: dict) -> "PortTelemetry":
        avail = int(data["avail_qkbps"])
        if avail >= 1 << 31:
            avail -= 1 << 32
        return cls(port=int(data["port"]), window_start_us=int(data["window_id"]) & ~1,
                   capacity_kbps=int(data["capacity_qkbps"]) / dm.QKBPS_PER_KBPS,
                   rate_kbps=int(data["rate_qkbps"]) / dm.QKBPS_PER_KBPS,
                   avail_kbps=avail / dm.QKBPS_PER_KBPS, queue_pkts=int(data["queue_pkts"]),
                   flows=int(data["flows"]), ebn_code=int(data["share_ebn"]))


def chunks(entities: Iterable, size: int = 200) -> Iterable[list]:
    batch: list = []
    for e in entities:
        batch.append(e)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
