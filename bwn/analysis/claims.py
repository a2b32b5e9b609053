"""Metrics of one run and a claim's judgement over a grid's runs (docs/reproduce.md).

A metric is named ``NAME`` or ``NAME:ARG``:

| metric | value of one scheme run |
|---|---|
| ``goodput_bps:FLOW`` | the flow's goodput (payload), ``FLOW = all`` for the aggregate |
| ``utilization:FLOW`` | goodput / capacity the bottleneck offered (``all``: of every flow) |
| ``retransmissions:FLOW``, ``timeouts:FLOW`` | the sender's counts (``all``: summed) |
| ``rtt_mean_ms:FLOW`` | the flow's mean RTT |
| ``jain`` | Jain's index of the run's flows' goodputs |
| ``estimate_error:FLOW`` | the report's ``estimate_error_share``: mean |estimate - max-min fair share| / share (``mean``: over the flows that have one) |
| ``estimate_error_rate:FLOW`` | the report's ``estimate_error_rate``: against the flow's own rate |
| ``queue_fraction`` | mean queue / buffer of the busiest rate-limited port (fidelity telemetry) |
| ``link_utilization:L1,L2`` | per link, packets its busier port sent / packets its rate allowed over the run (frames, as the papers count link utilization); the mean over the links named |
| ``algo_ratio:A/B`` | mean goodput of the run's flows running A / that of flows running B |
| ``target_error:FLOW=BPS`` | |goodput - BPS| / BPS |
| ``share_fraction:FLOW`` | the flow's goodput / its max-min fair share (payload; the report's :class:`bwn.analysis.report.FairShares`, averaged over the flow's log rows) |
| ``reordered:FLOW`` | first transmissions the flow's receiver got after a later one (the network reordered them; receivers' ``reordered_segments``; ``all``: summed) |

A claim's quantity per case and seed is the metric of its scheme's run, or, for
a comparison (a claim with ``versus``: ``better``, ``equal``, and ``near`` or
``trend`` on a gain), the relative gain ``value(scheme) / value(versus) - 1`` of
the two runs that share a seed (same start offsets and flow ids), both valid; for
``lower_is_better`` metrics the gain is ``1 - value(scheme) / value(versus)``. A
``trend`` claim's quantity is, per seed, the least-squares slope of that over the
cases' parameter ``x``. How each is judged is bwn/analysis/stats.py's rule.

Each metric has a support that decides its interval (:func:`support_of`): counts
(retransmissions, timeouts, reordered segments), fractions in [0, 1]
(utilization, Jain's index, a queue's fill), and real numbers (rates, gains,
errors, ratios, slopes).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from bwn.analysis import report
from bwn.analysis import stats
from bwn.reproduce.grid import Case, Claim, Grid
from bwn.analysis.rejudge import FidelityRecordError, rejudge
from bwn.rundir import RunDir, RunMeta, RunMetaError


@dataclass
class RunRecord:
    """One scheme run of one case and seed."""

    case: str
    seed: int
    scheme: str
    path: Path
    complete: bool
    valid: Optional[bool]
    fidelity: str
    metrics: dict[str, Optional[float]] = field(default_factory=dict)
    duration_s: Optional[float] = None
    #: "`command` at commit" of the invocation that made the run, and when it ended
    made_by: str = ""
    finished_utc: str = ""
    #: read back from the committed PAPER-runs.csv: the run folder is not on this machine
    carried: bool = False
    #: the scenario's fingerprint (reproduce.scenario_fingerprint); "" when unknown
    scenario: str = ""

    @property
    def usable(self) -> bool:
        """Counted in means: complete and every invariant held."""
        return self.complete and self.valid is True


def _verdict(meta: RunMeta) -> tuple[Optional[bool], str]:
    """(valid, summary) by today's fidelity checks when run.json recorded what they
    read (bwn/analysis/rejudge.py), else the verdict it stored."""
    if meta.fidelity is not None and "recorded" in meta.fidelity:
        try:
            result = rejudge(meta)
        except FidelityRecordError:
            return meta.validity
        return result.valid, result.summary()
    return meta.validity


def load_record(case: str, seed: int, scheme: str, path: Path, metric_names: list[str]) -> RunRecord:
    try:
        meta = RunDir(path).meta()
    except RunMetaError as exc:
        raise report.ReportError(str(exc)) from None
    valid, summary = _verdict(meta)
    record = RunRecord(case, seed, scheme, path, meta.ok, valid, summary)
    if meta.duration_s is not None:
        record.duration_s = meta.duration_s
    if not record.complete:
        return record
    try:
        run = report.load_scheme_run(path, scheme)
        rows = report.summarize(run)
    except (report.ReportError, OSError, ValueError) as exc:
        record.complete = False
        record.fidelity = f"{summary}; report failed: {exc}"
        return record
    fid = meta.fidelity or {}
    for name in metric_names:
        record.metrics[name] = metric_value(name, run, rows, fid, path)
    return record


def receiver_counts(run_dir: Path, counter: str) -> dict[int, int]:
    """flow id -> a receiver counter, from every ``recv-*.summary.json`` in a run
    (receivers older than the counter leave it out)."""
    out: dict[int, int] = {}
    for summary in RunDir(run_dir).receiver_summaries():
        try:
            flows = json.loads(summary.read_text())
        except (OSError, ValueError):
            continue
        for flow in flows if isinstance(flows, list) else []:
            if isinstance(flow, dict) and isinstance(flow.get(counter), int) and "flow_id" in flow:
                out[int(flow["flow_id"])] = out.get(int(flow["flow_id"]), 0) + flow[counter]
    return out


def metric_value(name: str, run: report.SchemeRun, rows: list[dict[str, Any]],
                 fidelity: dict[str, Any], run_dir: Optional[Path] = None) -> Optional[float]:
    kind, _, arg = name.partition(":")
    by_flow = {r["flow"]: r for r in rows}

    def column(col: str, flow: str) -> Optional[float]:
        if flow == "all" and "all" not in by_flow and rows:
            flow = rows[0]["flow"]                       # a single-flow run: its one row
        row = by_flow.get(flow)
        value = None if row is None else row.get(col)
        return None if value is None else float(value)

    if kind in ("goodput_bps", "utilization", "retransmissions", "timeouts", "rtt_mean_ms"):
        return column(kind, arg or "all")
    if kind == "jain":
        values = [r["jain"] for r in rows if r.get("jain") is not None]
        return float(values[0]) if values else None
    if kind in ("estimate_error", "estimate_error_rate"):
        col = "estimate_error_share" if kind == "estimate_error" else "estimate_error_rate"
        if arg in ("", "mean"):
            errs = [float(r[col]) for r in rows if r["flow"] != "all" and r.get(col) is not None]
            return sum(errs) / len(errs) if errs else None
        return column(col, arg)
    if kind == "queue_fraction":
        queues = (fidelity.get("measurements") or {}).get("queues") or {}
        fractions = [q.get("mean_fraction") for q in queues.values() if q.get("mean_fraction") is not None]
        return max(fractions) if fractions else None
    if kind == "link_utilization":
        ports = (fidelity.get("measurements") or {}).get("ports") or {}
        per_link = []
        for link in [x for x in arg.split(",") if x]:
            values = [p["utilization"] for p in ports.values()
                      if p.get("link") == link and p.get("utilization") is not None]
            if not values:
                return None
            per_link.append(max(values))
        return sum(per_link) / len(per_link) if per_link else None
    if kind == "algo_ratio":
        a, _, b = arg.partition("/")
        ga = [f.goodput_bps for f in run.flows if f.algo == a and f.goodput_bps is not None]
        gb = [f.goodput_bps for f in run.flows if f.algo == b and f.goodput_bps is not None]
        if not ga or not gb or sum(gb) == 0:
            return None
        return (sum(ga) / len(ga)) / (sum(gb) / len(gb))
    if kind == "share_fraction":
        flow = next((f for f in run.flows if f.name == arg), None)
        goodput = column("goodput_bps", arg)
        if flow is None or goodput is None:
            return None
        fair = report.FairShares(run)
        shares = [fair.share_bps(flow, flow.start_s + float(s["t_s"])) for s in flow.samples]
        shares = [v for v in shares if v]
        return goodput / (sum(shares) / len(shares)) if shares else None
    if kind == "reordered":
        counts = receiver_counts(run_dir, "reordered_segments") if run_dir is not None else {}
        names = list(run.flow_ids) if arg in ("", "all") else [arg]
        values = [counts.get(run.flow_ids[n]) for n in names if n in run.flow_ids]
        known = [v for v in values if v is not None]
        return float(sum(known)) if values and len(known) == len(values) else None
    if kind == "target_error":
        flow, _, target = arg.partition("=")
        goodput = column("goodput_bps", flow)
        return None if goodput is None else abs(goodput - float(target)) / float(target)
    raise ValueError(f"unknown metric {name!r}")


#: Metric kinds whose value per run is a count, or a fraction in [0, 1].
COUNT_METRICS = ("retransmissions", "timeouts", "reordered")
FRACTION_METRICS = ("utilization", "jain", "queue_fraction", "link_utilization")


def support_of(metric: str) -> stats.Support:
    kind = metric.partition(":")[0]
    if kind in COUNT_METRICS:
        return stats.Support.COUNT
    if kind in FRACTION_METRICS:
        return stats.Support.FRACTION
    return stats.Support.REAL


@dataclass
class CaseJudgement:
    case: Case
    estimate: stats.Estimate            # of the claim's quantity (gain or value)
    outcome: str
    versus_estimate: Optional[stats.Estimate] = None   # comparisons: each side's own value
    scheme_estimate: Optional[stats.Estimate] = None
    invalid_runs: list[RunRecord] = field(default_factory=list)
    runs: list[RunRecord] = field(default_factory=list)


@dataclass
class ClaimJudgement:
    claim: Claim
    cases: list[CaseJudgement]
    verdict: str
    #: a 'trend' claim: the slope's estimate over the seeds, judged once for all its cases
    trend: Optional[stats.Estimate] = None


def _values(records: list[RunRecord], scheme: str, metric: str) -> dict[int, float]:
    return {r.seed: r.metrics[metric] for r in records
            if r.scheme == scheme and r.usable and r.metrics.get(metric) is not None}


def seed_quantities(claim: Claim, records: list[RunRecord]) -> dict[int, float]:
    """seed -> the claim's quantity in one case (the runs of that case): the metric,
    or for a comparison the paired gain of the two valid runs of the seed."""
    own = _values(records, claim.scheme, claim.metric)
    if not claim.compares:
        return own
    other = _values(records, claim.versus or "", claim.metric)
    gains = {}
    for seed in sorted(set(own) & set(other)):
        if other[seed] == 0:
            continue
        ratio = own[seed] / other[seed]
        gains[seed] = 1.0 - ratio if claim.lower_is_better else ratio - 1.0
    return gains


def quantity_support(claim: Claim) -> stats.Support:
    return stats.Support.REAL if claim.compares else support_of(claim.metric)


def case_outcome(claim: Claim, est: stats.Estimate) -> str:
    """A case's outcome under the decision rule (bwn/analysis/stats.py)."""
    if claim.kind == "better":
        return stats.outcome_better(est, claim.margin)
    if claim.kind == "equal":
        return stats.outcome_within(est, -claim.margin, claim.margin)
    if claim.kind == "at_least":
        return stats.outcome_above(est, claim.threshold or 0.0, strict=False)
    if claim.kind == "at_most":
        return stats.outcome_below(est, claim.threshold or 0.0, strict=False)
    if claim.kind == "near":
        low, high = claim.band()
        return stats.outcome_within(est, low, high)
    raise ValueError(f"claim {claim.id}: kind {claim.kind!r} has no per-case outcome")


