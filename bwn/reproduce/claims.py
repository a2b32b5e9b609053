"""A claim's judgement over a grid's runs (docs/reproduce.md, "The decision rule").

The metrics of one run are bwn/analysis/metrics.py's (re-exported here). A claim's
quantity per case and seed is the metric of its scheme's run; for a comparison (a
claim with ``versus``) the relative gain ``value(scheme) / value(versus) - 1`` of
the two runs that share a seed (same start offsets and flow ids), both valid, or
``1 - value(scheme) / value(versus)`` for ``lower_is_better`` metrics, or with
``difference`` the paired difference ``value(scheme) - value(versus)``; for a claim
``relative_to`` another case, the value in the case over the value of the same
scheme and seed in that case. A ``trend`` claim's quantity is, per seed and group of
cases, the fitted change of that over the cases' parameter ``x`` (or the range of
the cases' values). How each is judged is bwn/analysis/stats.py's rule.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from bwn.analysis import metrics
from bwn.analysis.report.load import ReportError, load_scheme_run
from bwn.analysis.report.tables import summarize
from bwn.analysis import stats
from bwn.analysis.metrics import (  # noqa: F401  (the metric functions, by their old home)
    COUNT_METRICS,
    FRACTION_METRICS,
    metric_value,
    receiver_counts,
    support_of,
)
from bwn.reproduce.grid import Case, Claim, Grid
from bwn.analysis.fidelity import FidelityRecordError
from bwn.analysis.rejudge import rejudge
from bwn.rundir import RunDir, RunMeta, RunMetaError


#: The fidelity text of a planned run that no attempt has made yet.
NOT_RUN = "not run"


@dataclass
class RunRecord:
    """One scheme run of one case and seed (``fidelity`` is :data:`NOT_RUN` for a
    planned run never attempted)."""

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


def load_record(case: str, seed: int, scheme: str, path: Path, metric_names: list[str],
                params: Optional[Mapping[str, Any]] = None) -> RunRecord:
    """A run from its folder: validity and the metrics (``params``: the case's, for
    metrics whose target or level is a case parameter)."""
    try:
        meta = RunDir(path).meta()
    except RunMetaError as exc:
        raise ReportError(str(exc)) from None
    valid, summary = _verdict(meta)
    record = RunRecord(case, seed, scheme, path, meta.ok, valid, summary)
    if meta.duration_s is not None:
        record.duration_s = meta.duration_s
    if not record.complete:
        return record
    try:
        run = load_scheme_run(path, scheme)
        rows = summarize(run)
    except (ReportError, OSError, ValueError) as exc:
        record.complete = False
        record.fidelity = f"{summary}; report failed: {exc}"
        return record
    fid = meta.fidelity or {}
    for name in metric_names:
        try:
            record.metrics[name] = metric_value(name, run, rows, fid, path, params)
        except metrics.MetricError:
            record.metrics[name] = None       # a parameter this case does not have
    return record


@dataclass
class CaseJudgement:
    case: Case
    estimate: stats.Estimate            # of the claim's quantity (gain or value)
    outcome: str
    versus_estimate: Optional[stats.Estimate] = None   # comparisons: each side's own value
    scheme_estimate: Optional[stats.Estimate] = None
    invalid_runs: list[RunRecord] = field(default_factory=list)
    runs: list[RunRecord] = field(default_factory=list)
    #: seed -> the claim's quantity, for the seeds that count
    quantities: dict[int, float] = field(default_factory=dict)


@dataclass
class GroupJudgement:
    """A trend over one group of cases: the change per seed, its interval, its outcome."""

    cases: tuple[str, ...]
    estimate: stats.Estimate
    outcome: str


@dataclass
class ClaimJudgement:
    claim: Claim
    cases: list[CaseJudgement]
    verdict: str
    #: a 'trend' claim: per group of cases, the change over the sweep and its outcome
    groups: list[GroupJudgement] = field(default_factory=list)

    @property
    def trend(self) -> Optional[stats.Estimate]:
        """A trend of one group: its estimate (None otherwise)."""
        return self.groups[0].estimate if len(self.groups) == 1 else None


def _values(records: Sequence[RunRecord], scheme: str, metric: str) -> dict[int, float]:
    return {r.seed: r.metrics[metric] for r in records  # type: ignore[misc]
            if r.scheme == scheme and r.usable and r.metrics.get(metric) is not None}


def paired(claim: Claim, own: float, other: float) -> Optional[float]:
    """The comparison of one seed's two values (module docstring); None when undefined."""
    if claim.difference:
        return own - other
    if other == 0:
        return None
    ratio = own / other
    return 1.0 - ratio if claim.lower_is_better else ratio - 1.0


