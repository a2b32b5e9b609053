"""Senders under forged or absurd feedback: each of the algorithms,
behind the real transport on a simulated 10 Mb/s link, keeps cwnd and its pacing
rate within the bounds docs/algorithms.md ("Bounds under forged feedback") writes
down, after every ACK, and never stalls: the stream arrives intact."""
from __future__ import annotations

import math
import struct
from typing import Callable, Dict, Optional, Tuple

import pytest

from hosts.cc import registry
from hosts.transport.sender import Sender, SenderConfig, SenderState
from hosts.sim.channel import LinkModel, Simulation
from hosts.transport.source import PatternSource, pattern_bytes
from hosts.transport.wire import ACK_VK, DATA_VK, F_ACK, HEADERS_LEN, pack_ack_headers
from bwn.protocol.wire import FLAG_ECHO_VALID, FLAG_XR, NARROW_KBPS_UNSET, TIGHT_KBPS_MAX, TIGHT_KBPS_MIN

MSS = 1000
NBYTES = 300 * MSS
FWD = struct.Struct("!BBBBIi")          # vk, hop, ebn, echo_ebn, narrow, tight
ECHO_TAIL = struct.Struct("!IiBB")      # at byte 12: echo_narrow, echo_tight, echo_hop, flags
XR_ECHO = struct.Struct("!iI")          # at byte 16 of the XR header: echo_feedback, echo_rate


def forward_forger(fields: Callable[[int], Tuple[int, int, int]]) -> Callable[[bytes, int], bytes]:
    """A 'switch' that writes (ebn, narrow, tight) = fields(n) into the n-th DATA packet."""
    count = {"n": 0}

    def stamp(pkt: bytes, now_us: int) -> bytes:
        if pkt[0] != DATA_VK:
            return pkt
        n = count["n"]
        count["n"] += 1
        ebn, narrow, tight = fields(n)
        out = bytearray(pkt)
        vk, hop, _e, echo_ebn, _n, _t = FWD.unpack_from(out)
        FWD.pack_into(out, 0, vk, 1, ebn, echo_ebn, narrow, tight)
        return bytes(out)
    return stamp


def echo_of_another_flow() -> Callable[[bytes, int], Optional[bytes]]:
    """Rewrites every ACK's echo with that of another flow's path, alternating a fast
    idle path and a slow overloaded one (feedback 'for someone else')."""
    count = {"n": 0}
    others = [(200, 1_000_000, 900_000, 3), (10, 100, -50_000, 5)]

    def rewrite(pkt: bytes, now_us: int) -> Optional[bytes]:
        if pkt[0] != ACK_VK:
            return pkt
        ebn, narrow, tight, hop = others[count["n"] % 2]
        count["n"] += 1
        out = bytearray(pkt)
        out[3] = ebn                                          # echo_ebn_code
        # the other flags (XR: the XR header follows) describe the packet's layout: kept
        ECHO_TAIL.pack_into(out, 12, narrow, tight, hop, FLAG_ECHO_VALID | (pkt[21] & ~FLAG_ECHO_VALID))
        return bytes(out)
    return rewrite


def xr_echo_extremes() -> Callable[[bytes, int], Optional[bytes]]:
    """Rewrites the XR echo of every ACK that has one (XCP, RCP): feedback at the
    ends of int32, rates of 0 and nearly 2^32 kb/s, in turn."""
    count = {"n": 0}
    values = [(-(2**31), 0), (2**31 - 2, 2**32 - 2), (-(2**31), 2**32 - 2), (2**31 - 2, 0)]

    def rewrite(pkt: bytes, now_us: int) -> Optional[bytes]:
        if pkt[0] != ACK_VK or not pkt[21] & FLAG_XR:
            return pkt
        feedback, rate = values[count["n"] % len(values)]
        count["n"] += 1
        out = bytearray(pkt)
        XR_ECHO.pack_into(out, 24 + 16, feedback, rate)
        return bytes(out)
    return rewrite


FORGERIES: Dict[str, dict] = {
    # EBN codes jumping between the two ends of the scale (and to "unset")
    "ebn-0-254": {"stamp": forward_forger(lambda n: (0 if n % 2 else 254, 10_000, 1_000))},
    "ebn-0-255": {"stamp": forward_forger(lambda n: (0 if n % 2 else 255, 10_000, 1_000))},
    # tight-link AB absurdly negative, or huge
    "ab-min": {"stamp": forward_forger(lambda n: (100, 10_000, TIGHT_KBPS_MIN))},
    "ab-huge": {"stamp": forward_forger(lambda n: (100, 10_000, TIGHT_KBPS_MAX - 1))},
    "ab-flapping": {"stamp": forward_forger(
        lambda n: (100, 10_000, TIGHT_KBPS_MIN if n % 3 == 0 else TIGHT_KBPS_MAX - 1))},
    # narrow link 0 (no capacity), or absurdly large with a huge AB
    "narrow-0": {"stamp": forward_forger(lambda n: (100, 0, 5_000))},
    "narrow-huge": {"stamp": forward_forger(lambda n: (254, NARROW_KBPS_UNSET - 1, TIGHT_KBPS_MAX - 1))},
    # feedback echoed on our ACKs that belongs to another flow's path
    "other-flows-echo": {"reverse": echo_of_another_flow()},
    # XCP's feedback and RCP's rate at the ends of their fields
    "xr-echo-extremes": {"reverse": xr_echo_extremes()},
}


