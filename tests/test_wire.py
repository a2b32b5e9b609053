"""The wire contract: codec, Scapy layer and the committed vectors agree."""
from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from bwn.protocol.wire import (
    BWN_HEADER_LEN,
    BWN_UDP_PORT,
    FLAG_XR,
    XR_FEEDBACK_UNSET,
    XR_HEADER_LEN,
    XR_RATE_UNSET,
    BwnDecodeError,
    BwnHeader,
    XrHeader,
    ebn_decode_kbps,
    ebn_encode_kbps,
    ebn_ratio,
)

VECTORS = json.loads((Path(__file__).resolve().parents[1] / "docs" / "wire-format-vectors.json").read_text())


@pytest.mark.parametrize("vec", VECTORS["header"], ids=lambda v: v["name"][:40])
def test_codec_matches_vectors(vec):
    header = BwnHeader(**vec["fields"])
    assert header.pack().hex() == vec["hex"]
    assert BwnHeader.unpack(bytes.fromhex(vec["hex"])) == header


@pytest.mark.parametrize("vec", VECTORS["header"], ids=lambda v: v["name"][:40])
def test_scapy_layer_matches_vectors(vec):
    from scapy.layers.inet import IP, UDP
    from bwn.protocol.scapy_layer import BWN, to_header

    layer = BWN(**{k: v for k, v in vec["fields"].items()})
    assert bytes(layer).hex() == vec["hex"]
    # Dissection from the wire in both directions of the UDP binding.
    for udp in (UDP(sport=40000, dport=BWN_UDP_PORT), UDP(sport=BWN_UDP_PORT, dport=40000)):
        pkt = IP(bytes(IP(dst="10.0.0.2") / udp / bytes.fromhex(vec["hex"]) / b"payload"))
        assert pkt.haslayer(BWN), pkt.summary()
        assert to_header(pkt[BWN]) == BwnHeader(**vec["fields"])
        assert bytes(pkt[BWN].payload) == b"payload"


def test_ebn_code_vectors_and_definition():
    for vec in VECTORS["ebn_code"]:
        assert ebn_encode_kbps(vec["rate_kbps"]) == vec["code"], vec
    # Hand-computed: 8*log2(100) = 53.15 -> 53; 8*log2(200) = 61.15 -> 61.
    assert ebn_encode_kbps(100) == 53 and ebn_encode_kbps(200) == 61
    # Any decoded code re-encodes to itself, and the value is within half a step.
    for code in range(0, 255):
        value = ebn_decode_kbps(code)
        assert ebn_encode_kbps(value) == code
    assert ebn_decode_kbps(255) is None
    # Ratios are exact powers of 2^(1/8): one octave is 8 codes.
    assert ebn_ratio(61, 53) == pytest.approx(2.0)
    assert ebn_ratio(53, 61) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        ebn_ratio(255, 10)


def test_invalid_vectors_are_rejected():
    for vec in VECTORS["invalid"]:
        with pytest.raises(BwnDecodeError, match=vec["error"]):
            BwnHeader.unpack(bytes.fromhex(vec["hex"]))


@pytest.mark.parametrize("field,value", [("hop_count", 256), ("narrow_kbps", -1),
                                         ("tight_kbps", 2**31), ("kind", 16), ("ebn_code", True)])
def test_out_of_range_fields_raise(field, value):
    with pytest.raises(ValueError, match=field):
        BwnHeader(**{field: value})


def test_stamp_and_echo_semantics():
    h = BwnHeader()
    s1 = h.stamped(ebn_code=60, narrow_kbps=10_000, tight_kbps=5_000)
    s2 = s1.stamped(ebn_code=70, narrow_kbps=200, tight_kbps=-300)
    assert (s2.hop_count, s2.ebn_code, s2.narrow_kbps, s2.tight_kbps) == (2, 60, 200, -300)
    ack = BwnHeader(kind=1).with_echo_of(s2)
    assert ack.echo_valid and ack.echo_tight_kbps == -300 and ack.echo_hop_count == 2
    assert len(ack.pack()) == BWN_HEADER_LEN


def _can_raw_socket() -> str | None:
    if os.geteuid() != 0:
        return "needs root for a raw IP socket"
    return None


