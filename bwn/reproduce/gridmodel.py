"""A paper's evaluation as data: its cases, named schemes, claims and inventory
items, and the machinery some of them wait for (docs/reproduce.md, "Grids as data").
:mod:`bwn.reproduce.grid` reads them from a grid file; :mod:`bwn.reproduce.render`
makes each run's scenario.

A grid may declare entries that need machinery not built yet (:data:`WAITING`): a
case, a named scheme or a claim with ``needs``, or a claim whose metric needs it
(:data:`METRIC_NEEDS`). They are read and checked like the rest, their rules fixed,
but nothing of them is planned, run or judged; pages list them as waiting. When the
machinery lands, removing its name from :data:`WAITING` makes them part of the grid.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence


CLAIM_KINDS = ("better", "equal", "not_worse", "at_least", "at_most", "near", "trend")


#: Kinds whose quantity is always a comparison against ``versus`` (a relative margin).
COMPARISON_KINDS = ("better", "equal", "not_worse")


TREND_DIRECTIONS = ("increasing", "decreasing", "flat", "not_increasing")


#: A trend's quantity per seed: the fitted change over the sweep, or the range of the cases' values.
TREND_MEASURES = ("change", "range")


#: Margin of practical equivalence of a comparison ('better', 'equal', 'not_worse'; a
#: fraction of the other scheme's value) and the smallest change a trend of a gain must
#: show (in the gain's own unit); a claim's ``margin`` overrides it, in the grid, before
#: its runs: 5 %. Below the smallest gain any of the five papers reports as a win
#: (SARBE's +13 % over DynaPara), so it hides no effect a paper claims, and above the
#: seed-to-seed spread of a goodput in our runs (1-3 %), so "better" means a difference
#: a reader of these papers would call one (docs/reproduce.md).
DEFAULT_MARGIN = 0.05


#: Seeds per case, fixed in the grid before its runs (a case may declare more).
MIN_SEEDS = 5


INVENTORY_KINDS = ("direction", "magnitude", "bound", "trend", "equal")


#: Machinery a grid entry may need (``needs = [...]``), by name: what it is.
MACHINERY: dict[str, str] = {
    "xcp": "XCP (scheme xcp): its sender and the switches' per-packet feedback",
    "red-ecn": "RED with ECN marking at a switch's egress queue (a link's aqm = \"red-ecn\") and Reno and "
               "NewReno senders that react to ECN marks ([experiment] ecn = true)",
    "guaranteed-service": "a guaranteed-service edge (a link's service = \"guaranteed\"): in-profile packets in "
                          "a strict-priority class that is never dropped",
    "cbr-flows": "constant-rate, unresponsive flows (flows of kind = \"cbr\" with a rate_mbit)",
    "drop-counters": "per-port drop counters: the packets each egress port dropped (tail, AQM and AF drops)",
    "dscp-counts": "the receiver's byte counts of in-profile (compliant) and of other payload per flow",
    "dft-ssthresh-update": "DFT's control variants that set ssthresh from the estimate continuously or every "
                           "0.5 s (dft:ssthresh_update=continuous|periodic)",
}


#: Machinery not built yet. Remove a name when it lands: every grid entry that needs
#: only it is then planned, run and judged (tests/test_reproduce_grids.py checks each
#: name here is still missing).
WAITING: frozenset[str] = frozenset()


#: Metric kinds computed from what that machinery records.
METRIC_NEEDS: dict[str, str] = {"drops": "drop-counters", "compliant_bps": "dscp-counts",
                                "besteffort_bps": "dscp-counts", "besteffort_share": "dscp-counts"}


class GridError(ValueError):
    """A grid file that cannot be used; the message names file and entry."""


Items = tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Scheme:
    """A named scheme of a grid: an algorithm with its own template parameters,
    link keys and [experiment] keys (e.g. Reno with RED and ECN at the bottleneck)."""

    name: str
    algorithm: str                      # a scheme as `bwn run --schemes` takes it: "reno", "obp:share_floor=0.9"
    params: dict[str, Any] = field(default_factory=dict)
    experiment: Items = ()
    links: tuple[tuple[str, Items], ...] = ()
    needs: tuple[str, ...] = ()
    note: str = ""

    @property
    def waiting(self) -> tuple[str, ...]:
        return tuple(n for n in self.needs if n in WAITING)


@dataclass(frozen=True)
class Case:
    id: str
    label: str
    template: str
    params: dict[str, Any]
    #: the schemes run in this case (a declared scheme that waits for machinery is in
    #: ``waiting_schemes`` instead)
    schemes: tuple[str, ...]
    duration_s: float
    quick_duration_s: float
    quick: bool = False
    extra_flows: tuple[dict[str, Any], ...] = ()
    note: str = ""
    #: seeds of this case in a full grid, declared before its runs (the grid's
    #: ``[paper] seeds`` unless the case declares its own); at least MIN_SEEDS
    seeds: int = MIN_SEEDS
    #: keys merged into the rendered scenario's [experiment] (how it is emulated, e.g.
    #: linkem_shared); not the ones the grid sets itself (RENDERED_EXPERIMENT_KEYS)
    experiment: Items = ()
    #: keys set on the rendered scenario's links, by link name
    links: tuple[tuple[str, Items], ...] = ()
    #: template parameters over ``params`` in --quick only (a compressed timeline)
    quick_params: dict[str, Any] = field(default_factory=dict)
    #: kept on the page as evidence (its runs, if any, are listed); run only when named
    #: with --cases, never judged by a claim
    evidence: bool = False
    #: machinery this case waits for (not planned until it lands)
    waiting: tuple[str, ...] = ()
    #: declared schemes that wait for machinery: (scheme, machinery names)
    waiting_schemes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: the switches its runs have (bwn run --target): BMv2, the reference, or the
    #: eBPF switch, for what BMv2 cannot carry on this machine
    target: str = "bmv2"

    @property
    def runnable(self) -> bool:
        return not self.waiting


#: [experiment] keys every rendered scenario gets from the grid, never from a case.
RENDERED_EXPERIMENT_KEYS = ("name", "duration_s", "schemes", "seed")


@dataclass(frozen=True)
class Claim:
    """One judged statement (docs/reproduce.md, "Claims"); the rule that judges it
    is bwn/analysis/stats.py's."""

    id: str
    statement: str
    source: str
    kind: str
    metric: str
    scheme: str
    versus: Optional[str] = None
    lower_is_better: bool = False
    threshold: Optional[float] = None
    #: 'near': the paper's number, and the band around it: ``tolerance`` as a
    #: fraction of the target, or ``tolerance_abs`` in the quantity's unit
    target: Optional[float] = None
    tolerance: Optional[float] = None
    tolerance_abs: Optional[float] = None
    cases: tuple[str, ...] = ()
    paper_value: str = ""
    #: 'better', 'equal', 'not_worse': the margin of practical equivalence (relative);
    #: 'trend': the smallest change (or, measured as a range, the largest spread) that
    #: counts, in the quantity's unit
    margin: float = DEFAULT_MARGIN
    #: 'trend': the case parameter the quantity changes over, its direction
    #: (TREND_DIRECTIONS), and whether the fit is over log(x)
    x: Optional[str] = None
    direction: Optional[str] = None
    log_x: bool = False
    #: a claim about one of our named deviations, not the paper's (judged beside
    #: the paper's claims, never under their names)
    deviation: str = ""
    #: why the tolerance, bound or margin is what it is (fixed before the runs)
    why: str = ""
    #: 'trend': "change" (the fitted change from the sweep's lowest x to its highest)
    #: or "range" (max - min of the cases' values), per seed
    measure: str = "change"
    #: 'trend': groups of cases judged apart (each a sweep of its own); () = one group
    groups: tuple[tuple[str, ...], ...] = ()
    #: the quantity is the value in each case over the value in this case, seed by seed
    #: (the same scheme; a cross-case ratio)
    relative_to: Optional[str] = None
    #: a comparison's quantity is the paired difference value - versus (the metric's
    #: unit), not the relative gain
    difference: bool = False
    #: machinery this claim waits for: declared and fixed, not judged until it lands
    waiting: tuple[str, ...] = ()
    #: the id the grid gave the claim before a list of schemes/versus or an ``also``
    #: was expanded into claims of their own ("" when it is this one's)
    family: str = ""

    @property
    def compares(self) -> bool:
        """Is the quantity a paired comparison against ``versus`` (not the metric itself)?"""
        return self.versus is not None

    @property
    def schemes_used(self) -> tuple[str, ...]:
        return (self.scheme,) + ((self.versus,) if self.versus else ())

    def band(self) -> tuple[float, float]:
        """A 'near' claim's tolerance band around its target."""
        assert self.target is not None
        half = self.tolerance_abs if self.tolerance_abs is not None else abs(self.target) * (self.tolerance or 0.0)
        return self.target - half, self.target + half

    def trend_groups(self) -> tuple[tuple[str, ...], ...]:
        return self.groups or (self.cases,)


