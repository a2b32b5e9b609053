"""A run's scenario fingerprint (bwn/reproduce/core.py): what makes a run, so that a later
session carries or keeps a run only while its case still renders to it."""
from __future__ import annotations

import csv
import dataclasses
import hashlib
import json

import pytest

from bwn.reproduce import grid as gr
from bwn.reproduce import core as reproduce


def _fingerprint_before_the_field(cfg) -> str:
    """The fingerprint as computed before queue_lookahead and linkem_shared existed
    (2026-11-26)."""
    run = dataclasses.asdict(dataclasses.replace(cfg, source=None, schemes=()))
    del run["queue_lookahead"], run["linkem_shared"]
    return hashlib.sha256(json.dumps(run, sort_keys=True, default=str).encode()).hexdigest()[:16]


def test_a_later_field_at_its_neutral_value_keeps_earlier_runs_fingerprints():
    grid = gr.load_grid("ebn")
    _, cfg = reproduce.config_for(grid, grid.case("d"), 1, "newreno", quick=False)
    assert cfg.queue_lookahead is False
    assert reproduce.scenario_fingerprint(cfg) == _fingerprint_before_the_field(cfg)
    ahead = dataclasses.replace(cfg, queue_lookahead=True)
    assert reproduce.scenario_fingerprint(ahead) != reproduce.scenario_fingerprint(cfg)
    assert cfg.linkem_shared is False
    shared = dataclasses.replace(cfg, linkem_shared=True)
    assert reproduce.scenario_fingerprint(shared) != reproduce.scenario_fingerprint(cfg)


def test_a_scenario_that_sets_the_look_ahead_renders_it():
    grid = gr.load_grid("ebn")
    case = grid.case("d")
    data, cfg = reproduce.config_for(grid, case, 1, "newreno", quick=False)
    data["experiment"]["queue_lookahead"] = True
    from bwn.scenario.config import validate
    cfg_ahead = validate(data, base_dir=gr.template_path(case.template).parent)
    assert cfg_ahead.queue_lookahead is True
    assert reproduce.scenario_fingerprint(cfg_ahead) != reproduce.scenario_fingerprint(cfg)


@pytest.mark.parametrize("paper", gr.PAPERS)
def test_every_committed_valid_run_matches_its_case_as_committed(paper):
    """docs/results/PAPER-runs.csv is made from the grid beside it: a complete run
    with a fingerprint is one its case, as committed, still renders to (else the page
    would count a run of another scenario, or a re-run would be owed)."""
    path = gr.REPO / "docs" / "results" / f"{paper}-runs.csv"
    if not path.exists():
        pytest.skip(f"no committed {path.name}")
    grid = gr.load_grid(paper)
    cases = {c.id: c for c in grid.cases}
    checked = 0
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            if row.get("complete") != "1" or not row.get("scenario") or row["case"] not in cases:
                continue
            _, cfg = reproduce.config_for(grid, cases[row["case"]], int(row["seed"]), row["scheme"], quick=False)
            assert reproduce.scenario_fingerprint(cfg) == row["scenario"], (row["case"], row["seed"], row["scheme"])
            checked += 1
    assert checked > 0
