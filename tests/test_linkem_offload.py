"""Unit tests of bwn-link's offload completion (bwn.linkem.offload); no root.

Frames are built with Scapy, whose own checksums are the reference; partial
checksums are made the way the kernel makes them (the checksum field seeded
with the folded pseudo-header sum, ``~csum_tcpudp_magic(...)``), computed
here with a word-by-word RFC 1071 sum independent of the module under test.
"""

from __future__ import annotations

import os
import select
import socket
import sys
import threading
import time
from typing import List, Optional, Tuple

import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrHopByHop
from scapy.layers.l2 import Dot1AD, Dot1Q, Ether
from scapy.packet import Raw

from bwn.linkem import DirectionScheduler, Impairment
from bwn.linkem.worker import DirectionWorker
from bwn.linkem.offload import (
    DATA_VALID,
    GSO_ECN,
    GSO_TCPV4,
    GSO_TCPV6,
    GSO_UDP,
    GSO_UDP_L4,
    NEEDS_CSUM,
    IngressOffload,
    OffloadError,
    complete_checksum,
    inet_checksum,
    segment,
    vnet_header,
)
from bwn.linkem.scheduler import Counters

SRC4, DST4 = "10.1.0.1", "10.1.0.2"
SRC6, DST6 = "fd00::1", "fd00::2"


def eth(**kw) -> Ether:
    """Ethernet with both MACs given: a bare Ether() before IPv6 makes Scapy wait
    seconds for a neighbour lookup to fill in the destination."""
    return Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01", **kw)


# -- an independent reference ---------------------------------------------------------


def word_sum(data: bytes) -> int:
    """RFC 1071 one's-complement sum, 16 bits at a time with end-around carry."""
    if len(data) % 2:
        data += b"\0"
    total = 0
    for i in range(0, len(data), 2):
        total += (data[i] << 8) | data[i + 1]
        total = (total & 0xFFFF) + (total >> 16)
    return total


def pseudo_header(pkt: Ether) -> bytes:
    ip = pkt[IP] if IP in pkt else pkt[IPv6]
    l4 = pkt[TCP] if TCP in pkt else pkt[UDP]
    proto = 6 if TCP in pkt else 17
    length = len(bytes(l4))
    if IP in pkt:
        return socket.inet_aton(ip.src) + socket.inet_aton(ip.dst) + bytes([0, proto]) + length.to_bytes(2, "big")
    return (socket.inet_pton(socket.AF_INET6, ip.src) + socket.inet_pton(socket.AF_INET6, ip.dst)
            + length.to_bytes(4, "big") + bytes([0, 0, 0, proto]))


def checksum_ok(frame: bytes) -> bool:
    """Does the TCP/UDP checksum of ``frame`` verify (sum over pseudo-header + segment)?"""
    pkt = Ether(frame)
    l4 = bytes(pkt[TCP] if TCP in pkt else pkt[UDP])
    return word_sum(pseudo_header(pkt) + l4) == 0xFFFF


def l4_offset(pkt: Ether) -> int:
    l4 = pkt[TCP] if TCP in pkt else pkt[UDP]
    return len(bytes(pkt)) - len(bytes(l4))


def partial(pkt: Ether) -> Tuple[bytes, int, int]:
    """(frame as the kernel hands it over with CHECKSUM_PARTIAL, csum_start, csum_offset)."""
    full = bytes(pkt)
    start = l4_offset(pkt)
    offset = 16 if TCP in pkt else 6
    seed = word_sum(pseudo_header(pkt))  # ~csum_tcpudp_magic(): folded, not complemented
    pos = start + offset
    return full[:pos] + seed.to_bytes(2, "big") + full[pos + 2:], start, offset


def udp4(payload: bytes, **kw) -> Ether:
    return eth() / IP(src=SRC4, dst=DST4, **kw) / UDP(sport=4000, dport=5000) / Raw(payload)


def tcp4(payload: bytes, ip_kw=None, **kw) -> Ether:
    return eth() / IP(src=SRC4, dst=DST4, **(ip_kw or {})) / TCP(sport=4000, dport=5001, **kw) / Raw(payload)


def pattern(n: int, salt: int = 0) -> bytes:
    return bytes((i * 7 + salt) & 0xFF for i in range(n))


# -- checksum completion ------------------------------------------------------------------


@pytest.mark.parametrize("name, pkt", [
    ("udp4 even", udp4(pattern(100))),
    ("udp4 odd", udp4(pattern(101))),
    ("udp4 empty", udp4(b"")),
    ("tcp4 odd", tcp4(pattern(1001), flags="PA", seq=12345)),
    ("tcp4 options", eth() / IP(src=SRC4, dst=DST4) / TCP(options=[("MSS", 1460), ("NOP", None),
                                                                    ("WScale", 7)], flags="S")),
    ("udp6 odd", eth() / IPv6(src=SRC6, dst=DST6) / UDP(sport=1, dport=2) / Raw(pattern(333))),
    ("tcp6 even", eth() / IPv6(src=SRC6, dst=DST6) / TCP(flags="A") / Raw(pattern(1440))),
    ("udp4 vlan", eth() / Dot1Q(vlan=5) / IP(src=SRC4, dst=DST4) / UDP() / Raw(pattern(77))),
])
def test_completed_checksum_equals_a_full_one(name, pkt):
    full = bytes(pkt)
    assert checksum_ok(full)  # Scapy's own is right
    frame, start, offset = partial(pkt)
    assert frame != full and not checksum_ok(frame)  # what the receiver would drop
    fixed = complete_checksum(frame, start, offset)
    assert len(fixed) == len(frame)
    assert fixed == full, name


