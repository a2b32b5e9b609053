"""A paper's evaluation as data: cases (scenario template + parameters + schemes),
claims and the paper's inventory, read from ``topologies/reproduce/<paper>.toml``
(docs/reproduce.md, "Grids as data").

A case's scenario is a template (``topologies/templates/<name>.toml``, else
``topologies/scenarios/<name>.toml``) with ``${param}`` placeholders
(:class:`string.Template`), filled with the case's ``params`` (over them, in
``--quick``, its ``quick_params``; over both, a named scheme's ``params``); then, per
seed and scheme, :func:`render` sets keys of named links and of ``[experiment]``,
adds the case's generated flows (and a reservation per flow of a ``reserve`` group),
the duration, the seed and the seed's start offsets, and drops a reserved rate the
scheme cannot take.

A grid may declare entries that need machinery not built yet (:data:`WAITING`): a
case, a named scheme or a claim with ``needs``, or a claim whose metric needs it
(:data:`METRIC_NEEDS`). They are read and checked like the rest, their rules fixed,
but nothing of them is planned, run or judged; pages list them as waiting. When the
machinery lands, removing its name from :data:`WAITING` makes them part of the grid.
"""
from __future__ import annotations

import copy
import string
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from bwn.analysis import metrics
from bwn.paths import REPO
from bwn.scenario import seeding

GRID_DIR = REPO / "topologies" / "reproduce"
TEMPLATE_DIRS = (REPO / "topologies" / "templates", REPO / "topologies" / "scenarios")
PAPERS = ("ebn", "obp", "dft", "gtcp", "sarbe")
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
               "NewReno senders that react to ECN marks",
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
WAITING = frozenset({"xcp", "red-ecn", "guaranteed-service", "cbr-flows", "drop-counters", "dscp-counts",
                     "dft-ssthresh-update"})
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


def grid_path(paper: str) -> Path:
    return GRID_DIR / f"{paper}.toml"


def load_grid(paper: str, path: Optional[Path] = None) -> Grid:
    path = path or grid_path(paper)
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise GridError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise GridError(f"{path}: not valid TOML: {exc}") from None
    meta = data.get("paper", {})
    where = str(path)
    grid_seeds = _seeds(meta.get("seeds", MIN_SEEDS), f"{where}: [paper]")
    raw_schemes = data.get("schemes", {})
    if not isinstance(raw_schemes, dict):
        raise GridError(f"{where}: [schemes] must be a table of named schemes")
    schemes = {name: _load_scheme(name, t, f"{where}: schemes.{name}") for name, t in raw_schemes.items()}
    cases = [_load_case(c, meta, grid_seeds, schemes, f"{where}: cases[{i}]")
             for i, c in enumerate(data.get("cases", []))]
    ids = [c.id for c in cases]
    if len(set(ids)) != len(ids):
        raise GridError(f"{where}: case ids are not unique: {ids}")
    claims: list[Claim] = []
    for i, c in enumerate(data.get("claims", [])):
        claims += _load_claims(c, cases, schemes, f"{where}: claims[{i}]")
    claim_ids = [c.id for c in claims]
    if len(set(claim_ids)) != len(claim_ids):
        dup = sorted({c for c in claim_ids if claim_ids.count(c) > 1})
        raise GridError(f"{where}: claim ids are not unique: {dup}")
    families = {c.family for c in claims if c.family}
    inventory = [_load_item(x, set(claim_ids) | families, f"{where}: inventory[{i}]")
                 for i, x in enumerate(data.get("inventory", []))]
    grid = Grid(paper, str(meta.get("title", paper)), str(meta.get("citation", "")),
                str(meta.get("scaling", "")), tuple(cases), tuple(claims), (), grid_seeds,
                float(meta.get("start_spread_s", 0.5)), meta.get("timeseries_flow"),
                tuple(meta.get("notes", [])), {}, schemes)
    inventory = [InventoryItem(x.id, x.quote, x.where, x.kind, x.paper_value, tuple(grid.expand(x.claims)),
                               x.not_judged) for x in inventory]
    if inventory:
        judged_by = {cid for item in inventory for cid in item.claims}
        orphans = [c.id for c in claims if c.id not in judged_by and not c.deviation]
        if orphans:
            raise GridError(f"{where}: claim(s) {', '.join(orphans)} judge no inventory item: name them in an "
                            "item's 'claims', or mark them as a named deviation's ('deviation = \"...\"')")
    templates = {}
    for case in cases:
        if case.template not in templates:
            try:
                templates[case.template] = template_path(case.template).read_text()
            except OSError as exc:
                raise GridError(f"{template_path(case.template)}: cannot read: {exc.strerror or exc}") from None
    return Grid(grid.paper, grid.title, grid.citation, grid.scaling, grid.cases, grid.claims, tuple(inventory),
                grid.seeds, grid.start_spread_s, grid.timeseries_flow, grid.notes, templates, schemes)