def _x(claim: Claim, case: Case) -> float:
    import math
    x = float(case.params[claim.x or ""])
    return math.log(x) if claim.log_x else x


def judge(grid: Grid, claim: Claim, cases: list[Case], records: list[RunRecord]) -> ClaimJudgement:
    """The claim's outcome in each of its cases and its verdict (bwn/analysis/stats.py)."""
    judgements = []
    per_case: dict[str, dict[int, float]] = {}
    for case in grid.claim_cases(claim, cases):
        mine = [r for r in records if r.case == case.id and r.scheme in (claim.scheme, claim.versus)]
        invalid = [r for r in mine if r.complete and r.valid is False]
        quantities = seed_quantities(claim, mine)
        per_case[case.id] = quantities
        est = stats.mean_interval(list(quantities.values()), quantity_support(claim))
        scheme_est = stats.mean_interval(list(_values(mine, claim.scheme, claim.metric).values()),
                                         support_of(claim.metric))
        versus_est = None if not claim.compares else stats.mean_interval(
            list(_values(mine, claim.versus or "", claim.metric).values()), support_of(claim.metric))
        outcome = stats.NONE if claim.kind == "trend" or est.mean is None else case_outcome(claim, est)
        judgements.append(CaseJudgement(case, est, outcome, versus_est, scheme_est, invalid, mine))
    if claim.kind != "trend":
        return ClaimJudgement(claim, judgements, stats.verdict([j.outcome for j in judgements]))
    # One slope per seed over the cases that seed has a quantity in (at least two).
    xs = {j.case.id: _x(claim, j.case) for j in judgements}
    seeds = sorted({seed for q in per_case.values() for seed in q})
    slopes = []
    for seed in seeds:
        pts = [(xs[cid], q[seed]) for cid, q in per_case.items() if seed in q]
        value = stats.slope([x for x, _ in pts], [y for _, y in pts])
        if value is not None and len(pts) == len(per_case):
            slopes.append(value)
    trend = stats.mean_interval(slopes)
    if trend.mean is None:
        outcome = stats.NONE
    elif claim.direction == "increasing":
        outcome = stats.outcome_above(trend, 0.0)
    else:
        outcome = stats.outcome_below(trend, 0.0)
    return ClaimJudgement(claim, judgements, stats.verdict([outcome]), trend)