def test_checksum_of_zero_is_sent_as_ffff():
    """A UDP checksum that computes to 0 goes out as 0xFFFF (0 means "none")."""
    pkt = udp4(b"\0\0" + pattern(40))
    frame, start, offset = partial(pkt)
    # Choose the first payload word so the whole sum is 0xFFFF: checksum 0.
    body = bytearray(frame)
    field = start + offset
    body[field:field + 2] = b"\0\0"
    s = word_sum(pseudo_header(pkt) + bytes(body[start:]))
    word = 0xFFFF - s
    first = start + 8
    body[first:first + 2] = word.to_bytes(2, "big")
    fixed_pkt = Ether(bytes(body))
    frame, start, offset = partial(fixed_pkt)
    out = complete_checksum(frame, start, offset)
    assert out[field:field + 2] == b"\xff\xff"
    assert checksum_ok(out)


def test_checksum_field_at_the_very_end():
    start, offset = 21, 40  # region 21..62, the field is the frame's last two bytes
    frame = pattern(start + offset, 5) + b"\x12\x34"  # 0x1234: the kernel's seed
    out = complete_checksum(frame, start, offset)
    assert len(out) == len(frame) and out[:-2] == frame[:-2]
    # The receiver's view: seed (its pseudo-header sum) + region with the checksum.
    assert word_sum(b"\x12\x34" + out[start:]) == 0xFFFF


def test_checksum_odd_region_pads_with_zero():
    frame = bytes(20) + b"\x01\x02\x00\x00\x03"  # region of 5 bytes from 20
    out = complete_checksum(frame, 20, 2)
    assert word_sum(out[20:]) == 0xFFFF
    # 0x0102 + 0x0300 = 0x0402 -> checksum 0xFBFD
    assert out[22:24] == (0xFFFF - 0x0402).to_bytes(2, "big")


@pytest.mark.parametrize("start, offset, size", [
    (100, 6, 80),      # start beyond the end
    (34, 16, 50),      # field's second byte beyond the end
    (34, 15, 50),      # field straddles the end
    (65535, 65535, 1514),
])
def test_checksum_metadata_outside_the_frame_is_refused(start, offset, size):
    with pytest.raises(OffloadError, match="outside"):
        complete_checksum(bytes(size), start, offset)


def test_inet_checksum_matches_reference_on_random_data():
    for n in list(range(0, 40)) + [1499, 1500, 9001]:
        data = os.urandom(n)
        assert inet_checksum(data) == ((~word_sum(data) & 0xFFFF) or 0xFFFF), n
        # Summing the data with its checksum appended verifies (even lengths).
        if n % 2 == 0:
            assert word_sum(data + inet_checksum(data).to_bytes(2, "big")) == 0xFFFF


def test_sctp_partial_checksum_is_refused():
    frame = bytes(eth() / IP(src=SRC4, dst=DST4, proto=132) / Raw(bytes(12) + pattern(40)))
    with pytest.raises(OffloadError, match="SCTP"):
        complete_checksum(frame, 34, 8)


# -- segmentation -------------------------------------------------------------------------


def parse(frame: bytes) -> Ether:
    return Ether(frame)


def assert_headers_valid(frame: bytes) -> None:
    pkt = parse(frame)
    assert checksum_ok(frame)
    if IP in pkt:
        hdr = bytes(pkt[IP])[: pkt[IP].ihl * 4]
        assert word_sum(hdr) == 0xFFFF  # IPv4 header checksum
        assert pkt[IP].len == len(frame) - 14
    else:
        assert pkt[IPv6].plen == len(frame) - 14 - 40


def tcp_payload(frame: bytes) -> bytes:
    pkt = parse(frame)
    return bytes(pkt[TCP].payload)


def test_tcp4_segments_have_right_seq_ids_lengths_flags_and_checksums():
    data = pattern(4000, 3)
    pkt = tcp4(data, ip_kw=dict(id=65534, flags="DF", ttl=33), seq=0xFFFFF000, ack=77,
               flags="FPAC", window=500, options=[("Timestamp", (1, 2))])
    frame, start, _off = partial(pkt)
    segs = segment(frame, GSO_TCPV4 | GSO_ECN, 1448, start)
    assert len(segs) == 3
    thl = parse(frame)[TCP].dataofs * 4
    assert [len(s) for s in segs] == [14 + 20 + thl + n for n in (1448, 1448, 4000 - 2 * 1448)]
    ips = [parse(s)[IP] for s in segs]
    tcps = [parse(s)[TCP] for s in segs]
    assert [ip.id for ip in ips] == [65534, 65535, 0]  # incremented, wraps
    assert all(ip.ttl == 33 and ip.flags == "DF" for ip in ips)
    assert [t.seq for t in tcps] == [0xFFFFF000, (0xFFFFF000 + 1448) & 0xFFFFFFFF,
                                     (0xFFFFF000 + 2896) & 0xFFFFFFFF]
    assert all(t.ack == 77 and t.window == 500 and t.options == tcps[0].options for t in tcps)
    assert [str(t.flags) for t in tcps] == ["AC", "A", "FPA"]  # CWR first, FIN/PSH last
    for s in segs:
        assert_headers_valid(s)
    assert b"".join(tcp_payload(s) for s in segs) == data


