"""The multi-hop simulator (hosts.sim.netsim): the RFC 2597 edge model
and eq. (6) feedback of its ports, and what GTCP and OBP achieve on it
(GTCP's reservations, OBP's parking lot). Figures over several seeds: benchmarks/gtcp_sim.py and
benchmarks/obp_parking_lot_sim.py."""
from __future__ import annotations

from typing import Any

import pytest

from hosts.cc import registry
from hosts.sim.scenarios import (
    GTCP_RESERVATIONS_MBIT,
    gtcp_reservations,
    max_min_long_share_mbps,
    parking_lot,
)
from hosts.sim.netsim import L2_L4_OVERHEAD_BYTES, NetFlow, NetworkSim, TokenBucket, payload_to_frame
from hosts.transport.sender import SenderConfig
from hosts.transport.source import PatternSource, pattern_bytes
from hosts.transport.wire import DATA_VK, HEADERS_LEN

PKT = 1000 - L2_L4_OVERHEAD_BYTES   # a UDP payload whose frame is 1000 bytes


def data_pkt() -> bytearray:
    pkt = bytearray(PKT)
    pkt[0] = DATA_VK
    return pkt


def fake_flow(index: int, reserved_bps: float = 0.0, burst: int = 0) -> Any:
    return NetFlow(index, None, ("x", index), "d", [], [],  # type: ignore[arg-type]
                   TokenBucket(reserved_bps, burst) if reserved_bps else None, f"f{index}")


# -- the edge model (RFC 2597) ----------------------------------------------------------------
def test_out_of_profile_dropped_above_threshold_in_profile_only_when_full() -> None:
    net = NetworkSim()
    port = net.port("p", rate_bps=1e6, delay_us=0, queue_packets=10, af_threshold_packets=4)
    be = fake_flow(0)
    reserved = fake_flow(1, reserved_bps=1e6, burst=100_000)   # every packet in profile
    fates = [port.arrive(data_pkt(), be, 0) is not None for _ in range(8)]
    assert fates == [True] * 5 + [False] * 3             # 1 in service + 4 waiting: threshold
    assert port.stats.dropped_precedence == 3
    fates = [port.arrive(data_pkt(), reserved, 0) is not None for _ in range(8)]
    assert fates == [True] * 6 + [False] * 2             # in profile: until 10 wait
    assert port.stats.dropped_queue == 2 and port.stats.in_profile == 6


def test_token_bucket_marks_the_reserved_rate_in_frame_bytes() -> None:
    tb = TokenBucket(8e6, 1000)                          # 1 MB/s, one 1000-byte frame of depth
    assert tb.conforms(1000, 0)
    tb.consume(1000)
    assert not tb.conforms(1000, 500)                    # 500 bytes of tokens after 0.5 ms
    assert tb.conforms(1000, 1000)


def test_one_fifo_keeps_a_flows_packets_in_order_whatever_their_color() -> None:
    net = NetworkSim()
    port = net.port("p", rate_bps=10e6, delay_us=1000, queue_packets=100, af_threshold_packets=50)
    flow = fake_flow(0, reserved_bps=2e6, burst=3000)    # some packets in profile, some not
    times = [port.arrive(data_pkt(), flow, t * 100) for t in range(40)]
    assert all(t is not None for t in times)
    assert 0 < port.stats.in_profile < 40
    assert times == sorted(times)                         # departures in arrival order


def test_unused_reservation_is_anybodys() -> None:
    # A best-effort flow alone behind an edge with a 7 Mb/s reservation for others
    # fills the 10 Mb/s link: the model is work-conserving.
    net = NetworkSim()
    p = net.port("b", rate_bps=10e6, delay_us=10_000, queue_packets=60, af_threshold_packets=30,
                 bwn=False)
    back = net.port("r", rate_bps=10e6, delay_us=10_000, bwn=False)
    f = net.add_flow(registry.create("newreno"), PatternSource(None, 1000), dst="d",
                     forward=[p], reverse=[back], config=SenderConfig(mss_bytes=1000))
    net.run(5_000_000)
    d0 = f.sender.st.delivered_bytes
    net.run(15_000_000)
    frames_mbps = (f.sender.st.delivered_bytes - d0) * 8 / 10 * (1000 + 102) / 1000 / 1e6
    assert frames_mbps > 9.0


