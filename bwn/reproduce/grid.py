"""A paper's evaluation as data: cases (scenario template + parameters + schemes)
and claims, read from ``topologies/reproduce/<paper>.toml`` (docs/reproduce.md).

A case's scenario is a template (``topologies/templates/<name>.toml``, else
``topologies/scenarios/<name>.toml``) with ``${param}`` placeholders
(:class:`string.Template`), filled with the case's ``params``; then, per seed and
scheme, :func:`render` adds the case's generated flows, the duration, the seed and
the seed's start offsets, and drops a reserved rate the scheme cannot take.
"""
from __future__ import annotations

import copy
import string
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

from bwn.scenario import seeding

from bwn.paths import REPO
GRID_DIR = REPO / "topologies" / "reproduce"
TEMPLATE_DIRS = (REPO / "topologies" / "templates", REPO / "topologies" / "scenarios")
PAPERS = ("ebn", "obp", "dft", "gtcp", "sarbe")
CLAIM_KINDS = ("better", "equal", "at_least", "at_most", "near", "trend")
#: Margin of practical equivalence of a comparison ('better', 'equal'; a fraction
#: of the other scheme's value; a claim's ``margin`` overrides it, in the grid,
#: before its runs): 5 %. Below the smallest gain any of the five papers reports
#: as a win (SARBE's +13 % over DynaPara), so it hides no effect a paper claims,
#: and above the seed-to-seed spread of a goodput in our runs (1-3 %), so "better"
#: means a difference a reader of these papers would call one (docs/reproduce.md).
DEFAULT_MARGIN = 0.05
#: Seeds per case, fixed in the grid before its runs (a case may declare more).
MIN_SEEDS = 5
INVENTORY_KINDS = ("direction", "magnitude", "bound", "trend", "equal")


class GridError(ValueError):
    """A grid file that cannot be used; the message names file and entry."""


@dataclass(frozen=True)
class Case:
    id: str
    label: str
    template: str
    params: dict[str, Any]
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
    experiment: tuple[tuple[str, Any], ...] = ()


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
    #: 'better' and 'equal': the margin of practical equivalence
    margin: float = DEFAULT_MARGIN
    #: 'near' on a comparison: the quantity is the paired gain against ``versus``
    #: (kind 'near' with ``versus`` set)
    #: 'trend': the case parameter the quantity changes over, its direction
    #: ("increasing" or "decreasing"), and whether the slope is over log(x)
    x: Optional[str] = None
    direction: Optional[str] = None
    log_x: bool = False
    #: a claim about one of our named deviations, not the paper's (judged beside
    #: the paper's claims, never under their names)
    deviation: str = ""

    @property
    def compares(self) -> bool:
        """Is the quantity a paired gain against ``versus`` (not the metric itself)?"""
        return self.versus is not None and self.kind in ("better", "equal", "near", "trend")

    def band(self) -> tuple[float, float]:
        """A 'near' claim's tolerance band around its target."""
        assert self.target is not None
        half = self.tolerance_abs if self.tolerance_abs is not None else abs(self.target) * (self.tolerance or 0.0)
        return self.target - half, self.target + half


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

    def case(self, case_id: str) -> Case:
        for c in self.cases:
            if c.id == case_id:
                return c
        raise KeyError(case_id)

    def selected(self, quick: bool) -> list[Case]:
        return [c for c in self.cases if c.quick] if quick else list(self.cases)

    def claim_cases(self, claim: Claim, cases: list[Case]) -> list[Case]:
        """The cases a claim is judged on: its list (in grid order), else every case
        that runs the claim's scheme(s); only those among ``cases``."""
        wanted = set(claim.cases)
        out = []
        for c in cases:
            if wanted and c.id not in wanted:
                continue
            if claim.scheme not in c.schemes or (claim.versus and claim.versus not in c.schemes):
                continue
            out.append(c)
        return out


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
    cases = [_load_case(c, meta, grid_seeds, f"{where}: cases[{i}]") for i, c in enumerate(data.get("cases", []))]
    ids = [c.id for c in cases]
    if len(set(ids)) != len(ids):
        raise GridError(f"{where}: case ids are not unique: {ids}")
    claims = [_load_claim(c, cases, f"{where}: claims[{i}]") for i, c in enumerate(data.get("claims", []))]
    claim_ids = [c.id for c in claims]
    if len(set(claim_ids)) != len(claim_ids):
        raise GridError(f"{where}: claim ids are not unique: {claim_ids}")
    inventory = [_load_item(x, claim_ids, f"{where}: inventory[{i}]") for i, x in enumerate(data.get("inventory", []))]
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
    return Grid(paper, str(meta.get("title", paper)), str(meta.get("citation", "")),
                str(meta.get("scaling", "")), tuple(cases), tuple(claims), tuple(inventory), grid_seeds,
                float(meta.get("start_spread_s", 0.5)), meta.get("timeseries_flow"),
                tuple(meta.get("notes", [])), templates)