def test_tcp4_gro_frame_without_needs_csum_is_segmented_from_its_headers():
    """GRO/LRO frames may come with DATA_VALID instead of NEEDS_CSUM: no csum_start."""
    data = pattern(3001)
    segs = segment(bytes(tcp4(data, flags="A", seq=5)), GSO_TCPV4, 1000)
    assert len(segs) == 4 and [len(tcp_payload(s)) for s in segs] == [1000, 1000, 1000, 1]
    for s in segs:
        assert_headers_valid(s)


def test_tcp6_with_extension_header_segments():
    data = pattern(3000, 9)
    pkt = (eth() / IPv6(src=SRC6, dst=DST6, hlim=9) / IPv6ExtHdrHopByHop()
           / TCP(seq=100, flags="PA") / Raw(data))
    frame = bytes(pkt)
    start = l4_offset(pkt)
    segs = segment(frame, GSO_TCPV6, 1200, start)
    assert len(segs) == 3
    for i, s in enumerate(segs):
        assert_headers_valid(s)
        p = parse(s)
        assert IPv6ExtHdrHopByHop in p and p[IPv6].hlim == 9
        assert p[TCP].seq == 100 + 1200 * i
    assert b"".join(tcp_payload(s) for s in segs) == data


@pytest.mark.parametrize("v6", [False, True])
def test_udp_gso_makes_one_datagram_per_segment(v6):
    data = pattern(2500, 1)
    ip = IPv6(src=SRC6, dst=DST6) if v6 else IP(src=SRC4, dst=DST4, id=10)
    pkt = eth() / ip / UDP(sport=9, dport=10) / Raw(data)
    frame, start, _ = partial(pkt)
    segs = segment(frame, GSO_UDP_L4, 1000, start)
    assert [len(bytes(parse(s)[UDP].payload)) for s in segs] == [1000, 1000, 500]
    for i, s in enumerate(segs):
        assert_headers_valid(s)
        p = parse(s)
        assert p[UDP].len == 8 + len(bytes(p[UDP].payload))
        if not v6:
            assert p[IP].id == 10 + i
    assert b"".join(bytes(parse(s)[UDP].payload) for s in segs) == data


def test_gso_frame_that_fits_one_segment_is_still_completed():
    pkt = tcp4(pattern(500), flags="PA")
    frame, start, _ = partial(pkt)
    (seg,) = segment(frame, GSO_TCPV4, 1448, start)
    assert seg == bytes(pkt)


@pytest.mark.parametrize("gso_type, size, mutate, match", [
    (GSO_UDP, 1000, None, "UFO"),
    (9, 1000, None, "unknown GSO type"),
    (GSO_TCPV4, 0, None, "size 0"),
    (GSO_TCPV6, 1000, None, "not TCP over IPv6"),
    (GSO_UDP_L4, 1000, None, "not UDP"),
    (GSO_TCPV4, 1000, lambda b: b[:16] + b"\x00\x10" + b[18:], "total length"),
    (GSO_TCPV4, 1000, lambda b: b[:12] + b"\x88\xb5" + b[14:], "neither IPv4 nor IPv6"),
    (GSO_TCPV4, 1000, lambda b: b[:20] + b"\x20\x00" + b[22:], "fragment"),
    (GSO_TCPV4, 1000, lambda b: b[:16] + b"\0\0" + b[18:40], "TCP header outside"),
    (GSO_TCPV4, 1000, lambda b: b[:46] + b"\x40" + b[47:], "TCP header length"),
])
def test_segment_refuses_what_it_cannot_do_faithfully(gso_type, size, mutate, match):
    frame = bytes(tcp4(pattern(3000), flags="A"))
    if mutate:
        frame = mutate(frame)
    with pytest.raises(OffloadError, match=match):
        segment(frame, gso_type, size)


def test_segment_refuses_csum_start_not_at_l4():
    frame, start, _ = partial(tcp4(pattern(3000)))
    with pytest.raises(OffloadError, match="not the L4 header"):
        segment(frame, GSO_TCPV4, 1000, start + 2)


# -- the ingress stage: counting, dropping, never raising -------------------------------------


def stage(max_frame: int = 1514) -> Tuple[IngressOffload, Counters, List[str]]:
    c = Counters()
    warnings: List[str] = []
    return IngressOffload(c, max_frame, "ina", "outb", warnings.append, recv_bufsize=65563), c, warnings


def test_stage_completes_counts_and_strips_the_header():
    st, c, warnings = stage()
    frame, start, off = partial(udp4(pattern(99)))
    out = st.frames(vnet_header(NEEDS_CSUM, csum_start=start, csum_offset=off) + frame)
    assert len(out) == 1 and checksum_ok(out[0])
    assert c.csum_completed == 1 and c.rx_frames == 0 and warnings == []
    plain = bytes(udp4(pattern(10)))
    assert st.frames(vnet_header(DATA_VALID) + plain) == [plain]
    assert c.csum_completed == 1


@pytest.mark.parametrize("header", [
    vnet_header(NEEDS_CSUM, csum_start=200, csum_offset=6),
    vnet_header(NEEDS_CSUM, csum_start=34, csum_offset=0xFFFF),
    vnet_header(0, GSO_TCPV4, 0, 1448, 34, 16),   # GSO type on a UDP frame
    vnet_header(0, GSO_UDP, 0, 1000, 34, 6),
    vnet_header(0, 0x7F, 0, 1000, 34, 6),
    b"\x01\x00\x00",                               # shorter than a vnet header
])
def test_stage_drops_and_counts_bad_metadata(header):
    st, c, warnings = stage()
    frame = bytes(udp4(pattern(60)))
    assert st.frames(header + frame) == []
    assert c.dropped_offload == 1 and c.rx_frames == 1
    assert len(warnings) == 1 and "ina->outb" in warnings[0]
    st.frames(header + frame)
    assert c.dropped_offload == 2 and len(warnings) == 1  # warned once


