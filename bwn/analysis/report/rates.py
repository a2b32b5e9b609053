"""What the report computes from a loaded run: rates over time, fair shares, estimates.

* **utilization** of a flow: its goodput / the mean capacity the bottleneck link
  offered during the flow's lifetime (the integral of the *applied* rate); of the
  row ``all``: every flow's bytes / the integral over the union of lifetimes.
* **jain**: Jain's index ``(sum x)^2 / (n sum x^2)`` of the flows' goodputs in one
  scheme run; blank for a single flow.
* **estimate_error_share** and **estimate_error_rate**: how far the bandwidth
  estimate the scheme acted on (:data:`bwn.analysis.report.load.ESTIMATE_SOURCES`)
  is, on average over the flow's log rows, from two references, as
  ``|estimate - reference| / reference``: the flow's **max-min fair share** of the
  links it crosses at the row's time (:class:`FairShares`: only the flows active
  then on the same link *in the same direction* share a link, run.json's
  ``flow_links``), and the flow's **own rate** (its acknowledged payload over the
  last ``bin_s``). All in **payload** bit/s: the switch-stamped values (EBN code,
  OBP tight link) and the capacities count whole frames and are scaled by
  ``mss / frame`` (1000 / 1102 bytes for the runner's agents); the sender-side
  estimates (Westwood, DFT, SARBE) count acknowledged payload already. OBP's
  estimate is ``tight + own`` (the tight link counts the flow's own traffic as used).
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Sequence

from bwn.analysis.fairshare import max_min_shares
from bwn.protocol.wire import ebn_decode_kbps
from bwn.analysis.report.load import DEFAULT_BIN_S, ESTIMATE_SOURCES, FlowLog, ReportError, SchemeRun, TIGHT_UNSET_KBPS


class RateCurve:
    """A piecewise-constant rate (bit/s) from (t_s, rate) points; the first rate also
    holds before the first point."""

    def __init__(self, points: Iterable[tuple[float, float]]) -> None:
        merged: dict[float, float] = {}
        for t_s, rate in sorted(points, key=lambda p: p[0]):
            merged[t_s] = rate                       # the last of equal times wins
        if not merged:
            raise ReportError("a capacity curve needs at least one point")
        self.times_s = list(merged)
        self.rates_bps = list(merged.values())

    def rate_bps(self, t_s: float) -> float:
        index = bisect.bisect_right(self.times_s, t_s) - 1
        return self.rates_bps[max(index, 0)]

    def integral_bits(self, t0_s: float, t1_s: float) -> float:
        if t1_s <= t0_s:
            return 0.0
        bounds = self.times_s[1:] + [math.inf]
        starts = [-math.inf] + self.times_s[1:]
        total = 0.0
        for start_s, end_s, rate in zip(starts, bounds, self.rates_bps):
            overlap_s = min(end_s, t1_s) - max(start_s, t0_s)
            if overlap_s > 0:
                total += rate * overlap_s
        return total

    def mean_rate_bps(self, t0_s: float, t1_s: float) -> float:
        if t1_s <= t0_s:
            return self.rate_bps(t0_s)
        return self.integral_bits(t0_s, t1_s) / (t1_s - t0_s)

    def steps(self, t_end_s: float) -> tuple[list[float], list[float]]:
        """x, y for a step plot up to ``t_end_s``."""
        xs = [min(self.times_s[0], 0.0)] + self.times_s[1:] + [t_end_s]
        ys = self.rates_bps + [self.rates_bps[-1]]
        return xs, ys


def jain_index(values: Sequence[float]) -> Optional[float]:
    """Jain's fairness index (sum x)^2 / (n * sum x^2); None for fewer than 2 values."""
    if len(values) < 2:
        return None
    squares = sum(v * v for v in values)
    if squares == 0:
        return None
    return sum(values) ** 2 / (len(values) * squares)


