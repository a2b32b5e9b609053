"""Frames the kernel left for the hardware to finish: checksum offload and GSO.

With the offloads Linux turns on by default (``ip link add ... type veth``
gives tx-checksumming, TSO, GSO and UDP segmentation), the frames a packet
socket reads on the emulator's interfaces are not what a wire would carry:

* **Partial checksums** (``CHECKSUM_PARTIAL``): a TCP or UDP header whose
  checksum field holds only the pseudo-header sum; the "hardware" was to add
  the sum of the segment.  Forwarded as is by a raw socket, the receiving
  kernel sees a bad checksum and drops the frame, silently.
* **Super-frames** (GSO/TSO from the sender, GRO/LRO on the receive side): one
  frame of up to 64 KiB standing for many MTU-sized segments.  It cannot be
  sent on the egress interface, and as one frame it would also defeat the
  link model (one loss draw, one rate-limiter slot for 45 segments).

The receive sockets are opened with ``PACKET_VNET_HDR``, so every frame comes
with a ``struct virtio_net_hdr`` (10 bytes, host byte order) that states
exactly what the kernel left undone: ``flags`` (``NEEDS_CSUM``: complete the
Internet checksum from ``csum_start`` to the end of the frame and write it at
``csum_start + csum_offset``; ``DATA_VALID``: already verified) and, for a
super-frame, ``gso_type`` and ``gso_size`` (the payload bytes per segment).
``PACKET_AUXDATA`` was not used: its ``tpacket_auxdata`` carries only the
``TP_STATUS_CSUMNOTREADY`` flag, not ``csum_start``/``csum_offset`` nor the
segment size, and reading it needs ``recvmsg`` on every frame.

This module is the slow path, pure functions plus :class:`IngressOffload`
(which counts); the engine calls it only for frames whose header is not all
zero in its first two bytes or that are longer than the egress MTU allows.

What it does, in the kernel's own terms (``skb_checksum_help``,
``tcp_gso_segment``, ``inet_gso_segment``, ``ipv6_gso_segment``,
``__udp_gso_segment``):

* checksum completion: the one's-complement sum of the bytes from
  ``csum_start`` to the end of the frame (a zero byte appended to an odd
  length), complemented; a result of 0 is written as 0xFFFF (as the kernel
  does: for UDP 0 would mean "no checksum");
* TCP segmentation (IPv4 and IPv6): ``gso_size`` payload bytes per segment;
  sequence numbers advance by the payload; FIN and PSH only on the last
  segment, CWR only on the first; IPv4 identification incremented per segment
  (the first keeps the super-frame's), total length / payload length and the
  IPv4 header checksum rewritten; full TCP checksum per segment;
* UDP segmentation (``UDP_SEGMENT``, ``gso_type`` UDP_L4): one datagram per
  ``gso_size`` bytes, each with its own UDP length and checksum;
* refused (dropped and counted, :class:`OffloadError` says why): metadata that
  points outside the frame, a checksum region or GSO type this module does not
  know (legacy UFO, SCTP's CRC32c), headers that do not parse or whose lengths
  disagree with the frame.
"""

from __future__ import annotations

import struct
import sys
from typing import Callable, List, Optional, Set, Tuple

from .scheduler import Counters

__all__ = [
    "VNET_HDR_LEN",
    "NEEDS_CSUM",
    "DATA_VALID",
    "GSO_NONE",
    "GSO_TCPV4",
    "GSO_UDP",
    "GSO_TCPV6",
    "GSO_UDP_L4",
    "GSO_ECN",
    "OffloadError",
    "vnet_header",
    "inet_checksum",
    "complete_checksum",
    "segment",
    "IngressOffload",
]

#: sizeof(struct virtio_net_hdr): what PACKET_VNET_HDR puts before each frame.
VNET_HDR_LEN = 10
#: flags, gso_type, hdr_len, gso_size, csum_start, csum_offset (host order:
#: packet sockets use the legacy virtio layout in native endianness).
_VNET = struct.Struct("=BBHHHH")
_CSUM_FIELDS = struct.Struct("=HH")  # csum_start, csum_offset at byte 6

