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


def test_cpu_busy_is_one_minus_idle_over_the_window() -> None:
    tick = os.sysconf("SC_CLK_TCK")
    # fields: user nice system idle iowait irq softirq steal; a 2-second window
    before = {"cpu0": [0] * 8, "cpu1": [0] * 8}
    after = {"cpu0": [0, 0, 0, int(0.5 * tick), 0, 0, int(0.5 * tick), 0],   # sampled ticks miss 1 s
             "cpu1": [int(1.5 * tick), 0, int(0.5 * tick), 0, 0, 0, 0, 0]}
    busy, kinds = switch_pps.cpu_usage(before, after, packets=1_000_000, window_s=2.0)
    assert busy == pytest.approx((0.75, 1.0))
    assert kinds == pytest.approx({"user": 1.5, "system": 0.5, "softirq": 0.5, "steal": 0.0})