# -- eq. (6) feedback -------------------------------------------------------------------------
def test_ab_is_capacity_minus_bytes_received_minus_backlog() -> None:
    net = NetworkSim()
    port = net.port("p", rate_bps=1e6, delay_us=0, queue_packets=100, ab_period_us=10_000)
    flow = fake_flow(0)
    for _ in range(3):                                    # 3 frames of 1000 bytes at t = 0
        port.arrive(data_pkt(), flow, 0)
    port.arrive(data_pkt(), flow, 10_000)                 # closes the first period
    # BR = 3000 bytes in 10 ms = 2.4 Mb/s; BI = 0 at the period's start.
    assert port.ab_bps == pytest.approx(1e6 - 2.4e6)
    for _ in range(2):
        port.arrive(data_pkt(), flow, 15_000)
    port.arrive(data_pkt(), flow, 20_000)
    # BR = the 3 frames of 10-20 ms; BI = the queue when that period began (10 ms):
    # 3 arrived at 0, 1 sent by then (8 ms each) -> 2 frames, 1.6 Mb/s over 10 ms.
    assert port.ab_bps == pytest.approx(1e6 - 2.4e6 - 1.6e6)


def test_drops_count_as_bytes_received() -> None:
    net = NetworkSim()
    port = net.port("p", rate_bps=1e6, delay_us=0, queue_packets=1, ab_period_us=10_000)
    flow = fake_flow(0)
    accepted = sum(port.arrive(data_pkt(), flow, 0) is not None for _ in range(5))
    port.arrive(data_pkt(), flow, 10_000)
    assert accepted == 2
    assert port.ab_bps == pytest.approx(1e6 - 5 * 8000 / 0.01)   # all 5 received count


def test_stamps_lower_narrow_and_tight_along_a_path() -> None:
    net = NetworkSim()
    a = net.port("a", rate_bps=100e6, delay_us=1000)
    b = net.port("b", rate_bps=10e6, delay_us=1000)
    back = net.port("r", rate_bps=100e6, delay_us=2000)
    f = net.add_flow(registry.create("obp"), PatternSource(50_000, 1000), dst="d",
                     forward=[a, b], reverse=[back], config=SenderConfig(mss_bytes=1000))
    net.run(10_000_000)
    assert f.sender.state.value == "done"
    fb = f.sender.feedback
    assert fb is not None and fb.hop_count == 2 and fb.narrow_kbps == 10_000
    assert fb.tight_kbps is not None and fb.tight_kbps <= 10_000
    assert bytes(net.sink_of(f).data) == pattern_bytes(0, 50_000)
    assert HEADERS_LEN == 60


# -- what the papers' senders get ---------------------------------------------------------------
@pytest.mark.scenario
def test_gtcp_reserved_flows_get_reservation_plus_equal_share_srtt_variant() -> None:
    res = gtcp_reservations(seed=1, duration_s=40, warmup_s=10,
                            gtcp_params=["cwnd_g_rtt=srtt"]).by_name()
    excess = (10 - sum(GTCP_RESERVATIONS_MBIT)) / 6
    for r in GTCP_RESERVATIONS_MBIT:
        f = res[f"g{int(r)}"]
        assert f.frame_mbps >= 0.9 * (r + excess), f
        assert f.in_profile_mbps >= 0.85 * r, f          # most of the reservation in profile
        assert f.timeouts == 0
    for i in (1, 2, 3):
        assert res[f"be{i}"].frame_mbps >= 0.8 * excess


@pytest.mark.scenario
def test_gtcp_paper_variant_keeps_the_reserved_flows_ahead_of_best_effort() -> None:
    res = gtcp_reservations(seed=1, duration_s=40, warmup_s=10).by_name()
    be = max(res[f"be{i}"].frame_mbps for i in (1, 2, 3))
    assert res["g4"].frame_mbps > res["g2"].frame_mbps > res["g1"].frame_mbps > be
    assert all(res[f"g{int(r)}"].in_profile_mbps >= 0.75 * r for r in GTCP_RESERVATIONS_MBIT)


@pytest.mark.scenario
def test_obp_long_flow_gets_its_max_min_share_when_cross_traffic_leaves_it() -> None:
    app = 3e6
    res = parking_lot(seed=1, duration_s=40, warmup_s=15, cross_app_rate_bps=app).by_name()
    share = max_min_long_share_mbps(app)
    assert res["long"].frame_mbps >= 0.8 * share, res["long"]
    cross = payload_to_frame(app, 1000) / 1e6           # what the cross flows offer
    assert all(res[f"cross{i}"].frame_mbps >= 0.95 * cross for i in (1, 2, 3))