NEEDS_CSUM = 1
DATA_VALID = 2
GSO_NONE = 0
GSO_TCPV4 = 1
GSO_UDP = 3  # legacy UFO: IP fragmentation; Linux >= 4.14 never produces it
GSO_TCPV6 = 4
GSO_UDP_L4 = 5
GSO_ECN = 0x80

ETH_HLEN = 14
_ETH_P_IP = 0x0800
_ETH_P_IPV6 = 0x86DD
_VLAN_TPIDS = (0x8100, 0x88A8)
_IPPROTO_TCP = 6
_IPPROTO_UDP = 17
_IPPROTO_SCTP = 132
# IPv6 extension headers that may sit between the fixed header and TCP/UDP
# (hop-by-hop, routing, destination options); a fragment header (44) is refused.
_IPV6_EXT = (0, 43, 60)
_TCP_FIN, _TCP_PSH, _TCP_CWR = 0x01, 0x08, 0x80


class OffloadError(ValueError):
    """A frame whose offload state cannot be completed; it is dropped and counted."""


def vnet_header(
    flags: int = 0, gso_type: int = 0, hdr_len: int = 0, gso_size: int = 0,
    csum_start: int = 0, csum_offset: int = 0,
) -> bytes:
    """The 10-byte ``virtio_net_hdr`` the kernel prepends (for tests and tools)."""
    return _VNET.pack(flags, gso_type, hdr_len, gso_size, csum_start, csum_offset)


def inet_checksum(data: bytes, initial: int = 0) -> int:
    """Internet checksum (RFC 1071) of ``data``, plus ``initial`` (a word sum).

    The one's-complement sum of 16-bit big-endian words equals the integer
    value of the byte string modulo 0xFFFF (2**16 is 1 modulo 0xFFFF), which
    CPython computes in C; an odd length gets a zero byte appended (times 256).
    Returns a value in 1..0xFFFF: 0 never comes out (0xFFFF stands for it, the
    other one's-complement zero, as the kernel's ``skb_checksum_help`` writes).
    """
    n = int.from_bytes(data, "big")
    if len(data) & 1:
        n <<= 8
    return 0xFFFF - (n + initial) % 0xFFFF


def _l3_offset(frame: bytes) -> Tuple[int, int]:
    """(ethertype, offset of the network header), skipping up to two VLAN tags."""
    if len(frame) < ETH_HLEN:
        raise OffloadError(f"{len(frame)}-byte frame: shorter than an Ethernet header")
    off = 12
    ethertype = (frame[12] << 8) | frame[13]
    for _ in range(2):
        if ethertype not in _VLAN_TPIDS:
            break
        off += 4
        if len(frame) < off + 2:
            raise OffloadError("frame ends inside a VLAN tag")
        ethertype = (frame[off] << 8) | frame[off + 1]
    return ethertype, off + 2


def _l4_offset(frame: bytes) -> Tuple[int, int, int, int]:
    """(ethertype, l3 offset, IP protocol, l4 offset); OffloadError if unparsable."""
    ethertype, l3 = _l3_offset(frame)
    n = len(frame)
    if ethertype == _ETH_P_IP:
        if n < l3 + 20 or frame[l3] >> 4 != 4:
            raise OffloadError("truncated or not an IPv4 header")
        ihl = (frame[l3] & 0x0F) * 4
        if ihl < 20 or n < l3 + ihl:
            raise OffloadError(f"IPv4 header length {ihl} does not fit the frame")
        return ethertype, l3, frame[l3 + 9], l3 + ihl
    if ethertype == _ETH_P_IPV6:
        if n < l3 + 40 or frame[l3] >> 4 != 6:
            raise OffloadError("truncated or not an IPv6 header")
        proto, l4 = frame[l3 + 6], l3 + 40
        while proto in _IPV6_EXT:
            if n < l4 + 8:
                raise OffloadError("IPv6 extension header outside the frame")
            proto, l4 = frame[l4], l4 + (frame[l4 + 1] + 1) * 8
        return ethertype, l3, proto, l4
    raise OffloadError(f"ethertype 0x{ethertype:04x} is neither IPv4 nor IPv6")