def test_stage_segments_and_counts_super_frames():
    st, c, _ = stage()
    frame, start, _off = partial(tcp4(pattern(5000), flags="PA"))
    out = st.frames(vnet_header(NEEDS_CSUM, GSO_TCPV4, 54, 1448, start, 16) + frame)
    assert len(out) == 4 and c.gso_superframes == 1 and c.gso_segments == 4
    assert all(len(s) <= 1514 for s in out)


def test_stage_counts_frames_too_big_for_the_egress_mtu():
    st, c, warnings = stage(max_frame=1514)
    big = bytes(udp4(pattern(2000)))
    assert st.frames(vnet_header() + big) == []
    assert c.dropped_oversize == 1 and c.rx_frames == 1
    assert "2042-byte frame" in warnings[0] and "ethtool -K ina lro off gro off" in warnings[0]
    # A VLAN tag in the frame may use 4 bytes beyond MTU + 14.
    tagged = bytes(eth() / Dot1Q(vlan=3) / IP(src=SRC4, dst=DST4) / UDP() / Raw(pattern(1472)))
    assert len(tagged) == 1518 and st.frames(vnet_header() + tagged) == [tagged]
    # Segments that are still too big (the sender's MTU is larger): each counted.
    frame, start, _ = partial(tcp4(pattern(8000)))
    assert st.frames(vnet_header(NEEDS_CSUM, GSO_TCPV4, 0, 4000, start, 16) + frame) == []
    assert c.dropped_oversize == 3 and c.gso_segments == 2


def test_stage_counts_a_truncated_read():
    st, c, _ = stage()
    assert st.frames(bytes(65563)) == []
    assert c.dropped_offload == 1


# -- the worker's dispatch, over socket pairs (no root) ----------------------------------------


class Worker:
    """A DirectionWorker between two datagram socket pairs, fed by the test."""

    def __init__(self, max_frame: int = 1514) -> None:
        self.feed, rx = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        tx, self.out = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        for s in (self.feed, rx, tx, self.out):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        rx.setblocking(False)
        self.sockets = [self.feed, rx, tx, self.out]
        self.pipe = os.pipe()
        self.sched = DirectionScheduler(Impairment(), seed=1)
        self.warnings: List[str] = []
        offload = IngressOffload(self.sched.counters, max_frame, "a", "b", self.warnings.append, 70000)
        self.worker = DirectionWorker("a_to_b", rx, tx, self.sched, self.pipe[0], 70000,
                                      offload=offload)
        self.thread = threading.Thread(target=self.worker.run, daemon=True)
        self.thread.start()

    def send(self, data: bytes) -> None:
        self.feed.send(data)

    def receive(self, n: int, timeout_s: float = 5.0) -> List[bytes]:
        got: List[bytes] = []
        deadline = time.monotonic() + timeout_s
        while len(got) < n and time.monotonic() < deadline:
            if select.select([self.out], [], [], 0.05)[0]:
                got.append(self.out.recv(70000))
        return got

    def stop(self) -> Counters:
        self.worker.stopping = True
        os.write(self.pipe[1], b"x")
        self.thread.join(5)
        for s in self.sockets:
            s.close()
        for fd in self.pipe:
            os.close(fd)
        assert self.worker.error is None, self.worker.error
        return self.sched.counters


def test_worker_forwards_completes_segments_and_survives_bad_frames():
    w = Worker()
    try:
        plain = bytes(udp4(pattern(50)))
        partial_frame, start, off = partial(udp4(pattern(1001)))
        gso_frame, gstart, _ = partial(tcp4(pattern(3000), flags="PA"))
        w.send(vnet_header() + plain)                                         # fast path
        w.send(vnet_header(NEEDS_CSUM, csum_start=start, csum_offset=off) + partial_frame)
        w.send(vnet_header(NEEDS_CSUM, csum_start=1040, csum_offset=6) + partial_frame)  # bad
        w.send(vnet_header(NEEDS_CSUM, GSO_TCPV4, 0, 1448, gstart, 16) + gso_frame)
        w.send(vnet_header() + bytes(udp4(pattern(1600))))                   # oversize
        w.send(vnet_header() + plain)                                         # still alive
        got = w.receive(6, timeout_s=3.0)
    finally:
        c = w.stop()
    assert got[0] == plain  # no virtio header left on it
    assert got[1] == bytes(udp4(pattern(1001))) and checksum_ok(got[1])
    assert [len(tcp_payload(s)) for s in got[2:5]] == [1448, 1448, 104]
    assert all(checksum_ok(s) for s in got[2:5])
    assert got[5] == plain and len(got) == 6
    assert (c.csum_completed, c.gso_superframes, c.gso_segments) == (1, 1, 3)
    assert (c.dropped_offload, c.dropped_oversize) == (1, 1)
    assert c.rx_frames == 1 + 1 + 1 + 3 + 1 + 1
    assert c.rx_frames + c.duplicated == (c.forwarded_frames + c.dropped_loss + c.dropped_queue
                                          + c.dropped_limit + c.tx_errors + c.pending_at_exit
                                          + c.dropped_offload + c.dropped_oversize)
    assert len(w.warnings) == 2


