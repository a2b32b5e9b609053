"""The machine-wide experiment lock: a second holder waits, and a dead holder frees it."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from bwn.emulation.runlock import experiment_lock

HOLD = """
import sys, time
from pathlib import Path
from bwn.emulation.runlock import experiment_lock
with experiment_lock(path=Path(sys.argv[1]), progress=lambda m: None):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def _holder(path, seconds):
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_second_holder_times_out_naming_the_first(tmp_path):
    lock = tmp_path / "x.lock"
    proc = _holder(lock, 30)
    said = []
    try:
        with pytest.raises(TimeoutError, match=f"pid {proc.pid}"):
            with experiment_lock(path=lock, progress=said.append, timeout_s=0.5):
                pass
        assert said and str(proc.pid) in said[0]
    finally:
        proc.kill()
        proc.wait()


def test_lock_is_free_once_the_holder_dies(tmp_path):
    lock = tmp_path / "x.lock"
    proc = _holder(lock, 30)
    proc.kill()
    proc.wait()
    t0 = time.monotonic()
    with experiment_lock(path=lock, progress=lambda m: None, timeout_s=5):
        pass
    assert time.monotonic() - t0 < 5