def complete_checksum(frame: bytes, csum_start: int, csum_offset: int, base: int = 0) -> bytes:
    """``frame[base:]`` with the checksum the kernel left undone filled in.

    ``csum_start``/``csum_offset`` are the kernel's (``virtio_net_hdr``),
    relative to the frame, which starts at ``base`` in ``frame`` (10 when the
    virtio_net_hdr is still in front of it): the checksum covers everything
    from ``csum_start`` to the end -- the field itself holds the
    pseudo-header sum the kernel seeded it with -- and is written, big-endian,
    at ``csum_start + csum_offset``.  Raises :class:`OffloadError` if that
    field is not inside the frame, or for SCTP (whose "checksum" is a CRC32c).
    """
    start = base + csum_start
    pos = start + csum_offset
    if pos + 2 > len(frame):
        raise OffloadError(
            f"checksum field at {csum_start}+{csum_offset} is outside the "
            f"{len(frame) - base}-byte frame"
        )
    if csum_offset == 8:  # SCTP's offset; TCP's is 16, UDP's 6
        try:
            proto = _l4_offset(frame[base:])[2]
        except OffloadError:
            proto = -1
        if proto == _IPPROTO_SCTP:
            raise OffloadError("SCTP checksum offload (CRC32c) is not completed by bwn-link")
    csum = inet_checksum(frame[start:])
    return frame[base:pos] + csum.to_bytes(2, "big") + frame[pos + 2:]


