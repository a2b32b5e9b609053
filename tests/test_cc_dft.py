"""DFT: the double filter, eq. (5), the paper's Fig. 1 example, and eq. (4) after loss only."""
import math

import pytest

from hosts.cc.base import AckInfo, CcState, SentSegment
from hosts.cc.dft import Dft
from hosts.cc.westwood import Westwood

MSS = 1000


def sent(now_us, size=MSS, seq=0):
    return SentSegment(now_us=now_us, seq=seq, size_bytes=size, is_retransmit=False)


def ack(now_us, acked_bytes, rtt_us=None, seq=0):
    return AckInfo(now_us=now_us, ack_seq=seq, acked_bytes=acked_bytes, rtt_sample_us=rtt_us,
                   ack_send_time_us=None, feedback=None, dupacks=0 if acked_bytes else 1)


def fresh(**kw):
    cc = Dft(**kw)
    st = CcState(mss_bytes=MSS)
    cc.on_init(st)
    return cc, st


def test_first_steps_by_hand():
    cc, st = fresh()
    a = 0.99
    cc.on_packet_sent(st, sent(0))                     # starts the clock
    assert st.estimate_bps is None
    cc.on_packet_sent(st, sent(1_000, 1000))           # 8000 bit after 1 ms
    len1, int1 = (1 - a) * 8000, (1 - a) * 1_000
    raw1 = len1 / int1 * 1e6
    assert raw1 == pytest.approx(8e6)
    assert st.estimate_bps == pytest.approx(raw1)      # eq. (5) starts at the first raw value
    cc.on_packet_sent(st, sent(3_000, 500))            # 4000 bit after 2 ms
    len2, int2 = a * len1 + (1 - a) * 4000, a * int1 + (1 - a) * 2_000
    raw2 = len2 / int2 * 1e6
    pole = math.exp(-2_000 / 1_000_000)
    assert st.extra["raw_bps"] == pytest.approx(raw2)
    assert st.estimate_bps == pytest.approx((1 - pole) * raw2 + pole * raw1)
    cc.on_packet_sent(st, sent(3_000, 1000))           # a zero interval is a valid sample
    len3, int3 = a * len2 + (1 - a) * 8000, a * int2
    assert st.extra["raw_bps"] == pytest.approx(len3 / int3 * 1e6)


def fig1_times(tp_us, periods):
    """The paper's Fig. 1: in each T = 9 Tp, 4 packets: three Tp apart, then a 6 Tp gap."""
    t, out = 0, []
    for _ in range(periods):
        for gap in (tp_us, tp_us, tp_us, 6 * tp_us):
            t += gap
            out.append(t)
    return out


def test_fig1_dft_gives_4L_over_T_where_averaging_rates_gives_about_7L_over_T():
    tp = 1_000                                          # µs
    T = 9 * tp / 1e6                                    # s
    L = 8 * MSS                                         # bits
    times = fig1_times(tp, 2_000)                       # 18 s
    # hand value of the average of the four rates of one period: (L/4) * (3/Tp + 1/(6 Tp))
    mean_of_rates = (L / 4) * (3 / (tp / 1e6) + 1 / (6 * tp / 1e6))
    assert mean_of_rates == pytest.approx(7.125 * L / T)

    cc, st = fresh()                                    # sent-packet stream
    cc.on_packet_sent(st, sent(0))
    for t in times:
        cc.on_packet_sent(st, sent(t))
    assert st.extra["raw_bps"] == pytest.approx(4 * L / T, rel=0.02)
    assert st.estimate_bps == pytest.approx(4 * L / T, rel=0.01)   # after eq. (5)

    cc, st = fresh(variant="ack")                       # same timing on the ACK stream
    cc.on_feedback(st, ack(0, MSS))
    for t in times:
        cc.on_feedback(st, ack(t, MSS))
    assert st.estimate_bps == pytest.approx(4 * L / T, rel=0.01)

    ww = Westwood()                                     # rate averaging: biased, about 7L/T
    wst = CcState(mss_bytes=MSS)
    ww.on_init(wst)
    ww.on_feedback(wst, ack(0, MSS))
    for t in times:
        ww.on_feedback(wst, ack(t, MSS))
    assert wst.estimate_bps == pytest.approx(7.125 * L / T, rel=0.05)


def test_eq5_adaptive_pole_follows_a_step_with_time_constant_T0():
    cc, st = fresh(alpha=0.0)                          # alpha 0: raw = the last length/interval
    cc.on_packet_sent(st, sent(0))
    cc.on_packet_sent(st, sent(1_000))                 # raw 8 Mb/s, Bwe = 8 Mb/s
    cc.on_packet_sent(st, sent(1_000 + 500_000))       # raw = 8000 bit / 0.5 s = 16 kb/s
    pole = math.exp(-0.5)
    assert st.estimate_bps == pytest.approx((1 - pole) * 16_000 + pole * 8e6)


