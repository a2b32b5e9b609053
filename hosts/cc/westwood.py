"""TCP Westwood (original, per-ACK samples) and Westwood+ (one sample per RTT).

Sources:

* S. Mascolo, C. Casetti, M. Gerla, S.S. Lee, M. Sanadidi, "TCP Westwood:
  congestion control with faster recovery", UCLA CS TR 200017, 2000 -- the
  pseudocode the DFT paper (Capone & Martignon, IWDC 2001, sec. 2) quotes
  (restated in docs/algorithms.md):

  - per ACK: ``sample[k] = acked * pkt_size / (now - lastacktime)``,
    ``BWE[k] = beta * BWE[k-1] + (1 - beta) * (sample[k] + sample[k-1]) / 2``
    (the Tustin discretisation of a first-order low-pass filter),
    ``beta = 19/21``, ``lastacktime = now``;
  - after 3 duplicate ACKs ``ssthresh = BWE * RTTmin / seg_size``,
    ``if cwnd > ssthresh: cwnd = ssthresh``;
  - after a timeout ``ssthresh = BWE * RTTmin / seg_size``, ``cwnd = 1``.

* Westwood+ (L. Grieco, S. Mascolo, "Performance evaluation and comparison of
  Westwood+, New Reno and Vegas TCP congestion control", CCR 34(2), 2004) as in
  Linux ``net/ipv4/tcp_westwood.c``: the acked bytes are summed over a window of
  ``max(RTT, 50 ms)``, one sample ``bk / delta`` per window, and two cascaded
  7/8 EWMA filters: ``bw_ns = 7/8 bw_ns + 1/8 sample``, ``bw = 7/8 bw + 1/8 bw_ns``.

``variant="westwood"`` (the default) is the one the EBN and DFT papers compared
with (the DFT paper's Fig. 2 and its bias discussion concern the per-ACK filter);
``variant="westwood+"`` is Linux's.

Decisions where the sources are silent or ambiguous (also in docs/algorithms.md):

* **acked** (both variants): a duplicate ACK counts as one MSS delivered, and the
  cumulative ACK that follows is reduced by what the duplicates already counted
  (the TR's accounting, Linux ``westwood_acked_count()``; see
  :class:`~hosts.cc.filters.AckedCounter`). Samples are taken in
  :meth:`on_feedback`, which the transport calls for *every* ACK (new, duplicate,
  partial, full).
* **ACKs for nothing** (the SYN-ACK, stale ACKs: no new byte and not a duplicate)
  are ignored. **First ACK** of data: it only starts the clock (``lastacktime``); its bytes are not a
  sample. **First sample**: initialises ``BWE`` and ``sample[k-1]`` (Linux does the
  same for Westwood+), so the estimate does not have to climb from zero.
* **Zero inter-ACK time** (two ACKs read in the same µs on a real host, never in
  NS-2): no sample; the bytes are carried into the next sample, so a burst of ACKs
  is treated as one ACK for all their bytes.
* **RTTmin** is the minimum RTT sample of the whole flow (Linux's Westwood+
  resets it after a loss; we do not).
* **Fast recovery and timeout** rules: :class:`~hosts.cc.filters.EstimateRecoveryMixin`
  -- ``cwnd = min(cwnd, ssthresh)`` at the 3rd duplicate ACK, plus the NewReno
  inflation by the 3 duplicate ACKs and one segment per further duplicate ACK;
  at the full ACK ``cwnd = min(that window, FlightSize + 1)``; before any estimate
  exists the NewReno halving. Slow start and congestion avoidance are NewReno's.
"""
from typing import Literal, Optional

from .base import AckInfo, CcState, CongestionControl
from .filters import AckedCounter, EstimateRecoveryMixin, RttMin, US_PER_S

VARIANTS = ("westwood", "westwood+")


class Westwood(EstimateRecoveryMixin, CongestionControl):
    """TCP Westwood: ssthresh = BWE*RTTmin after loss (per-ACK Tustin filter; variant westwood+ = Linux)."""

    name = "westwood"

    def __init__(
        self,
        variant: Literal["westwood", "westwood+"] = "westwood",
        beta: float = 19.0 / 21.0,
        plus_window_min_us: int = 50_000,
    ) -> None:
        if variant not in VARIANTS:
            raise ValueError(f"westwood variant must be one of {VARIANTS}, got {variant!r}")
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"beta must be in [0, 1), got {beta}")
        if plus_window_min_us < 0:
            raise ValueError(f"plus_window_min_us must be >= 0 (the shortest of Westwood+'s sample "
                             f"windows, which are at least an RTT), got {plus_window_min_us}")
        self.variant = variant
        self.beta = float(beta)
        self.plus_window_min_us = int(plus_window_min_us)
        self.rtt_min = RttMin()
        self.counter = AckedCounter()
        self.bwe: Optional[float] = None
        self.prev_sample: Optional[float] = None
        self.last_sample: Optional[float] = None
        # original Westwood
        self.last_ack_time_us: Optional[int] = None
        self.carried_bytes = 0
        # Westwood+
        self.win_start_us: Optional[int] = None
        self.win_bytes = 0
        self.last_rtt_us: Optional[int] = None
        self.bw_ns: Optional[float] = None

    def on_init(self, st: CcState) -> None:
        super().on_init(st)
        st.estimate_bps = None

    def on_feedback(self, st: CcState, ack: AckInfo) -> None:
        self.rtt_min.update(ack.rtt_sample_us)
        if ack.rtt_sample_us:
            self.last_rtt_us = ack.rtt_sample_us
        acked = self.counter.count(ack, st.mss_bytes)
        if acked > 0:
            if self.variant == "westwood":
                self._per_ack(ack.now_us, acked)
            else:
                self._per_rtt(ack.now_us, acked)
        st.estimate_bps = self.bwe
        st.extra["bw_sample_bps"] = self.last_sample
        rtt_min = self.rtt_min.get(st)
        st.extra["rtt_min_us"] = rtt_min

    def _per_ack(self, now_us: int, acked: int) -> None:
        if self.last_ack_time_us is None:
            self.last_ack_time_us = now_us
            return
        self.carried_bytes += acked
        dt = now_us - self.last_ack_time_us
        if dt <= 0:
            return
        sample = self.carried_bytes * 8.0 * US_PER_S / dt
        self.carried_bytes = 0
        self.last_ack_time_us = now_us
        if self.bwe is None or self.prev_sample is None:
            self.bwe = sample
        else:
            self.bwe = self.beta * self.bwe + (1.0 - self.beta) * (sample + self.prev_sample) / 2.0
        self.prev_sample = sample
        self.last_sample = sample

    def _per_rtt(self, now_us: int, acked: int) -> None:
        if self.win_start_us is None:
            self.win_start_us = now_us
            return
        self.win_bytes += acked
        delta = now_us - self.win_start_us
        if self.last_rtt_us and delta > max(self.last_rtt_us, self.plus_window_min_us):
            sample = self.win_bytes * 8.0 * US_PER_S / delta
            if self.bw_ns is None or self.bwe is None:
                self.bw_ns = sample
                self.bwe = sample
            else:
                self.bw_ns = (7.0 * self.bw_ns + sample) / 8.0
                self.bwe = (7.0 * self.bwe + self.bw_ns) / 8.0
            self.last_sample = sample
            self.win_bytes = 0
            self.win_start_us = now_us
