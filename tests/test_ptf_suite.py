"""Runs the PTF suite (ptf-tests/) against each target when it is here: BMv2
(p4src/v1model) and the eBPF switch under NIKSS (p4src/psa), from one test code."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from needs import missing, stale_build, stale_ebpf_build

REPO = Path(__file__).resolve().parents[1]
EXIT_SKIPPED = 77


@pytest.mark.parametrize("target", ["bmv2", "ebpf"])
def test_ptf_suite(target):
    missing(stale_build() if target == "bmv2" else stale_ebpf_build(), f"PTF suite on {target}")
    res = subprocess.run([sys.executable, str(REPO / "ptf-tests" / "run_ptf.py"), "--target", target],
                         capture_output=True, text=True, timeout=1800)
    if res.returncode == EXIT_SKIPPED:
        missing(res.stdout.strip().splitlines()[-1].removeprefix("SKIPPED PTF suite: "), f"PTF suite on {target}")
    print(res.stdout[-20000:])
    print(res.stderr[-20000:], file=sys.stderr)
    logs = "build/ptf-logs/" if target == "bmv2" else f"build/ptf-logs-{target}/"
    assert res.returncode == 0, f"PTF suite on {target} failed: see the output above and {logs}"
