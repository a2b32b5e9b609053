"""TCP-EBN: cwnd scaling by beta * currentbn / lastebn (EBN paper sec. III-C)."""
import pytest

from hosts.cc.base import AckInfo, CcState, Feedback
from hosts.cc.ebn import TcpEbn

MSS = 1000


def ack(code, hop_count=1, acked=MSS):
    fb = Feedback(hop_count=hop_count, ebn_code=code, narrow_kbps=None, tight_kbps=None)
    return AckInfo(now_us=0, ack_seq=0, acked_bytes=acked, rtt_sample_us=None,
                   ack_send_time_us=None, feedback=fb, dupacks=0)


def fresh(cwnd=20.0, ssthresh=float("inf"), **kw):
    cc = TcpEbn(**kw)
    st = CcState(mss_bytes=MSS)
    cc.on_init(st)
    st.cwnd, st.ssthresh = cwnd, ssthresh
    return cc, st


def kbps(code):
    return 2 ** (code / 8)                              # docs/wire-format.md


def test_first_code_only_initialises():
    cc, st = fresh()
    cc.on_feedback(st, ack(100))
    assert st.cwnd == 20.0
    assert st.estimate_bps == pytest.approx(kbps(100) * 1000)


def test_equal_codes_do_nothing():
    cc, st = fresh()
    for _ in range(5):
        cc.on_feedback(st, ack(100))
    assert st.cwnd == 20.0 and st.ssthresh == float("inf")


def test_decrease_multiplies_by_beta1_times_ratio():
    cc, st = fresh(cwnd=20.0, ssthresh=50.0)
    cc.on_feedback(st, ack(100))
    cc.on_feedback(st, ack(92))                         # one octave down: 100 kb/s-ish halves
    ratio = kbps(92) / kbps(100)
    assert ratio == pytest.approx(0.5)
    assert st.cwnd == pytest.approx(20.0 * 1.0 * ratio)
    assert st.ssthresh == 50.0                          # the rule scales cwnd only
    cc.on_feedback(st, ack(89))                         # three steps down
    assert st.cwnd == pytest.approx(10.0 * kbps(89) / kbps(92))


def test_increase_multiplies_by_beta2_times_ratio():
    cc, st = fresh(cwnd=10.0, ssthresh=8.0)
    cc.on_feedback(st, ack(92))
    cc.on_feedback(st, ack(100))                        # doubles: x 2 * 2 = 4
    assert st.cwnd == pytest.approx(10.0 * 2.0 * 2.0)
    assert st.ssthresh == 8.0                           # an increase leaves ssthresh alone
    cc.on_feedback(st, ack(101))                        # the smallest step still more than doubles
    assert st.cwnd == pytest.approx(40.0 * 2.0 * 2 ** (1 / 8))


def test_custom_betas():
    cc, st = fresh(cwnd=16.0, beta1=0.5, beta2=1.0)
    cc.on_feedback(st, ack(80))
    cc.on_feedback(st, ack(88))                         # ratio 2, beta2 = 1
    assert st.cwnd == pytest.approx(32.0)
    cc.on_feedback(st, ack(80))                         # ratio 1/2, beta1 = 0.5
    assert st.cwnd == pytest.approx(8.0)


def test_bounds_max_cwnd_and_one_segment():
    cc, st = fresh(cwnd=100.0)
    st.max_cwnd = 150.0
    cc.on_feedback(st, ack(50))
    cc.on_feedback(st, ack(58))
    assert st.cwnd == 150.0
    cc.on_feedback(st, ack(0))                          # 2^-7.25: far below one segment
    assert st.cwnd == 1.0


def test_no_scaling_during_fast_recovery_but_lastebn_tracks():
    cc, st = fresh(cwnd=20.0)
    cc.on_feedback(st, ack(100))
    st.in_recovery = True
    cc.on_feedback(st, ack(92))
    assert st.cwnd == 20.0
    st.in_recovery = False
    cc.on_feedback(st, ack(92))                         # same as the last code seen: nothing
    assert st.cwnd == 20.0
    cc.on_feedback(st, ack(84))
    assert st.cwnd == pytest.approx(10.0)


def test_unset_feedback_changes_nothing():
    cc, st = fresh()
    cc.on_feedback(st, ack(100))
    cc.on_feedback(st, ack(None, hop_count=0))
    no_echo = AckInfo(now_us=0, ack_seq=0, acked_bytes=MSS, rtt_sample_us=None,
                      ack_send_time_us=None, feedback=None, dupacks=0)
    cc.on_feedback(st, no_echo)
    assert st.cwnd == 20.0
    cc.on_feedback(st, ack(100))
    assert st.cwnd == 20.0


def test_relative_variant():
    cc, st = fresh(cwnd=10.0, variant="relative")
    cc.on_feedback(st, ack(100))
    cc.on_feedback(st, ack(101))
    r = 2 ** (1 / 8)
    assert st.cwnd == pytest.approx(10.0 * (1 + 2.0 * (r - 1)))
    cc.on_feedback(st, ack(93))
    assert st.cwnd == pytest.approx(10.0 * (1 + 2.0 * (r - 1)) * 0.5)


