"""SARBE: samples from the ACK send times (eq. 1), the stability filter (eqs. 2-5), oCwnd (eq. 6)."""
import pytest

from hosts.cc.base import AckInfo, CcState
from hosts.cc.sarbe import Sarbe

MSS = 1000


def ack(ts_us, acked=MSS, now_us=None, rtt_us=None):
    return AckInfo(now_us=ts_us if now_us is None else now_us, ack_seq=0, acked_bytes=acked,
                   rtt_sample_us=rtt_us, ack_send_time_us=ts_us, feedback=None,
                   dupacks=0 if acked else 1)


def fresh(**kw):
    cc = Sarbe(**kw)
    st = CcState(mss_bytes=MSS)
    cc.on_init(st)
    return cc, st


def test_samples_use_the_receivers_send_times_not_the_arrival_times():
    cc, st = fresh()
    cc.on_feedback(st, ack(0, now_us=500_000))
    # compressed on the way back: both arrive at the same instant, sent 10 ms apart
    cc.on_feedback(st, ack(10_000, now_us=500_000))
    assert st.extra["bw_sample_bps"] == pytest.approx(8000 / 0.010)
    assert st.estimate_bps == pytest.approx(800_000)


def test_stability_filter_on_a_sample_sequence():
    cc, st = fresh()
    b = 0.8
    cc.on_feedback(st, ack(0))
    cc.on_feedback(st, ack(1_000))                      # Bw1 = 8 Mb/s
    bw1 = 8e6
    e1, u1 = bw1, 0.0
    assert st.estimate_bps == pytest.approx(e1)
    cc.on_feedback(st, ack(3_000))                      # Bw2 = 4 Mb/s
    u2 = b * u1 + (1 - b) * abs(4e6 - 8e6)              # 0.8 Mb/s, the largest so far
    a2 = u2 / max(u1, u2)                               # = 1: the estimate holds
    e2 = a2 * e1 + (1 - a2) * 4e6
    assert st.extra["instability"] == pytest.approx(u2)
    assert st.estimate_bps == pytest.approx(e2) == pytest.approx(8e6)
    cc.on_feedback(st, ack(5_000))                      # Bw3 = 4 Mb/s
    u3 = b * u2
    a3 = u3 / max(u1, u2, u3)
    e3 = a3 * e2 + (1 - a3) * 4e6
    assert st.estimate_bps == pytest.approx(e3) == pytest.approx(7.2e6)
    cc.on_feedback(st, ack(7_000))                      # Bw4 = 4 Mb/s
    u4 = b * u3
    a4 = u4 / max(u1, u2, u3, u4)
    e4 = a4 * e3 + (1 - a4) * 4e6
    assert st.estimate_bps == pytest.approx(e4) == pytest.approx(6.048e6)
    cc.on_feedback(st, ack(8_000))                      # Bw5 = 8 Mb/s: a new largest instability
    u5 = b * u4 + (1 - b) * abs(8e6 - 4e6)
    assert u5 > u2
    assert st.extra["gain_alpha"] == pytest.approx(1.0)
    assert st.estimate_bps == pytest.approx(e4)


def test_umax_zero_keeps_the_estimate():
    cc, st = fresh()
    for i in range(6):                                  # identical samples: U stays 0
        cc.on_feedback(st, ack(i * 2_000))
    assert st.extra["instability"] == 0.0
    assert st.estimate_bps == pytest.approx(4e6)


def test_umax_window_is_the_current_value_and_the_n_before_it():
    cc, st = fresh()
    cc.on_feedback(st, ack(0))
    cc.on_feedback(st, ack(2_000))                      # 4 Mb/s
    cc.on_feedback(st, ack(4_000))                      # 4 Mb/s, U = 0
    t = 4_000
    t += 1_000
    cc.on_feedback(st, ack(t))                          # jump to 8 Mb/s: U_j = 0.8 Mb/s
    assert st.extra["gain_alpha"] == pytest.approx(1.0)
    alphas = []
    for _ in range(12):
        t += 1_000
        cc.on_feedback(st, ack(t))                      # stays at 8 Mb/s: U decays by 0.8
        alphas.append(st.extra["gain_alpha"])
    # U_max is U_j while it is among the last N + 1 = 9 values (m = 1..8), then U_{k-8}
    expected = [0.8 ** m for m in range(1, 9)] + [0.8 ** 8] * 4
    assert alphas == pytest.approx(expected)


def test_dupacks_count_one_mss_and_out_of_order_timestamps_carry():
    cc, st = fresh()
    cc.on_feedback(st, ack(0))
    cc.on_feedback(st, ack(5_000, acked=0))             # dup ACK: one MSS in 5 ms
    assert st.extra["bw_sample_bps"] == pytest.approx(1.6e6)
    cc.on_feedback(st, ack(4_000))                      # reordered: no sample, bytes carried
    assert st.extra["bw_sample_bps"] == pytest.approx(1.6e6)
    cc.on_feedback(st, ack(10_000, acked=2 * MSS))
    # bytes: 1000 carried from the reordered ACK + (2000 - the 1000 the dup ACK already counted)
    assert st.extra["bw_sample_bps"] == pytest.approx(2 * 8000 / 0.005)


