"""The controller's Tofino target: what differs from BMv2 for p4src/tna/bwn.p4.

The TNA program keeps the v1model program's tables, actions and parameters
where the two share a job (controller/entries.py builds those), so this module
holds only the differences (p4src/tna/README.md explains each):

* **time base**: Tofino's clock is in ns and the program counts ticks of
  1024 ns, so a window of 2^K "us" lasts 2^K * 1.024 us; IC per window is sized
  for that length (`TofinoCapacity`), the window masks are given in the
  pipeline's id units (`window_config`), and `tofino_avail_kbps` models the
  program's division-free bytes -> kb/s conversion;
* **ports**: Tofino device ports are `pipe * 128 + 0..71` (so above 63), while
  the per-port registers hold MAX_PORTS entries: `PortMap` gives each device port
  a register index (`pidx`), which routes carry;
* **tables**: one routing table (`ipv4_lpm`), the capacity and EBN tables in
  the egress, no queue table (Tofino reports the queue in 80-byte cells, which
  the program converts exactly);
* **pipeline config**: bf-p4c's output packed as the P4Runtime server expects
  it: Stratum's `BfPipelineConfig` protobuf (stratum_bfrt) or PI's older binary
  packing (`pack_pi_config`);
* **traffic manager**: the port's shaping rate, its queue limit in cells, and
  the yellow limit that implements Assured Forwarding (`TmPortPlan`), which
  BMv2 gets from its queue rate and the program's own AF drop.
"""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

import finsy as fy
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from bwn.protocol import dataplane_math as dm
from controller import entries as en

INGRESS = "BwnIngress"
EGRESS = "BwnEgress"

TICK_NS = 1024                  # the program's time unit: global_tstamp bit 10
CELL_BYTES = 80                 # Tofino 1 queue-depth unit (deq_qdepth)
MAX_DEV_PORT = 511              # bit<9>
PIPE_PORTS = 72                 # device ports 0..71 of each pipe (front panel, CPU, recirculation)
MAX_PIPES = 4
# EBN codes stop at 254 (define.p4). The TNA program does not clamp: the
# controller gives log7(IC) + 8 (the code's rounding, which the program cannot
# add in 8-bit pieces) capped so that the share of one flow, (log7(IC) + 8) >> 4,
# is at most 254. This binds only above 2^(254/8) kb/s = 3.6 Tb/s.
MAX_CAP_LOG7_R = 254 * 16 + 15


# ---- time base ------------------------------------------------------------------
def capacity_bytes_per_window(capacity_bps: float, window_us: int) -> int:
    """IC as bytes per window of `window_us` ticks (each 1.024 us), rounded."""
    dm.check_power_of_two_us("window_us", window_us)
    return round(capacity_bps * window_us * TICK_NS / 8e9)


def window_duration_s(window_us: int) -> float:
    """How long the controller's window of `window_us` lasts on Tofino."""
    dm.check_power_of_two_us("window_us", window_us)
    return window_us * TICK_NS / 1e9


def tofino_avail_kbps(bytes_per_window: int, window_us: int) -> int:
    """The program's bytes -> kb/s conversion (BwnEgress.ab_to_kbps and the two
    subtractions after it): y = x * 2^(13-K), then y - y/32 - y/64, each term
    an arithmetic shift of x. Exact is x * 7812.5 / 2^K; this is 0.06 % lower,
    minus at most 3 kb/s of flooring."""
    dm.check_power_of_two_us("window_us", window_us)
    k = window_us.bit_length() - 1

    def shifted(by: int) -> int:      # x * 2^by, arithmetic (floor) for by < 0
        return bytes_per_window << by if by >= 0 else bytes_per_window >> -by

    value = shifted(13 - k) - shifted(8 - k) - shifted(7 - k)
    return ((value + 2**31) % 2**32) - 2**31


@dataclass(frozen=True)
class TofinoCapacity:
    """`BwnEgress.port_config` for one port: `set_port_<K>` with IC per Tofino window."""

    cap_bytes: int
    cap_kbps: int
    cap_log7_r: int       # log7(IC) + 8, at most MAX_CAP_LOG7_R

    @classmethod
    def from_bps(cls, capacity_bps: float, window_us: int) -> "TofinoCapacity":
        kbps = dm.check_capacity_kbps(capacity_bps / 1000.0)
        cap_bytes = capacity_bytes_per_window(capacity_bps, window_us)
        if cap_bytes > dm.MAX_WINDOW_BYTES:
            raise dm.ConfigError(
                f"link capacity {capacity_bps:.3g} b/s is too large for a window of {window_us} ticks "
                f"({window_duration_s(window_us) * 1e3:.3g} ms): IC - BR - BI must fit an int32 of "
                f"bytes per window; use a shorter window")
        return cls(cap_bytes=cap_bytes, cap_kbps=kbps, cap_log7_r=min(dm.log7(kbps) + 8, MAX_CAP_LOG7_R))


