"""Metrics of one scheme run, by name, for the claims of ``bwn reproduce`` (docs/reproduce.md, "Metrics").

A metric is named ``KIND``, ``KIND:ARG`` or ``KIND:ARG@WHEN``. ``ARG`` selects flows or
links; ``@WHEN`` is a time window ``T0-T1`` (several, ``a-b,c-d``, are averaged) or a list
of instants ``T1,T2,...``, in **seconds since the experiment started** (the times of
``telemetry.csv`` and of every flow's ``start_s``); a flow's window is clipped to the
flow's lifetime. A flow selector is a flow's name, ``all`` (every flow, or the aggregate
row), ``mean`` / ``min`` (over the flows that have the quantity), or a prefix ``P*``
(the flows whose names start with ``P``, averaged). Link metrics name links by their
scenario names (``b1,b2``); ``/both`` averages a link's two directions instead of taking
its busier one.

| metric | value of one scheme run |
|---|---|
| ``goodput_bps:FLOW[@T0-T1]`` | payload goodput; in a window, the payload acknowledged in it over its length (the flow log's cumulative bytes) |
| ``utilization:FLOW`` | goodput / capacity the bottleneck offered (``all``: of every flow) |
| ``retransmissions:FLOW``, ``timeouts:FLOW`` | the sender's counts (``all``: summed) |
| ``rtt_mean_ms:FLOW`` | the flow's mean RTT |
| ``jain[:SEL]`` | Jain's index of the goodputs of the run's flows (of the selected flows) |
| ``jain_share[:SEL]`` | Jain's index of each flow's goodput / its max-min fair share (fairness where the fair allocation is not equal goodputs) |
| ``epoch_jain[:SEL]`` | per epoch between flow arrivals, Jain's index of the active flows' goodput over the epoch's second half; the lowest |
| ``convergence_time_s:SEL=TOL`` | per epoch, the time from the arrival until every active flow's 1 s throughput stays within ± TOL of its max-min fair share to the epoch's end (the epoch's length if never); the longest |
| ``goodput_cv:FLOW@T0-T1`` | standard deviation / mean of the flow's 1 s goodput bins in the window |
| ``floor_fraction:FLOW=LEVEL[@T0-T1]`` | fraction of the flow's 1 s bins whose goodput is at least LEVEL (b/s, or a case parameter) |
| ``estimate_error:SEL[@W]`` | mean \\|estimate - max-min fair share\\| / share over the flow's log rows (the report's ``estimate_error_share``) |
| ``estimate_error_rate:SEL`` | the report's ``estimate_error_rate``: against the flow's own rate |
| ``estimate_bias:SEL[@W]`` | mean (estimate - share) / share, signed |
| ``estimate_bps:SEL[@W]`` | mean estimate (payload b/s) |
| ``estimate_cv:SEL@W`` | per window, standard deviation / mean of the estimate over its log rows; averaged over the windows |
| ``estimate_settling_s:FLOW=HOLD@T1,T2,...`` | per change at Ti, the time until the estimate stays within ± 10 % of the flow's fair share for HOLD s (the time to the next change if never); averaged over the changes |
| ``queue_fraction[:L1,L2[/both]]`` | mean queue / buffer (fidelity telemetry): no links, the busiest rate-limited port; per link its busier port (or both directions' mean), averaged over the links |
| ``link_utilization:L1,L2[/both][@T0-T1]`` | per link, packets its busier port sent / packets its rate allowed (or both directions' mean); in a window, the switch's measured rate / the link's rate over the telemetry samples in it |
| ``algo_ratio:A/B`` | mean goodput of the run's flows running A / that of flows running B |
| ``target_error:SEL=TARGET``, ``target_ratio:SEL=TARGET``, ``target_diff:SEL=TARGET`` | \\|goodput - TARGET\\| / TARGET, goodput / TARGET, goodput - TARGET (b/s; TARGET in b/s, or a case parameter) |
| ``share_fraction:SEL`` | goodput / max-min fair share (payload, the share averaged over the flow's log rows) |
| ``reordered:FLOW`` | first transmissions the flow's receiver got after a later one (``all``: summed) |
| ``drops:L1,L2`` | packets dropped at the links' switch egress ports, both directions, over the run: tail drops, RED's and Assured Forwarding's (the fidelity sampler's ``port_drops``; not random loss) |
| ``fct_s:SEL`` | mean flow completion time of the selected flows that send a byte count (bwn/analysis/fct.py: SYN to the ACK of the last byte); none when one of them did not complete |
| ``fct_slowdown:SEL`` | mean of their FCT / processor sharing's (2 RTT + size / fair share at the start); none when one did not complete |
| ``fct_incomplete:SEL`` | how many of them did not complete |

Each metric has a support that decides its interval (:func:`support_of`): counts,
fractions in [0, 1], and real numbers.
"""
from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence

