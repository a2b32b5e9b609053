"""`bwn doctor`: what this machine has for bwn, one component per line.

Each component is *required* (experiments or the test suite cannot run without
it) or *optional* (one feature needs it: captures, Slurm sweeps, the eBPF
target). The same checks stop `bwn run` (exit 3) and skip tests
(bwn/requirements.py); `make deps` ends by printing this table.

Kernel features are probed, not guessed: as root, a throwaway network namespace
(``bwn-doctor-<pid>``) gets each queueing discipline on its loopback and is
deleted again, whatever happens.
"""
from __future__ import annotations

import argparse
import ctypes.util
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from typing import Callable, Iterator, Optional

from bwn import requirements
from controller import bmv2

EXIT_CODES = """exit status:
  0  every required component is there (optional ones may be missing)
  1  some required component is missing: its line says what to do
  2  bad arguments"""


@dataclass(frozen=True)
class Component:
    name: str
    ok: bool
    detail: str
    required: bool = True

    @property
    def mark(self) -> str:
        if self.ok:
            return "ok"
        return "MISSING" if self.required else "absent"


def _first_line(cmd: list[str]) -> str:
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"({exc})"
    text = (res.stdout or res.stderr).strip().splitlines()
    return text[-1] if text else ""


def _tool(name: str, what: str, required: bool = True, version_arg: Optional[str] = None,
          how: str = "make deps") -> Component:
    path = shutil.which(name)
    if path is None:
        return Component(what, False, f"{name} not on PATH ({how})", required)
    detail = path
    if version_arg:
        detail = f"{_first_line([path, version_arg])} ({path})"
    return Component(what, True, detail, required)


def _python_modules(names: dict[str, str]) -> Component:
    gone = [pip for mod, pip in names.items() if importlib.util.find_spec(mod) is None]
    venv = sys.prefix != sys.base_prefix
    where = f"Python {platform.python_version()} at {sys.executable}" + ("" if venv else " (not a venv)")
    if gone:
        return Component("Python packages", False, f"{', '.join(gone)} missing in {where}: make deps")
    return Component("Python packages", True, where)


def _bmv2() -> Iterator[Component]:
    why = requirements.bmv2_missing()
    yield Component("BMv2 (simple_switch_grpc)", why is None,
                    why or _first_line([bmv2.SWITCH_BINARY, "--version"]) + f" ({shutil.which(bmv2.SWITCH_BINARY)})")
    fast = bmv2.fast_switch_binary()
    yield Component("fast BMv2", fast is not None,
                    fast or f"{bmv2.FAST_SWITCH_BINARY} not installed (P4_BMV2_FAST=FILE.tar.zst make deps)",
                    required=False)
    yield Component("BMv2 experiments use", True, bmv2.experiment_switch_binary()
                    + ("  (BWN_BMV2 chooses)" if "BWN_BMV2" in os.environ else ""), required=False)
    pi = ctypes.util.find_library("pi")
    yield Component("PI (P4Runtime server library)", pi is not None,
                    pi or "libpi not found by the dynamic linker (make deps; then ldconfig)")


def _probe_qdiscs(kinds: dict[str, list[str]]) -> dict[str, Optional[str]]:
    """kind -> None if `tc qdisc add dev lo <args>` works in a fresh namespace,
    else tc's message. The namespace is deleted in every case."""
    ns = f"bwn-doctor-{os.getpid()}"
    result: dict[str, Optional[str]] = {}
    add = subprocess.run(["ip", "netns", "add", ns], capture_output=True, text=True)
    if add.returncode != 0:
        return {k: f"cannot make a namespace: {add.stderr.strip()}" for k in kinds}
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], capture_output=True)
        for kind, args in kinds.items():
            res = subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo", *args],
                                 capture_output=True, text=True)
            result[kind] = None if res.returncode == 0 else (res.stderr.strip().splitlines() or ["failed"])[0]
            subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", "lo",
                            "clsact" if kind == "clsact" else "root"], capture_output=True)
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    return result