# ---- ports -------------------------------------------------------------------------
@dataclass(frozen=True)
class TofinoPort:
    dev_port: int     # the device port (ucast_egress_port, port_config's key)
    pidx: int         # the per-port register index routes carry

    @property
    def pipe(self) -> int:
        return self.dev_port >> 7


def check_dev_port(dev_port: int) -> None:
    if not isinstance(dev_port, int) or not 0 <= dev_port <= MAX_DEV_PORT:
        raise dm.ConfigError(f"Tofino device port must be 0..{MAX_DEV_PORT}, got {dev_port!r}")
    pipe, local = dev_port >> 7, dev_port & 0x7F
    if pipe >= MAX_PIPES or local >= PIPE_PORTS:
        raise dm.ConfigError(f"device port {dev_port} is not a port of a Tofino pipe: device ports are "
                             f"pipe * 128 + 0..{PIPE_PORTS - 1} (pipe {pipe}, local {local})")


@dataclass
class PortMap:
    """Device ports -> register indices, given in the order ports are added (the
    program keeps state for MAX_PORTS ports, whatever their device numbers)."""

    ports: dict[int, TofinoPort] = field(default_factory=dict)

    @classmethod
    def of(cls, dev_ports: list[int]) -> "PortMap":
        pm = cls()
        for p in dev_ports:
            pm.add(p)
        return pm

    def add(self, dev_port: int) -> TofinoPort:
        check_dev_port(dev_port)
        if dev_port in self.ports:
            return self.ports[dev_port]
        if len(self.ports) >= dm.MAX_PORTS:
            raise dm.ConfigError(f"the program keeps state for {dm.MAX_PORTS} ports; device port {dev_port} "
                                 f"would be number {len(self.ports) + 1}")
        port = TofinoPort(dev_port=dev_port, pidx=len(self.ports))
        self.ports[dev_port] = port
        return port

    def __getitem__(self, dev_port: int) -> TofinoPort:
        try:
            return self.ports[dev_port]
        except KeyError:
            raise dm.ConfigError(f"device port {dev_port} is not in the port map "
                                 f"(known: {sorted(self.ports)})") from None


# ---- table entries ------------------------------------------------------------
def route(prefix: str, port: TofinoPort, dst_mac: str, src_mac: str,
          options: en.PortOptions = en.PortOptions()) -> fy.P4TableEntry:
    """One `ipv4_lpm` entry (the TNA program has one routing table for all IPv4).
    The loss threshold keeps v1model's 32-bit encoding; Tofino compares its top
    16 bits with a 16-bit random number (loss resolution 2^-16)."""
    match, common, checked = en.route_params(prefix, port.dev_port, port.pidx, dst_mac, src_mac, options)
    name = f"{INGRESS}.route_checked" if checked else f"{INGRESS}.route"
    return fy.P4TableEntry(f"{INGRESS}.ipv4_lpm", match=match,
                           action=fy.P4TableAction(name, **common, slot_base=port.pidx * dm.FLOW_SLOTS, **checked))


def port_capacity(port: TofinoPort, capacity_bps: float, window: en.WindowConfig) -> fy.P4TableEntry:
    cap = TofinoCapacity.from_bps(capacity_bps, window.window_us)
    return fy.P4TableEntry(
        f"{EGRESS}.port_config", match=fy.P4TableMatch(egress_port=port.dev_port),
        action=fy.P4TableAction(f"{EGRESS}.set_port_{window.window_log2}", cap_bytes=cap.cap_bytes,
                                cap_kbps=cap.cap_kbps, cap_log7_r=cap.cap_log7_r))


ID_SHIFT = 6     # window ids are global_tstamp[47:16]: units of 64 ticks


