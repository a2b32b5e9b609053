"""Estimates, intervals and outcomes for `bwn reproduce`: the decision rule.

The rule is fixed before any run it judges (docs/reproduce.md, "The decision
rule"); this module is it, in code.

**Intervals** (95 %, over a case's valid seeds), chosen by what the quantity is
(:class:`Support`):

* ``real`` (a paired gain, a rate in b/s): Student-t, ``mean ± t(0.975, n-1) s/√n``.
* ``count`` (retransmissions, timeouts, reordered segments: a whole number per
  run, never below 0): quasi-Poisson on the log scale, ``mean · exp(± t(0.975, n-1)
  · √(φ / S))`` with ``S`` the sum over the seeds and ``φ = max(1, Σ(x - x̄)² /
  ((n-1) x̄))`` the dispersion (seeds vary more than Poisson counts do, and the
  interval widens with them); when every seed counts 0 the interval is the exact
  (Garwood) one, ``[0, χ²(0.975, 2) / (2n)]`` = ``[0, 3.69 / n]``. Never below 0.
* ``fraction`` (utilization, Jain's index, a queue's fill: a number in [0, 1]):
  Student-t, intersected with [0, 1] (a bound the quantity cannot pass; far
  from the bounds it is the plain t interval, whose coverage is right at 5
  seeds, where a percentile bootstrap's is not). A measured ratio can pass 1 by
  a little (frames counted at the window's edges): the interval then still holds
  its mean.

With one valid seed there is no interval (``None``); with none, no mean.

**Outcomes of one case**, for the kinds of claim:

* ``better`` (a paired relative gain ``g``, margin ``m`` fixed per claim before
  the runs): ``yes`` when the whole interval lies above ``+m``, ``no`` when the
  whole interval lies at or below ``+m`` (the gain, if any, is smaller than the
  margin: not "better"), ``unclear`` when it straddles ``+m``. Symmetric: a tie
  within ``±m`` is a ``no``, and so is a loss.
* ``equal`` (two schemes carry the same): ``yes`` when the whole interval of the
  gain lies within ``±m``, ``no`` when it lies wholly outside, ``unclear`` otherwise.
* ``near`` (the paper gives a number ``T`` and a tolerance ``τ`` fixed before the
  runs): ``yes`` when the whole interval lies within ``[T - τ, T + τ]``, ``no``
  when it lies wholly outside, ``unclear`` when it overlaps the band's edge.
* ``at_least`` / ``at_most`` a bound: ``yes`` when the whole interval lies on the
  claim's side, ``no`` when wholly on the other, ``unclear`` when it straddles.
* ``not_worse`` (A is comparable to or better than B): ``yes`` when the whole
  interval of the gain lies above ``-m``, ``no`` when it lies wholly at or below
  ``-m``, ``unclear`` when it straddles ``-m``.
* ``trend`` (over ordered cases, per group of cases): per seed, the fitted change of
  the quantity over the sweep (the least-squares slope over the cases' ``x``, or
  ``ln x``, times the sweep's span: the change from its lowest ``x`` to its highest),
  or, measured as a ``range``, the largest minus the smallest of the cases' values;
  then, with the trend's margin ``m`` (the smallest change that counts, in the
  quantity's unit): ``increasing`` is ``yes`` when the interval of the change lies
  wholly above ``+m``, ``no`` when wholly at or below ``+m``; ``decreasing`` the
  mirror at ``-m``; ``flat`` is ``yes`` when it lies wholly within ``[-m, +m]`` (a
  range: at or below ``m``), ``no`` when wholly outside; ``not_increasing`` is
  ``yes`` when it lies wholly at or below ``+m``, ``no`` when wholly above. A change
  inside the margin is no trend, as a gain inside it is no gain.

**Verdict of a claim** over its cases: ``reproduced`` when every case is ``yes``;
``not reproduced`` when no case is ``yes`` and at least one is ``no``;
``inconclusive`` when every judged case is ``unclear``; ``partly`` otherwise;
``no valid run`` when nothing could be judged.

Invalid runs never enter here: callers pass the values of valid runs only.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Optional, Sequence

YES, NO, UNCLEAR, NONE = "yes", "no", "unclear", "none"
REPRODUCED, PARTLY, NOT_REPRODUCED, NO_VALID_RUN = "reproduced", "partly", "not reproduced", "no valid run"
#: A claim none of whose runs was attempted yet: not judged, and not a failure either.
NOT_RUN_YET = "not run yet"
INCONCLUSIVE = "inconclusive"
#: A claim declared with its rule whose machinery is not built yet: not judged.
WAITING = "waiting"
CONFIDENCE = 0.95


class Support(str, Enum):
    """What values a quantity takes, which decides its interval (module docstring)."""

    REAL = "real"
    COUNT = "count"
    FRACTION = "fraction"


@dataclass(frozen=True)
class Estimate:
    n: int
    mean: Optional[float]
    low: Optional[float]       # 95 % interval; None when n < 2
    high: Optional[float]
    method: str = "t"

    def text(self, scale: float = 1.0, digits: int = 3, percent: bool = False) -> str:
        if self.mean is None:
            return "-"

        def fmt(v: float) -> str:
            return f"{v * 100 * scale:+.{max(digits - 2, 0)}f} %" if percent else f"{v * scale:.{digits}g}"
        if self.low is None or self.high is None:
            return f"{fmt(self.mean)} (n=1)"
        return f"{fmt(self.mean)} [{fmt(self.low)}, {fmt(self.high)}] (n={self.n})"


def _finite(values: Sequence[Optional[float]]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(v)]


def _t(n: int) -> float:
    # imported here: scipy takes a third of a second to import, and only intervals need it
    from scipy import stats
    return float(stats.t.ppf(0.5 + CONFIDENCE / 2, n - 1))


def mean_interval(values: Sequence[Optional[float]], support: Support = Support.REAL) -> Estimate:
    """Mean and 95 % interval of ``values`` (finite numbers only), by ``support``."""
    xs = _finite(values)
    n = len(xs)
    if n == 0:
        return Estimate(0, None, None, None)
    mean = sum(xs) / n
    if n == 1:
        return Estimate(1, mean, None, None)
    if support is Support.COUNT:
        return count_interval(xs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    half = _t(n) * sd / math.sqrt(n)
    if support is Support.FRACTION:
        low = min(max(0.0, mean - half), mean)
        high = max(min(1.0, mean + half), mean)      # a measured ratio a little over 1 keeps its mean inside
        return Estimate(n, mean, low, high, "t in [0, 1]")
    return Estimate(n, mean, mean - half, mean + half, "t")


def count_interval(xs: Sequence[float]) -> Estimate:
    """Quasi-Poisson interval of the mean count per run (module docstring)."""
    # imported here: scipy takes a third of a second to import, and only intervals need it
    from scipy import stats
    n = len(xs)
    if any(x < 0 for x in xs):
        raise ValueError(f"a count below 0: {list(xs)}")
    total = sum(xs)
    mean = total / n
    if total == 0:
        upper = float(stats.chi2.ppf(0.5 + CONFIDENCE / 2, 2)) / (2 * n)
        return Estimate(n, 0.0, 0.0, upper, "exact Poisson")
    dispersion = max(1.0, sum((x - mean) ** 2 for x in xs) / ((n - 1) * mean))
    half_log = _t(n) * math.sqrt(dispersion / total)
    return Estimate(n, mean, mean * math.exp(-half_log), mean * math.exp(half_log), "quasi-Poisson")


def _bounds(est: Estimate) -> tuple[float, float]:
    assert est.mean is not None
    low = est.low if est.low is not None else est.mean
    high = est.high if est.high is not None else est.mean
    return low, high


def outcome_above(est: Estimate, threshold: float, strict: bool = True) -> str:
    """Is the quantity above ``threshold`` (``>`` if strict, else ``>=``)?
    (``at_least`` is not strict; ``better`` is, with ``+margin``.)"""
    if est.mean is None:
        return NONE
    low, high = _bounds(est)
    above = (lambda v: v > threshold) if strict else (lambda v: v >= threshold)
    if above(low):
        return YES
    if not above(high):
        return NO
    return UNCLEAR


def outcome_below(est: Estimate, threshold: float, strict: bool = True) -> str:
    """Is the quantity below ``threshold`` (``<`` if strict, else ``<=``)? (``at_most``)"""
    if est.mean is None:
        return NONE
    low, high = _bounds(est)
    below = (lambda v: v < threshold) if strict else (lambda v: v <= threshold)
    if below(high):
        return YES
    if not below(low):
        return NO
    return UNCLEAR


def outcome_within(est: Estimate, low_bound: float, high_bound: float) -> str:
    """Does the quantity lie within [low_bound, high_bound]? (``near``, ``equal``)"""
    if est.mean is None:
        return NONE
    low, high = _bounds(est)
    if low >= low_bound and high <= high_bound:
        return YES
    if high < low_bound or low > high_bound:
        return NO
    return UNCLEAR


def outcome_better(est: Estimate, margin: float) -> str:
    """Is a relative gain larger than ``+margin``? A gain inside the margin, or a
    loss, is ``no``; an interval across ``+margin`` is ``unclear``."""
    if margin < 0:
        raise ValueError(f"a margin cannot be negative: {margin}")
    return outcome_above(est, margin, strict=True)


def outcome_not_worse(est: Estimate, margin: float) -> str:
    """Is a relative gain above ``-margin`` (comparable to, or better than, the other)?"""
    if margin < 0:
        raise ValueError(f"a margin cannot be negative: {margin}")
    return outcome_above(est, -margin, strict=True)


TREND_DIRECTIONS = ("increasing", "decreasing", "flat", "not_increasing")


def outcome_trend(est: Estimate, direction: str, margin: float, measure: str = "change") -> str:
    """A trend's outcome from the interval of its change over the sweep (module docstring)."""
    if margin < 0:
        raise ValueError(f"a margin cannot be negative: {margin}")
    if measure == "range":
        if direction != "flat":
            raise ValueError("a range can only be judged flat")
        return outcome_below(est, margin, strict=False)
    if direction == "increasing":
        return outcome_above(est, margin, strict=True)
    if direction == "decreasing":
        return outcome_below(est, -margin, strict=True)
    if direction == "flat":
        return outcome_within(est, -margin, margin)
    if direction == "not_increasing":
        return outcome_below(est, margin, strict=False)
    raise ValueError(f"unknown trend direction {direction!r}")


