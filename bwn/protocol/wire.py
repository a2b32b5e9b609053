"""The BWN header: the one wire contract between switches and hosts.

See ``docs/wire-format.md`` for the specification; this module is its
reference codec (the Scapy layer in :mod:`bwn.protocol.scapy_layer` and the P4 header in
``p4src/shared/headers.p4`` must agree with it, and the test vectors in
``docs/wire-format-vectors.json`` hold all three to the same bytes).

Layout (24 bytes, network byte order)::

    byte 0      version (high nibble) | kind (low nibble)
    byte 1      hop_count            forward: switches that stamped the packet
    byte 2      ebn_code             forward: EBN per-flow share, log code (min)
    byte 3      echo_ebn_code        echo
    bytes 4-7   narrow_kbps  u32     forward: OBP narrow link (min capacity)
    bytes 8-11  tight_kbps   i32     forward: OBP tight link (min available bw)
    bytes 12-15 echo_narrow_kbps u32 echo
    bytes 16-19 echo_tight_kbps  i32 echo
    byte 20     echo_hop_count       echo
    byte 21     flags                bit 0: ECHO_VALID, bit 1: XR (the XR header follows)
    bytes 22-23 reserved (zero)

The XR header (24 bytes, right after the BWN header when flag XR is set) carries
the explicit feedback of XCP (Katabi, Handley, Rohrs) and RCP (Dukkipati,
McKeown), :class:`XrHeader`::

    bytes 0-3   rtt_us           u32  sender: its RTT estimate (XCP H_rtt, RCP RTT); 0: none
    bytes 4-7   cwnd_bytes       u32  sender: its window in frame bytes (XCP H_cwnd); 0: not XCP
    bytes 8-11  feedback_bytes   i32  forward: XCP H_feedback, the path minimum
    bytes 12-15 rate_kbps        u32  forward: RCP R_p, the path minimum
    bytes 16-19 echo_feedback_bytes i32  echo
    bytes 20-23 echo_rate_kbps   u32  echo
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass, replace
from typing import ClassVar

BWN_UDP_PORT = 16983  # 0x4257, ASCII "BW"; below Linux's ephemeral range
BWN_VERSION = 1
BWN_HEADER_LEN = 24

KIND_DATA = 0
KIND_ACK = 1
KIND_NAMES = {KIND_DATA: "DATA", KIND_ACK: "ACK"}

FLAG_ECHO_VALID = 0x01
FLAG_XR = 0x02  # the XR header (XrHeader) follows the BWN header

# "No information yet" values a sender writes into the forward section.
# They are the largest values of each field, so that any switch lowers them.
EBN_CODE_UNSET = 0xFF
NARROW_KBPS_UNSET = 0xFFFFFFFF
TIGHT_KBPS_UNSET = 0x7FFFFFFF

# EBN code: value(code) = 2 ** (code / EBN_CODES_PER_OCTAVE) kb/s.
EBN_CODES_PER_OCTAVE = 8
EBN_CODE_MAX = 254  # 255 means "unset"

TIGHT_KBPS_MIN = -(2**31)
TIGHT_KBPS_MAX = 2**31 - 1

_STRUCT = struct.Struct("!BBBBIiIiBBH")
assert _STRUCT.size == BWN_HEADER_LEN

XR_HEADER_LEN = 24
# "No information yet": what a sender writes into the forward feedback fields (the
# largest values, so that any switch lowers them), and what a receiver echoes
# before it has seen any.
XR_FEEDBACK_UNSET = 0x7FFFFFFF
XR_RATE_UNSET = 0xFFFFFFFF
XR_FEEDBACK_MIN = -(2**31)
_XR_STRUCT = struct.Struct("!IIiIiI")
assert _XR_STRUCT.size == XR_HEADER_LEN


class BwnDecodeError(ValueError):
    """Raised for bytes that are not a valid BWN header."""


def ebn_encode_kbps(rate_kbps: float) -> int:
    """EBN 8-bit code of a rate in kb/s: round(8 * log2(rate)), clamped to [0, 254].

    Rates at or below 1 kb/s (including zero and negative) encode as 0.
    """
    if math.isnan(rate_kbps):
        raise ValueError("rate_kbps is NaN")
    if rate_kbps <= 1.0:
        return 0
    code = int(math.floor(EBN_CODES_PER_OCTAVE * math.log2(rate_kbps) + 0.5))
    return min(code, EBN_CODE_MAX)


def ebn_decode_kbps(code: int) -> float | None:
    """Rate in kb/s that an EBN code stands for; ``None`` for the unset code 255."""
    if not 0 <= code <= 0xFF:
        raise ValueError(f"EBN code must be 0..255, got {code}")
    if code == EBN_CODE_UNSET:
        return None
    return 2.0 ** (code / EBN_CODES_PER_OCTAVE)


def ebn_ratio(current_code: int, last_code: int) -> float:
    """currentbn / lastebn of the EBN paper, exact to the code's resolution."""
    for name, code in (("current_code", current_code), ("last_code", last_code)):
        if not 0 <= code <= EBN_CODE_MAX:
            raise ValueError(f"{name} must be a set EBN code 0..{EBN_CODE_MAX}, got {code}")
    return 2.0 ** ((current_code - last_code) / EBN_CODES_PER_OCTAVE)