def window_config(cfg: en.WindowConfig) -> list[fy.P4TableEntry]:
    """`roll_window` as on BMv2, its values in the units the pipeline compares:
    window ids count 64 ticks (global_tstamp[47:16]), so a window of W ticks is
    the mask ~(W - 1) >> 6 and the length W >> 6 (32 bits each)."""
    def mask(window_us: int) -> int:
        return (dm.window_mask(window_us) >> ID_SHIFT) & dm.U32_MAX
    return [fy.P4TableEntry(f"{INGRESS}.window_config", is_default_action=True,
                            action=fy.P4TableAction(f"{INGRESS}.roll_window",
                                                    mask=mask(cfg.window_us),
                                                    window_us=cfg.window_us >> ID_SHIFT,
                                                    flow_mask=mask(cfg.flow_window_us),
                                                    flow_window_us=cfg.flow_window_us >> ID_SHIFT))]


def static_tables() -> list[fy.P4TableEntry]:
    """EBN's log7(N) table; Tofino needs no queue table."""
    return [fy.P4TableEntry(f"{EGRESS}.flows_log", match=fy.P4TableMatch(flows=z),
                            action=fy.P4TableAction(f"{EGRESS}.set_share", log7=v))
            for z, v in dm.flows_log7_table().items()]


# Telemetry: Tofino has no egress digest; these registers are read over
# P4Runtime (index = the port's pidx), one value per closed window.
TELEMETRY_REGISTERS = {
    "avail_kbps": f"{EGRESS}.avail_kbps",     # AB in force, int32
    "br_bytes": f"{EGRESS}.window_br",        # BR of the last closed window
    "bi_cells": f"{EGRESS}.window_bi",        # queue (80-byte cells) when it closed
    "ebn_code": f"{EGRESS}.share_ebn",
    "flows_current": f"{INGRESS}.flows_current",
    "flows_last": f"{INGRESS}.flows_last",
}
# Counters by pidx: packets that left the port's queue empty (the fidelity
# monitor's backlog evidence, as entries.QUEUE_EMPTIED_COUNTER on v1model).
TELEMETRY_COUNTERS = {
    "queue_emptied": f"{EGRESS}.queue_emptied",
}


# ---- pipeline config ------------------------------------------------------------
def pack_pi_config(prog_name: str, tofino_bin: bytes, context_json: bytes) -> bytes:
    """PI's (and stratum_bf's legacy) p4_device_config for Tofino: the program
    name, tofino.bin and context.json, each after its length as a little-endian
    int32. Not accepted by stratum_bfrt (use `bf_pipeline_config`)."""
    out = bytearray()
    for part in (prog_name.encode(), tofino_bin, context_json):
        out += struct.pack("<i", len(part)) + part
    return bytes(out)


def unpack_pi_config(blob: bytes) -> tuple[str, bytes, bytes]:
    parts: list[bytes] = []
    at = 0
    for _ in range(3):
        if at + 4 > len(blob):
            raise ValueError("truncated PI Tofino device config (a length is missing)")
        (n,) = struct.unpack_from("<i", blob, at)
        if n < 0 or at + 4 + n > len(blob):
            raise ValueError(f"PI Tofino device config: part of {n} bytes at {at} runs past the end")
        parts.append(blob[at + 4: at + 4 + n])
        at += 4 + n
    if at != len(blob):
        raise ValueError(f"PI Tofino device config: {len(blob) - at} bytes after the three parts")
    return parts[0].decode(), parts[1], parts[2]