#: The kernel's queueing disciplines bwn can use, and the `tc qdisc add dev lo` arguments that probe them.
QDISC_PROBES = {
    "htb": ["root", "handle", "1:", "htb"],
    "tbf": ["root", "tbf", "rate", "1mbit", "burst", "10kb", "latency", "10ms"],
    "clsact": ["clsact"],
    "netem": ["root", "netem", "delay", "1ms"],
}


def _kernel() -> Iterator[Component]:
    yield Component("CPU cores", True, f"{os.cpu_count()} ({platform.release()})", required=False)
    root = requirements.root_missing()
    yield Component("root", root is None, root or "euid 0")
    if root is not None or shutil.which("ip") is None or shutil.which("tc") is None:
        yield Component("kernel queueing disciplines", False, "not probed (needs root, ip and tc)")
        return
    probes = _probe_qdiscs(QDISC_PROBES)
    usable = [k for k, why in probes.items() if why is None]
    absent = [k for k, why in probes.items() if why is not None]
    yield Component("kernel queueing disciplines", "htb" in usable,
                    f"usable: {', '.join(usable) or 'none'}; absent: {', '.join(absent) or 'none'}"
                    + ("" if "htb" in usable else " (bwn's link rates need htb)"))
    yield Component("link delay emulator", True,
                    "netem" if probes.get("netem") is None else
                    "bwn-link (the project's; the kernel has no netem)", required=False)
    jit = "/proc/sys/net/core/bpf_jit_enable"
    try:
        state = open(jit).read().strip()
    except OSError:
        state = "unknown"
    yield Component("BPF JIT", state in ("1", "2"), f"bpf_jit_enable = {state}", required=False)


def components() -> list[Component]:
    """Every check, in the order `make deps` installs them."""
    items: list[Component] = [
        _tool("ip", "iproute2"), _tool("ethtool", "ethtool"),
        _tool("tcpdump", "tcpdump (--pcap)", required=False),
        _tool("iperf3", "iperf3 (bwn net)", required=False),
        _tool("p4c", "p4c", version_arg="--version"),
    ]
    items += list(_bmv2())
    why = requirements.mininet_missing()
    items.append(Component("Mininet", why is None, why or "importable"))
    items.append(_python_modules({"finsy": "finsy", "p4": "p4runtime", "ptf": "ptf", "scapy": "scapy",
                                  "matplotlib": "matplotlib", "thrift": "python3-thrift (apt)"}))
    # built, not installed: make test and make run build it, so its absence right
    # after make deps is not a missing install
    why = requirements.pipeline_missing()
    items.append(Component("compiled switch program", why is None,
                           "build/ (make build)" if why is None else f"{why} (make build; make test and make run "
                                                                     f"build it)", required=False))
    items += list(_kernel())
    items.append(_tool("sbatch", "Slurm (--executor slurm)", required=False, how="apt-get install slurm-wlm"))
    items.append(_tool("p4c-ebpf", "p4c-ebpf (eBPF target)", required=False,
                       how="P4_EBPF_TOOLCHAIN=FILE.tar.zst make deps"))
    return items


def render(items: list[Component]) -> str:
    width = max(len(c.name) for c in items)
    return "\n".join(f"{c.mark:<8} {c.name:<{width}}  {c.detail}" for c in items)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="one JSON object per component instead of the table")


def main(args: argparse.Namespace, checks: Callable[[], list[Component]] = components) -> int:
    items = checks()
    if args.json:
        print(json.dumps([asdict(c) | {"mark": c.mark} for c in items], indent=1))
    else:
        print(render(items))
    missing = [c.name for c in items if c.required and not c.ok]
    if missing:
        print(f"\nbwn doctor: missing: {', '.join(missing)}", file=sys.stderr)
        return 1
    return 0