# -- what a drop says and counts (mutation testing, docs/testing.md) ---------------------------

def test_an_empty_vnet_header_is_ten_zero_bytes():
    assert vnet_header() == bytes(10)


def test_oversize_and_offload_drops_say_what_and_count_their_bytes():
    st, c, warnings = stage(max_frame=1514)
    big = bytes(udp4(pattern(2000)))
    assert st.frames(vnet_header() + big) == []
    assert warnings == [
        "bwn-link: ina->outb: dropped a 2042-byte frame: larger than outb's MTU allows (1500 + 14-byte "
        "Ethernet header); a super-frame without segmentation metadata (LRO?) or a larger MTU on ina: run "
        "'ethtool -K ina lro off gro off' in its namespace, or give both links the same MTU "
        "(ip link set DEV mtu N); counted as oversize"]
    assert (c.rx_frames, c.rx_bytes) == (1, 2042)
    assert st.frames(bytes(65563)) == []                  # a truncated read: its own warning, once
    assert warnings[1] == ("bwn-link: ina->outb: dropped a frame bwn-link cannot complete (frame longer "
                           "than the receive buffer, truncated); counted as offload-drop, further ones silently")
    assert (c.rx_frames, c.rx_bytes) == (2, 2042 + 65563 - 10)
    assert st.frames(b"\x01\x00\x00") == [] and c.rx_bytes == 2042 + 65563 - 10 + 3
    assert len(warnings) == 2


def test_a_frame_fits_up_to_the_mtu_and_a_vlan_tag_only_four_bytes_more():
    st, c, _ = stage(max_frame=1514)
    exact = bytes(udp4(pattern(1472)))
    assert len(exact) == 1514 and st.frames(vnet_header() + exact) == [exact]
    tagged = lambda n: bytes(eth() / Dot1Q(prio=5, vlan=3) / IP(src=SRC4, dst=DST4) / UDP() / Raw(pattern(n)))
    assert len(tagged(1472)) == 1518 and st.frames(vnet_header() + tagged(1472)) == [tagged(1472)]
    assert st.frames(vnet_header() + tagged(1473)) == []                # 1519: one byte too many
    assert st.frames(vnet_header() + tagged(2000)) == []                # far too big, tag or not
    assert c.dropped_oversize == 2


def test_segments_of_a_super_frame_needing_checksums_get_them():
    st, c, _ = stage()
    frame, start, _off = partial(tcp4(pattern(5000), flags="PA"))
    out = st.frames(vnet_header(NEEDS_CSUM, GSO_TCPV4, 54, 1448, start, 16) + frame)
    assert len(out) == 4 and all(checksum_ok(s) for s in out)


# -- what each refusal says, at each length limit (mutation testing) --------------------------

MACS = bytes.fromhex("020000000002" "020000000001")  # dst, src: no TPID or ethertype in them


def tcp6(payload: bytes, **kw) -> Ether:
    return eth() / IPv6(src=SRC6, dst=DST6) / TCP(sport=4000, dport=5001, **kw) / Raw(payload)


def refusal(frame: bytes, gso_type: int = GSO_TCPV4, gso_size: int = 1000,
            csum_start: Optional[int] = None) -> str:
    """The message segment() refuses ``frame`` with (any other exception fails the test)."""
    with pytest.raises(OffloadError) as info:
        segment(frame, gso_type, gso_size, csum_start)
    return str(info.value)


def with_bytes(frame: bytes, at: int, new: bytes) -> bytes:
    return frame[:at] + new + frame[at + len(new):]


def test_a_frame_shorter_than_an_ethernet_header_is_refused_with_its_length():
    assert refusal(MACS + b"\x08") == "13-byte frame: shorter than an Ethernet header"
    assert refusal(b"") == "0-byte frame: shorter than an Ethernet header"


def test_an_exactly_14_byte_frame_has_an_ethernet_header_but_no_ip_header():
    assert refusal(MACS + b"\x08\x00") == "truncated or not an IPv4 header"


@pytest.mark.parametrize("frame", [
    MACS + b"\x81\x00\x00\x05\x08",                      # one tag, its ethertype cut
    MACS + b"\x81\x00\x00\x05",                          # one tag, no ethertype
    MACS + b"\x88\xa8\x00\x07\x81\x00\x00\x05\x08",      # QinQ: the inner tag cut
])
def test_a_frame_ending_inside_a_vlan_tag_is_refused(frame):
    assert refusal(frame) == "frame ends inside a VLAN tag"


def test_a_vlan_tag_ending_exactly_at_the_frame_end_is_parsed():
    """18 bytes: the tag and its ethertype are complete; what is missing is the IPv4 header."""
    assert refusal(MACS + b"\x81\x00\x00\x05\x08\x00") == "truncated or not an IPv4 header"
    assert refusal(MACS + b"\x88\xa8\x00\x07\x81\x00\x00\x05\x86\xdd",
                   GSO_TCPV6) == "truncated or not an IPv6 header"


