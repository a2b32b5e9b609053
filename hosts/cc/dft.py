"""DFT, the Double Filtering Technique (used-bandwidth estimate for TCP).

Source: A. Capone, F. Martignon, "Bandwidth Estimates in the TCP Congestion
Control Scheme", IWDC 2001, LNCS 2170, pp. 614-626 (sec. 3). Its two pseudocode
blocks (the stream of sent packets, Westwood's filter) are the published ones,
as docs/algorithms.md restates them.

Implemented:

* eq. (3) ``Bw = n*Lbar / T = Lbar / (T/n)``: the packet length and the
  inter-packet interval are low-pass filtered *separately* and divided, instead of
  filtering the rates (which, eqs. (1)-(2), over-estimates by the variance of the
  intervals -- the paper's Fig. 1: averaging rates gives about 7L/T where the
  bandwidth is 4L/T).

  - ``variant="sent"`` (stream of sent packets; the one the paper evaluates in
    Fig. 6 with alpha = 0.99, and the default here), per sent segment:
    ``avg_len[k] = alpha*avg_len[k-1] + (1-alpha)*packet_size``,
    ``avg_int[k] = alpha*avg_int[k-1] + (1-alpha)*(now - last_sending_time)``.
  - ``variant="ack"`` (stream of received ACKs), per ACK: the same with
    ``acked*packet_size`` (duplicate ACKs count one MSS, the Westwood accounting
    the paper requires, :class:`~hosts.cc.filters.AckedCounter`) and the ACK
    inter-arrival time.

* eq. (5), adaptive smoothing with ``T0 = 1 s``:
  ``Bwe[k] = (1 - e^(-T[k]/T0)) * avg_len[k]/avg_int[k] + e^(-T[k]/T0) * Bwe[k-1]``,
  ``T[k]`` the time since the previous estimate (the previous packet sent, or ACK
  received).
* eq. (4) ``ssthresh = Bwe * RTTmin`` (in segments: ``/ (8 * mss)``), applied only
  after 3 duplicate ACKs or a timeout (``ssthresh_update="loss"``, the default):
  the paper's sec. 3 chooses this "supported by the worst performance observed
  with more frequent updating of the ssthresh value as shown in Figure 5".
  Fig. 5's controls are here as variants, for that comparison only:
  ``ssthresh_update="continuous"`` sets ``ssthresh`` from eq. (4) at every new
  estimate, ``"periodic"`` at most once per ``update_period_us`` (the paper's
  0.5 s); neither touches cwnd, so a cwnd above the new ssthresh simply leaves
  slow start ("forces the source in the congestion avoidance phase").
  The cwnd rules after loss events are Westwood's
  (:class:`~hosts.cc.filters.EstimateRecoveryMixin`); everything else is
  NewReno (the paper's DFT runs on a Reno source).

Decisions:

* **alpha = 0.99** (paper Fig. 6), **T0 = 1 s** (paper sec. 3).
* **Filter start**: both filters start at zero and the first packet (or ACK) only
  starts the clock. Because ``avg_len`` and ``avg_int`` then carry the same
  weights ``(1-alpha)*alpha^(k-i)``, their ratio is exactly the weighted mean
  length over the weighted mean interval from the first sample on -- no start-up
  bias and no arbitrary initial value. The eq. (5) stage starts at the first raw
  value.
* **Zero intervals** (back-to-back sends in the same µs) are legitimate samples:
  DFT filters intervals, not rates, so it needs no special case (the paper notes
  exactly this).
* **Retransmissions** are part of the sent stream (they use bandwidth).
  ``packet_size`` is the segment payload size the transport reports.
* The "sent" estimate is a *sending* rate; while the flow is idle (application
  limited) no sample is taken, and the next interval contains the idle time.
"""
import math
from typing import Literal, Optional

from .base import AckInfo, CcState, CongestionControl, SentSegment
from .filters import AckedCounter, EstimateRecoveryMixin, RttMin, US_PER_S

VARIANTS = ("sent", "ack")
SSTHRESH_UPDATES = ("loss", "continuous", "periodic")


