"""The numbers the dataplane's lookup tables and action parameters hold
(p4src/v1model/bwn.p4).

The switch never divides or multiplies by a runtime value (Tofino cannot); the
controller does that arithmetic once, here, and installs the results:

* a power-of-two measurement window ``W = 2**k`` microseconds, aligned by a mask;
* rates as exact byte counts per window: a port's capacity IC is installed as
  bytes per window, BR is counted in bytes, BI (the queue, which BMv2 reports in
  packets) is converted to bytes by a split table ``f(x) = hi[x >> 5] + lo[x & 31]``,
  and AB = IC - BR - BI becomes kb/s once per window with the constant shift of
  the window's size: ``kbps = (bytes * 125) >> (k - 6)`` (= bytes * 8000 / W);
* base-2 logarithms in "log7" units (128 per octave) for the EBN share
  ``C / N  ->  log7(C) - log7(N)``, with ``N`` the linear-counting estimate of the
  number of flows from the number of occupied hash slots.

docs/dataplane.md derives the error of each approximation.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

LOG7_PER_OCTAVE = 128
FLOW_SLOTS = 256                # p4src/shared/define.p4
LUT_LO_BITS = 5
LUT_LO_SIZE = 1 << LUT_LO_BITS  # 32
LUT_HI_SIZE = 64
MAX_PORTS = 64
QUEUE_TABLE_SIZE = 4096        # p4src/shared/define.p4
MASK48 = (1 << 48) - 1
U32_MAX = (1 << 32) - 1
INT32_MAX = (1 << 31) - 1

MIN_WINDOW_US = 2**6            # 64 us
MAX_WINDOW_US = 2**24           # 16.8 s


class ConfigError(ValueError):
    """A value the dataplane cannot represent; the message says what to change."""


def check_power_of_two_us(name: str, window_us: int) -> None:
    if not isinstance(window_us, int) or window_us < MIN_WINDOW_US or window_us > MAX_WINDOW_US \
            or window_us & (window_us - 1):
        raise ConfigError(
            f"{name} must be a power of two between {MIN_WINDOW_US} and {MAX_WINDOW_US} us, "
            f"got {window_us!r} (e.g. 16384 for 16.4 ms)")


def window_mask(window_us: int) -> int:
    """48-bit mask that aligns a microsecond timestamp to its window start."""
    check_power_of_two_us("window_us", window_us)
    return MASK48 & ~(window_us - 1)


def window_bytes_to_kbps(bytes_per_window: int, window_us: int) -> int:
    """What the switch computes: floor(bytes * 8000 / W) as (bytes * 125) >> (k - 6),
    two's-complement int32 in and out (AB may be negative)."""
    check_power_of_two_us("window_us", window_us)
    k = window_us.bit_length() - 1
    value = (bytes_per_window * 125) >> (k - 6)
    return ((value + 2**31) % 2**32) - 2**31


def capacity_bytes_per_window(capacity_bps: float, window_us: int) -> int:
    """IC as the bytes a port can send in one window, rounded (error < 0.5 byte)."""
    return round(capacity_bps * window_us / 8e6)


@dataclass(frozen=True)
class SplitLut:
    """f(x) = hi[x >> 5] + lo[x & 31] for x < 32 * len(hi)."""

    hi: tuple[int, ...]
    lo: tuple[int, ...]

    def __call__(self, x: int) -> int:
        hi_index = x >> LUT_LO_BITS
        hi = self.hi[hi_index] if hi_index < len(self.hi) else 0
        return hi + self.lo[x & (LUT_LO_SIZE - 1)]


def linear_lut(per_unit: float, hi_size: int = LUT_HI_SIZE) -> SplitLut:
    """Split table of ``x * per_unit``, each half rounded to the nearest integer
    (so f(x) is within 1 of the exact product)."""
    hi = tuple(min(U32_MAX, round(h * LUT_LO_SIZE * per_unit)) for h in range(hi_size))
    lo = tuple(min(U32_MAX, round(lo_ * per_unit)) for lo_ in range(LUT_LO_SIZE))
    return SplitLut(hi, lo)


def queue_lut(queue_unit_bytes: int) -> SplitLut:
    """Queue depth in the target's unit -> bytes queued (BI of OBP eq. 6).

    BMv2 reports the queue in packets, so ``queue_unit_bytes`` is the frame size
    assumed for queued packets (the data frames of the experiment's agents);
    Tofino reports 80-byte cells, so there it is 80 and the conversion exact.
    Depths beyond the table (>= 32 * LUT_HI_SIZE units) count as 0: size queues below.
    """
    if queue_unit_bytes <= 0:
        raise ConfigError(f"queue_unit_bytes must be positive, got {queue_unit_bytes}")
    return linear_lut(float(queue_unit_bytes))


def log7(x: float) -> int:
    """round(128 * log2(x)), x >= 1."""
    if x < 1:
        return 0
    return round(LOG7_PER_OCTAVE * math.log2(x))


def flows_estimate(occupied_slots: int, slots: int = FLOW_SLOTS) -> float:
    """Linear counting (Whang et al. 1990): n = -m ln(1 - z/m); saturates at z = m."""
    if occupied_slots <= 0:
        return 0.0
    z = min(occupied_slots, slots)
    if z == slots:
        return slots * math.log(slots)
    return -slots * math.log(1.0 - z / slots)