def capacity_curves(run: SchemeRun) -> dict[str, RateCurve]:
    """Link -> applied capacity: capacity.csv, else the telemetry's capacity per
    ``switch:port``."""
    points: dict[str, list[tuple[float, float]]] = {}
    if run.capacity:
        for c in run.capacity:
            points.setdefault(c.link, []).append((c.t_s, c.rate_bps))
    else:
        for s in run.telemetry:
            if s.capacity_kbps is not None and s.capacity_kbps > 0:
                points.setdefault(s.key, []).append((s.t_s, s.capacity_kbps * 1000))
    return {link: RateCurve(p) for link, p in points.items()}


def run_span_s(run: SchemeRun) -> tuple[float, float]:
    starts = [f.start_s for f in run.flows]
    ends = [f.end_s for f in run.flows]
    return (min(starts), max(ends)) if starts else (0.0, 0.0)


def bottleneck(run: SchemeRun) -> tuple[Optional[str], Optional[RateCurve]]:
    """The bottleneck's name and capacity: ``run.bottleneck_link`` if set, else the
    link with the smallest mean applied capacity over the run."""
    curves = capacity_curves(run)
    if not curves:
        return None, None
    if run.bottleneck_link is not None:
        if run.bottleneck_link not in curves:
            raise ReportError(f"{run.scheme}: bottleneck link {run.bottleneck_link!r} has no "
                              f"capacity samples (links: {', '.join(sorted(curves))})")
        return run.bottleneck_link, curves[run.bottleneck_link]
    t0_s, t1_s = run_span_s(run)
    if t1_s <= t0_s:
        t1_s = t0_s + 1.0
    name = min(curves, key=lambda link: curves[link].mean_rate_bps(t0_s, t1_s))
    return name, curves[name]


def _interp(times: Sequence[float], values: Sequence[float], t_s: float) -> float:
    if not times or t_s <= times[0]:
        return 0.0 if not times or t_s < times[0] else values[0]
    if t_s >= times[-1]:
        return values[-1]
    i = bisect.bisect_right(times, t_s)
    t0, t1 = times[i - 1], times[i]
    return values[i - 1] + (values[i] - values[i - 1]) * (t_s - t0) / (t1 - t0)


class _Delivered:
    """delivered_at() with the lists built once."""

    def __init__(self, flow: FlowLog) -> None:
        rows = [s for s in flow.samples if s.get("delivered_bytes") is not None]
        self.times = [flow.start_s + s["t_s"] for s in rows]
        self.values = [s["delivered_bytes"] for s in rows]

    def rate_bps(self, t_s: float, window_s: float) -> float:
        """Mean throughput over ``(t_s - window_s, t_s]``."""
        delta = _interp(self.times, self.values, t_s) - _interp(self.times, self.values,
                                                                t_s - window_s)
        return max(delta, 0.0) * 8 / window_s


def throughput_series(flow: FlowLog, bin_s: float) -> tuple[list[float], list[float]]:
    """(bin centres in experiment time, throughput bit/s) over the flow's log."""
    delivered = _Delivered(flow)
    if len(delivered.times) < 2:
        return [], []
    t_s, end_s = delivered.times[0], delivered.times[-1]
    xs, ys = [], []
    while t_s < end_s - 1e-9:
        t_next = min(t_s + bin_s, end_s)
        xs.append((t_s + t_next) / 2)
        ys.append(delivered.rate_bps(t_next, t_next - t_s))
        t_s = t_next
    return xs, ys


def active_flows(run: SchemeRun, t_s: float) -> int:
    return sum(1 for f in run.flows if f.active(t_s))


def estimate_source(flow: FlowLog, run: SchemeRun) -> Optional[str]:
    return ESTIMATE_SOURCES.get(flow.algo or run.scheme)


def estimate_bps(run: SchemeRun, sample: Mapping[str, Any], source: str,
                 own_bps: float) -> Optional[float]:
    """The estimate the flow acted on at this log row, in payload bit/s (None if none).

    Switch-stamped values count frames: scaled by ``run.payload_per_frame``."""
    if source == "estimate_bps":
        value = sample.get("estimate_bps")
        return None if value is None or value <= 0 else float(value)
    if sample.get("fb_hop_count") is not None and sample["fb_hop_count"] == 0:
        return None                                   # no BWN switch on the path
    if source == "fb_ebn_code":
        code = sample.get("fb_ebn_code")
        kbps = None if code is None else ebn_decode_kbps(int(code))    # None for the unset code
        return None if kbps is None else kbps * 1000 * run.payload_per_frame
    if source == "fb_tight_kbps":
        tight = sample.get("fb_tight_kbps")
        if tight is None or tight >= TIGHT_UNSET_KBPS:
            return None
        return tight * 1000 * run.payload_per_frame + own_bps
    raise ReportError(f"unknown estimate source {source!r}")


