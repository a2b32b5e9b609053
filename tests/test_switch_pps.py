"""The pure helpers of benchmarks/switch_pps.py: what the per-thread table reports."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import switch_pps  # noqa: E402


def test_busiest_threads_are_the_top_n_by_cpu_in_start_order() -> None:
    before = {10: 1.0, 11: 0.0, 12: 5.0, 13: 2.0, 14: 0.0}
    after = {10: 1.5, 11: 3.0, 12: 5.1, 13: 4.0, 14: 0.2}   # used: .5 3 .1 2 .2
    us = switch_pps.busiest_threads_us(before, after, packets=1000, n=3)
    # threads 11 (3 s), 13 (2 s) and 10 (0.5 s), reported in thread-id order
    assert us == pytest.approx([500.0, 3000.0, 2000.0])


def test_a_thread_started_during_the_measurement_counts_from_zero() -> None:
    us = switch_pps.busiest_threads_us({1: 1.0}, {1: 1.0, 2: 0.25}, packets=250_000, n=1)
    assert us == pytest.approx([1.0])


def test_thread_cpu_reads_this_process() -> None:
    cpu = switch_pps.thread_cpu_s(os.getpid())
    assert os.getpid() in cpu                      # the main thread's id is the pid
    assert all(v >= 0.0 for v in cpu.values())