@pytest.mark.scenario
def test_obp_backs_off_on_losses_its_feedback_does_not_explain() -> None:
    """Issue 10's hidden bottleneck: one OBP flow through a stamped 10 Mb/s port, then
    a 5 Mb/s port without BWN whose drops the feedback never shows. With the sender's
    reaction to unexplained losses (its default) it fills the 5 Mb/s port and loses
    far less than without it (factor 1: no reaction), where the losses go on."""
    from hosts.sim.scenarios import hidden_bottleneck
    reacting = hidden_bottleneck(seed=1, duration_s=25, warmup_s=5).flows[0]
    deaf = hidden_bottleneck(seed=1, duration_s=25, warmup_s=5,
                             params=["unexplained_loss_factor=1.0"]).flows[0]
    assert reacting.algo == "obp" and reacting.name == "obp"
    for flow in (reacting, deaf):
        assert 0.9 * 5.0 <= flow.frame_mbps <= 5.0, flow            # the hidden port limits it
    loss = {f.name + str(i): f.retransmits / f.packets_sent for i, f in enumerate((reacting, deaf))}
    assert loss["obp0"] < 0.5 * loss["obp1"], loss
    assert reacting.timeouts <= 5 < deaf.timeouts


def test_hidden_bottleneck_drops_only_at_the_port_without_bwn_and_measures_after_warmup() -> None:
    """The short form of the GTCP scenario: the default seed is seed 1 (the
    benchmarks' figures are reproducible), the rates cover duration minus warm-up,
    and every drop is at the 5 Mb/s port the feedback does not see."""
    from hosts.sim.scenarios import hidden_bottleneck
    res = hidden_bottleneck(duration_s=6, warmup_s=2)
    assert res == hidden_bottleneck(seed=1, duration_s=6, warmup_s=2)
    assert res.seconds == 4.0
    assert set(res.drops) == {"plain-5M"} and res.drops["plain-5M"] > 0
    flow = res.flows[0]
    assert 0.8 * 5.0 <= flow.frame_mbps <= 5.0 and flow.retransmits > 0


def _wiring(monkeypatch, scenario, **kwargs):
    """What ``scenario`` builds (network, flows, metered port, span), without running it."""
    import hosts.sim.scenarios as ns
    seen: dict = {}

    def capture(net, flows, meter_port, warmup_us, duration_us):
        seen.update(net=net, flows=flows, meter=meter_port, warmup_us=warmup_us, duration_us=duration_us)
        return "measured"

    monkeypatch.setattr(ns, "_measure", capture)
    assert getattr(ns, scenario)(**kwargs) == "measured"
    return seen


def _port(p) -> tuple:
    return (p.name, p.rate_bps, p.delay_us, p.queue_packets, p.af_threshold_packets, p.bwn, p.loss)


def _start_times_us(net) -> list:
    return sorted(t for t, _, _ in net._events)


