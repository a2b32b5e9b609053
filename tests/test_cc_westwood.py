"""TCP Westwood / Westwood+: the BWE recursion and the congestion-event rules, by hand."""
import pytest

from hosts.cc.base import AckInfo, CcState
from hosts.cc.westwood import Westwood

MSS = 1000
BETA = 19 / 21


def ack(now_us, acked_bytes, rtt_us=None, dupacks=0, seq=0):
    return AckInfo(now_us=now_us, ack_seq=seq, acked_bytes=acked_bytes, rtt_sample_us=rtt_us,
                   ack_send_time_us=None, feedback=None, dupacks=dupacks)


def fresh(**kw):
    cc = Westwood(**kw)
    st = CcState(mss_bytes=MSS)
    cc.on_init(st)
    return cc, st


def test_per_ack_tustin_recursion():
    cc, st = fresh()
    cc.on_feedback(st, ack(0, 1000))                  # starts the clock only
    assert st.estimate_bps is None
    cc.on_feedback(st, ack(10_000, 1000))             # 8000 bit / 10 ms
    s1 = 8000 / 0.010
    assert st.estimate_bps == pytest.approx(s1)       # first sample initialises BWE
    cc.on_feedback(st, ack(15_000, 2000))             # 16000 bit / 5 ms
    s2 = 16000 / 0.005
    bwe2 = BETA * s1 + (1 - BETA) * (s2 + s1) / 2
    assert st.estimate_bps == pytest.approx(bwe2)
    cc.on_feedback(st, ack(35_000, 1000))             # 8000 bit / 20 ms
    s3 = 8000 / 0.020
    bwe3 = BETA * bwe2 + (1 - BETA) * (s3 + s2) / 2
    assert st.estimate_bps == pytest.approx(bwe3)
    # numerically: 800 k, 914.29 k, 998.64 kb/s
    assert bwe3 == pytest.approx(998_639.5, rel=1e-6)


def test_dupack_counts_one_mss_and_cumulative_ack_is_reduced():
    cc, st = fresh(beta=0.0)                           # beta 0: BWE = mean of the last two samples
    cc.on_feedback(st, ack(0, 1000))
    cc.on_feedback(st, ack(10_000, 1000))              # 800 kb/s
    cc.on_feedback(st, ack(20_000, 0, dupacks=1))      # a dup ACK: one MSS in 10 ms
    assert st.extra["bw_sample_bps"] == pytest.approx(800_000)
    # the ACK ending the run acks 3000 bytes, 1000 of them already counted: 2000 bytes in 10 ms
    cc.on_feedback(st, ack(30_000, 3000))
    assert st.extra["bw_sample_bps"] == pytest.approx(16000 / 0.010)
    assert st.estimate_bps == pytest.approx((1_600_000 + 800_000) / 2)


def test_acks_in_the_same_microsecond_are_merged():
    cc, st = fresh()
    cc.on_feedback(st, ack(0, 1000))
    cc.on_feedback(st, ack(10_000, 1000))
    cc.on_feedback(st, ack(10_000, 1000))              # same µs: carried
    assert st.extra["bw_sample_bps"] == pytest.approx(800_000)
    cc.on_feedback(st, ack(20_000, 1000))              # 2000 bytes in 10 ms
    assert st.extra["bw_sample_bps"] == pytest.approx(1_600_000)


def _with_estimate(bwe_bps, rtt_min_us, **kw):
    """Drive a flow to a constant-rate estimate: 1000-byte ACKs every 8000/bwe seconds."""
    cc, st = fresh(**kw)
    gap = int(round(8000 / bwe_bps * 1e6))
    for i in range(200):
        cc.on_feedback(st, ack(i * gap, 1000, rtt_us=rtt_min_us + (i % 3) * 1000))
    assert st.estimate_bps == pytest.approx(bwe_bps, rel=1e-9)
    return cc, st


def test_three_dupacks_in_congestion_avoidance():
    cc, st = _with_estimate(4_000_000, 50_000)          # 4 Mb/s * 50 ms = 25 000 B = 25 segments
    st.cwnd, st.ssthresh = 40.0, 30.0                   # congestion avoidance
    st.bytes_in_flight = 40 * MSS
    cc.on_enter_recovery(st)
    assert st.ssthresh == pytest.approx(4e6 * 0.050 / (8 * MSS))   # = 25
    assert st.cwnd == pytest.approx(25 + 3)                         # min(cwnd, ssthresh) + 3 dupacks
    # NewReno would have chosen 20
    st.in_recovery = True
    cc.on_dupack(st, ack(10**7, 0, dupacks=4))
    assert st.cwnd == pytest.approx(29)
    st.bytes_in_flight = 30 * MSS
    st.in_recovery = False
    cc.on_exit_recovery(st, ack(10**7 + 1, 5000))
    assert st.cwnd == pytest.approx(25)                 # min(25, flight 30 + 1)


