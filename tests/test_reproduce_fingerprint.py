"""What made a run: its scenario's fingerprint (bwn/reproduce/plan.py), so that a run
counts only while its case still renders to it; and its code's fingerprint
(bwn/reproduce/fingerprint.py), so that a page pools only runs of one code."""
from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from bwn.reproduce import grid as gr
from bwn.reproduce import fingerprint as fp
from bwn.reproduce import plan as reproduce


def _fingerprint_before_the_field(cfg) -> str:
    """The fingerprint as computed before queue_lookahead and linkem_shared existed
    (the format's first version)."""
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


@pytest.mark.parametrize("paper", gr.GRIDS)
def test_every_counted_run_of_the_committed_ledger_matches_its_case_as_committed(paper):
    """docs/results/PAPER-runs.csv is made from the grid beside it: a run it counts is
    one its case, as committed, still renders to (else the page would count a run of
    another scenario, or a re-run would be owed)."""
    path = gr.REPO / "docs" / "results" / f"{paper}-runs.csv"
    rows = list(csv.DictReader(open(path, newline=""))) if path.exists() else []
    counted = [r for r in rows if r.get("counted") == "1"]
    if not counted:
        pytest.skip(f"{path.name} counts no run yet")
    grid = gr.load_grid(paper)
    cases = {c.id: c for c in grid.cases}
    for row in counted:
        _, cfg = reproduce.config_for(grid, cases[row["case"]], int(row["seed"]), row["scheme"], quick=False)
        assert reproduce.scenario_fingerprint(cfg) == row["scenario"], (row["case"], row["seed"], row["scheme"])


def _git(repo: Path, *words: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t", *words],
                          capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    repo = tmp_path / "repo"
    for rel, text in {"bwn/emulation/runner.py": "x = 1\n", "bwn/analysis/report.py": "y = 1\n",
                      "hosts/cc/ebn.py": "z = 1\n", "p4src/v1model/bwn.p4": "// p4\n",
                      "p4src/tna/bwn.p4": "// tna\n", "p4src/psa/bwn.p4": "// psa\n",
                      "controller/ebpf.py": "e = 1\n", "controller/nikss.py": "k = 1\n",
                      "docs/results/ebn.md": "page\n",
                      "topologies/reproduce/ebn.toml": "[paper]\n", "topologies/nodes.py": "n = 1\n"}.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "one")
    return repo


def test_the_code_fingerprint_covers_what_a_run_executes_and_nothing_else(repo):
    first = fp.code_state(repo)
    assert first.clean and sorted(fp.blobs("HEAD", repo)) == [
        "bwn/emulation/runner.py", "controller/ebpf.py", "controller/nikss.py", "hosts/cc/ebn.py",
        "p4src/psa/bwn.p4", "p4src/v1model/bwn.p4", "topologies/nodes.py"]
    # Results, docs, grids, the analysis and Tofino's program change nothing.
    for rel in ("docs/results/ebn.md", "topologies/reproduce/ebn.toml", "bwn/analysis/report.py", "p4src/tna/bwn.p4"):
        (repo / rel).write_text("changed\n")
    assert fp.code_state(repo).clean
    _git(repo, "commit", "-q", "-am", "two")
    second = fp.code_state(repo)
    assert second.fingerprint == first.fingerprint and second.commit != first.commit
    assert fp.files_differing(first.commit, repo) == []
    # The agents are run code.
    (repo / "hosts/cc/ebn.py").write_text("z = 2\n")
    assert fp.code_state(repo).dirty == ("hosts/cc/ebn.py",)
    _git(repo, "commit", "-q", "-am", "three")
    third = fp.code_state(repo)
    assert third.fingerprint != first.fingerprint
    assert fp.files_differing(first.commit, repo) == ["hosts/cc/ebn.py"]
    assert fp.files_differing("0" * 40, repo) is None                    # a commit this repository lacks
    # The eBPF switch's program and adapter are run code too (a grid case may run on it).
    for rel in ("p4src/psa/bwn.p4", "controller/nikss.py"):
        (repo / rel).write_text("changed again\n")
        assert fp.code_state(repo).dirty == (rel,)
        _git(repo, "checkout", "-q", "--", rel)


def test_an_untracked_file_in_run_code_makes_the_tree_dirty(repo):
    (repo / "bwn/emulation/new.py").write_text("new\n")
    (repo / "docs/notes.md").write_text("notes\n")
    assert fp.code_state(repo).dirty == ("bwn/emulation/new.py",)


def test_outside_a_checkout_the_code_cannot_be_told(tmp_path):
    with pytest.raises(fp.FingerprintError):
        fp.code_state(tmp_path)
