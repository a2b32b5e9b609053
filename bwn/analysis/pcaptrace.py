"""Read a run's capture (pcap or pcapng) into per-flow time-sequence series.

The frames are parsed with dpkt (Ethernet, IPv4, UDP) and the BWN and transport
headers with the project's own codecs (:mod:`bwn.protocol.wire`,
:mod:`hosts.transport.wire`), so a headers-only capture is enough: payload
lengths come from the UDP length field, not from the captured bytes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from hosts.transport.wire import F_ACK, F_DATA, F_FIN, F_RETX, F_SYN, TransportHeader
from bwn.protocol.wire import BWN_HEADER_LEN, BWN_UDP_PORT, KIND_ACK, KIND_DATA, BwnDecodeError, BwnHeader

UDP_HEADER_BYTES = 8


class PcapError(ValueError):
    """A capture file that cannot be read; the message names it."""


@dataclass
class FlowTrace:
    """One flow (transport flow id) as seen on one link."""

    flow_id: int
    data_t_s: list[float] = field(default_factory=list)       # sender -> receiver segments
    data_seq: list[int] = field(default_factory=list)          # first byte
    data_end: list[int] = field(default_factory=list)          # one past the last byte
    data_retx: list[bool] = field(default_factory=list)        # the RETX flag
    ack_t_s: list[float] = field(default_factory=list)         # receiver -> sender ACKs
    ack_no: list[int] = field(default_factory=list)
    hops: list[int] = field(default_factory=list)              # BWN hop_count of each DATA

    @property
    def retransmissions(self) -> int:
        return sum(self.data_retx)


@dataclass
class Trace:
    flows: dict[int, FlowTrace]
    packets: int = 0              # frames in the file
    other: int = 0                # frames that are not the project's BWN transport
    undecodable: int = 0          # truncated or malformed BWN/transport headers


def read_trace(path: Path, clock_offset_s: float = 0.0) -> Trace:
    """Every BWN transport packet of ``path``, per flow id; times are the capture's
    timestamps minus ``clock_offset_s`` (the experiment's time, run.json)."""
    # imported here: dpkt is the plots extra's
    import dpkt

    flows: dict[int, FlowTrace] = {}
    trace = Trace(flows)
    try:
        fh = Path(path).open("rb")
    except OSError as exc:
        raise PcapError(f"{path}: cannot read: {exc.strerror or exc}") from None
    with fh:
        try:
            reader = dpkt.pcap.UniversalReader(fh)
        except (ValueError, dpkt.dpkt.Error) as exc:
            raise PcapError(f"{path}: not a pcap or pcapng file: {exc}") from None
        for ts, frame in reader:
            trace.packets += 1
            udp = _udp(dpkt, frame)
            if udp is None or BWN_UDP_PORT not in (udp.sport, udp.dport):
                trace.other += 1
                continue
            payload = bytes(udp.data)
            try:
                bwn = BwnHeader.unpack(payload)
                tr = TransportHeader.unpack(payload, BWN_HEADER_LEN)
            except (BwnDecodeError, ValueError):
                trace.undecodable += 1
                continue
            t_s = float(ts) - clock_offset_s
            flow = flows.setdefault(tr.flow_id, FlowTrace(tr.flow_id))
            if bwn.kind == KIND_DATA and udp.dport == BWN_UDP_PORT:
                length = udp.ulen - UDP_HEADER_BYTES - BWN_HEADER_LEN - 4 * tr.hdr_words
                length = max(length, 0) + (1 if tr.flags & (F_SYN | F_FIN) else 0)
                if not tr.flags & (F_DATA | F_SYN | F_FIN):
                    continue
                flow.data_t_s.append(t_s)
                flow.data_seq.append(tr.seq)
                flow.data_end.append(tr.seq + length)
                flow.data_retx.append(bool(tr.flags & F_RETX))
                flow.hops.append(bwn.hop_count)
            elif bwn.kind == KIND_ACK and udp.sport == BWN_UDP_PORT and tr.flags & F_ACK:
                flow.ack_t_s.append(t_s)
                flow.ack_no.append(tr.ack)
    return trace


def _udp(dpkt: object, frame: bytes) -> Optional[object]:
    """The UDP layer of an Ethernet/IPv4 frame, or None."""
    try:
        eth = dpkt.ethernet.Ethernet(frame)          # type: ignore[attr-defined]
    except (dpkt.dpkt.UnpackError, dpkt.dpkt.NeedData):   # type: ignore[attr-defined]
        return None
    ip = eth.data
    if not isinstance(ip, dpkt.ip.IP) or not isinstance(ip.data, dpkt.udp.UDP):  # type: ignore[attr-defined]
        return None
    return ip.data