@dataclass(frozen=True)
class InventoryItem:
    """One claim, figure or trend of the paper's evaluation, judged or not."""

    id: str
    quote: str
    where: str
    kind: str
    paper_value: str = ""
    claims: tuple[str, ...] = ()
    not_judged: str = ""

    @property
    def judged(self) -> bool:
        return bool(self.claims)


@dataclass(frozen=True)
class Grid:
    paper: str
    title: str
    citation: str
    scaling: str
    cases: tuple[Case, ...]
    claims: tuple[Claim, ...]
    inventory: tuple[InventoryItem, ...] = ()
    seeds: int = MIN_SEEDS
    start_spread_s: float = 0.5
    timeseries_flow: Optional[str] = None      # plot this flow's throughput over time per case
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: template name -> its text, read when the grid was loaded: a grid that runs for
    #: hours renders every run from the templates as they were when it started (an
    #: edit meanwhile, say a new placeholder, does not meet the old cases' parameters)
    templates: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    #: named schemes (``[schemes.NAME]``)
    schemes: Mapping[str, Scheme] = field(default_factory=dict, compare=False)

    def case(self, case_id: str) -> Case:
        for c in self.cases:
            if c.id == case_id:
                return c
        raise KeyError(case_id)

    def selected(self, quick: bool) -> list[Case]:
        """The cases a full (or --quick) grid runs: not evidence, not waiting."""
        return [c for c in self.cases if c.runnable and not c.evidence and (c.quick or not quick)]

    def algorithm(self, scheme: str) -> str:
        """What ``bwn run`` runs for a scheme of this grid (a named scheme's algorithm)."""
        named = self.schemes.get(scheme)
        return named.algorithm if named else scheme

    @property
    def judged_claims(self) -> list[Claim]:
        return [c for c in self.claims if not c.waiting]

    def claim_cases(self, claim: Claim, cases: Sequence[Case]) -> list[Case]:
        """The cases a claim is judged on: its list (in grid order), else every case
        that runs the claim's scheme(s) and is not evidence; only those among ``cases``."""
        wanted = set(claim.cases)
        out = []
        for c in cases:
            if wanted and c.id not in wanted:
                continue
            if not wanted and (c.evidence or not c.runnable):
                continue
            if any(s not in c.schemes for s in claim.schemes_used):
                continue
            out.append(c)
        return out

    def expand(self, names: Sequence[str]) -> list[str]:
        """Claim ids, a family id (a claim before its expansion) standing for all its claims."""
        out: list[str] = []
        for name in names:
            members = [c.id for c in self.claims if c.id == name or c.family == name]
            out += [m for m in members if m not in out]
        return out


def machinery_text(names: Sequence[str]) -> str:
    return "; ".join(f"{n} ({MACHINERY.get(n, n)})" for n in names)