@dataclass(frozen=True)
class BwnHeader:
    """One BWN header. Field names and units follow docs/wire-format.md."""

    kind: int = KIND_DATA
    version: int = BWN_VERSION
    hop_count: int = 0
    ebn_code: int = EBN_CODE_UNSET
    narrow_kbps: int = NARROW_KBPS_UNSET
    tight_kbps: int = TIGHT_KBPS_UNSET
    echo_ebn_code: int = EBN_CODE_UNSET
    echo_narrow_kbps: int = NARROW_KBPS_UNSET
    echo_tight_kbps: int = TIGHT_KBPS_UNSET
    echo_hop_count: int = 0
    flags: int = 0
    reserved: int = 0

    LEN: ClassVar[int] = BWN_HEADER_LEN

    def __post_init__(self) -> None:
        _check_range("version", self.version, 0, 15)
        _check_range("kind", self.kind, 0, 15)
        for name in ("hop_count", "ebn_code", "echo_ebn_code", "echo_hop_count", "flags"):
            _check_range(name, getattr(self, name), 0, 0xFF)
        for name in ("narrow_kbps", "echo_narrow_kbps"):
            _check_range(name, getattr(self, name), 0, 0xFFFFFFFF)
        for name in ("tight_kbps", "echo_tight_kbps"):
            _check_range(name, getattr(self, name), TIGHT_KBPS_MIN, TIGHT_KBPS_MAX)
        _check_range("reserved", self.reserved, 0, 0xFFFF)

    @property
    def echo_valid(self) -> bool:
        return bool(self.flags & FLAG_ECHO_VALID)

    def pack(self) -> bytes:
        return _STRUCT.pack(
            (self.version << 4) | self.kind,
            self.hop_count,
            self.ebn_code,
            self.echo_ebn_code,
            self.narrow_kbps,
            self.tight_kbps,
            self.echo_narrow_kbps,
            self.echo_tight_kbps,
            self.echo_hop_count,
            self.flags,
            self.reserved,
        )

    @classmethod
    def unpack(cls, data: bytes, *, strict_version: bool = True) -> "BwnHeader":
        """Decode the first 24 bytes of ``data``.

        Raises :class:`BwnDecodeError` when ``data`` is too short, or (with
        ``strict_version``) when the version is not :data:`BWN_VERSION`.
        """
        if len(data) < BWN_HEADER_LEN:
            raise BwnDecodeError(
                f"BWN header too short: needs {BWN_HEADER_LEN} bytes, got {len(data)}"
            )
        (vk, hop, ebn, echo_ebn, narrow, tight, echo_narrow, echo_tight,
         echo_hop, flags, reserved) = _STRUCT.unpack_from(data)
        version = vk >> 4
        if strict_version and version != BWN_VERSION:
            raise BwnDecodeError(f"BWN version {version} is not supported (expected {BWN_VERSION})")
        return cls(
            kind=vk & 0x0F,
            version=version,
            hop_count=hop,
            ebn_code=ebn,
            narrow_kbps=narrow,
            tight_kbps=tight,
            echo_ebn_code=echo_ebn,
            echo_narrow_kbps=echo_narrow,
            echo_tight_kbps=echo_tight,
            echo_hop_count=echo_hop,
            flags=flags,
            reserved=reserved,
        )

    def with_echo_of(self, forward: "BwnHeader") -> "BwnHeader":
        """This header with its echo section set to ``forward``'s forward section."""
        return replace(
            self,
            echo_ebn_code=forward.ebn_code,
            echo_narrow_kbps=forward.narrow_kbps,
            echo_tight_kbps=forward.tight_kbps,
            echo_hop_count=forward.hop_count,
            flags=self.flags | FLAG_ECHO_VALID,
        )

    def stamped(self, *, ebn_code: int, narrow_kbps: int, tight_kbps: int) -> "BwnHeader":
        """What one switch does to a DATA packet (reference model of the P4 program):
        hop_count + 1 (saturating) and each forward field lowered to the switch's value."""
        return replace(
            self,
            hop_count=min(self.hop_count + 1, 0xFF),
            ebn_code=min(self.ebn_code, ebn_code),
            narrow_kbps=min(self.narrow_kbps, narrow_kbps),
            tight_kbps=min(self.tight_kbps, tight_kbps),
        )