def check_bounds(s: Sender, max_narrow_bps: float) -> None:
    st = s.st
    assert math.isfinite(st.cwnd) and 1.0 <= st.cwnd <= st.max_cwnd, st.cwnd
    assert st.ssthresh == float("inf") or (math.isfinite(st.ssthresh) and st.ssthresh >= 2.0)
    rate = st.pacing_rate_bps
    if rate is not None and s.cc.name == "rcp":
        # RCP sends at the echoed rate, at least two frames per RTT
        assert math.isfinite(rate) and rate > 0
        assert st.cwnd >= 2.0
    elif rate is not None and s.cc.name == "cbr":
        # a constant-rate source: its own rate, whatever the feedback says
        assert rate == s.cc.rate_bps
    elif rate is not None:
        assert s.cc.name == "obp", "only OBP, RCP and CBR pace"
        assert math.isfinite(rate) and rate > 0
        rtt = st.srtt_us or st.latest_rtt_us
        floor = 4 * st.frame_bytes * 8e6 / rtt if rtt else 0.0
        assert rate <= max(max_narrow_bps, floor) * 1.0001, (rate, max_narrow_bps, floor)
        assert st.cwnd >= 4.0


@pytest.mark.parametrize("forgery", list(FORGERIES))
@pytest.mark.parametrize("algo", registry.ALGORITHMS)
def test_forged_feedback_keeps_bounds_and_never_stalls(algo: str, forgery: str) -> None:
    spec = FORGERIES[forgery]
    sim = Simulation(LinkModel(delay_us=10_000, rate_bps=10e6, queue_packets=50),
                     LinkModel(delay_us=10_000), seed=3,
                     stamp=spec.get("stamp"), reverse_stamp=spec.get("reverse"))
    cc = registry.create(algo, [], 2.0 if algo == "gtcp" else None)
    s = sim.add_flow(cc, PatternSource(NBYTES, MSS), config=SenderConfig(mss_bytes=MSS))
    seen = {"narrow": 0.0}
    orig = s.on_datagram

    def checked(data: bytes, now_us: int) -> None:
        orig(data, now_us)
        fb = s.feedback
        if fb is not None and fb.narrow_kbps:
            seen["narrow"] = max(seen["narrow"], fb.narrow_kbps * 1000.0)
        check_bounds(s, seen["narrow"])

    s.on_datagram = checked  # type: ignore[assignment]
    sim.run(until_us=300_000_000)
    assert s.state is SenderState.DONE, s.summary(sim.now_us)
    assert bytes(sim.sink_of(s).data) == pattern_bytes(0, NBYTES)


@pytest.mark.parametrize("algo", registry.ALGORITHMS)
def test_acks_of_another_flow_are_ignored_and_counted(algo: str) -> None:
    # Every ACK the receiver sends is followed by a copy addressed to another flow id
    # and claiming everything was received: the sender must not take it.
    def forge(pkt: bytes, now_us: int) -> Optional[bytes]:
        return pkt

    sim = Simulation(LinkModel(delay_us=10_000, rate_bps=10e6, queue_packets=50),
                     LinkModel(delay_us=10_000), seed=3, reverse_stamp=forge)
    cc = registry.create(algo, [], 2.0 if algo == "gtcp" else None)
    s = sim.add_flow(cc, PatternSource(NBYTES, MSS), flow_id=7, config=SenderConfig(mss_bytes=MSS))
    orig = s.on_datagram
    buf = bytearray(HEADERS_LEN)

    def with_foreign(data: bytes, now_us: int) -> None:
        pack_ack_headers(buf, F_ACK, 8, NBYTES + 1, 1 << 30, now_us, now_us,
                         (3, 254, NARROW_KBPS_UNSET - 1, TIGHT_KBPS_MAX - 1))
        orig(bytes(buf), now_us)
        orig(data, now_us)

    s.on_datagram = with_foreign  # type: ignore[assignment]
    sim.run(until_us=300_000_000)
    assert s.state is SenderState.DONE
    assert bytes(sim.sink_of(s).data) == pattern_bytes(0, NBYTES)
    assert s.bad_packets >= s.acks_received > 0     # every foreign ACK counted, none used
    assert s.feedback is None or s.feedback.narrow_kbps != NARROW_KBPS_UNSET - 1
