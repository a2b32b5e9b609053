"""SARBE, Stable Accurate Rapid Bandwidth Estimate.

Source: Le Tuan Anh, Choong Seon Hong, "Stable Accurate Rapid Bandwidth Estimate
for Improving TCP over Wireless Networks" (sec. 3); where the text is silent,
the choices are documented in docs/algorithms.md.

Implemented:

* eq. (1) ``Bw_k = L_k / (ts_k - ts_{k-1})`` where ``ts_k`` is the *receiver's*
  timestamp of when it sent the k-th ACK (``AckInfo.ack_send_time_us``), so that
  queueing of ACKs on the return path (ACK compression) does not shorten the
  intervals.
* the stability-based filter (SANE, Kim & Noble), eqs. (2)-(5):
  ``U_k = beta*U_{k-1} + (1-beta)*|Bw_k - Bw_{k-1}|``;
  ``U_max = max(U_{k-N}, ..., U_k)``; ``alpha = U_k / U_max``;
  ``eBw_k = alpha*eBw_{k-1} + (1-alpha)*Bw_k``; ``beta = 0.8``, ``N = 8``.
* eq. (6) ``oCwnd = eBw * RTTmin / seg_size``.
* sec. 3.2: on duplicate ACKs (the 3rd, fast retransmit) ``ssthresh = oCwnd`` and
  ``cwnd = ssthresh`` if ``cwnd >= ssthresh`` (congestion avoidance), else cwnd is
  kept (slow start); on a timeout ``ssthresh = oCwnd``, ``cwnd = 1``. Those are the
  rules of :class:`~hosts.cc.filters.EstimateRecoveryMixin` (with the NewReno
  window inflation during recovery, as for Westwood, whose NS-2 module SARBE was
  built on). Everything else is NewReno.

Decisions:

* **U_max = 0** (all recent samples identical): alpha is undefined; the estimate
  stays where it is (alpha = 1): the project's reading, docs/algorithms.md.
* **Window of eq. (3)**: literally ``U_{k-N} .. U_k``, i.e. the current value and
  the N = 8 before it (9 values); fewer at the start.
* **Start**: the first ACK only records ``ts``; the first sample ``Bw_1``
  initialises ``eBw = Bw_1`` and ``U_1 = 0`` (there is no ``Bw_0`` to differ from).
* **L_k**: the bytes the ACK acknowledges with Westwood's accounting (a
  duplicate ACK stands for one MSS that reached the receiver; the cumulative ACK
  after duplicates is reduced accordingly), since SARBE's "amount of data
  acknowledged" would otherwise make every duplicate ACK a zero sample during
  recovery, exactly when the estimate is used.
* **ts_k - ts_{k-1} <= 0** (ACKs sent within the same µs, or reordered on the way
  back): no sample; the bytes are carried into the next one. An ACK without a
  send timestamp gives no sample (and does not move ``ts``); neither does an ACK
  that is neither new nor a duplicate (the SYN-ACK, a stale ACK).
* **RTTmin**: the minimum RTT sample of the flow.
"""
from collections import deque
from typing import Deque, Optional

from .base import AckInfo, CcState, CongestionControl
from .filters import AckedCounter, EstimateRecoveryMixin, RttMin, US_PER_S, bdp_segments


class Sarbe(EstimateRecoveryMixin, CongestionControl):
    """SARBE: ACK send-timestamp samples, stability-based filter; ssthresh = oCwnd after loss."""

    name = "sarbe"

    def __init__(self, beta: float = 0.8, n: int = 8) -> None:
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"beta must be in [0, 1), got {beta}")
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        self.beta = float(beta)
        self.n = int(n)
        self.rtt_min = RttMin()
        self.counter = AckedCounter()
        self.last_ts_us: Optional[int] = None
        self.carried_bytes = 0
        self.last_sample: Optional[float] = None
        self.u: float = 0.0
        self.u_hist: Deque[float] = deque(maxlen=self.n + 1)
        self.alpha: Optional[float] = None
        self.ebw: Optional[float] = None

    def on_init(self, st: CcState) -> None:
        super().on_init(st)
        st.estimate_bps = None

    def on_feedback(self, st: CcState, ack: AckInfo) -> None:
        self.rtt_min.update(ack.rtt_sample_us)
        acked = self.counter.count(ack, st.mss_bytes)
        ts = ack.ack_send_time_us
        if ts is not None and acked > 0:
            if self.last_ts_us is None:
                self.last_ts_us = ts
            else:
                self.carried_bytes += acked
                dt = ts - self.last_ts_us
                if dt > 0:
                    sample = self.carried_bytes * 8.0 * US_PER_S / dt
                    self.carried_bytes = 0
                    self.last_ts_us = ts
                    self._filter(sample)
        st.estimate_bps = self.ebw
        st.extra["bw_sample_bps"] = self.last_sample
        st.extra["instability"] = self.u
        st.extra["gain_alpha"] = self.alpha
        rtt_min = self.rtt_min.get(st)
        st.extra["ocwnd"] = bdp_segments(self.ebw, rtt_min, st.mss_bytes) if self.ebw and rtt_min else None

    def _filter(self, sample: float) -> None:
        if self.ebw is None or self.last_sample is None:
            self.u = 0.0
            self.u_hist.append(self.u)
            self.ebw = sample
            self.last_sample = sample
            return
        self.u = self.beta * self.u + (1.0 - self.beta) * abs(sample - self.last_sample)  # eq. (2)
        self.u_hist.append(self.u)
        u_max = max(self.u_hist)                                                       # eq. (3)
        self.alpha = self.u / u_max if u_max > 0.0 else 1.0                            # eq. (4)
        self.ebw = self.alpha * self.ebw + (1.0 - self.alpha) * sample                 # eq. (5)
        self.last_sample = sample