def seed_quantities(claim: Claim, records: Sequence[RunRecord],
                    reference: Optional[Sequence[RunRecord]] = None) -> dict[int, float]:
    """seed -> the claim's quantity in one case (the runs of that case): the metric,
    for a comparison the paired gain (or difference) of the two valid runs of the seed,
    for a claim relative to another case (``reference``: its runs) the ratio to the
    same scheme's value there."""
    own = _values(records, claim.scheme, claim.metric)
    if claim.relative_to is not None:
        ref = _values(reference or [], claim.scheme, claim.metric)
        return {s: own[s] / ref[s] for s in sorted(set(own) & set(ref)) if ref[s] != 0}
    if not claim.compares:
        return own
    other = _values(records, claim.versus or "", claim.metric)
    out = {}
    for seed in sorted(set(own) & set(other)):
        value = paired(claim, own[seed], other[seed])
        if value is not None:
            out[seed] = value
    return out


def quantity_support(claim: Claim) -> stats.Support:
    return stats.Support.REAL if claim.compares or claim.relative_to else support_of(claim.metric)


def case_outcome(claim: Claim, est: stats.Estimate) -> str:
    """A case's outcome under the decision rule (bwn/analysis/stats.py)."""
    if claim.kind == "better":
        return stats.outcome_better(est, claim.margin)
    if claim.kind == "equal":
        return stats.outcome_within(est, -claim.margin, claim.margin)
    if claim.kind == "not_worse":
        return stats.outcome_not_worse(est, claim.margin)
    if claim.kind == "at_least":
        return stats.outcome_above(est, claim.threshold or 0.0, strict=False)
    if claim.kind == "at_most":
        return stats.outcome_below(est, claim.threshold or 0.0, strict=False)
    if claim.kind == "near":
        low, high = claim.band()
        return stats.outcome_within(est, low, high)
    raise ValueError(f"claim {claim.id}: kind {claim.kind!r} has no per-case outcome")


def x_of(claim: Claim, case: Case) -> float:
    """A case's position in a trend's sweep (its parameter ``x``, or ln x)."""
    if claim.x is None:
        return 0.0
    x = float(case.params[claim.x])
    return math.log(x) if claim.log_x else x


def judge(grid: Grid, claim: Claim, cases: Sequence[Case], records: Sequence[RunRecord]) -> ClaimJudgement:
    """The claim's outcome in each of its cases and its verdict (bwn/analysis/stats.py);
    a claim that waits for machinery has none."""
    if claim.waiting:
        return ClaimJudgement(claim, [], stats.WAITING)
    judgements = []
    per_case: dict[str, dict[int, float]] = {}
    reference = [r for r in records if r.case == claim.relative_to] if claim.relative_to else None
    for case in grid.claim_cases(claim, cases):
        mine = [r for r in records if r.case == case.id and r.scheme in claim.schemes_used]
        invalid = [r for r in mine if r.complete and r.valid is False]
        quantities = seed_quantities(claim, mine, reference)
        per_case[case.id] = quantities
        est = stats.mean_interval(list(quantities.values()), quantity_support(claim))
        scheme_est = stats.mean_interval(list(_values(mine, claim.scheme, claim.metric).values()),
                                         support_of(claim.metric))
        versus_est = None if not claim.compares else stats.mean_interval(
            list(_values(mine, claim.versus or "", claim.metric).values()), support_of(claim.metric))
        outcome = stats.NONE if claim.kind == "trend" or est.mean is None else case_outcome(claim, est)
        judgements.append(CaseJudgement(case, est, outcome, versus_est, scheme_est, invalid, mine, quantities))
    if not any(r.fidelity != NOT_RUN for j in judgements for r in j.runs):
        # nothing of it attempted yet: the page says so, not "no valid run"
        return ClaimJudgement(claim, judgements, stats.NOT_RUN_YET)
    if claim.kind != "trend":
        return ClaimJudgement(claim, judgements, stats.verdict([j.outcome for j in judgements]))
    groups = []
    by_id = {j.case.id: j.case for j in judgements}
    for group in claim.trend_groups() if claim.cases else (tuple(by_id),):
        members = [cid for cid in group if cid in by_id]
        est = trend_estimate(claim, [by_id[cid] for cid in members], per_case)
        outcome = stats.NONE if est.mean is None else \
            stats.outcome_trend(est, claim.direction or "", claim.margin, claim.measure)
        groups.append(GroupJudgement(tuple(members), est, outcome))
    return ClaimJudgement(claim, judgements, stats.verdict([g.outcome for g in groups]), groups)


def trend_estimate(claim: Claim, cases: Sequence[Case], per_case: Mapping[str, Mapping[int, float]]) -> stats.Estimate:
    """The interval of a trend's quantity over the seeds that have a value in every case
    of the group: the fitted change over the sweep, or the range of the values."""
    if len(cases) < 2:
        return stats.Estimate(0, None, None, None)
    seeds = sorted(set.intersection(*(set(per_case.get(c.id, {})) for c in cases)))
    values = []
    for seed in seeds:
        ys = [per_case[c.id][seed] for c in cases]
        if claim.measure == "range":
            values.append(max(ys) - min(ys))
            continue
        change = stats.fitted_change([x_of(claim, c) for c in cases], ys)
        if change is not None:
            values.append(change)
    return stats.mean_interval(values)
