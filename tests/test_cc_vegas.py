"""TCP Vegas: Diff = (Expected - Actual) * BaseRTT once per RTT, alpha/beta/gamma decisions."""
import pytest

from hosts.cc.base import AckInfo, CcState, SentSegment
from hosts.cc.vegas import Vegas

MSS = 1000
BASE = 100_000                                           # µs


class Driver:
    """Sends segments and acknowledges them one by one, through the base-class callbacks."""

    def __init__(self, cwnd, ssthresh, **kw):
        self.cc = Vegas(**kw)
        self.st = CcState(mss_bytes=MSS)
        self.cc.on_init(self.st)
        self.una = self.nxt = 0
        self.now = 0
        # two short rounds with the base RTT (too few samples: Reno), then set the window
        self.send(1)
        self.ack_one(BASE)
        self.send(10)
        self.boundary_nxt = self.nxt
        self.ack_one(BASE)
        self.st.cwnd, self.st.ssthresh = cwnd, ssthresh

    def send(self, n):
        for _ in range(n):
            self.cc.on_packet_sent(self.st, SentSegment(self.now, self.nxt, MSS, False))
            self.nxt += MSS

    def ack_one(self, rtt_us):
        self.una += MSS
        self.now += 1000
        a = AckInfo(now_us=self.now, ack_seq=self.una, acked_bytes=MSS, rtt_sample_us=rtt_us,
                    ack_send_time_us=None, feedback=None, dupacks=0)
        self.cc.on_feedback(self.st, a)
        self.cc.on_ack(self.st, a)

    def one_rtt(self, rtt_us, inside_samples=True):
        """One Vegas RTT: ACK everything sent before the previous boundary ACK (these ACKs are
        inside the RTT, with RTT samples 5 ms above ``rtt_us``), then one ACK beyond it (the
        next boundary, whose sample ``rtt_us`` is the round's minimum). Returns the number of
        ACKs inside the RTT."""
        self.send(20)
        inside = 0
        while self.una < self.boundary_nxt:
            self.ack_one(rtt_us + 5_000 if inside_samples else None)
            inside += 1
        self.boundary_nxt = self.nxt
        self.ack_one(rtt_us)
        return inside


def diff(cwnd, rtt):
    expected = cwnd / BASE
    actual = cwnd / rtt
    return (expected - actual) * BASE


@pytest.mark.parametrize("rtt,expected_cwnd", [
    (105_000, 21.0),   # Diff = 20 * 5/105 = 0.95 < alpha = 1: +1
    (110_000, 20.0),   # Diff = 1.82: between alpha and beta, hold
    (120_000, 19.0),   # Diff = 3.33 > beta = 3: -1
])
def test_congestion_avoidance_alpha_beta(rtt, expected_cwnd):
    d = Driver(cwnd=20.0, ssthresh=10.0)
    d.one_rtt(rtt)
    # the round's RTT is its minimum sample (Linux), here the boundary ACK's rtt
    d_value = diff(20.0, rtt)
    assert d.cc.diff == pytest.approx(d_value)
    if d_value < 1:
        assert expected_cwnd == 21.0
    elif d_value > 3:
        assert expected_cwnd == 19.0
    assert d.st.cwnd == expected_cwnd
    assert d.st.ssthresh == 10.0


def test_linux_parameters():
    d = Driver(cwnd=20.0, ssthresh=10.0, alpha=2, beta=4)
    d.one_rtt(110_000)                                    # Diff 1.82 < 2: +1
    assert d.st.cwnd == 21.0
    d = Driver(cwnd=20.0, ssthresh=10.0, alpha=2, beta=4)
    d.one_rtt(130_000)                                    # Diff 4.6 > 4: -1
    assert d.st.cwnd == 19.0


def test_decrease_pulls_ssthresh_down():
    d = Driver(cwnd=12.0, ssthresh=11.5)
    d.one_rtt(200_000)                                    # Diff = 6 > 3
    assert d.st.cwnd == 11.0 and d.st.ssthresh == 11.0


def test_slow_start_exit_when_diff_exceeds_gamma():
    d = Driver(cwnd=20.0, ssthresh=float("inf"))
    inside = d.one_rtt(110_000)
    assert inside == 9
    # while ACKing inside the RTT the window grew (a growing RTT): 9 ACKs -> 29
    cw = 29.0
    assert diff(cw, 110_000) > 1
    assert d.st.cwnd == pytest.approx(min(cw, cw * BASE / 110_000 + 1))
    assert d.st.ssthresh == pytest.approx(d.st.cwnd)     # now in congestion avoidance


def test_slow_start_grows_every_other_rtt():
    d = Driver(cwnd=4.0, ssthresh=float("inf"))
    n1 = d.one_rtt(BASE)                                  # growing RTT: +1 per ACK inside
    grown = 4.0 + n1
    assert d.st.cwnd == pytest.approx(grown)              # Diff 0 <= gamma: stay in slow start
    n2 = d.one_rtt(BASE)                                  # held RTT: no growth inside it
    assert n2 > 0
    assert d.st.cwnd == pytest.approx(grown + 1)          # the boundary ACK opens a growing RTT
    n3 = d.one_rtt(BASE)
    assert d.st.cwnd == pytest.approx(grown + 1 + n3)     # growing again; next boundary holds


