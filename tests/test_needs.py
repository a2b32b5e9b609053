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
