"""Every attempt at every run, runs of one code, and what a page counts
(bwn/reproduce/{ledger,execute,fingerprint}.py, bwn/cli/reproduce.py)."""
from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from bwn import requirements
from bwn.analysis import fidelity
from bwn.cli import reproduce
from bwn.emulation import runner
from bwn.reproduce import execute
from bwn.reproduce import fingerprint as fp
from bwn.reproduce import grid as gr
from bwn.reproduce import ledger as lg
from bwn.rundir import RunDir, RunMeta

CODE = fp.CodeState("f00dfeedf00dfeed", "abc1234", ())


class FakeRuns:
    """runner.run_scheme without a network: writes run.json as a run would, valid
    unless its scheme is in ``invalid``."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self.targets: list[str] = []
        self.invalid: set[str] = set()

    def __call__(self, cfg, scheme, out_dir, duration_s, progress=print, target="bmv2"):
        self.calls.append((scheme, cfg.seed))
        self.targets.append(target)
        valid = scheme not in self.invalid
        meta = RunMeta(ok=True, seed=cfg.seed, duration_s=duration_s,
                       fidelity={"valid": valid, "summary": "valid" if valid else "INVALID: cpu: BROKEN: 3 s busy"})
        RunDir(out_dir).write_meta(meta)
        return meta


@pytest.fixture
def runs(monkeypatch):
    fake = FakeRuns()
    monkeypatch.setattr(runner, "run_scheme", fake)
    monkeypatch.setattr(execute, "LOCK_YIELD_S", 0.0)
    monkeypatch.setattr(requirements, "experiment_missing", lambda target="bmv2": None)
    monkeypatch.setattr(reproduce, "_quiet_mininet", lambda: None)
    monkeypatch.setattr(reproduce.fp, "code_state", lambda: CODE)
    monkeypatch.setattr(lg, "machine_text", lambda: "box: 2 CPUs")
    return fake


def bwn_reproduce(*words: str) -> int:
    from bwn.cli.main import main
    return main(["reproduce", *words])


def ledger_rows(out: Path, paper: str = "gtcp") -> list[dict[str, str]]:
    return list(csv.DictReader(open(out / f"{paper}-runs.csv")))


def test_every_attempt_is_in_the_ledger_and_an_invalid_run_is_made_again_at_most_three_times(tmp_path, runs):
    runs.invalid = {"newreno"}
    assert bwn_reproduce("gtcp", "--cases", "basic", "--out", str(tmp_path)) == 1     # newreno never valid
    case = gr.load_grid("gtcp").case("basic")
    per_scheme = {s: sum(1 for x, _ in runs.calls if x == s) for s in case.schemes}
    assert per_scheme == {"gtcp": case.seeds, "gtcp:cwnd_g_rtt=srtt": case.seeds, "newreno": 3 * case.seeds}
    rows = ledger_rows(tmp_path)
    basic = [r for r in rows if r["case"] == "basic"]
    assert len(basic) == 5 * case.seeds                          # every attempt, INVALID ones included
    invalid = [r for r in basic if r["status"] == "INVALID"]
    assert len(invalid) == 3 * case.seeds and all("cpu: BROKEN" in r["reason"] for r in invalid)
    assert all(r["counted"] == "0" for r in invalid)
    assert {r["code"] for r in basic} == {CODE.fingerprint} and {r["commit"] for r in basic} == {"abc1234"}
    assert {r["machine"] for r in basic} == {"box: 2 CPUs"}
    assert len({r["attempt"] for r in basic}) == len(basic)
    assert len(list((tmp_path / "gtcp" / "superseded").iterdir())) == 2 * case.seeds    # earlier attempts kept
    text = (tmp_path / "gtcp.md").read_text()
    assert f"{5 * case.seeds} attempts in all: {3 * case.seeds} INVALID" in text
    assert f"{case.seeds} runs made again after such an attempt" in text
    # The same command again: this code has used its attempts on those keys.
    runs.calls.clear()
    runs.invalid.clear()
    assert bwn_reproduce("gtcp", "--cases", "basic", "--out", str(tmp_path)) == 1
    assert runs.calls == []


def test_a_valid_run_is_not_made_again_and_a_new_machine_carries_it_from_the_ledger(tmp_path, runs):
    assert bwn_reproduce("gtcp", "--cases", "basic", "--out", str(tmp_path)) == 0
    made = len(runs.calls)
    runs.calls.clear()
    assert bwn_reproduce("gtcp", "--cases", "basic", "--out", str(tmp_path)) == 0
    assert runs.calls == []
    shutil.rmtree(tmp_path / "gtcp")                               # a new machine: the folders are gone
    assert bwn_reproduce("gtcp", "--cases", "basic", "--out", str(tmp_path)) == 0
    assert runs.calls == []
    rows = ledger_rows(tmp_path)
    assert len([r for r in rows if r["case"] == "basic"]) == made and all(r["counted"] == "1" for r in rows
                                                                          if r["case"] == "basic")
    assert "(carried)" in (tmp_path / "gtcp.md").read_text()


def test_runs_of_other_code_are_listed_never_pooled_and_made_again(tmp_path, runs, monkeypatch, capsys):
    assert bwn_reproduce("gtcp", "--cases", "basic", "--out", str(tmp_path)) == 0
    shutil.rmtree(tmp_path / "gtcp")
    other = fp.CodeState("0123456789abcdef", "def5678", ())
    monkeypatch.setattr(reproduce.fp, "code_state", lambda: other)
    monkeypatch.setattr(lg.fp, "files_differing", lambda commit: ["p4src/v1model/bwn.p4", "hosts/cc/gtcp.py"])
    assert bwn_reproduce("gtcp", "--plan", "--cases", "basic", "--out", str(tmp_path)) == 0
    out = capsys.readouterr().out
    assert "not carried: valid runs made at abc1234, whose run code differs from this checkout's in " \
           "p4src/v1model/bwn.p4, hosts/cc/gtcp.py" in out
    case = gr.load_grid("gtcp").case("basic")
    assert f"to make: {3 * case.seeds} (made by other code (f00dfeedf00dfeed, at abc1234))" in out
    runs.calls.clear()
    assert bwn_reproduce("gtcp", "--cases", "basic", "--out", str(tmp_path)) == 0
    assert len(runs.calls) == 3 * case.seeds
    rows = [r for r in ledger_rows(tmp_path) if r["case"] == "basic"]
    assert sorted({(r["code"], r["counted"]) for r in rows}) == [(other.fingerprint, "1"), (CODE.fingerprint, "0")]
    text = (tmp_path / "gtcp.md").read_text()
    assert "at abc1234: `p4src/v1model/bwn.p4`, `hosts/cc/gtcp.py`" in text


def test_uncommitted_run_code_is_refused_and_allow_dirty_runs_are_never_counted(tmp_path, runs, monkeypatch, capsys):
    dirty = fp.CodeState(CODE.fingerprint, CODE.commit, ("hosts/cc/gtcp.py",))
    monkeypatch.setattr(reproduce.fp, "code_state", lambda: dirty)
    assert bwn_reproduce("gtcp", "--cases", "basic", "--out", str(tmp_path)) == 3
    err = capsys.readouterr().err
    assert "the run code has uncommitted changes (hosts/cc/gtcp.py)" in err and runs.calls == []
    assert bwn_reproduce("gtcp", "--cases", "basic", "--out", str(tmp_path), "--allow-dirty") == 1
    rows = [r for r in ledger_rows(tmp_path) if r["case"] == "basic"]
    assert rows and {(r["code"], r["commit"], r["counted"]) for r in rows} == {("", "abc1234-dirty", "0")}
    assert "made from a tree with uncommitted run code" in (tmp_path / "gtcp.md").read_text()


def test_a_changed_checker_judges_again_where_it_can_and_remakes_the_rest(tmp_path, runs, monkeypatch):
    monkeypatch.setattr(fidelity, "CHECKS_VERSION", "1", raising=False)
    assert bwn_reproduce("gtcp", "--cases", "basic", "--out", str(tmp_path)) == 0
    monkeypatch.setattr(fidelity, "CHECKS_VERSION", "2", raising=False)
    runs.calls.clear()
    assert bwn_reproduce("gtcp", "--cases", "basic", "--out", str(tmp_path)) == 0
    assert runs.calls == []                                          # folders here: judged again
    shutil.rmtree(tmp_path / "gtcp")
    monkeypatch.setattr(fidelity, "CHECKS_VERSION", "3", raising=False)
    assert bwn_reproduce("gtcp", "--cases", "basic", "--out", str(tmp_path)) == 0
    assert len(runs.calls) == 3 * gr.load_grid("gtcp").case("basic").seeds      # carried: cannot be
    text = (tmp_path / "gtcp.md").read_text()
    assert "judged by fidelity checks 2, now 3; its measurements are not on this machine" in text


def test_a_run_made_with_another_scenario_is_not_counted_and_is_made_again(tmp_path, runs, monkeypatch):
    import dataclasses
    assert bwn_reproduce("gtcp", "--cases", "basic", "--out", str(tmp_path)) == 0
    real = gr.load_grid

    def edited(paper, path=None):
        grid = real(paper, path)
        cases = tuple(dataclasses.replace(c, params={**c.params, "af_packets": 20}) if c.id == "basic" else c
                      for c in grid.cases)
        return dataclasses.replace(grid, cases=cases)

    monkeypatch.setattr(reproduce.gr, "load_grid", edited)
    runs.calls.clear()
    assert bwn_reproduce("gtcp", "--cases", "basic", "--out", str(tmp_path)) == 0
    assert len(runs.calls) == 3 * gr.load_grid("gtcp").case("basic").seeds


def test_an_invocation_for_some_cases_keeps_the_rest_of_the_grid(tmp_path, runs):
    assert bwn_reproduce("gtcp", "--cases", "basic", "--out", str(tmp_path)) == 0
    assert bwn_reproduce("gtcp", "--cases", "sack", "--out", str(tmp_path)) == 0
    assert {r["case"] for r in ledger_rows(tmp_path)} == {"basic", "sack"}
    text = (tmp_path / "gtcp.md").read_text()
    assert "| basic | 1 | gtcp | yes |" in text and "| sack | 1 | gtcp | yes |" in text


def test_reproduce_run_makes_exactly_one_run_by_its_key(tmp_path, runs, capsys):
    from bwn.cli.main import main
    assert main(["reproduce-run", "gtcp/basic/seed2/newreno", "--out", str(tmp_path)]) == 0
    assert runs.calls == [("newreno", 2)]
    info = json.loads((tmp_path / "gtcp" / "basic" / "seed2" / "newreno" / "attempt.json").read_text())
    assert info["key"] == "gtcp/basic/seed2/newreno" and info["code"] == CODE.fingerprint and info["wall_s"] >= 0
    runs.invalid = {"newreno"}
    assert main(["reproduce-run", "gtcp/basic/seed2/newreno", "--out", str(tmp_path)]) == 1
    assert main(["reproduce-run", "gtcp/basic/seed99/newreno", "--out", str(tmp_path)]) == 2
    assert "case basic runs seeds 1-" in capsys.readouterr().err
    assert main(["reproduce-run", "gtcp/basic/newreno", "--out", str(tmp_path)]) == 2
    assert "a run key is PAPER/CASE/seedN/SCHEME" in capsys.readouterr().err
    assert main(["reproduce-run", "nope/basic/seed1/x", "--out", str(tmp_path)]) == 2


def test_the_plan_says_what_is_left_and_why(tmp_path, runs, capsys):
    assert bwn_reproduce("gtcp", "--plan", "--cases", "basic", "--out", str(tmp_path)) == 0
    case = gr.load_grid("gtcp").case("basic")
    out = capsys.readouterr().out
    assert f"gtcp: 1 cases, {3 * case.seeds} runs (0 done or out of attempts)" in out
    assert f"to make: {3 * case.seeds} (not run yet)" in out
    assert runs.calls == []


def test_the_cli_rejects_bad_arguments(capsys):
    assert bwn_reproduce("nosuchpaper", "--plan") == 2
    assert "unknown paper" in capsys.readouterr().err
    assert bwn_reproduce("ebn", "--plan", "--cases", "zz") == 2
    assert "no case(s) zz" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bwn_reproduce("ebn", "--seeds", "8")          # seeds are the grid's, declared before the runs


def test_a_superseded_attempt_belongs_to_the_key_its_attempt_file_names(tmp_path):
    """Folder names cannot tell scheme `x` from scheme `x-y` (superseded/a-seed1-x-...),
    attempt.json can."""
    out = tmp_path / "p"
    x, xy = lg.RunKey("p", "a", 1, "x"), lg.RunKey("p", "a", 1, "x-y")
    for key, name in ((x, "a-seed1-x-20260101T000000-aaa"), (xy, "a-seed1-x-y-20260101T000000-bbb")):
        folder = out / "superseded" / name
        folder.mkdir(parents=True)
        lg.write_attempt_file(folder, key, name[-3:], CODE, "bwn reproduce p")
    assert [p.name for p in lg.folders_here(out, x)] == ["a-seed1-x-20260101T000000-aaa"]
    assert [p.name for p in lg.folders_here(out, xy)] == ["a-seed1-x-y-20260101T000000-bbb"]


def test_a_case_on_the_ebpf_switch_runs_there_and_is_refused_where_there_is_none(runs, tmp_path, monkeypatch,
                                                                                 capsys):
    """OBP's parking lot at the paper's rate (f8-n3-ebpf) runs with --target ebpf; on a
    machine without the eBPF switch, bwn reproduce says so (exit 3) and runs nothing."""
    monkeypatch.setattr(requirements, "experiment_missing",
                        lambda target="bmv2": "p4c-ebpf is not installed" if target == "ebpf" else None)
    assert bwn_reproduce("obp", "--cases", "f8-n3-ebpf", "--out", str(tmp_path)) == 3
    assert "cannot run obp's ebpf cases here: p4c-ebpf is not installed" in capsys.readouterr().err
    assert runs.calls == []
    monkeypatch.setattr(requirements, "experiment_missing", lambda target="bmv2": None)
    assert bwn_reproduce("obp", "--cases", "f8-n3-ebpf", "--out", str(tmp_path)) == 0
    assert len(runs.calls) == 10 and set(runs.targets) == {"ebpf"}
    # the BMv2 cases still run on BMv2
    runs.targets.clear()
    assert bwn_reproduce("obp", "--cases", "f3-single", "--out", str(tmp_path)) == 0
    assert runs.targets and set(runs.targets) == {"bmv2"}
