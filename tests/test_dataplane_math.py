"""The controller's arithmetic for the dataplane's lookup tables."""
from __future__ import annotations

import math

import pytest

from bwn.controller import dataplane_math as dm
from bwn.wire import ebn_encode_kbps


@pytest.mark.parametrize("window_us", [2**10, 2**14, 2**17, 2**20])
def test_length_lut_is_rate_of_one_packet_per_window(window_us):
    lut = dm.length_lut(window_us)
    for length in (0, 1, 31, 32, 64, 577, 1000, 1514, 2047):
        exact_qkbps = length * 8 / (window_us / 1e6) / 250  # bits per window -> quarter kb/s
        assert abs(lut(length) - exact_qkbps) <= 1.0, (length, lut(length), exact_qkbps)


def test_window_must_be_power_of_two():
    assert dm.window_mask(16384) == (1 << 48) - 16384
    for bad in (1000, 0, 2**25, 3 * 2**10):
        with pytest.raises(dm.ConfigError, match="power of two"):
            dm.window_mask(bad)


def test_queue_lut_uses_assumed_packet_size():
    lut = dm.queue_lut(2**14, 1500)
    # 10 full packets drained in 16.384 ms = 7.32 Mb/s = 29297 qkbps.
    assert abs(lut(10) - 10 * 1500 * 8 / 0.016384 / 250) <= 1


def test_linear_counting_corrects_collisions():
    assert dm.flows_estimate(0) == 0
    assert dm.flows_estimate(1) == pytest.approx(1.0, abs=0.01)
    # Expected occupied slots for n flows in m slots: m (1 - (1 - 1/m)^n); the estimate inverts it.
    m = dm.FLOW_SLOTS
    for n in (10, 50, 100, 200):
        z = m * (1 - (1 - 1 / m) ** n)
        assert dm.flows_estimate(round(z)) == pytest.approx(n, rel=0.03)


def test_ebn_share_code_matches_wire_encoding():
    for capacity_kbps in (100, 133, 200, 10_000, 1_000_000):
        for flows in (1, 2, 4, 8, 16):
            exact = ebn_encode_kbps(capacity_kbps / flows)
            assert abs(dm.expected_ebn_code(capacity_kbps, flows) - exact) <= 1
    # Doubling the flows halves the share: exactly one octave, 8 codes, for small N.
    assert dm.expected_ebn_code(10_000, 2) - dm.expected_ebn_code(10_000, 4) == 8


def test_capacity_and_loss_ranges():
    cap = dm.PortCapacity.from_bps(10e6)
    assert (cap.cap_kbps, cap.cap_qkbps, cap.cap_log7) == (10_000, 40_000, round(128 * math.log2(10_000)))
    with pytest.raises(dm.ConfigError):
        dm.PortCapacity.from_bps(600e9)
    with pytest.raises(dm.ConfigError):
        dm.PortCapacity.from_bps(10)
    assert dm.loss_threshold(0.5) == 2**31
    assert dm.loss_threshold(1.0) == 2**32 - 1
    assert dm.loss_threshold(1e-5) == round(1e-5 * 2**32)
    for bad in (-0.1, 1.1, float("nan")):
        with pytest.raises(dm.ConfigError):
            dm.loss_threshold(bad)


def test_meter_rates():
    r = dm.MeterRates.for_reservation(4e6)
    assert r.cir_bytes_per_s == 500_000 and r.pir_bytes_per_s == r.cir_bytes_per_s
    with pytest.raises(dm.ConfigError):
        dm.MeterRates.for_reservation(0)