from bwn.analysis.report.load import DEFAULT_BIN_S, FlowLog, SchemeRun
from bwn.analysis.report.rates import FairShares, _Delivered, estimate_bps, estimate_source, jain_index, run_span_s
from bwn.analysis import fct, stats
from bwn.rundir import RunDir

#: Every metric kind this module computes.
KINDS = ("goodput_bps", "utilization", "retransmissions", "timeouts", "rtt_mean_ms", "jain", "jain_share",
         "epoch_jain", "convergence_time_s", "goodput_cv", "floor_fraction", "estimate_error",
         "estimate_error_rate", "estimate_bias", "estimate_bps", "estimate_cv", "estimate_settling_s",
         "queue_fraction", "link_utilization", "algo_ratio", "target_error", "target_ratio", "target_diff",
         "share_fraction", "reordered", "drops", "compliant_bps", "besteffort_bps", "besteffort_share",
         "fct_s", "fct_slowdown", "fct_incomplete")
#: Metric kinds whose value per run is a count, or a fraction in [0, 1].
COUNT_METRICS = ("retransmissions", "timeouts", "reordered", "drops", "fct_incomplete")
FRACTION_METRICS = ("utilization", "jain", "jain_share", "epoch_jain", "queue_fraction", "link_utilization",
                    "floor_fraction")
#: Width of the bins of per-second metrics, s; the sampling step of convergence; arrivals
#: closer than MERGE_S open one epoch.
BIN_S = 1.0
STEP_S = 0.25
MERGE_S = 1.0
#: The band an estimate must stay in to have settled (a fraction of the fair share).
SETTLE_BAND = 0.10


class MetricError(ValueError):
    """A metric name this module cannot compute; the message says why."""


@dataclass(frozen=True)
class Metric:
    kind: str
    arg: str = ""
    when: str = ""

    @property
    def windows(self) -> list[tuple[float, float]]:
        return parse_windows(self.when)

    @property
    def instants(self) -> list[float]:
        return parse_instants(self.when)


def parse(name: str) -> Metric:
    kind, _, rest = name.partition(":")
    if "@" in kind:                                  # "jain@10-20": a window without an argument
        kind, _, when = kind.partition("@")
        return Metric(kind, "", when)
    arg, _, when = rest.partition("@")
    return Metric(kind, arg, when)


def parse_windows(text: str) -> list[tuple[float, float]]:
    """``"a-b,c-d"`` -> [(a, b), (c, d)]; "" -> []."""
    out = []
    for part in (p for p in text.split(",") if p.strip()):
        low, sep, high = part.partition("-")
        try:
            t0, t1 = float(low), float(high)
        except ValueError:
            raise MetricError(f"a window is T0-T1 in seconds, not {part!r}") from None
        if not sep or t1 <= t0 or t0 < 0:
            raise MetricError(f"a window is T0-T1 with 0 <= T0 < T1, not {part!r}")
        out.append((t0, t1))
    return out