def test_three_dupacks_in_slow_start_keep_cwnd():
    cc, st = _with_estimate(4_000_000, 50_000)
    st.cwnd, st.ssthresh = 12.0, float("inf")
    st.bytes_in_flight = 12 * MSS
    cc.on_enter_recovery(st)
    assert st.ssthresh == pytest.approx(25)
    assert st.cwnd == pytest.approx(12 + 3)
    st.bytes_in_flight = 20 * MSS
    cc.on_exit_recovery(st, ack(10**7, 1000))
    assert st.cwnd == pytest.approx(12)


def test_timeout():
    cc, st = _with_estimate(8_000_000, 20_000)          # 8 Mb/s * 20 ms = 20 segments
    st.cwnd, st.ssthresh = 33.0, 10.0
    st.bytes_in_flight = 33 * MSS
    cc.on_timeout(st)
    assert st.ssthresh == pytest.approx(20)
    assert st.cwnd == 1


def test_no_estimate_falls_back_to_newreno():
    cc, st = fresh()
    st.cwnd, st.bytes_in_flight = 20.0, 20 * MSS
    cc.on_enter_recovery(st)
    assert st.ssthresh == 10 and st.cwnd == 13


def test_westwood_plus_one_sample_per_rtt_and_two_7_8_filters():
    cc, st = fresh(variant="westwood+")
    rtt = 100_000
    cc.on_feedback(st, ack(0, 1000, rtt_us=rtt))        # opens the window
    # 10 ACKs of 1000 B within the first 100 ms: no sample yet
    for i in range(1, 11):
        cc.on_feedback(st, ack(i * 10_000, 1000, rtt_us=rtt))
    assert st.estimate_bps is None
    cc.on_feedback(st, ack(110_000, 1000, rtt_us=rtt))  # delta 110 ms > rtt: 11 000 B / 110 ms
    s1 = 11 * 8000 / 0.110
    assert st.estimate_bps == pytest.approx(s1)
    for i in range(12, 23):                              # 11 more ACKs of 2000 B, one per 10 ms
        cc.on_feedback(st, ack(i * 10_000, 2000, rtt_us=rtt))
    s2 = 11 * 16000 / 0.110
    ns = (7 * s1 + s2) / 8
    assert st.estimate_bps == pytest.approx((7 * s1 + ns) / 8)


def test_the_50ms_floor_of_westwood_plus():
    cc, st = fresh(variant="westwood+")
    cc.on_feedback(st, ack(0, 1000, rtt_us=10_000))
    for i in range(1, 6):                               # 5 ms apart: 25 ms < 50 ms floor
        cc.on_feedback(st, ack(i * 5_000, 1000, rtt_us=10_000))
    assert st.estimate_bps is None
    for i in range(6, 12):
        cc.on_feedback(st, ack(i * 5_000, 1000, rtt_us=10_000))
    assert st.estimate_bps == pytest.approx(11 * 8000 / 0.055)


def test_bad_variant():
    with pytest.raises(ValueError):
        Westwood(variant="westwood++")


def test_acks_for_nothing_are_ignored():
    cc, st = fresh()
    cc.on_feedback(st, ack(0, 0, rtt_us=30_000))         # the SYN-ACK: no byte, not a duplicate
    cc.on_feedback(st, ack(50_000, 1000))                # first data ACK: starts the clock only
    assert st.estimate_bps is None
    cc.on_feedback(st, ack(60_000, 1000))
    assert st.estimate_bps == pytest.approx(800_000)


@pytest.mark.parametrize("text, value", [(t, True) for t in ("1", "true", "Yes", " ON ")]
                         + [(t, False) for t in ("0", "FALSE", "no", "off")])
def test_flags_from_the_command_line(text, value):
    from hosts.cc.filters import as_bool
    assert as_bool(text) is value


def test_a_flag_that_is_not_a_boolean_says_so():
    from hosts.cc.filters import as_bool
    with pytest.raises(ValueError) as err:
        as_bool("maybe")
    assert str(err.value) == "not a boolean: 'maybe'"


def test_duplicates_counted_before_reduce_the_cumulative_ack_to_at_least_one_mss():
    from hosts.cc.filters import AckedCounter
    counter = AckedCounter()
    assert [counter.count(ack(0, 0, dupacks=n), MSS) for n in (1, 2)] == [MSS, MSS]
    assert counter.count(ack(0, 3 * MSS), MSS) == MSS        # 2 of the 3 were counted already
    assert counter.accounted == 0
    for n in (1, 2, 3):
        counter.count(ack(0, 0, dupacks=n), MSS)
    assert counter.count(ack(0, 3 * MSS), MSS) == MSS        # all 3 counted: one MSS, not 0
    assert counter.accounted == 0
    counter.count(ack(0, 0, dupacks=1), MSS)
    assert counter.count(ack(0, MSS), MSS) == MSS and counter.accounted == MSS   # one MSS: as is


def test_timeout_without_an_estimate_is_newrenos():
    cc, st = fresh()
    st.cwnd, st.bytes_in_flight = 20.0, 10 * MSS
    cc.on_timeout(st)
    assert (st.ssthresh, st.cwnd) == (5.0, 1.0)
    st.bytes_in_flight = 3 * MSS
    cc.on_timeout(st)
    assert st.ssthresh == 2.0


