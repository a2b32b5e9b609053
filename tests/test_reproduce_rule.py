"""The decision rule of `bwn reproduce`, fixed before the runs (bwn/analysis/stats.py,
docs/reproduce.md): intervals that fit their quantity, a margin that applies on
both sides, bands around the paper's numbers, trends over ordered cases."""
from __future__ import annotations

import math

import pytest

from bwn.analysis import stats

E = stats.Estimate
Y, N, U, X = stats.YES, stats.NO, stats.UNCLEAR, stats.NONE


# -- intervals ----------------------------------------------------------------------------

def test_student_t_interval_of_three_values():
    est = stats.mean_interval([1.0, 2.0, 3.0])
    # mean 2, s = 1, t(0.975, 2) = 4.302653: half-width 4.302653 / sqrt(3) = 2.48414
    assert est.n == 3 and est.mean == pytest.approx(2.0)
    assert (est.low, est.high) == (pytest.approx(2.0 - 2.48414, abs=1e-4), pytest.approx(2.0 + 2.48414, abs=1e-4))


def test_interval_of_five_values_uses_n_minus_1():
    values = [10.0, 12.0, 9.0, 11.0, 13.0]
    est = stats.mean_interval(values)
    s = math.sqrt(sum((v - 11.0) ** 2 for v in values) / 4)
    half = 2.776445 * s / math.sqrt(5)                            # t(0.975, 4)
    assert (est.low, est.high) == (pytest.approx(11.0 - half), pytest.approx(11.0 + half))


def test_interval_edge_cases():
    assert stats.mean_interval([]).mean is None
    one = stats.mean_interval([4.0])
    assert (one.n, one.mean, one.low, one.high) == (1, 4.0, None, None)
    same = stats.mean_interval([2.0, 2.0, 2.0])
    assert (same.low, same.high) == (2.0, 2.0)
    assert stats.mean_interval([1.0, float("nan"), 3.0]).n == 2     # non-finite values are not data


@pytest.mark.parametrize("counts", [[0, 0, 1, 0, 3], [0, 0, 0, 0, 1], [1, 0, 0, 0, 0, 0, 0, 9],
                                    [1980, 1500, 2400, 1700, 2100], [2, 2, 2, 2, 2]])
def test_a_count_interval_never_goes_below_zero(counts):
    est = stats.mean_interval(counts, stats.Support.COUNT)
    assert est.low is not None and est.low >= 0.0
    assert est.low <= est.mean <= est.high
    assert stats.mean_interval(counts).low < 0 or min(counts) > 0     # Student-t would, for the sparse ones


def test_a_count_interval_widens_with_the_seeds_dispersion():
    """Quasi-Poisson: seeds that vary more than Poisson counts widen the interval."""
    calm = stats.mean_interval([100, 102, 98, 101, 99], stats.Support.COUNT)
    wild = stats.mean_interval([20, 180, 60, 140, 100], stats.Support.COUNT)
    assert calm.mean == wild.mean == 100
    assert (wild.high - wild.low) > 3 * (calm.high - calm.low)
    # Within Poisson's own spread the interval is Poisson's: exp(± t sqrt(1/S)).
    t4 = 2.776445
    assert calm.high == pytest.approx(100 * math.exp(t4 * math.sqrt(1 / 500)), rel=1e-4)


def test_all_zero_counts_have_the_exact_poisson_upper_bound():
    est = stats.mean_interval([0, 0, 0, 0, 0], stats.Support.COUNT)
    assert (est.mean, est.low) == (0.0, 0.0)
    assert est.high == pytest.approx(7.3778 / 2 / 5, rel=1e-4)      # chi2(0.975, 2) / 2n
    with pytest.raises(ValueError, match="a count below 0"):
        stats.count_interval([1, -1, 2])


def test_a_fraction_interval_stays_within_zero_and_one():
    near_one = stats.mean_interval([0.99, 0.995, 1.0, 0.999, 0.98], stats.Support.FRACTION)
    assert near_one.high == 1.0 and near_one.low < near_one.mean
    plain = stats.mean_interval([0.99, 0.995, 1.0, 0.999, 0.98])
    assert plain.high > 1.0 and near_one.low == pytest.approx(plain.low)
    near_zero = stats.mean_interval([0.0, 0.01, 0.0, 0.02, 0.0], stats.Support.FRACTION)
    assert near_zero.low == 0.0


# -- outcomes -------------------------------------------------------------------------------

def test_better_needs_the_whole_interval_above_the_margin():
    m = 0.05
    assert stats.outcome_better(E(5, 0.10, 0.06, 0.14), m) == Y
    assert stats.outcome_better(E(5, 0.06, 0.03, 0.09), m) == U        # straddles +m
    assert stats.outcome_better(E(5, 0.003, 0.001, 0.005), m) == N     # a gain inside the margin is no gain
    assert stats.outcome_better(E(5, 0.0, -0.02, 0.02), m) == N        # a tie
    assert stats.outcome_better(E(5, -0.1, -0.14, -0.06), m) == N      # a loss
    assert stats.outcome_better(E(5, 0.04, 0.03, 0.05), m) == N        # touching the margin is not above it
    assert stats.outcome_better(E(0, None, None, None), m) == X
    with pytest.raises(ValueError):
        stats.outcome_better(E(5, 0.1, 0.0, 0.2), -0.01)


def test_a_one_sided_gain_inside_the_margin_is_not_better():
    """+0.3 % [+0.1 %, +0.5 %] is significant but not a difference worth the name."""
    assert stats.outcome_better(E(8, 0.003, 0.001, 0.005), 0.05) == N
    assert stats.outcome_better(E(8, 0.003, 0.001, 0.005), 0.0) == Y    # only with no margin at all


