"""The multi-hop simulator's engine (hosts.sim.netsim.NetworkSim): flows and
their addresses, the event order, timers, sampling and the seed. Ports one by one:
tests/test_netsim_port.py; the papers' scenarios: tests/test_netsim.py."""
from __future__ import annotations

from typing import List

import pytest

from hosts.cc.newreno import NewReno
from hosts.sim.netsim import NetworkSim
from hosts.transport.sender import SenderConfig, SenderState
from hosts.transport.source import PatternSource, pattern_bytes
from hosts.transport.wire import F_DATA, TransportHeader

MSS = 1000


def link(net: NetworkSim, name: str, delay_us: int = 10_000, **kw):
    return net.port(name, rate_bps=kw.pop("rate_bps", 100e6), delay_us=delay_us, bwn=False, **kw)


def flow(net: NetworkSim, nbytes: int, fwd, rev, dst: str = "d", **kw):
    return net.add_flow(NewReno(), PatternSource(nbytes, MSS), dst=dst, forward=[fwd], reverse=[rev],
                        config=SenderConfig(mss_bytes=MSS), **kw)


def test_flows_get_their_own_address_id_and_name_and_share_their_destinations_receiver():
    net = NetworkSim()
    fwd, rev = link(net, "f"), link(net, "r")
    flows = [flow(net, 3_000 + 1_000 * i, fwd, rev, dst="d" if i < 2 else "e") for i in range(3)]
    named = flow(net, 2_000, fwd, rev, name="long", flow_id=77)
    assert [f.addr for f in flows] == [("10.0.0.1", 40000), ("10.0.0.2", 40001), ("10.0.0.3", 40002)]
    assert [f.sender.flow_id for f in flows] == [1, 2, 3] and named.sender.flow_id == 77
    assert [f.name for f in flows] == ["f0", "f1", "f2"] and named.name == "long"
    assert sorted(net.receivers) == ["d", "e"]
    net.run(10_000_000)
    for f in flows + [named]:
        assert f.sender.state is SenderState.DONE
        assert bytes(net.sink_of(f).data) == pattern_bytes(0, f.sender.st.delivered_bytes)
    assert [f.sender.st.delivered_bytes for f in flows + [named]] == [3_000, 4_000, 5_000, 2_000]
    more = NetworkSim()
    f2, r2 = link(more, "f"), link(more, "r")
    last = [flow(more, 1, f2, r2) for _ in range(252)][-2:]
    assert [f.addr for f in last] == [("10.0.1.1", 40250), ("10.0.1.2", 40251)]   # 250 hosts per /24


def test_a_lost_segment_is_resent_when_the_senders_timer_fires():
    """The only DATA segment is lost once: nothing is in flight any more, and only
    the sender's retransmission timer (which the engine must run) ends the flow."""
    net = NetworkSim()
    fwd, rev = link(net, "f"), link(net, "r")
    original = fwd.arrive
    lost: List[int] = []

    def arrive(pkt, f, now_us):
        if TransportHeader.unpack(bytes(pkt)).flags & F_DATA:
            lost.append(now_us)
            if len(lost) == 1:
                return None
        return original(pkt, f, now_us)

    fwd.arrive = arrive  # type: ignore[method-assign]
    f = flow(net, MSS, fwd, rev)
    net.run(30_000_000)
    assert f.sender.state is SenderState.DONE and f.sender.timeouts == 1
    assert lost[1] - lost[0] == 200_000                  # the 200 ms minimum RTO (transport_rto), on time
    assert bytes(net.sink_of(f).data) == pattern_bytes(0, MSS)


@pytest.mark.parametrize("delayed_ack, segments", [(False, 48), (True, 16)])
def test_the_receivers_delayed_ack_timer_runs_and_the_window_is_the_simulations(delayed_ack, segments):
    """A receive window of one segment (the simulation's, which the sender learns):
    each segment waits for its ACK, one RTT (20 ms), and with delayed ACKs also the
    receiver's 40 ms timer, which only the engine runs. In 1 s after the 20 ms
    handshake: 48 segments, or 16."""
    net = NetworkSim(delayed_ack=delayed_ack, window_bytes=MSS)
    fwd, rev = link(net, "f"), link(net, "r")
    f = net.add_flow(NewReno(), PatternSource(None, MSS), dst="d", forward=[fwd], reverse=[rev],
                     config=SenderConfig(mss_bytes=MSS))
    net.run(1_000_000)
    s = f.sender
    assert s.rwnd_bytes == MSS and s.timeouts == 0
    assert s.st.delivered_bytes == segments * MSS


def test_acks_cross_every_port_of_the_way_back():
    net = NetworkSim()
    fwd, back1, back2 = link(net, "f", 5_000), link(net, "b1", 7_000), link(net, "b2", 11_000)
    f = net.add_flow(NewReno(), PatternSource(5 * MSS, MSS), dst="d", forward=[fwd], reverse=[back1, back2],
                     config=SenderConfig(mss_bytes=MSS))
    net.run(10_000_000)
    assert f.sender.st.min_rtt_us == pytest.approx(5_000 + 7_000 + 11_000, abs=500)


def test_events_at_the_same_time_run_in_the_order_they_were_scheduled():
    """Two flows started at 0 through one slow port: the first added sends first,
    so it is connected first."""
    net = NetworkSim()
    fwd, rev = link(net, "f", rate_bps=1e6), link(net, "r")
    a, b = flow(net, MSS, fwd, rev), flow(net, MSS, fwd, rev)
    net.run(30_000_000)
    assert a.sender.start_us == b.sender.start_us == 0
    assert a.sender.established_us < b.sender.established_us


def test_run_stops_at_until_including_what_happens_then():
    net = NetworkSim()
    fwd, rev = link(net, "f"), link(net, "r")
    f = flow(net, 100 * MSS, fwd, rev, start_us=1_000)
    net.run(999)
    assert f.sender.start_us is None and net.now_us == 999
    net.run(1_000)                                      # the start is at until: it runs
    assert f.sender.start_us == 1_000



def test_on_sample_runs_at_the_first_event_then_every_sample_interval():
    net = NetworkSim()
    flow(net, 100 * MSS, link(net, "f"), link(net, "r"))
    samples: List[int] = []
    net.sample_every_us = 10_000
    net.run(100_000, on_sample=lambda n: samples.append(n.now_us))
    assert samples[0] == 0                              # the flow's start
    assert all(b - a >= 10_000 for a, b in zip(samples, samples[1:]))
    assert 9 <= len(samples) <= 11
    net.run(200_000)                                    # no callback: nothing sampled
    assert samples[-1] < 100_000


@pytest.mark.parametrize("seed", [1, 2])
def test_the_seed_decides_the_random_losses(seed):
    def drops(s: int) -> List[bool]:
        net = NetworkSim(seed=s)
        port = net.port("l", rate_bps=1e9, delay_us=0, loss=0.5)
        f = flow(net, MSS, link(net, "f"), link(net, "r"))
        return [port.arrive(bytearray(100), f, t) is None for t in range(64)]
    assert drops(seed) == drops(seed) and drops(seed) != drops(seed + 10)