def test_the_estimate_window_is_at_least_two_segments():
    cc, st = _with_estimate(100_000, 50_000)             # 100 kb/s * 50 ms = 0.6 segments
    st.cwnd, st.bytes_in_flight = 10.0, 10 * MSS
    cc.on_timeout(st)
    assert st.ssthresh == 2.0


def test_with_sack_recovery_starts_at_the_estimate_window_without_inflation():
    cc, st = _with_estimate(4_000_000, 50_000)           # 25 segments
    st.sack = True
    st.cwnd, st.ssthresh, st.bytes_in_flight = 40.0, 30.0, 40 * MSS
    cc.on_enter_recovery(st)
    assert (st.ssthresh, st.cwnd) == (pytest.approx(25), pytest.approx(25))


def test_a_recovery_target_serves_one_recovery_only():
    cc, st = _with_estimate(4_000_000, 50_000)
    st.cwnd, st.ssthresh, st.bytes_in_flight = 40.0, 30.0, 40 * MSS
    cc.on_enter_recovery(st)                             # target 25
    st.bytes_in_flight = 10 * MSS
    cc.on_exit_recovery(st, ack(10**7, 5000))
    assert st.cwnd == pytest.approx(11)                  # min(25, flight 10 + 1)
    st.ssthresh, st.bytes_in_flight = 8.0, 30 * MSS
    cc.on_exit_recovery(st, ack(10**7 + 1, 5000))        # no recovery entered since: ssthresh
    assert st.cwnd == pytest.approx(8)


def test_defaults_are_the_papers():
    """Mascolo et al.'s filter pole beta = 19/21 and, for Westwood+, Linux's
    TCP_WESTWOOD_RTT_MIN of 50 ms as the shortest sampling interval."""
    w = Westwood()
    assert (w.variant, w.beta, w.plus_window_min_us) == ("westwood", 19.0 / 21.0, 50_000)


def test_the_flow_log_gets_each_ack_s_bandwidth_sample_and_the_minimum_rtt():
    """What Westwood's flow log shows per ACK (extra columns): the last bandwidth
    sample and RTT_min, the smallest RTT sample so far, which sets ssthresh at a loss."""
    cc, st = fresh()
    cc.on_feedback(st, ack(0, 1000, rtt_us=30_000))
    assert st.extra["rtt_min_us"] == 30_000 and st.extra["bw_sample_bps"] is None
    cc.on_feedback(st, ack(10_000, 1000, rtt_us=20_000))
    assert st.extra["rtt_min_us"] == 20_000 and st.extra["bw_sample_bps"] == pytest.approx(800_000)
    cc.on_feedback(st, ack(15_000, 0, rtt_us=25_000))       # a duplicate ACK: no new sample
    assert st.extra["rtt_min_us"] == 20_000 and st.extra["bw_sample_bps"] == pytest.approx(800_000)


def test_an_estimate_without_any_rtt_sample_falls_back_to_newreno():
    """Both halves of BWE * RTT_min are needed: with a bandwidth estimate but no RTT
    sample yet (no ACK carried one), a timeout and a fast recovery are NewReno's."""
    cc, st = fresh()
    gap = 2000                                           # 1000-byte ACKs every 2 ms: 4 Mb/s
    for i in range(50):
        cc.on_feedback(st, ack(i * gap, 1000))
    assert st.estimate_bps == pytest.approx(4e6) and cc.rtt_min.get(st) is None
    st.cwnd, st.bytes_in_flight = 20.0, 10 * MSS
    cc.on_timeout(st)
    assert (st.ssthresh, st.cwnd) == (5.0, 1.0)
    st.cwnd, st.ssthresh, st.bytes_in_flight = 30.0, 40.0, 30 * MSS
    cc.on_enter_recovery(st)
    assert st.ssthresh == 15.0 and st.cwnd == 18.0      # NewReno: half the flight, + 3
    cc.on_exit_recovery(st, ack(200_000, 30 * MSS))
    assert st.cwnd == min(15.0, st.flight_segments + 1.0)


def test_a_negative_plus_window_is_refused_and_zero_accepted():
    from hosts.cc.westwood import Westwood
    with pytest.raises(ValueError, match=r"^plus_window_min_us must be >= 0 .*got -1$"):
        Westwood(variant="westwood+", plus_window_min_us=-1)
    assert Westwood(variant="westwood+", plus_window_min_us=0).plus_window_min_us == 0


def test_acks_in_the_same_microsecond_carry_their_bytes_and_one_microsecond_later_is_a_sample():
    """Original Westwood: an ACK at the instant of the last one makes no sample (no
    interval); its bytes go into the next one, even if that comes only 1 us later."""
    cc, st = fresh()
    cc.on_feedback(st, ack(0, MSS))                        # starts the clock
    cc.on_feedback(st, ack(1_000, MSS))
    cc.on_feedback(st, ack(1_000, MSS))                    # same instant: carried
    assert st.extra["bw_sample_bps"] == pytest.approx(8e6)
    cc.on_feedback(st, ack(1_001, MSS))                    # 2 segments in 1 us
    assert st.extra["bw_sample_bps"] == pytest.approx(2 * MSS * 8 / 1e-6)