def segment(frame: bytes, gso_type: int, gso_size: int, csum_start: Optional[int] = None) -> List[bytes]:
    """Cut a GSO/GRO super-frame into the frames a NIC would have sent.

    ``gso_type``/``gso_size`` come from the ``virtio_net_hdr``; ``csum_start``
    (if the header had NEEDS_CSUM) must point at the TCP/UDP header.  Every
    segment gets complete headers and checksums.  Raises :class:`OffloadError`
    for what cannot be segmented faithfully.
    """
    kind = gso_type & ~GSO_ECN
    if kind == GSO_UDP:
        raise OffloadError("legacy UFO super-frame (GSO type UDP) is not segmented by bwn-link")
    if kind not in (GSO_TCPV4, GSO_TCPV6, GSO_UDP_L4):
        raise OffloadError(f"unknown GSO type {gso_type}")
    if gso_size == 0:
        raise OffloadError("GSO super-frame with segment size 0")
    ethertype, l3, proto, l4 = _l4_offset(frame)
    if kind == GSO_TCPV4 and (ethertype != _ETH_P_IP or proto != _IPPROTO_TCP):
        raise OffloadError("GSO type TCPv4 on a frame that is not TCP over IPv4")
    if kind == GSO_TCPV6 and (ethertype != _ETH_P_IPV6 or proto != _IPPROTO_TCP):
        raise OffloadError("GSO type TCPv6 on a frame that is not TCP over IPv6")
    if kind == GSO_UDP_L4 and proto != _IPPROTO_UDP:
        raise OffloadError("GSO type UDP_L4 on a frame that is not UDP")
    if csum_start is not None and csum_start != l4:
        raise OffloadError(f"checksum start {csum_start} is not the L4 header at {l4}")
    n = len(frame)
    # The IP length must cover the frame exactly (0 is BIG TCP's "see the frame").
    if ethertype == _ETH_P_IP:
        if frame[l3 + 6] & 0x3F or frame[l3 + 7]:
            raise OffloadError("GSO super-frame is an IPv4 fragment")
        ip_len = (frame[l3 + 2] << 8) | frame[l3 + 3]
        if ip_len not in (0, n - l3):
            raise OffloadError(f"IPv4 total length {ip_len} but {n - l3} bytes in the frame")
    else:
        ip_len = (frame[l3 + 4] << 8) | frame[l3 + 5]
        if ip_len not in (0, n - l3 - 40):
            raise OffloadError(f"IPv6 payload length {ip_len} but {n - l3 - 40} bytes in the frame")
    if proto == _IPPROTO_TCP:
        if n < l4 + 20:
            raise OffloadError("TCP header outside the frame")
        l4_hlen = (frame[l4 + 12] >> 4) * 4
        if l4_hlen < 20 or n < l4 + l4_hlen:
            raise OffloadError(f"TCP header length {l4_hlen} does not fit the frame")
    else:
        l4_hlen = 8
        if n < l4 + 8:
            raise OffloadError("UDP header outside the frame")
    payload_len = n - l4 - l4_hlen
    # One template of all headers (Ethernet, IP, IPv6 extensions, TCP/UDP),
    # rewritten in place per segment; its L4 part is an even number of bytes,
    # so the payload's word sum can be added to it without concatenating.
    tcp = proto == _IPPROTO_TCP
    ipv4 = ethertype == _ETH_P_IP
    payload_at = l4 + l4_hlen
    tmpl = bytearray(frame[:payload_at])
    csum_at = l4 + (16 if tcp else 6)
    tmpl[csum_at:csum_at + 2] = b"\0\0"
    if ipv4:
        ip_hlen = l4 - l3
        ip_id = (frame[l3 + 4] << 8) | frame[l3 + 5]
        addr_sum = int.from_bytes(frame[l3 + 12:l3 + 20], "big")
    else:
        ext_len = l4 - l3 - 40
        addr_sum = int.from_bytes(frame[l3 + 8:l3 + 40], "big")
    pseudo = addr_sum + proto  # + the L4 length, per segment
    seq = int.from_bytes(frame[l4 + 4:l4 + 8], "big") if tcp else 0
    flags = frame[l4 + 13] if tcp else 0
    count = max(1, -(-payload_len // gso_size))
    last = count - 1
    out: List[bytes] = []
    for i in range(count):
        at = payload_at + i * gso_size
        chunk = frame[at:at + gso_size]
        l4_len = l4_hlen + len(chunk)
        if ipv4:  # total length, identification, header checksum
            tmpl[l3 + 2:l3 + 4] = (ip_hlen + l4_len).to_bytes(2, "big")
            tmpl[l3 + 4:l3 + 6] = ((ip_id + i) & 0xFFFF).to_bytes(2, "big")
            tmpl[l3 + 10:l3 + 12] = b"\0\0"
            tmpl[l3 + 10:l3 + 12] = inet_checksum(tmpl[l3:l4]).to_bytes(2, "big")
        else:
            tmpl[l3 + 4:l3 + 6] = (ext_len + l4_len).to_bytes(2, "big")
        if tcp:
            tmpl[l4 + 4:l4 + 8] = ((seq + i * gso_size) & 0xFFFFFFFF).to_bytes(4, "big")
            f = flags
            if i < last:
                f &= ~(_TCP_FIN | _TCP_PSH)
            if i:
                f &= ~_TCP_CWR
            tmpl[l4 + 13] = f
        else:
            tmpl[l4 + 4:l4 + 6] = l4_len.to_bytes(2, "big")
        tmpl[csum_at:csum_at + 2] = b"\0\0"
        csum = inet_checksum(chunk, pseudo + l4_len + int.from_bytes(tmpl[l4:], "big"))
        tmpl[csum_at:csum_at + 2] = csum.to_bytes(2, "big")
        out.append(bytes(tmpl) + chunk)
    return out


class IngressOffload:
    """Turns what a ``PACKET_VNET_HDR`` socket returned into frames for the wire.

    ``counters`` is the direction's :class:`~bwn.linkem.scheduler.Counters`;
    ``max_frame_bytes`` the largest frame the egress interface takes (its MTU
    plus the Ethernet header; a frame with a VLAN tag in it may be 4 bytes
    more).  :meth:`frames` returns the frames to admit, in order, and counts
    what it fixed, split, or dropped (dropped frames are counted in
    ``rx_frames`` here, since they never reach the scheduler).  ``warn`` gets
    one line the first time each kind of drop happens.
    """

    def __init__(
        self,
        counters: Counters,
        max_frame_bytes: int,
        ingress: str = "ingress",
        egress: str = "egress",
        warn: Optional[Callable[[str], None]] = None,
        recv_bufsize: int = 0,
    ) -> None:
        self.c = counters
        self.max_frame_bytes = max_frame_bytes
        self.ingress = ingress
        self.egress = egress
        self.recv_bufsize = recv_bufsize
        self._warn = warn if warn is not None else _stderr
        self._warned: Set[str] = set()

    def warn_once(self, kind: str, text: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            self._warn(f"bwn-link: {self.ingress}->{self.egress}: {text}")

    def _drop(self, frame_bytes: int, counter: str) -> None:
        c = self.c
        c.rx_frames += 1
        c.rx_bytes += frame_bytes
        setattr(c, counter, getattr(c, counter) + 1)

    def bad_offload(self, frame_bytes: int, why: str) -> None:
        """Count a frame whose offload state could not be completed."""
        self._drop(frame_bytes, "dropped_offload")
        self.warn_once("offload", f"dropped a frame bwn-link cannot complete ({why}); "
                                  "counted as offload-drop, further ones silently")

    def _fits(self, frame: bytes) -> bool:
        size = len(frame)
        if size <= self.max_frame_bytes:
            return True
        if size <= self.max_frame_bytes + 4 and len(frame) >= 14:
            return ((frame[12] << 8) | frame[13]) in _VLAN_TPIDS
        return False

    def _oversize(self, frame: bytes, hint: str) -> None:
        self._drop(len(frame), "dropped_oversize")
        self.warn_once("oversize", (
            f"dropped a {len(frame)}-byte frame: larger than {self.egress}'s MTU allows "
            f"({self.max_frame_bytes - ETH_HLEN} + {ETH_HLEN}-byte Ethernet header); {hint}; "
            "counted as oversize"
        ))

    def frames(self, data: bytes) -> List[bytes]:
        """Frames to forward for one read ``data`` (virtio_net_hdr + frame)."""
        size = len(data)
        if size < VNET_HDR_LEN:
            self.bad_offload(size, f"{size} bytes: no virtio_net_hdr")
            return []
        if self.recv_bufsize and size >= self.recv_bufsize:
            self.bad_offload(size - VNET_HDR_LEN, "frame longer than the receive buffer, truncated")
            return []
        if data[1] != GSO_NONE:
            flags, gso_type, _hdr_len, gso_size, csum_start, _off = _VNET.unpack_from(data)
            frame = data[VNET_HDR_LEN:]
            try:
                segs = segment(frame, gso_type, gso_size, csum_start if flags & NEEDS_CSUM else None)
            except OffloadError as exc:
                self.bad_offload(len(frame), str(exc))
                return []
            c = self.c
            c.gso_superframes += 1
            c.gso_segments += len(segs)
            fits = [s for s in segs if self._fits(s)]
            if len(fits) < len(segs):
                for s in segs:
                    if not self._fits(s):
                        self._oversize(s, (
                            f"the sender's segments ({gso_size} payload bytes) need a larger MTU "
                            f"on {self.egress}, or the same MTU on both links (ip link set DEV mtu N)"))
            return fits
        if data[0] & NEEDS_CSUM:
            csum_start, csum_offset = _CSUM_FIELDS.unpack_from(data, 6)
            try:
                frame = complete_checksum(data, csum_start, csum_offset, VNET_HDR_LEN)
            except OffloadError as exc:
                self.bad_offload(size - VNET_HDR_LEN, str(exc))
                return []
            self.c.csum_completed += 1
        else:
            frame = data[VNET_HDR_LEN:]
        if len(frame) > self.max_frame_bytes and not self._fits(frame):
            self._oversize(frame, (
                f"a super-frame without segmentation metadata (LRO?) or a larger MTU on "
                f"{self.ingress}: run 'ethtool -K {self.ingress} lro off gro off' in its namespace, "
                f"or give both links the same MTU (ip link set DEV mtu N)"))
            return []
        return [frame]


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