@pytest.mark.parametrize("tags", [
    [Dot1Q(vlan=5)],                    # 802.1Q
    [Dot1AD(vlan=7), Dot1Q(vlan=5)],    # QinQ: 802.1ad outside, 802.1Q inside
])
def test_tcp_super_frame_behind_vlan_tags_is_segmented_keeping_the_tags(tags):
    data = pattern(2500, 4)
    pkt = eth()
    for tag in tags:
        pkt = pkt / tag
    pkt = pkt / IP(src=SRC4, dst=DST4, id=40) / TCP(sport=1, dport=2, seq=7, flags="PA") / Raw(data)
    frame = bytes(pkt)
    start = l4_offset(pkt)
    assert start == 14 + 4 * len(tags) + 20
    segs = segment(frame, GSO_TCPV4, 1000, start)
    assert [len(s) for s in segs] == [start + 20 + n for n in (1000, 1000, 500)]
    for i, s in enumerate(segs):
        assert s[:start - 20] == frame[:start - 20]  # Ethernet header and tags unchanged
        p = parse(s)
        assert (p[IP].id, p[IP].len, p[TCP].seq) == (40 + i, len(s) - start + 20, 7 + 1000 * i)
        assert word_sum(bytes(p[IP])[:20]) == 0xFFFF and checksum_ok(s)
    assert b"".join(tcp_payload(s) for s in segs) == data


def test_only_two_vlan_tags_are_skipped():
    pkt = (eth() / Dot1AD(vlan=7) / Dot1Q(vlan=5) / Dot1Q(vlan=6)
           / IP(src=SRC4, dst=DST4) / TCP() / Raw(pattern(2000)))
    assert refusal(bytes(pkt)) == "ethertype 0x8100 is neither IPv4 nor IPv6"


def test_ipv4_header_refusals_say_what_is_wrong():
    full = bytes(tcp4(pattern(100)))
    assert refusal(full[:14 + 19]) == "truncated or not an IPv4 header"           # 19 bytes of it
    assert refusal(with_bytes(full, 14, b"\x65")) == "truncated or not an IPv4 header"  # version 6
    assert refusal(with_bytes(full, 14, b"\x44")) == "IPv4 header length 16 does not fit the frame"
    short = bytes(eth() / IP(src=SRC4, dst=DST4, proto=6, len=40)) + bytes(20)
    assert refusal(with_bytes(short, 14, b"\x4f")) == "IPv4 header length 60 does not fit the frame"


@pytest.mark.parametrize("options", [b"", b"\x01\x01\x01\x00"])
def test_an_ipv4_header_ending_exactly_at_the_frame_end_is_parsed(options):
    """20 bytes (or 24 with options) of IPv4 header and nothing after: the TCP header is missing."""
    ihl = (20 + len(options)) // 4
    frame = bytes(eth() / IP(src=SRC4, dst=DST4, proto=6, ihl=ihl) / Raw(options))
    assert len(frame) == 14 + ihl * 4
    assert refusal(frame) == "TCP header outside the frame"


def test_ipv6_header_refusals_say_what_is_wrong():
    full = bytes(tcp6(pattern(100)))
    assert refusal(full[:14 + 39], GSO_TCPV6) == "truncated or not an IPv6 header"
    assert refusal(with_bytes(full, 14, b"\x45"), GSO_TCPV6) == "truncated or not an IPv6 header"
    cut_ext = bytes(eth() / IPv6(src=SRC6, dst=DST6, nh=0, plen=4)) + b"\x06\x00\x01\x04"
    assert refusal(cut_ext, GSO_TCPV6) == "IPv6 extension header outside the frame"


def test_an_ipv6_header_ending_exactly_at_the_frame_end_is_parsed():
    bare = bytes(eth() / IPv6(src=SRC6, dst=DST6, nh=6))
    assert len(bare) == 54 and refusal(bare, GSO_TCPV6) == "TCP header outside the frame"
    ext = bytes(eth() / IPv6(src=SRC6, dst=DST6) / IPv6ExtHdrHopByHop(nh=6))
    assert len(ext) == 62 and refusal(ext, GSO_TCPV6) == "TCP header outside the frame"


def test_a_tcp_super_frame_of_headers_only_is_one_complete_segment():
    pkt = tcp4(b"", flags="A", seq=99, options=[("NOP", None)] * 4)
    frame, start, _ = partial(pkt)
    assert segment(frame, GSO_TCPV4, 1448, start) == [bytes(pkt)]
    pkt = tcp4(b"", flags="A", seq=99)
    assert len(bytes(pkt)) == 54 and segment(bytes(pkt), GSO_TCPV4, 1448) == [bytes(pkt)]


def test_a_tcp_header_longer_than_the_frame_is_refused():
    frame = bytes(tcp4(pattern(10)))
    assert refusal(with_bytes(frame, 46, b"\xf0")) == "TCP header length 60 does not fit the frame"


@pytest.mark.parametrize("v6", [False, True])
def test_a_udp_super_frame_of_a_header_only_is_one_complete_datagram(v6):
    ip = IPv6(src=SRC6, dst=DST6) if v6 else IP(src=SRC4, dst=DST4)
    pkt = eth() / ip / UDP(sport=9, dport=10)
    frame, start, _ = partial(pkt)
    assert segment(frame, GSO_UDP_L4, 1000, start) == [bytes(pkt)]


def test_a_udp_header_cut_short_is_refused():
    frame = bytes(eth() / IP(src=SRC4, dst=DST4, proto=17, len=24) / Raw(b"\x00\x09\x00\x0a"))
    assert refusal(frame, GSO_UDP_L4) == "UDP header outside the frame"


