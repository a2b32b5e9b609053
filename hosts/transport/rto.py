"""Retransmission timeout estimator, RFC 6298.

* sec. 2.1: before the first sample RTO = ``initial_rto_us`` (1 s);
* sec. 2.2: first sample R: SRTT = R, RTTVAR = R/2;
* sec. 2.3: later samples: RTTVAR = 3/4 RTTVAR + 1/4 |SRTT - R|, SRTT = 7/8 SRTT + 1/8 R;
  RTO = SRTT + max(G, 4 * RTTVAR);
* sec. 2.4: RTO is rounded up to ``min_rto_us``. The RFC says 1 s ("SHOULD"); we
  default to 200 ms, the value Linux (TCP_RTO_MIN) and ns-2 (``minrto_ = 0.2``, the
  simulator of the papers this project reproduces) use. With 1 s a single loss
  that fast retransmit cannot repair (e.g. the last segments of a window) stalls a
  10-50 ms RTT flow for 20-100 RTTs, which would dominate the goodput comparisons.
  The risk the RFC guards against, spurious timeouts, is low here because every
  RTT sample is exact (echoed timestamps) and the delayed-ACK timer (40 ms) is
  well below 200 ms;
* sec. 2.5: RTO is capped at ``max_rto_us`` (60 s);
* sec. 5.5 / 5.7 and Karn's algorithm (sec. 3): on expiry the RTO doubles; the
  backed-off value stays until a sample from a segment that was not retransmitted
  arrives (the caller passes only such samples).

Samples are taken on every ACK that echoes an original transmission (RFC 7323
sec. 4 allows more than one sample per RTT; Linux does the same).
"""
from __future__ import annotations

from typing import Optional

DEFAULT_INITIAL_RTO_US = 1_000_000
DEFAULT_MIN_RTO_US = 200_000
DEFAULT_MAX_RTO_US = 60_000_000
CLOCK_GRANULARITY_US = 1_000  # G: our event loop's timers are only ~1 ms exact

ALPHA = 1.0 / 8.0
BETA = 1.0 / 4.0
K = 4.0


class RtoEstimator:
    """SRTT, RTTVAR and the (backed-off) RTO of one connection (RFC 6298)."""

    def __init__(
        self,
        *,
        initial_rto_us: int = DEFAULT_INITIAL_RTO_US,
        min_rto_us: int = DEFAULT_MIN_RTO_US,
        max_rto_us: int = DEFAULT_MAX_RTO_US,
        granularity_us: int = CLOCK_GRANULARITY_US,
    ) -> None:
        if min_rto_us <= 0 or max_rto_us < min_rto_us:
            raise ValueError("need 0 < min_rto_us <= max_rto_us")
        self.min_rto_us = min_rto_us
        self.max_rto_us = max_rto_us
        self.granularity_us = granularity_us
        self.srtt_us: Optional[float] = None
        self.rttvar_us: Optional[float] = None
        self._base_rto_us = float(max(min(initial_rto_us, max_rto_us), 1))
        self.backoff = 0  # number of doublings since the last valid sample

    def on_sample(self, rtt_us: int) -> None:
        """One RTT measurement from a segment that was not retransmitted (Karn)."""
        r = float(max(rtt_us, 0))
        if self.srtt_us is None or self.rttvar_us is None:
            self.srtt_us = r
            self.rttvar_us = r / 2.0
        else:
            self.rttvar_us = (1.0 - BETA) * self.rttvar_us + BETA * abs(self.srtt_us - r)
            self.srtt_us = (1.0 - ALPHA) * self.srtt_us + ALPHA * r
        rto = self.srtt_us + max(self.granularity_us, K * self.rttvar_us)
        self._base_rto_us = min(max(rto, self.min_rto_us), self.max_rto_us)
        self.backoff = 0

    def on_timeout(self) -> None:
        """RFC 6298 sec. 5.5: back the timer off (RTO = RTO * 2, capped)."""
        if self.rto_us < self.max_rto_us:
            self.backoff += 1

    @property
    def rto_us(self) -> int:
        return int(min(self._base_rto_us * (1 << self.backoff), self.max_rto_us))