def test_every_other_rtt_can_be_disabled():
    d = Driver(cwnd=4.0, ssthresh=float("inf"), every_other_rtt="false")
    n1 = d.one_rtt(BASE)
    n2 = d.one_rtt(BASE)
    assert d.st.cwnd == pytest.approx(4.0 + n1 + 1 + n2 + 1)


def test_too_few_samples_is_reno():
    d = Driver(cwnd=20.0, ssthresh=10.0)
    d.one_rtt(200_000, inside_samples=False)               # inside ACKs carry no RTT sample (Karn)
    # only the boundary ACK's sample: too few for Diff -> Reno's +1/cwnd, although Diff would be 10
    assert d.st.cwnd == pytest.approx(20.05)


def test_loss_is_newreno():
    d = Driver(cwnd=20.0, ssthresh=30.0)
    d.st.bytes_in_flight = 20 * MSS
    d.cc.on_enter_recovery(d.st)
    assert d.st.ssthresh == 10 and d.st.cwnd == 13
    d.cc.on_timeout(d.st)
    assert d.st.cwnd == 1


def test_parameters_are_checked_and_typed() -> None:
    """alpha <= beta (both >= 0), each said in the error; a flag given as text
    (every_other_rtt: 1/true/yes/on, 0/false/no/off) becomes a boolean."""
    from hosts.cc.filters import as_bool
    v = Vegas(alpha=2, beta=4, gamma=0.5, every_other_rtt="off")
    assert (v.alpha, v.beta, v.gamma, v.every_other_rtt) == (2.0, 4.0, 0.5, False)
    assert Vegas(alpha=3, beta=3).alpha == 3.0                   # alpha = beta is allowed
    assert Vegas(alpha=0, beta=0).beta == 0.0
    for alpha, beta in ((4, 3), (-1, 3)):
        with pytest.raises(ValueError) as err:
            Vegas(alpha=alpha, beta=beta)
        assert str(err.value) == f"need 0 <= alpha <= beta, got alpha={alpha} beta={beta}"
    assert [as_bool(t) for t in ("1", "TRUE", " yes ", "on", "0", "False", "no", "off")] == [True] * 4 + [False] * 4
    assert as_bool(1) is True and as_bool(0) is False
    with pytest.raises(ValueError, match=r"^not a boolean: 'maybe'$"):
        as_bool("maybe")


def round_with_samples(d, samples, rtt_us):
    """One RTT whose ACKs carry `samples` RTT samples in all (the boundary ACK's
    included), each `rtt_us`: Vegas needs more than two (cntRTT > 2, tcp_vegas.c)."""
    d.send(20)
    given = 0
    while d.una < d.boundary_nxt:
        d.ack_one(rtt_us if given < samples - 1 else None)
        given += 1
    d.boundary_nxt = d.nxt
    d.ack_one(rtt_us)


@pytest.mark.parametrize("samples, cwnd_after", [(2, 20.05), (3, 19.0)])
def test_vegas_needs_three_rtt_samples_in_a_round(samples, cwnd_after):
    d = Driver(cwnd=20.0, ssthresh=10.0)
    round_with_samples(d, samples, 200_000)              # Diff = 10 > beta when Vegas decides
    assert d.st.cwnd == pytest.approx(cwnd_after)


def test_a_zero_rtt_sample_is_not_a_sample():
    d = Driver(cwnd=20.0, ssthresh=10.0)
    for _ in range(3):                                    # a coarse clock's 0 us: ignored
        d.cc.on_feedback(d.st, AckInfo(now_us=d.now, ack_seq=d.una, acked_bytes=0, rtt_sample_us=0,
                                       ack_send_time_us=None, feedback=None, dupacks=0))
    round_with_samples(d, 3, 200_000)
    assert d.cc.base_rtt.get(d.st) == BASE and d.st.cwnd == 19.0


def test_diff_on_alpha_or_beta_holds_the_window():
    """tcp_vegas.c: decrease when diff > beta, increase when diff < alpha; equal holds."""
    d = Driver(cwnd=8.0, ssthresh=4.0, alpha=4, beta=4)
    d.one_rtt(200_000)                                    # Diff = 8 * (1 - 1/2) = 4 exactly
    assert d.cc.diff == 4.0 and d.st.cwnd == 8.0


def test_a_round_logs_actual_expected_diff_and_base_rtt():
    """The sender's log columns: Actual = cwnd / RTT (estimate_bps), Expected = cwnd / BaseRTT."""
    d = Driver(cwnd=20.0, ssthresh=10.0)
    d.one_rtt(125_000)                                    # Diff = 4 > beta: cwnd 20 -> 19
    assert d.st.estimate_bps == pytest.approx(20 * MSS * 8 * 1e6 / 125_000)     # 1.28 Mb/s
    assert d.st.extra == {"expected_bps": pytest.approx(20 * MSS * 8 * 1e6 / BASE), "diff": pytest.approx(4.0),
                          "base_rtt_us": BASE}


