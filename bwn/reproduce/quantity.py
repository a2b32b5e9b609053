"""A claim's quantity as a reader sees it: its name, its unit, its numbers.

Pages and plots show every quantity in the claim's own unit: rates in Mb/s,
gains, fractions and shares in per cent, counts as counts. One place decides it,
so a page's table and its figure never disagree.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from bwn.analysis import stats
from bwn.reproduce.grid import Claim

#: metric kind -> (what it is, unit, factor from the metric's value to that unit)
METRICS: dict[str, tuple[str, str, float]] = {
    "goodput_bps": ("goodput", "Mb/s", 1e-6),
    "utilization": ("utilization", "%", 100.0),
    "link_utilization": ("link utilization", "%", 100.0),
    "queue_fraction": ("mean queue / buffer", "%", 100.0),
    "share_fraction": ("goodput / max-min fair share", "%", 100.0),
    "jain": ("Jain's fairness index", "", 1.0),
    "retransmissions": ("retransmissions", "packets", 1.0),
    "timeouts": ("timeouts", "", 1.0),
    "reordered": ("segments reordered", "", 1.0),
    "rtt_mean_ms": ("mean RTT", "ms", 1.0),
    "estimate_error": ("|estimate - fair share| / fair share", "%", 100.0),
    "estimate_error_rate": ("|estimate - own rate| / own rate", "%", 100.0),
    "algo_ratio": ("goodput ratio", "", 1.0),
    "target_error": ("|goodput - target| / target", "%", 100.0),
}


@dataclass(frozen=True)
class Quantity:
    name: str          # e.g. "goodput of g4", "gain of obp over newreno in utilization"
    unit: str          # "Mb/s", "%", "" (a pure number)
    factor: float      # value in the claim's unit = factor * the judged number

    @property
    def axis(self) -> str:
        return f"{self.name} ({self.unit})" if self.unit else self.name

    def number(self, value: Optional[float], digits: int = 3) -> str:
        if value is None:
            return "-"
        shown = value * self.factor
        if self.unit == "%":
            return f"{shown:+.1f} %" if self.name.startswith("gain") else f"{shown:.1f} %"
        text = f"{shown:.{digits}g}"
        return f"{text} {self.unit}" if self.unit else text

    def estimate(self, est: Optional[stats.Estimate]) -> str:
        if est is None or est.mean is None:
            return "-"
        if est.low is None or est.high is None:
            return f"{self.number(est.mean)} (n=1)"
        return f"{self.number(est.mean)} [{self.number(est.low)}, {self.number(est.high)}] (n={est.n})"


def metric_quantity(metric: str) -> Quantity:
    kind, _, arg = metric.partition(":")
    what, unit, factor = METRICS.get(kind, (kind, "", 1.0))
    if arg and arg not in ("all", "mean") and kind not in ("link_utilization", "algo_ratio", "target_error"):
        what = f"{what} of {arg}"
    elif kind == "algo_ratio":
        what = f"goodput of {arg.replace('/', ' / goodput of ')}"
    elif kind == "link_utilization":
        what = f"{what} of {arg}"
    return Quantity(what, unit, factor)


def claim_quantity(claim: Claim) -> Quantity:
    """What a claim judges, per seed: the metric, or its paired gain against ``versus``."""
    metric = metric_quantity(claim.metric)
    if claim.compares:
        word = "reduction" if claim.lower_is_better else "gain"
        return Quantity(f"{word} of {claim.scheme} over {claim.versus} in {metric.name}", "%", 100.0)
    return metric


def trend_quantity(claim: Claim) -> Quantity:
    """A trend's slope: the quantity's change per unit of x (or of log x)."""
    q = claim_quantity(claim)
    per = f"ln({claim.x})" if claim.log_x else claim.x
    return Quantity(f"slope of {q.name} per {per}", q.unit, q.factor)
