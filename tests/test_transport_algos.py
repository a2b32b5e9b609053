"""Every registered algorithm drives the real transport (simulated channel with a
BWN switch stamping DATA packets): the stream must arrive intact, and
``bwn-send --algo NAME`` must be able to build it from the registry."""
from __future__ import annotations

import typing

import pytest

from hosts.cc import registry
from hosts.transport.sender import SenderConfig, SenderState
from hosts.sim.channel import LinkModel, Simulation, stamp_constant
from hosts.transport.source import PatternSource, pattern_bytes
from bwn.protocol.wire import ebn_encode_kbps


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


@pytest.mark.parametrize("text, tp, value", [
    ("None", typing.Optional[float], None), ("NULL", typing.Optional[float], None),
    ("2.5", typing.Optional[float], 2.5), ("7", typing.Union[int, float], 7),
    ("2.5", typing.Union[int, float], 2.5),                # int refuses, float takes it
    ("0x10", int, 16), ("12", int, 12), ("3.0", int, 3), ("-4", int, -4),
    ("Off", bool, False), ("YES", bool, True), ("b", typing.Literal["a", "b"], "b"),
    ("anything", str, "anything"),
    ("3", typing.Union[None, int], 3),                      # None first: the others still tried
])
def test_param_values_convert_to_the_parameters_type(text, tp, value):
    got = registry._convert(text, tp, "k")
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize("text, tp, message", [
    ("x", typing.Optional[float], "--param k needs a number, got 'x'"),
    ("nan", float, "--param k must not be NaN"),
    ("3.5", int, "--param k needs an integer, got '3.5'"),
    ("nan", int, "--param k needs an integer, got 'nan'"),
    ("none", int, "--param k needs an integer, got 'none'"),            # None only where allowed
    ("maybe", typing.Union[int, bool], "--param k needs an integer, got 'maybe'"),   # the first reason
    ("c", typing.Literal["a", "b"], "--param k must be one of a, b, got 'c'"),
    ("2", bool, "--param k needs a boolean (true/false), got '2'"),
])
def test_a_param_value_of_the_wrong_type_says_what_it_needs(text, tp, message):
    with pytest.raises(registry.RegistryError) as err:
        registry._convert(text, tp, "k")
    assert str(err.value) == message


@pytest.mark.parametrize("name, kw, message", [
    ("sarbe", dict(beta=1.0), "beta must be in [0, 1), got 1.0"),
    ("sarbe", dict(beta=-0.1), "beta must be in [0, 1), got -0.1"),
    ("sarbe", dict(n=-1), "n must be >= 0, got -1"),
    ("westwood", dict(beta=1.0), "beta must be in [0, 1), got 1.0"),
    ("westwood", dict(variant="westwood++"), "westwood variant must be one of ('westwood', 'westwood+'), got 'westwood++'"),
    ("dft", dict(alpha=1.0), "alpha must be in [0, 1), got 1.0"),
    ("dft", dict(t0_us=0), "t0_us must be > 0, got 0"),
    ("dft", dict(variant="rx"), "dft variant must be one of ('sent', 'ack'), got 'rx'"),
])
def test_each_estimators_parameters_outside_their_range_say_so(name, kw, message):
    with pytest.raises(ValueError) as err:
        registry.load(name)(**kw)
    assert str(err.value) == message


@pytest.mark.parametrize("name, kw", [
    ("sarbe", dict(beta=0.0, n=0)), ("westwood", dict(beta=0.0)), ("dft", dict(alpha=0.0, t0_us=1)),
])
def test_each_estimators_parameters_at_the_ends_of_their_range_are_taken(name, kw):
    cc = registry.load(name)(**kw)
    assert all(getattr(cc, k) == v for k, v in kw.items())


@pytest.mark.parametrize("name", registry.ALGORITHMS)
def test_every_algorithm_starts_without_an_estimate_or_a_pacing_rate(name: str) -> None:
    """A flow log's first rows, before any ACK: no algorithm claims an estimate of
    the bandwidth or a pacing rate it has not measured (null in the log, not 0 or
    an empty string). The one rate known before any ACK is a constant-rate
    source's own, which it was given, not measured."""
    from hosts.cc.base import CcState
    cls = registry.load(name)
    cc = cls(**registry.parse_params(cls, [], 2.0 if name == "gtcp" else None))
    st = CcState(mss_bytes=1000)
    cc.on_init(st)
    assert st.estimate_bps is None
    assert st.pacing_rate_bps == (1e6 if name == "cbr" else None)


def test_a_parameter_without_annotation_or_default_is_described_as_a_string():
    """An algorithm written without type hints still gets its parameters listed
    (`bwn-send --list-algos`): the type shown is that of its default, or str."""
    from hosts.cc.newreno import NewReno

    class Untyped(NewReno):
        def __init__(self, label, scale=1.5):     # no annotations on purpose
            self.label, self.scale = label, scale

    specs = {p.name: p for p in registry.param_specs(Untyped)}
    assert (specs["label"].type_name, specs["label"].required) == ("str", True)
    assert (specs["scale"].type_name, specs["scale"].default, specs["scale"].required) == ("float", 1.5, False)
