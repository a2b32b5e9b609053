"""One run's scenario from its case: the template filled, the run's flows, seed and
duration set (docs/reproduce.md, "Grids as data").

A case's template (``topologies/templates/<name>.toml``, else
``topologies/scenarios/<name>.toml``) has ``${param}`` placeholders
(:class:`string.Template`), filled with the case's ``params`` (over them, in
``--quick``, its ``quick_params``; over both, a named scheme's ``params``); then
:func:`render` sets keys of named links and of ``[experiment]``, adds the case's
generated flows (and a reservation per flow of a ``reserve`` group), the duration,
the seed and the seed's start offsets, and drops a reserved rate the scheme cannot
take.
"""
from __future__ import annotations

import copy
import string
try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser, as a package
    import tomli as tomllib  # type: ignore[no-redef]
from typing import Any

from bwn.reproduce.grid import GridError, template_path
from bwn.reproduce.gridmodel import Case, Grid
from bwn.scenario import seeding
from bwn.scenario.config import RESERVED_RATE_ALGORITHMS, UNDER_TEST


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
    algorithm = grid.algorithm(scheme)
    for i, flow in enumerate(flows):
        offset = seeding.start_offset_s(seed, i, grid.start_spread_s)
        start = float(flow.get("start_s", 0.0)) + offset
        # --quick shortens the run: a flow that would start after its middle starts there,
        # and one that would end after the run ends with it
        flow["start_s"] = round(min(start, duration_s * 0.5) if quick else start, 3)
        if quick and "duration_s" in flow:
            flow["duration_s"] = round(min(float(flow["duration_s"]), duration_s - flow["start_s"]), 3)
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
