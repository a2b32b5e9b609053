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
    "target_ratio": ("goodput / target", "%", 100.0),
    "target_diff": ("goodput - target", "Mb/s", 1e-6),
    "besteffort_share": ("best-effort goodput / the best-effort flows' mean goodput", "", 1.0),
    "jain_share": ("Jain's index of goodput / fair share", "", 1.0),
    "epoch_jain": ("lowest Jain's index over the epochs between arrivals", "", 1.0),
    "convergence_time_s": ("time to converge to the fair shares", "s", 1.0),
    "goodput_cv": ("coefficient of variation of the 1 s goodput", "%", 100.0),
    "floor_fraction": ("fraction of 1 s bins at the level", "%", 100.0),
    "estimate_bias": ("(estimate - fair share) / fair share", "%", 100.0),
    "estimate_bps": ("bandwidth estimate", "Mb/s", 1e-6),
    "estimate_cv": ("coefficient of variation of the estimate", "%", 100.0),
    "estimate_settling_s": ("settling time of the estimate", "s", 1.0),
    "drops": ("packets dropped", "packets", 1.0),
    "compliant_bps": ("in-profile goodput", "Mb/s", 1e-6),
    "besteffort_bps": ("best-effort goodput", "Mb/s", 1e-6),
}


@dataclass(frozen=True)
class Quantity:
    name: str          # e.g. "goodput of g4", "gain of obp over newreno in utilization"
    unit: str          # "Mb/s", "%", "" (a pure number)
    factor: float      # value in the claim's unit = factor * the judged number
    delta: bool = False   # a difference of the quantity (a change, a range): shown with its sign

    @property
    def axis(self) -> str:
        return f"{self.name} ({self.unit})" if self.unit else self.name

    def number(self, value: Optional[float], digits: int = 3) -> str:
        if value is None:
            return "-"
        shown = value * self.factor
        signed = self.delta or self.name.startswith(("gain", "reduction", "difference"))
        if self.unit == "%":
            return f"{shown:+.1f} %" if signed else f"{shown:.1f} %"
        if signed:
            text = f"{shown:+.{digits}g}"
            return f"{text} {self.unit}" if self.unit else text
        text = f"{shown:.{digits}g}"
        return f"{text} {self.unit}" if self.unit else text

    def estimate(self, est: Optional[stats.Estimate]) -> str:
        if est is None or est.mean is None:
            return "-"
        if est.low is None or est.high is None:
            return f"{self.number(est.mean)} (n=1)"
        return f"{self.number(est.mean)} [{self.number(est.low)}, {self.number(est.high)}] (n={est.n})"


def metric_quantity(metric: str) -> Quantity:
    kind, _, rest = metric.partition(":")
    kind, _, when_kind = kind.partition("@")
    arg, _, when = rest.partition("@")
    when = when or when_kind
    what, unit, factor = METRICS.get(kind, (kind, "", 1.0))
    if kind == "algo_ratio":
        what = f"goodput of {arg.replace('/', ' / goodput of ')}"
    elif arg and arg not in ("all", "mean"):
        what = f"{what} of {arg}"
    if when:
        what = f"{what} at {when} s"
    return Quantity(what, unit, factor)


def claim_quantity(claim: Claim) -> Quantity:
    """What a claim judges, per seed: the metric, its paired gain (or difference)
    against ``versus``, or its ratio to another case's."""
    metric = metric_quantity(claim.metric)
    if claim.relative_to:
        return Quantity(f"{metric.name} / the same in case {claim.relative_to}", "", 1.0)
    if claim.compares and claim.difference:
        return Quantity(f"difference {claim.scheme} - {claim.versus} in {metric.name}", metric.unit, metric.factor)
    if claim.compares:
        word = "reduction" if claim.lower_is_better else "gain"
        return Quantity(f"{word} of {claim.scheme} over {claim.versus} in {metric.name}", "%", 100.0)
    return metric


def trend_quantity(claim: Claim) -> Quantity:
    """A trend's quantity per seed: the change of the claim's quantity over the sweep
    (the fitted line's, from the lowest x to the highest), or its range over the cases."""
    q = claim_quantity(claim)
    if claim.measure == "range":
        return Quantity(f"range (max - min) of {q.name} over the cases", q.unit, q.factor, delta=True)
    per = f"ln {claim.x}" if claim.log_x else claim.x
    return Quantity(f"change of {q.name} over the sweep of {claim.x} (fitted on {per})", q.unit, q.factor,
                    delta=True)
