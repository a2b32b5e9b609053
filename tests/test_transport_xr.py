"""The transport carries the XR header for XCP and RCP senders (docs/wire-format.md,
"The XR header"): every packet of the flow has it, a switch's lowering reaches the
receiver, the receiver's ACKs echo it, and the algorithm sees the echo."""
from __future__ import annotations

from typing import List

import pytest

from bwn.protocol.wire import (BWN_HEADER_LEN, FLAG_XR, KIND_ACK, XR_FEEDBACK_UNSET, XR_HEADER_LEN,
                               XR_RATE_UNSET, BwnHeader, XrHeader)
from hosts.cc.newreno import NewReno
from hosts.cc.rcp import Rcp
from hosts.cc.xcp import Xcp
from hosts.sim.channel import LinkModel, Simulation
from hosts.transport.sender import SenderConfig, SenderState
from hosts.transport.source import PatternSource
from hosts.transport.wire import HEADERS_LEN, TransportHeader, split_xr

MSS = 1000


class XrSwitch:
    """A switch that lowers every DATA packet's XR forward section to fixed values
    (XrHeader.lowered, the reference model) and keeps what it saw."""

    def __init__(self, feedback_bytes=None, rate_kbps=None):
        self.feedback_bytes, self.rate_kbps = feedback_bytes, rate_kbps
        self.seen: List[tuple[BwnHeader, XrHeader, TransportHeader, int]] = []

    def __call__(self, pkt: bytes, now_us: int) -> bytes:
        bwn = BwnHeader.unpack(pkt)
        assert bwn.flags & FLAG_XR, "a packet of an XR flow without the XR header"
        xr = XrHeader.unpack(pkt[BWN_HEADER_LEN:])
        self.seen.append((bwn, xr, TransportHeader.unpack(pkt, BWN_HEADER_LEN + XR_HEADER_LEN), len(pkt)))
        low = xr.lowered(feedback_bytes=self.feedback_bytes, rate_kbps=self.rate_kbps)
        return pkt[:BWN_HEADER_LEN] + low.pack() + pkt[BWN_HEADER_LEN + XR_HEADER_LEN:]


def acks_seen(sim: Simulation, into: list):
    def reverse(pkt: bytes, now_us: int) -> bytes:
        into.append(pkt)
        return pkt
    return reverse


@pytest.mark.parametrize("loss", [0.0, 0.05])
def test_xcp_flow_carries_its_window_and_rtt_and_moves_by_the_echoed_feedback(loss):
    switch = XrSwitch(feedback_bytes=300)
    acks: list = []
    sim = Simulation(LinkModel(delay_us=5_000, loss=loss), LinkModel(delay_us=5_000), seed=3,
                     stamp=switch)
    sim.reverse_stamp = acks_seen(sim, acks)
    cc = Xcp()
    data = 200 * MSS
    s = sim.add_flow(cc, PatternSource(data, MSS), config=SenderConfig(mss_bytes=MSS))
    sim.run(until_us=60_000_000)
    assert s.state is SenderState.DONE
    assert bytes(sim.sink_of(s).data) == bytes(i % 251 for i in range(data))   # the stream, intact
    # every packet, SYN included, has the XR header; the window in frame bytes; the RTT once known
    assert all(xr.cwnd_bytes > 0 for _, xr, _, _ in switch.seen)
    assert switch.seen[0][1].rtt_us == 0
    assert all(9_000 < xr.rtt_us < 20_000 for _, xr, _, _ in switch.seen[5:])
    # the segment shrinks by the XR header: frames keep the size they have without it
    full = [n for _, _, t, n in switch.seen if t.flags & 0x04 and n > HEADERS_LEN + XR_HEADER_LEN]
    assert max(full) == HEADERS_LEN + MSS
    assert s.st.frame_bytes == s.st.mss_bytes + s.frame_overhead_bytes
    # the ACKs echo the feedback: one packet's 300 bytes per ACK (no delayed ACKs)
    echoes = []
    for pkt in acks:
        bwn = BwnHeader.unpack(pkt)
        assert bwn.kind == KIND_ACK and bwn.flags & FLAG_XR
        echoes.append(XrHeader.unpack(pkt[BWN_HEADER_LEN:]).echo_feedback_bytes)
    assert echoes.count(300) > 100
    assert cc.routed and cc.feedback_bytes_total >= 100 * 300
    if loss == 0.0:
        # cwnd = 2 + (ACKs with feedback) * 300 / frame_bytes, no NewReno growth on top
        applied = sum(e for e in echoes if e != XR_FEEDBACK_UNSET)
        assert s.st.cwnd == pytest.approx(2.0 + applied / s.st.frame_bytes, rel=1e-6)


def test_delayed_acks_echo_the_sum_of_the_feedback_they_acknowledge():
    switch = XrSwitch(feedback_bytes=-40)
    acks: list = []
    sim = Simulation(LinkModel(delay_us=5_000), LinkModel(delay_us=5_000), seed=1, stamp=switch,
                     delayed_ack=True)
    sim.reverse_stamp = acks_seen(sim, acks)
    s = sim.add_flow(Xcp(), PatternSource(40 * MSS, MSS), config=SenderConfig(mss_bytes=MSS))
    sim.run(until_us=60_000_000)
    assert s.state is SenderState.DONE
    echoes = [XrHeader.unpack(p[BWN_HEADER_LEN:]).echo_feedback_bytes for p in acks]
    assert -80 in echoes                       # two segments per ACK
    assert set(echoes) <= {-40, -80, XR_FEEDBACK_UNSET}


def test_rcp_flow_sends_at_the_stamped_rate():
    switch = XrSwitch(rate_kbps=4_000)
    sim = Simulation(LinkModel(delay_us=10_000), LinkModel(delay_us=10_000), seed=2, stamp=switch)
    cc = Rcp()
    s = sim.add_flow(cc, PatternSource(300 * MSS, MSS), config=SenderConfig(mss_bytes=MSS))
    sim.run(until_us=60_000_000)
    assert s.state is SenderState.DONE
    assert all(xr.cwnd_bytes == 0 and xr.rate_kbps == XR_RATE_UNSET for _, xr, _, _ in switch.seen)
    assert cc.rate_kbps == 4_000
    assert s.st.pacing_rate_bps == pytest.approx(4e6)             # frame bits, as the pacer counts
    # the data took about what 4 Mb/s of frames takes
    frames_bits = 300 * s.st.frame_bytes * 8 * MSS / s.st.mss_bytes
    assert s.summary(sim.now_us)["duration_s"] > 0.8 * frames_bits / 4e6


def test_a_flow_without_xr_has_no_xr_header_and_ignores_none():
    seen = []

    def stamp(pkt: bytes, now_us: int) -> bytes:
        seen.append(BwnHeader.unpack(pkt).flags)
        return pkt
    sim = Simulation(seed=1, stamp=stamp)
    s = sim.add_flow(NewReno(), PatternSource(5 * MSS, MSS), config=SenderConfig(mss_bytes=MSS))
    sim.run(until_us=5_000_000)
    assert s.state is SenderState.DONE and seen and not any(f & FLAG_XR for f in seen)


def test_a_truncated_xr_header_is_malformed_not_data():
    assert split_xr(BwnHeader(flags=FLAG_XR).pack() + b"\x00" * 10) is None
    sim = Simulation(seed=1)
    sim.receiver.on_datagram(BwnHeader(flags=FLAG_XR).pack() + b"\x00" * 10, ("10.0.0.9", 5), 0)
    assert sim.receiver.stats.malformed_short == 1
