"""Scapy layers for the BWN header (docs/wire-format.md), bound to UDP port 16983,
and for the XR header that follows it when the BWN flag XR is set.

Importing this module binds the layer in both directions, so that DATA packets
(destination port 16983) and ACKs (source port 16983) both dissect as BWN::

    from scapy.all import Ether, IP, UDP
    from bwn.protocol.scapy_layer import BWN
    pkt = Ether() / IP(dst="10.0.0.2") / UDP(sport=40000, dport=BWN_UDP_PORT) / BWN()

A BWN layer whose ``flags`` has XR (0x02) dissects its payload as :class:`XR`
(XCP's and RCP's fields)::

    pkt = ... / BWN(flags="XR") / XR(rtt_us=100_000, cwnd_bytes=40_000)

The PTF tests, the capture tools and the host agents' tests all use these layers.
"""
from __future__ import annotations

from scapy.fields import (
    BitEnumField,
    BitField,
    ByteField,
    FlagsField,
    IntField,
    ShortField,
    SignedIntField,
)
from scapy.layers.inet import UDP
from scapy.packet import Packet, bind_layers

from bwn.protocol.wire import (
    BWN_HEADER_LEN,
    BWN_UDP_PORT,
    BWN_VERSION,
    EBN_CODE_UNSET,
    KIND_NAMES,
    FLAG_XR,
    NARROW_KBPS_UNSET,
    TIGHT_KBPS_UNSET,
    XR_FEEDBACK_UNSET,
    XR_HEADER_LEN,
    XR_RATE_UNSET,
    BwnHeader,
    XrHeader,
)

__all__ = ["BWN", "BWN_UDP_PORT", "XR", "to_header", "from_header", "to_xr", "from_xr"]


class BWN(Packet):
    name = "BWN"
    fields_desc = [
        BitField("version", BWN_VERSION, 4),
        BitEnumField("kind", 0, 4, KIND_NAMES),
        ByteField("hop_count", 0),
        ByteField("ebn_code", EBN_CODE_UNSET),
        ByteField("echo_ebn_code", EBN_CODE_UNSET),
        IntField("narrow_kbps", NARROW_KBPS_UNSET),
        SignedIntField("tight_kbps", TIGHT_KBPS_UNSET),
        IntField("echo_narrow_kbps", NARROW_KBPS_UNSET),
        SignedIntField("echo_tight_kbps", TIGHT_KBPS_UNSET),
        ByteField("echo_hop_count", 0),
        FlagsField("flags", 0, 8, ["ECHO_VALID", "XR", "F2", "F3", "F4", "F5", "F6", "F7"]),
        ShortField("reserved", 0),
    ]

    def mysummary(self) -> str:
        return self.sprintf(
            "BWN v%version% %kind% hops=%hop_count% ebn=%ebn_code% "
            "narrow=%narrow_kbps%kb/s tight=%tight_kbps%kb/s"
        )

    def guess_payload_class(self, payload: bytes) -> type:
        if int(self.flags) & FLAG_XR:
            return XR
        return super().guess_payload_class(payload)


class XR(Packet):
    """The XR header: XCP's congestion header and RCP's rate (docs/wire-format.md)."""

    name = "XR"
    fields_desc = [
        IntField("rtt_us", 0),
        IntField("cwnd_bytes", 0),
        SignedIntField("feedback_bytes", XR_FEEDBACK_UNSET),
        IntField("rate_kbps", XR_RATE_UNSET),
        SignedIntField("echo_feedback_bytes", XR_FEEDBACK_UNSET),
        IntField("echo_rate_kbps", XR_RATE_UNSET),
    ]

    def mysummary(self) -> str:
        return self.sprintf("XR rtt=%rtt_us%us cwnd=%cwnd_bytes%B feedback=%feedback_bytes%B "
                            "rate=%rate_kbps%kb/s")


assert len(BWN()) == BWN_HEADER_LEN
assert len(XR()) == XR_HEADER_LEN

bind_layers(UDP, BWN, dport=BWN_UDP_PORT)
bind_layers(UDP, BWN, sport=BWN_UDP_PORT)


def to_header(layer: BWN) -> BwnHeader:
    """The codec's view of a Scapy BWN layer (checks every field's range)."""
    return BwnHeader.unpack(bytes(layer)[:BWN_HEADER_LEN], strict_version=False)


def from_header(header: BwnHeader) -> BWN:
    return BWN(header.pack())


def to_xr(layer: XR) -> XrHeader:
    """The codec's view of a Scapy XR layer."""
    return XrHeader.unpack(bytes(layer)[:XR_HEADER_LEN])


def from_xr(header: XrHeader) -> XR:
    return XR(header.pack())