def test_linux_accepts_zero_udp_checksum():
    """The switch's checksum rule (zero UDP checksum on IPv4) is accepted by Linux,
    while a wrong non-zero checksum is dropped: sent as raw IP to a real UDP socket."""
    from needs import missing
    missing(_can_raw_socket(), "zero-UDP-checksum check on a real socket")
    from scapy.layers.inet import IP, UDP
    from bwn.protocol.scapy_layer import BWN

    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind(("127.0.0.1", 0))
    rx.settimeout(0.5)
    port = rx.getsockname()[1]
    raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    try:
        good = IP(bytes(IP(src="127.0.0.1", dst="127.0.0.1") / UDP(sport=BWN_UDP_PORT, dport=port) / BWN() / b"zero"))
        zero = good.copy()
        zero[UDP].chksum = 0
        bad = good.copy()
        bad[UDP].chksum = (good[UDP].chksum + 1) & 0xFFFF or 1
        raw.sendto(bytes(bad), ("127.0.0.1", 0))
        raw.sendto(bytes(zero), ("127.0.0.1", 0))
        data = rx.recv(2048)
        assert data.endswith(b"zero")
        with pytest.raises(socket.timeout):
            rx.recv(2048)  # the bad-checksum datagram was never delivered
    finally:
        raw.close()
        rx.close()


def test_codec_errors_say_which_value_is_wrong():
    """The messages a user sees for bad codes and rates: exact, so that a caller can act on them."""
    with pytest.raises(ValueError) as err:
        ebn_encode_kbps(float("nan"))
    assert str(err.value) == "rate_kbps is NaN"
    assert ebn_decode_kbps(0xFF) is None  # the top of the range is valid (unset) ...
    with pytest.raises(ValueError) as err:
        ebn_decode_kbps(256)             # ... one past it is not
    assert str(err.value) == "EBN code must be 0..255, got 256"
    assert ebn_ratio(254, 254) == 1.0     # EBN_CODE_MAX is a set code
    for args, name, code in (((255, 10), "current_code", 255), ((10, -1), "last_code", -1)):
        with pytest.raises(ValueError) as err:
            ebn_ratio(*args)
        assert str(err.value) == f"{name} must be a set EBN code 0..254, got {code}"


@pytest.mark.parametrize("field,low,high", [
    ("version", 0, 15), ("kind", 0, 15), ("hop_count", 0, 0xFF), ("flags", 0, 0xFF),
    ("narrow_kbps", 0, 0xFFFFFFFF), ("echo_narrow_kbps", 0, 0xFFFFFFFF),
    ("tight_kbps", -(2**31), 2**31 - 1), ("reserved", 0, 0xFFFF)])
def test_field_ranges_are_exactly_the_wire_widths(field, low, high):
    """Both ends of each field's range are accepted and one past either end is refused,
    with a message naming the field and its range."""
    assert getattr(BwnHeader(**{field: low}), field) == low
    assert getattr(BwnHeader(**{field: high}), field) == high
    for bad in (low - 1, high + 1):
        with pytest.raises(ValueError) as err:
            BwnHeader(**{field: bad})
        assert str(err.value) == f"BWN field {field} must be an integer in [{low}, {high}], got {bad}"


def test_hop_count_saturates_at_255():
    """A 256th switch leaves the hop count at 255 (as the P4 program does), not an error."""
    h = BwnHeader(hop_count=254).stamped(ebn_code=1, narrow_kbps=1, tight_kbps=1)
    assert h.hop_count == 255
    assert h.stamped(ebn_code=1, narrow_kbps=1, tight_kbps=1).hop_count == 255


def test_unpack_keeps_version_and_reserved_bits():
    """A lenient decode (strict_version=False) reports the version it read, and the reserved
    bits are carried, not zeroed: a receiver can flag a header from another version."""
    raw = BwnHeader(version=2, reserved=0xABCD).pack()
    h = BwnHeader.unpack(raw, strict_version=False)
    assert (h.version, h.reserved) == (2, 0xABCD)
    with pytest.raises(BwnDecodeError, match="BWN version 2 is not supported"):
        BwnHeader.unpack(raw)


# -- the XR header (XCP and RCP) --------------------------------------------------------

