"""Means, 95 % intervals and verdicts for `bwn reproduce` (docs/reproduce.md).

* **Interval**: Student-t over the valid seeds, ``mean ± t(0.975, n-1) · s / √n``
  (``scipy.stats.t``). With one valid seed there is no interval (``None``), with
  none there is no mean.
* **Outcome of one case** for a claim: ``yes`` when the whole interval lies on the
  claim's side of its threshold, ``no`` when the whole interval lies on the other
  side, ``unclear`` when it straddles. With one seed the point estimate decides
  (``yes``/``no``, flagged ``n=1``). ``none``: no valid run to judge.
* **Practical equivalence** (comparisons only, :func:`outcome_gain`): ``equal``
  when the whole interval of the relative gain lies within ``± margin`` (a
  region of practical equivalence: the runs show the two schemes carry the
  same within the margin, which is a finding, not a lack of data); checked
  before ``yes`` and ``no``, so a gain of +0.3 % [+0.1, +0.5] with a 1 % margin
  is ``equal``, not ``yes``.
* **Verdict of a claim** over its cases: ``reproduced`` when every case is
  ``yes``; ``not reproduced`` when no case is ``yes`` and at least one is
  ``no`` or ``equal``; ``inconclusive`` when every judged case is ``unclear`` (the runs
  neither support nor contradict the claim: more seeds would tell); ``partly``
  otherwise (some ``yes``; or all ``yes`` but some cases had no valid run);
  ``no valid run`` when nothing could be judged.

Invalid runs never enter here: callers pass the values of valid runs only.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

YES, NO, UNCLEAR, NONE = "yes", "no", "unclear", "none"
EQUAL = "equal"
REPRODUCED, PARTLY, NOT_REPRODUCED, NO_VALID_RUN = "reproduced", "partly", "not reproduced", "no valid run"
INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True)
class Estimate:
    n: int
    mean: Optional[float]
    low: Optional[float]       # 95 % interval; None when n < 2
    high: Optional[float]

    def text(self, scale: float = 1.0, digits: int = 3, percent: bool = False) -> str:
        if self.mean is None:
            return "-"

        def fmt(v: float) -> str:
            return f"{v * 100 * scale:+.{max(digits - 2, 0)}f} %" if percent else f"{v * scale:.{digits}g}"
        if self.low is None or self.high is None:
            return f"{fmt(self.mean)} (n=1)"
        return f"{fmt(self.mean)} [{fmt(self.low)}, {fmt(self.high)}] (n={self.n})"


def mean_interval(values: Sequence[float], confidence: float = 0.95) -> Estimate:
    """Mean and Student-t interval of ``values`` (finite numbers only)."""
    xs = [float(v) for v in values if v is not None and math.isfinite(v)]
    n = len(xs)
    if n == 0:
        return Estimate(0, None, None, None)
    mean = sum(xs) / n
    if n == 1:
        return Estimate(1, mean, None, None)
    from scipy import stats

    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    if sd == 0.0:
        return Estimate(n, mean, mean, mean)
    low, high = stats.t.interval(confidence, n - 1, loc=mean, scale=sd / math.sqrt(n))
    return Estimate(n, mean, float(low), float(high))


def outcome_above(est: Estimate, threshold: float, strict: bool = True) -> str:
    """Is the quantity above ``threshold`` (``>`` if strict, else ``>=``)?"""
    if est.mean is None:
        return NONE
    low = est.low if est.low is not None else est.mean
    high = est.high if est.high is not None else est.mean
    above = (lambda v: v > threshold) if strict else (lambda v: v >= threshold)
    if above(low):
        return YES
    if not above(high):
        return NO
    return UNCLEAR


def outcome_gain(est: Estimate, margin: float) -> str:
    """Is a relative gain above 0, with ``equal`` when its whole interval lies
    within ``± margin`` (module docstring)?"""
    if est.mean is None:
        return NONE
    if margin > 0 and outcome_within(est, -margin, margin) == YES:
        return EQUAL
    return outcome_above(est, 0.0)


def outcome_below(est: Estimate, threshold: float, strict: bool = True) -> str:
    """Is the quantity below ``threshold`` (``<`` if strict, else ``<=``)?"""
    flipped = Estimate(est.n, None if est.mean is None else -est.mean,
                       None if est.high is None else -est.high, None if est.low is None else -est.low)
    return outcome_above(flipped, -threshold, strict)


def outcome_within(est: Estimate, low: float, high: float) -> str:
    """Does the quantity lie within [low, high]?"""
    if est.mean is None:
        return NONE
    lo = est.low if est.low is not None else est.mean
    hi = est.high if est.high is not None else est.mean
    if lo >= low and hi <= high:
        return YES
    if hi < low or lo > high:
        return NO
    return UNCLEAR


def verdict(outcomes: Sequence[str]) -> str:
    """A claim's verdict from its cases' outcomes (module docstring)."""
    judged = [o for o in outcomes if o != NONE]
    if not judged:
        return NO_VALID_RUN
    yes = sum(1 for o in judged if o == YES)
    if yes == len(outcomes):
        return REPRODUCED
    if yes == 0:
        return NOT_REPRODUCED if any(o in (NO, EQUAL) for o in judged) else INCONCLUSIVE
    return PARTLY
