"""The host transport header that follows the BWN header (docs/transport.md).

Packet layout (UDP payload)::

    BWN header (24 bytes, bwn.protocol.wire)  |  transport header (36 bytes)  |  payload

Transport header (network byte order)::

    off size field
     0   1   version      1
     1   1   flags        SYN 0x01, FIN 0x02, DATA 0x04, ACK 0x08, RST 0x10, RETX 0x20,
                          ECE 0x40, CWR 0x80 (ECN, RFC 3168)
     2   1   hdr_words    header length in 32-bit words (9); receivers skip extensions
     3   1   reserved     0
     4   4   flow_id      chosen by the sender; demux key with (src addr, src port)
     8   8   seq          byte offset in the stream (SYN: 0; FIN: stream length)
    16   8   ack          next byte expected (valid with ACK)
    24   4   rwnd_bytes   receive window beyond ``ack`` (valid with ACK)
    28   4   ts_val_us    sender of this packet's clock, us mod 2**32
                          (on an ACK: the receiver's ACK send time, used by SARBE)
    32   4   ts_ecr_us    echo of ts_val of the segment that triggered this ACK
    36   -   options      4 * (hdr_words - 9) bytes of options (kind, length, data),
                          docs/transport.md "Options": SACK_PERMITTED (SYN, SYN|ACK),
                          SACK blocks (ACK, RFC 2018), RCV_STATS (FIN|ACK)

Header format revision 2 (options) keeps version 1: the base 36 bytes are
unchanged, a reader that knows no options skips them by ``hdr_words`` (which is
what that field was reserved for), and SACK is used only when both ends said so
in the handshake (RFC 2018 sec. 2), so old and new ends interoperate.

The fast paths pack both headers with one :class:`struct.Struct`
(:data:`PACKET_STRUCT`); :class:`TransportHeader` is the readable codec used by
tests and tools.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Tuple

from bwn.protocol.wire import (
    BWN_HEADER_LEN,
    BWN_VERSION,
    EBN_CODE_UNSET,
    FLAG_ECHO_VALID,
    FLAG_XR,
    KIND_ACK,
    KIND_DATA,
    NARROW_KBPS_UNSET,
    TIGHT_KBPS_UNSET,
    XR_HEADER_LEN,
)

from hosts.cc.base import Feedback

TRANSPORT_VERSION = 1
TRANSPORT_HEADER_LEN = 36
HEADERS_LEN = BWN_HEADER_LEN + TRANSPORT_HEADER_LEN  # 60

F_SYN = 0x01
F_FIN = 0x02
F_DATA = 0x04
F_ACK = 0x08
F_RST = 0x10
F_RETX = 0x20  # DATA: this segment is a retransmission; ACK: ts_ecr echoes one (Karn)
# ECN (RFC 3168 sec. 6.1): ECE on an ACK echoes a CE mark ("ECN-Echo"), CWR on DATA says
# the sender reduced its window. On a SYN, ECE|CWR offers ECN; on the SYN|ACK, ECE accepts.
F_ECE = 0x40
F_CWR = 0x80

TS_MOD = 1 << 32
TS_MASK = TS_MOD - 1

# IPv4 (20) + UDP (8) + the two headers: an Ethernet MTU of 1500 leaves 1412 bytes.
IP_UDP_OVERHEAD_BYTES = 28
ETHERNET_OVERHEAD_BYTES = 14
DEFAULT_MTU_BYTES = 1500
DEFAULT_MSS_BYTES = DEFAULT_MTU_BYTES - IP_UDP_OVERHEAD_BYTES - HEADERS_LEN
MAX_MSS_BYTES = 65507 - HEADERS_LEN  # largest UDP payload over IPv4

# Options (docs/transport.md "Options"). Every option this module writes is
# padded with NOPs in front to a multiple of 4 bytes, so hdr_words stays exact.
OPT_EOL = 0
OPT_NOP = 1
OPT_SACK_PERMITTED = 2     # len 2, SYN (offer) and SYN|ACK (accept)
OPT_SACK = 3               # len 2 + 16 n: n blocks [left, right) as two uint64
OPT_RCV_STATS = 4          # len 18: four uint32 receiver counters, FIN|ACK
MAX_SACK_BLOCKS = 4        # RFC 2018's limit; an ACK is at most 60 + 68 bytes
MAX_HDR_WORDS = 0xFF
SACK_BLOCK_STRUCT = struct.Struct("!QQ")
RCV_STATS_STRUCT = struct.Struct("!IIII")
U32_MAX = 0xFFFFFFFF

TRANSPORT_STRUCT = struct.Struct("!BBBBIQQIII")
assert TRANSPORT_STRUCT.size == TRANSPORT_HEADER_LEN

# BWN (24 bytes, bwn.protocol.wire layout) + transport header in one struct.
PACKET_STRUCT = struct.Struct("!BBBBIiIiBBH" + "BBBBIQQIII")
assert PACKET_STRUCT.size == HEADERS_LEN

# What a receiver reads from a DATA packet: BWN byte 0, the forward section,
# then the transport fields it needs.
#   vk, hop, ebn, (skip echo_ebn) narrow, tight, (skip 12) tver, flags, words, (skip) flow, seq, (skip ack, rwnd) ts_val
DATA_IN_STRUCT = struct.Struct("!BBBxIi12xBBBxIQ12xI4x")
assert DATA_IN_STRUCT.size == HEADERS_LEN
# What a sender reads from an ACK: byte 0, the echo section, then the transport fields.
#   vk, (skip hop, ebn) echo_ebn, (skip 8) echo_narrow, echo_tight, echo_hop, bwn_flags, (skip 2),
#   tver, flags, words, (skip) flow, (skip seq) ack, rwnd, ts_val, ts_ecr
ACK_IN_STRUCT = struct.Struct("!B2xB8xIiBB2xBBBxI8xQIII")
assert ACK_IN_STRUCT.size == HEADERS_LEN

DATA_VK = (BWN_VERSION << 4) | KIND_DATA
ACK_VK = (BWN_VERSION << 4) | KIND_ACK
HDR_WORDS = TRANSPORT_HEADER_LEN // 4


class OptionError(ValueError):
    """Malformed transport options (a length that runs past the header, a bad SACK block)."""


@dataclass(frozen=True)
class TransportOptions:
    """The options of one packet, decoded (unknown kinds are skipped)."""

    sack_permitted: bool = False
    sack_blocks: Tuple[Tuple[int, int], ...] = ()
    rcv_stats: Optional[Tuple[int, int, int, int]] = None  # segments, duplicates, out of order, spurious


def encode_options(*, sack_permitted: bool = False,
                   sack_blocks: Sequence[Tuple[int, int]] = (),
                   rcv_stats: Optional[Sequence[int]] = None) -> bytes:
    """The option bytes (a multiple of 4) for the given options.

    Each option is preceded by two NOPs so that its data is 4-byte aligned,
    as TCP stacks do for SACK (RFC 2018 sec. 3, appendix)."""
    out = bytearray()
    if sack_permitted:
        out += bytes((OPT_NOP, OPT_NOP, OPT_SACK_PERMITTED, 2))
    if sack_blocks:
        if len(sack_blocks) > MAX_SACK_BLOCKS:
            raise OptionError(f"at most {MAX_SACK_BLOCKS} SACK blocks, got {len(sack_blocks)}")
        out += bytes((OPT_NOP, OPT_NOP, OPT_SACK, 2 + 16 * len(sack_blocks)))
        for left, right in sack_blocks:
            if not 0 <= left < right < 1 << 64:
                raise OptionError(f"SACK block must have 0 <= left < right < 2**64, got [{left}, {right})")
            out += SACK_BLOCK_STRUCT.pack(left, right)
    if rcv_stats is not None:
        out += bytes((OPT_NOP, OPT_NOP, OPT_RCV_STATS, 2 + RCV_STATS_STRUCT.size))
        out += RCV_STATS_STRUCT.pack(*(min(max(int(v), 0), U32_MAX) for v in rcv_stats))
    return bytes(out)


def parse_options(data: Any, start: int, end: int) -> TransportOptions:
    """Decode the options in ``data[start:end]``; :class:`OptionError` if malformed.

    Kinds this end does not know are skipped by their length (RFC 793 style);
    EOL ends the list."""
    sack_permitted = False
    blocks: Tuple[Tuple[int, int], ...] = ()
    stats: Optional[Tuple[int, int, int, int]] = None
    i = start
    while i < end:
        kind = data[i]
        if kind == OPT_EOL:
            break
        if kind == OPT_NOP:
            i += 1
            continue
        if i + 1 >= end:
            raise OptionError(f"option kind {kind} at byte {i - start} has no length byte")
        length = data[i + 1]
        if length < 2 or i + length > end:
            raise OptionError(f"option kind {kind} has length {length}, "
                              f"{end - i} bytes left in the header")
        if kind == OPT_SACK_PERMITTED:
            if length != 2:
                raise OptionError(f"SACK_PERMITTED must have length 2, got {length}")
            sack_permitted = True
        elif kind == OPT_SACK:
            n, rest = divmod(length - 2, 16)
            if rest or not 1 <= n <= MAX_SACK_BLOCKS:
                raise OptionError(f"SACK option length {length} is not 2 + 16 * (1..{MAX_SACK_BLOCKS})")
            found = []
            for k in range(n):
                left, right = SACK_BLOCK_STRUCT.unpack_from(data, i + 2 + 16 * k)
                if left >= right:
                    raise OptionError(f"SACK block [{left}, {right}) is empty or reversed")
                found.append((left, right))
            blocks = tuple(found)
        elif kind == OPT_RCV_STATS:
            if length != 2 + RCV_STATS_STRUCT.size:
                raise OptionError(f"RCV_STATS must have length {2 + RCV_STATS_STRUCT.size}, got {length}")
            stats = RCV_STATS_STRUCT.unpack_from(data, i + 2)
        i += length
    return TransportOptions(sack_permitted=sack_permitted, sack_blocks=blocks, rcv_stats=stats)


def pack_data_headers(buf: bytearray, flags: int, flow_id: int, seq: int, ts_val_us: int,
                      options: bytes = b"") -> int:
    """Write a sender->receiver packet's headers into ``buf``; returns their length
    (60 + ``len(options)``; ``options`` from :func:`encode_options`).

    The BWN header is a fresh DATA header: forward section unset (the largest
    values, docs/wire-format.md "Unset values"), echo section unset, no flags.
    """
    PACKET_STRUCT.pack_into(
        buf, 0,
        DATA_VK, 0, EBN_CODE_UNSET, EBN_CODE_UNSET, NARROW_KBPS_UNSET, TIGHT_KBPS_UNSET,
        NARROW_KBPS_UNSET, TIGHT_KBPS_UNSET, 0, 0, 0,
        TRANSPORT_VERSION, flags, HDR_WORDS + (len(options) >> 2), 0, flow_id, seq, 0, 0,
        ts_val_us & TS_MASK, 0,
    )
    if options:
        buf[HEADERS_LEN:HEADERS_LEN + len(options)] = options
    return HEADERS_LEN + len(options)


def pack_ack_headers(
    buf: bytearray,
    flags: int,
    flow_id: int,
    ack: int,
    rwnd_bytes: int,
    ts_val_us: int,
    ts_ecr_us: int,
    echo: Optional[Tuple[int, int, int, int]],
    options: bytes = b"",
) -> int:
    """Write a receiver->sender ACK's headers into ``buf``; returns their length
    (60 + ``len(options)``).

    ``echo`` is the newest forward section received, ``(hop_count, ebn_code,
    narrow_kbps, tight_kbps)``, or ``None`` before any DATA (then the echo
    section holds the unset values and ECHO_VALID is clear).
    """
    if echo is None:
        e_hop, e_ebn, e_narrow, e_tight, bwn_flags = (
            0, EBN_CODE_UNSET, NARROW_KBPS_UNSET, TIGHT_KBPS_UNSET, 0)
    else:
        e_hop, e_ebn, e_narrow, e_tight = echo
        bwn_flags = FLAG_ECHO_VALID
    PACKET_STRUCT.pack_into(
        buf, 0,
        ACK_VK, 0, EBN_CODE_UNSET, e_ebn, NARROW_KBPS_UNSET, TIGHT_KBPS_UNSET,
        e_narrow, e_tight, e_hop, bwn_flags, 0,
        TRANSPORT_VERSION, flags, HDR_WORDS + (len(options) >> 2), 0, flow_id, 0, ack, rwnd_bytes,
        ts_val_us & TS_MASK, ts_ecr_us & TS_MASK,
    )
    if options:
        buf[HEADERS_LEN:HEADERS_LEN + len(options)] = options
    return HEADERS_LEN + len(options)


# The XR header (docs/wire-format.md, "The XR header"): a flow whose algorithm uses it
# (XCP, RCP) carries it between the BWN and the transport header, both ways. The fast
# paths above keep their one-struct layout: a packet is built without it and
# `insert_xr` moves the transport header and payload up by 24 bytes; a packet that
# has it is read after `split_xr` took it out.
XR_STRUCT = struct.Struct("!IIiIiI")
assert XR_STRUCT.size == XR_HEADER_LEN
BWN_FLAGS_OFFSET = 21            # the BWN header's flags byte

#: (rtt_us, cwnd_bytes, feedback_bytes, rate_kbps, echo_feedback_bytes, echo_rate_kbps)
XrFields = Tuple[int, int, int, int, int, int]


def insert_xr(buf: bytearray, n: int, xr: XrFields) -> int:
    """Make the packet ``buf[:n]`` (BWN header, transport header, ...) carry the XR
    header ``xr`` after its BWN header, with the BWN flag XR set; returns its new
    length, ``n + 24`` (``buf`` must have room for it)."""
    buf[BWN_HEADER_LEN + XR_HEADER_LEN:n + XR_HEADER_LEN] = buf[BWN_HEADER_LEN:n]
    XR_STRUCT.pack_into(buf, BWN_HEADER_LEN, *xr)
    buf[BWN_FLAGS_OFFSET] |= FLAG_XR
    return n + XR_HEADER_LEN


def has_xr(data: Any) -> bool:
    """The BWN header of ``data`` says an XR header follows it."""
    return len(data) > BWN_FLAGS_OFFSET and bool(data[BWN_FLAGS_OFFSET] & FLAG_XR)


def split_xr(data: Any) -> Optional[Tuple[bytes, XrFields]]:
    """``data`` without its XR header (the BWN header, then what followed the XR
    header), and the XR header's fields; None if ``data`` ends inside the XR header."""
    if len(data) < BWN_HEADER_LEN + XR_HEADER_LEN:
        return None
    fields = XR_STRUCT.unpack_from(data, BWN_HEADER_LEN)
    return bytes(data[:BWN_HEADER_LEN]) + bytes(data[BWN_HEADER_LEN + XR_HEADER_LEN:]), fields


