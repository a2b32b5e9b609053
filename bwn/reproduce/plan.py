"""The runs a grid asks for, each by its key, and the scenario each one runs.

A run is one scheme, one case, one seed: :class:`RunKey`. A full grid runs each
case with the seeds its grid declares before any run (``[paper] seeds``, or the
case's own ``seeds``; at least 5); ``--quick`` runs the quick cases once, short.
A run belongs to its scenario: :func:`scenario_fingerprint` is a hash of the
validated scenario, kept with every attempt, so a run is counted only while its
case still renders to the scenario it was made with.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser, as a package
    import tomli as tomllib  # type: ignore[no-redef]
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from bwn.reproduce import grid as gr
from bwn.reproduce.render import render
from bwn.rundir import RunDir
from bwn.scenario.config import ConfigError, validate
from bwn.scenario.resolved import ExperimentConfig

#: Wall time of one run beyond its duration (network, switches, controller,
#: teardown), for the plan's estimate (measured: 4-7 s, up to 20 s waiting for the lock).
OVERHEAD_S = 10.0

#: Fields added to the scenario after runs were fingerprinted, with the value that
#: keeps the earlier behaviour: at that value a field is left out of the fingerprint,
#: so the runs made before it existed still match (any other value is a new scenario).
NEUTRAL_LATER_FIELDS = {"queue_lookahead": False, "linkem_shared": False}


@dataclass(frozen=True, order=True)
class RunKey:
    """One planned run: which paper, case, seed and scheme."""

    paper: str
    case: str
    seed: int
    scheme: str

    def text(self) -> str:
        """``paper/case/seedN/scheme``: how the key is written on a command line."""
        return f"{self.paper}/{self.case}/seed{self.seed}/{self.scheme}"

    @classmethod
    def parse(cls, text: str) -> "RunKey":
        parts = text.split("/")
        if len(parts) != 4 or not parts[2].startswith("seed") or not parts[2][4:].isdigit():
            raise ValueError(f"a run key is PAPER/CASE/seedN/SCHEME, not {text!r}")
        return cls(parts[0], parts[1], int(parts[2][4:]), parts[3])


@dataclass(frozen=True)
class PlannedRun:
    key: RunKey
    case: gr.Case
    duration_s: float


def seeds_of(case: gr.Case, quick: bool) -> range:
    return range(1, (1 if quick else case.seeds) + 1)


def planned_runs(grid: gr.Grid, quick: bool, cases: Optional[Sequence[gr.Case]] = None) -> list[PlannedRun]:
    """Every run of ``cases`` (default: the grid's selection), in grid order."""
    cases = grid.selected(quick) if cases is None else cases
    return [PlannedRun(RunKey(grid.paper, case.id, seed, scheme), case, planned_duration_s(case, quick))
            for case in cases for seed in seeds_of(case, quick) for scheme in case.schemes]


def waiting_runs(grid: gr.Grid) -> dict[str, list[PlannedRun]]:
    """machinery -> the full grid's runs that wait for it (a run waiting for several
    machines is listed under each): waiting cases' declared schemes, and waiting schemes
    of the other cases (evidence cases left out)."""
    out: dict[str, list[PlannedRun]] = {}
    for case in grid.cases:
        if case.evidence:
            continue
        for scheme in list(case.schemes) + [s for s, _ in case.waiting_schemes]:
            needs = list(case.waiting) + [m for s, ms in case.waiting_schemes if s == scheme for m in ms]
            for seed in seeds_of(case, False):
                run = PlannedRun(RunKey(grid.paper, case.id, seed, scheme), case, case.duration_s)
                for m in dict.fromkeys(needs):
                    out.setdefault(m, []).append(run)
    return out


def find_run(grid: gr.Grid, key: RunKey, quick: bool) -> PlannedRun:
    """The planned run of ``key``; ValueError naming what does not exist."""
    try:
        case = grid.case(key.case)
    except KeyError:
        raise ValueError(f"{grid.paper} has no case {key.case!r}; known: "
                         f"{', '.join(c.id for c in grid.cases)}") from None
    if case.waiting:
        raise ValueError(f"case {key.case} waits for {gr.machinery_text(case.waiting)}")
    waits = dict(case.waiting_schemes)
    if key.scheme in waits:
        raise ValueError(f"scheme {key.scheme} waits for {gr.machinery_text(waits[key.scheme])}")
    if key.scheme not in case.schemes:
        raise ValueError(f"case {key.case} runs {', '.join(case.schemes)}, not {key.scheme!r}")
    if key.seed not in seeds_of(case, quick):
        raise ValueError(f"case {key.case} runs seeds 1-{len(seeds_of(case, quick))}, not {key.seed}")
    return PlannedRun(key, case, planned_duration_s(case, quick))


def safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def run_dir(out: Path, key: RunKey) -> Path:
    """Where a run's folder is: OUT/PAPER/<case>/seed<k>/<scheme>/ (``out`` is OUT/PAPER)."""
    return out / key.case / f"seed{key.seed}" / safe(key.scheme)


def planned_duration_s(case: gr.Case, quick: bool) -> float:
    return case.quick_duration_s if quick else case.duration_s


def estimate_s(plan: Sequence[PlannedRun], overhead_s: float = OVERHEAD_S) -> float:
    return sum(p.duration_s + overhead_s for p in plan)


def config_for(grid: gr.Grid, case: gr.Case, seed: int, scheme: str, quick: bool) -> tuple[dict, ExperimentConfig]:
    """The scenario of one run: the rendered TOML data and its validated config."""
    data = render(grid, case, seed, scheme, quick)
    cfg = validate(data, base_dir=gr.template_path(case.template).parent,
                   source=f"{grid.paper}:{case.id}:seed{seed}:{scheme}")
    return data, cfg


def _as_run(cfg: Any) -> dict[str, Any]:
    """What makes one run of ``cfg``: not its source, nor the case's list of schemes
    (a run runs one; adding a scheme to a case does not change the others' runs),
    nor a later field at its neutral value (:data:`NEUTRAL_LATER_FIELDS`)."""
    run = dataclasses.asdict(dataclasses.replace(cfg, source=None, schemes=()))
    for name, neutral in NEUTRAL_LATER_FIELDS.items():
        if name in run and run[name] == neutral:
            del run[name]
    return run


def scenario_fingerprint(cfg: Any) -> str:
    """A short hash of the validated scenario (as ``_as_run`` sees it); "" for a
    config that is not an ExperimentConfig dataclass (a stand-in some tests use)."""
    if not dataclasses.is_dataclass(cfg):
        return ""
    canonical = json.dumps(_as_run(cfg), sort_keys=True, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def stored_fingerprint(path: Path, case: gr.Case) -> str:
    """The fingerprint of the scenario the run in ``path`` was made with (its
    scenario.toml, validated: defaults a later version added compare equal to
    their absence); "" when it has none that validates."""
    try:
        stored_toml = RunDir(path).scenario_toml
        stored = validate(tomllib.loads(stored_toml.read_text()),
                          base_dir=gr.template_path(case.template).parent,
                          source=str(stored_toml))
    except (OSError, tomllib.TOMLDecodeError, ConfigError):
        return ""
    return scenario_fingerprint(stored)
