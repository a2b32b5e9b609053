"""`bwn`'s exit codes and messages for what a user gets wrong (no experiment runs:
the checks come before anything is built, and `bwn.requirements.experiment_missing` is replaced where a
root machine would otherwise start one).

Exit status: 0 done, 1 the run or report failed, 2 bad arguments or scenario,
3 this machine cannot run experiments, 130 interrupted."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bwn import requirements
from bwn.cli import main as cli
from bwn.rundir import RunDir
from hosts.cc.registry import ALGORITHMS

# Every file of topologies/scenarios/, in name order (e.g. "ebn-sine, gtcp-reservations, ...").
KNOWN_SCENARIOS = ", ".join(sorted(p.stem for p in (Path(__file__).resolve().parents[1]
                                                    / "topologies" / "scenarios").glob("*.toml")))


@pytest.fixture()
def no_experiment(monkeypatch):
    """Fail the test if a command got as far as starting an experiment."""
    def refuse(*_a, **_k):
        raise AssertionError("an experiment was started")
    from bwn.emulation import runner as experiment
    from bwn.emulation import session
    monkeypatch.setattr(experiment, "run_scheme", refuse)
    monkeypatch.setattr(session, "run_session", refuse)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        rc = cli.main(list(argv))
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


def test_list_names_every_scenario_and_scheme(capsys):
    rc, out, err = run(capsys, "list")
    assert rc == 0 and err == ""
    assert "smoke" in KNOWN_SCENARIOS and "obp-parking-lot" in KNOWN_SCENARIOS
    for name in KNOWN_SCENARIOS.split(", "):
        assert f"\n  {name} " in out
    assert "  smoke              " in out and out.split("smoke", 1)[1].split("\n")[0].strip()
    # a line per scheme, saying what it is (its class's first docstring line)
    for name in ALGORITHMS:
        assert f"\n  {name:<18} {cli.scheme_summary(name)}\n" in out + "\n"
        assert cli.scheme_summary(name)
    assert "\n  obp                OBP: rate-based MICMDC" in out


def test_version(capsys):
    from importlib import metadata
    rc, out, _ = run(capsys, "--version")
    assert (rc, out) == (0, f"bwn {metadata.version('bwn')}\n")


def test_run_without_out_writes_a_new_folder_under_runs(monkeypatch, tmp_path):
    when = 1_795_000_000.0                                   # 2026-11-18 11:06:40 UTC
    assert cli.default_run_out(Path("x/smoke.toml"), when) == Path("runs/smoke-20261118-110640")
    assert cli.default_run_out(Path("smoke.toml")) != cli.default_run_out(Path("smoke.toml"), when)


@pytest.mark.parametrize("command", ["run", "net"])
def test_unknown_scenario_is_exit_2_naming_the_known_ones(capsys, command, no_experiment, tmp_path):
    args = [command, "nosuch"] + (["--out", str(tmp_path)] if command == "run" else [])
    rc, _, err = run(capsys, *args)
    assert rc == 2
    assert err == f"bwn {command}: unknown scenario 'nosuch'; known: {KNOWN_SCENARIOS} (or a path to a .toml)\n"


@pytest.mark.parametrize("command", ["run", "net"])
def test_bad_scenario_file_is_exit_2_with_the_file_and_problem(capsys, command, no_experiment, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[experiment]\nname = "x"\nduration_s = -1\n')
    rc, _, err = run(capsys, command, str(bad), "--out", str(tmp_path / "out"))
    assert rc == 2
    assert err.startswith(f"bwn {command}: {bad}: ") and "duration_s" in err


@pytest.mark.parametrize("schemes, says", [
    ("ebn,warp", "bwn run: unknown scheme(s) warp; known: "),
    ("ebn:variant", "bwn run: scheme 'ebn:variant': parameter 'variant' is not key=value"),
    ("ebn:nosuch=1", "bwn run: "),
    (",", "bwn run: no schemes given (--schemes) and none in the scenario"),
])
def test_bad_schemes_are_exit_2(capsys, no_experiment, tmp_path, schemes, says):
    rc, _, err = run(capsys, "run", "smoke", "--schemes", schemes, "--out", str(tmp_path))
    assert rc == 2 and err.startswith(says), err
    if "unknown scheme" in says:
        assert err.strip().endswith(", ".join(sorted(ALGORITHMS)))
    if "nosuch" in schemes:
        assert "nosuch" in err


def test_a_bad_parameter_value_is_caught_before_the_run(capsys, no_experiment, tmp_path):
    rc, _, err = run(capsys, "run", "smoke", "--schemes", "newreno,ebn:variant=sideways", "--out", str(tmp_path))
    assert rc == 2 and err.startswith("bwn run: ") and "sideways" in err


def test_a_scheme_that_needs_the_switchs_queue_on_a_link_served_by_bwn_link_is_exit_2(
        capsys, no_experiment, tmp_path):
    smoke = (Path(__file__).resolve().parents[1] / "topologies" / "scenarios" / "smoke.toml").read_text()
    steps = 'schedule = { kind = "steps", steps = [ { t_s = 0, rate_mbit = 5 }, { t_s = 4, rate_mbit = 2 } ] }'
    assert steps in smoke
    shaped = tmp_path / "shaped.toml"
    shaped.write_text(smoke.replace(steps, 'shaper = "link"\nschedule = { kind = "constant", rate_mbit = 5 }'))
    rc, _, err = run(capsys, "run", str(shaped), "--schemes", "newreno,obp", "--out", str(tmp_path / "out"))
    assert rc == 2
    assert err == (f'bwn run: {shaped}: link bottleneck (shaper = "link"): the switch\'s egress queue '
                   f'stays empty there, and obp reads it (OBP\'s queued bytes BI, GTCP\'s Assured '
                   f'Forwarding): use shaper = "switch" for this scheme\n')


def test_duration_must_be_positive(capsys, no_experiment, tmp_path):
    rc, _, err = run(capsys, "run", "smoke", "--duration", "0", "--out", str(tmp_path))
    assert (rc, err) == (2, "bwn run: --duration must be positive\n")


@pytest.mark.parametrize("command", ["run", "net"])
def test_a_machine_that_cannot_run_it_is_exit_3(capsys, monkeypatch, no_experiment, tmp_path, command):
    monkeypatch.setattr(requirements, "experiment_missing", lambda: "experiments need root (test)")
    rc, _, err = run(capsys, command, "smoke", "--out", str(tmp_path / "out"))
    assert (rc, err) == (3, f"bwn {command}: cannot run here: experiments need root (test)\n")
    assert not (tmp_path / "out").exists()     # nothing written before the checks pass


def test_pcap_needs_tcpdump(capsys, monkeypatch, no_experiment, tmp_path):
    pytest.importorskip("mininet.log")          # the run gets as far as Mininet's import
    monkeypatch.setattr(requirements, "experiment_missing", lambda: None)
    monkeypatch.setattr(requirements, "tcpdump_missing", lambda: "tcpdump is not installed (test)")
    rc, _, err = run(capsys, "run", "smoke", "--pcap", "--out", str(tmp_path))
    assert (rc, err) == (3, "bwn run: cannot run here: tcpdump is not installed (test)\n")
    monkeypatch.setattr(requirements, "tcpdump_missing", lambda: None)
    with pytest.raises(AssertionError, match="an experiment was started"):
        cli.main(["run", "smoke", "--pcap", "--out", str(tmp_path), "--duration", "1"])


def test_preflight_names_what_is_missing(monkeypatch):
    import os
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert requirements.experiment_missing() == "experiments need root (Mininet and BMv2 create interfaces and namespaces)"


def test_report_of_a_folder_that_is_not_a_run_is_exit_1(capsys, tmp_path):
    rc, out, err = run(capsys, "report", str(tmp_path))
    assert (rc, out) == (1, "")
    assert err == f"bwn report: {tmp_path}: no scheme directory (expected RUN_DIR/<scheme>/flows/...)\n"
    rc, _, err = run(capsys, "report", str(tmp_path / "missing"))
    assert (rc, err) == (1, f"bwn report: {tmp_path / 'missing'}: not a directory\n")


def test_report_prints_the_summary(capsys, tmp_path):
    obp = RunDir(tmp_path / "obp")
    obp.path.mkdir()
    obp.capacity_csv.write_text("t_s,link,rate_bps\n0,b,1000000\n")
    rc, out, err = run(capsys, "report", str(tmp_path))
    assert rc == 0 and out.startswith(f"{(tmp_path / 'summary.md').read_text()}")


def test_usage_errors_are_exit_2(capsys):
    rc, _, err = run(capsys)
    assert rc == 2 and "the following arguments are required: command" in err
    rc, _, err = run(capsys, "run")
    assert rc == 2 and "the following arguments are required: scenario" in err


class _FakeRun:
    """run_scheme's stand-in for the exit-status tests: a run.json per scheme with
    the verdict given, and no network."""

    def __init__(self, verdicts: dict[str, tuple[bool, bool]]):
        self.verdicts = verdicts      # scheme -> (ok, valid)

    def __call__(self, cfg, scheme, out_dir, duration_s, progress=None, pcap=False):
        from bwn.rundir import RunMeta
        ok, valid = self.verdicts[scheme]
        summary = "valid" if valid else "INVALID: queue: the egress queue overflowed"
        meta = RunMeta(scheme=scheme, duration_s=duration_s, ok=ok,
                       fidelity={"valid": valid, "summary": summary})
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        meta.save(RunDir(out_dir).run_json)
        return meta


@pytest.mark.parametrize("verdicts, rc_expected, says", [
    ({"newreno": (True, True), "ebn": (True, True)}, 0, ""),
    ({"newreno": (True, True), "ebn": (True, False)}, 1, "bwn run: INVALID (the emulation broke an invariant"),
    ({"newreno": (False, True), "ebn": (True, True)}, 1, "bwn run: some flows did not complete for: newreno"),
])
def test_an_invalid_or_incomplete_run_is_exit_1(capsys, monkeypatch, tmp_path, verdicts, rc_expected, says):
    pytest.importorskip("mininet.log")
    from bwn.emulation import runner as experiment
    monkeypatch.setattr(requirements, "experiment_missing", lambda: None)
    monkeypatch.setattr(experiment, "run_scheme", _FakeRun(verdicts))
    monkeypatch.setattr(cli, "load_run_dir", lambda out: [])
    monkeypatch.setattr(cli, "write_report", lambda out, runs: (out / "summary.md").write_text("s\n")
                        or out / "summary.md")
    rc, _, err = run(capsys, "run", "smoke", "--schemes", "newreno,ebn", "--out", str(tmp_path), "--duration", "1")
    assert rc == rc_expected, err
    assert err.startswith(says) if says else err == ""
    if "INVALID" in says:
        assert err.strip().endswith(": ebn")
    # documented where a user looks
    assert "1    some run is INVALID" in cli.RUN_EPILOG


def test_the_installed_command_returns_the_code():
    bwn = Path(sys.executable).parent / "bwn"
    res = subprocess.run([str(bwn), "run", "nosuch", "--out", "/nonexistent"], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 2 and res.stderr.startswith("bwn run: unknown scenario 'nosuch'")


# -- docs/cli.md: every command's --help as the code prints it (bwn/cli/doc.py) ------------


def test_the_cli_reference_matches_the_code():
    from bwn.cli import doc as clidoc
    assert clidoc.DOC_PATH.read_text() == clidoc.render(), (
        "docs/cli.md is out of date: run `.venv/bin/python -m bwn.cli.doc` and commit it")


def test_every_command_and_subcommand_has_its_section():
    from bwn.cli import doc as clidoc
    text = clidoc.render()
    for title in ("bwn", "bwn run", "bwn reproduce", "bwn net", "bwn doctor", "bwn report", "bwn list",
                  "bwn-send", "bwn-recv", "bwn-link", "python -m bwn.analysis.report",
                  "python -m bwn.analysis.rejudge", "python -m bwn.scenario.schema"):
        assert f"`{title}`\n\n```text\nusage: {title}" in text, title
    # The fixed width: no line of help is wider, whatever the terminal says.
    with clidoc._width(clidoc.WIDTH_COLUMNS):
        widths = [max(map(len, factory().format_help().splitlines())) for _, factory in clidoc._parsers()]
    assert max(widths) <= clidoc.WIDTH_COLUMNS
    # bwn-send --list-algos: every algorithm with its parameters, typed, with defaults.
    from hosts.cc import registry
    assert f"```text\n{registry.describe_all()}\n```" in text
    assert "gtcp      GTCP: " in text and "cwnd_g_rtt: Literal['base', 'srtt'] = 'base'" in text


def test_clidoc_check_and_write(tmp_path: Path, monkeypatch, capsys):
    from bwn.cli import doc as clidoc
    page = tmp_path / "cli.md"
    monkeypatch.setattr(clidoc, "DOC_PATH", page)
    monkeypatch.setattr(clidoc, "REPO", tmp_path)
    monkeypatch.setenv("COLUMNS", "40")                      # the terminal does not matter
    assert clidoc.main(["--check"]) == 1 and not page.exists()
    assert capsys.readouterr().err.strip() == (
        "cli.md is out of date: run `.venv/bin/python -m bwn.cli.doc` to update it")
    assert clidoc.main([]) == 0 and page.read_text() == clidoc.render()
    assert capsys.readouterr().out.strip() == "wrote cli.md"
    assert clidoc.main(["--check"]) == 0 and clidoc.main([]) == 0
    assert capsys.readouterr() == ("", "")                   # up to date: nothing written or said
    import os
    assert os.environ["COLUMNS"] == "40"                      # the width is put back


def test_a_command_takes_back_sigint_a_shell_left_ignored():
    """`bwn run ... &` from a script starts with SIGINT ignored; bwn takes it back,
    so `kill -INT` (Ctrl-C) stops it and its teardown runs."""
    import subprocess
    import sys
    code = ("import signal; signal.signal(signal.SIGINT, signal.SIG_IGN); "
            "from bwn.cli import main as cli; rc = cli.main(['reproduce', 'ebn', '--plan']); "
            "print(rc, signal.getsignal(signal.SIGINT) is signal.default_int_handler)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip().splitlines()[-1] == "0 True", out.stderr


def test_every_command_documents_its_exit_status():
    from bwn.cli import doc as clidoc
    parser = cli.build_parser()
    assert "exit status" in parser.format_help()
    for name, sub in clidoc._subcommands(parser):
        text = sub.format_help()
        assert "exit status" in text.lower(), f"bwn {name} --help says nothing of its exit status"
