"""OBP: TR from eqs. (1) and (4), EP as the mean TR over an RTT (eq. 5), start, fallback, timeout."""
import math

import pytest

from hosts.cc.base import AckInfo, CcState, Feedback
from hosts.cc.obp import Obp
from bwn.protocol.wire import ebn_decode_kbps, ebn_encode_kbps

MSS = 1000
RTT = 100_000                                            # µs
DELTA, GAMMA = 0.9, 0.09


def fb(narrow_mbps, tight_mbps, hop_count=2):
    return Feedback(hop_count=hop_count, ebn_code=None,
                    narrow_kbps=int(narrow_mbps * 1000), tight_kbps=int(tight_mbps * 1000))


def ack(now_us, feedback, acked=MSS, rtt_us=RTT):
    return AckInfo(now_us=now_us, ack_seq=0, acked_bytes=acked, rtt_sample_us=rtt_us,
                   ack_send_time_us=None, feedback=feedback, dupacks=0)


def fresh(cwnd=None, **kw):
    cc = Obp(**kw)
    st = CcState(mss_bytes=MSS)
    cc.on_init(st)
    st.srtt_us = RTT
    if cwnd is not None:
        st.cwnd = cwnd
    return cc, st


def eq1(ep, ab, mx):
    return ep + ep * ((ab + GAMMA * mx) / mx) * (1 - DELTA * ep / math.sqrt(ep ** 2 + (mx / 2) ** 2))


def test_starts_window_based_and_switches_at_first_feedback_at_the_window_per_rtt():
    cc, st = fresh()
    assert cc.rate_based
    assert st.cwnd == 2 and st.pacing_rate_bps is None and st.estimate_bps is None
    cc.on_feedback(st, ack(0, None))                     # no echo: still NewReno
    cc.on_ack(st, ack(0, None))
    assert st.cwnd == 3 and st.pacing_rate_bps is None
    cc, st = fresh(cwnd=5)
    cc.on_feedback(st, ack(0, fb(100, 50)))
    ep = 5 * 8000 / 0.1                                  # the window per initial RTT = 400 kb/s
    tr = ep + ep * ((50e6 + 0.09 * 100e6) / 100e6) * (1 - 0.9 * ep / math.sqrt(ep ** 2 + 50e6 ** 2))
    assert st.pacing_rate_bps == pytest.approx(tr)
    assert st.estimate_bps == pytest.approx(tr)
    assert st.cwnd == pytest.approx(2 * tr * 0.1 / 8000)  # in-flight bound 2 * TR * srtt


def test_the_flow_logs_extras_carry_ep_ab_narrow_link_and_mode():
    """What `extra` of a flow log row holds (docs/algorithms.md, OBP): EP, the tight
    link's AB and the narrow link's Max.TR in b/s, and the mode."""
    cc, st = fresh(cwnd=125)
    cc.on_feedback(st, ack(0, fb(100, -50)))
    assert st.extra == {"ep_bps": pytest.approx(10e6), "ab_bps": -50e6, "max_tr_bps": 100e6, "mode": "rate"}
    cc.on_feedback(st, ack(50_000, fb(80, 20)))
    assert (st.extra["ab_bps"], st.extra["max_tr_bps"]) == (20e6, 80e6)


def test_eq1_positive_available_bandwidth():
    cc, st = fresh(cwnd=125)                             # EP = 125 * 8000 bit / 0.1 s = 10 Mb/s
    cc.on_feedback(st, ack(0, fb(100, 50)))
    # by hand: control factor (50 + 9) / 100 = 0.59; fairness 1 - 0.9 * 10 / sqrt(100 + 2500)
    tr = 10e6 + 10e6 * 0.59 * (1 - 9 / math.sqrt(2600))
    assert tr == pytest.approx(14.859e6, rel=1e-4)
    assert st.pacing_rate_bps == pytest.approx(tr)
    cc.on_feedback(st, ack(1_000, fb(100, 0)))           # AB = 0: TR stays near EP (+ gamma term)
    assert st.pacing_rate_bps == pytest.approx(10e6 + 10e6 * 0.09 * (1 - 9 / math.sqrt(2600)))


