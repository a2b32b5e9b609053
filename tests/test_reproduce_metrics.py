"""The metrics of one run that `bwn reproduce` judges claims on (bwn/analysis/metrics.py,
docs/reproduce.md "Metrics"), on hand-made runs whose answers are known: windows,
convergence, per-epoch fairness, estimates against the fair share, links."""
from __future__ import annotations

import math

import pytest

from bwn.analysis import metrics as mt
from bwn.analysis.report.load import CapacitySample, FlowLog, SchemeRun, TelemetrySample
from bwn.analysis.report.rates import jain_index
from bwn.analysis import stats

PAYLOAD = 1000 / 1102            # the report's payload per frame


def flow(name: str, rates: list[tuple[float, float, float]], start_s: float = 0.0, end_s: float = 20.0,
         algo: str = "newreno", estimate=None, step_s: float = 0.1) -> FlowLog:
    """A flow whose goodput is ``rate`` b/s over each (t0, t1, rate) of experiment time,
    logged every ``step_s``; ``estimate(t)`` gives its logged estimate, if any."""
    samples, delivered = [], 0.0
    for k in range(round((end_s - start_s) / step_s) + 1):
        t = round(start_s + k * step_s, 9)
        row = {"t_s": round(t - start_s, 9), "delivered_bytes": delivered}
        if estimate is not None:
            row["estimate_bps"] = estimate(t)
        samples.append(row)
        rate = next((r for a, b, r in rates if a <= t < b), 0.0)
        delivered += rate * step_s / 8
    return FlowLog(name, samples, {"duration_s": end_s - start_s}, start_s, algo)


def run_of(flows, capacity=((0.0, 8.0e6 / PAYLOAD),), telemetry=()) -> SchemeRun:
    return SchemeRun("x", list(flows), list(telemetry),
                            [CapacitySample(t, "bottleneck", r) for t, r in capacity])


def value(name, run, rows=None, fidelity=None, params=None):
    return mt.metric_value(name, run, rows or [], fidelity or {}, None, params)


# -- windows and bins ---------------------------------------------------------------------

def test_goodput_in_a_window_counts_the_bytes_acknowledged_in_it():
    f = flow("a", [(0, 5, 2e6), (5, 20, 6e6)])
    run = run_of([f])
    assert value("goodput_bps:a@0-5", run) == pytest.approx(2e6, rel=0.03)
    assert value("goodput_bps:a@10-20", run) == pytest.approx(6e6, rel=0.01)
    assert value("goodput_bps:a@0-5,10-20", run) == pytest.approx(4e6, rel=0.02)      # windows averaged
    late = flow("b", [(3, 20, 4e6)], start_s=3.0)
    # a window is clipped to the flow's life: [0, 5] of a flow that starts at 3 is [3, 5]
    assert value("goodput_bps:b@0-5", run_of([late])) == pytest.approx(4e6, rel=0.06)


def test_goodput_cv_and_floor_fraction_read_one_second_bins():
    steady = flow("a", [(0, 20, 4e6)])
    wobbly = flow("a", [(t, t + 1, 3e6 if t % 2 else 5e6) for t in range(20)])
    assert value("goodput_cv:a@2-20", run_of([steady])) == pytest.approx(0.0, abs=0.02)
    cv = value("goodput_cv:a@2-20", run_of([wobbly]))
    assert 0.2 < cv < 0.3                                        # bins of 3 and 5 Mb/s around 4
    assert value("floor_fraction:a=4.5e6@2-20", run_of([wobbly])) == pytest.approx(0.5, abs=0.06)
    assert value("floor_fraction:a=level@2-20", run_of([wobbly]), params={"level": 2.5e6}) == 1.0
    with pytest.raises(mt.MetricError, match="neither a number nor a numeric case parameter"):
        value("floor_fraction:a=nope@2-20", run_of([wobbly]), params={"level": 1.0})


# -- arrivals: convergence and fairness per epoch -----------------------------------------

def two_arrivals(second_rate: float = 4e6):
    """f1 alone from 0 (at its 8 Mb/s share from 2 s), f2 arrives at 10: f1 falls to its
    4 Mb/s share at 12, f2 reaches ``second_rate`` at 14."""
    f1 = flow("f1", [(2, 12, 8e6), (12, 20, 4e6)])
    f2 = flow("f2", [(14, 20, second_rate)], start_s=10.0)
    return run_of([f1, f2])


def test_convergence_time_is_the_slowest_epochs_settling():
    run = two_arrivals()
    # epoch 1 settles when f1's last 1 s is all at its share (t = 3): 3 s; epoch 2 when
    # f2's last 1 s is (t = 15): 5 s after the arrival at 10
    assert value("convergence_time_s:all=0.2", run) == pytest.approx(5.0, abs=0.3)
    assert value("convergence_time_s:f1=0.1", run_of([flow("f1", [(2, 20, 8e6)])])) == pytest.approx(3.0, abs=0.3)
    # a flow that never reaches its share counts the whole epoch
    never = two_arrivals(second_rate=1e6)
    assert value("convergence_time_s:all=0.2", never) == pytest.approx(10.0, abs=0.01)