def _bf_pipeline_config_class():
    """stratum.hal.barefoot.BfPipelineConfig (Stratum's bf.proto), built from its
    field numbers with protobuf's descriptor API instead of generated code."""
    fdp = descriptor_pb2.FileDescriptorProto(name="bwn_stratum_bf.proto", package="stratum.hal.barefoot",
                                             syntax="proto3")
    msg = fdp.message_type.add(name="BfPipelineConfig")
    F = descriptor_pb2.FieldDescriptorProto
    prof = msg.nested_type.add(name="Profile")
    prof.field.add(name="profile_name", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    prof.field.add(name="context", number=2, type=F.TYPE_BYTES, label=F.LABEL_OPTIONAL)
    prof.field.add(name="binary", number=3, type=F.TYPE_BYTES, label=F.LABEL_OPTIONAL)
    prof.field.add(name="pipe_scope", number=4, type=F.TYPE_UINT32, label=F.LABEL_REPEATED)
    msg.field.add(name="p4_name", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    msg.field.add(name="bfruntime_info", number=2, type=F.TYPE_BYTES, label=F.LABEL_OPTIONAL)
    msg.field.add(name="profiles", number=3, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                  type_name=".stratum.hal.barefoot.BfPipelineConfig.Profile")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("stratum.hal.barefoot.BfPipelineConfig"))


BfPipelineConfig = _bf_pipeline_config_class()


def bf_pipeline_config(out_dir: Path) -> bytes:
    """stratum_bfrt's p4_device_config from a bf-p4c output folder: its `.conf`
    (JSON) names the program, its BfRuntime JSON and, per pipeline, the
    context.json and the binary (tofino.bin / tofino2.bin) and the pipes it
    runs on."""
    confs = sorted(Path(out_dir).glob("*.conf"))
    if len(confs) != 1:
        raise FileNotFoundError(f"{out_dir}: expected one bf-p4c .conf file, found {[c.name for c in confs]} "
                                f"(run `make build-tofino`)")
    conf = json.loads(confs[0].read_text())
    try:
        program = conf["p4_devices"][0]["p4_programs"][0]
        cfg = BfPipelineConfig(p4_name=program["program-name"],
                               bfruntime_info=_read(out_dir, program["bfrt-config"]))
        for pipe in program["p4_pipelines"]:
            cfg.profiles.add(profile_name=pipe["p4_pipeline_name"], context=_read(out_dir, pipe["context"]),
                             binary=_read(out_dir, pipe["config"]), pipe_scope=pipe.get("pipe_scope", []))
    except (KeyError, IndexError, TypeError) as exc:
        raise ValueError(f"{confs[0]}: not a bf-p4c device conf ({exc!r} missing)") from None
    return cfg.SerializeToString()


def _read(out_dir: Path, path: str) -> bytes:
    """A file the .conf names: bf-p4c writes paths as given at compile time; take
    the part inside the output folder when that path is elsewhere now."""
    p = Path(path)
    if p.is_file():
        return p.read_bytes()
    parts = p.parts
    for i in range(len(parts)):
        cand = Path(out_dir).joinpath(*parts[i:])
        if cand.is_file():
            return cand.read_bytes()
    raise FileNotFoundError(f"{path} (named by the bf-p4c .conf in {out_dir}) does not exist")


# ---- traffic manager ------------------------------------------------------------
# The TM admits a YELLOW packet only while the queue is below its yellow limit,
# which bf_tm_q_color_limit_set takes as a fraction of the queue's (green)
# limit in steps of 1/8 (bf_tm_queue_color_limit_t, 12.5 % .. 100 %).
YELLOW_LIMIT_EIGHTHS = range(1, 9)


@dataclass(frozen=True)
class TmPortPlan:
    """What the traffic manager needs for one bwn port (bf_tm API arguments)."""

    dev_port: int
    shaping_kbps: int              # bf_tm_port_shaping_rate_set(pps=false, rate in kb/s)
    shaping_burst_bytes: int
    queue_limit_cells: int         # the port's queue: bf_tm_q_app_pool_usage_set / guaranteed limit
    yellow_limit_eighths: int      # AF: yellow limit = eighths/8 of the queue limit (8 = off)
    af_threshold_cells: int        # the AF threshold that yellow limit gives, in cells

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def tm_port_plan(dev_port: int, rate_bps: float, queue_packets: int, af_queue_packets: int = 0,
                 frame_bytes: int = 1514, burst_frames: int = 2) -> TmPortPlan:
    """The TM side of a link that BMv2 builds with its queue rate and depth: shape
    the port to `rate_bps`, hold `queue_packets` frames of `frame_bytes`, and
    drop YELLOW (out-of-profile, best-effort) packets above `af_queue_packets`,
    rounded down to the TM's 1/8 steps of the queue (never above the threshold
    asked: AF protects in-profile traffic at least as much as configured)."""
    check_dev_port(dev_port)
    if rate_bps <= 0:
        raise dm.ConfigError(f"port rate must be positive, got {rate_bps} b/s")
    if queue_packets < 1:
        raise dm.ConfigError(f"queue must hold at least one packet, got {queue_packets}")
    if not 0 <= af_queue_packets <= queue_packets:
        raise dm.ConfigError(f"AF threshold {af_queue_packets} packets must be within the queue "
                             f"(0..{queue_packets})")
    cells_per_frame = -(-frame_bytes // CELL_BYTES)
    limit = queue_packets * cells_per_frame
    eighths = 8
    if af_queue_packets:
        eighths = max(1, (af_queue_packets * 8) // queue_packets)
    return TmPortPlan(dev_port=dev_port, shaping_kbps=max(1, round(rate_bps / 1000)),
                      shaping_burst_bytes=burst_frames * frame_bytes, queue_limit_cells=limit,
                      yellow_limit_eighths=eighths, af_threshold_cells=limit * eighths // 8)