def test_the_gtcp_scenario_is_the_papers_basic_case_on_the_af_edge(monkeypatch) -> None:
    """GTCP paper sec. IV-A as netsim_scenarios builds it: 10 Mb/s, 20 ms bottleneck
    (60 packets, AF threshold 30) with 100 Mb/s, 1 ms access links; three GTCP flows
    reserving 4, 2, 1 Mb/s metered with 15 000-byte bursts, three best-effort
    NewReno flows; SACK; 1000-byte segments; measured at the bottleneck after 10 s."""
    w = _wiring(monkeypatch, "gtcp_reservations", seed=3, duration_s=30, warmup_s=7)
    assert (w["warmup_us"], w["duration_us"]) == (7_000_000, 30_000_000)
    flows = w["flows"]
    assert [f.name for f in flows] == ["g4", "g2", "g1", "be1", "be2", "be3"]
    forward = [_port(p) for p in flows[0].forward]
    assert forward == [("h1-s1", 100e6, 1_000, 1000, None, False, 0.0),
                       ("s1-s2", 10e6, 20_000, 60, 30, False, 0.0),
                       ("s2-h2", 100e6, 1_000, 1000, None, False, 0.0)]
    assert [_port(p) for p in flows[0].reverse] == [("h2-s2", 100e6, 1_000, 1000, None, False, 0.0),
                                                    ("s2-s1", 10e6, 20_000, 60, None, False, 0.0),
                                                    ("s1-h1", 100e6, 1_000, 1000, None, False, 0.0)]
    assert w["meter"] is flows[0].forward[1]
    assert all(f.forward == flows[0].forward and f.reverse == flows[0].reverse and f.dst == "h2"
               for f in flows)
    for f, rate in zip(flows, (4e6, 2e6, 1e6)):
        assert f.sender.cc.name == "gtcp" and f.sender.cc.rate_g_bps == rate
        assert (f.meter.rate_bps, f.meter.burst_bytes) == (rate, 15_000)
        assert f.sender.cc.cwnd_g_rtt == "base"
    assert all(f.sender.cc.name == "newreno" and f.meter is None for f in flows[3:])
    assert all(f.sender.cfg.sack and f.sender.cfg.mss_bytes == 1000 for f in flows)
    starts = _start_times_us(w["net"])
    assert len(starts) == 6 and all(0 <= t < 500_000 for t in starts) and len(set(starts)) > 1
    assert starts == _start_times_us(_wiring(monkeypatch, "gtcp_reservations", seed=3)["net"])
    assert starts != _start_times_us(_wiring(monkeypatch, "gtcp_reservations", seed=4)["net"])
    w = _wiring(monkeypatch, "gtcp_reservations", sack=False, gtcp_params=["cwnd_g_rtt=srtt"],
                best_effort="reno", af_threshold_packets=10, queue_packets=40, burst_bytes=3000)
    flows = w["flows"]
    assert _port(flows[0].forward[1]) == ("s1-s2", 10e6, 20_000, 40, 10, False, 0.0)
    assert flows[0].reverse[1].queue_packets == 40
    assert flows[0].sender.cc.cwnd_g_rtt == "srtt" and flows[0].meter.burst_bytes == 3000
    assert flows[3].sender.cc.name == "reno" and not flows[3].sender.cfg.sack
    assert (w["warmup_us"], w["duration_us"]) == (10_000_000, 60_000_000)


def test_the_parking_lot_scenario_crosses_each_bottleneck_with_its_own_flow(monkeypatch) -> None:
    """netsim_scenarios.parking_lot: a long flow h0 -> h9 over 3 bottlenecks of 10 Mb/s,
    10 ms and 100 packets, behind 100 Mb/s, 1 ms host links; cross flow i over
    bottleneck i only, behind 100 Mb/s, 5 ms links; ACKs back over the reverse
    bottlenecks; every flow OBP with SACK; measured after 20 s of 60."""
    w = _wiring(monkeypatch, "parking_lot", seed=2)
    assert (w["warmup_us"], w["duration_us"], w["meter"]) == (20_000_000, 60_000_000, None)
    long, *cross = w["flows"]
    assert long.name == "long" and long.dst == "h9" and [f.name for f in cross] == ["cross1", "cross2", "cross3"]
    bottlenecks = [("b1", 10e6, 10_000, 100, None, True, 0.0), ("b2", 10e6, 10_000, 100, None, True, 0.0),
                   ("b3", 10e6, 10_000, 100, None, True, 0.0)]
    assert [_port(p) for p in long.forward] == ([("h0-s1", 100e6, 1_000, 1000, None, True, 0.0)]
                                                + bottlenecks + [("s-h9", 100e6, 1_000, 1000, None, True, 0.0)])
    assert [p.name for p in long.reverse] == ["h9-s", "b3-back", "b2-back", "b1-back", "s1-h0"]
    assert all(p.rate_bps == 10e6 and p.queue_packets == 100 for p in long.reverse[1:4])
    for i, f in enumerate(cross):
        assert f.dst == f"x{i + 2}"
        assert [_port(p) for p in f.forward] == [(f"x{i + 1}-s{i + 1}", 100e6, 5_000, 1000, None, True, 0.0),
                                                 bottlenecks[i],
                                                 (f"s{i + 2}-x{i + 2}", 100e6, 5_000, 1000, None, True, 0.0)]
        assert f.forward[1] is long.forward[i + 1]                 # the very same port
        assert [p.name for p in f.reverse] == [f"x{i + 2}-s{i + 2}", f"b{i + 1}-back", f"s{i + 1}-x{i + 1}"]
        assert f.sender.cfg.app_rate_bps is None
    assert all(f.sender.cc.name == "obp" and f.sender.cfg.sack and f.sender.cfg.mss_bytes == 1000
               for f in w["flows"])
    assert all(p.ab_period_us == 10_000 and p.stamp_only is None for p in w["net"].ports.values())
    starts = _start_times_us(w["net"])
    assert len(starts) == 4 and all(0 <= t < 500_000 for t in starts)
    w = _wiring(monkeypatch, "parking_lot", algo="newreno", bottlenecks=2, cross_app_rate_bps=3e6,
                loss=0.01, queue_packets=50, ab_period_us=50_000, long_sees_only_link=2, sack=False,
                duration_s=9, warmup_s=3)
    long, *cross = w["flows"]
    assert [p.name for p in long.forward] == ["h0-s1", "b1", "b2", "s-h9"] and len(cross) == 2
    assert [(p.loss, p.queue_packets) for p in long.forward[1:3]] == [(0.01, 50), (0.01, 50)]
    assert long.reverse[1].loss == 0.0
    assert long.forward[1].stamp_only == {"cross1"} and long.forward[2].stamp_only == {"cross2", "long"}
    assert all(p.ab_period_us == 50_000 for p in w["net"].ports.values())
    assert all(f.sender.cfg.app_rate_bps == 3e6 for f in cross) and long.sender.cfg.app_rate_bps is None
    assert all(f.sender.cc.name == "newreno" and not f.sender.cfg.sack for f in w["flows"])
    assert (w["warmup_us"], w["duration_us"]) == (3_000_000, 9_000_000)