def test_epoch_jain_is_the_lowest_over_the_epochs_with_two_flows():
    assert value("epoch_jain", two_arrivals()) == pytest.approx(1.0, abs=0.01)
    # second half of epoch 2 (15-20 s): 4 and 2 Mb/s -> (6)^2 / (2 * 20) = 0.9
    assert value("epoch_jain", two_arrivals(second_rate=2e6)) == pytest.approx(0.9, abs=0.01)
    assert value("epoch_jain", run_of([flow("f1", [(0, 20, 8e6)])])) is None      # never two flows


def test_jain_of_a_prefix_and_of_shares():
    flows = [flow(n, [(0, 20, r)]) for n, r in (("f1", 4e6), ("f2", 4e6), ("r1", 1e6))]
    for f in flows:
        f.summary["goodput_bps"] = f.bytes * 8 / 20
    run = run_of(flows, capacity=((0.0, 9.0e6 / PAYLOAD),))
    assert value("jain:f*", run) == pytest.approx(1.0, abs=1e-6)                 # the forward flows alone
    assert value("jain", run, rows=[{"flow": "all", "jain": 0.5}]) == 0.5          # the run's own index
    rows = [{"flow": f.name, "goodput_bps": f.summary["goodput_bps"]} for f in flows]
    # every flow's fair share is 3 Mb/s: 4/3, 4/3, 1/3
    expected = jain_index([4 / 3, 4 / 3, 1 / 3])
    assert value("jain_share", run, rows) == pytest.approx(expected, rel=0.02)
    assert value("share_fraction:f*", run, rows) == pytest.approx(4 / 3, rel=0.02)


# -- estimates against the fair share -------------------------------------------------------

def estimating(estimate, capacity=((0.0, 8.0e6 / PAYLOAD), (10.0, 4.0e6 / PAYLOAD))):
    return run_of([flow("w", [(0, 20, 3e6)], algo="westwood", estimate=estimate)], capacity)


def test_estimate_bias_mean_and_cv_in_windows():
    run = estimating(lambda t: 8.4e6 if t < 10 else 4.2e6)       # 5 % above the share throughout
    assert value("estimate_bias:w@1-9", run) == pytest.approx(0.05, abs=1e-6)
    assert value("estimate_bias:w@11-19", run) == pytest.approx(0.05, abs=1e-6)
    assert value("estimate_error:w@1-19", run) == pytest.approx(0.05, abs=1e-6)
    assert value("estimate_bps:mean@1-9", run) == pytest.approx(8.4e6)
    low = run_of([flow("a", [(0, 20, 3e6)], algo="westwood", estimate=lambda t: 2e6),
                  flow("b", [(0, 20, 3e6)], algo="westwood", estimate=lambda t: 6e6)])
    assert value("estimate_bps:min@1-9", low) == pytest.approx(2e6)
    assert value("estimate_bps:mean@1-9", low) == pytest.approx(4e6)
    # alternate rows at 7.6 and 8.4 Mb/s: std / mean = 0.4 / 8.0 (n - 1 in the std)
    wobbly = estimating(lambda t: 8.4e6 if round(t * 10) % 2 else 7.6e6)
    assert value("estimate_cv:w@1-9", wobbly) == pytest.approx(0.05, rel=0.05)
    assert value("estimate_bias:w@1-9", wobbly) == pytest.approx(0.0, abs=0.01)


def test_settling_time_after_a_change_in_the_share():
    # the share halves at 10 s; the estimate follows at 13 s: settled 3 s after the change
    run = estimating(lambda t: 8.2e6 if t < 13 else 4.1e6)
    assert value("estimate_settling_s:w=2@10", run) == pytest.approx(3.0, abs=0.15)
    # never within 10 %: the time to the flow's end counts
    stuck = estimating(lambda t: 8.2e6)
    assert value("estimate_settling_s:w=2@10", stuck) == pytest.approx(10.0, abs=0.01)
    # a passage through the band shorter than the hold is not settling
    passing = estimating(lambda t: 4.1e6 if 11 <= t < 11.5 or t >= 13 else 8.2e6)
    assert value("estimate_settling_s:w=2@10", passing) == pytest.approx(3.0, abs=0.15)
    # two changes are averaged: at 0 (settled at once) and at 10 (3 s)
    assert value("estimate_settling_s:w=2@0,10", run) == pytest.approx(1.5, abs=0.1)


# -- links --------------------------------------------------------------------------------

FIDELITY = {"measurements": {
    "queues": {"s1:2": {"mean_fraction": 0.30}, "s2:1": {"mean_fraction": 0.10},
               "s2:2": {"mean_fraction": 0.05}, "s3:1": {"mean_fraction": 0.01}},
    "ports": {"s1:2": {"link": "b1", "utilization": 0.97}, "s2:1": {"link": "b1", "utilization": 0.55},
              "s2:2": {"link": "b2", "utilization": 0.91}, "s3:1": {"link": "b2", "utilization": 0.41}}}}


