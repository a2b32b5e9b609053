"""RCP's sender: send at the stamped rate R_p (Dukkipati et al.)."""
import pytest

from bwn.protocol.wire import XR_FEEDBACK_UNSET, XR_RATE_UNSET
from hosts.cc import registry
from hosts.cc.base import AckInfo, CcState, Feedback, XrEcho
from hosts.cc.rcp import Rcp

MSS, OVERHEAD = 1000, 126
FRAME = MSS + OVERHEAD


def ack(rate_kbps, rtt_us=None, xr=True):
    echo = XrEcho(feedback_bytes=None, rate_kbps=rate_kbps) if xr else None
    fb = Feedback(hop_count=1, ebn_code=None, narrow_kbps=None, tight_kbps=None, xr=echo)
    return AckInfo(now_us=0, ack_seq=0, acked_bytes=MSS, rtt_sample_us=rtt_us,
                   ack_send_time_us=None, feedback=fb, dupacks=0)


def fresh(**kw):
    cc = Rcp(**kw)
    st = CcState(mss_bytes=MSS, frame_overhead_bytes=OVERHEAD)
    cc.on_init(st)
    return cc, st


def test_sends_at_the_stamped_rate_of_frames():
    cc, st = fresh()
    st.srtt_us = 100_000
    cc.on_feedback(st, ack(2_000))
    assert st.pacing_rate_bps == pytest.approx(2e6)     # the pacer counts frame bits
    # the window is no limit: twice the rate's bandwidth-delay product
    assert st.cwnd == pytest.approx(2 * 2e6 * 0.1 / (8 * FRAME))
    cc.on_feedback(st, ack(500))                        # the path's rate fell
    assert st.pacing_rate_bps == pytest.approx(0.5e6)
    assert st.estimate_bps == 500_000


def test_losses_do_not_cut_the_rate():
    cc, st = fresh()
    st.srtt_us = 50_000
    cc.on_feedback(st, ack(8_000))
    rate, cwnd = st.pacing_rate_bps, st.cwnd
    cc.on_enter_recovery(st)
    cc.on_timeout(st)
    cc.on_ack(st, ack(8_000))
    assert (st.pacing_rate_bps, st.cwnd) == (rate, cwnd)


def test_before_any_rate_and_without_an_rcp_router_the_flow_is_newreno():
    cc, st = fresh()
    st.cwnd, st.ssthresh = 10.0, 5.0
    cc.on_feedback(st, ack(None))                       # unset echo: no RCP router
    cc.on_ack(st, ack(None))
    assert st.pacing_rate_bps is None
    assert st.cwnd == pytest.approx(10.1)
    cc.on_timeout(st)
    assert st.cwnd == 1.0


def test_the_xr_header_carries_the_rtt_and_no_window():
    cc, st = fresh()
    req = cc.xr_request(st)
    assert (req.rtt_us, req.cwnd_bytes, req.feedback_bytes, req.rate_kbps) == (0, 0, XR_FEEDBACK_UNSET,
                                                                                 XR_RATE_UNSET)
    st.srtt_us = 12_345.4
    assert cc.xr_request(st).rtt_us == 12_345


def test_bad_parameter_is_refused_and_registered():
    with pytest.raises(ValueError, match="inflight_gain"):
        Rcp(inflight_gain=0.5)
    with pytest.raises(registry.RegistryError, match="inflight_gain"):
        registry.create("rcp", ["inflight_gain=0.1"])
    assert isinstance(registry.create("rcp", ["inflight_gain=3"]), Rcp)


def test_a_rate_of_zero_never_stalls_the_flow():
    cc, st = fresh()
    cc.on_feedback(st, ack(0))                          # no RTT yet: ignored
    assert st.pacing_rate_bps is None and cc.rate_kbps is None
    st.srtt_us = 100_000
    cc.on_feedback(st, ack(0))                          # floor: two frames per RTT
    assert st.pacing_rate_bps == pytest.approx(2 * FRAME * 8 / 0.1)
    assert st.cwnd >= 2.0