def feedback_from_echo(
    bwn_flags: int, echo_hop: int, echo_ebn: int, echo_narrow: int, echo_tight: int
) -> Optional[Feedback]:
    """The :class:`Feedback` of an ACK's echo section; ``None`` when ECHO_VALID is clear."""
    if not bwn_flags & FLAG_ECHO_VALID:
        return None
    return Feedback(
        hop_count=echo_hop,
        ebn_code=None if echo_ebn == EBN_CODE_UNSET else echo_ebn,
        narrow_kbps=None if echo_narrow == NARROW_KBPS_UNSET else echo_narrow,
        tight_kbps=None if echo_tight == TIGHT_KBPS_UNSET else echo_tight,
    )


def ts_diff_us(later_us: int, earlier_us: int) -> int:
    """``later - earlier`` for 32-bit microsecond timestamps (signed, RFC 7323 sec. 5.2 style)."""
    d = (later_us - earlier_us) & TS_MASK
    return d - TS_MOD if d >= (TS_MOD >> 1) else d


@dataclass(frozen=True)
class TransportHeader:
    """Readable codec of the 36-byte transport header (tests, tools)."""

    flags: int
    flow_id: int
    seq: int = 0
    ack: int = 0
    rwnd_bytes: int = 0
    ts_val_us: int = 0
    ts_ecr_us: int = 0
    version: int = TRANSPORT_VERSION
    hdr_words: int = HDR_WORDS
    options_raw: bytes = b""   # the 4 * (hdr_words - 9) option bytes

    LEN = TRANSPORT_HEADER_LEN

    def pack(self) -> bytes:
        """Base header and options; ``hdr_words`` is the one given (tests may lie)."""
        return TRANSPORT_STRUCT.pack(
            self.version, self.flags, self.hdr_words, 0, self.flow_id, self.seq,
            self.ack, self.rwnd_bytes, self.ts_val_us & TS_MASK,
            self.ts_ecr_us & TS_MASK) + self.options_raw

    @classmethod
    def with_options(cls, options: bytes, **fields: Any) -> "TransportHeader":
        """A header whose ``hdr_words`` covers ``options`` (from :func:`encode_options`)."""
        return cls(hdr_words=HDR_WORDS + len(options) // 4, options_raw=options, **fields)

    @property
    def options(self) -> TransportOptions:
        return parse_options(self.options_raw, 0, len(self.options_raw))

    @classmethod
    def unpack(cls, data: bytes, offset: int = BWN_HEADER_LEN) -> "TransportHeader":
        if len(data) < offset + TRANSPORT_HEADER_LEN:
            raise ValueError(
                f"transport header needs {TRANSPORT_HEADER_LEN} bytes at offset {offset}, "
                f"got {len(data) - offset}")
        (version, flags, words, _res, flow_id, seq, ack, rwnd, ts_val,
         ts_ecr) = TRANSPORT_STRUCT.unpack_from(data, offset)
        if words < HDR_WORDS or offset + 4 * words > len(data):
            raise ValueError(f"hdr_words {words} does not fit a {len(data) - offset}-byte "
                             f"transport header (at least {HDR_WORDS})")
        raw = bytes(data[offset + TRANSPORT_HEADER_LEN:offset + 4 * words])
        return cls(flags=flags, flow_id=flow_id, seq=seq, ack=ack, rwnd_bytes=rwnd,
                   ts_val_us=ts_val, ts_ecr_us=ts_ecr, version=version, hdr_words=words,
                   options_raw=raw)
