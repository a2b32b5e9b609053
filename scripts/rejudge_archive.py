#!/usr/bin/env python3
"""The archived results pages' claims, judged again under today's decision rule.

    .venv/bin/python scripts/rejudge_archive.py [--commit COMMIT] [--out docs/results/archive/rule-change.md]

docs/results/archive/ holds the pages made before the decision rule of
docs/reproduce.md was fixed (3 seeds, a one-sided 1 % margin, Student-t for every
quantity). This reads their runs (PAPER-runs.csv there: each run's validity and
metrics) and their claims as the grids of COMMIT defined them, judges every claim
again with bwn/analysis/stats.py as it is now (the seeds those runs had), and
writes a table of each claim's verdict then and now, so a reader sees which
verdicts the rule itself changed, before any new run.
"""
from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bwn.reproduce import claims as cl  # noqa: E402
from bwn.paths import REPO  # noqa: E402
from bwn.reproduce import grid as gr  # noqa: E402

#: The last commit whose grids made the archived pages.
ARCHIVE_COMMIT = "b2432cf"


def old_grid(paper: str, commit: str) -> gr.Grid:
    text = subprocess.run(["git", "-C", str(REPO), "show", f"{commit}:topologies/reproduce/{paper}.toml"],
                          capture_output=True, text=True, check=True).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as fh:
        fh.write(text)
    return gr.load_grid(paper, Path(fh.name))


def archived_records(archive: Path, paper: str, metrics: list[str]) -> list[cl.RunRecord]:
    out = []
    for row in csv.DictReader(open(archive / f"{paper}-runs.csv", newline="")):
        values = {m: float(row[m]) if row.get(m) else None for m in metrics}
        out.append(cl.RunRecord(row["case"], int(row["seed"]), row["scheme"], Path(row["path"]),
                                row["complete"] == "1", True if row["valid"] == "1" else
                                (False if row["valid"] == "0" else None), row.get("fidelity", ""), values))
    return out


def archived_verdicts(archive: Path, paper: str) -> dict[str, str]:
    return {r["claim"]: r["verdict"] for r in csv.DictReader(open(archive / f"{paper}-claims.csv", newline=""))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--commit", default=ARCHIVE_COMMIT, help=f"the grids' commit (default {ARCHIVE_COMMIT})")
    parser.add_argument("--archive", default=str(REPO / "docs" / "results" / "archive"), help="the archived pages")
    parser.add_argument("--out", help="markdown file to write (default: print)")
    args = parser.parse_args(argv)
    archive = Path(args.archive)
    lines = ["# The archived verdicts under the fixed decision rule", "",
             f"Made by `scripts/rejudge_archive.py --commit {args.commit}`: each claim of the archived pages "
             "(their runs, 3 seeds for most cases; the claims as the grids of that commit defined them), "
             "judged again with today's rule (docs/reproduce.md: a 5 % margin on both sides of a comparison, "
             "intervals that fit counts and fractions). No run was made for this table.", "",
             "| paper | claim | verdict then | under the fixed rule | changed |", "|---|---|---|---|---|"]
    changed = 0
    total = 0
    for paper in gr.PAPERS:
        grid = old_grid(paper, args.commit)
        metrics = sorted({"goodput_bps:all", *(c.metric for c in grid.claims)})
        records = archived_records(archive, paper, metrics)
        then = archived_verdicts(archive, paper)
        for claim in grid.claims:
            now = cl.judge(grid, claim, list(grid.cases), records).verdict
            before = then.get(claim.id, "-")
            total += 1
            changed += before != now
            lines.append(f"| {paper} | {claim.id} | {before} | {now} | {'**yes**' if before != now else ''} |")
    lines += ["", f"{changed} of {total} verdicts change under the fixed rule."]
    text = "\n".join(lines) + "\n"
    if args.out:
        Path(args.out).write_text(text)
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
