"""CBR: the constant-rate, unresponsive source the DFT and SARBE papers load their links with."""
import pytest

from hosts.cc import registry
from hosts.cc.base import AckInfo, CcState
from hosts.cc.cbr import ConstantRate
from hosts.sim.channel import LinkModel, Simulation
from hosts.transport.sender import SenderConfig
from hosts.transport.source import PatternSource

MSS, OVERHEAD = 1000, 102
FRAME = MSS + OVERHEAD


def fresh(rate_mbit=4.408):
    cc = ConstantRate(rate_mbit)
    st = CcState(mss_bytes=MSS, frame_overhead_bytes=OVERHEAD)
    cc.on_init(st)
    return cc, st


def test_paces_rate_mbit_of_frames():
    cc, st = fresh(4.408)
    assert st.pacing_rate_bps == pytest.approx(4.408e6)     # the pacer counts frame bits
    assert st.cwnd == st.max_cwnd                                      # the window is no limit


def test_no_event_changes_rate_or_window():
    cc, st = fresh(2.204)
    before = (st.pacing_rate_bps, st.cwnd, st.ssthresh)
    a = AckInfo(now_us=1, ack_seq=0, acked_bytes=0, rtt_sample_us=None, ack_send_time_us=None,
                feedback=None, dupacks=3)
    st.bytes_in_flight = 50 * MSS
    for event in (lambda: cc.on_ack(st, a), lambda: cc.on_dupack(st, a), lambda: cc.on_enter_recovery(st),
                  lambda: cc.on_partial_ack(st, a), lambda: cc.on_exit_recovery(st, a), lambda: cc.on_ecn(st),
                  lambda: cc.on_timeout(st)):
        event()
        assert (st.pacing_rate_bps, st.cwnd, st.ssthresh) == before


def test_rate_must_be_positive_and_is_a_param():
    with pytest.raises(ValueError):
        ConstantRate(0)
    cc = registry.create("cbr", ["rate_mbit=2.5"], None)
    assert cc.rate_mbit == 2.5


@pytest.mark.parametrize("sack", [False, True])
@pytest.mark.parametrize("rate_mbit, lossy", [(1.5, False), (4.0, True)])
def test_offers_its_rate_whatever_the_link_does(rate_mbit, lossy, sack):
    """On the transport over a 2 Mb/s bottleneck with a 20-packet queue: below the
    link's rate nothing is lost; at twice its rate about half the frames are lost,
    and the source still offers its rate (it does not back off)."""
    sim = Simulation(LinkModel(delay_us=10_000, rate_bps=2e6, queue_packets=20),
                     LinkModel(delay_us=10_000), seed=1)
    s = sim.add_flow(ConstantRate(rate_mbit), PatternSource(60_000_000, MSS),
                     config=SenderConfig(mss_bytes=MSS, sack=sack))
    sim.run(until_us=5_000_000)
    summary = s.summary(sim.now_us)
    elapsed_s = (sim.now_us - s.established_us) / 1e6
    frame = MSS + s.st.frame_overhead_bytes
    offered_frame_bps = s.packets_sent * frame * 8 / elapsed_s
    assert offered_frame_bps == pytest.approx(rate_mbit * 1e6, rel=0.02)
    if lossy:
        assert summary["retransmits"] > 0.3 * s.packets_sent
    else:
        assert summary["retransmits"] == 0
