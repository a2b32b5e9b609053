"""What this machine lacks for each part of bwn: every check in one place.

Each ``*_missing()`` returns ``None`` when the part can run here, or one line
saying what is missing and how to get it. Commands refuse to start on them
(exit 3), tests skip on them (or fail, under ``BWN_REQUIRE_P4=1``: tests/needs.py),
and ``bwn doctor`` prints them all.
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Callable, Optional

from bwn.paths import pipeline_files
from controller.bmv2 import CLI_BINARY, SWITCH_BINARY

Check = Callable[[], Optional[str]]


def root_missing() -> Optional[str]:
    return None if os.geteuid() == 0 else "needs root (it creates interfaces and namespaces)"


def tools_missing(*names: str) -> Optional[str]:
    """The commands of ``names`` that are not on PATH, or None."""
    gone = [n for n in names if shutil.which(n) is None]
    if not gone:
        return None
    return f"{', '.join(gone)} not on PATH"


def netns_missing() -> Optional[str]:
    """Network namespaces and veth pairs (``ip``, root)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "iproute2 (`ip`) is not installed"
    return None


def linkem_netns_missing() -> Optional[str]:
    """The link emulator's namespace rigs: root, ``ip`` and ``ethtool`` (offloads)."""
    missing = []
    if os.geteuid() != 0:
        missing.append("root (euid 0)")
    for tool in ("ip", "ethtool"):
        if shutil.which(tool) is None:
            missing.append(f"the '{tool}' command")
    if missing:
        return "bwn.linkem namespace tests need " + " and ".join(missing)
    return None


def bmv2_missing() -> Optional[str]:
    """BMv2's ``simple_switch_grpc``, its Thrift CLI, and its Thrift runtime in this
    Python (the controller sets queue rates through it)."""
    gone = tools_missing(SWITCH_BINARY, CLI_BINARY)
    if gone is not None:
        return f"BMv2 is not installed ({gone}); see README, 'Supported systems and setup'"
    return thrift_runtime_missing()


def thrift_runtime_missing() -> Optional[str]:
    """BMv2's Thrift stubs (``sswitch_runtime``) and python3-thrift, importable here."""
    try:
        import sswitch_runtime  # noqa: F401  (imported to check it is there)
        import thrift  # noqa: F401
    except ImportError as exc:
        return (f"BMv2's Thrift runtime is not importable in {sys.executable} ({exc}): make the venv "
                f"from /usr/bin/python3 with --system-site-packages (make deps does)")
    return None


def mininet_missing() -> Optional[str]:
    try:
        import mininet.net  # noqa: F401  (imported to check it is there)
    except ImportError:
        return "Mininet is not importable (apt-get install mininet; the venv must see system site-packages)"
    return None


def pipeline_missing(build_dir: Optional[Path] = None) -> Optional[str]:
    """The compiled switch program (``make build``)."""
    try:
        pipeline_files() if build_dir is None else pipeline_files(build_dir)
    except FileNotFoundError as exc:
        return str(exc)
    return None


def tcpdump_missing() -> Optional[str]:
    return None if shutil.which("tcpdump") else \
        "tcpdump is not installed (apt-get install tcpdump; make deps does)"


def ptf_missing() -> Optional[str]:
    ptf = Path(sys.executable).parent / "ptf"
    if ptf.exists() or shutil.which("ptf") is not None:
        return None
    return "ptf is not installed (pip install ptf)"


def experiment_missing() -> Optional[str]:
    """What stops ``bwn run`` or ``bwn net`` on this machine (root, BMv2, Mininet,
    the compiled program), or None."""
    if os.geteuid() != 0:
        return "experiments need root (Mininet and BMv2 create interfaces and namespaces)"
    return bmv2_missing() or mininet_missing() or pipeline_missing()
