"""Reading a grid file, ``topologies/reproduce/<paper>.toml``, into the evaluation's
data (:mod:`bwn.reproduce.gridmodel`), every entry checked (docs/reproduce.md,
"Grids as data"); a file that cannot be used is a :class:`GridError` naming the
file and the entry. A case's scenario is a template (``topologies/templates/``,
else ``topologies/scenarios/``), which :mod:`bwn.reproduce.render` fills per run.
"""
from __future__ import annotations

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser, as a package
    import tomli as tomllib  # type: ignore[no-redef]
from pathlib import Path
from typing import Any, Mapping, Optional

from bwn.analysis import metrics
from bwn.paths import REPO
from bwn.reproduce import gridmodel
from bwn.reproduce.gridmodel import (
    CLAIM_KINDS,
    COMPARISON_KINDS,
    Case,
    Claim,
    DEFAULT_MARGIN,
    Grid,
    GridError,
    INVENTORY_KINDS,
    InventoryItem,
    Items,
    MACHINERY,
    METRIC_NEEDS,
    MIN_SEEDS,
    RENDERED_EXPERIMENT_KEYS,
    Scheme,
    TREND_DIRECTIONS,
    TREND_MEASURES,
    machinery_text,
)

GRID_DIR = REPO / "topologies" / "reproduce"
TEMPLATE_DIRS = (REPO / "topologies" / "templates", REPO / "topologies" / "scenarios")
#: The papers' evaluations (``bwn reproduce all``, the results index).
PAPERS = ("ebn", "obp", "dft", "gtcp", "sarbe")
#: Grids that are no one paper's evaluation but run and are judged the same way (claims
#: taken from papers, fixed before the runs): the cross-scheme comparison (docs/compare.md).
CASE_GRIDS = ("compare",)
#: Every grid ``bwn reproduce NAME`` takes.
GRIDS = PAPERS + CASE_GRIDS


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
             "note", "seeds", "experiment", "links", "quick_params", "evidence", "needs", "target"}
#: The switches a case may run on (bwn run --target).
TARGETS = ("bmv2", "ebpf")


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
    target = str(c.get("target", "bmv2"))
    if target not in TARGETS:
        raise GridError(f"{loc}: target {target!r} is not one of {', '.join(TARGETS)}")
    waiting = [n for n in _needs(c.get("needs", []), loc) if n in gridmodel.WAITING]
    if not runnable:                        # every scheme waits: so does the case
        waiting += [n for _, ms in waiting_schemes for n in ms if n not in waiting]
    return Case(str(c["id"]), str(c.get("label", c["id"])), str(c["template"]),
                dict(_table(c.get("params", {}), loc, "params")), runnable, duration, quick_duration,
                bool(c.get("quick", False)), extra, str(c.get("note", "")), seeds,
                _experiment(c.get("experiment", {}), loc), _links(c.get("links", {}), loc),
                dict(_table(c.get("quick_params", {}), loc, "quick_params")), evidence,
                tuple(waiting), waiting_schemes, target)


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
    waiting: list[str] = [n for n in _needs(c.get("needs", []), loc) if n in gridmodel.WAITING]
    if metric_kind in METRIC_NEEDS and METRIC_NEEDS[metric_kind] in gridmodel.WAITING:
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


