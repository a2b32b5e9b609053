"""Time-varying link rates: what capacity a link offers at time t.

A schedule maps the time since the experiment started (seconds) to a link rate
(bit/s). Four kinds:

* :class:`ConstantSchedule` -- one rate;
* :class:`StepSchedule` -- ``(t_s, rate_bps)`` steps, each rate holds until the next
  step (a rate applies *from* its step time on: ``rate_bps(t_step) = new rate``);
* :class:`SineSchedule` -- the EBN paper's ``F(t) = b * (1 + sin(w*t + phi) / alpha)``;
* :class:`TraceSchedule` -- a Mahimahi trace, averaged over a sliding window.

Every schedule offers :meth:`Schedule.rate_bps`, :meth:`Schedule.updates` (the points
at which a controller should apply a new rate) and :meth:`Schedule.mean_rate_bps`
(the capacity offered over an interval, for utilization).

BMv2 rates an egress queue in packets per second (``simple_switch_CLI
set_queue_rate``), not bits: :func:`bmv2_queue_rate_pps` converts.
"""
from __future__ import annotations

import bisect
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

DEFAULT_UPDATE_INTERVAL_S = 0.1
DEFAULT_UPDATE_THRESHOLD = 0.01     # relative: 1 %
DEFAULT_TRACE_WINDOW_MS = 100
MAHIMAHI_OPPORTUNITY_BYTES = 1500   # one delivery opportunity = one MTU-sized packet
DEFAULT_FRAME_BYTES = 1514          # 1500-byte IP packet + 14-byte Ethernet header (no FCS)
EBN_DEFAULT_ALPHA = 3.0
_MEAN_STEPS = 2000                  # samples of the numerical integral (midpoint rule)

RatePoint = tuple[float, float]     # (t_s, rate_bps)


class ScheduleError(ValueError):
    """A schedule that cannot be built; the message says what and where."""


def bmv2_queue_rate_pps(rate_bps: float, mean_frame_bytes: float = DEFAULT_FRAME_BYTES) -> float:
    """BMv2 queue rate (packets/s) that serves ``rate_bps`` of frames of ``mean_frame_bytes``.

    BMv2 (``set_queue_rate``) dequeues a fixed number of *packets* per second,
    whatever their size, so a rate in bit/s holds only for one frame size:
    ``pps = rate_bps / (8 * mean_frame_bytes)``. The frame size is what BMv2 calls
    ``packet_length`` (Ethernet header through payload, no FCS/preamble/IFG): 1514
    bytes for a bulk transfer over a 1500-byte MTU. Smaller frames (ACKs) on the same
    queue get fewer bits per second than ``rate_bps``. The result is a float; BMv2
    takes an integer of at least 1 (``controller.bmv2`` rounds).
    """
    if mean_frame_bytes <= 0:
        raise ScheduleError(f"mean frame size must be positive, got {mean_frame_bytes} bytes")
    if rate_bps < 0:
        raise ScheduleError(f"rate must not be negative, got {rate_bps} bit/s")
    return rate_bps / (8.0 * mean_frame_bytes)


class Schedule(ABC):
    """Link rate (bit/s) as a function of the time since the experiment started (s)."""

    @abstractmethod
    def rate_bps(self, t_s: float) -> float:
        """Rate in force at ``t_s``."""

    def updates(self, duration_s: float, interval_s: float = DEFAULT_UPDATE_INTERVAL_S,
                threshold: float = DEFAULT_UPDATE_THRESHOLD) -> list[RatePoint]:
        """Points ``(t_s, rate_bps)`` in ``[0, duration_s)`` at which to apply a new rate.

        This default samples every ``interval_s`` and keeps a sample only when it
        differs from the last applied rate by more than ``threshold`` (relative);
        the first point is always at ``t_s = 0``.
        """
        _check_update_args(duration_s, interval_s, threshold)
        points: list[RatePoint] = []
        n_samples = max(1, math.ceil(duration_s / interval_s - 1e-9))
        for i in range(n_samples):
            t_s = round(i * interval_s, 9)
            rate = self.rate_bps(t_s)
            if not points or _changed(points[-1][1], rate, threshold):
                points.append((t_s, rate))
        return points

    def mean_rate_bps(self, t0_s: float, t1_s: float) -> float:
        """Mean rate over ``[t0_s, t1_s]``: the integral of the rate / the length
        (midpoint rule on ``_MEAN_STEPS`` samples; exact for piecewise-constant kinds)."""
        if t1_s < t0_s:
            raise ScheduleError(f"mean_rate_bps: t1_s {t1_s} is before t0_s {t0_s}")
        if t1_s == t0_s:
            return self.rate_bps(t0_s)
        step_s = (t1_s - t0_s) / _MEAN_STEPS
        total = sum(self.rate_bps(t0_s + (i + 0.5) * step_s) for i in range(_MEAN_STEPS))
        return total / _MEAN_STEPS


