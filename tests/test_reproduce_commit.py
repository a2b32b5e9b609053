"""The commit a results page names: -dirty only when code or grids differ from it,
not when the results it writes do (bwn/reproduce/core.py commit_text)."""
from __future__ import annotations

import subprocess
from pathlib import Path

from bwn.reproduce import grid as gr
from bwn.reproduce import core as reproduce


def _git(repo: Path, *words: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *words], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_commit_is_dirty_for_code_changes_but_not_for_the_results_it_writes(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    (repo / "docs" / "results").mkdir(parents=True)
    (repo / "bwn.py").write_text("x = 1\n")
    (repo / "docs" / "results" / "ebn.md").write_text("old page\n")
    _git(repo, "init", "-q")
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "add", ".")
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "one")
    head = _git(repo, "rev-parse", "--short", "HEAD")
    monkeypatch.setattr(gr, "REPO", repo)
    out = repo / "docs" / "results"
    assert reproduce.commit_text(out) == head
    (out / "ebn.md").write_text("regenerated page\n")
    (out / "new-plot.png").write_bytes(b"png")                       # untracked: never dirty
    assert reproduce.commit_text(out) == head                         # the page being written
    assert reproduce.commit_text() == f"{head}-dirty"                 # without OUT it counts
    assert reproduce.commit_text(tmp_path / "elsewhere") == f"{head}-dirty"
    (repo / "bwn.py").write_text("x = 2\n")
    assert reproduce.commit_text(out) == f"{head}-dirty"             # the code differs


def test_commit_outside_a_checkout_is_unknown(tmp_path, monkeypatch):
    monkeypatch.setattr(gr, "REPO", tmp_path)
    assert reproduce.commit_text(tmp_path / "results") == "unknown"
