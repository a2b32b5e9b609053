"""scripts/deps.sh (`make deps`): a summary line per step, and a non-zero exit when
the P4 toolchain could not be installed, unless BWN_WITHOUT_P4=1.

The script runs in a copy of the repository's layout where apt-get, the toolchain
script and the venv's Python are stand-ins that record their calls: nothing is
installed."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _stub(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/usr/bin/env bash\n" + body + "\n")
    path.chmod(0o755)


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "deps.sh", tmp_path / "scripts" / "deps.sh")
    _stub(tmp_path / "bin" / "apt-get", 'echo "apt-get $*" >> "$LOG"')
    _stub(tmp_path / "bin" / "id", 'echo 0')                       # root, as make deps runs
    _stub(tmp_path / ".venv" / "bin" / "python", 'echo "python $*" >> "$LOG"; [ "$1" != --version ] || echo "Python 3.11.2"')
    return tmp_path


def _run(tree: Path, toolchain_rc: int, **env: str) -> subprocess.CompletedProcess:
    _stub(tree / "scripts" / "p4-toolchain.sh",
          f'echo "toolchain $*" >> "$LOG"; [ "$1" = status ] && printf "p4-toolchain: installed: p4c 1.2\\np4-toolchain: eBPF: p4c-ebpf 1.2\\n"; '
          f'exit {toolchain_rc}')
    full_env = {"PATH": f"{tree / 'bin'}:{os.environ['PATH']}", "LOG": str(tree / "calls.log"),
                "APT_PACKAGES": "mininet iperf3", "VENV": ".venv", **env}
    return subprocess.run(["bash", str(tree / "scripts" / "deps.sh")], cwd=tree, env=full_env,
                          capture_output=True, text=True, timeout=60)


def _summary(out: str) -> list[str]:
    return [line.split()[0] + " " + line.split()[1] for line in out.split("== make deps: summary\n", 1)[1].splitlines()
            if line.strip() and not line.startswith(" ")]


def test_every_step_is_reported_and_all_ok_exits_0(tree):
    res = _run(tree, 0)
    assert res.returncode == 0, res.stdout + res.stderr
    assert _summary(res.stdout) == ["ok apt", "ok toolchain", "ok venv"]
    # the toolchain's line names both of its parts, the main one and the eBPF one
    assert "installed: p4c 1.2; eBPF: p4c-ebpf 1.2" in res.stdout.split("== make deps: summary\n", 1)[1]
    calls = (tree / "calls.log").read_text()
    assert "apt-get install -y -q --no-install-recommends mininet iperf3" in calls
    assert "toolchain install" in calls and "python -m pip install -q -e .[test,p4rt,plots]" in calls


def test_a_missing_toolchain_fails_loudly_unless_told_to_go_on(tree):
    res = _run(tree, 1)
    assert res.returncode == 1
    assert "FAILED toolchain" in _summary(res.stdout)
    assert "make deps: FAILED" in res.stderr and "BWN_WITHOUT_P4=1" in res.stderr
    # the venv is still made, so that the tests that need no toolchain can run
    assert "ok venv" in _summary(res.stdout)
    res = _run(tree, 1, BWN_WITHOUT_P4="1")
    assert res.returncode == 0
    assert "going on without the P4 toolchain" in res.stdout


def test_a_failed_apt_is_fatal_unless_every_package_is_there(tree):
    _stub(tree / "bin" / "apt-get", 'exit 100')
    _stub(tree / "bin" / "dpkg", 'exit 1')                         # some package missing
    res = _run(tree, 0)
    assert res.returncode == 1 and "FAILED apt" in _summary(res.stdout)
    _stub(tree / "bin" / "dpkg", 'exit 0')                         # all installed already
    res = _run(tree, 0)
    assert res.returncode == 0 and "every package is installed already" in res.stdout
