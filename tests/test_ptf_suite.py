"""Runs the PTF suite (ptf-tests/) against real BMv2 switches when they are here."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from needs import missing, stale_build

REPO = Path(__file__).resolve().parents[1]
EXIT_SKIPPED = 77


def test_ptf_suite_on_bmv2():
    missing(stale_build(), "PTF suite")
    res = subprocess.run([sys.executable, str(REPO / "ptf-tests" / "run_ptf.py")],
                         capture_output=True, text=True, timeout=1800)
    if res.returncode == EXIT_SKIPPED:
        missing(res.stdout.strip().splitlines()[-1].removeprefix("SKIPPED PTF suite: "), "PTF suite")
    print(res.stdout[-20000:])
    print(res.stderr[-20000:], file=sys.stderr)
    assert res.returncode == 0, "PTF suite failed: see the output above and build/ptf-logs/"