def _check_update_args(duration_s: float, interval_s: float, threshold: float) -> None:
    if not duration_s > 0:
        raise ScheduleError(f"duration_s must be positive, got {duration_s}")
    if not interval_s > 0:
        raise ScheduleError(f"interval_s must be positive, got {interval_s}")
    if not threshold >= 0:
        raise ScheduleError(f"threshold must not be negative, got {threshold}")


def _changed(applied_bps: float, rate_bps: float, threshold: float) -> bool:
    if applied_bps == 0:
        return rate_bps != 0
    return abs(rate_bps - applied_bps) > threshold * abs(applied_bps)


def _check_rate(name: str, rate_bps: float) -> None:
    if isinstance(rate_bps, bool) or not isinstance(rate_bps, (int, float)) \
            or not math.isfinite(rate_bps) or rate_bps <= 0:
        raise ScheduleError(f"{name} must be a positive number of bit/s, got {rate_bps!r}")


@dataclass(frozen=True)
class ConstantSchedule(Schedule):
    rate: float   # bit/s

    def __post_init__(self) -> None:
        _check_rate("rate", self.rate)

    def rate_bps(self, t_s: float) -> float:
        return float(self.rate)

    def updates(self, duration_s: float, interval_s: float = DEFAULT_UPDATE_INTERVAL_S,
                threshold: float = DEFAULT_UPDATE_THRESHOLD) -> list[RatePoint]:
        _check_update_args(duration_s, interval_s, threshold)
        return [(0.0, float(self.rate))]

    def mean_rate_bps(self, t0_s: float, t1_s: float) -> float:
        if t1_s < t0_s:
            raise ScheduleError(f"mean_rate_bps: t1_s {t1_s} is before t0_s {t0_s}")
        return float(self.rate)


@dataclass(frozen=True)
class StepSchedule(Schedule):
    """Piecewise-constant rate: ``steps[i] = (t_s, rate_bps)``; the first step is at
    t = 0, times strictly increase, each rate holds until the next step."""

    steps: tuple[RatePoint, ...]

    def __init__(self, steps: Sequence[Sequence[float]]) -> None:
        points = tuple((float(t), float(r)) for t, r in steps)
        if not points:
            raise ScheduleError("steps: at least one step is needed")
        if points[0][0] != 0.0:
            raise ScheduleError(f"steps[0]: the first step must be at t_s = 0, got {points[0][0]}")
        for i, (t_s, rate) in enumerate(points):
            _check_rate(f"steps[{i}] rate", rate)
            if i and t_s <= points[i - 1][0]:
                raise ScheduleError(f"steps[{i}]: t_s {t_s} is not after the previous step's "
                                    f"{points[i - 1][0]}")
        object.__setattr__(self, "steps", points)

    def _times(self) -> list[float]:
        return [t for t, _ in self.steps]

    def rate_bps(self, t_s: float) -> float:
        index = bisect.bisect_right(self._times(), t_s) - 1
        return self.steps[max(index, 0)][1]

    def updates(self, duration_s: float, interval_s: float = DEFAULT_UPDATE_INTERVAL_S,
                threshold: float = DEFAULT_UPDATE_THRESHOLD) -> list[RatePoint]:
        _check_update_args(duration_s, interval_s, threshold)
        return [(t, r) for t, r in self.steps if t < duration_s]

    def mean_rate_bps(self, t0_s: float, t1_s: float) -> float:
        if t1_s < t0_s:
            raise ScheduleError(f"mean_rate_bps: t1_s {t1_s} is before t0_s {t0_s}")
        if t1_s == t0_s:
            return self.rate_bps(t0_s)
        bounds = self._times()[1:] + [math.inf]
        integral = 0.0
        for (start_s, rate), end_s in zip(self.steps, bounds):
            overlap_s = min(end_s, t1_s) - max(start_s, t0_s)
            if overlap_s > 0:
                integral += rate * overlap_s
        if t0_s < 0:   # before the first step the first rate holds
            integral += self.steps[0][1] * (min(0.0, t1_s) - t0_s)
        return integral / (t1_s - t0_s)


