"""scripts/p4_mutants.py: every mutant still applies to today's program (the files
of p4src/v1model), and --resume reuses only results made against today's program
and PTF suite.
(The mutation run itself compiles and runs PTF per mutant: not in CI.)"""
from __future__ import annotations

import importlib.util
import re
import shutil
import sys
from pathlib import Path

import pytest
from scriptmod import loaded_script

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def p4m():
    with loaded_script("p4_mutants.py", "p4_mutants") as mod:
        yield mod


def test_every_mutant_applies_once_and_changes_the_program(p4m):
    names = [m.name for m in p4m.MUTANTS]
    assert len(names) == len(set(names)), "mutant names must be unique (results are keyed by name)"
    for m in p4m.MUTANTS:
        assert m.path in p4m.program_files(), f"{m.name}: {m.path} is not a file of the program"
        src = (REPO / "p4src" / m.path).read_text()
        mutated = p4m.apply(m, src)
        assert mutated is not None, f"{m.name}: its text is not in {m.path} once (update the list)"
        assert mutated != src, f"{m.name}: changes nothing"
    assert set(p4m.EQUIVALENT) <= set(names)


def test_apply_refuses_text_found_twice_unless_every(p4m):
    twice = "a < b; a < b;"
    assert p4m.apply(p4m.Mutant("x", "bwn.p4", "a < b", "a >= b"), twice) is None
    assert p4m.apply(p4m.Mutant("x", "bwn.p4", "a < b", "a >= b", every=True), twice) == "a >= b; a >= b;"
    assert p4m.apply(p4m.Mutant("x", "bwn.p4", "c", "d"), twice) is None


def test_resume_keeps_only_verdicts_made_against_todays_program_and_tests(p4m):
    now = p4m.fingerprint()
    assert set(now) == {"program_sha256", "tests_sha256"} and all(len(v) == 64 for v in now.values())
    old_program = {**now, "program_sha256": "0" * 64}
    old_tests = {**now, "tests_sha256": "0" * 64}
    previous = [
        {"name": "a", "result": "killed", **now},
        {"name": "b", "result": "survived", **old_program},
        {"name": "c", "result": "timeout", **old_tests},
        {"name": "d", "result": "stale", **now},
        {"name": "e", "result": "survived"},                 # made before results were fingerprinted
        {"name": "f", "result": "invalid", **now},
        {"name": "gone", "result": "killed", **now},          # no longer in the list
    ]
    kept = p4m.reusable(previous, {"a", "b", "c", "d", "e", "f"}, now)
    assert sorted(kept) == ["a", "f"]


@pytest.mark.parametrize("edited", ["v1model/bwn.p4", "v1model/include/control/stamp.p4", "shared/define.p4"])
def test_fingerprint_follows_every_file_of_the_program(p4m, tmp_path, monkeypatch, edited):
    before = p4m.fingerprint()
    fake = tmp_path / "repo"
    shutil.copytree(REPO / "p4src", fake / "p4src")
    (fake / "ptf-tests").mkdir()
    for f in (REPO / "ptf-tests").glob("*.py"):
        (fake / "ptf-tests" / f.name).write_bytes(f.read_bytes())
    monkeypatch.setattr(p4m, "REPO", fake)
    assert p4m.fingerprint() == before
    (fake / "p4src" / "tna" / "bwn.p4").write_text("// not part of the BMv2 program\n")
    assert p4m.fingerprint() == before
    (fake / "p4src" / edited).write_text((REPO / "p4src" / edited).read_text() + "\n// edited\n")
    after = p4m.fingerprint()
    assert after["tests_sha256"] == before["tests_sha256"]
    assert after["program_sha256"] != before["program_sha256"]
    (fake / "ptf-tests" / "extra_tests.py").write_text("# a new test file\n")
    assert p4m.fingerprint()["tests_sha256"] != before["tests_sha256"]


@pytest.fixture(scope="module")
def run_ptf():
    spec = importlib.util.spec_from_file_location("run_ptf", REPO / "ptf-tests" / "run_ptf.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _script(*lines: str) -> list[str]:
    """A stand-in for PTF that prints unittest's verbose result lines, then hangs."""
    body = "".join(f"print({line!r}, flush=True)\n" for line in lines)
    return [sys.executable, "-c", body + "import time\ntime.sleep(60)\n"]


@pytest.mark.parametrize("lines, first", [
    (("bwn_tests.ForwardingTest ... ok", "bwn_tests.TtlTest ... FAIL", "bwn_tests.Later ... ERROR"),
     "FAIL: bwn_tests.TtlTest"),
    (("bwn_tests.ForwardingTest ... ok", "bwn_tests.StampTest", "A stamped packet keeps its length ... ERROR"),
     "ERROR: bwn_tests.StampTest"),
])
def test_failfast_stops_ptf_at_the_first_failure(run_ptf, capsys, lines, first):
    """PTF 0.12 ignores its own --failfast: run_ptf.py watches the result lines,
    names the first failing test and stops PTF (here a process that would hang)."""
    rc = run_ptf.run_until_first_failure(_script(*lines))
    out = capsys.readouterr().out
    assert rc == 1
    assert first in out.splitlines()
    assert "Later" not in out.split(first)[1]


def test_failfast_returns_ptfs_own_status_when_nothing_failed(run_ptf, capsys):
    ok = [sys.executable, "-c", "print('a ... ok'); print('b ... skipped'); raise SystemExit(0)"]
    assert run_ptf.run_until_first_failure(ok) == 0
    bad = [sys.executable, "-c", "print('a ... ok'); raise SystemExit(3)"]
    assert run_ptf.run_until_first_failure(bad) == 3
    assert "a ... ok" in capsys.readouterr().out


def test_hints_name_listed_mutants_and_existing_ptf_tests(p4m):
    """A hint only saves time, but one naming a renamed test would silently cost the
    whole suite for its mutant: every hint is a mutant of the list and a PTF class."""
    names = {m.name for m in p4m.MUTANTS}
    assert set(p4m.HINTS) <= names
    classes = set()
    for f in (REPO / "ptf-tests").glob("*_tests.py"):
        classes |= {f"{f.stem}.{c}" for c in re.findall(r"^class (\w+)\(", f.read_text(), re.M)}
    for mutant, tests in p4m.HINTS.items():
        assert tests and set(tests) <= classes, f"{mutant}: {set(tests) - classes} are not PTF test classes"