def test_eq4_negative_available_bandwidth():
    cc, st = fresh(cwnd=125)
    cc.on_feedback(st, ack(0, fb(100, -50)))
    assert st.pacing_rate_bps == pytest.approx(10e6 + 10e6 * (-50 / (100 + 50)))   # 6.67 Mb/s
    cc.on_feedback(st, ack(1_000, fb(100, -100)))        # offered load twice the capacity: halve
    assert st.pacing_rate_bps == pytest.approx(5e6)


def test_ep_is_the_mean_of_the_trs_of_the_previous_rtt():
    cc, st = fresh(cwnd=125)                             # EP0 = 10 Mb/s
    abs_ = [50, 20, -30]
    times = [0, 30_000, 60_000]
    trs = []
    for t, ab in zip(times, abs_):
        cc.on_feedback(st, ack(t, fb(100, ab)))
        trs.append(st.pacing_rate_bps)
    assert trs[0] == pytest.approx(eq1(10e6, 50e6, 100e6))
    assert trs[1] == pytest.approx(eq1(10e6, 20e6, 100e6))        # EP constant within the RTT
    assert trs[2] == pytest.approx(10e6 + 10e6 * (-30 / 130))
    cc.on_feedback(st, ack(100_000, fb(100, 40)))        # one RTT later: EP updated first
    ep1 = sum(trs) / 3
    assert st.extra["ep_bps"] == pytest.approx(ep1)
    assert st.pacing_rate_bps == pytest.approx(eq1(ep1, 40e6, 100e6))


def test_paper_sender_ignores_dupacks_and_loss_timeout_halves_ep():
    cc, st = fresh(cwnd=125, unexplained_loss_factor=1.0)
    cc.on_feedback(st, ack(0, fb(100, 50)))
    tr = st.pacing_rate_bps
    cwnd = st.cwnd
    cc.on_dupack(st, ack(1, None, acked=0))
    cc.on_enter_recovery(st)
    st.in_recovery = True
    cc.on_dupack(st, ack(2, None, acked=0))
    assert st.pacing_rate_bps == tr and st.cwnd == cwnd
    cc.on_timeout(st)
    assert st.pacing_rate_bps == pytest.approx(5e6)       # EP (10 Mb/s) / 2
    assert st.extra["ep_bps"] == pytest.approx(5e6)
    assert st.cwnd == pytest.approx(2 * 5e6 * 0.1 / 8000)


def test_no_bwn_switch_on_the_path_is_newreno():
    cc, st = fresh()
    for i in range(5):
        a = ack(i * 1000, fb(100, 50, hop_count=0))
        cc.on_feedback(st, a)
        cc.on_ack(st, a)
    assert st.pacing_rate_bps is None
    assert st.cwnd == 7                                  # slow start: 2 + 5
    st.bytes_in_flight = 7 * MSS
    cc.on_enter_recovery(st)
    assert st.ssthresh == 3.5 and st.cwnd == 6.5


def test_feedback_disappearing_falls_back_to_window_mode():
    cc, st = fresh(cwnd=125)
    cc.on_feedback(st, ack(0, fb(100, -50)))             # TR = 6.67 Mb/s
    tr = st.pacing_rate_bps
    cc.on_feedback(st, ack(100_000, None))               # closes RTT 1 (had feedback)
    assert cc.mode == "rate"
    cc.on_feedback(st, ack(200_000, None))               # closes RTT 2: none
    assert cc.mode == "rate"
    cc.on_feedback(st, ack(300_000, None))               # closes RTT 3: none -> fallback
    assert cc.mode == "window" and st.pacing_rate_bps is None
    assert st.cwnd == pytest.approx(tr * 0.1 / 8000) and st.ssthresh == st.cwnd