class Dft(EstimateRecoveryMixin, CongestionControl):
    """DFT: separately filtered length and interval (Capone & Martignon); ssthresh = Bwe*RTTmin after loss."""

    name = "dft"

    def __init__(self, variant: Literal["sent", "ack"] = "sent", alpha: float = 0.99, t0_us: int = 1_000_000,
                 ssthresh_update: Literal["loss", "continuous", "periodic"] = "loss",
                 update_period_us: int = 500_000) -> None:
        if variant not in VARIANTS:
            raise ValueError(f"dft variant must be one of {VARIANTS}, got {variant!r}")
        if ssthresh_update not in SSTHRESH_UPDATES:
            raise ValueError(f"ssthresh_update must be one of {SSTHRESH_UPDATES}, got {ssthresh_update!r}")
        if update_period_us <= 0:
            raise ValueError(f"update_period_us must be > 0, got {update_period_us}")
        if not 0.0 <= alpha < 1.0:
            raise ValueError(f"alpha must be in [0, 1), got {alpha}")
        if t0_us <= 0:
            raise ValueError(f"t0_us must be > 0, got {t0_us}")
        self.variant = variant
        self.alpha = float(alpha)
        self.t0_us = int(t0_us)
        self.ssthresh_update = ssthresh_update
        self.update_period_us = int(update_period_us)
        self.last_ssthresh_update_us: Optional[int] = None
        self.rtt_min = RttMin()
        self.counter = AckedCounter()
        self.avg_len_bits = 0.0
        self.avg_int_us = 0.0
        self.last_time_us: Optional[int] = None
        self.raw_bps: Optional[float] = None
        self.bwe: Optional[float] = None
        self.last_estimate_us: Optional[int] = None

    def on_init(self, st: CcState) -> None:
        super().on_init(st)
        st.estimate_bps = None

    def on_packet_sent(self, st: CcState, seg: SentSegment) -> None:
        if self.variant == "sent":
            self._sample(seg.now_us, seg.size_bytes * 8.0)
            self._publish(st, seg.now_us)

    def on_feedback(self, st: CcState, ack: AckInfo) -> None:
        self.rtt_min.update(ack.rtt_sample_us)
        if self.variant == "ack":
            acked = self.counter.count(ack, st.mss_bytes)
            if acked > 0:
                self._sample(ack.now_us, acked * 8.0)
        self._publish(st, ack.now_us)

    def _sample(self, now_us: int, length_bits: float) -> None:
        if self.last_time_us is None:
            self.last_time_us = now_us
            return
        interval = max(now_us - self.last_time_us, 0)
        self.last_time_us = now_us
        a = self.alpha
        self.avg_len_bits = a * self.avg_len_bits + (1.0 - a) * length_bits
        self.avg_int_us = a * self.avg_int_us + (1.0 - a) * interval
        if self.avg_int_us <= 0.0:
            return  # only zero intervals so far: no finite estimate yet
        self.raw_bps = self.avg_len_bits * US_PER_S / self.avg_int_us
        # eq. (5): adaptive pole bound to the time between two estimates
        if self.bwe is None or self.last_estimate_us is None:
            self.bwe = self.raw_bps
        else:
            pole = math.exp(-(now_us - self.last_estimate_us) / self.t0_us)
            self.bwe = (1.0 - pole) * self.raw_bps + pole * self.bwe
        self.last_estimate_us = now_us

    def _publish(self, st: CcState, now_us: int) -> None:
        st.estimate_bps = self.bwe
        st.extra["raw_bps"] = self.raw_bps
        st.extra["rtt_min_us"] = self.rtt_min.get(st)
        if self.ssthresh_update != "loss":
            self._update_ssthresh(st, now_us)

    def _update_ssthresh(self, st: CcState, now_us: int) -> None:
        """Fig. 5's controls: eq. (4) outside loss events, at every estimate or periodically."""
        if self.ssthresh_update == "periodic" and self.last_ssthresh_update_us is not None \
                and now_us - self.last_ssthresh_update_us < self.update_period_us:
            return
        ssthresh = self.estimate_ssthresh(st)
        if ssthresh is None:
            return
        st.ssthresh = ssthresh
        self.last_ssthresh_update_us = now_us
