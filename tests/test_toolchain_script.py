"""scripts/p4-toolchain.sh: the safety checks and messages a user relies on.

The full install paths (prebuilt, source) are exercised by CI itself (.ci/run
installs the prebuilt tree) and measured in README; these tests cover what
must never happen: unpacking a tarball that writes outside usr/local at /,
and failing without saying what to do."""
from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from needs import missing, no_tool, not_root

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "p4-toolchain.sh"


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


def _tarball(path: Path, members: dict[str, bytes], apt_list: str | None) -> Path:
    raw = path.with_suffix("")  # .tar
    with tarfile.open(raw, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    subprocess.run(["zstd", "-q", "-f", str(raw), "-o", str(path)], check=True)
    if apt_list is not None:
        path.with_name(path.name.replace(".tar.zst", ".apt.txt")).write_text(apt_list)
    return path


def test_help_names_every_source_and_the_pins():
    res = run("help")
    assert res.returncode == 0
    for word in ("P4_TOOLCHAIN", "P4_SRC", "packages", "f96af95", "9674187", "v1.2.5.16",
                 "20240722.1", "25.3"):
        assert word in res.stdout, word


def test_no_function_hides_a_command_the_script_runs():
    """A shell function named like a command replaces it for the whole script:
    `install()` once made the eBPF build's `install -m 755 ...` run the whole
    installer instead (and stage no p4c-ebpf)."""
    import re
    text = SCRIPT.read_text()
    functions = set(re.findall(r"^([A-Za-z_][A-Za-z0-9_]*)\(\) *\{", text, re.M))
    commands = {"install", "cp", "tar", "strip", "make", "cmake", "ninja", "git", "find", "file", "ldd",
                "zstd", "patch", "sed", "awk", "grep", "cmp", "mkdir", "rm", "apt-get", "python3", "ldconfig"}
    assert not functions & commands, f"functions named like commands: {sorted(functions & commands)}"


def test_unknown_command_is_refused_with_the_list():
    res = run("frobnicate")
    assert res.returncode != 0
    assert "unknown command 'frobnicate'" in res.stderr and "install" in res.stderr


def test_pack_refuses_a_name_without_tar_zst():
    res = run("pack", "/tmp/x.tgz")
    assert res.returncode != 0 and ".tar.zst" in res.stderr


def test_verify_says_what_is_missing():
    res = run("verify", env={"PATH": "/usr/bin:/bin"})
    if shutil.which("p4c", path="/usr/bin:/bin"):
        pytest.skip("p4c is in /usr/bin: cannot hide it")
    assert res.returncode != 0
    assert "p4c is not on PATH" in res.stdout


@pytest.fixture
def root_with_zstd():
    missing(not_root() or no_tool("zstd", "apt-get"), "toolchain installer checks")


def test_prebuilt_writing_outside_usr_local_is_refused(tmp_path, root_with_zstd):
    evil = _tarball(tmp_path / "evil.tar.zst",
                    {"usr/local/bin/ok": b"#!/bin/sh\n", "etc/bwn-evil": b"x"}, apt_list="zstd\n")
    res = run("install", env={"P4_TOOLCHAIN": str(evil), "P4_FORCE": "1"})
    assert res.returncode != 0
    assert "outside usr/local" in res.stderr
    assert not Path("/etc/bwn-evil").exists()


def test_prebuilt_without_package_list_is_refused(tmp_path, root_with_zstd):
    bare = _tarball(tmp_path / "bare.tar.zst", {"usr/local/bin/ok": b"#!/bin/sh\n"}, apt_list=None)
    res = run("install", env={"P4_TOOLCHAIN": str(bare), "P4_FORCE": "1"})
    assert res.returncode != 0
    assert "no package list" in res.stderr


def test_missing_prebuilt_file_is_named():
    missing(not_root(), "toolchain installer checks")
    res = run("install", env={"P4_TOOLCHAIN": "/nonexistent/t.tar.zst"})
    assert res.returncode != 0
    assert "/nonexistent/t.tar.zst: no such file" in res.stderr


def test_help_names_the_ebpf_ways_and_pins():
    res = run("help")
    for word in ("P4_EBPF_TOOLCHAIN", "P4_WITH_EBPF", "build-ebpf", "b8b1e82", "v7.5.0", "v0.5.0"):
        assert word in res.stdout, word


def test_verify_names_a_missing_ebpf_toolchain_when_asked_for():
    if shutil.which("p4c-ebpf", path="/usr/bin:/bin"):
        pytest.skip("p4c-ebpf is in /usr/bin: cannot hide it")
    res = run("verify", env={"PATH": "/usr/bin:/bin", "P4_WITH_EBPF": "1"})
    assert res.returncode != 0
    assert "p4c-ebpf is not on PATH" in res.stdout
    assert "nikss-ctl is not on PATH" in res.stdout


@pytest.fixture
def main_installed():
    """The eBPF toolchain goes on top of the main one: install reaches it only then."""
    missing(not_root() or no_tool("zstd", "apt-get", "p4c", "simple_switch_grpc"), "eBPF toolchain installer checks")


def test_ebpf_prebuilt_writing_outside_usr_local_is_refused(tmp_path, main_installed):
    evil = _tarball(tmp_path / "evil-ebpf.tar.zst",
                    {"usr/local/bin/ok": b"#!/bin/sh\n", "etc/bwn-evil-ebpf": b"x"}, apt_list="zstd\n")
    res = run("install", env={"P4_EBPF_TOOLCHAIN": str(evil), "P4_TOOLCHAIN": ""})
    assert res.returncode != 0
    assert "outside usr/local" in res.stderr
    assert not Path("/etc/bwn-evil-ebpf").exists()


def test_ebpf_prebuilt_without_package_list_is_refused(tmp_path, main_installed):
    bare = _tarball(tmp_path / "bare-ebpf.tar.zst", {"usr/local/bin/ok": b"#!/bin/sh\n"}, apt_list=None)
    res = run("install", env={"P4_EBPF_TOOLCHAIN": str(bare), "P4_TOOLCHAIN": ""})
    assert res.returncode != 0
    assert "no package list" in res.stderr


def test_missing_ebpf_prebuilt_file_is_named(main_installed):
    res = run("install", env={"P4_EBPF_TOOLCHAIN": "/nonexistent/e.tar.zst", "P4_TOOLCHAIN": ""})
    assert res.returncode != 0
    assert "/nonexistent/e.tar.zst: no such file" in res.stderr
