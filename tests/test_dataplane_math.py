"""The controller's arithmetic for the dataplane's lookup tables."""
from __future__ import annotations

import math
import re

import pytest

from bwn.protocol import dataplane_math as dm
from bwn.protocol.wire import ebn_encode_kbps


@pytest.mark.parametrize("window_us", [2**6, 2**10, 2**14, 2**17, 2**20, 2**24])
def test_bytes_per_window_to_kbps_is_floor_of_exact(window_us):
    """(x * 125) >> (k - 6) == floor(x * 8000 / W): exact, for AB of either sign."""
    for x in (0, 1, 7, 125, 1000, 20_480, 1_000_000, -1, -1500, -20_480, -1_000_000):
        assert dm.window_bytes_to_kbps(x, window_us) == math.floor(x * 8000 / window_us), x


def test_capacity_bytes_per_window_rounds_to_the_byte():
    assert dm.capacity_bytes_per_window(10e6, 16_384) == 20_480
    assert dm.capacity_bytes_per_window(100e3, 2**18) == 3_277   # 3276.8
    # Back to kb/s within one window's rounding.
    for bps, w in ((100e3, 2**18), (2e6, 2**14), (1e9, 2**12)):
        cap = dm.capacity_bytes_per_window(bps, w)
        assert abs(dm.window_bytes_to_kbps(cap, w) - bps / 1000) <= 1 + 0.5 * 8000 / w


def test_expected_avail_is_ic_minus_br_minus_bi():
    # 10 Mb/s, 16.384 ms: IC = 20 480 bytes; 12 000 received, 3 packets of 1514 queued.
    ab = dm.expected_avail_kbps(10e6, 16_384, received_bytes=12_000, queued=3, queue_unit_bytes=1514)
    assert ab == math.floor((20_480 - 12_000 - 3 * 1514) * 8000 / 16_384)
    # Overload: negative, as deep as the excess.
    assert dm.expected_avail_kbps(10e6, 16_384, 40_960, 0, 1514) == -10_000


def test_window_must_be_power_of_two():
    assert dm.window_mask(16384) == (1 << 48) - 16384
    for bad in (1000, 0, 2**25, 3 * 2**10):
        with pytest.raises(dm.ConfigError, match="power of two"):
            dm.window_mask(bad)


def test_queue_lut_is_depth_times_frame_size():
    lut = dm.queue_lut(1500)
    for depth in (0, 1, 10, 31, 32, 100, 2047):
        assert abs(lut(depth) - depth * 1500) <= 1, depth
    with pytest.raises(dm.ConfigError):
        dm.queue_lut(0)


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
    cap = dm.PortCapacity.from_bps(10e6, 16_384)
    assert (cap.cap_kbps, cap.cap_bytes, cap.cap_log7) == (10_000, 20_480, round(128 * math.log2(10_000)))
    with pytest.raises(dm.ConfigError, match="shorter window"):
        dm.PortCapacity.from_bps(600e9, 2**20)
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


def _ones_add(a: int, b: int) -> int:
    s = a + b
    return (s & 0xFFFF) + (s >> 16)


@pytest.mark.parametrize("ttl,proto", [(2, 17), (64, 6), (255, 17), (128, 1)])
def test_ttl_decrement_is_rfc1624_eq3_for_every_checksum(ttl, proto):
    """The switch's one-addition TTL and checksum update equals RFC 1624 eq. 3,
    HC' = ~(~HC + ~m + m'), for all 2^16 checksums, and leaves the protocol."""
    m = (ttl << 8) | proto
    m_new = ((ttl - 1) << 8) | proto
    for hc in range(1 << 16):
        eq3 = ~_ones_add(_ones_add(~hc & 0xFFFF, ~m & 0xFFFF), m_new) & 0xFFFF
        assert dm.ttl_decremented((m << 16) | hc) == (m_new << 16) | eq3, hex(hc)


def test_ttl_decrement_keeps_real_headers_valid():
    """On real IPv4 headers (scapy computes their checksums), the updated word
    still verifies: the one's complement sum of the header is 0xFFFF."""
    from scapy.layers.inet import IP
    for i in range(200):
        raw = bytearray(bytes(IP(src=f"10.{i}.1.1", dst=f"10.0.{i}.2", ttl=2 + i, id=(977 * i) & 0xFFFF, proto=17)))
        word = int.from_bytes(raw[8:12], "big")
        raw[8:12] = dm.ttl_decremented(word).to_bytes(4, "big")
        total = 0
        for k in range(0, 20, 2):
            total = _ones_add(total, int.from_bytes(raw[k:k + 2], "big"))
        assert total == 0xFFFF and raw[8] == 1 + i, i



