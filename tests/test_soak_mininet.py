"""A real soak, short (benchmarks/soak.py on BMv2 + bwn-link + agents): every
process sampled, every byte accounted for, the fidelity verdict recorded; and
nothing left behind after success, Ctrl-C, or a process of the run dying."""
from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from needs import missing, not_root, stale_build

from bwn.requirements import bmv2_missing
from bwn.emulation.runlock import experiment_lock

REPO = Path(__file__).resolve().parents[1]
SOAK = REPO / "benchmarks" / "soak.py"
KINDS = {"runner": 1, "switch": 2, "bwn-link": 2, "bwn-send": 8, "bwn-recv": 2}   # the soak scenario


def _missing() -> str | None:
    if not_root():
        return not_root()
    if bmv2_missing():
        return bmv2_missing()
    try:
        import mininet.net  # noqa: F401
    except ImportError:
        return "Mininet not importable"
    return stale_build()


@pytest.fixture(autouse=True)
def _needs_mininet_and_bmv2():
    missing(_missing(), "soak test")


def _samples(out: Path) -> list[dict[str, str]]:
    path = out / "soak.csv"
    if not path.exists():
        return []
    text = path.read_text()
    complete = text[: text.rfind("\n") + 1]          # the soak may be writing a row
    return list(csv.DictReader(complete.splitlines()))


def _start(out: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(SOAK), "--out", str(out), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)


def _wait_for_samples(proc: subprocess.Popen, out: Path, after_s: float) -> list[dict[str, str]]:
    """Until the soak has sampled past `after_s` (it may first wait for the lock)."""
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline and proc.poll() is None:
        rows = _samples(out)
        if any(float(r["t_s"]) >= after_s for r in rows):
            return rows
        time.sleep(0.5)
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    output = proc.communicate(timeout=180)[0]
    pytest.fail(f"the soak never sampled past {after_s} s:\n{output[-4000:]}")


def _root_links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines()}


def _assert_nothing_left(out: Path, pids: set[int]) -> None:
    """Checked holding the experiment lock: no other Mininet experiment can have
    built s1-eth1 (same names) or host shells in the meantime."""
    with experiment_lock(progress=lambda m: None, timeout_s=1200):
        for pid in pids:
            try:
                args = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue                                   # gone, as it should be
            assert not any(s in args for s in (str(out), "simple_switch", "bwn-", "soak.py")), \
                f"pid {pid} of the soak is still running: {args}"
        left = {name for name in _root_links() if name.startswith(("s1-eth", "s2-eth"))}
        assert not left, f"interfaces left: {left}"
        ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
        assert str(out) not in ps, "a process of the soak (agent, emulator) is still alive"
        assert "mininet:" not in ps, "a Mininet host shell (a host namespace) is still alive"


def test_short_soak_samples_every_process_and_loses_no_byte(tmp_path):
    out = tmp_path / "soak"
    res = subprocess.run([sys.executable, str(SOAK), "--minutes", "0.5", "--interval-s", "2",
                          "--warmup-s", "6", "--drain-s", "20", "--out", str(out)],
                         capture_output=True, text=True, timeout=1500, cwd=REPO)
    print(res.stdout[-6000:], res.stderr[-3000:])
    assert res.returncode == 0, res.stderr
    result = json.loads((out / "soak.json").read_text())
    assert result["passed"] is True and result["status"] == "complete" and result["problems"] == []
    # Every process of the run, sampled all along, with a fit of its growth.
    procs = result["processes"]
    assert {k: sum(p["kind"] == k for p in procs) for k in KINDS} == KINDS
    for p in procs:
        assert p["samples"] >= 14, p          # 30 s at 2 s, and the final sample
        assert p["rss_end_bytes"] > 4 * 2**20 and p["cpu_s"] >= 0, p
        assert p["growth"] is not None and p["growth"]["samples"] >= 10, p
        assert p["exited"] is None
    rows = _samples(out)
    assert {int(r["pid"]) for r in rows} == {p["pid"] for p in procs}
    # Every flow accounted for: handed over, acknowledged, delivered, none lost.
    assert result["lost_bytes"] == 0 and result["handed_over_bytes"] > 1_000_000
    flows = result["flows"]
    assert len(flows) == 8 and len({f["algo"] for f in flows}) == 8
    for f in flows:
        assert f["delivered_bytes"] >= f["acked_bytes"] > 0, f
        assert f["lost_bytes"] == 0 and f["problems"] == [], f
    # The run's fidelity verdict, with the offload counters of both emulators
    # (0: every node's offloads are off; not a matter of load).
    fid = result["fidelity"]
    assert "valid" in fid and fid["summary"]
    offload = fid["checks"]["linkem_offload_drops"]
    assert offload["held"] is True and len(offload["items"]) == 4, offload
    # The wan's emulator ran its loss, duplication and reordering paths.
    em = [json.loads(p.read_text()) for p in out.glob("em*-linkem.json")]
    wan = [s for s in em if s["a_to_b"]["config"]["loss"] == 0.001]
    assert len(wan) == 1
    a2b = wan[0]["a_to_b"]
    assert a2b["dropped_loss"] + a2b["duplicated"] + a2b["reordered"] > 0, a2b
    assert "bytes lost: 0 of" in res.stdout and "fidelity: " in res.stdout
    assert not (out / "switch-logs").exists()
    _assert_nothing_left(out, {int(r["pid"]) for r in rows})


def test_ctrl_c_mid_soak_tears_everything_down(tmp_path):
    out = tmp_path / "soak"
    proc = _start(out, "--minutes", "5", "--interval-s", "1", "--warmup-s", "1")
    try:
        rows = _wait_for_samples(proc, out, after_s=3)
        proc.send_signal(signal.SIGINT)
        output = proc.communicate(timeout=180)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    print(output[-5000:])
    assert proc.returncode == 130
    result = json.loads((out / "soak.json").read_text())
    assert result["status"] == "interrupted" and result["passed"] is False
    assert any(p["samples"] >= 3 for p in result["processes"])
    assert "interrupted" in output
    _assert_nothing_left(out, {int(r["pid"]) for r in _samples(out)} | {int(r["pid"]) for r in rows})


def test_a_process_dying_mid_soak_fails_it_and_tears_everything_down(tmp_path):
    out = tmp_path / "soak"
    proc = _start(out, "--minutes", "5", "--interval-s", "1", "--warmup-s", "1")
    try:
        rows = _wait_for_samples(proc, out, after_s=2)
        emulator = next(r for r in rows if r["kind"] == "bwn-link")
        os.kill(int(emulator["pid"]), signal.SIGKILL)      # a process of the soak: it started it
        output = proc.communicate(timeout=180)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    print(output[-5000:])
    assert proc.returncode == 1
    result = json.loads((out / "soak.json").read_text())
    assert result["status"] == "failed" and result["passed"] is False
    assert any(f"{emulator['process']} (pid {emulator['pid']}" in p for p in result["problems"]), result["problems"]
    died = next(p for p in result["processes"] if p["name"] == emulator["process"])
    assert died["exited"] and "exit status -9" in died["exited"]
    assert "FAILED" in output
    assert (out / "switch-logs").exists()                  # kept when something went wrong
    _assert_nothing_left(out, {int(r["pid"]) for r in _samples(out)})