def test_queue_and_utilization_of_named_links_busier_port_or_both_directions():
    run = run_of([])
    assert value("queue_fraction", run, fidelity=FIDELITY) == 0.30                  # the busiest port
    assert value("queue_fraction:b1", run, fidelity=FIDELITY) == 0.30
    assert value("queue_fraction:b1,b2/both", run, fidelity=FIDELITY) == pytest.approx((0.2 + 0.03) / 2)
    assert value("link_utilization:b1,b2", run, fidelity=FIDELITY) == pytest.approx(0.94)
    assert value("link_utilization:b1,b2/both", run, fidelity=FIDELITY) == pytest.approx((0.76 + 0.66) / 2)
    assert value("link_utilization:b3", run, fidelity=FIDELITY) is None
    with pytest.raises(mt.MetricError, match="/both"):
        value("queue_fraction:b1/each", run, fidelity=FIDELITY)


def test_utilization_in_a_window_is_the_switchs_rate_over_the_links_over_its_telemetry():
    telemetry = [TelemetrySample(t / 2, "s1", 2, 10000.0, 5000.0 if t < 20 else 9500.0, None, None, None)
                 for t in range(60)]
    run = run_of([], telemetry=telemetry)
    assert value("link_utilization:b1@10-29", run, fidelity=FIDELITY) == pytest.approx(0.95)
    assert value("link_utilization:b1@0-9", run, fidelity=FIDELITY) == pytest.approx(0.5)


def test_targets_from_a_number_or_a_case_parameter():
    flows = [flow(n, [(0, 20, 1e6)]) for n in ("r1", "r2")]
    rows = [{"flow": "r1", "goodput_bps": 1.2e6}, {"flow": "r2", "goodput_bps": 0.8e6},
            {"flow": "all", "goodput_bps": 2.0e6}]
    run = run_of(flows)
    assert value("target_ratio:r*=t_bps", run, rows, params={"t_bps": 1e6}) == pytest.approx(1.0)
    assert value("target_error:r*=t_bps", run, rows, params={"t_bps": 1e6}) == pytest.approx(0.2)
    assert value("target_error:r1=1.5e6", run, rows) == pytest.approx(0.2)
    assert value("target_diff:r*=be", run, rows, params={"be": 0.0}) == pytest.approx(1.0e6)
    assert value("target_ratio:r1=zero", run, rows, params={"zero": 0}) is None       # undefined against 0


@pytest.mark.parametrize("name, message", [
    ("nosuch:a", "unknown metric kind"),
    ("retransmissions:all@0-10", "takes no window"),
    ("goodput_cv:a", "give the window"),
    ("goodput_bps:a@10-5", "0 <= T0 < T1"),
    ("estimate_settling_s:a@10,20", "neither a number"),
    ("estimate_settling_s:a=5@20,10", "instants must increase"),
    ("target_error:g4", "needs =VALUE"),
    ("algo_ratio:dft", "A/B"),
])
def test_a_metric_name_that_cannot_be_computed_is_refused_before_any_run(name, message):
    with pytest.raises(mt.MetricError, match=message):
        mt.check(name)


def test_each_metric_kind_has_the_support_of_what_it_counts():
    assert mt.support_of("drops:b1") is stats.Support.COUNT
    for name in ("epoch_jain", "jain_share", "jain:f*", "floor_fraction:a=1@0-9", "link_utilization:b1@10-20"):
        assert mt.support_of(name) is stats.Support.FRACTION, name
    for name in ("convergence_time_s:all=0.2", "estimate_bias:mean", "goodput_cv:a@1-2", "target_diff:a=1"):
        assert mt.support_of(name) is stats.Support.REAL, name
    assert all(mt.check(f"{k}:x=1@0-1") is None for k in ("floor_fraction",))
    assert math.isnan(mt._level("t_bps", {}, "check"))        # a parameter name, resolved per case


# -- drops at links' ports ------------------------------------------------------------------

def test_drops_sum_every_port_of_the_named_links():
    fidelity = {"measurements": {"port_drops": {
        "s1:2": {"link": "b1", "tail": 3, "red": 4, "af": 0, "drops": 7, "marked": 20},
        "s2:1": {"link": "b1", "tail": 0, "red": 0, "af": 1, "drops": 1, "marked": 0},
        "s2:3": {"link": "b2", "tail": 0, "red": 0, "af": 0, "drops": 0, "marked": 5},
        "s1:1": {"link": "access", "tail": 9, "red": 0, "af": 0, "drops": 9, "marked": 0}}}}
    run = run_of([flow("a", [(0, 20, 1e6)])])
    assert value("drops:b1", run, fidelity=fidelity) == 8.0            # both directions' ports
    assert value("drops:b2", run, fidelity=fidelity) == 0.0
    assert value("drops:b1,b2", run, fidelity=fidelity) == 8.0
    assert value("drops:b1,nowhere", run, fidelity=fidelity) is None   # a link not counted
    assert value("drops:b1", run, fidelity={}) is None                  # a run without the counts
    assert mt.support_of("drops:b1") == stats.Support.COUNT
    with pytest.raises(mt.MetricError, match="drops names its links"):
        mt.check("drops")