def test_a_loss_the_feedback_does_not_explain_halves_ep_once():
    cc, st = fresh(cwnd=125)                             # EP = 10 Mb/s
    cc.on_feedback(st, ack(0, fb(100, 50)))              # AB > 0: the network says "room"
    cc.on_dupack(st, ack(1, None, acked=0))
    cc.on_enter_recovery(st)
    st.in_recovery = True
    assert st.pacing_rate_bps == pytest.approx(5e6) and st.extra["ep_bps"] == pytest.approx(5e6)
    cc.on_dupack(st, ack(2, None, acked=0))              # later duplicate ACKs: nothing more
    assert st.pacing_rate_bps == pytest.approx(5e6)
    assert st.cwnd == pytest.approx(2 * 5e6 * 0.1 / 8000)


def test_a_loss_under_negative_ab_is_explained_and_left_to_eq4():
    cc, st = fresh(cwnd=125)
    cc.on_feedback(st, ack(0, fb(100, -50)))             # eq. (4): 6.67 Mb/s
    tr = st.pacing_rate_bps
    cc.on_enter_recovery(st)
    assert st.pacing_rate_bps == tr


def test_floor_four_segments_per_rtt_and_cwnd_leaves_room_for_three_dupacks():
    cc, st = fresh(cwnd=2)
    cc.on_feedback(st, ack(0, fb(100, -1000)))           # eq. (4) would give EP / 11
    assert st.pacing_rate_bps == pytest.approx(4 * 8000 / 0.1)   # 4 frames per RTT
    assert st.cwnd >= 4                                   # a loss still gets 3 dupacks
    cc2, st2 = fresh(cwnd=2, min_segments_per_rtt=1.0)
    st2.frame_overhead_bytes = 102                        # frames, as the switches count
    cc2.on_feedback(st2, ack(0, fb(100, -1000)))
    assert st2.pacing_rate_bps == pytest.approx(1102 * 8 / 0.1)
    assert st2.cwnd == 4                                  # never below DupThresh + 1


def test_absurd_feedback_keeps_tr_between_the_floor_and_the_narrow_link():
    cc, st = fresh(cwnd=125)
    for i in range(200):                                  # AB "2 Tb/s" on a 100 Mb/s path
        cc.on_feedback(st, ack(i * 100_000, Feedback(hop_count=1, ebn_code=None,
                                                     narrow_kbps=100_000, tight_kbps=2**31 - 2)))
        assert st.pacing_rate_bps <= 100e6
    assert st.pacing_rate_bps == pytest.approx(100e6)
    cc.on_feedback(st, ack(30_000_000, Feedback(hop_count=1, ebn_code=None, narrow_kbps=1,
                                                tight_kbps=-(2**31))))
    assert st.pacing_rate_bps == pytest.approx(4 * 8000 / 0.1)    # the floor, not 1 kb/s


def _recovery(cc, st):
    """Slow start to 10, then a loss: 3 dupacks, fast retransmit, 2 more dupacks, a
    partial ACK, the ACK that ends recovery (the transport's calls, in its order)."""
    for i in range(8):
        a = ack(i, None)
        cc.on_feedback(st, a)
        cc.on_ack(st, a)
    st.bytes_in_flight = 10 * MSS
    for i in range(3):
        cc.on_dupack(st, ack(10 + i, None, acked=0))
    cc.on_enter_recovery(st)
    st.in_recovery = True
    for i in range(2):
        cc.on_dupack(st, ack(20 + i, None, acked=0))
    trace = [st.cwnd]
    cc.on_partial_ack(st, ack(30, None, acked=3 * MSS))
    trace.append(st.cwnd)
    st.in_recovery = False
    st.bytes_in_flight = 4 * MSS
    cc.on_exit_recovery(st, ack(40, None, acked=7 * MSS))
    return trace + [st.cwnd, st.ssthresh]