@dataclass(frozen=True)
class SineSchedule(Schedule):
    """EBN (Dutta & Zhang): ``F(t) = b * (1 + sin(w*t + phi) / alpha)``.

    ``b_bps`` is the mean rate, ``alpha >= 1`` the amplitude ratio (the rate swings
    between ``b * (1 - 1/alpha)`` and ``b * (1 + 1/alpha)``; the paper uses 3),
    ``w_rad_s`` the angular frequency (0.01 to 1 in the paper), ``phi_rad`` the phase.
    With ``alpha = 1`` the rate touches 0; a controller must not apply a zero rate
    (``ebn_share`` of 0 is meaningless), so clamp to a floor before applying.
    """

    b_bps: float
    alpha: float = EBN_DEFAULT_ALPHA
    w_rad_s: float = 1.0
    phi_rad: float = 0.0

    def __post_init__(self) -> None:
        _check_rate("b", self.b_bps)
        if not (isinstance(self.alpha, (int, float)) and self.alpha >= 1):
            raise ScheduleError(f"alpha must be >= 1 (the amplitude is b/alpha), got {self.alpha!r}")
        if not (isinstance(self.w_rad_s, (int, float)) and math.isfinite(self.w_rad_s)
                and self.w_rad_s >= 0):
            raise ScheduleError(f"w must be a non-negative number of rad/s, got {self.w_rad_s!r}")
        if not (isinstance(self.phi_rad, (int, float)) and math.isfinite(self.phi_rad)):
            raise ScheduleError(f"phi must be a finite number of radians, got {self.phi_rad!r}")

    def rate_bps(self, t_s: float) -> float:
        return self.b_bps * (1.0 + math.sin(self.w_rad_s * t_s + self.phi_rad) / self.alpha)

    def mean_rate_bps(self, t0_s: float, t1_s: float) -> float:
        if t1_s < t0_s:
            raise ScheduleError(f"mean_rate_bps: t1_s {t1_s} is before t0_s {t0_s}")
        if t1_s == t0_s or self.w_rad_s == 0:
            return self.rate_bps(t0_s)
        # Closed form of the integral: b * [t - cos(w t + phi) / (alpha w)] from t0 to t1.
        w, phi = self.w_rad_s, self.phi_rad
        cos_term = (math.cos(w * t1_s + phi) - math.cos(w * t0_s + phi)) / (self.alpha * w)
        return self.b_bps * ((t1_s - t0_s) - cos_term) / (t1_s - t0_s)