def test_the_long_flows_max_min_share_is_what_greedy_or_limited_cross_flows_leave() -> None:
    """Every link alike: with greedy cross flows the long flow's share is half a link;
    with cross flows limited to an application rate (payload), what they leave of the
    link in frame bits, never less than half."""
    from hosts.sim.scenarios import max_min_long_share_mbps
    from hosts.sim.netsim import payload_to_frame
    assert max_min_long_share_mbps(None) == 5.0 and max_min_long_share_mbps(None, 4.0) == 2.0
    cross_mbps = payload_to_frame(2e6, 1000) / 1e6
    assert cross_mbps > 2.0                                        # frames are longer than payload
    assert max_min_long_share_mbps(2e6) == pytest.approx(10.0 - cross_mbps)
    assert max_min_long_share_mbps(2e6, 20.0) == pytest.approx(20.0 - cross_mbps)
    assert max_min_long_share_mbps(8e6) == 5.0                     # greedy enough: half a link


def test_the_hidden_bottleneck_scenario_is_wired_as_documented(monkeypatch) -> None:
    """netsim_scenarios.hidden_bottleneck: one OBP flow (SACK, 1000-byte segments)
    through a BWN port of 10 Mb/s, 10 ms, 100 packets, then a 5 Mb/s, 1 ms port of
    50 packets without BWN (the bottleneck the feedback does not see), ACKs back over
    10 Mb/s, 11 ms; started within the seed's start spread; measured after 10 s of 40."""
    w = _wiring(monkeypatch, "hidden_bottleneck", seed=2)
    assert (w["warmup_us"], w["duration_us"], w["meter"]) == (10_000_000, 40_000_000, None)
    (flow,) = w["flows"]
    assert flow.name == "obp" and flow.dst == "d" and flow.meter is None
    assert [_port(p) for p in flow.forward] == [("bwn-10M", 10e6, 10_000, 100, None, True, 0.0),
                                                ("plain-5M", 5e6, 1_000, 50, None, False, 0.0)]
    assert [(p.name, p.rate_bps, p.delay_us, p.bwn) for p in flow.reverse] == [("back", 10e6, 11_000, False)]
    assert flow.sender.cc.name == "obp" and flow.sender.cfg.sack and flow.sender.cfg.mss_bytes == 1000
    assert flow.sender.cfg.app_rate_bps is None
    starts = _start_times_us(w["net"])
    assert len(starts) == 1 and 0 <= starts[0] < 500_000
    assert starts == _start_times_us(_wiring(monkeypatch, "hidden_bottleneck", seed=2)["net"])
    assert starts != _start_times_us(_wiring(monkeypatch, "hidden_bottleneck", seed=5)["net"])
    w = _wiring(monkeypatch, "hidden_bottleneck", sack=False, params=["unexplained_loss_factor=1.0"],
                duration_s=9, warmup_s=3)
    (flow,) = w["flows"]
    assert not flow.sender.cfg.sack and (w["warmup_us"], w["duration_us"]) == (3_000_000, 9_000_000)
    assert flow.sender.cc.unexplained_loss_factor == 1.0