def fitted_change(xs: Sequence[float], ys: Sequence[Optional[float]]) -> Optional[float]:
    """The least-squares line's change from the smallest x to the largest (the slope
    times the span); None with fewer than two distinct xs."""
    value = slope(xs, ys)
    if value is None:
        return None
    known = [x for x, y in zip(xs, ys) if y is not None and math.isfinite(y)]
    return value * (max(known) - min(known))


def slope(xs: Sequence[float], ys: Sequence[Optional[float]]) -> Optional[float]:
    """Least-squares slope of ys over xs; None with fewer than two distinct xs."""
    pairs = [(x, y) for x, y in zip(xs, ys) if y is not None and math.isfinite(y)]
    if len({x for x, _ in pairs}) < 2:
        return None
    mx = sum(x for x, _ in pairs) / len(pairs)
    my = sum(y for _, y in pairs) / len(pairs)
    sxx = sum((x - mx) ** 2 for x, _ in pairs)
    return sum((x - mx) * (y - my) for x, y in pairs) / sxx


def verdict(outcomes: Sequence[str]) -> str:
    """A claim's verdict from its cases' outcomes (module docstring)."""
    judged = [o for o in outcomes if o != NONE]
    if not judged:
        return NO_VALID_RUN
    yes = sum(1 for o in judged if o == YES)
    if yes == len(outcomes):
        return REPRODUCED
    if yes == 0:
        return NOT_REPRODUCED if any(o == NO for o in judged) else INCONCLUSIVE
    return PARTLY