@pytest.mark.parametrize("gso_type, size, mutate, message", [
    (GSO_UDP, 1000, None, "legacy UFO super-frame (GSO type UDP) is not segmented by bwn-link"),
    (9, 1000, None, "unknown GSO type 9"),
    (GSO_TCPV4, 0, None, "GSO super-frame with segment size 0"),
    (GSO_TCPV6, 1000, None, "GSO type TCPv6 on a frame that is not TCP over IPv6"),
    (GSO_UDP_L4, 1000, None, "GSO type UDP_L4 on a frame that is not UDP"),
    (GSO_TCPV4, 1000, lambda b: with_bytes(b, 16, b"\x00\x10"), "IPv4 total length 16 but 3040 bytes in the frame"),
    (GSO_TCPV4, 1000, lambda b: with_bytes(b, 12, b"\x88\xb5"), "ethertype 0x88b5 is neither IPv4 nor IPv6"),
    (GSO_TCPV4, 1000, lambda b: with_bytes(b, 20, b"\x20\x00"), "GSO super-frame is an IPv4 fragment"),
    (GSO_TCPV4, 1000, lambda b: with_bytes(b, 21, b"\x01"), "GSO super-frame is an IPv4 fragment"),
    (GSO_TCPV4, 1000, lambda b: with_bytes(b, 16, b"\0\0")[:40], "TCP header outside the frame"),
    (GSO_TCPV4, 1000, lambda b: with_bytes(b, 46, b"\x40"), "TCP header length 16 does not fit the frame"),
])
def test_segment_refusals_say_exactly_why(gso_type, size, mutate, message):
    frame = bytes(tcp4(pattern(3000), flags="A"))
    if mutate:
        frame = mutate(frame)
    assert refusal(frame, gso_type, size) == message


def test_tcpv4_gso_type_on_a_udp_frame_is_refused():
    assert refusal(bytes(udp4(pattern(3000)))) == "GSO type TCPv4 on a frame that is not TCP over IPv4"


def test_segment_refuses_csum_start_not_at_l4_saying_where_l4_is():
    frame, start, _ = partial(tcp4(pattern(3000)))
    assert refusal(frame, GSO_TCPV4, 1000, start + 2) == "checksum start 36 is not the L4 header at 34"


def test_ipv6_payload_length_zero_big_tcp_is_segmented():
    data = pattern(3000, 2)
    frame = bytes(tcp6(data, seq=1000, flags="A"))
    big_tcp = with_bytes(frame, 18, b"\0\0")  # payload length 0: "see the frame"
    segs = segment(big_tcp, GSO_TCPV6, 1440)
    assert segs == segment(frame, GSO_TCPV6, 1440)
    assert [parse(s)[IPv6].plen for s in segs] == [20 + 1440, 20 + 1440, 20 + 120]
    for s in segs:
        assert_headers_valid(s)
    assert b"".join(tcp_payload(s) for s in segs) == data


@pytest.mark.parametrize("plen", [1, 0x0101, 20 + 3000 + 1])
def test_ipv6_payload_length_other_than_the_frame_is_refused(plen):
    frame = with_bytes(bytes(tcp6(pattern(3000))), 18, plen.to_bytes(2, "big"))
    assert refusal(frame, GSO_TCPV6) == f"IPv6 payload length {plen} but 3020 bytes in the frame"
    ext = bytes(eth() / IPv6(src=SRC6, dst=DST6) / IPv6ExtHdrHopByHop() / TCP() / Raw(pattern(100)))
    assert refusal(with_bytes(ext, 18, plen.to_bytes(2, "big")),
                   GSO_TCPV6) == f"IPv6 payload length {plen} but 128 bytes in the frame"


def test_checksum_refusals_say_exactly_why():
    frame = bytes(udp4(pattern(20)))  # 62 bytes
    with pytest.raises(OffloadError) as info:
        complete_checksum(vnet_header() + frame, 200, 6, 10)
    assert str(info.value) == "checksum field at 200+6 is outside the 62-byte frame"
    sctp = bytes(eth() / IP(src=SRC4, dst=DST4, proto=132) / Raw(bytes(12) + pattern(40)))
    with pytest.raises(OffloadError) as info:
        complete_checksum(sctp, 34, 8)
    assert str(info.value) == "SCTP checksum offload (CRC32c) is not completed by bwn-link"


# -- the ingress stage: exact warnings, counters that add up ---------------------------------

OFFLOAD_WARNING = ("bwn-link: {}: dropped a frame bwn-link cannot complete ({}); "
                   "counted as offload-drop, further ones silently")


def test_stage_defaults_name_the_directions_ingress_egress_and_do_not_limit_the_read():
    c = Counters()
    warnings: List[str] = []
    st = IngressOffload(c, 70000, warn=warnings.append)
    big = vnet_header() + bytes(udp4(pattern(65000)))
    assert st.frames(big) == [big[10:]]                 # no receive-buffer limit by default
    assert st.frames(b"\x00" * 9) == []
    assert warnings == [OFFLOAD_WARNING.format("ingress->egress", "9 bytes: no virtio_net_hdr")]
    assert (c.rx_frames, c.rx_bytes, c.dropped_offload) == (1, 9, 1)


def test_stage_accepts_a_read_one_byte_shorter_than_the_receive_buffer():
    c = Counters()
    warnings: List[str] = []
    st = IngressOffload(c, 70000, "ina", "outb", warnings.append, recv_bufsize=65563)
    frame = MACS + b"\x08\x00" + pattern(65563 - 1 - 10 - 14)
    assert st.frames(vnet_header() + frame) == [frame]  # a read that filled the buffer is cut
    assert warnings == [] and c.dropped_offload == 0
    assert st.frames(vnet_header() + frame + b"\0") == [] and c.dropped_offload == 1


