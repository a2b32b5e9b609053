"""The test-suite's own contract: under BWN_REQUIRE_P4=1 a missing tool fails a
test instead of skipping it (CI relies on it to never pass with the dataplane skipped)."""
from __future__ import annotations

import pytest

import needs


def test_missing_skips_by_default(monkeypatch):
    monkeypatch.setattr(needs, "REQUIRED", False)
    with pytest.raises(pytest.skip.Exception, match="SKIPPED thing: p4c not on PATH"):
        needs.missing("p4c not on PATH", "thing")


def test_missing_fails_when_required(monkeypatch):
    monkeypatch.setattr(needs, "REQUIRED", True)
    with pytest.raises(pytest.fail.Exception, match="BWN_REQUIRE_P4=1, but thing: p4c not on PATH"):
        needs.missing("p4c not on PATH", "thing")


def test_nothing_missing_does_nothing(monkeypatch):
    monkeypatch.setattr(needs, "REQUIRED", True)
    needs.missing(None, "thing")


def test_no_tool_names_only_the_absent_ones():
    assert needs.no_tool("sh") is None
    assert needs.no_tool("sh", "bwn-no-such-tool") == "bwn-no-such-tool not on PATH"


def _tree(tmp_path, ages):
    """A repo with build/bwn.json and the given p4src files, each `ages[path]` s old."""
    import os
    import time
    now = time.time()
    for rel, age in ages.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("x")
        os.utime(p, (now - age, now - age))
    return tmp_path


def test_stale_build_looks_at_the_bmv2_sources_only(tmp_path, monkeypatch):
    """An edit of the Tofino program does not make build/bwn.json stale; an edit of
    the v1model or shared sources does (when p4c is not there to rebuild)."""
    repo = _tree(tmp_path, {"build/bwn.json": 50, "p4src/v1model/bwn.p4": 100,
                            "p4src/shared/define.p4": 100, "p4src/tna/bwn.p4": 10})
    monkeypatch.setattr(needs, "REPO", repo)
    monkeypatch.setattr(needs, "BUILD_JSON", repo / "build" / "bwn.json")
    monkeypatch.setattr(needs.shutil, "which", lambda name: None)
    assert needs.stale_build() is None
    _tree(tmp_path, {"p4src/shared/define.p4": 10})
    assert "older than p4src" in needs.stale_build()