def test_ssthresh_follows_a_decrease_when_asked():
    cc, st = fresh(cwnd=20.0, ssthresh=50.0, ssthresh_follows="true")
    cc.on_feedback(st, ack(100))
    cc.on_feedback(st, ack(92))
    assert st.cwnd == pytest.approx(10.0) and st.ssthresh == pytest.approx(10.0)
    cc.on_feedback(st, ack(100))                        # an increase leaves it alone
    assert st.ssthresh == pytest.approx(10.0)
    cc.on_feedback(st, ack(0))                          # cwnd to one segment, ssthresh at least 2
    assert st.cwnd == 1.0 and st.ssthresh == 2.0


def test_a_decrease_in_slow_start_keeps_slow_start():
    """The literal rule: cwnd halves, ssthresh stays infinite, and the next ACK
    still grows cwnd by a whole segment (slow start)."""
    cc, st = fresh(cwnd=8.0)
    cc.on_feedback(st, ack(100))
    cc.on_feedback(st, ack(92))
    assert st.cwnd == pytest.approx(4.0) and st.ssthresh == float("inf")
    cc.on_ack(st, AckInfo(now_us=0, ack_seq=MSS, acked_bytes=MSS, rtt_sample_us=None,
                          ack_send_time_us=None, feedback=None, dupacks=0))
    assert st.cwnd == pytest.approx(5.0)


def test_newreno_underneath():
    cc, st = fresh(cwnd=10.0, ssthresh=5.0)
    cc.on_ack(st, AckInfo(now_us=0, ack_seq=MSS, acked_bytes=MSS, rtt_sample_us=None,
                          ack_send_time_us=None, feedback=None, dupacks=0))
    assert st.cwnd == pytest.approx(10.1)


def test_an_increase_never_lowers_ssthresh():
    cc, st = fresh(cwnd=10.0)                          # ssthresh still infinite (slow start)
    cc.on_feedback(st, ack(92))
    cc.on_feedback(st, ack(96))                         # x 2 * 2^0.5
    assert st.cwnd == pytest.approx(10.0 * 2.0 * 2 ** 0.5) and st.ssthresh == float("inf")


def test_the_unset_code_255_is_no_feedback():
    cc, st = fresh()
    cc.on_feedback(st, ack(100))
    cc.on_feedback(st, ack(255))                        # a path whose switches stamp no share
    assert st.extra["ebn_code"] == 100 and st.estimate_bps == pytest.approx(kbps(100) * 1000)
    cc.on_feedback(st, ack(92))                         # compared with the last *set* code
    assert st.cwnd == pytest.approx(10.0)


def test_each_scaling_is_logged_with_its_code_and_ratio():
    """The sender's log columns (flowlog: ebn_code, ebn_ratio, ebn_scalings) that the
    report and the Mininet smoke test read to see that EBN scaled cwnd."""
    cc, st = fresh(cwnd=20.0, ssthresh=50.0)
    assert st.estimate_bps is None
    cc.on_feedback(st, ack(100))
    assert st.extra == {"ebn_code": 100}                # a first code scales nothing
    cc.on_feedback(st, ack(92))
    assert st.extra == {"ebn_code": 92, "ebn_ratio": pytest.approx(0.5), "ebn_scalings": 1}
    cc.on_feedback(st, ack(92))
    assert st.extra["ebn_scalings"] == 1
    cc.on_feedback(st, ack(100))
    assert st.extra == {"ebn_code": 100, "ebn_ratio": pytest.approx(2.0), "ebn_scalings": 2}
    assert cc.scalings == 2


@pytest.mark.parametrize("kw, says", [
    (dict(beta1=0), "beta1 and beta2 must be > 0"), (dict(beta2=0), "beta1 and beta2 must be > 0"),
    (dict(beta1=-1, beta2=-1), "beta1 and beta2 must be > 0"),
    (dict(variant="square"), "ebn variant must be one of ('literal', 'relative'), got 'square'"),
])
def test_bad_parameters_say_which(kw, says):
    with pytest.raises(ValueError) as err:
        TcpEbn(**kw)
    assert str(err.value) == says


def test_ssthresh_follows_never_lowers_ssthresh_on_an_increase():
    """ssthresh_follows acts on decreases only: in slow start (ssthresh infinite) an
    increase of the share, however small, leaves ssthresh infinite."""
    for code in (101, 108, 120):                         # x 1.09, x 2, x 5.7 the share
        cc, st = fresh(cwnd=10.0, ssthresh=float("inf"), ssthresh_follows="true")
        cc.on_feedback(st, ack(100))
        cc.on_feedback(st, ack(code))
        assert st.cwnd > 10.0 and st.ssthresh == float("inf"), code


@pytest.mark.parametrize("variant", ["literal", "relative"])
def test_the_factor_of_an_unchanged_share_is_one_in_both_variants(variant):
    """A ratio of 1 leaves cwnd alone whatever the betas (the literal rule,
    beta2 * ratio, would otherwise double it); below and above 1 each variant
    uses its beta (EBN sec. III-C; docs/algorithms.md for "relative")."""
    cc = TcpEbn(beta1=0.5, beta2=2.0, variant=variant)
    assert cc.factor(1.0) == 1.0
    if variant == "literal":
        assert (cc.factor(0.5), cc.factor(2.0)) == (0.25, 4.0)
    else:
        assert (cc.factor(0.5), cc.factor(2.0)) == (0.75, 3.0)