@dataclass(frozen=True)
class TraceSchedule(Schedule):
    """A Mahimahi trace: delivery opportunities of 1500 bytes at millisecond times.

    The trace repeats after its last timestamp ``P`` (as mahimahi's link does:
    opportunities at ``k*P + ts`` for every line ``ts`` and every whole ``k``; a
    line at ``P`` and a line at 0 of the next loop are two opportunities at the same
    time). ``rate_bps(t)`` counts the bytes of the opportunities in the window
    ``(t - window, t]`` and divides by the window; the loop is extended to negative
    times so that the rate at t = 0 is already the steady one. A trace of the one
    line ``1`` is 1 opportunity/ms = 12 Mb/s.
    """

    timestamps_ms: tuple[int, ...]     # the lines, in file order (non-decreasing)
    window_ms: int = DEFAULT_TRACE_WINDOW_MS
    source: str = "<trace>"
    _phase_us: tuple[int, ...] = field(init=False, repr=False, compare=False, default=())

    def __post_init__(self) -> None:
        if not self.timestamps_ms:
            raise ScheduleError(f"{self.source}: trace holds no delivery opportunity")
        if self.timestamps_ms[-1] <= 0:
            raise ScheduleError(f"{self.source}: the last timestamp must be positive "
                                f"(the trace's period), got {self.timestamps_ms[-1]}")
        if isinstance(self.window_ms, bool) or not isinstance(self.window_ms, int) \
                or self.window_ms <= 0:
            raise ScheduleError(f"{self.source}: averaging window must be a positive number "
                                f"of milliseconds, got {self.window_ms!r}")
        period_ms = self.timestamps_ms[-1]
        object.__setattr__(self, "_phase_us",
                           tuple(sorted((ts % period_ms) * 1000 for ts in self.timestamps_ms)))

    @property
    def period_ms(self) -> int:
        return self.timestamps_ms[-1]

    @property
    def mean_bps(self) -> float:
        """Mean rate over one loop of the trace."""
        return len(self.timestamps_ms) * MAHIMAHI_OPPORTUNITY_BYTES * 8 / (self.period_ms / 1000)

    @classmethod
    def from_file(cls, path: str | Path, window_ms: int = DEFAULT_TRACE_WINDOW_MS) -> "TraceSchedule":
        path = Path(path)
        try:
            text = path.read_text()
        except OSError as exc:
            raise ScheduleError(f"{path}: cannot read the trace: {exc.strerror or exc}") from None
        return cls(parse_trace(text, path.name), window_ms, path.name)

    def _opportunities_upto(self, t_us: int) -> int:
        """Opportunities at times <= t_us, counted from an arbitrary fixed origin."""
        period_us = self.period_ms * 1000
        loops, phase_us = divmod(t_us, period_us)
        return loops * len(self._phase_us) + bisect.bisect_right(self._phase_us, phase_us)

    def rate_bps(self, t_s: float) -> float:
        t_us = round(t_s * 1e6)
        window_us = self.window_ms * 1000
        count = self._opportunities_upto(t_us) - self._opportunities_upto(t_us - window_us)
        return count * MAHIMAHI_OPPORTUNITY_BYTES * 8 / (self.window_ms / 1000)


def parse_trace(text: str, source: str = "<trace>") -> tuple[int, ...]:
    """Mahimahi trace lines -> millisecond timestamps; errors name ``source:line``.

    One non-negative integer per line, non-decreasing; blank lines are skipped.
    """
    stamps: list[int] = []
    last_line_no = 0
    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if not line.isdigit():
            raise ScheduleError(f"{source}:{line_no}: expected a non-negative integer "
                                f"millisecond timestamp, got {line!r}")
        value = int(line)
        if stamps and value < stamps[-1]:
            raise ScheduleError(f"{source}:{line_no}: timestamp {value} is smaller than "
                                f"the previous {stamps[-1]}")
        stamps.append(value)
        last_line_no = line_no
    if not stamps:
        raise ScheduleError(f"{source}: trace holds no delivery opportunity")
    if stamps[-1] == 0:
        raise ScheduleError(f"{source}:{last_line_no}: the last timestamp must be "
                            f"positive (it is the trace's period), got 0")
    return tuple(stamps)


def table_of(schedule: Schedule) -> dict[str, object]:
    """``schedule`` as a scenario's ``[links.schedule]`` table (rates in Mb/s), the
    form ``bwn-link --rate-schedule`` takes as JSON (``controller.config.
    schedule_from_json`` reads it back). Constant, steps and sine only: a trace
    names a file and is refused (:class:`ScheduleError`)."""
    def mbit(rate_bps: float) -> float:   # 12 significant digits: 0.1102, not 0.11020000000000001
        return float(f"{rate_bps / 1e6:.12g}")

    if isinstance(schedule, ConstantSchedule):
        return {"kind": "constant", "rate_mbit": mbit(schedule.rate)}
    if isinstance(schedule, StepSchedule):
        return {"kind": "steps", "steps": [{"t_s": t_s, "rate_mbit": mbit(rate)}
                                           for t_s, rate in schedule.steps]}
    if isinstance(schedule, SineSchedule):
        return {"kind": "sine", "b_mbit": mbit(schedule.b_bps), "alpha": schedule.alpha,
                "w_rad_s": schedule.w_rad_s, "phi_rad": schedule.phi_rad}
    raise ScheduleError(f"a {type(schedule).__name__} has no table bwn-link can take "
                        f"(constant, steps or sine)")
