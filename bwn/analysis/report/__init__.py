"""One experiment's outputs -> its results: summary.md, summary.csv and plots.

:func:`write_report` reads nothing itself: :mod:`.load` loads a run folder,
:mod:`.rates` computes rates, fair shares and estimates, :mod:`.tables` writes
the tables, :mod:`.plots` (and :mod:`.timeseq` for captures) the figures;
``python -m bwn.analysis.report RUN_DIR`` rebuilds a run folder's report.
"""
from __future__ import annotations

from pathlib import Path

from bwn.analysis.report.load import DEFAULT_BIN_S, ReportError, SchemeRun
from bwn.analysis.report.plots import write_plots
from bwn.analysis.report.tables import fct_rows, summarize, write_csv, write_fct_csv, write_markdown
from bwn.rundir import ExperimentDir


def write_report(run_dir: str | Path, runs: list[SchemeRun], bin_s: float = DEFAULT_BIN_S) -> Path:
    """Write RUN_DIR/summary.md, summary.csv and the PNGs; return summary.md's path."""
    out = ExperimentDir(run_dir)
    out_dir = out.path
    out_dir.mkdir(parents=True, exist_ok=True)
    if not runs:
        raise ReportError("no scheme run to report")
    rows = [row for run in runs for row in summarize(run, bin_s)]
    write_csv(out.summary_csv, rows)
    if any(run.flow_sizes for run in runs):
        write_fct_csv(out_dir / "fct.csv", fct_rows(runs))
    plots = write_plots(out_dir, runs, bin_s)
    summary_md = out.summary_md
    write_markdown(summary_md, runs, rows, plots)
    return summary_md
