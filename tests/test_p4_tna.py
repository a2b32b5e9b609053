"""Front/mid-end check of the Tofino (TNA) program, p4src/tna/bwn.p4, with p4c's p4test.

p4test type-checks the program against the TNA architecture files that p4c's
Tofino back end ships (tna.p4, t2na.p4, tofino*_arch.p4). The project's toolchain
installs them under p4c's own include folder (`<prefix>/share/p4c/p4include`,
next to core.p4), so they are found from where p4test is; BWN_TNA_INCLUDE names
another folder. Without p4test or tna.p4 the module skips with one line (fails
under BWN_REQUIRE_P4=1).
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from needs import missing

REPO = Path(__file__).resolve().parents[1]
PROGRAM = REPO / "p4src" / "tna" / "bwn.p4"

P4TEST = os.environ.get("BWN_P4TEST") or shutil.which("p4test")


def tna_include_dir(p4test: str | None) -> Path | None:
    """Where tna.p4 is: BWN_TNA_INCLUDE, else p4c's include folder beside p4test."""
    if os.environ.get("BWN_TNA_INCLUDE"):
        return Path(os.environ["BWN_TNA_INCLUDE"])
    if not p4test:
        return None
    prefix = Path(p4test).resolve().parent.parent
    for cand in (prefix / "share" / "p4c" / "p4include", prefix / "share" / "p4c" / "p4include" / "tofino"):
        if (cand / "tna.p4").is_file():
            return cand
    return prefix / "share" / "p4c" / "p4include"


TNA_INCLUDE = tna_include_dir(P4TEST)
_missing = []
if not P4TEST or not os.access(P4TEST, os.X_OK):
    _missing.append("p4test (not on PATH; set BWN_P4TEST to its path)")
elif TNA_INCLUDE is None or not (TNA_INCLUDE / "tna.p4").is_file():
    _missing.append(f"tna.p4 (not in {TNA_INCLUDE}; set BWN_TNA_INCLUDE to the folder holding it)")
missing(" and ".join(_missing) or None, "TNA p4test check", module_level=True)


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