def _seeds(value: Any, loc: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < MIN_SEEDS:
        raise GridError(f"{loc}: seeds must be a whole number >= {MIN_SEEDS} (fixed before the runs), "
                        f"not {value!r}")
    return value


def _needs(value: Any, loc: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise GridError(f"{loc}: needs must be a list of machinery names, not {value!r}")
    unknown = [v for v in value if v not in MACHINERY]
    if unknown:
        raise GridError(f"{loc}: needs unknown machinery {unknown} (known: {', '.join(MACHINERY)})")
    return tuple(value)


def _table(value: Any, loc: str, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise GridError(f"{loc}: {what} must be a table, not {value!r}")
    return value


def _links(value: Any, loc: str) -> tuple[tuple[str, Items], ...]:
    """``{ bottleneck = { aqm = "red-ecn" } }``: keys to set on the links of those names."""
    out = []
    for name, keys in _table(value, loc, "links").items():
        keys = _table(keys, loc, f"links.{name}")
        fixed = sorted(set(keys) & {"a", "b", "name"})
        if fixed:
            raise GridError(f"{loc}: links.{name} sets {', '.join(fixed)}, which name the link; set its other keys")
        out.append((str(name), tuple(sorted(keys.items()))))
    return tuple(out)


def _experiment(value: Any, loc: str) -> Items:
    experiment = value if isinstance(value, dict) else None
    if experiment is None:
        raise GridError(f"{loc}: experiment must be a table of [experiment] keys, not {value!r}")
    fixed = sorted(set(experiment) & set(RENDERED_EXPERIMENT_KEYS))
    if fixed:
        raise GridError(f"{loc}: experiment sets {', '.join(fixed)}, which the grid sets for every run")
    return tuple(sorted(experiment.items()))


def _load_scheme(name: str, t: Any, loc: str) -> Scheme:
    t = _table(t, loc, "a named scheme")
    if "/" in name or not name:
        raise GridError(f"{loc}: a scheme's name cannot be empty or hold '/' (run keys are PAPER/CASE/seedN/SCHEME)")
    if "algorithm" not in t or not isinstance(t["algorithm"], str):
        raise GridError(f"{loc}: missing 'algorithm' (what bwn run runs, e.g. \"reno\")")
    unknown = sorted(set(t) - {"algorithm", "params", "experiment", "links", "needs", "note"})
    if unknown:
        raise GridError(f"{loc}: unknown key(s) {', '.join(unknown)}")
    return Scheme(name, t["algorithm"], dict(_table(t.get("params", {}), loc, "params")),
                  _experiment(t.get("experiment", {}), loc), _links(t.get("links", {}), loc),
                  _needs(t.get("needs", []), loc), str(t.get("note", "")))


CASE_KEYS = {"id", "label", "template", "params", "schemes", "duration_s", "quick_duration_s", "quick", "flows",
             "note", "seeds", "experiment", "links", "quick_params", "evidence", "needs"}


def _load_case(c: Mapping[str, Any], meta: Mapping[str, Any], grid_seeds: int, schemes: Mapping[str, Scheme],
               loc: str) -> Case:
    for key in ("id", "template", "schemes"):
        if key not in c:
            raise GridError(f"{loc}: missing {key!r}")
    unknown = sorted(set(c) - CASE_KEYS)
    if unknown:
        raise GridError(f"{loc}: unknown key(s) {', '.join(unknown)}")
    duration = float(c.get("duration_s", meta.get("duration_s", 60)))
    quick_duration = float(c.get("quick_duration_s", meta.get("quick_duration_s", duration)))
    extra = c.get("flows", [])
    extra = tuple(extra if isinstance(extra, list) else [extra])
    for group in extra:
        if group.get("reserve") and ("reserved_rate_mbit" not in group or "port_base" not in group
                                     or "src" not in group or "dst" not in group):
            raise GridError(f"{loc}: a flow group with reserve = true needs src, dst, reserved_rate_mbit and "
                            "port_base (each flow's source port, and its reservation's)")
    seeds = _seeds(c["seeds"], loc) if "seeds" in c else grid_seeds
    declared = [str(s) for s in c["schemes"]]
    if len(set(declared)) != len(declared):
        raise GridError(f"{loc}: a scheme is listed twice: {declared}")
    waiting_schemes = tuple((s, schemes[s].waiting) for s in declared if s in schemes and schemes[s].waiting)
    runnable = tuple(s for s in declared if s not in dict(waiting_schemes))
    evidence = bool(c.get("evidence", False))
    waiting = [n for n in _needs(c.get("needs", []), loc) if n in WAITING]
    if not runnable:                        # every scheme waits: so does the case
        waiting += [n for _, ms in waiting_schemes for n in ms if n not in waiting]
    return Case(str(c["id"]), str(c.get("label", c["id"])), str(c["template"]),
                dict(_table(c.get("params", {}), loc, "params")), runnable, duration, quick_duration,
                bool(c.get("quick", False)), extra, str(c.get("note", "")), seeds,
                _experiment(c.get("experiment", {}), loc), _links(c.get("links", {}), loc),
                dict(_table(c.get("quick_params", {}), loc, "quick_params")), evidence,
                tuple(waiting), waiting_schemes)


def _fraction(value: Any, loc: str, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise GridError(f"{loc}: {name} must be a fraction in [0, 1) (0.05 = 5 %), not {value!r}")
    return float(value)


def _number(value: Any, loc: str, name: str, minimum: Optional[float] = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (minimum is not None and value < minimum):
        raise GridError(f"{loc}: {name} must be a number" + (f" >= {minimum:g}" if minimum is not None else "")
                        + f", not {value!r}")
    return float(value)


CLAIM_KEYS = {"id", "statement", "source", "kind", "metric", "scheme", "versus", "lower_is_better", "threshold",
              "target", "tolerance", "tolerance_abs", "cases", "paper_value", "margin", "x", "direction", "log_x",
              "deviation", "why", "measure", "groups", "relative_to", "difference", "needs", "also"}


def _names(value: Any, loc: str, key: str) -> list[str]:
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(v, str) and v for v in items):
        raise GridError(f"{loc}: {key} must be a scheme name or a list of them, not {value!r}")
    return items


def _load_claims(c: Mapping[str, Any], cases: list[Case], schemes: Mapping[str, Scheme], loc: str) -> list[Claim]:
    """One grid entry -> its claims: one per scheme and per versus when they are lists,
    and a sibling per ``also`` (the same judgement on other cases)."""
    for key in ("id", "statement", "kind", "metric", "scheme"):
        if key not in c:
            raise GridError(f"{loc}: missing {key!r}")
    unknown = sorted(set(c) - CLAIM_KEYS)
    if unknown:
        raise GridError(f"{loc}: unknown key(s) {', '.join(unknown)}")
    own = _names(c["scheme"], loc, "scheme")
    others: list[Optional[str]] = _names(c["versus"], loc, "versus") if "versus" in c else [None]
    also = c.get("also")
    if also is not None:
        also = _table(also, loc, "also")
        if "label" not in also or not (set(also) & {"cases", "groups"}) or set(also) - {"label", "cases", "groups"}:
            raise GridError(f"{loc}: also is {{ label = \"...\", cases = [...] }} (or groups = [[...]]): the same "
                            "claim judged again on other cases, a verdict of its own")
    expanded = len(own) > 1 or len(others) > 1 or also is not None
    out = []
    for scheme in own:
        for versus in others:
            cid = str(c["id"]) + (f" [{scheme}]" if len(own) > 1 else "") + (f" vs {versus}" if len(others) > 1 else "")
            entry = dict(c, scheme=scheme, id=cid)
            if versus is None:
                entry.pop("versus", None)
            else:
                entry["versus"] = versus
            entry.pop("also", None)
            family = str(c["id"]) if expanded else ""
            out.append(_load_claim(entry, cases, schemes, loc, family))
            if also is not None:
                sibling = {k: v for k, v in entry.items() if k not in ("cases", "groups")}
                sibling.update({k: also[k] for k in ("cases", "groups") if k in also})
                sibling["id"] = f"{cid}, {also['label']}"
                out.append(_load_claim(sibling, cases, schemes, loc, family))
    return out


def _load_claim(c: Mapping[str, Any], cases: list[Case], schemes: Mapping[str, Scheme], loc: str,
                family: str = "") -> Claim:
    kind = c["kind"]
    cid = str(c["id"])
    if family:
        loc = f"{loc} ({cid})"
    if kind not in CLAIM_KINDS:
        raise GridError(f"{loc}: kind {kind!r} is not one of {', '.join(CLAIM_KINDS)}")
    if kind in COMPARISON_KINDS and "versus" not in c:
        raise GridError(f"{loc}: a {kind!r} claim needs 'versus'")
    if kind in ("at_least", "at_most") and "threshold" not in c:
        raise GridError(f"{loc}: an {kind!r} claim needs 'threshold'")
    if kind == "near":
        if "target" not in c or ("tolerance" in c) == ("tolerance_abs" in c):
            raise GridError(f"{loc}: a 'near' claim needs 'target' and one of 'tolerance' (a fraction of "
                            "the target) or 'tolerance_abs'")
    measure = str(c.get("measure", "change"))
    if kind == "trend":
        if c.get("direction") not in TREND_DIRECTIONS or ("x" not in c and measure == "change"):
            raise GridError(f"{loc}: a 'trend' claim needs 'x' (a case parameter) and 'direction' "
                            f"({', '.join(repr(d) for d in TREND_DIRECTIONS)})")
        if measure not in TREND_MEASURES:
            raise GridError(f"{loc}: measure must be one of {', '.join(TREND_MEASURES)}, not {measure!r}")
        if measure == "range" and c["direction"] != "flat":
            raise GridError(f"{loc}: a range (max - min over the cases) can only be judged 'flat'")
        if "versus" not in c and "margin" not in c:
            raise GridError(f"{loc}: a trend of a metric (not of a gain) needs its 'margin', in the metric's unit")
        if "relative_to" in c:
            raise GridError(f"{loc}: a trend cannot be relative_to another case")
    elif set(c) & {"measure", "groups", "direction"}:
        raise GridError(f"{loc}: measure, groups and direction belong to 'trend' claims")
    if c.get("difference") and ("versus" not in c or kind in COMPARISON_KINDS):
        raise GridError(f"{loc}: difference = true needs 'versus' and a kind judged on a value "
                        "(near, at_least, at_most, trend), not a relative margin")
    margin_value = c.get("margin", DEFAULT_MARGIN)
    margin = _number(margin_value, loc, "margin", 0.0) if kind == "trend" else _fraction(margin_value, loc, "margin")
    tolerance = _fraction(c["tolerance"], loc, "tolerance") if "tolerance" in c else None
    tolerance_abs = _number(c["tolerance_abs"], loc, "tolerance_abs", 0.0) if "tolerance_abs" in c else None
    metric = str(c["metric"])
    metric_kind = metrics.parse(metric).kind
    waiting: list[str] = [n for n in _needs(c.get("needs", []), loc) if n in WAITING]
    if metric_kind in METRIC_NEEDS and METRIC_NEEDS[metric_kind] in WAITING:
        waiting.append(METRIC_NEEDS[metric_kind])
    else:
        try:
            metrics.check(metric)
        except metrics.MetricError as exc:
            raise GridError(f"{loc}: {exc}") from None
    ids = [x.id for x in cases]
    groups = tuple(tuple(g) for g in c.get("groups", []))
    if groups and ("cases" in c or any(len(g) < 2 for g in groups)):
        raise GridError(f"{loc}: groups are lists of at least two cases each (and replace 'cases')")
    named = list(c.get("cases", [])) or [x for g in groups for x in g if x]
    unknown = [x for x in named if x not in ids]
    if c.get("relative_to") is not None and c["relative_to"] not in ids:
        unknown.append(c["relative_to"])
    if unknown:
        raise GridError(f"{loc}: unknown case(s) {unknown} (known: {ids})")
    by_id = {x.id: x for x in cases}
    used = [str(c["scheme"])] + ([str(c["versus"])] if "versus" in c else [])
    for s in used:
        if s in schemes:
            waiting += [n for n in schemes[s].waiting if n not in waiting]
    for x in named + ([c["relative_to"]] if c.get("relative_to") else []):
        case = by_id[x]
        if case.evidence:
            raise GridError(f"{loc}: case {x} is evidence (kept on the page, never judged)")
        declared = set(case.schemes) | {s for s, _ in case.waiting_schemes}
        missing = [s for s in used if s not in declared]
        if missing:
            raise GridError(f"{loc}: case {x} does not run {', '.join(missing)}")
        waiting += [n for n in case.waiting if n not in waiting]
    if not named:
        judged_on = [x for x in cases if not x.evidence and x.runnable and all(s in x.schemes for s in used)]
        if not judged_on:
            later = [x for x in cases if not x.evidence and all(
                s in set(x.schemes) | {w for w, _ in x.waiting_schemes} for s in used)]
            if not later:
                raise GridError(f"{loc}: no case runs {' and '.join(used)}")
            waiting += [n for x in later for n in x.waiting + tuple(m for s, ms in x.waiting_schemes for m in ms)
                        if n not in waiting]
    if kind == "trend":
        trend_cases = [by_id[x] for x in named] if named else [x for x in cases if all(s in x.schemes for s in used)]
        if c.get("x") is not None:
            lacking = [x.id for x in trend_cases if c["x"] not in x.params]
            if lacking:
                raise GridError(f"{loc}: case(s) {', '.join(lacking)} have no parameter {c['x']!r} to trend over")
    return Claim(cid, str(c["statement"]), str(c.get("source", "")), str(kind),
                 metric, str(c["scheme"]), c.get("versus"),
                 bool(c.get("lower_is_better", False)), _opt_float(c.get("threshold")),
                 _opt_float(c.get("target")), tolerance, tolerance_abs,
                 tuple(c.get("cases", [])) or tuple(dict.fromkeys(x for g in groups for x in g)),
                 str(c.get("paper_value", "")), margin,
                 c.get("x"), c.get("direction"), bool(c.get("log_x", False)), str(c.get("deviation", "")),
                 str(c.get("why", "")), measure, groups, c.get("relative_to"), bool(c.get("difference", False)),
                 tuple(dict.fromkeys(waiting)), family)


def _load_item(x: Mapping[str, Any], claim_ids: set[str], loc: str) -> InventoryItem:
    for key in ("id", "quote", "where", "kind"):
        if key not in x:
            raise GridError(f"{loc}: missing {key!r}")
    if x["kind"] not in INVENTORY_KINDS:
        raise GridError(f"{loc}: kind {x['kind']!r} is not one of {', '.join(INVENTORY_KINDS)}")
    claims = tuple(x.get("claims", []))
    unknown = [c for c in claims if c not in claim_ids]
    if unknown:
        raise GridError(f"{loc}: unknown claim(s) {unknown}")
    reason = str(x.get("not_judged", ""))
    if bool(claims) == bool(reason):
        raise GridError(f"{loc}: an item is judged by its 'claims' or says why it is not ('not_judged'), "
                        "one of the two")
    return InventoryItem(str(x["id"]), str(x["quote"]), str(x["where"]), str(x["kind"]),
                         str(x.get("paper_value", "")), claims, reason)


def _opt_float(value: Any) -> Optional[float]:
    return None if value is None else float(value)


def template_path(name: str) -> Path:
    for folder in TEMPLATE_DIRS:
        path = folder / f"{name}.toml"
        if path.exists():
            return path
    raise GridError(f"no scenario template {name!r} in {', '.join(str(d) for d in TEMPLATE_DIRS)}")


def render(grid: Grid, case: Case, seed: int, scheme: str, quick: bool) -> dict[str, Any]:
    """The scenario (a config dict, see docs/config.md) of one run."""
    path = template_path(case.template)
    source = grid.templates.get(case.template)
    named = grid.schemes.get(scheme)
    params = dict(case.params)
    if quick:
        params.update(case.quick_params)
    if named is not None:
        params.update(named.params)
    try:
        text = string.Template(source if source is not None else path.read_text()).substitute(
            {k: _toml_value(v) for k, v in params.items()})
    except KeyError as exc:
        raise GridError(f"{path}: case {case.id!r} gives no value for ${{{exc.args[0]}}}") from None
    except ValueError as exc:
        raise GridError(f"{path}: bad placeholder: {exc}") from None
    data = copy.deepcopy(tomllib.loads(text))
    for name, keys in case.links:
        matching = [link for link in data.get("links", []) if link.get("name") == name]
        if not matching:
            raise GridError(f"case {case.id!r}: no link named {name!r} in template {case.template!r}")
        for link in matching:
            link.update(dict(keys))
    if named is not None and named.links:
        # a scheme of several cases names the links of each of their templates (a
        # dumbbell's bottleneck, a parking lot's b1-b3): those the case has apply
        applied = 0
        for name, keys in named.links:
            for link in (x for x in data.get("links", []) if x.get("name") == name):
                link.update(dict(keys))
                applied += 1
        if not applied:
            raise GridError(f"case {case.id!r}, scheme {scheme!r}: none of the links "
                            f"{', '.join(n for n, _ in named.links)} is in template {case.template!r}")
    flows = data.setdefault("flows", [])
    for group in case.extra_flows:
        count = int(group.get("count", 1))
        prefix = str(group.get("prefix", "f"))
        stagger_s = float(group.get("stagger_s", 0.0))
        first = int(group.get("first", 1))
        for k in range(count):
            flow = {key: value for key, value in group.items()
                    if key not in ("count", "prefix", "stagger_s", "first", "reserve", "port_base")}
            flow["name"] = f"{prefix}{first + k}"
            flow["start_s"] = float(group.get("start_s", 0.0)) + k * stagger_s
            if group.get("reserve"):
                port = int(group["port_base"]) + k
                flow["src_port"] = port
                data.setdefault("reservations", []).append(
                    {"src": group["src"], "dst": group["dst"], "rate_mbit": group["reserved_rate_mbit"],
                     "src_port": port})
            flows.append(flow)
    duration_s = case.quick_duration_s if quick else case.duration_s
    exp = data.setdefault("experiment", {})
    exp.update(dict(case.experiment))
    if named is not None:
        exp.update(dict(named.experiment))
    exp["name"] = f"{grid.paper}-{case.id}"
    exp["duration_s"] = duration_s
    exp["schemes"] = list(dict.fromkeys(grid.algorithm(s) for s in case.schemes))
    exp["seed"] = int(seed)
    from bwn.scenario.config import RESERVED_RATE_ALGORITHMS, UNDER_TEST
    algorithm = grid.algorithm(scheme)
    for i, flow in enumerate(flows):
        offset = seeding.start_offset_s(seed, i, grid.start_spread_s)
        start = float(flow.get("start_s", 0.0)) + offset
        # --quick shortens the run: a flow that would start after its middle starts there
        flow["start_s"] = round(min(start, duration_s * 0.5) if quick else start, 3)
        if flow.get("scheme", UNDER_TEST) == UNDER_TEST and algorithm.partition(":")[0] not in \
                RESERVED_RATE_ALGORITHMS:
            # Default TCP on a reserved path: the edge still meters and marks the
            # flow (its reservation entry stays), but the sender does not know it.
            flow.pop("reserved_rate_mbit", None)
    return data


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return str(value)