def test_a_scenario_measures_each_flow_between_warmup_and_end() -> None:
    """_measure: each figure is the difference between the end and the warm-up, over
    the measured seconds (payload goodput, the same as frames, the meter's in-profile
    bytes of that flow), the counts likewise, and the drops of every port that dropped
    (queue and precedence drops summed)."""
    from types import SimpleNamespace as NS

    import hosts.sim.scenarios as ns
    from hosts.sim.netsim import payload_to_frame

    def sender(algo):
        return NS(st=NS(delivered_bytes=0), retransmits=0, timeouts=0, forced_segments=0,
                  packets_sent=0, cc=NS(name=algo))

    flows = [NS(name="a", index=0, sender=sender("gtcp")), NS(name="b", index=1, sender=sender("newreno"))]
    meter = NS(stats=NS(in_profile_bytes_by_flow={}))
    ports = {"p": NS(stats=NS(dropped_queue=0, dropped_precedence=0)),
             "q": NS(stats=NS(dropped_queue=0, dropped_precedence=0)),
             "r": NS(stats=NS(dropped_queue=0, dropped_precedence=0))}
    grow = {"a": (1_000_000, 400_000, 3, 1, 2, 900), "b": (2_500_000, 0, 5, 2, 0, 2_000)}

    def run(until_us):
        for f in flows:
            s, (delivered, prof, retx, tos, forced, sent) = f.sender, grow[f.name]
            s.st.delivered_bytes += delivered
            s.retransmits, s.timeouts = s.retransmits + retx, s.timeouts + tos
            s.forced_segments, s.packets_sent = s.forced_segments + forced, s.packets_sent + sent
            if prof:
                meter.stats.in_profile_bytes_by_flow[f.index] = meter.stats.in_profile_bytes_by_flow.get(f.index, 0) + prof
        ports["p"].stats.dropped_queue += 4
        ports["q"].stats.dropped_precedence += 7
        ports["q"].stats.dropped_queue += 1
        ports["r"].stats.dropped_queue += 2           # as many of each: still drops
        ports["r"].stats.dropped_precedence += 2

    res = ns._measure(NS(run=run, ports=ports), flows, meter, 2_000_000, 10_000_000)
    assert res.seconds == 8.0
    a, b = res.flows
    assert (a.name, a.algo, b.name, b.algo) == ("a", "gtcp", "b", "newreno")
    assert a.goodput_mbps == 1_000_000 * 8 / 8 / 1e6
    assert a.frame_mbps == payload_to_frame(1_000_000 * 8 / 8, 1000) / 1e6
    assert a.in_profile_mbps == 400_000 * 8 / 8 / 1e6 and b.in_profile_mbps == 0.0
    assert (a.retransmits, a.timeouts, a.forced_segments, a.packets_sent) == (3, 1, 2, 900)
    assert (b.retransmits, b.timeouts, b.forced_segments, b.packets_sent) == (5, 2, 0, 2_000)
    assert b.goodput_mbps == 2.5
    assert res.drops == {"p": 8, "q": 16, "r": 8}
    res = ns._measure(NS(run=run, ports={}), flows, None, 0, 4_000_000)
    assert [f.in_profile_mbps for f in res.flows] == [0.0, 0.0] and res.drops == {}


def test_the_share_floor_lifts_the_long_flow_of_the_parking_lot_to_its_max_min_share() -> None:
    """OBP's min-AB rule beats the 3-bottleneck long flow down to a fraction of its
    max-min share (5 Mb/s of frames against greedy cross flows); with share_floor=0.9
    (the share-floor deviation) it gets at least 80 % of it, and no link drops a packet."""
    share_mbps = max_min_long_share_mbps(None)
    paper = parking_lot(seed=1, duration_s=20, warmup_s=8).by_name()["long"]
    floor = parking_lot(seed=1, duration_s=20, warmup_s=8, params=("share_floor=0.9",))
    assert paper.frame_mbps < 0.5 * share_mbps
    assert floor.by_name()["long"].frame_mbps >= 0.8 * share_mbps
    assert sum(f.retransmits for f in floor.flows) == 0
