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
CLAIM_KINDS = ("better", "at_least", "at_most", "near")
#: Practical-equivalence margin of a 'better' claim (a fraction of the other
#: scheme's value; a claim's ``margin`` overrides it): 1 %, below any gain the
#: five papers name or plot, so two schemes within it carried the same for the
#: purpose of the paper's claim (docs/reproduce.md).
DEFAULT_MARGIN = 0.01


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
    #: at least this many seeds in a full grid (a claim that needs a narrower
    #: interval than the grid's default gives); None: the grid's --seeds
    seeds: Optional[int] = None
    #: keys merged into the rendered scenario's [experiment] (how it is emulated, e.g.
    #: linkem_shared); not the ones the grid sets itself (RENDERED_EXPERIMENT_KEYS)
    experiment: tuple[tuple[str, Any], ...] = ()


#: [experiment] keys every rendered scenario gets from the grid, never from a case.
RENDERED_EXPERIMENT_KEYS = ("name", "duration_s", "schemes", "seed")


@dataclass(frozen=True)
class Claim:
    id: str
    statement: str
    source: str
    kind: str
    metric: str
    scheme: str
    versus: Optional[str] = None
    lower_is_better: bool = False
    threshold: Optional[float] = None
    target: Optional[float] = None
    tolerance: Optional[float] = None
    cases: tuple[str, ...] = ()
    paper_value: str = ""
    #: 'better' claims: a gain whose whole interval lies within ± margin is "equal"
    #: (bwn/analysis/stats.py, docs/reproduce.md)
    margin: float = DEFAULT_MARGIN


@dataclass(frozen=True)
class Grid:
    paper: str
    title: str
    citation: str
    scaling: str
    cases: tuple[Case, ...]
    claims: tuple[Claim, ...]
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
    cases = []
    for i, c in enumerate(data.get("cases", [])):
        loc = f"{where}: cases[{i}]"
        for key in ("id", "template", "schemes"):
            if key not in c:
                raise GridError(f"{loc}: missing {key!r}")
        duration = float(c.get("duration_s", meta.get("duration_s", 60)))
        quick_duration = float(c.get("quick_duration_s", meta.get("quick_duration_s", duration)))
        extra = c.get("flows", [])
        seeds = c.get("seeds")
        if seeds is not None and (isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1):
            raise GridError(f"{loc}: seeds must be a whole number >= 1, not {seeds!r}")
        experiment = c.get("experiment", {})
        if not isinstance(experiment, dict):
            raise GridError(f"{loc}: experiment must be a table of [experiment] keys, not {experiment!r}")
        fixed = sorted(set(experiment) & set(RENDERED_EXPERIMENT_KEYS))
        if fixed:
            raise GridError(f"{loc}: experiment sets {', '.join(fixed)}, which the grid sets for every run")
        cases.append(Case(str(c["id"]), str(c.get("label", c["id"])), str(c["template"]),
                          dict(c.get("params", {})), tuple(c["schemes"]), duration, quick_duration,
                          bool(c.get("quick", False)), tuple(extra if isinstance(extra, list) else [extra]),
                          str(c.get("note", "")), seeds, tuple(sorted(experiment.items()))))
    ids = [c.id for c in cases]
    if len(set(ids)) != len(ids):
        raise GridError(f"{where}: case ids are not unique: {ids}")
    claims = []
    for i, c in enumerate(data.get("claims", [])):
        loc = f"{where}: claims[{i}]"
        for key in ("id", "statement", "kind", "metric", "scheme"):
            if key not in c:
                raise GridError(f"{loc}: missing {key!r}")
        if c["kind"] not in CLAIM_KINDS:
            raise GridError(f"{loc}: kind {c['kind']!r} is not one of {', '.join(CLAIM_KINDS)}")
        if c["kind"] == "better" and "versus" not in c:
            raise GridError(f"{loc}: a 'better' claim needs 'versus'")
        if c["kind"] in ("at_least", "at_most") and "threshold" not in c:
            raise GridError(f"{loc}: an {c['kind']!r} claim needs 'threshold'")
        if c["kind"] == "near" and ("target" not in c or "tolerance" not in c):
            raise GridError(f"{loc}: a 'near' claim needs 'target' and 'tolerance'")
        margin = c.get("margin", DEFAULT_MARGIN)
        if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 0 <= margin < 1:
            raise GridError(f"{loc}: margin must be a fraction in [0, 1) (0.01 = 1 %), not {margin!r}")
        unknown = [x for x in c.get("cases", []) if x not in ids]
        if unknown:
            raise GridError(f"{loc}: unknown case(s) {unknown} (known: {ids})")
        claims.append(Claim(str(c["id"]), str(c["statement"]), str(c.get("source", "")), str(c["kind"]),
                            str(c["metric"]), str(c["scheme"]), c.get("versus"),
                            bool(c.get("lower_is_better", False)), _opt_float(c.get("threshold")),
                            _opt_float(c.get("target")), _opt_float(c.get("tolerance")),
                            tuple(c.get("cases", [])), str(c.get("paper_value", "")), float(margin)))
    templates = {}
    for case in cases:
        if case.template not in templates:
            try:
                templates[case.template] = template_path(case.template).read_text()
            except OSError as exc:
                raise GridError(f"{template_path(case.template)}: cannot read: {exc.strerror or exc}") from None
    return Grid(paper, str(meta.get("title", paper)), str(meta.get("citation", "")),
                str(meta.get("scaling", "")), tuple(cases), tuple(claims),
                float(meta.get("start_spread_s", 0.5)), meta.get("timeseries_flow"),
                tuple(meta.get("notes", [])), templates)


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