def test_without_feedback_loss_recovery_is_newrenos_step_by_step():
    """"A flow that never sees feedback stays plain NewReno" (obp.py): every recovery
    callback of window mode is NewReno's (RFC 6582 steps 3-6)."""
    from hosts.cc.base import CongestionControl
    cc, st = fresh()
    reno, st_reno = CongestionControl(), CcState(mss_bytes=MSS)
    reno.on_init(st_reno)
    assert _recovery(cc, st) == _recovery(reno, st_reno) == [10.0, 8.0, 5.0, 5.0]


def test_in_rate_mode_recovery_leaves_cwnd_to_the_rate():
    cc, st = fresh(cwnd=125, unexplained_loss_factor=1.0)
    cc.on_feedback(st, ack(0, fb(100, 50)))
    cwnd = st.cwnd
    cc.on_enter_recovery(st)
    st.in_recovery = True
    cc.on_dupack(st, ack(1, None, acked=0))
    cc.on_partial_ack(st, ack(2, None, acked=5 * MSS))
    st.in_recovery = False
    cc.on_exit_recovery(st, ack(3, None, acked=MSS))
    assert st.cwnd == cwnd and st.ssthresh == float("inf")


def test_falling_back_keeps_the_rate_as_a_window_of_at_least_two():
    cc, st = fresh(cwnd=2)
    cc.on_feedback(st, ack(0, fb(100, -1000)))           # at the floor: 4 frames per RTT
    st.srtt_us = 10_000                                  # the RTT shrank: 0.4 frames per RTT
    for t in (100_000, 110_000, 120_000):
        cc.on_feedback(st, ack(t, None, rtt_us=10_000))
    assert cc.mode == "window" and st.extra["mode"] == "window"
    assert st.cwnd == 2.0 and st.ssthresh == 2.0


def test_unexplained_losses_are_counted_and_logged_and_ab_zero_is_room():
    cc, st = fresh(cwnd=125)                             # EP = 10 Mb/s
    cc.on_feedback(st, ack(0, fb(100, 0)))               # AB = 0: no room left, none missing
    cc.on_enter_recovery(st)
    assert st.extra["unexplained_losses"] == 1 and st.extra["ep_bps"] == pytest.approx(5e6)
    cc.on_feedback(st, ack(1_000, fb(100, 0)))
    cc.on_enter_recovery(st)
    assert st.extra["unexplained_losses"] == 2 == cc.unexplained_losses


@pytest.mark.parametrize("kw,message", [
    ({"delta": -0.1}, "delta must be in [0, 1]"), ({"delta": 1.01}, "delta must be in [0, 1]"),
    ({"gamma": -0.01}, "gamma must be >= 0"),
    ({"inflight_gain": 0.0}, "inflight_gain must be > 0"),
    ({"timeout_factor": 0.0}, "timeout_factor must be in (0, 1]"),
    ({"timeout_factor": 1.01}, "timeout_factor must be in (0, 1]"),
    ({"unexplained_loss_factor": 0.0}, "unexplained_loss_factor must be in (0, 1]"),
    ({"unexplained_loss_factor": 1.5}, "unexplained_loss_factor must be in (0, 1]"),
    ({"min_segments_per_rtt": 0.0}, "min_segments_per_rtt must be > 0"),
    ({"share_floor": -0.01}, "share_floor must be in [0, 0.95]"),
    ({"share_floor": 0.96}, "share_floor must be in [0, 0.95]"),
])
def test_parameters_out_of_range_are_refused_with_the_rule(kw, message):
    """A bad --cc-param gets an error that names the parameter and its range."""
    with pytest.raises(ValueError) as err:
        Obp(**kw)
    assert str(err.value).startswith(message)