def flows_log7_table(slots: int = FLOW_SLOTS) -> dict[int, int]:
    """Occupied slots (1..m) -> log7 of the estimated number of flows."""
    return {z: log7(max(1.0, flows_estimate(z, slots))) for z in range(1, slots + 1)}


@dataclass(frozen=True)
class PortCapacity:
    """What `port_config` holds for one egress port: IC in bytes per window, in
    kb/s (the narrow-link stamp) and as log7 (the EBN share)."""

    cap_bytes: int
    cap_kbps: int
    cap_log7: int

    @classmethod
    def from_bps(cls, capacity_bps: float, window_us: int = 16_384) -> "PortCapacity":
        kbps = check_capacity_kbps(capacity_bps / 1000.0)
        cap_bytes = capacity_bytes_per_window(capacity_bps, window_us)
        if cap_bytes > MAX_WINDOW_BYTES:
            raise ConfigError(f"link capacity {capacity_bps:.3g} b/s is too large for a {window_us} us window "
                              f"(at most {MAX_WINDOW_BYTES * 8e6 / window_us:.3g} b/s): the dataplane holds "
                              f"IC - BR - BI in int32 bytes per window; use a shorter window")
        return cls(cap_bytes=cap_bytes, cap_kbps=kbps, cap_log7=log7(kbps))


MAX_WINDOW_BYTES = INT32_MAX // 2   # IC per window, so that IC - BR - BI stays an int32


def check_capacity_kbps(kbps: float) -> int:
    """A capacity the dataplane can hold in kb/s (AB is an int32 in kb/s), rounded."""
    rounded = round(kbps)
    if rounded < 1:
        raise ConfigError(f"link capacity must be at least 1 kb/s, got {kbps * 1000:g} b/s")
    if rounded > INT32_MAX:
        raise ConfigError(f"link capacity {kbps * 1000:.3g} b/s exceeds the dataplane's "
                          f"{INT32_MAX * 1000:.3g} b/s")
    return rounded


def loss_threshold(probability: float) -> int:
    """Drop threshold for a uniform 32-bit draw: round(p * 2^32), capped at 2^32 - 1."""
    if not 0.0 <= probability <= 1.0 or math.isnan(probability):
        raise ConfigError(f"loss probability must be in [0, 1], got {probability}")
    return min(U32_MAX, round(probability * 2**32))


def expected_ebn_code(capacity_kbps: float, flows: int) -> int:
    """The code the switch stamps for `flows` distinct flows on a link of
    `capacity_kbps` (reference model of the P4 arithmetic, for tests)."""
    n_log7 = flows_log7_table()[min(flows, FLOW_SLOTS)] if flows > 0 else 0
    share = max(log7(round(capacity_kbps)) - n_log7, 0)
    return min((share + 8) >> 4, 254)


def ttl_decremented(ttl_csum: int) -> int:
    """IPv4's TTL ++ protocol ++ header checksum (32 bits) after a router's TTL
    decrement, as bwn.p4 computes it in one addition (p4src/v1model/bwn.p4,
    `forward`; reference model for tests): the checksum HC becomes
    ~(~HC + 0xFEFF) in one's complement (RFC 1624 eq. 3, m' = m - 0x0100), which
    is HC + 0x0100, or HC + 0x0101 when that sum carries (HC >= 0xFEFF), whose
    carry out of the checksum's 16 bits is taken back from the TTL's part."""
    add = 0xFF000100 if ttl_csum & 0xFFFF < 0xFEFF else 0xFEFF0101
    return (ttl_csum + add) & U32_MAX


def expected_avail_kbps(capacity_bps: float, window_us: int, received_bytes: int,
                        queued: int, queue_unit_bytes: int) -> int:
    """AB = IC - BR - BI of one window, as the switch computes it (reference model)."""
    cap = PortCapacity.from_bps(capacity_bps, window_us)
    bi = queue_lut(queue_unit_bytes)(queued)
    return window_bytes_to_kbps(cap.cap_bytes - received_bytes - bi, window_us)


@dataclass(frozen=True)
class MeterRates:
    """trTCM parameters of a byte meter (P4Runtime MeterConfig: bytes/s and bytes)."""

    cir_bytes_per_s: int
    cburst_bytes: int
    pir_bytes_per_s: int
    pburst_bytes: int

    @classmethod
    def for_reservation(cls, rate_bps: float, burst_bytes: int = 15_000) -> "MeterRates":
        """Conforming (GREEN) up to `rate_bps` with a `burst_bytes` bucket; PIR = CIR so
        everything above the reservation is RED, i.e. best effort."""
        if rate_bps <= 0:
            raise ConfigError(f"reservation rate must be positive, got {rate_bps} b/s")
        if burst_bytes < 1600:
            raise ConfigError(f"meter burst must hold at least one full frame (1600 B), got {burst_bytes}")
        cir = max(1, round(rate_bps / 8))
        return cls(cir, burst_bytes, cir, burst_bytes)
