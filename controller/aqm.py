"""RED with ECN marking: the parameters the controller installs at a port, and a
reference model of what the switch computes with them (p4src/v1model/include/control/red_ecn.p4).

RED (Floyd and Jacobson, "Random Early Detection Gateways for Congestion Avoidance")
keeps an average of the queue, ``avg += w_q (q - avg)`` at each arrival, and marks
(ECN, RFC 3168) or drops an arriving packet with a probability that grows from 0 at
``min_th`` to ``max_p`` at ``max_th`` and, "gentle", to 1 at ``2 max_th``; above that it
drops every packet. Its parameters are set as NS-2 sets them when they are left
to it, the automatic configuration of Adaptive RED (Floyd, Gummadi and Shenker,
"Adaptive RED: An Algorithm for Increasing the Robustness of RED's Active Queue
Management", 2001), with NS-2's defaults:

* ``min_th = max(5, target_delay * C / 2)`` packets, ``target_delay = 5 ms``;
* ``max_th = 3 min_th``;
* ``w_q = 1 - exp(-1 / C)`` (a time constant of one second);
* ``max_p = 0.1`` (NS-2's ``linterm_ 10``), gentle (``gentle_ true``), the count
  spacing marks uniformly (``wait_ true``), the queue in packets (``queue_in_bytes_
  false``, ``bytes_ false``); max_p is not adapted (``adaptive_ 0``),

C being the link's rate in packets per second of the experiment's data frames (NS-2
computes it with its ``mean_pktsize_``: docs/dataplane.md says what that changes).

The switch cannot divide or multiply by a runtime value, so (docs/dataplane.md, "RED
with ECN marking", gives each error):

* ``w_q`` is a power of two, ``2^-K``, K the nearest in log2 (one action per K);
* the average is held in packets with 13 fraction bits;
* the marking probability comes from a table of the average in 1/4 packets
  (``red_probability``), each entry the probability at its level's middle, in 2^-24;
* the idle correction ``avg *= (1 - w_q)^m``, for m = idle time x C, is a shift by
  ``J = round(m w_q' / ln 2)`` (w_q' = -ln(1 - w_q)), from a table of idle-time ranges
  (``red_idle``); 16 or more halvings clear the average.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Optional

from bwn.protocol.dataplane_math import ConfigError, U32_MAX

#: Fixed point of the average (packets << RED_FRAC_BITS) and of its table key (1/4 packet).
RED_FRAC_BITS = 13
RED_LEVEL_SHIFT = 11
LEVELS_PER_PACKET = 1 << (RED_FRAC_BITS - RED_LEVEL_SHIFT)
#: Probability 1 in the marking table's unit (2^-24).
PROB_ONE = 1 << 24
#: Sizes of the switch's tables (p4src/v1model/include/control/red_ecn.p4).
PROBABILITY_TABLE_SIZE = 8192
IDLE_TABLE_SIZE = 1024
#: The weights the switch has an action for: w_q = 2^-K, K = 0..16.
MAX_WEIGHT_LOG2 = 16
#: Idle decays the switch has an action for: avg >> J, J = 1..16; beyond, cleared.
MAX_IDLE_SHIFT = 16

#: NS-2's defaults (ns-default.tcl: targetdelay_, linterm_) and Adaptive RED's floor of min_th.
TARGET_DELAY_S = 0.005
MAX_P = 0.1
MIN_TH_FLOOR_PACKETS = 5.0


@dataclass(frozen=True)
class RedParams:
    """RED's parameters at one port: thresholds in packets, w_q = 2^-weight_log2."""

    min_th: float
    max_th: float
    weight_log2: int
    rate_pps: float                 # C: the idle correction counts idle time in packets of it
    max_p: float = MAX_P

    def __post_init__(self) -> None:
        if not 0 < self.min_th < self.max_th:
            raise ConfigError(f"RED needs 0 < min_th < max_th, got {self.min_th:g} and {self.max_th:g}")
        if not 0 < self.max_p <= 1:
            raise ConfigError(f"RED's max_p must be in (0, 1], got {self.max_p:g}")
        if not 0 <= self.weight_log2 <= MAX_WEIGHT_LOG2:
            raise ConfigError(f"RED's weight 2^-K needs K in 0..{MAX_WEIGHT_LOG2}, got {self.weight_log2}")
        if self.rate_pps <= 0:
            raise ConfigError(f"RED needs the link's rate, got {self.rate_pps:g} packets/s")
        if self.levels > PROBABILITY_TABLE_SIZE:
            raise ConfigError(f"RED thresholds of {self.min_th:g} and {self.max_th:g} packets need "
                              f"{self.levels} marking-table entries, more than the switch's "
                              f"{PROBABILITY_TABLE_SIZE}")

    @classmethod
    def automatic(cls, capacity_bps: float, packet_bytes: int, target_delay_s: float = TARGET_DELAY_S,
                  max_p: float = MAX_P) -> "RedParams":
        """NS-2's automatic setting (Adaptive RED's): C = capacity / (8 packet_bytes)."""
        if capacity_bps <= 0 or packet_bytes <= 0:
            raise ConfigError(f"RED's automatic setting needs a positive rate and packet size, "
                              f"got {capacity_bps:g} b/s and {packet_bytes} bytes")
        rate_pps = capacity_bps / (8.0 * packet_bytes)
        min_th = max(MIN_TH_FLOOR_PACKETS, target_delay_s * rate_pps / 2.0)
        return cls(min_th=min_th, max_th=3.0 * min_th, weight_log2=weight_log2(ared_weight(rate_pps)),
                   rate_pps=rate_pps, max_p=max_p)

    @property
    def weight(self) -> float:
        """w_q as the switch applies it."""
        return 2.0 ** -self.weight_log2

    @property
    def min_level(self) -> int:
        """min_th in the switch's 1/4 packets (rounded: within 1/8 packet)."""
        return round(self.min_th * LEVELS_PER_PACKET)

    @property
    def top_level(self) -> int:
        """2 max_th in 1/4 packets: from there every packet is dropped."""
        return max(self.min_level + 1, round(2 * self.max_th * LEVELS_PER_PACKET))

    @property
    def levels(self) -> int:
        return self.top_level - self.min_level

    def probability(self, avg: float) -> float:
        """RED's p_b at an average of ``avg`` packets (gentle above max_th)."""
        if avg < self.min_th:
            return 0.0
        if avg < self.max_th:
            return self.max_p * (avg - self.min_th) / (self.max_th - self.min_th)
        if avg < 2 * self.max_th:
            return min(1.0, self.max_p + (1 - self.max_p) * (avg - self.max_th) / self.max_th)
        return 1.0

    def probability_table(self) -> dict[int, int]:
        """level -> p_b at the level's middle, in 2^-24, for every level from min_th to 2 max_th."""
        return {level: min(PROB_ONE, round(PROB_ONE * self.probability((level + 0.5) / LEVELS_PER_PACKET)))
                for level in range(self.min_level, self.top_level)}

    def idle_ranges(self) -> list[tuple[int, int, Optional[int]]]:
        """(first us, last us, J) of idle time whose decay the switch applies as avg >> J
        (J = None: cleared); idle times below the first range leave the average as it is.
        J is the nearest integer to m w' / ln 2, m = idle x C, w' = -ln(1 - w_q)."""
        if self.weight_log2 == 0:
            return []                                   # avg = q at every packet: nothing to decay
        per_halving_us = math.log(2) / (-math.log1p(-self.weight) * self.rate_pps) * 1e6
        bounds = [math.ceil((j - 0.5) * per_halving_us) for j in range(1, MAX_IDLE_SHIFT + 2)]
        ranges: list[tuple[int, int, Optional[int]]] = []
        for j in range(1, MAX_IDLE_SHIFT + 1):
            lo, hi = bounds[j - 1], min(bounds[j] - 1, U32_MAX)
            if lo <= hi and lo <= U32_MAX:
                ranges.append((lo, hi, j))
        if bounds[-1] <= U32_MAX:
            ranges.append((bounds[-1], U32_MAX, None))
        return ranges