def test_parameters_at_the_ends_of_their_ranges_are_accepted():
    for kw in ({"delta": 0.0}, {"delta": 1.0}, {"gamma": 0.0}, {"timeout_factor": 1.0},
               {"unexplained_loss_factor": 1.0}, {"inflight_gain": 0.01}, {"min_segments_per_rtt": 0.5},
               {"share_floor": 0.0}, {"share_floor": 0.95}):
        cc = Obp(**kw)
        (name, value), = kw.items()
        assert getattr(cc, name) == value


# -- deviation: the floor at the path's EBN share (share_floor) -------------
def fb_share(narrow_mbps, tight_mbps, share_kbps):
    """Feedback whose EBN code stands for share_kbps (the code's 1/8-octave rounding)."""
    return Feedback(hop_count=3, ebn_code=ebn_encode_kbps(share_kbps),
                    narrow_kbps=int(narrow_mbps * 1000), tight_kbps=int(tight_mbps * 1000))


def test_share_floor_keeps_tr_at_its_fraction_of_the_echoed_ebn_share():
    """Eq. (4) under a deep overload would cut TR far below the path's C/N; with the
    floor TR stays at share_floor x the share the EBN code stands for."""
    cc, st = fresh(cwnd=125, share_floor=0.9)
    cc.on_feedback(st, ack(0, fb_share(10, -40, 5000)))        # eq. (4): EP * 10/50 = 2 Mb/s
    share_bps = ebn_decode_kbps(ebn_encode_kbps(5000)) * 1000
    assert st.pacing_rate_bps == pytest.approx(0.9 * share_bps)
    assert st.extra["ebn_share_bps"] == pytest.approx(share_bps)


def test_share_floor_zero_is_the_papers_sender_whatever_the_code():
    cc, st = fresh(cwnd=125)
    cc.on_feedback(st, ack(0, fb_share(10, -40, 5000)))
    ep = 125 * 8000 / 0.1
    assert st.pacing_rate_bps == pytest.approx(ep + ep * (-40e6 / (10e6 + 40e6)))
    assert "ebn_share_bps" not in st.extra


def test_share_floor_does_not_cut_a_rate_above_it():
    """The floor only raises: eq. (1)'s TR above f x share is left as it is."""
    cc, st = fresh(cwnd=125, share_floor=0.9)
    cc.on_feedback(st, ack(0, fb_share(100, 50, 1000)))
    ep = 125 * 8000 / 0.1
    assert st.pacing_rate_bps == pytest.approx(eq1(ep, 50e6, 100e6))


def test_share_floor_without_an_ebn_code_sets_no_floor():
    cc, st = fresh(cwnd=125, share_floor=0.9)
    cc.on_feedback(st, ack(0, fb(10, -40)))                   # ebn_code None: no EBN stamp
    ep = 125 * 8000 / 0.1
    assert st.pacing_rate_bps == pytest.approx(ep + ep * (-40e6 / 50e6))


def test_share_floor_never_lifts_tr_above_the_narrow_link():
    """A share above the narrow link (forged, or stale) is capped at Max.TR ("Bounds")."""
    cc, st = fresh(cwnd=125, share_floor=0.9)
    cc.on_feedback(st, ack(0, fb_share(10, -40, 50_000)))
    assert st.pacing_rate_bps == pytest.approx(10e6)


def test_a_timeout_still_halves_under_the_floor_until_the_next_feedback():
    cc, st = fresh(cwnd=50, share_floor=0.9)                  # EP 4 Mb/s, halved to 2
    cc.on_feedback(st, ack(0, fb_share(10, -40, 5000)))
    floor_bps = st.pacing_rate_bps
    cc.on_timeout(st)
    assert st.pacing_rate_bps == pytest.approx(cc.ep) and cc.ep < floor_bps
    cc.on_feedback(st, ack(10_000, fb_share(10, -40, 5000)))
    assert st.pacing_rate_bps == pytest.approx(floor_bps)
