"""Impairment parameters of one direction of an emulated link.

All times are integers with their unit in the name (``delay_us``) so that no
float rounding happens on the packet path: the scheduler converts them once to
nanoseconds, the unit of :func:`time.monotonic_ns`.  Probabilities are plain
fractions in ``[0, 1]`` (``0.01`` means 1 %, not 1 ``%``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Dict, Optional

from bwn.scenario.schedule import Schedule, ScheduleError, table_of

__all__ = ["Impairment", "LinkConfig", "DIRECTIONS"]

#: The two directions of a link, in the order used everywhere (stats, threads).
DIRECTIONS = ("a_to_b", "b_to_a")

#: A held-back ("reordered") frame waits at least this long beyond its normal
#: release time when neither ``reorder_hold_us`` nor a delay is given.
MIN_REORDER_HOLD_US = 1000


def _check_probability(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number, got {value!r}")
    if math.isnan(value) or value < 0.0 or value > 1.0:
        raise ValueError(f"{name} must be a fraction in [0, 1], got {value!r}")


def _check_nonneg_int(name: str, value: Optional[int]) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < 0:
        raise ValueError(f"{name} must not be negative, got {value}")


@dataclass(frozen=True)
class Impairment:
    """What happens to frames travelling in one direction.

    The order of operations for a frame that arrives at time ``t`` is
    (documented in docs/linkem.md, "Model"):

    1. **loss**: dropped with probability ``loss``;
    2. **duplicate**: with probability ``duplicate`` a second copy follows the
       frame (the copy goes through the rate limiter and delay like a frame of
       its own, so it can be dropped by a full queue);
    3. **rate limit** (if ``rate_bps``): the frame joins a FIFO that serializes
       ``len(frame) * 8 / rate_bps`` seconds per frame; if ``queue_packets``
       frames are already waiting behind the one being serialized it is
       dropped (drop-tail).  With ``rate_schedule`` instead, the rate is the
       schedule's at the moment the frame starts serializing (as NS-2 reads a
       link's bandwidth when a packet starts); the schedule's time 0 is set
       while running (:meth:`bwn.linkem.LinkEmulator.start_schedule`), and
       before it the rate at time 0 holds;
    4. **delay**: ``delay_us`` plus, if ``jitter_us``, a uniform random value in
       ``[-jitter_us, +jitter_us]`` (never below zero).  Unless
       ``jitter_reorders`` is set, a frame is never released before the frame
       ahead of it, so jitter alone does not reorder;
    5. **reorder**: with probability ``reorder`` the frame is held back for an
       extra ``reorder_hold_us`` (default ``max(delay_us, 1 ms)``), so frames
       that arrive during that time overtake it.  Frames behind it are *not*
       held back with it.

    ``limit_packets`` bounds the frames in flight in the delay line (like
    netem's ``limit``); beyond it frames are dropped and counted separately
    (``dropped_limit``).  It is a memory safety valve, not a queue model.
    """

    delay_us: int = 0
    jitter_us: int = 0
    loss: float = 0.0
    duplicate: float = 0.0
    reorder: float = 0.0
    reorder_hold_us: Optional[int] = None
    jitter_reorders: bool = False
    rate_bps: Optional[int] = None
    queue_packets: Optional[int] = None
    limit_packets: int = 100_000
    rate_schedule: Optional[Schedule] = None

    def validate(self) -> "Impairment":
        """Raise :class:`ValueError` with a one-line message if inconsistent."""
        _check_nonneg_int("delay_us", self.delay_us)
        _check_nonneg_int("jitter_us", self.jitter_us)
        _check_nonneg_int("reorder_hold_us", self.reorder_hold_us)
        _check_nonneg_int("queue_packets", self.queue_packets)
        _check_nonneg_int("limit_packets", self.limit_packets)
        if self.limit_packets < 1:
            raise ValueError("limit_packets must be at least 1")
        for name in ("loss", "duplicate", "reorder"):
            _check_probability(name, getattr(self, name))
        if self.rate_schedule is not None:
            if self.rate_bps is not None:
                raise ValueError("give either a rate (rate_bps) or a rate schedule "
                                 "(rate_schedule), not both")
            if not isinstance(self.rate_schedule, Schedule):
                raise ValueError(f"rate_schedule must be a Schedule, got {self.rate_schedule!r}")
            try:
                table_of(self.rate_schedule)
            except ScheduleError as exc:
                raise ValueError(f"rate_schedule: {exc}") from None
            if self.queue_packets is None:
                raise ValueError("a rate schedule needs a queue size (queue_packets)")
            if self.queue_packets < 1:
                raise ValueError("queue_packets must be at least 1")
        elif self.rate_bps is not None:
            if isinstance(self.rate_bps, bool) or not isinstance(self.rate_bps, int):
                raise ValueError(f"rate_bps must be an integer, got {self.rate_bps!r}")
            if self.rate_bps <= 0:
                raise ValueError(f"rate_bps must be positive, got {self.rate_bps}")
            if self.queue_packets is None:
                raise ValueError("a rate limit needs a queue size (queue_packets)")
            if self.queue_packets < 1:
                raise ValueError("queue_packets must be at least 1")
        elif self.queue_packets is not None:
            raise ValueError("queue_packets only makes sense with a rate limit (rate_bps "
                             "or rate_schedule)")
        if self.reorder_hold_us is not None and self.reorder_hold_us == 0 and self.reorder > 0:
            raise ValueError("reorder_hold_us must be positive when reorder > 0")
        return self

    @property
    def effective_reorder_hold_us(self) -> int:
        """Extra hold of a reordered frame: explicit value, else max(delay, 1 ms)."""
        if self.reorder_hold_us is not None:
            return self.reorder_hold_us
        return max(self.delay_us, MIN_REORDER_HOLD_US)

    @property
    def is_plain_delay(self) -> bool:
        """True if only a constant delay applies (the fast path: one deque)."""
        return (
            self.jitter_us == 0
            and self.loss == 0.0
            and self.duplicate == 0.0
            and self.reorder == 0.0
            and self.rate_bps is None
            and self.rate_schedule is None
        )

    def to_dict(self) -> Dict[str, Any]:
        """The fields, JSON-ready: a rate schedule as its [links.schedule] table."""
        out = asdict(self)
        out["rate_schedule"] = None if self.rate_schedule is None else table_of(self.rate_schedule)
        return out

    def replace(self, **changes: Any) -> "Impairment":
        return replace(self, **changes)


@dataclass(frozen=True)
class LinkConfig:
    """Both directions of a link plus the random seed.

    ``seed`` makes a run reproducible for a given arrival sequence: direction
    ``a_to_b`` uses ``Random(2 * seed)``, ``b_to_a`` uses ``Random(2 * seed + 1)``
    so the two directions draw independent streams.
    """

    a_to_b: Impairment = field(default_factory=Impairment)
    b_to_a: Impairment = field(default_factory=Impairment)
    seed: Optional[int] = None

    @classmethod
    def symmetric(cls, impairment: Impairment, seed: Optional[int] = None) -> "LinkConfig":
        return cls(a_to_b=impairment, b_to_a=impairment, seed=seed)

    def validate(self) -> "LinkConfig":
        for name in DIRECTIONS:
            try:
                getattr(self, name).validate()
            except ValueError as exc:
                if self.a_to_b == self.b_to_a:
                    raise
                raise ValueError(f"{name.replace('_', '-')}: {exc}") from None
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)):
            raise ValueError(f"seed must be an integer, got {self.seed!r}")
        return self

    def direction(self, name: str) -> Impairment:
        if name not in DIRECTIONS:
            raise KeyError(name)
        return getattr(self, name)

    def direction_seed(self, name: str) -> Optional[int]:
        if self.seed is None:
            return None
        return 2 * self.seed + DIRECTIONS.index(name)
