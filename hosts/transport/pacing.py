"""Pacing of the sender's data segments: next-send-time pacing with a burst allowance.

When the congestion-control algorithm sets ``CcState.pacing_rate_bps``, data
segments leave at most at that rate. Each segment moves the next send time on
by its time on the wire at the rate, counted in Ethernet frame bytes (payload +
``frame_overhead_bytes``) like the switches' meters and rates. The event loop's
timers fire late on a loaded machine; the next send time may lag ``now`` by
``burst_us`` at most, so that lateness is caught up with a short burst instead
of lost for good (docs/transport.md, "Pacing"). Every segment with a payload
moves the next send time; the FIN and the fast retransmission leave without
waiting for it. Without a rate nothing waits.
"""
from __future__ import annotations

from typing import Optional


class Pacer:
    """The next send time of one flow's paced segments."""

    __slots__ = ("burst_us", "frame_overhead_bytes", "next_us", "waiting")

    def __init__(self, burst_us: int, frame_overhead_bytes: int) -> None:
        self.burst_us = burst_us
        self.frame_overhead_bytes = frame_overhead_bytes
        self.next_us = 0          # no segment leaves before this (with a rate)
        self.waiting = False      # the sender stopped for it: wake it at next_us

    def holds(self, now_us: int, rate_bps: Optional[float]) -> bool:
        """Whether a segment must wait (then :attr:`waiting` is set)."""
        if rate_bps and now_us < self.next_us:
            self.waiting = True
            return True
        return False

    def on_sent(self, now_us: int, payload_bytes: int, rate_bps: Optional[float]) -> None:
        """A segment of ``payload_bytes`` left at ``now_us``."""
        if rate_bps and payload_bytes:
            self.next_us = (max(self.next_us, now_us - self.burst_us)
                            + int((payload_bytes + self.frame_overhead_bytes) * 8e6 / rate_bps))

    def restart(self, now_us: int) -> None:
        """Send at once from ``now_us`` on (the connection is up; a timeout fired)."""
        self.next_us = now_us