def _check_range(name: str, value: int, low: int, high: int, header: str = "BWN") -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{header} field {name} must be an integer in [{low}, {high}], got {value!r}")


@dataclass(frozen=True)
class XrHeader:
    """One XR header (docs/wire-format.md, "The XR header"): XCP's congestion header
    (H_cwnd, H_rtt, H_feedback) and RCP's rate field, with their echo."""

    rtt_us: int = 0
    cwnd_bytes: int = 0
    feedback_bytes: int = XR_FEEDBACK_UNSET
    rate_kbps: int = XR_RATE_UNSET
    echo_feedback_bytes: int = XR_FEEDBACK_UNSET
    echo_rate_kbps: int = XR_RATE_UNSET

    LEN: ClassVar[int] = XR_HEADER_LEN

    def __post_init__(self) -> None:
        for name in ("rtt_us", "cwnd_bytes", "rate_kbps", "echo_rate_kbps"):
            _check_range(name, getattr(self, name), 0, 0xFFFFFFFF, "XR")
        for name in ("feedback_bytes", "echo_feedback_bytes"):
            _check_range(name, getattr(self, name), XR_FEEDBACK_MIN, XR_FEEDBACK_UNSET, "XR")

    def pack(self) -> bytes:
        return _XR_STRUCT.pack(self.rtt_us, self.cwnd_bytes, self.feedback_bytes, self.rate_kbps,
                               self.echo_feedback_bytes, self.echo_rate_kbps)

    @classmethod
    def unpack(cls, data: bytes) -> "XrHeader":
        """Decode the first 24 bytes of ``data``; :class:`BwnDecodeError` if shorter."""
        if len(data) < XR_HEADER_LEN:
            raise BwnDecodeError(f"XR header too short: needs {XR_HEADER_LEN} bytes, got {len(data)}")
        return cls(*_XR_STRUCT.unpack_from(data))

    def lowered(self, *, feedback_bytes: int | None = None, rate_kbps: int | None = None) -> "XrHeader":
        """What one switch does to a DATA packet's forward section (reference model of
        the P4 program): each field lowered to the switch's value, where it has one."""
        return replace(
            self,
            feedback_bytes=self.feedback_bytes if feedback_bytes is None
            else min(self.feedback_bytes, feedback_bytes),
            rate_kbps=self.rate_kbps if rate_kbps is None else min(self.rate_kbps, rate_kbps),
        )

    def with_echo_of(self, forward: "XrHeader") -> "XrHeader":
        """This header with its echo section set to ``forward``'s forward feedback."""
        return replace(self, echo_feedback_bytes=forward.feedback_bytes,
                       echo_rate_kbps=forward.rate_kbps)