def _seeds(value: Any, loc: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < MIN_SEEDS:
        raise GridError(f"{loc}: seeds must be a whole number >= {MIN_SEEDS} (fixed before the runs), "
                        f"not {value!r}")
    return value


def _load_case(c: Mapping[str, Any], meta: Mapping[str, Any], grid_seeds: int, loc: str) -> Case:
    for key in ("id", "template", "schemes"):
        if key not in c:
            raise GridError(f"{loc}: missing {key!r}")
    duration = float(c.get("duration_s", meta.get("duration_s", 60)))
    quick_duration = float(c.get("quick_duration_s", meta.get("quick_duration_s", duration)))
    extra = c.get("flows", [])
    seeds = _seeds(c["seeds"], loc) if "seeds" in c else grid_seeds
    experiment = c.get("experiment", {})
    if not isinstance(experiment, dict):
        raise GridError(f"{loc}: experiment must be a table of [experiment] keys, not {experiment!r}")
    fixed = sorted(set(experiment) & set(RENDERED_EXPERIMENT_KEYS))
    if fixed:
        raise GridError(f"{loc}: experiment sets {', '.join(fixed)}, which the grid sets for every run")
    return Case(str(c["id"]), str(c.get("label", c["id"])), str(c["template"]),
                dict(c.get("params", {})), tuple(c["schemes"]), duration, quick_duration,
                bool(c.get("quick", False)), tuple(extra if isinstance(extra, list) else [extra]),
                str(c.get("note", "")), seeds, tuple(sorted(experiment.items())))


def _fraction(value: Any, loc: str, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise GridError(f"{loc}: {name} must be a fraction in [0, 1) (0.05 = 5 %), not {value!r}")
    return float(value)


def _load_claim(c: Mapping[str, Any], cases: list[Case], loc: str) -> Claim:
    for key in ("id", "statement", "kind", "metric", "scheme"):
        if key not in c:
            raise GridError(f"{loc}: missing {key!r}")
    kind = c["kind"]
    if kind not in CLAIM_KINDS:
        raise GridError(f"{loc}: kind {kind!r} is not one of {', '.join(CLAIM_KINDS)}")
    if kind in ("better", "equal") and "versus" not in c:
        raise GridError(f"{loc}: a {kind!r} claim needs 'versus'")
    if kind in ("at_least", "at_most") and "threshold" not in c:
        raise GridError(f"{loc}: an {kind!r} claim needs 'threshold'")
    if kind == "near":
        if "target" not in c or ("tolerance" in c) == ("tolerance_abs" in c):
            raise GridError(f"{loc}: a 'near' claim needs 'target' and one of 'tolerance' (a fraction of "
                            "the target) or 'tolerance_abs'")
    if kind == "trend":
        if "x" not in c or c.get("direction") not in ("increasing", "decreasing"):
            raise GridError(f"{loc}: a 'trend' claim needs 'x' (a case parameter) and 'direction' "
                            "('increasing' or 'decreasing')")
    margin = _fraction(c.get("margin", DEFAULT_MARGIN), loc, "margin")
    tolerance = _fraction(c["tolerance"], loc, "tolerance") if "tolerance" in c else None
    tolerance_abs = c.get("tolerance_abs")
    if tolerance_abs is not None and (isinstance(tolerance_abs, bool) or not isinstance(tolerance_abs, (int, float))
                                      or tolerance_abs < 0):
        raise GridError(f"{loc}: tolerance_abs must be a number >= 0, not {tolerance_abs!r}")
    ids = [x.id for x in cases]
    unknown = [x for x in c.get("cases", []) if x not in ids]
    if unknown:
        raise GridError(f"{loc}: unknown case(s) {unknown} (known: {ids})")
    if kind == "trend":
        named = [x for x in cases if not c.get("cases") or x.id in c["cases"]]
        lacking = [x.id for x in named if c["x"] not in x.params]
        if lacking:
            raise GridError(f"{loc}: case(s) {', '.join(lacking)} have no parameter {c['x']!r} to trend over")
    return Claim(str(c["id"]), str(c["statement"]), str(c.get("source", "")), str(kind),
                 str(c["metric"]), str(c["scheme"]), c.get("versus"),
                 bool(c.get("lower_is_better", False)), _opt_float(c.get("threshold")),
                 _opt_float(c.get("target")), tolerance, _opt_float(tolerance_abs),
                 tuple(c.get("cases", [])), str(c.get("paper_value", "")), margin,
                 c.get("x"), c.get("direction"), bool(c.get("log_x", False)), str(c.get("deviation", "")))


def _load_item(x: Mapping[str, Any], claim_ids: list[str], loc: str) -> InventoryItem:
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
    try:
        text = string.Template(source if source is not None else path.read_text()).substitute(
            {k: _toml_value(v) for k, v in case.params.items()})
    except KeyError as exc:
        raise GridError(f"{path}: case {case.id!r} gives no value for ${{{exc.args[0]}}}") from None
    except ValueError as exc:
        raise GridError(f"{path}: bad placeholder: {exc}") from None
    data = tomllib.loads(text)
    data = copy.deepcopy(data)
    flows = data.setdefault("flows", [])
    for group in case.extra_flows:
        count = int(group.get("count", 1))
        prefix = str(group.get("prefix", "f"))
        stagger_s = float(group.get("stagger_s", 0.0))
        first = int(group.get("first", 1))
        for k in range(count):
            flow = {key: value for key, value in group.items()
                    if key not in ("count", "prefix", "stagger_s", "first")}
            flow["name"] = f"{prefix}{first + k}"
            flow["start_s"] = float(group.get("start_s", 0.0)) + k * stagger_s
            flows.append(flow)
    duration_s = case.quick_duration_s if quick else case.duration_s
    exp = data.setdefault("experiment", {})
    exp.update(dict(case.experiment))
    exp["name"] = f"{grid.paper}-{case.id}"
    exp["duration_s"] = duration_s
    exp["schemes"] = list(case.schemes)
    exp["seed"] = int(seed)
    from bwn.scenario.config import RESERVED_RATE_ALGORITHMS, UNDER_TEST
    for i, flow in enumerate(flows):
        offset = seeding.start_offset_s(seed, i, grid.start_spread_s)
        flow["start_s"] = round(min(float(flow.get("start_s", 0.0)) + offset, duration_s * 0.5), 3)
        if flow.get("scheme", UNDER_TEST) == UNDER_TEST and scheme.partition(":")[0] not in \
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
