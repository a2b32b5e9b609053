"""Every registered algorithm drives the real transport (simulated channel with a
BWN switch stamping DATA packets): the stream must arrive intact, and
``bwn-send --algo NAME`` must be able to build it from the registry."""
from __future__ import annotations

import pytest

from bwn.hosts.cc import registry
from bwn.hosts.transport_sender import SenderConfig, SenderState
from bwn.hosts.transport_sim import LinkModel, Simulation, stamp_constant
from bwn.hosts.transport_source import PatternSource, pattern_bytes
from bwn.wire import ebn_encode_kbps


@pytest.mark.parametrize("name", registry.ALGORITHMS)
@pytest.mark.parametrize("seed", [1, 2])
def test_algorithm_runs_on_the_transport(name: str, seed: int) -> None:
    try:
        cls = registry.load(name)
    except registry.RegistryError as exc:
        pytest.skip(str(exc))
    kwargs = registry.parse_params(cls, [], 2.0 if name == "gtcp" else None)
    rate_bps = 8e6
    stamp = stamp_constant(ebn_code=ebn_encode_kbps(rate_bps / 1e3), narrow_kbps=int(rate_bps / 1e3),
                           tight_kbps=int(rate_bps / 2e3))
    fwd = LinkModel(delay_us=10_000, rate_bps=rate_bps, queue_packets=40, loss=0.01,
                    reorder=0.01, duplicate=0.01)
    sim = Simulation(fwd, LinkModel(delay_us=10_000, loss=0.01), seed=seed, stamp=stamp)
    nbytes = 400_000
    s = sim.add_flow(cls(**kwargs), PatternSource(nbytes, 1000),
                     config=SenderConfig(mss_bytes=1000))
    sim.run(until_us=120_000_000)
    assert s.state is SenderState.DONE, s.summary(sim.now_us)
    assert bytes(sim.sink_of(s).data) == pattern_bytes(0, nbytes)
    assert s.summary(sim.now_us)["goodput_bps"] > 0.2e6