class Stream:
    """A stand-in for sys.stderr that records writes and flushes."""

    FLUSH = object()

    def __init__(self) -> None:
        self.events: List[object] = []

    def write(self, text: str) -> int:
        self.events.append(text)
        return len(text)

    def flush(self) -> None:
        self.events.append(self.FLUSH)


def test_stage_without_a_warn_callback_writes_the_line_to_stderr_and_flushes(monkeypatch, capsys):
    err = Stream()
    monkeypatch.setattr(sys, "stderr", err)
    c = Counters()
    st = IngressOffload(c, 1514, "veth-a", "veth-b")
    assert st.frames(b"\x01\x00\x00") == []
    line = OFFLOAD_WARNING.format("veth-a->veth-b", "3 bytes: no virtio_net_hdr")
    assert "".join(e for e in err.events if isinstance(e, str)) == line + "\n"
    assert err.events[-1] is Stream.FLUSH  # seen at once even when stderr is a pipe or a file
    assert capsys.readouterr().out == ""


def test_stage_read_of_only_a_vnet_header_is_a_zero_byte_frame():
    """Exactly VNET_HDR_LEN bytes: the header is there; its checksum request has no frame to apply to."""
    st, c, warnings = stage()
    assert st.frames(vnet_header(NEEDS_CSUM, csum_start=0, csum_offset=6)) == []
    assert warnings == [OFFLOAD_WARNING.format("ina->outb", "checksum field at 0+6 is outside the 0-byte frame")]
    assert (c.rx_frames, c.rx_bytes, c.dropped_offload) == (1, 0, 1)


def test_stage_checksum_drop_says_why_and_counts_the_frame_bytes():
    st, c, warnings = stage()
    frame = bytes(udp4(pattern(20)))
    assert st.frames(vnet_header(NEEDS_CSUM, csum_start=34, csum_offset=200) + frame) == []
    assert warnings == [OFFLOAD_WARNING.format("ina->outb", "checksum field at 34+200 is outside the 62-byte frame")]
    assert (c.rx_frames, c.rx_bytes) == (1, 62)


def test_stage_gso_drop_says_why_and_counts_the_frame_bytes():
    st, c, warnings = stage()
    frame, start, _ = partial(tcp4(pattern(3000)))
    assert st.frames(vnet_header(NEEDS_CSUM, GSO_TCPV4, 54, 1448, start + 2, 16) + frame) == []
    assert warnings == [OFFLOAD_WARNING.format("ina->outb", "checksum start 36 is not the L4 header at 34")]
    assert (c.rx_frames, c.rx_bytes, c.dropped_offload, c.gso_superframes) == (1, len(frame), 1, 0)


def test_stage_ignores_csum_start_of_a_gso_frame_without_needs_csum():
    """GRO frames come with DATA_VALID and csum_start 0: segmented from their own headers."""
    st, c, warnings = stage()
    pkt = tcp4(pattern(3000), flags="A", seq=1)
    for flags in (DATA_VALID, 0):
        out = st.frames(vnet_header(flags, GSO_TCPV4, 0, 1448, 0, 0) + bytes(pkt))
        assert len(out) == 3 and all(checksum_ok(s) for s in out)
    assert warnings == [] and c.dropped_offload == 0


def test_stage_counters_add_up_over_several_frames():
    st, c, warnings = stage()
    for _ in range(2):
        frame, start, off = partial(udp4(pattern(99)))
        assert len(st.frames(vnet_header(NEEDS_CSUM, csum_start=start, csum_offset=off) + frame)) == 1
    assert c.csum_completed == 2
    frame, start, _ = partial(tcp4(pattern(3000), flags="PA"))
    assert len(st.frames(vnet_header(NEEDS_CSUM, GSO_TCPV4, 54, 1448, start, 16) + frame)) == 3
    frame, start, _ = partial(tcp4(pattern(2000), flags="PA"))
    assert len(st.frames(vnet_header(NEEDS_CSUM, GSO_TCPV4, 54, 1448, start, 16) + frame)) == 2
    assert (c.gso_superframes, c.gso_segments, c.csum_completed) == (2, 5, 2)
    assert warnings == [] and (c.rx_frames, c.dropped_offload, c.dropped_oversize) == (0, 0, 0)


def test_stage_forwards_segments_exactly_max_frame_bytes():
    st, c, warnings = stage(max_frame=1514)
    frame, start, _ = partial(tcp4(pattern(2920), flags="A"))
    out = st.frames(vnet_header(NEEDS_CSUM, GSO_TCPV4, 54, 1460, start, 16) + frame)
    assert [len(s) for s in out] == [1514, 1514] and all(checksum_ok(s) for s in out)
    assert warnings == [] and c.dropped_oversize == 0


def test_stage_oversize_segments_warning_names_the_segment_size_and_the_fix():
    st, c, warnings = stage(max_frame=1514)
    frame, start, _ = partial(tcp4(pattern(8000)))
    assert st.frames(vnet_header(NEEDS_CSUM, GSO_TCPV4, 0, 4000, start, 16) + frame) == []
    assert warnings == [
        "bwn-link: ina->outb: dropped a 4054-byte frame: larger than outb's MTU allows (1500 + 14-byte "
        "Ethernet header); the sender's segments (4000 payload bytes) need a larger MTU on outb, or the "
        "same MTU on both links (ip link set DEV mtu N); counted as oversize"]
    assert (c.rx_frames, c.rx_bytes, c.dropped_oversize) == (2, 2 * 4054, 2)