def test_slow_start_adds_the_acked_segments_at_most_one_per_ack():
    d = Driver(cwnd=4.0, ssthresh=float("inf"))
    d.send(4)
    before = d.st.cwnd
    d.una += MSS // 2                                     # half a segment
    a = AckInfo(now_us=d.now, ack_seq=d.una, acked_bytes=MSS // 2, rtt_sample_us=None,
                ack_send_time_us=None, feedback=None, dupacks=0)
    d.cc.on_ack(d.st, a)
    assert d.st.cwnd == pytest.approx(before + 0.5)
    d.una += 2 * MSS                                      # a stretch ACK of two segments
    d.cc.on_ack(d.st, AckInfo(now_us=d.now, ack_seq=d.una, acked_bytes=2 * MSS, rtt_sample_us=None,
                              ack_send_time_us=None, feedback=None, dupacks=0))
    assert d.st.cwnd == pytest.approx(before + 1.5)


def test_defaults_are_the_papers():
    """Brakmo & Peterson's alpha = 1, beta = 3, gamma = 1 (NS-2's v_alpha_, v_beta_,
    v_gamma_: the Vegas the EBN paper compared with), growth every other RTT in slow
    start."""
    v = Vegas()
    assert (v.alpha, v.beta, v.gamma, v.every_other_rtt) == (1.0, 3.0, 1.0, True)


def test_a_window_at_ssthresh_is_in_congestion_avoidance():
    """cwnd == ssthresh is congestion avoidance (slow start is cwnd < ssthresh): with
    Diff between alpha and beta the window holds, where slow start's gamma rule
    would end slow start and cut it to cwnd * BaseRTT / RTT + 1."""
    d = Driver(cwnd=20.0, ssthresh=20.0)
    d.one_rtt(110_000)                                    # Diff 1.82: hold
    assert d.st.cwnd == 20.0 and d.st.ssthresh == 20.0


def test_slow_start_ends_only_when_diff_exceeds_gamma_not_at_it():
    gamma = 29.0 * (1.0 - BASE / 110_000)                 # the Diff this round will have
    d = Driver(cwnd=20.0, ssthresh=float("inf"), gamma=gamma)
    d.one_rtt(110_000)
    assert d.cc.diff == gamma and d.st.ssthresh == float("inf")   # still slow start


def test_the_window_never_falls_below_two_segments():
    d = Driver(cwnd=2.5, ssthresh=2.0, alpha=0.1, beta=0.5)
    d.one_rtt(1_000_000)                                  # Diff 2.25 > beta: -1 -> 1.5
    assert d.st.cwnd == 2.0


def test_a_negative_gamma_is_refused_and_zero_accepted():
    from hosts.cc.vegas import Vegas
    with pytest.raises(ValueError, match=r"^gamma must be >= 0 \(segments of Diff that end slow start\), got -0.5$"):
        Vegas(gamma=-0.5)
    assert Vegas(gamma=0.0).gamma == 0.0


def test_after_a_recovery_a_round_of_two_samples_is_too_few_for_the_vegas_rule():
    """A fast recovery restarts the rounds with no RTT sample counted; a round that
    then carries only two samples uses Reno's increase (Linux tcp_vegas: cnt_rtt <= 2),
    however far its RTT is above the base."""
    d = Driver(cwnd=20.0, ssthresh=10.0)
    d.one_rtt(200_000)                                     # a full round: Vegas cuts
    assert d.st.cwnd == 19.0
    d.cc.on_exit_recovery(d.st, AckInfo(now_us=d.now, ack_seq=d.una, acked_bytes=0, rtt_sample_us=None,
                                        ack_send_time_us=None, feedback=None, dupacks=0))
    d.st.cwnd = 19.0
    d.send(3)
    while d.una < d.cc.beg_snd_nxt - MSS:
        d.ack_one(None)                                    # no samples inside the round...
    d.ack_one(200_000)                                     # ...but one,
    d.ack_one(200_000)                                     # and the boundary's: two in all
    assert d.cc.diff is not None and d.st.cwnd == pytest.approx(19.0 + 1 / 19.0)


def test_a_one_microsecond_rtt_is_a_sample_and_a_one_byte_ack_grows_slow_start():
    """Loopback can measure 1 us; a stream's last segment may carry one byte
    (slow start grows by what the ACK covers, at most one segment)."""
    v = Vegas()
    st = CcState(mss_bytes=MSS)
    v.on_init(st)
    v.on_feedback(st, AckInfo(now_us=1, ack_seq=0, acked_bytes=MSS, rtt_sample_us=1,
                              ack_send_time_us=None, feedback=None, dupacks=0))
    assert v.cnt_rtt == 1 and v.round_min_rtt_us == 1 and v.base_rtt.get(st) == 1.0
    before = st.cwnd
    v.on_ack(st, AckInfo(now_us=2, ack_seq=0, acked_bytes=1, rtt_sample_us=None,
                         ack_send_time_us=None, feedback=None, dupacks=0))
    assert st.cwnd == pytest.approx(before + 1 / MSS)