BOTTLENECK_RESOURCE = "(bottleneck)"


class FairShares:
    """Each flow's max-min fair share (payload bit/s) of the links it crosses, at a
    time: the flows active then share each link in each direction (bwn.analysis.fairshare).

    The links and directions come from run.json's ``flow_links``; a run without them
    (older runs, hand-made directories) is taken as every flow crossing the
    bottleneck in one direction, i.e. ``C(t) / N(t)``."""

    def __init__(self, run: SchemeRun) -> None:
        self.run = run
        self.curves = capacity_curves(run)
        self.bottleneck_name, self.bottleneck_curve = bottleneck(run)
        self._cache: dict[tuple[float, tuple[str, ...]], dict[Any, float]] = {}

    def resources(self, flow: FlowLog) -> list[str]:
        links = self.run.flow_links
        if links is None:
            return [BOTTLENECK_RESOURCE] if self.bottleneck_curve is not None else []
        hops = links.get(flow.name.split("#")[0], [])
        return [f"{link}:{a}>{b}" for link, a, b in hops if link in self.curves]

    def _capacity_bps(self, resource: str, t_s: float) -> float:
        curve = self.bottleneck_curve if resource == BOTTLENECK_RESOURCE             else self.curves[resource.split(":", 1)[0]]
        assert curve is not None
        return curve.rate_bps(t_s) * self.run.payload_per_frame

    def share_bps(self, flow: FlowLog, t_s: float) -> Optional[float]:
        """``flow``'s fair share at ``t_s``; None when no known link limits it."""
        # A flow's last log row is at its end time: [start, end], both ends included.
        active = tuple(f.name for f in self.run.flows
                       if f is flow or f.start_s <= t_s <= f.end_s)
        key = (t_s, active)
        if key not in self._cache:
            flows = {f.name: self.resources(f) for f in self.run.flows if f.name in active}
            capacity = {r: self._capacity_bps(r, t_s) for rs in flows.values() for r in rs}
            demand = {name: d for name, d in self.run.flow_demand_bps.items() if name in flows}
            self._cache = {key: max_min_shares(capacity, flows, demand)}   # one time at a time
        share = self._cache[key].get(flow.name)
        return share if share is not None and math.isfinite(share) else None


@dataclass(frozen=True)
class EstimateError:
    vs_share: Optional[float]      # mean |est - fair share| / fair share
    vs_rate: Optional[float]       # mean |est - own rate| / own rate
    samples: int                   # log rows with an estimate and a fair share


def estimate_error(run: SchemeRun, flow: FlowLog, shares: Optional[FairShares] = None,
                   window_s: float = DEFAULT_BIN_S) -> EstimateError:
    """The flow's estimate error against its fair share and against its own rate."""
    source = estimate_source(flow, run)
    if source is None:
        return EstimateError(None, None, 0)
    shares = shares or FairShares(run)
    own = _Delivered(flow)
    vs_share, vs_rate = [], []
    for sample in flow.samples:
        t_s = flow.start_s + sample["t_s"]
        # The own rate over the last window_s, or since the flow started if shorter.
        own_window_s = min(window_s, sample["t_s"])
        own_bps = own.rate_bps(t_s, own_window_s) if own_window_s > 0 else 0.0
        est = estimate_bps(run, sample, source, own_bps)
        if est is None:
            continue
        share = shares.share_bps(flow, t_s)
        if share is not None and share > 0:
            vs_share.append(abs(est - share) / share)
        if own_bps > 0:
            vs_rate.append(abs(est - own_bps) / own_bps)
    return EstimateError(sum(vs_share) / len(vs_share) if vs_share else None,
                         sum(vs_rate) / len(vs_rate) if vs_rate else None, len(vs_share))
