"""The estimators' shared pieces (hosts.cc.filters): the RTT minimum, the bytes
an ACK stands for, and the window a bandwidth estimate gives after a loss."""
import pytest

from hosts.cc.base import AckInfo, CcState
from hosts.cc.filters import AckedCounter, RttMin
from hosts.cc.westwood import Westwood

MSS = 1000


def ack(acked_bytes: int, dupacks: int = 0) -> AckInfo:
    return AckInfo(now_us=0, ack_seq=0, acked_bytes=acked_bytes, rtt_sample_us=None,
                   ack_send_time_us=None, feedback=None, dupacks=dupacks)


def test_the_rtt_minimum_takes_every_positive_sample_and_ignores_zero_and_none():
    """A 0 us sample is a clock artefact (two timestamps in the same microsecond),
    not an RTT; 1 us is a real, if short, one (loopback)."""
    m = RttMin()
    st = CcState(mss_bytes=MSS)
    for sample in (None, 0, 5_000, 7_000, None, 0):
        m.update(sample)
    assert m.value_us == 5_000
    m.update(1)
    assert m.value_us == 1 and m.get(st) == 1.0
    st.min_rtt_us = 3
    assert RttMin().get(st) == 3.0 and RttMin().get(CcState(mss_bytes=MSS)) is None


@pytest.mark.parametrize("acked_bytes", [1, 999, MSS, 3 * MSS])
def test_a_new_ack_stands_for_the_bytes_it_covers_even_one(acked_bytes):
    """The last segment of a stream may be one byte: its ACK counts that byte, not
    a segment and not nothing."""
    assert AckedCounter().count(ack(acked_bytes), MSS) == acked_bytes


def test_a_loss_window_comes_from_any_positive_estimate_and_none_without_one():
    """Westwood's rule (ssthresh = BWE * RTTmin / seg_size, at least 2): no estimate
    or no RTT leaves the loss to NewReno's rules (None)."""
    cc = Westwood()
    st = CcState(mss_bytes=MSS)
    cc.on_init(st)
    st.min_rtt_us = 100_000
    assert cc.estimate_ssthresh(st) is None                 # no estimate yet
    st.estimate_bps = 0.0
    assert cc.estimate_ssthresh(st) is None
    st.estimate_bps = 0.5                                   # tiny, but an estimate
    assert cc.estimate_ssthresh(st) == 2.0
    st.estimate_bps = 8e6
    assert cc.estimate_ssthresh(st) == pytest.approx(100.0)  # 8 Mb/s * 0.1 s / 8000 bit
    st.min_rtt_us = None
    assert cc.estimate_ssthresh(st) is None