@pytest.mark.parametrize("vec", VECTORS["xr"], ids=lambda v: v["name"][:40])
def test_xr_codec_matches_vectors(vec):
    header = XrHeader(**vec["fields"])
    assert header.pack().hex() == vec["hex"]
    assert XrHeader.unpack(bytes.fromhex(vec["hex"])) == header
    assert BwnHeader(**vec["bwn_fields"]).pack().hex() == vec["bwn_hex"]
    assert BwnHeader(**vec["bwn_fields"]).flags & FLAG_XR


@pytest.mark.parametrize("vec", VECTORS["xr"], ids=lambda v: v["name"][:40])
def test_xr_scapy_layer_follows_the_flag(vec):
    """Scapy dissects an XR layer after a BWN header whose flags say XR, in both
    directions of the UDP binding, and the bytes after it as the payload."""
    from scapy.layers.inet import IP, UDP
    from bwn.protocol.scapy_layer import BWN, XR, to_xr

    assert bytes(XR(**vec["fields"])).hex() == vec["hex"]
    wire = bytes.fromhex(vec["bwn_hex"] + vec["hex"])
    for udp in (UDP(sport=40000, dport=BWN_UDP_PORT), UDP(sport=BWN_UDP_PORT, dport=40000)):
        pkt = IP(bytes(IP(dst="10.0.0.2") / udp / wire / b"transport"))
        assert pkt.haslayer(XR), pkt.summary()
        assert to_xr(pkt[XR]) == XrHeader(**vec["fields"])
        assert bytes(pkt[XR].payload) == b"transport"
    # Without the flag the same bytes are the BWN header's payload, not an XR header.
    plain = bytearray(wire)
    plain[21] &= ~FLAG_XR
    pkt = IP(bytes(IP(dst="10.0.0.2") / UDP(sport=40000, dport=BWN_UDP_PORT) / bytes(plain)))
    assert not pkt.haslayer(XR)
    assert bytes(pkt[BWN].payload) == wire[BWN_HEADER_LEN:]


def test_xr_invalid_vectors_are_rejected():
    for vec in VECTORS["xr_invalid"]:
        with pytest.raises(BwnDecodeError, match=vec["error"]):
            XrHeader.unpack(bytes.fromhex(vec["hex"]))


@pytest.mark.parametrize("field,low,high", [
    ("rtt_us", 0, 0xFFFFFFFF), ("cwnd_bytes", 0, 0xFFFFFFFF), ("rate_kbps", 0, 0xFFFFFFFF),
    ("echo_rate_kbps", 0, 0xFFFFFFFF), ("feedback_bytes", -(2**31), 2**31 - 1),
    ("echo_feedback_bytes", -(2**31), 2**31 - 1)])
def test_xr_field_ranges_are_exactly_the_wire_widths(field, low, high):
    assert getattr(XrHeader(**{field: low}), field) == low
    assert getattr(XrHeader(**{field: high}), field) == high
    for bad in (low - 1, high + 1):
        with pytest.raises(ValueError) as err:
            XrHeader(**{field: bad})
        assert str(err.value) == f"XR field {field} must be an integer in [{low}, {high}], got {bad}"


def test_xr_lowering_and_echo_semantics():
    """Each switch lowers the feedback and the rate to its own (the path minimum, XCP
    sec. 3.4 and RCP's R_p); a switch that has no value for a field leaves it; the
    receiver's echo copies the forward feedback."""
    h = XrHeader(rtt_us=10_000, cwnd_bytes=20_000)
    s1 = h.lowered(feedback_bytes=500, rate_kbps=8_000)
    s2 = s1.lowered(feedback_bytes=-40, rate_kbps=9_000)
    s3 = s2.lowered()
    assert (s3.feedback_bytes, s3.rate_kbps) == (-40, 8_000)
    assert (s3.rtt_us, s3.cwnd_bytes) == (10_000, 20_000)
    ack = XrHeader().with_echo_of(s3)
    assert (ack.echo_feedback_bytes, ack.echo_rate_kbps) == (-40, 8_000)
    assert (ack.feedback_bytes, ack.rate_kbps) == (XR_FEEDBACK_UNSET, XR_RATE_UNSET)
    assert len(ack.pack()) == XR_HEADER_LEN == 24
