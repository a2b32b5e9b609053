"""The README is a front door: short, no dated history, and every command it shows
is one the code accepts (as docs/cli.md is kept to the code by test_cli.py).

A command in a README code block is checked the way its program would parse it:
`bwn ...` by bwn's argument parser (scenarios by name, schemes and their parameters
by the registry), `make TARGET` against the Makefile, and `bwn ...` at the
`mininet>` prompt by `bwn net`'s command parser."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from bwn.cli import main as cli
from bwn.emulation import netcmd
from bwn.emulation.agents import parse_scheme
from bwn.scenario.config import load_config
from hosts.cc import registry

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"


def code_blocks(text: str) -> list[str]:
    return re.findall(r"^```[a-z]*\n(.*?)^```", text, flags=re.S | re.M)


def shell_commands(text: str) -> list[list[str]]:
    """Every shell command line of the README's code blocks, as words (env
    assignments and sudo dropped, comments cut)."""
    commands = []
    for block in code_blocks(text):
        for line in block.splitlines():
            if line.startswith(("mininet>", "|", " ", "$ ")) or not line.strip():
                continue
            words = shlex.split(line, comments=True)
            while words and (words[0] == "sudo" or re.match(r"^[A-Z_0-9]+=", words[0])):
                words.pop(0)
            if words:
                commands.append(words)
    return commands


def makefile_targets() -> set[str]:
    return set(re.findall(r"^([a-z][a-z0-9-]*):", (REPO / "Makefile").read_text(), flags=re.M))


def test_the_readme_is_short_and_carries_no_dated_history():
    text = README.read_text()
    assert len(text.splitlines()) <= 170
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text), "dates go to CHANGELOG.md"
    assert not re.search(r"\bissue \d+", text), "a reader cannot see the issues"
    assert max(len(line) for line in text.splitlines()) < 400, "a table cell is a paragraph"


def test_it_states_setup_test_and_the_main_job():
    commands = [" ".join(c) for c in shell_commands(README.read_text())]
    assert "make deps" in commands and "make test" in commands
    assert any(c.startswith(".venv/bin/bwn run ebn-sine ") for c in commands)


def test_every_command_in_it_is_a_real_one():
    commands = shell_commands(README.read_text())
    assert len(commands) >= 6
    parser = cli.build_parser()
    scenarios = cli.scenario_files()
    targets = makefile_targets()
    for words in commands:
        prog = Path(words[0]).name
        if prog == "make":
            assert set(words[1:]) <= targets, f"{words}: no such make target"
        elif prog == "bwn":
            args = parser.parse_args(words[1:])             # SystemExit (2) on a bad option
            if getattr(args, "scenario", None):
                assert args.scenario in scenarios, f"{words}: no scenario {args.scenario!r}"
                load_config(scenarios[args.scenario])
            for scheme in filter(None, (getattr(args, "schemes", None) or "").split(",")):
                algo, params = parse_scheme(scheme)
                registry.create(algo, params)               # RegistryError on a bad name or parameter
        else:
            pytest.fail(f"README shows a command this test cannot check: {words}")


def test_the_mininet_prompt_commands_parse():
    text = README.read_text()
    lines = [line.split("#")[0].removeprefix("mininet>").strip()
             for block in code_blocks(text) for line in block.splitlines() if line.startswith("mininet>")]
    assert lines, "the quickstart shows a mininet> session"
    cfg = load_config(cli.scenario_files()["smoke"])
    links = [link.name for link in cfg.links]
    for line in lines:
        if line.startswith("bwn "):
            netcmd.parse_command(line.removeprefix("bwn "), links)
        elif line != "exit":
            host = line.split()[0]
            assert host in {h.name for h in cfg.hosts}, line


def test_the_docs_index_links_resolve():
    for page in (README, REPO / "docs" / "README.md"):
        for target in re.findall(r"\]\(([^)#]+)\)", page.read_text()):
            if "://" not in target:
                assert (page.parent / target).exists(), f"{page.name}: broken link {target}"


def test_the_example_run_is_what_the_report_makes_of_its_files(tmp_path):
    """docs/examples/smoke is a real run: the report, run again on a copy, writes
    the same summary.csv, and its README explains every column summary.md shows."""
    import shutil

    from bwn.analysis.report import write_report
    from bwn.analysis.report.load import load_run_dir
    example = REPO / "docs" / "examples" / "smoke"
    copy = tmp_path / "smoke"
    shutil.copytree(example, copy)
    write_report(copy, load_run_dir(copy))
    assert (copy / "summary.csv").read_text() == (example / "summary.csv").read_text()
    header = next(line for line in (example / "summary.md").read_text().splitlines() if line.startswith("| scheme"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    explained = (example / "README.md").read_text()
    for column in columns:
        assert f"| {column.split(' (')[0]}" in explained, f"docs/examples/smoke/README.md: column {column!r}"
