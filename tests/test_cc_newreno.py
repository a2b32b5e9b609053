"""NewReno's window rules, one callback at a time (RFC 5681, RFC 6582, RFC 6675):
the base class every loss-based algorithm here builds on."""
import pytest

from hosts.cc.base import AckInfo, CcState
from hosts.cc.newreno import NewReno

MSS = 1000


def state(cwnd: float, ssthresh: float = 1e9, flight_segments: float = 0.0, sack: bool = False) -> CcState:
    st = CcState(mss_bytes=MSS)
    NewReno().on_init(st)
    st.cwnd, st.ssthresh, st.sack = cwnd, ssthresh, sack
    st.bytes_in_flight = int(flight_segments * MSS)
    return st


def ack(acked_bytes: int) -> AckInfo:
    return AckInfo(now_us=0, ack_seq=0, acked_bytes=acked_bytes, rtt_sample_us=None,
                   ack_send_time_us=None, feedback=None, dupacks=0)


@pytest.mark.parametrize("acked_bytes, growth", [(2 * MSS, 1.0), (MSS, 1.0), (MSS // 2, 0.5), (0, 0.0)])
def test_slow_start_grows_by_what_an_ack_covers_but_at_most_one_segment(acked_bytes, growth):
    """RFC 5681 sec. 3.1 eq. (2): cwnd += min(N, SMSS); a delayed ACK for two
    segments still adds one."""
    st = state(cwnd=4.0)
    NewReno().on_ack(st, ack(acked_bytes))
    assert st.cwnd == pytest.approx(4.0 + growth)


def test_congestion_avoidance_grows_by_acked_over_cwnd_and_stops_at_the_receive_window():
    """RFC 5681 sec. 3.1 eq. (3), per acked segment; never above max_cwnd."""
    st = state(cwnd=10.0, ssthresh=5.0)
    NewReno().on_ack(st, ack(2 * MSS))
    assert st.cwnd == pytest.approx(10.2)
    st = state(cwnd=10.0)
    st.max_cwnd = 10.5
    NewReno().on_ack(st, ack(MSS))
    assert st.cwnd == 10.5


@pytest.mark.parametrize("flight, ssthresh", [(10.0, 5.0), (5.0, 2.5), (4.0, 2.0), (2.0, 2.0), (0.0, 2.0)])
def test_a_timeout_halves_the_flight_into_ssthresh_floored_at_two_and_leaves_one_segment(flight, ssthresh):
    """RFC 5681 sec. 3.1 eq. (4) and the loss window of one segment (sec. 3.1)."""
    st = state(cwnd=12.0, flight_segments=flight)
    NewReno().on_timeout(st)
    assert (st.ssthresh, st.cwnd) == (pytest.approx(ssthresh), 1.0)


@pytest.mark.parametrize("flight, ssthresh", [(10.0, 5.0), (5.0, 2.5), (4.0, 2.0), (2.0, 2.0)])
@pytest.mark.parametrize("sack", [False, True], ids=["no-sack", "sack"])
def test_fast_recovery_starts_at_half_the_flight_plus_three_without_sack(flight, ssthresh, sack):
    """RFC 6582 step 3 (ssthresh + 3 SMSS) and RFC 6675 sec. 5 step (4.2) (cwnd =
    ssthresh); ssthresh by RFC 5681 eq. (4), floored at 2 segments."""
    st = state(cwnd=12.0, flight_segments=flight, sack=sack)
    NewReno().on_enter_recovery(st)
    assert st.ssthresh == pytest.approx(ssthresh)
    assert st.cwnd == pytest.approx(ssthresh + (0.0 if sack else 3.0))


@pytest.mark.parametrize("cwnd, acked_segments, after", [(8.0, 3, 6.0), (4.0, 4, 1.0), (3.0, 5, 1.0)])
def test_a_partial_ack_deflates_by_what_it_covers_plus_one_and_never_below_one(cwnd, acked_segments, after):
    """RFC 6582 step 5: cwnd -= acked, += 1 SMSS, at least 1; with SACK cwnd stays
    (RFC 6675 keeps it at ssthresh through recovery)."""
    st = state(cwnd=cwnd)
    NewReno().on_partial_ack(st, ack(acked_segments * MSS))
    assert st.cwnd == pytest.approx(after)
    st = state(cwnd=cwnd, sack=True)
    NewReno().on_partial_ack(st, ack(acked_segments * MSS))
    assert st.cwnd == cwnd
