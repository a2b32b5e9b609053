"""Front/mid-end check of the Tofino (TNA) program, p4src/tna/bwn.p4, with p4c's p4test.

bf-p4c (Intel's Tofino compiler) is not open to run here; p4test type-checks the
program against the TNA architecture files that ship with p4c's Tofino backend
(backends/tofino/bf-p4c/p4include: tna.p4, tofino1_arch.p4, ...).

Found from: p4test on PATH (or the file named by BWN_P4TEST), and the directory
holding tna.p4 from BWN_TNA_INCLUDE (default below). Without either, the module
skips with one line naming what is missing.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PROGRAM = REPO / "p4src" / "tna" / "bwn.p4"
DEFAULT_TNA_INCLUDE = "/opt/p4build/p4c/backends/tofino/bf-p4c/p4include"

P4TEST = os.environ.get("BWN_P4TEST") or shutil.which("p4test")
TNA_INCLUDE = Path(os.environ.get("BWN_TNA_INCLUDE", DEFAULT_TNA_INCLUDE))

_missing = []
if not P4TEST or not os.access(P4TEST, os.X_OK):
    _missing.append("p4test (not on PATH; set BWN_P4TEST to its path)")
if not (TNA_INCLUDE / "tna.p4").is_file():
    _missing.append(f"tna.p4 (not in {TNA_INCLUDE}; set BWN_TNA_INCLUDE to bf-p4c's p4include)")
if _missing:
    pytest.skip(f"SKIPPED TNA p4test check: missing {' and '.join(_missing)}", allow_module_level=True)


def p4test_command(target: int) -> list[str]:
    """The check documented in p4src/tna/README.md. bf-p4c defines __TARGET_TOFINO__
    itself (1 for Tofino, 2 for Tofino 2); tna.p4 refuses to compile without it."""
    return [P4TEST, "--std", "p4-16", f"-D__TARGET_TOFINO__={target}",
            "-I", str(TNA_INCLUDE), "-I", str(REPO / "p4src"), str(PROGRAM)]


@pytest.mark.parametrize("target", [1, 2], ids=["tofino", "tofino2"])
def test_tna_program_passes_p4test(target):
    res = subprocess.run(p4test_command(target), capture_output=True, text=True, timeout=300,
                         cwd=REPO)
    out = res.stdout + res.stderr
    print(out)
    assert res.returncode == 0, out
    assert "error" not in out.lower(), out
