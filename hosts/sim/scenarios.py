"""The GTCP and OBP topologies of the papers on the simulated network
(:mod:`hosts.sim.netsim`), shared by ``benchmarks/`` and the tests.

* :func:`gtcp_reservations` -- GTCP paper sec. IV-A (the scenario
  ``topologies/scenarios/gtcp-reservations.toml``): six flows from one host over a
  10 Mb/s, 20 ms bottleneck behind the edge switch, three with reservations of
  4, 2 and 1 Mb/s running GTCP, three best-effort flows (NewReno by default).
* :func:`parking_lot` -- OBP paper sec. IV-B scaled as
  ``topologies/scenarios/obp-parking-lot.toml``: a long flow over three 10 Mb/s,
  10 ms bottlenecks, one cross flow per bottleneck (5 ms access links).

Rates are reported in frame bits (what the switches meter and count: payload +
102 bytes per segment) and in payload bits (goodput), measured after a warm-up.
Without random loss the model is deterministic; the seed draws the flows' start
times (uniform in the first ``START_SPREAD_US``), so that seeds differ.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from hosts.cc import registry
from hosts.sim.netsim import NetFlow, NetworkSim, Port, payload_to_frame
from hosts.transport.sender import SenderConfig
from hosts.transport.source import PatternSource

MSS_BYTES = 1000                     # the papers' 1000-byte packets (bwn/emulation/runner.py)
GTCP_RESERVATIONS_MBIT = (4.0, 2.0, 1.0)
START_SPREAD_US = 500_000


@dataclass
class FlowResult:
    name: str
    algo: str
    frame_mbps: float          # delivered payload as the frames that carried it
    goodput_mbps: float        # payload
    in_profile_mbps: float     # frames the edge meter marked in profile (GTCP edge)
    retransmits: int
    timeouts: int
    forced_segments: int
    packets_sent: int = 0


@dataclass
class ScenarioResult:
    flows: List[FlowResult]
    seconds: float
    drops: Dict[str, int] = field(default_factory=dict)

    def by_name(self) -> Dict[str, FlowResult]:
        return {f.name: f for f in self.flows}


def _measure(net: NetworkSim, flows: List[NetFlow], meter_port: Optional[Port],
             warmup_us: int, duration_us: int) -> ScenarioResult:
    net.run(warmup_us)

    def snap(f: NetFlow) -> Tuple[int, int, int, int, int, int]:
        s = f.sender
        prof = meter_port.stats.in_profile_bytes_by_flow.get(f.index, 0) if meter_port else 0
        return (s.st.delivered_bytes, prof, s.retransmits, s.timeouts, s.forced_segments,
                s.packets_sent)

    before = {f.name: snap(f) for f in flows}
    net.run(duration_us)
    secs = (duration_us - warmup_us) / 1e6
    out = []
    for f in flows:
        now = snap(f)
        d = [a - b for a, b in zip(now, before[f.name])]
        goodput = d[0] * 8 / secs
        out.append(FlowResult(
            name=f.name, algo=f.sender.cc.name,
            frame_mbps=payload_to_frame(goodput, MSS_BYTES) / 1e6,
            goodput_mbps=goodput / 1e6, in_profile_mbps=d[1] * 8 / secs / 1e6,
            retransmits=d[2], timeouts=d[3], forced_segments=d[4], packets_sent=d[5]))
    drops = {name: p.stats.dropped_queue + p.stats.dropped_precedence
             for name, p in net.ports.items() if p.stats.dropped_queue + p.stats.dropped_precedence}
    return ScenarioResult(out, secs, drops)


def gtcp_reservations(*, seed: int = 1, duration_s: float = 60.0, warmup_s: float = 10.0,
                      sack: bool = True, gtcp_params: Sequence[str] = (),
                      best_effort: str = "newreno", af_threshold_packets: int = 30,
                      queue_packets: int = 60, burst_bytes: int = 15_000) -> ScenarioResult:
    """GTCP paper sec. IV-A on the AF edge model (one FIFO, drop precedence)."""
    net = NetworkSim(seed=seed)
    access = net.port("h1-s1", rate_bps=100e6, delay_us=1_000, bwn=False)
    bottleneck = net.port("s1-s2", rate_bps=10e6, delay_us=20_000, queue_packets=queue_packets,
                          af_threshold_packets=af_threshold_packets, bwn=False)
    egress = net.port("s2-h2", rate_bps=100e6, delay_us=1_000, bwn=False)
    back = [net.port("h2-s2", rate_bps=100e6, delay_us=1_000, bwn=False),
            net.port("s2-s1", rate_bps=10e6, delay_us=20_000, queue_packets=queue_packets, bwn=False),
            net.port("s1-h1", rate_bps=100e6, delay_us=1_000, bwn=False)]
    cfg = SenderConfig(mss_bytes=MSS_BYTES, sack=sack)
    rng = random.Random(seed)
    flows = []
    specs = [(f"g{int(r)}", r) for r in GTCP_RESERVATIONS_MBIT] + [(f"be{i}", 0.0) for i in (1, 2, 3)]
    for i, (name, res) in enumerate(specs):
        cc = (registry.create("gtcp", list(gtcp_params), res) if res
              else registry.create(best_effort))
        flows.append(net.add_flow(cc, PatternSource(None, MSS_BYTES), dst="h2", name=name,
                                  forward=[access, bottleneck, egress], reverse=back,
                                  reserved_bps=res * 1e6, burst_bytes=burst_bytes, config=cfg,
                                  start_us=rng.randrange(START_SPREAD_US)))
    return _measure(net, flows, bottleneck, int(warmup_s * 1e6), int(duration_s * 1e6))


def parking_lot(*, seed: int = 1, duration_s: float = 60.0, warmup_s: float = 20.0,
                algo: str = "obp", params: Sequence[str] = (), sack: bool = True,
                bottlenecks: int = 3, cross_app_rate_bps: Optional[float] = None,
                loss: float = 0.0, queue_packets: int = 100, ab_period_us: int = 10_000,
                long_sees_only_link: Optional[int] = None) -> ScenarioResult:
    """A long flow over ``bottlenecks`` 10 Mb/s links, one cross flow per link.

    ``cross_app_rate_bps`` makes the cross flows application limited (payload
    rate); ``loss`` is random loss on each bottleneck (losses no feedback sees).
    ``long_sees_only_link`` (an experiment, not a network): only that bottleneck
    (1-based) stamps the long flow's packets, so it sees one link's AB instead of
    the path's minimum."""
    net = NetworkSim(seed=seed)

    def port(name: str, rate: float, delay: int, queue: int = 1000, p: float = 0.0,
             only: Optional[set] = None) -> Port:
        """The output port ``name`` (a host's link carries its data and the ACKs it sends)."""
        if name in net.ports:
            return net.ports[name]
        return net.port(name, rate_bps=rate, delay_us=delay, queue_packets=queue, loss=p,
                        ab_period_us=ab_period_us, stamp_only=only)

    def only(i: int) -> Optional[set]:
        if long_sees_only_link is None:
            return None
        return {f"cross{i + 1}", "long"} if i + 1 == long_sees_only_link else {f"cross{i + 1}"}

    links = [port(f"b{i + 1}", 10e6, 10_000, queue_packets, loss, only(i))
             for i in range(bottlenecks)]
    links_back = [port(f"b{i + 1}-back", 10e6, 10_000, queue_packets) for i in range(bottlenecks)]
    cfg = SenderConfig(mss_bytes=MSS_BYTES, sack=sack)
    rng = random.Random(seed)
    flows = [net.add_flow(registry.create(algo, list(params)), PatternSource(None, MSS_BYTES),
                          dst="h9", name="long", start_us=rng.randrange(START_SPREAD_US),
                          forward=[port("h0-s1", 100e6, 1_000)] + links + [port("s-h9", 100e6, 1_000)],
                          reverse=([port("h9-s", 100e6, 1_000)] + links_back[::-1]
                                   + [port("s1-h0", 100e6, 1_000)]),
                          config=cfg)]
    xcfg = SenderConfig(mss_bytes=MSS_BYTES, sack=sack, app_rate_bps=cross_app_rate_bps)
    for i in range(bottlenecks):
        flows.append(net.add_flow(
            registry.create(algo, list(params)), PatternSource(None, MSS_BYTES),
            dst=f"x{i + 2}", name=f"cross{i + 1}",
            forward=[port(f"x{i + 1}-s{i + 1}", 100e6, 5_000), links[i],
                     port(f"s{i + 2}-x{i + 2}", 100e6, 5_000)],
            reverse=[port(f"x{i + 2}-s{i + 2}", 100e6, 5_000), links_back[i],
                     port(f"s{i + 1}-x{i + 1}", 100e6, 5_000)],
            config=xcfg, start_us=rng.randrange(START_SPREAD_US)))
    return _measure(net, flows, None, int(warmup_s * 1e6), int(duration_s * 1e6))