def parse_instants(text: str) -> list[float]:
    try:
        out = [float(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise MetricError(f"instants are T1,T2,... in seconds, not {text!r}") from None
    if out != sorted(out) or len(set(out)) != len(out):
        raise MetricError(f"instants must increase: {text!r}")
    return out


def check(name: str) -> None:
    """Raise MetricError when ``name`` is not a metric this module computes (its
    syntax); the grid loader calls it so that a typo fails before any run."""
    m = parse(name)
    if m.kind not in KINDS:
        raise MetricError(f"unknown metric kind {m.kind!r} in {name!r}")
    if m.kind in ("estimate_settling_s",):
        if not m.instants:
            raise MetricError(f"{name!r}: give the changes' times, @T1,T2,...")
        _level(m.arg.partition("=")[2], {}, name)
    elif m.when:
        if m.kind not in WINDOWED:
            raise MetricError(f"{name!r}: {m.kind} takes no window")
        m.windows
    elif m.kind in ("goodput_cv", "estimate_cv"):
        raise MetricError(f"{name!r}: give the window(s), @T0-T1")
    if m.kind in ("convergence_time_s", "floor_fraction", "target_error", "target_ratio", "target_diff") \
            and "=" not in m.arg:
        raise MetricError(f"{name!r}: {m.kind} needs =VALUE after the flows")
    if m.kind == "algo_ratio" and "/" not in m.arg:
        raise MetricError(f"{name!r}: algo_ratio is A/B")
    if m.kind == "drops" and not [n for n in m.arg.split(",") if n]:
        raise MetricError(f"{name!r}: drops names its links, drops:L1,L2")


WINDOWED = ("goodput_bps", "goodput_cv", "floor_fraction", "estimate_error", "estimate_bias", "estimate_bps",
            "estimate_cv", "link_utilization")


def support_of(metric: str) -> stats.Support:
    kind = parse(metric).kind
    if kind in COUNT_METRICS:
        return stats.Support.COUNT
    if kind in FRACTION_METRICS:
        return stats.Support.FRACTION
    return stats.Support.REAL


# -- selecting flows -------------------------------------------------------------------------

def select(run: SchemeRun, selector: str) -> list[FlowLog]:
    """The flows a selector names: ``all``/``mean``/``min``/"" every flow, ``P*`` a prefix,
    else the flow of that name."""
    if selector in ("", "all", "mean", "min"):
        return list(run.flows)
    if selector.endswith("*"):
        return [f for f in run.flows if f.name.startswith(selector[:-1])]
    return [f for f in run.flows if f.name == selector]


def _combine(selector: str, values: Sequence[Optional[float]]) -> Optional[float]:
    known = [v for v in values if v is not None and math.isfinite(v)]
    if not known:
        return None
    if selector == "min":
        return min(known)
    if len(known) == 1 and selector not in ("", "all", "mean") and not selector.endswith("*"):
        return known[0]
    return sum(known) / len(known)


def _level(text: str, params: Mapping[str, Any], name: str) -> float:
    """A number, or the value of the case parameter of that name."""
    try:
        return float(text)
    except ValueError:
        pass
    if text in params and isinstance(params[text], (int, float)) and not isinstance(params[text], bool):
        return float(params[text])
    if params or not text:
        raise MetricError(f"{name!r}: {text!r} is neither a number nor a numeric case parameter")
    return math.nan                      # checked without a case: a parameter name, resolved per case


# -- time series of one flow ---------------------------------------------------------------

def _life(flow: FlowLog, t0: float, t1: float) -> tuple[float, float]:
    return max(t0, flow.start_s), min(t1, flow.end_s)


def _delivered(flow: FlowLog) -> _Delivered:
    return _Delivered(flow)


def window_goodput_bps(flow: FlowLog, t0: float, t1: float,
                       delivered: Optional[_Delivered] = None) -> Optional[float]:
    """Payload acknowledged in [t0, t1] (clipped to the flow's life) over that time, b/s."""
    a, b = _life(flow, t0, t1)
    if b - a <= 0:
        return None
    d = delivered or _delivered(flow)
    if len(d.times) < 2:
        return None
    return d.rate_bps(b, b - a)


def bins_bps(flow: FlowLog, t0: float, t1: float, bin_s: float = BIN_S) -> list[float]:
    """The flow's goodput in consecutive whole bins of ``bin_s`` from the window's start."""
    a, b = _life(flow, t0, t1)
    d = _delivered(flow)
    if len(d.times) < 2:
        return []
    out = []
    t = a
    while t + bin_s <= b + 1e-9:
        out.append(d.rate_bps(t + bin_s, bin_s))
        t += bin_s
    return out


def _estimates(run: SchemeRun, flow: FlowLog, shares: FairShares,
               t0: float = 0.0, t1: float = math.inf) -> list[tuple[float, float, Optional[float]]]:
    """(experiment time, estimate, fair share) of the flow's log rows in [t0, t1] that have
    an estimate (payload b/s, as the report's estimate_error reads them)."""
    source = estimate_source(flow, run)
    if source is None:
        return []
    own = _Delivered(flow)
    out = []
    for sample in flow.samples:
        t_s = flow.start_s + sample["t_s"]
        if not t0 <= t_s <= t1:
            continue
        own_window_s = min(DEFAULT_BIN_S, sample["t_s"])
        own_bps = own.rate_bps(t_s, own_window_s) if own_window_s > 0 else 0.0
        est = estimate_bps(run, sample, source, own_bps)
        if est is None:
            continue
        share = shares.share_bps(flow, t_s)
        out.append((t_s, est, share if share and share > 0 else None))
    return out


def _per_window(windows: list[tuple[float, float]], one: Callable[[float, float], Optional[float]]) -> Optional[float]:
    values = [one(t0, t1) for t0, t1 in (windows or [(0.0, math.inf)])]
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known and len(known) == len(values) else None


def _cv(values: Sequence[float]) -> Optional[float]:
    if len(values) < 2:
        return None
    mean = sum(values) / len(values)
    return statistics.stdev(values) / mean if mean > 0 else None


# -- epochs between arrivals -----------------------------------------------------------------

def epochs(flows: Sequence[FlowLog], end_s: float) -> list[tuple[float, float, list[FlowLog]]]:
    """(start, end, the flows active in it) per interval between arrivals: arrivals closer
    than MERGE_S open one epoch, at the later one."""
    starts = sorted(f.start_s for f in flows)
    arrivals: list[float] = []
    for s in starts:
        if arrivals and s - arrivals[-1] < MERGE_S:
            arrivals[-1] = s
        else:
            arrivals.append(s)
    out = []
    for i, a in enumerate(arrivals):
        b = arrivals[i + 1] if i + 1 < len(arrivals) else end_s
        active = [f for f in flows if f.start_s <= a + 1e-9 and f.end_s > a]
        if active:
            b = min(b, min(f.end_s for f in active))
        if b > a:
            out.append((a, b, active))
    return out


def convergence_time_s(run: SchemeRun, flows: Sequence[FlowLog], tolerance: float) -> Optional[float]:
    if not flows:
        return None
    shares = FairShares(run)
    delivered = {f.name: _delivered(f) for f in flows}
    worst = None
    for a, b, active in epochs(flows, max(f.end_s for f in flows)):
        grid = []
        t = a + BIN_S
        while t < b - 1e-6:                     # before the next arrival changes the shares
            grid.append(t)
            t += STEP_S
        if not grid:
            continue

        def holds(t_s: float) -> bool:
            for f in active:
                share = shares.share_bps(f, t_s)
                rate = delivered[f.name].rate_bps(t_s, BIN_S)
                if share is None or share <= 0 or abs(rate - share) > tolerance * share:
                    return False
            return True
        settled = None
        for t_s in reversed(grid):              # the first time after which it always holds
            if not holds(t_s):
                break
            settled = t_s
        value = (b - a) if settled is None else settled - a
        worst = value if worst is None else max(worst, value)
    return worst


def epoch_jain(flows: Sequence[FlowLog]) -> Optional[float]:
    if not flows:
        return None
    lowest = None
    for a, b, active in epochs(flows, max(f.end_s for f in flows)):
        mid = (a + b) / 2
        goodputs = [window_goodput_bps(f, mid, b) for f in active]
        if any(g is None for g in goodputs):
            return None
        value = jain_index([g for g in goodputs if g is not None])     # None for one flow
        if value is not None:
            lowest = value if lowest is None else min(lowest, value)
    return lowest


def settling_s(est: list[tuple[float, float, Optional[float]]], changes: Sequence[float], hold_s: float,
               end_s: float) -> Optional[float]:
    """Mean over the changes of the time until the estimate stays within SETTLE_BAND of the
    share for ``hold_s``; a change it never settles after counts the time to the next."""
    values = []
    for i, ti in enumerate(changes):
        until = changes[i + 1] if i + 1 < len(changes) else end_s
        rows = [(t, e, s) for t, e, s in est if ti <= t < until and s]
        if not rows:
            return None
        ok = [abs(e - s) <= SETTLE_BAND * s for _, e, s in rows]
        next_bad = [math.inf] * len(rows)            # the time of the first row out of the band from k on
        later = math.inf
        for k in range(len(rows) - 1, -1, -1):
            if not ok[k]:
                later = rows[k][0]
            next_bad[k] = later
        settled = None
        for k, (t, _, _) in enumerate(rows):
            if t + hold_s > until:
                break
            if next_bad[k] > t + hold_s:
                settled = t
                break
        values.append((until - ti) if settled is None else settled - ti)
    return sum(values) / len(values) if values else None


# -- links ---------------------------------------------------------------------------------

def _link_args(arg: str) -> tuple[list[str], bool]:
    names, _, mode = arg.partition("/")
    if mode not in ("", "both"):
        raise MetricError(f"a link metric's mode is /both, not /{mode}")
    return [n for n in names.split(",") if n], mode == "both"


def _per_link(values_by_link: Mapping[str, list[float]], links: list[str], both: bool) -> Optional[float]:
    per_link = []
    for link in links:
        values = values_by_link.get(link)
        if not values:
            return None
        per_link.append(sum(values) / len(values) if both else max(values))
    return sum(per_link) / len(per_link) if per_link else None


def _port_links(fidelity: Mapping[str, Any]) -> dict[str, str]:
    ports = (fidelity.get("measurements") or {}).get("ports") or {}
    return {key: p["link"] for key, p in ports.items() if p.get("link")}


# -- the value of one metric ---------------------------------------------------------------

#: The DSCP a reservation's edge gives in-profile packets (RFC 2597's AF11,
#: controller/entries.py DSCP_AF11): GTCP's compliant component.
IN_PROFILE_DSCP = 10


def _receiver_flows(run_dir: Path) -> Iterator[dict[str, Any]]:
    """Every flow entry (with a ``flow_id``) of every ``recv-*.summary.json`` in a run;
    a summary that cannot be read is passed over."""
    for summary in RunDir(run_dir).receiver_summaries():
        try:
            flows = json.loads(summary.read_text())
        except (OSError, ValueError):
            continue
        for flow in flows if isinstance(flows, list) else []:
            if isinstance(flow, dict) and "flow_id" in flow:
                yield flow


def receiver_dscp_bytes(run_dir: Path) -> dict[int, dict[int, int]]:
    """flow id -> {DSCP: new payload bytes that arrived with it}, from every
    ``recv-*.summary.json`` in a run (receivers older than the count leave it out)."""
    out: dict[int, dict[int, int]] = {}
    for flow in _receiver_flows(run_dir):
        by_dscp = flow.get("payload_bytes_by_dscp")
        if not isinstance(by_dscp, dict):
            continue
        mine = out.setdefault(int(flow["flow_id"]), {})
        for dscp, count in by_dscp.items():
            if str(dscp).isdigit() and isinstance(count, int):
                mine[int(dscp)] = mine.get(int(dscp), 0) + count
    return out


def _profile_parts_bps(run: SchemeRun, run_dir: Optional[Path], goodput_of: Callable[[str], Optional[float]]
                       ) -> dict[str, tuple[float, float]]:
    """flow name -> (compliant, best-effort) payload bit/s: the flow's goodput split
    by the share of its payload that arrived in profile (IN_PROFILE_DSCP) and not."""
    by_id = receiver_dscp_bytes(run_dir) if run_dir is not None else {}
    parts: dict[str, tuple[float, float]] = {}
    for f in run.flows:
        counts = by_id.get(run.flow_ids.get(f.name, -1))
        goodput = goodput_of(f.name)
        total = sum(counts.values()) if counts else 0
        if goodput is None or not total:
            continue
        in_profile = counts.get(IN_PROFILE_DSCP, 0) / total
        parts[f.name] = (goodput * in_profile, goodput * (1.0 - in_profile))
    return parts


def receiver_counts(run_dir: Path, counter: str) -> dict[int, int]:
    """flow id -> a receiver counter, from every ``recv-*.summary.json`` in a run
    (receivers older than the counter leave it out)."""
    out: dict[int, int] = {}
    for flow in _receiver_flows(run_dir):
        if isinstance(flow.get(counter), int):
            out[int(flow["flow_id"])] = out.get(int(flow["flow_id"]), 0) + flow[counter]
    return out


def metric_value(name: str, run: SchemeRun, rows: list[dict[str, Any]], fidelity: Mapping[str, Any],
                 run_dir: Optional[Path] = None, params: Optional[Mapping[str, Any]] = None) -> Optional[float]:
    """The value of metric ``name`` in one scheme run (None when the run has nothing to
    compute it from); ``params`` are the case's, for ``=PARAM`` targets and levels."""
    m = parse(name)
    kind, arg = m.kind, m.arg
    params = params or {}
    by_flow = {r["flow"]: r for r in rows}

    def column(col: str, flow: str) -> Optional[float]:
        if flow == "all" and "all" not in by_flow and rows:
            flow = rows[0]["flow"]                       # a single-flow run: its one row
        row = by_flow.get(flow)
        value = None if row is None else row.get(col)
        return None if value is None else float(value)

    def over_flows(selector: str, one: Callable[[FlowLog], Optional[float]]) -> Optional[float]:
        return _combine(selector, [one(f) for f in select(run, selector)])

    if kind == "goodput_bps" and m.when:
        windows = m.windows
        if arg in ("", "all"):
            def aggregate(t0: float, t1: float) -> Optional[float]:
                t0_run, t1_run = run_span_s(run)
                a, b = max(t0, t0_run), min(t1, t1_run)
                if b <= a:
                    return None
                total = 0.0
                for f in run.flows:
                    fa, fb = _life(f, a, b)
                    g = window_goodput_bps(f, fa, fb) if fb > fa else 0.0
                    total += (g or 0.0) * max(fb - fa, 0.0)
                return total / (b - a)
            return _per_window(windows, aggregate)
        return over_flows(arg, lambda f: _per_window(windows, lambda a, b: window_goodput_bps(f, a, b)))
    if kind in ("goodput_bps", "utilization", "retransmissions", "timeouts", "rtt_mean_ms"):
        if arg.endswith("*"):
            return _combine(arg, [column(kind, f.name) for f in select(run, arg)])
        return column(kind, arg or "all")
    if kind == "goodput_cv":
        return over_flows(arg, lambda f: _per_window(m.windows, lambda a, b: _cv(bins_bps(f, a, b))))
    if kind == "floor_fraction":
        sel, _, level_text = arg.partition("=")
        level = _level(level_text, params, name)

        def fraction(f: FlowLog, a: float, b: float) -> Optional[float]:
            bins = bins_bps(f, a, b)
            return sum(1 for v in bins if v >= level) / len(bins) if bins else None
        return over_flows(sel, lambda f: _per_window(m.windows, lambda a, b: fraction(f, a, b)))
    if kind == "jain":
        if arg in ("", "all"):
            values = [r["jain"] for r in rows if r.get("jain") is not None]
            return float(values[0]) if values else None
        goodputs = [f.goodput_bps for f in select(run, arg)]
        return None if any(g is None for g in goodputs) else jain_index([g for g in goodputs if g is not None])
    if kind == "jain_share":
        fractions = [_share_fraction(run, f, column("goodput_bps", f.name)) for f in select(run, arg)]
        return None if not fractions or any(v is None for v in fractions) else \
            jain_index([v for v in fractions if v is not None])
    if kind == "epoch_jain":
        return epoch_jain(select(run, arg))
    if kind == "convergence_time_s":
        sel, _, tol = arg.partition("=")
        return convergence_time_s(run, select(run, sel), _level(tol, params, name))
    if kind in ("estimate_error", "estimate_error_rate") and not m.when:
        col = "estimate_error_share" if kind == "estimate_error" else "estimate_error_rate"
        if arg in ("", "mean") or arg.endswith("*"):
            names = {f.name for f in select(run, arg)}
            errs = [float(r[col]) for r in rows if r["flow"] != "all" and r["flow"] in names
                    and r.get(col) is not None]
            return sum(errs) / len(errs) if errs else None
        return column(col, arg)
    if kind in ("estimate_error", "estimate_bias", "estimate_bps", "estimate_cv", "estimate_settling_s"):
        shares = FairShares(run)
        sel = arg.partition("=")[0]

        def per_flow(f: FlowLog) -> Optional[float]:
            if kind == "estimate_settling_s":
                hold = _level(arg.partition("=")[2], params, name)
                return settling_s(_estimates(run, f, shares), m.instants, hold, f.end_s)

            def one(a: float, b: float) -> Optional[float]:
                est = _estimates(run, f, shares, a, b)
                if kind == "estimate_bps":
                    return sum(e for _, e, _ in est) / len(est) if est else None
                if kind == "estimate_cv":
                    return _cv([e for _, e, _ in est])
                rel = [(e - s) / s for _, e, s in est if s]
                if not rel:
                    return None
                return sum(abs(v) for v in rel) / len(rel) if kind == "estimate_error" else sum(rel) / len(rel)
            return _per_window(m.windows, one)
        return over_flows(sel, per_flow)
    if kind == "queue_fraction":
        queues = (fidelity.get("measurements") or {}).get("queues") or {}
        if not arg:
            fractions = [q.get("mean_fraction") for q in queues.values() if q.get("mean_fraction") is not None]
            return max(fractions) if fractions else None
        links, both = _link_args(arg)
        port_link = _port_links(fidelity)
        by_link: dict[str, list[float]] = {}
        for key, q in queues.items():
            if key in port_link and q.get("mean_fraction") is not None:
                by_link.setdefault(port_link[key], []).append(float(q["mean_fraction"]))
        return _per_link(by_link, links, both)
    if kind == "link_utilization":
        links, both = _link_args(arg)
        port_link = _port_links(fidelity)
        by_link = {}
        if m.when:
            windows = m.windows
            for key, link in port_link.items():
                samples = [s for s in run.telemetry if s.key == key and s.rate_kbps is not None
                           and s.capacity_kbps and any(a <= s.t_s <= b for a, b in windows)]
                if samples:
                    by_link.setdefault(link, []).append(
                        sum(s.rate_kbps / s.capacity_kbps for s in samples) / len(samples))  # type: ignore[operator]
        else:
            ports = (fidelity.get("measurements") or {}).get("ports") or {}
            for p in ports.values():
                if p.get("link") and p.get("utilization") is not None:
                    by_link.setdefault(p["link"], []).append(float(p["utilization"]))
        return _per_link(by_link, links, both)
    if kind == "algo_ratio":
        a, _, b = arg.partition("/")
        ga = [f.goodput_bps for f in run.flows if f.algo == a and f.goodput_bps is not None]
        gb = [f.goodput_bps for f in run.flows if f.algo == b and f.goodput_bps is not None]
        if not ga or not gb or sum(gb) == 0:
            return None
        return (sum(ga) / len(ga)) / (sum(gb) / len(gb))
    if kind == "share_fraction":
        return over_flows(arg, lambda f: _share_fraction(run, f, column("goodput_bps", f.name)))
    if kind == "drops":
        counts = (fidelity.get("measurements") or {}).get("port_drops")
        links = [n for n in arg.split(",") if n]
        if counts is None or not links:
            return None
        total = 0
        for link in links:
            ports = [c for c in counts.values() if c.get("link") == link]
            if not ports:
                return None
            total += sum(int(c["drops"]) for c in ports)
        return float(total)
    if kind in ("fct_s", "fct_slowdown", "fct_incomplete"):
        return fct.fct_value(fct.select(fct.fcts(run), arg), kind)
    if kind == "reordered":
        counts = receiver_counts(run_dir, "reordered_segments") if run_dir is not None else {}
        names = list(run.flow_ids) if arg in ("", "all") else [arg]
        values = [counts.get(run.flow_ids[n]) for n in names if n in run.flow_ids]
        known = [v for v in values if v is not None]
        return float(sum(known)) if values and len(known) == len(values) else None
    if kind in ("compliant_bps", "besteffort_bps", "besteffort_share"):
        parts = _profile_parts_bps(run, run_dir, lambda n: column("goodput_bps", n))
        if kind == "compliant_bps":
            return over_flows(arg, lambda f: parts[f.name][0] if f.name in parts else None)
        if kind == "besteffort_bps":
            return over_flows(arg, lambda f: parts[f.name][1] if f.name in parts else None)
        # a flow's best-effort component over the mean goodput of the best-effort
        # flows (those none of whose payload arrived in profile)
        best_effort = [p[1] for p in parts.values() if p[0] == 0.0]
        if not best_effort or sum(best_effort) <= 0:
            return None
        mean_bps = sum(best_effort) / len(best_effort)
        return over_flows(arg, lambda f: parts[f.name][1] / mean_bps if f.name in parts else None)
    if kind in ("target_error", "target_ratio", "target_diff"):
        sel, _, target_text = arg.partition("=")
        target = _level(target_text, params, name)

        def against(goodput: Optional[float]) -> Optional[float]:
            if goodput is None:
                return None
            if kind == "target_diff":
                return goodput - target
            if target == 0:
                return None
            return abs(goodput - target) / target if kind == "target_error" else goodput / target
        if sel in ("", "all"):
            return against(column("goodput_bps", "all"))
        return over_flows(sel, lambda f: against(column("goodput_bps", f.name)))
    raise MetricError(f"unknown metric {name!r}")


def _share_fraction(run: SchemeRun, flow: FlowLog, goodput: Optional[float]) -> Optional[float]:
    """The flow's goodput / its max-min fair share averaged over its log rows."""
    if goodput is None:
        return None
    fair = FairShares(run)
    shares = [fair.share_bps(flow, flow.start_s + float(s["t_s"])) for s in flow.samples]
    shares = [v for v in shares if v]
    return goodput / (sum(shares) / len(shares)) if shares else None
