"""The seven algorithms behind the real transport, over the deterministic simulated link.

Not a check of the papers' formulas (the other test_cc_*.py files do that by hand) but of
the wiring: every algorithm is built by the registry from --param strings, survives
loss, duplicate ACKs, recovery and timeouts through the transport's callbacks, and
delivers the stream intact; OBP, fed by a switch model that computes AB = IC - BR - BI
(OBP eq. 6), fills the link without a drop.
"""
import pytest

from bwn.protocol.wire import BWN_HEADER_LEN, BwnHeader, ebn_encode_kbps

transport_sim = pytest.importorskip("hosts.sim.channel")
registry = pytest.importorskip("hosts.cc.registry")
from hosts.transport.source import BytesSource, PatternSource  # noqa: E402
from hosts.transport.wire import DATA_VK  # noqa: E402

LinkModel, Simulation = transport_sim.LinkModel, transport_sim.Simulation
DATA = bytes((i * 7 + 3) % 256 for i in range(400_000))

CASES = [
    ("vegas", ()), ("westwood", ()), ("westwood", ("variant=westwood+",)),
    ("ebn", ()), ("ebn", ("variant=relative",)), ("obp", ()), ("dft", ()),
    ("dft", ("variant=ack",)), ("gtcp", ("rate_g_bps=2e6",)), ("gtcp", ()), ("sarbe", ()),
]


class FairShareSwitch:
    """A one-port BWN switch model on the simulated bottleneck: EBN code of C/N, narrow = C,
    tight = AB = C - BR - BI over 10 ms periods (OBP eq. 6)."""

    def __init__(self, rate_bps, period_us=10_000):
        self.rate = rate_bps
        self.period = period_us
        self.sim = None
        self.start = 0
        self.bytes = 0
        self.backlog_bits = 0.0
        self.ab = rate_bps
        self.flows, self.n = set(), 1

    def __call__(self, pkt, now_us):
        if pkt[0] != DATA_VK:
            return pkt
        queue = sum(1 for t in self.sim.forward._departures if t > now_us)
        if now_us - self.start >= self.period:
            dt = (now_us - self.start) / 1e6
            self.ab = self.rate - self.bytes * 8 / dt - self.backlog_bits / dt
            self.backlog_bits = queue * (len(pkt) + 42) * 8
            self.start, self.bytes = now_us, 0
            self.n, self.flows = max(len(self.flows), 1), set()
        self.bytes += len(pkt) + 42
        self.flows.add(bytes(pkt[28:32]))                 # transport flow_id
        hdr = BwnHeader.unpack(pkt).stamped(
            ebn_code=ebn_encode_kbps(self.rate / 1000 / self.n),
            narrow_kbps=int(self.rate / 1000), tight_kbps=int(self.ab / 1000))
        return hdr.pack() + pkt[BWN_HEADER_LEN:]


@pytest.mark.parametrize("name,params", CASES, ids=lambda v: v if isinstance(v, str) else ",".join(v))
def test_transfer_survives_loss(name, params):
    switch = FairShareSwitch(5e6)
    sim = Simulation(LinkModel(delay_us=15_000, rate_bps=5e6, queue_packets=30, loss=0.01),
                     LinkModel(delay_us=15_000, loss=0.005), seed=7, stamp=switch)
    switch.sim = sim
    sender = sim.add_flow(registry.create(name, list(params)), BytesSource(DATA))
    sim.run(until_us=120_000_000)
    assert sender.summary(sim.now_us)["status"] == "complete"
    assert sim.sink_of(sender).data == DATA
    assert sender.retransmits > 0


@pytest.mark.parametrize("name", ["westwood", "dft", "sarbe"])
def test_estimators_track_the_bottleneck(name):
    sim = Simulation(LinkModel(delay_us=20_000, rate_bps=4e6, queue_packets=40),
                     LinkModel(delay_us=20_000), seed=2)
    sender = sim.add_flow(registry.create(name), PatternSource(None, 1500))
    sim.run(until_us=20_000_000)
    # one flow alone: the used bandwidth is about the bottleneck rate (payload bits)
    assert 2.5e6 < sender.st.estimate_bps < 4.5e6


def test_obp_fills_the_link_without_drops():
    rate = 10e6
    switch = FairShareSwitch(rate)
    sim = Simulation(LinkModel(delay_us=20_000, rate_bps=rate, queue_packets=50),
                     LinkModel(delay_us=20_000), seed=1, stamp=switch)
    switch.sim = sim
    flows = [sim.add_flow(registry.create("obp"), PatternSource(None, 1500), flow_id=i + 1)
             for i in range(3)]
    sim.run(until_us=10_000_000)
    assert sim.forward.stats.dropped_queue == 0
    total = sum(s.st.delivered_bytes for s in flows) * 8 / 10.0
    assert total > 0.8 * rate
    shares = [s.st.delivered_bytes for s in flows]
    assert min(shares) > 0.6 * max(shares)               # the fairness factor at work
    assert all(s.st.pacing_rate_bps for s in flows)


def test_gtcp_reservation_keeps_its_rate_under_loss():
    def goodput(params):
        sim = Simulation(LinkModel(delay_us=20_000, rate_bps=10e6, queue_packets=60, loss=0.01),
                         LinkModel(delay_us=20_000), seed=5)
        s = sim.add_flow(registry.create("gtcp", params), PatternSource(None, 1500))
        sim.run(until_us=20_000_000)
        return s.st.delivered_bytes * 8 / 20.0
    plain = goodput([])
    reserved = goodput(["rate_g_bps=4e6"])
    assert reserved > 4e6 * 0.9
    assert reserved > plain
