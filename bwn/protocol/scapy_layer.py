"""Scapy layer for the BWN header (docs/wire-format.md), bound to UDP port 16983.

Importing this module binds the layer in both directions, so that DATA packets
(destination port 16983) and ACKs (source port 16983) both dissect as BWN::

    from scapy.all import Ether, IP, UDP
    from bwn.protocol.scapy_layer import BWN
    pkt = Ether() / IP(dst="10.0.0.2") / UDP(sport=40000, dport=BWN_UDP_PORT) / BWN()

The PTF tests, the capture tools and the host agents' tests all use this one layer.
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
    NARROW_KBPS_UNSET,
    TIGHT_KBPS_UNSET,
    BwnHeader,
)

__all__ = ["BWN", "BWN_UDP_PORT", "to_header", "from_header"]


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
        FlagsField("flags", 0, 8, ["ECHO_VALID", "F1", "F2", "F3", "F4", "F5", "F6", "F7"]),
        ShortField("reserved", 0),
    ]

    def mysummary(self) -> str:
        return self.sprintf(
            "BWN v%version% %kind% hops=%hop_count% ebn=%ebn_code% "
            "narrow=%narrow_kbps%kb/s tight=%tight_kbps%kb/s"
        )


assert len(BWN()) == BWN_HEADER_LEN

bind_layers(UDP, BWN, dport=BWN_UDP_PORT)
bind_layers(UDP, BWN, sport=BWN_UDP_PORT)


def to_header(layer: BWN) -> BwnHeader:
    """The codec's view of a Scapy BWN layer (checks every field's range)."""
    return BwnHeader.unpack(bytes(layer)[:BWN_HEADER_LEN], strict_version=False)


def from_header(header: BwnHeader) -> BWN:
    return BWN(header.pack())
