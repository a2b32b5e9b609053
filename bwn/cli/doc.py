"""docs/cli.md: every command's ``--help``, as the programs print it.

    .venv/bin/python -m bwn.cli.doc            # rewrite docs/cli.md
    .venv/bin/python -m bwn.cli.doc --check    # exit 1 (and say so) if it is out of date

The page is made from the argparse parsers themselves, at a fixed width of
``WIDTH_COLUMNS``, so it cannot drift from the code: ``tests/test_cli.py``
fails when an option, a default or a help text changes and the page was not
rewritten.
"""
from __future__ import annotations

import argparse
import os
import sys
from contextlib import contextmanager
from typing import Callable, Iterator, Optional, Sequence

from bwn.analysis import rejudge
from bwn.analysis.report import __main__ as report_cli
from bwn.cli import main as cli
from bwn.linkem import cli as linkem_cli
from bwn.linkem import group_cli
from bwn.paths import REPO
from bwn.scenario import schema
from hosts import recv, send
from hosts.cc import registry

DOC_PATH = REPO / "docs" / "cli.md"
WIDTH_COLUMNS = 100

HEADER = """# Command-line reference

Every command's `--help`, made from its parser by `python -m bwn.cli.doc`
(`tests/test_cli.py` fails when this page and the code disagree; rerun the
command to update it). What the commands are for is in the README; the scenario
files they read are in [config.md](config.md).
"""


def _parsers() -> list[tuple[str, Callable[[], argparse.ArgumentParser]]]:
    """(title, parser factory) of each command, in the page's order."""
    return [("bwn", cli.build_parser), ("bwn-send", send.build_parser),
            ("bwn-recv", recv.build_parser), ("bwn-link", linkem_cli.build_parser),
            ("bwn-links", group_cli.build_parser),
            ("python -m bwn.analysis.report", report_cli.build_parser),
            ("python -m bwn.analysis.rejudge", rejudge.build_parser),
            ("python -m bwn.scenario.schema", schema.build_parser)]


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:                    # argparse keeps them only here
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices.items())
    return []


@contextmanager
def _width(columns: int) -> Iterator[None]:
    """argparse wraps help to $COLUMNS (shutil.get_terminal_size)."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(columns)
    try:
        yield
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def _block(title: str, level: str, help_text: str) -> str:
    return f"{level} `{title}`\n\n```text\n{help_text.rstrip()}\n```\n"


def render() -> str:
    """The page: each command's help, then each subcommand's."""
    sections = [HEADER]
    with _width(WIDTH_COLUMNS):
        for title, factory in _parsers():
            parser = factory()
            sections.append(_block(title, "##", parser.format_help()))
            for name, sub in _subcommands(parser):
                sections.append(_block(f"{title} {name}", "###", sub.format_help()))
            if title == "bwn-send":
                sections.append(_block("bwn-send --list-algos", "###", registry.describe_all()))
    return "\n".join(sections)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bwn.cli.doc",
        description=f"Write {DOC_PATH.relative_to(REPO)}, every command's --help.")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if the page is out of date")
    args = parser.parse_args(argv)
    text = render()
    current = DOC_PATH.read_text() if DOC_PATH.exists() else ""
    if args.check:
        if current != text:
            print(f"{DOC_PATH.relative_to(REPO)} is out of date: run "
                  f"`.venv/bin/python -m bwn.cli.doc` to update it", file=sys.stderr)
            return 1
        return 0
    if current != text:
        DOC_PATH.write_text(text)
        print(f"wrote {DOC_PATH.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
