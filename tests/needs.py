"""What a test needs from the machine, and what happens when it is missing.

By default a test whose tool is missing (p4c, BMv2, PTF, Mininet, root, iperf3,
network namespaces, the Tofino compiler) is skipped with one line naming it.
With ``BWN_REQUIRE_P4=1`` (``.ci/run`` sets it once it has installed the P4
toolchain) the same test fails instead, so a CI run cannot pass while silently
skipping the dataplane.

``build_json()`` also guards against a stale program: when p4c is here it runs
``make build``, which recompiles ``build/bwn.json`` if any file under ``p4src/``
is newer; without p4c a stale or missing build is a skip (or a failure).
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BUILD_JSON = REPO / "build" / "bwn.json"
REQUIRED = os.environ.get("BWN_REQUIRE_P4") == "1"


def missing(reason: str | None, what: str, module_level: bool = False) -> None:
    """Skip (or, under BWN_REQUIRE_P4=1, fail) when `reason` says something is missing."""
    if reason is None:
        return
    line = f"{what}: {reason}"
    if REQUIRED:
        pytest.fail(f"BWN_REQUIRE_P4=1, but {line}", pytrace=False)
    pytest.skip(f"SKIPPED {line}", allow_module_level=module_level)


def not_root() -> str | None:
    return None if os.geteuid() == 0 else "needs root"


def no_tool(*names: str) -> str | None:
    gone = [n for n in names if shutil.which(n) is None]
    return f"{', '.join(gone)} not on PATH" if gone else None


# What build/bwn.json is compiled from (the Makefile's P4_SRCS): the Tofino
# program (p4src/tna) is not part of it.
BMV2_SOURCE_DIRS = ("shared", "v1model")


def _newest_p4_source_mtime() -> float:
    return max((p.stat().st_mtime for d in BMV2_SOURCE_DIRS for p in (REPO / "p4src" / d).rglob("*.p4")),
               default=0.0)


def stale_build() -> str | None:
    """Why build/bwn.json cannot be used as the current program, or None.

    With p4c installed, `make build` brings it up to date first (a no-op when it is)."""
    if shutil.which("p4c"):
        res = subprocess.run(["make", "--no-print-directory", "build"], cwd=REPO,
                             capture_output=True, text=True, timeout=900)
        if res.returncode != 0:
            pytest.fail(f"make build failed:\n{res.stdout[-3000:]}{res.stderr[-3000:]}", pytrace=False)
    if not BUILD_JSON.exists():
        return "build/bwn.json missing (p4c not installed, or `make build` not run)"
    if BUILD_JSON.stat().st_mtime < _newest_p4_source_mtime():
        return "build/bwn.json is older than p4src/ and p4c is not here to rebuild it"
    return None


# What build/ebpf/bwn.o is compiled from (the Makefile's PSA_SRCS).
EBPF_OBJECT = REPO / "build" / "ebpf" / "bwn.o"
EBPF_SOURCE_DIRS = ("shared", "psa")


def stale_ebpf_build() -> str | None:
    """Why build/ebpf/bwn.o cannot be used as the current PSA program, or None.

    With p4c-ebpf installed, `make build-ebpf` brings it up to date first."""
    if shutil.which("p4c-ebpf"):
        res = subprocess.run(["make", "--no-print-directory", "build-ebpf"], cwd=REPO,
                             capture_output=True, text=True, timeout=900)
        if res.returncode != 0:
            pytest.fail(f"make build-ebpf failed:\n{res.stdout[-3000:]}{res.stderr[-3000:]}", pytrace=False)
    if not EBPF_OBJECT.exists():
        return "build/ebpf/bwn.o missing (p4c-ebpf not installed, or `make build-ebpf` not run)"
    newest = max((p.stat().st_mtime for d in EBPF_SOURCE_DIRS for p in (REPO / "p4src" / d).rglob("*.p4")),
                 default=0.0)
    if EBPF_OBJECT.stat().st_mtime < newest:
        return "build/ebpf/bwn.o is older than p4src/ and p4c-ebpf is not here to rebuild it"
    return None
