"""``python -m bwn.analysis.report RUN_DIR``: rebuild a run folder's report."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence

from bwn.analysis.report import write_report
from bwn.analysis.report.load import DEFAULT_BIN_S, ReportError, load_run_dir


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bwn.analysis.report",
        description="Rebuild RUN_DIR/summary.md, summary.csv and plots from "
                    "RUN_DIR/<scheme>/{flows/,telemetry.csv,capacity.csv}.")
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    parser.add_argument("--bin-s", type=float, default=DEFAULT_BIN_S,
                        help=f"throughput averaging window, s (default {DEFAULT_BIN_S})")
    parser.add_argument("--bottleneck", metavar="LINK",
                        help="capacity.csv link to use (default: run.json's, else the slowest)")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.bin_s > 0:
        parser.error("--bin-s must be positive")
    try:
        runs = load_run_dir(args.run_dir)
        if args.bottleneck:
            for run in runs:
                run.bottleneck_link = args.bottleneck
        path = write_report(args.run_dir, runs, args.bin_s)
    except ReportError as exc:
        print(f"bwn.analysis.report: error: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0

if __name__ == "__main__":
    sys.exit(main())
