"""XCP's sender: cwnd = max(cwnd + H_feedback, s) (Katabi, Handley, Rohrs, sec. 3.2)."""
import pytest

from bwn.protocol.wire import XR_FEEDBACK_UNSET, XR_RATE_UNSET
from hosts.cc import registry
from hosts.cc.base import AckInfo, CcState, Feedback, XrEcho
from hosts.cc.xcp import Xcp

MSS, OVERHEAD = 1000, 126
FRAME = MSS + OVERHEAD


def ack(feedback_bytes, acked=MSS, xr=True):
    echo = XrEcho(feedback_bytes=feedback_bytes, rate_kbps=None) if xr else None
    fb = Feedback(hop_count=1, ebn_code=None, narrow_kbps=None, tight_kbps=None, xr=echo)
    return AckInfo(now_us=0, ack_seq=0, acked_bytes=acked, rtt_sample_us=None,
                   ack_send_time_us=None, feedback=fb, dupacks=0)


def fresh(cwnd=10.0):
    cc = Xcp()
    st = CcState(mss_bytes=MSS, frame_overhead_bytes=OVERHEAD)
    cc.on_init(st)
    st.cwnd = cwnd
    return cc, st


def deliver(cc, st, a):
    """What the transport does with a new ACK: on_feedback, then on_ack."""
    cc.on_feedback(st, a)
    cc.on_ack(st, a)


def test_positive_feedback_grows_the_window_by_exactly_its_bytes():
    cc, st = fresh(10.0)
    deliver(cc, st, ack(3 * FRAME))
    assert st.cwnd == pytest.approx(13.0)
    deliver(cc, st, ack(FRAME // 2))
    assert st.cwnd == pytest.approx(13.5, abs=1e-3)


def test_negative_feedback_shrinks_it_but_never_below_one_packet():
    cc, st = fresh(10.0)
    deliver(cc, st, ack(-4 * FRAME))
    assert st.cwnd == pytest.approx(6.0)
    deliver(cc, st, ack(-100 * FRAME))
    assert st.cwnd == 1.0                               # max(cwnd + H_feedback, s)


def test_zero_feedback_holds_the_window_no_reno_increase():
    """With XCP routers on the path, the window moves by their feedback only."""
    cc, st = fresh(10.0)
    for _ in range(50):
        deliver(cc, st, ack(0))
    assert st.cwnd == 10.0


def test_without_an_xcp_router_the_flow_is_newreno():
    cc, st = fresh(10.0)
    st.ssthresh = 5.0
    for _ in range(10):
        deliver(cc, st, ack(None))                      # the echo came back unset
    assert st.cwnd == pytest.approx(10.0 + _reno(10.0, 10), rel=1e-9)
    deliver(cc, st, ack(None, xr=False))                # no XR echo at all
    assert st.cwnd > 10.0


def _reno(cwnd, acks):
    """NewReno congestion avoidance's growth over `acks` one-segment ACKs."""
    start = cwnd
    for _ in range(acks):
        cwnd += 1 / cwnd
    return cwnd - start


def test_feedback_waits_while_in_recovery():
    cc, st = fresh(10.0)
    st.in_recovery = True
    cc.on_feedback(st, ack(5 * FRAME))
    assert st.cwnd == 10.0
    assert st.extra["xcp_feedback_bytes"] == 5 * FRAME


def test_the_xr_header_carries_the_window_in_frame_bytes_and_the_rtt():
    cc, st = fresh(10.0)
    first = cc.xr_request(st)
    assert (first.rtt_us, first.cwnd_bytes) == (0, 10 * FRAME)    # no RTT sample yet
    assert (first.feedback_bytes, first.rate_kbps) == (XR_FEEDBACK_UNSET, XR_RATE_UNSET)
    st.srtt_us = 48_123.6
    st.cwnd = 0.0001                                    # never 0: 0 says "not XCP"
    req = cc.xr_request(st)
    assert (req.rtt_us, req.cwnd_bytes) == (48_124, 1)


def test_registered_and_uses_xr():
    cc = registry.create("xcp")
    assert isinstance(cc, Xcp) and cc.uses_xr