def hidden_bottleneck(*, seed: int = 1, duration_s: float = 40.0, warmup_s: float = 10.0,
                      params: Sequence[str] = (), sack: bool = True) -> ScenarioResult:
    """One OBP flow through a BWN port of 10 Mb/s, then a 5 Mb/s port without BWN
    (50 packets of queue): a bottleneck the feedback does not see, whose drops are
    OBP's "losses the feedback does not explain" (hosts/cc/obp.py)."""
    net = NetworkSim(seed=seed)
    seen = net.port("bwn-10M", rate_bps=10e6, delay_us=10_000, queue_packets=100)
    hidden = net.port("plain-5M", rate_bps=5e6, delay_us=1_000, queue_packets=50, bwn=False)
    back = net.port("back", rate_bps=10e6, delay_us=11_000, bwn=False)
    flow = net.add_flow(registry.create("obp", list(params)), PatternSource(None, MSS_BYTES),
                        dst="d", name="obp", forward=[seen, hidden], reverse=[back],
                        config=SenderConfig(mss_bytes=MSS_BYTES, sack=sack),
                        start_us=random.Random(seed).randrange(START_SPREAD_US))
    return _measure(net, [flow], None, int(warmup_s * 1e6), int(duration_s * 1e6))


def max_min_long_share_mbps(cross_app_rate_bps: Optional[float], link_mbps: float = 10.0) -> float:
    """The long flow's max-min fair share in frame bits (every link alike)."""
    if cross_app_rate_bps is None:
        return link_mbps / 2
    cross = payload_to_frame(cross_app_rate_bps, MSS_BYTES) / 1e6
    return max(link_mbps - cross, link_mbps / 2)