def test_equal_and_near_need_the_whole_interval_inside_the_band():
    assert stats.outcome_within(E(5, 0.01, -0.02, 0.03), -0.05, 0.05) == Y
    assert stats.outcome_within(E(5, 0.04, 0.01, 0.07), -0.05, 0.05) == U
    assert stats.outcome_within(E(5, 0.10, 0.07, 0.13), -0.05, 0.05) == N
    assert stats.outcome_within(E(5, 4.4, 4.2, 4.6), 4.05, 4.95) == Y      # 4.5 Mb/s ± 10 %
    assert stats.outcome_within(E(5, 3.8, 3.7, 3.9), 4.05, 4.95) == N      # a tight interval outside: no


def test_bounds_with_and_without_strictness():
    assert stats.outcome_above(E(3, 0.9, 0.9, 0.95), 0.9, strict=False) == Y
    assert stats.outcome_above(E(3, 0.9, 0.9, 0.95), 0.9, strict=True) == U
    assert stats.outcome_below(E(3, 0.1, 0.05, 0.15), 0.2, strict=False) == Y
    assert stats.outcome_below(E(3, 0.3, 0.25, 0.35), 0.2, strict=False) == N
    assert stats.outcome_below(E(3, 0.0, 0.0, 0.0), 0.0, strict=False) == Y
    assert stats.outcome_above(E(1, 0.1, None, None), 0.0) == Y          # n=1: the point decides


def test_slope_is_least_squares_and_needs_two_distinct_xs():
    assert stats.slope([1, 2, 3], [2, 4, 6]) == pytest.approx(2.0)
    assert stats.slope([1, 2, 3], [3, 1, 2]) == pytest.approx(-0.5)
    assert stats.slope([5, 5], [1, 2]) is None
    assert stats.slope([1, 2, 3], [1, None, 3]) == pytest.approx(1.0)


def test_verdict_rules():
    assert stats.verdict([Y, Y, Y]) == stats.REPRODUCED
    assert stats.verdict([N, U, N]) == stats.NOT_REPRODUCED
    assert stats.verdict([U, U]) == stats.INCONCLUSIVE
    assert stats.verdict([U, X]) == stats.INCONCLUSIVE
    assert stats.verdict([Y, N]) == stats.PARTLY
    assert stats.verdict([Y, X]) == stats.PARTLY            # a case without a valid run is not a yes
    assert stats.verdict([X, X]) == stats.NO_VALID_RUN
    assert stats.verdict([]) == stats.NO_VALID_RUN


def test_not_worse_needs_the_whole_interval_above_minus_the_margin():
    m = 0.05
    assert stats.outcome_not_worse(E(5, 0.0, -0.03, 0.03), m) == Y      # a tie is comparable
    assert stats.outcome_not_worse(E(5, 0.10, 0.06, 0.14), m) == Y      # better is too
    assert stats.outcome_not_worse(E(5, -0.05, -0.08, -0.02), m) == U   # straddles -m
    assert stats.outcome_not_worse(E(5, -0.10, -0.14, -0.06), m) == N   # worse beyond the margin
    assert stats.outcome_not_worse(E(5, -0.06, -0.07, -0.05), m) == N   # touching -m is not above it
    with pytest.raises(ValueError):
        stats.outcome_not_worse(E(5, 0.0, -0.01, 0.01), -0.01)


def test_a_trend_is_judged_on_its_change_against_the_margin_in_every_direction():
    m = 0.05
    rising, tiny_rise, flat, falling = E(5, 0.2, 0.1, 0.3), E(5, 0.02, 0.01, 0.03), E(5, 0.0, -0.02, 0.02), \
        E(5, -0.2, -0.3, -0.1)
    straddle = E(5, 0.05, 0.0, 0.1)
    assert [stats.outcome_trend(e, "increasing", m) for e in (rising, tiny_rise, flat, falling, straddle)] == \
        [Y, N, N, N, U]                       # a rise inside the margin is no rise
    assert [stats.outcome_trend(e, "decreasing", m) for e in (rising, tiny_rise, flat, falling)] == [N, N, N, Y]
    assert [stats.outcome_trend(e, "flat", m) for e in (rising, tiny_rise, flat, falling, straddle)] == \
        [N, Y, Y, N, U]
    assert [stats.outcome_trend(e, "not_increasing", m) for e in (rising, tiny_rise, flat, falling, straddle)] == \
        [N, Y, Y, Y, U]
    # a range (max - min over the cases, never below 0) is flat when at most the margin
    assert stats.outcome_trend(E(5, 0.02, 0.01, 0.04), "flat", m, "range") == Y
    assert stats.outcome_trend(E(5, 0.08, 0.06, 0.1), "flat", m, "range") == N
    assert stats.outcome_trend(E(5, 0.05, 0.03, 0.07), "flat", m, "range") == U
    with pytest.raises(ValueError):
        stats.outcome_trend(rising, "increasing", m, "range")
    with pytest.raises(ValueError):
        stats.outcome_trend(rising, "sideways", m)


def test_the_change_over_a_sweep_is_the_fitted_lines_from_its_lowest_x_to_its_highest():
    assert stats.fitted_change([1, 2, 3], [2, 4, 6]) == pytest.approx(4.0)
    assert stats.fitted_change([20, 200], [0.3, 0.1]) == pytest.approx(-0.2)     # two cases: the difference
    assert stats.fitted_change([1, 2, 4], [1, None, 3]) == pytest.approx(2.0)    # over the xs that have a value
    assert stats.fitted_change([5, 5], [1, 2]) is None