def _steady(rate_bps, rtt_us):
    cc, st = fresh()
    gap = int(8000 / rate_bps * 1e6)
    for i in range(50):
        cc.on_feedback(st, ack(i * gap, rtt_us=rtt_us + 500 * (i % 2)))
    assert st.estimate_bps == pytest.approx(rate_bps)
    return cc, st


def test_ocwnd_after_duplicate_acks_and_timeout():
    cc, st = _steady(2e6, 60_000)                       # oCwnd = 2 Mb/s * 60 ms / 8000 bit = 15
    assert st.extra["ocwnd"] == pytest.approx(15)
    st.cwnd, st.ssthresh, st.bytes_in_flight = 22.0, 10.0, 22 * MSS   # congestion avoidance
    cc.on_enter_recovery(st)
    assert st.ssthresh == pytest.approx(15) and st.cwnd == pytest.approx(15 + 3)

    cc, st = _steady(2e6, 60_000)
    st.cwnd, st.bytes_in_flight = 9.0, 9 * MSS          # slow start: cwnd kept
    cc.on_enter_recovery(st)
    assert st.ssthresh == pytest.approx(15) and st.cwnd == pytest.approx(9 + 3)
    st.bytes_in_flight = 12 * MSS
    cc.on_exit_recovery(st, ack(10**7))
    assert st.cwnd == pytest.approx(9)

    cc, st = _steady(2e6, 60_000)
    st.cwnd, st.bytes_in_flight = 30.0, 30 * MSS
    cc.on_timeout(st)
    assert st.ssthresh == pytest.approx(15) and st.cwnd == 1


def test_the_gain_is_the_instability_over_its_largest_recent_value_even_below_one_bps():
    """eq. (4) alpha = U_k / max(U) whatever the scale of U: samples 1 b/s apart give
    U = 0.2 then 0.16 (beta = 0.8), so the second update weighs the old estimate 0.8."""
    cc, st = fresh()
    for sample in (1000.0, 1001.0, 1001.0):
        cc._filter(sample)
    assert cc.u == pytest.approx(0.16) and cc.alpha == pytest.approx(0.8)
    assert cc.ebw == pytest.approx(0.8 * 1000.0 + 0.2 * 1001.0)


def test_stale_acks_count_nothing_and_acks_sent_in_the_same_microsecond_carry_their_bytes():
    """An ACK that is neither new nor a duplicate (a SYN-ACK, one below snd_una: 0
    bytes, filters.AckedCounter) makes no sample; ACKs sent in the same microsecond
    carry their bytes to the next sample (no division by a zero interval)."""
    cc, st = fresh()
    cc.on_feedback(st, ack(0))
    stale = AckInfo(now_us=5_000, ack_seq=0, acked_bytes=0, rtt_sample_us=None,
                    ack_send_time_us=5_000, feedback=None, dupacks=0)
    cc.on_feedback(st, stale)
    assert st.extra["bw_sample_bps"] is None and st.estimate_bps is None
    cc.on_feedback(st, ack(10_000))
    assert st.extra["bw_sample_bps"] == pytest.approx(8000 / 0.010)
    cc.on_feedback(st, ack(10_000))                     # sent in the same microsecond: carried
    assert st.extra["bw_sample_bps"] == pytest.approx(8000 / 0.010)
    cc.on_feedback(st, ack(11_000))
    assert st.extra["bw_sample_bps"] == pytest.approx(16000 / 0.001)
    cc.on_feedback(st, ack(11_001))                     # 1 us apart is a sample
    assert st.extra["bw_sample_bps"] == pytest.approx(8000 / 1e-6)


def test_defaults_are_the_papers():
    """SARBE's beta = 0.8 and N = 8 (eqs. (2)-(3))."""
    s = Sarbe()
    assert (s.beta, s.n) == (0.8, 8)


def test_the_log_before_any_sample_has_no_estimate_gain_or_window_and_zero_instability():
    """The first ACK starts the clock: bandwidth sample, estimate, gain alpha and oCwnd
    are null in the flow log, and the instability U starts at 0 (eq. (2)'s U_0)."""
    cc, st = fresh()
    cc.on_feedback(st, ack(0, rtt_us=20_000))
    assert st.estimate_bps is None
    assert st.extra == {"bw_sample_bps": None, "instability": 0.0, "gain_alpha": None, "ocwnd": None}


def test_a_one_byte_ack_is_a_sample():
    """A stream's last segment may carry one byte: 8 bits in 1 ms is 8 kb/s."""
    cc, st = fresh()
    cc.on_feedback(st, ack(0))
    cc.on_feedback(st, ack(1_000, acked=1))
    assert st.extra["bw_sample_bps"] == pytest.approx(8_000.0)
