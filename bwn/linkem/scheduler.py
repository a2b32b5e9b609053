"""Impairment and timing logic of one direction, without any socket.

A :class:`DirectionScheduler` is fed frames with their arrival time
(:meth:`DirectionScheduler.admit`) and hands them back, at their release time,
to a ``send`` callable (:meth:`DirectionScheduler.release_due`).  Times are
integer nanoseconds of :func:`time.monotonic_ns`; the tests drive it with a
fake clock.

Design choices (speed in CPython):

* Frames that keep their order live in a :class:`collections.deque` of
  ``(release_ns, frame)`` tuples whose release times never decrease, so
  scheduling and releasing are O(1).  This covers constant delay, jitter
  (the release time is clamped to the previous frame's, which is exactly the
  "never released before the frame ahead of it" rule) and the rate limiter.
* Only frames that are allowed to overtake or be overtaken (held back by
  ``reorder``, or every frame when ``jitter_reorders``) go to a binary heap
  ``(release_ns, seq, frame)``; ``seq`` breaks ties without comparing bytes.
* With only a constant delay, :meth:`admit` is bound to a four-line fast path.
* Random numbers come from one :class:`random.Random` per direction and are
  drawn only for the impairments that are enabled, so a seed reproduces a run
  for a given arrival sequence.
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

from .config import Impairment

__all__ = ["Counters", "DirectionScheduler", "lateness_summary", "LATE_SHIFT", "LATE_BINS",
           "MIN_SCHEDULED_RATE_BPS"]

_NS_PER_S = 1_000_000_000

#: Lateness histogram: bins of 2**LATE_SHIFT ns (16.384 us), the last bin also
#: holds everything later than LATE_BINS - 1 bins (~4.2 ms); the maximum is
#: kept exactly. Issue 9's fidelity check reads p50/p99/max from it.
LATE_SHIFT = 14
LATE_BINS = 256
_LATE_SPAN_NS = (LATE_BINS - 1) << LATE_SHIFT   # lateness beyond this goes to the last bin

#: Floor of a scheduled rate (bit/s): the dataplane's own minimum, 1 kb/s. A frame
#: at a rate of 0 would never leave.
MIN_SCHEDULED_RATE_BPS = 1000


def lateness_summary(bins: List[int], max_ns: int) -> Dict[str, Any]:
    """p50/p99 and max of a lateness histogram, in microseconds.

    A quantile is the upper edge of the bin that holds it (never optimistic);
    one that falls in the last bin (later than the histogram's span) is reported
    as the span, a lower bound, with ``<name>_beyond_span`` set."""
    total = sum(bins)
    last = len(bins) - 1
    out: Dict[str, Any] = {"frames": total, "bin_us": (1 << LATE_SHIFT) / 1000,
                           "max_us": round(max_ns / 1000, 3)}
    for name, q in (("p50_us", 0.50), ("p99_us", 0.99)):
        out[name] = None
        if total == 0:
            continue
        rank = q * total
        seen = 0
        for i, n in enumerate(bins):
            seen += n
            if seen >= rank and n:
                if i < last:
                    out[name] = round(min((i + 1) << LATE_SHIFT, max_ns) / 1000, 3)
                else:
                    out[name] = round((last << LATE_SHIFT) / 1000, 3)
                    out[f"{name}_beyond_span"] = True
                break
    out["bins"] = [[i, n] for i, n in enumerate(bins) if n]   # [bin index, frames]
    return out


class Counters:
    """Per-direction counters.  Invariant once the direction is stopped::

        rx_frames + duplicated == forwarded_frames + dropped_loss + dropped_queue
                                   + dropped_limit + tx_errors + pending_at_exit
                                   + dropped_offload + dropped_oversize

    ``rx_frames`` counts frames as a wire would carry them: a GSO super-frame
    counts as the segments it was cut into (``gso_superframes`` of them made
    ``gso_segments``), a frame dropped before the scheduler as one.  The
    offload counters are kept by :class:`bwn.linkem.offload.IngressOffload`:
    ``csum_completed`` (checksums completed), ``dropped_offload`` (offload
    state that could not be completed), ``dropped_oversize`` (larger than the
    egress MTU).
    """

    __slots__ = (
        "rx_frames",
        "rx_bytes",
        "forwarded_frames",
        "forwarded_bytes",
        "dropped_loss",
        "dropped_queue",
        "dropped_limit",
        "duplicated",
        "reordered",
        "tx_errors",
        "pending_at_exit",
        "kernel_drops",
        "csum_completed",
        "gso_superframes",
        "gso_segments",
        "dropped_offload",
        "dropped_oversize",
    )

    def __init__(self) -> None:
        for name in self.__slots__:
            setattr(self, name, 0)

    def as_dict(self) -> Dict[str, int]:
        return {name: getattr(self, name) for name in self.__slots__}


class DirectionScheduler:
    """Decides, per frame, whether and when it leaves.  See :class:`Impairment`.

    ``admit(frame, now_ns)`` and ``release_due(now_ns, send)`` are the only
    methods on the packet path; ``next_due_ns()`` tells the I/O loop how long
    it may sleep.
    """

    def __init__(self, impairment: Impairment, seed: Optional[int] = None) -> None:
        impairment.validate()
        self.impairment = impairment
        self.rng = random.Random(seed)
        self._random = self.rng.random
        self.counters = Counters()
        self.fifo: Deque[Tuple[int, Any]] = deque()
        self.heap: List[Tuple[int, int, Any]] = []
        self._seq = 0
        self._last_fifo_ns = 0
        self._link_free_ns = 0
        self._backlog: Deque[int] = deque()  # serialization finish times, FIFO
        # How late frames leave versus their release time (see lateness_summary).
        self.late_bins: List[int] = [0] * LATE_BINS
        self.late_max_ns = 0
        self.delay_ns = impairment.delay_us * 1000
        self.jitter_ns = impairment.jitter_us * 1000
        self.loss = float(impairment.loss)
        self.duplicate = float(impairment.duplicate)
        self.reorder = float(impairment.reorder)
        self.hold_ns = impairment.effective_reorder_hold_us * 1000
        self.jitter_reorders = bool(impairment.jitter_reorders)
        self.rate_bps = impairment.rate_bps or 0
        # A rate that follows a schedule (Impairment.rate_schedule): evaluated at each
        # frame's serialization start, on the schedule's clock from its origin on.
        self.rate_schedule = impairment.rate_schedule
        self.schedule_origin_ns: Optional[int] = None
        self._serialized = bool(self.rate_bps) or self.rate_schedule is not None
        self.queue_packets = impairment.queue_packets or 0
        self.limit_packets = impairment.limit_packets
        if impairment.is_plain_delay:
            self.admit = self._admit_plain  # type: ignore[method-assign]
        else:
            self.admit = self._admit_general  # type: ignore[method-assign]

    # -- admission -------------------------------------------------------------

    def admit(self, frame: Any, now_ns: int) -> None:  # replaced per instance
        raise NotImplementedError

    def _admit_plain(self, frame: Any, now_ns: int) -> None:
        c = self.counters
        c.rx_frames += 1
        c.rx_bytes += len(frame)
        fifo = self.fifo
        if len(fifo) >= self.limit_packets:
            c.dropped_limit += 1
            return
        fifo.append((now_ns + self.delay_ns, frame))

    def _admit_general(self, frame: Any, now_ns: int) -> None:
        c = self.counters
        size = len(frame)
        c.rx_frames += 1
        c.rx_bytes += size
        rnd = self._random
        if self.loss and rnd() < self.loss:
            c.dropped_loss += 1
            return
        if self.duplicate and rnd() < self.duplicate:
            c.duplicated += 1
            self._enqueue(frame, size, now_ns)
        self._enqueue(frame, size, now_ns)

    def _enqueue(self, frame: Any, size: int, now_ns: int) -> None:
        c = self.counters
        if len(self.fifo) + len(self.heap) >= self.limit_packets:
            c.dropped_limit += 1
            return
        t = now_ns
        if self._serialized:
            backlog = self._backlog
            while backlog and backlog[0] <= now_ns:
                backlog.popleft()
            # backlog[0] (if any) is on the wire; the others wait in the queue.
            if len(backlog) > self.queue_packets:
                c.dropped_queue += 1
                return
            start = self._link_free_ns if self._link_free_ns > now_ns else now_ns
            rate_bps = self.rate_bps or self.scheduled_rate_bps(start)
            t = start + (size * 8 * _NS_PER_S) // rate_bps
            self._link_free_ns = t
            backlog.append(t)
        d = self.delay_ns
        if self.jitter_ns:
            d += int((2.0 * self._random() - 1.0) * self.jitter_ns)
            if d < 0:
                d = 0
        t += d
        if self.reorder and self._random() < self.reorder:
            c.reordered += 1
            self._seq += 1
            heapq.heappush(self.heap, (t + self.hold_ns, self._seq, frame))
            return
        if self.jitter_reorders:
            self._seq += 1
            heapq.heappush(self.heap, (t, self._seq, frame))
            return
        if t < self._last_fifo_ns:
            t = self._last_fifo_ns
        self._last_fifo_ns = t
        self.fifo.append((t, frame))

    def start_schedule(self, origin_ns: int) -> None:
        """Put the rate schedule's time 0 at ``origin_ns`` (frames whose
        serialization starts before it get the rate at time 0)."""
        self.schedule_origin_ns = origin_ns

    def scheduled_rate_bps(self, start_ns: int) -> int:
        """The schedule's rate for a frame that starts serializing at ``start_ns``,
        at least :data:`MIN_SCHEDULED_RATE_BPS` (a sine with alpha = 1 touches 0)."""
        assert self.rate_schedule is not None
        origin = self.schedule_origin_ns
        t_s = 0.0 if origin is None or start_ns <= origin else (start_ns - origin) / _NS_PER_S
        rate = int(self.rate_schedule.rate_bps(t_s))
        return rate if rate > MIN_SCHEDULED_RATE_BPS else MIN_SCHEDULED_RATE_BPS

    # -- release ---------------------------------------------------------------

    def next_due_ns(self) -> Optional[int]:
        """Release time of the earliest pending frame, or None if none."""
        fifo, heap = self.fifo, self.heap
        if fifo:
            if heap and heap[0][0] < fifo[0][0]:
                return heap[0][0]
            return fifo[0][0]
        if heap:
            return heap[0][0]
        return None

    def release_due(self, now_ns: int, send: Callable[[Any], Any]) -> int:
        """Call ``send(frame)`` for every frame due at ``now_ns``, in release order.

        ``OSError`` from ``send`` is counted in ``tx_errors`` (the frame is lost,
        as on a real link whose NIC queue is full); returns the number released.
        """
        fifo, heap = self.fifo, self.heap
        c = self.counters
        n = 0
        nbytes = 0
        errors = 0
        # Lateness: one shift and one increment per frame; frames later than the
        # histogram's span go to its last bin, and only they update late_max
        # (below the span the last non-empty bin bounds the maximum).
        bins = self.late_bins
        top = LATE_BINS - 1
        span = _LATE_SPAN_NS
        late_max = self.late_max_ns
        if not heap:  # fast path: in-order frames only
            while fifo and fifo[0][0] <= now_ns:
                due, frame = fifo.popleft()
                late = now_ns - due
                if late < span:
                    bins[late >> LATE_SHIFT] += 1
                else:
                    bins[top] += 1
                    if late > late_max:
                        late_max = late
                try:
                    send(frame)
                except OSError:
                    errors += 1
                    continue
                n += 1
                nbytes += len(frame)
        else:
            while True:
                if fifo and fifo[0][0] <= now_ns:
                    if heap and heap[0][0] < fifo[0][0]:
                        due, _, frame = heapq.heappop(heap)
                    else:
                        due, frame = fifo.popleft()
                elif heap and heap[0][0] <= now_ns:
                    due, _, frame = heapq.heappop(heap)
                else:
                    break
                late = now_ns - due
                if late < span:
                    bins[late >> LATE_SHIFT] += 1
                else:
                    bins[top] += 1
                    if late > late_max:
                        late_max = late
                try:
                    send(frame)
                except OSError:
                    errors += 1
                    continue
                n += 1
                nbytes += len(frame)
        self.late_max_ns = late_max
        if n:
            c.forwarded_frames += n
            c.forwarded_bytes += nbytes
        if errors:
            c.tx_errors += errors
        return n + errors

    def lateness(self) -> Dict[str, Any]:
        """How late released frames left versus their due time (p50/p99/max, us).
        Measured when the worker woke to release them, before the send call."""
        return lateness_summary(self.late_bins, self.late_max_bound_ns)

    @property
    def late_max_bound_ns(self) -> int:
        """The maximum lateness: exact beyond the histogram's span, else the upper
        edge of the last non-empty bin."""
        if self.late_max_ns:
            return self.late_max_ns
        last = max((i for i, n in enumerate(self.late_bins) if n), default=-1)
        return (last + 1) << LATE_SHIFT if last >= 0 else 0

    def pending(self) -> int:
        return len(self.fifo) + len(self.heap)

    def discard_pending(self) -> int:
        """Drop every frame still in the delay line (on stop); returns the count."""
        n = self.pending()
        self.fifo.clear()
        self.heap.clear()
        self.counters.pending_at_exit += n
        return n