def test_ssthresh_only_after_loss_events():
    cc, st = fresh()
    cc.on_feedback(st, ack(0, MSS, rtt_us=40_000))
    cc.on_packet_sent(st, sent(0))
    for i in range(1, 3000):                           # one 1000-byte packet per ms: 8 Mb/s
        cc.on_packet_sent(st, sent(i * 1000))
        cc.on_feedback(st, ack(i * 1000 + 40_000, MSS, rtt_us=40_000 + (i % 5) * 100))
    assert st.estimate_bps == pytest.approx(8e6, rel=1e-6)
    assert st.ssthresh == float("inf")                 # never updated continuously (Fig. 5)
    st.cwnd, st.bytes_in_flight = 60.0, 60 * MSS
    cc.on_enter_recovery(st)
    assert st.ssthresh == pytest.approx(8e6 * 0.040 / (8 * MSS))    # eq. (4): 40 segments
    assert st.cwnd == pytest.approx(40 + 3)
    cc.on_timeout(st)
    assert st.ssthresh == pytest.approx(40) and st.cwnd == 1


def drive_8mbit(cc, st, until_ms, on_each=None):
    """One 1000-byte packet per ms (8 Mb/s), each ACKed 40 ms later."""
    cc.on_feedback(st, ack(0, MSS, rtt_us=40_000))
    cc.on_packet_sent(st, sent(0))
    for i in range(1, until_ms):
        cc.on_packet_sent(st, sent(i * 1000))
        cc.on_feedback(st, ack(i * 1000 + 40_000, MSS, rtt_us=40_000))
        if on_each:
            on_each(i)


def test_fig5_continuous_control_sets_ssthresh_at_every_estimate_and_leaves_cwnd():
    cc, st = fresh(ssthresh_update="continuous")
    st.cwnd = 500.0
    drive_8mbit(cc, st, 3000)
    assert st.ssthresh == pytest.approx(st.estimate_bps * 0.040 / (8 * MSS))    # eq. (4), now
    assert st.ssthresh == pytest.approx(40, rel=1e-3)
    assert st.cwnd == 500.0                            # above ssthresh: congestion avoidance


def test_fig5_periodic_control_updates_ssthresh_once_per_period():
    cc, st = fresh(ssthresh_update="periodic", update_period_us=500_000)
    updates = []

    def watch(i):
        if st.ssthresh != float("inf"):                # written in this step
            updates.append(i)
        st.ssthresh = float("inf")
    drive_8mbit(cc, st, 3000, watch)
    # one update per 500 ms (of ACK or send times, which this drive interleaves), no more
    gaps_ms = [b - a for a, b in zip(updates, updates[1:])]
    assert len(updates) >= 6 and all(440 <= g <= 540 for g in gaps_ms), updates


def test_variants_checked():
    with pytest.raises(ValueError):
        Dft(variant="both")
    with pytest.raises(ValueError):
        Dft(ssthresh_update="sometimes")
    with pytest.raises(ValueError):
        Dft(ssthresh_update="periodic", update_period_us=0)


def test_the_log_carries_the_raw_rate_and_the_minimum_rtt():
    cc, st = fresh()
    for rtt in (45_000, 40_000, 42_000):
        cc.on_feedback(st, ack(0, MSS, rtt_us=rtt))
    cc.on_packet_sent(st, sent(0))
    cc.on_packet_sent(st, sent(1_000))
    assert st.extra == {"raw_bps": pytest.approx(8e6), "rtt_min_us": 40_000}


def test_a_duplicate_ack_counts_one_segment_in_the_ack_variant():
    """variant "ack": the samples are the ACKs; a duplicate ACK stands for one MSS
    that reached the receiver (TCP Westwood's rule, AckedCounter)."""
    cc, st = fresh(variant="ack")
    cc.on_feedback(st, ack(0, MSS))                        # starts the clock
    cc.on_feedback(st, ack(1_000, 0))                      # a duplicate ACK, 1 ms later
    assert st.estimate_bps == pytest.approx(8e6)
    cc.on_feedback(st, AckInfo(now_us=2_000, ack_seq=0, acked_bytes=0, rtt_sample_us=None,
                               ack_send_time_us=None, feedback=None, dupacks=0))   # nothing new: no sample
    assert st.extra["raw_bps"] == pytest.approx(8e6)


def test_defaults_are_the_papers():
    """DFT's alpha = 0.99 (its Fig. 6) and T0 = 1 s (sec. 3), per sent segment."""
    d = Dft()
    assert (d.variant, d.alpha, d.t0_us) == ("sent", 0.99, 1_000_000)


def test_no_estimate_is_logged_as_none_until_the_second_sample():
    """The first ACK only starts the clock: the log's raw rate and estimate are
    null, not 0 or empty."""
    cc, st = fresh(variant="ack")
    cc.on_feedback(st, ack(0, MSS))
    assert st.estimate_bps is None and st.extra["raw_bps"] is None


def test_a_one_byte_ack_and_a_sub_microsecond_mean_interval_still_make_an_estimate():
    """A stream's last segment may carry one byte, and on loopback two segments can
    leave 50 us apart, so that the mean interval (alpha = 0.99, from 0) is 0.5 us:
    both are samples with a finite rate."""
    cc, st = fresh(variant="ack")
    cc.on_feedback(st, ack(0, MSS))
    cc.on_feedback(st, ack(1_000, 1))                      # one byte, 1 ms later
    assert st.estimate_bps == pytest.approx(8 * 1 / 1e-3)  # 8 b/s per ms = 8 kb/s
    cc, st = fresh()
    cc.on_packet_sent(st, sent(0))
    cc.on_packet_sent(st, sent(50))
    assert st.estimate_bps == pytest.approx(MSS * 8 / 50e-6)   # 160 Mb/s