def ared_weight(rate_pps: float) -> float:
    """Adaptive RED's w_q = 1 - exp(-1 / C): a time constant of one second at C packets/s."""
    return -math.expm1(-1.0 / rate_pps)


def weight_log2(weight: float) -> int:
    """The K of the power of two 2^-K nearest to ``weight`` in log2 (within a factor 2^0.5),
    in the switch's 0..16."""
    if not 0 < weight <= 1:
        raise ConfigError(f"RED's weight must be in (0, 1], got {weight:g}")
    return min(MAX_WEIGHT_LOG2, max(0, round(-math.log2(weight))))


PASS, SIGNAL, FORCED = "pass", "signal", "forced"


@dataclass
class RedModel:
    """The switch's RED at one port, packet by packet (a reference model for tests):
    ``decide(q, idle_us)`` takes the queue a packet found (packets) and, when it found
    the queue empty, how long it had been empty; it returns PASS, SIGNAL (mark an
    ECN-capable packet, drop any other) or FORCED (drop)."""

    params: RedParams
    rng: random.Random = field(default_factory=lambda: random.Random(1))
    avg: int = 0                        # packets << RED_FRAC_BITS
    since_mark: int = 0
    next_mark: int = 0
    _table: dict[int, int] = field(default_factory=dict, repr=False)
    _idle: list[tuple[int, int, Optional[int]]] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        self._table = self.params.probability_table()
        self._idle = self.params.idle_ranges()

    def _idle_shift(self, idle_us: int) -> Optional[int]:
        for lo, hi, j in self._idle:
            if lo <= idle_us <= hi:
                return 64 if j is None else j
        return None

    def decide(self, queue_packets: int, idle_us: Optional[int] = None) -> str:
        p = self.params
        if queue_packets == 0 and idle_us is not None:
            shift = self._idle_shift(idle_us)
            if shift is not None:
                self.avg >>= shift
        sample = queue_packets << RED_FRAC_BITS
        k = p.weight_log2
        self.avg = self.avg + ((sample - self.avg) >> k) if sample >= self.avg \
            else self.avg - ((self.avg - sample) >> k)
        level = self.avg >> RED_LEVEL_SHIFT
        if level < p.min_level:
            self.since_mark = 0
            return PASS
        if level >= p.top_level:
            self.since_mark = 0
            return FORCED
        self.since_mark += self._table.get(level, 0)
        if self.since_mark >= self.next_mark + PROB_ONE:
            self.since_mark = 0
            self.next_mark = self.rng.randrange(PROB_ONE)
            return SIGNAL
        return PASS

    @property
    def avg_packets(self) -> float:
        return self.avg / (1 << RED_FRAC_BITS)
