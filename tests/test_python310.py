"""bwn supports Python 3.10 (Ubuntu 22.04's /usr/bin/python3): every module
compiles under a 3.10 interpreter, and no module imports what 3.10's standard
library lacks without a fallback.

The whole unit tier under 3.10 is `make test-py310` (it makes a 3.10 venv from
PyPI, so it is not part of `make test`). This test needs a 3.10 interpreter (BWN_PYTHON310=PATH,
`python3.10` on PATH, or pyenv's) and skips, saying so, without one."""
from __future__ import annotations

import ast
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SOURCE_DIRS = ("bwn", "controller", "hosts", "topologies", "ptf-tests", "scripts", "benchmarks", "tests", "tools")
#: Standard-library modules that 3.10 lacks; each import of one must sit in a
#: try/except ImportError with a fallback.
NEW_IN_311 = {"tomllib", "wsgiref.types"}


def sources() -> list[Path]:
    return sorted(p for d in SOURCE_DIRS for p in (REPO / d).rglob("*.py"))


def python310() -> str | None:
    """A working 3.10 interpreter: BWN_PYTHON310, python3.10 on PATH, or pyenv's."""
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates = [os.environ.get("BWN_PYTHON310"), shutil.which("python3.10"), "/usr/bin/python3.10",
                  *map(str, sorted(pyenv_root.glob("versions/3.10*/bin/python3.10")))]
    for found in filter(None, candidates):
        try:
            res = subprocess.run([found, "-c", "import sys; print(sys.version_info[:2] == (3, 10))"],
                                 capture_output=True, text=True, timeout=30)
        except OSError:
            continue
        if res.stdout.strip() == "True":
            return found
    return None


def test_every_module_compiles_under_310(tmp_path):
    py = python310()
    if py is None:
        pytest.skip("no Python 3.10 interpreter (python3.10 on PATH or BWN_PYTHON310)")
    files = [str(p) for p in sources()]
    script = ("import sys\n"
              "bad = []\n"
              "for f in sys.argv[1:]:\n"
              "    try:\n"
              "        compile(open(f, encoding='utf-8').read(), f, 'exec')\n"
              "    except SyntaxError as e:\n"
              "        bad.append(f'{f}:{e.lineno}: {e.msg}')\n"
              "print('\\n'.join(bad)); sys.exit(1 if bad else 0)\n")
    res = subprocess.run([py, "-c", script, *files], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr


def _guarded(tree: ast.AST) -> set[int]:
    """Line numbers of imports inside a try whose handler catches ImportError."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
                isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError")
                for h in node.handlers):
            for inner in node.body:
                lines.add(inner.lineno)
    return lines


def test_no_module_needs_311s_standard_library_without_a_fallback():
    unguarded = []
    for path in sources():
        tree = ast.parse(path.read_text(), str(path))
        guarded = _guarded(tree)
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(n in NEW_IN_311 for n in names) and node.lineno not in guarded:
                unguarded.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not unguarded, f"3.11-only imports without a fallback: {unguarded}"