def test_capacity_bytes_per_window_is_the_exact_rounding_at_high_rates():
    # 1 Gb/s over 2^24 us: 2 097 152 000 bytes exactly (a divisor off by 1 ppm is 262 bytes off).
    assert dm.capacity_bytes_per_window(1e9, 2**24) == 2_097_152_000
    assert dm.capacity_bytes_per_window(12_345_678, 2**20) == round(12_345_678 * 2**20 / 8e6)


@pytest.mark.parametrize("kbps, rounded", [(1.0, 1), (1.49, 1), (1.5, 2), (2.0, 2), (dm.INT32_MAX, dm.INT32_MAX)])
def test_capacities_the_dataplane_holds(kbps, rounded):
    assert dm.check_capacity_kbps(kbps) == rounded


@pytest.mark.parametrize("kbps, says", [
    (0.4, "must be at least 1 kb/s, got 400 b/s"),
    (0.0, "must be at least 1 kb/s, got 0 b/s"),
    (dm.INT32_MAX + 1, "b/s exceeds the dataplane's 2.15e+12 b/s"),
])
def test_capacities_outside_the_dataplane_are_refused_with_their_value(kbps, says):
    with pytest.raises(dm.ConfigError, match=re.escape(says)):
        dm.check_capacity_kbps(kbps)


def test_log7_is_zero_below_one_and_128_per_octave_above():
    assert [dm.log7(x) for x in (0.0, 0.5, 0.999, 1.0, 2.0, 3.0, 1024.0)] == [0, 0, 0, 0, 128, 203, 1280]


def test_flows_estimate_is_linear_counting_and_saturates_at_m_ln_m():
    assert dm.flows_estimate(0) == 0.0 and dm.flows_estimate(-3) == 0.0
    assert dm.flows_estimate(128, 256) == pytest.approx(256 * math.log(2))
    assert dm.flows_estimate(256, 256) == pytest.approx(256 * math.log(256))
    assert dm.flows_estimate(300, 256) == dm.flows_estimate(256, 256)
    table = dm.flows_log7_table(16)
    assert list(table) == list(range(1, 17))                     # every occupancy 1..m, no other
    assert table[16] == dm.log7(16 * math.log(16))
    assert table[8] == dm.log7(16 * math.log(2))


def _ebn_code_reference(capacity_kbps: float, flows: int) -> int:
    """round(log7(C) - log7(N)) / 16 half up, clamped to 0..254, written apart
    from the model under test (N = 1 for no flow)."""
    n_log7 = dm.flows_log7_table()[min(flows, dm.FLOW_SLOTS)] if flows else 0
    share = dm.log7(round(capacity_kbps)) - n_log7
    return min(254, max(0, math.floor(share / 16 + 0.5)))


@pytest.mark.parametrize("flows", [0, 1, 2, 3, 7, 50, 256, 1000])
def test_expected_ebn_code_is_the_rounded_log_share(flows):
    for kbps in (1, 2, 3, 5, 7, 10, 100, 150, 1_000, 9_999, 10_000, 123_457, 10**6, 2 * 10**9):
        assert dm.expected_ebn_code(kbps, flows) == _ebn_code_reference(kbps, flows), (kbps, flows)


def test_window_conversion_wraps_as_the_switchs_int32():
    """floor(bytes * 8000 / W) in 32-bit two's complement: what the P4 program's register
    holds when a count is out of int32's range (forged or absurd capacities)."""
    w = 16_384

    def int32(x: int) -> int:
        return x - 2**32 if x >= 2**31 else x + 2**32 if x < -2**31 else x

    for kbps in (2**31 - 1, 2**31, 2**31 + 7, 2**32 + 5, -2**31, -2**31 - 1):
        b = -(-kbps * w // 8000)                          # the fewest bytes that reach kbps
        assert b * 8000 // w == kbps
        assert dm.window_bytes_to_kbps(b, w) == int32(kbps), kbps


def test_reservation_meter_at_its_bounds():
    smallest = dm.MeterRates.for_reservation(1.0, burst_bytes=1600)   # 1 b/s, one full frame
    assert (smallest.cir_bytes_per_s, smallest.cburst_bytes) == (1, 1600)
    assert smallest.pir_bytes_per_s == 1 and smallest.pburst_bytes == 1600
    assert dm.MeterRates.for_reservation(4e6).cir_bytes_per_s == 500_000
    with pytest.raises(dm.ConfigError) as err:
        dm.MeterRates.for_reservation(0.0)
    assert str(err.value) == "reservation rate must be positive, got 0.0 b/s"
    with pytest.raises(dm.ConfigError) as err:
        dm.MeterRates.for_reservation(1e6, burst_bytes=1599)
    assert str(err.value) == "meter burst must hold at least one full frame (1600 B), got 1599"
