"""RCP's sender: send at the rate the routers stamp.

Source: N. Dukkipati, M. Kobayashi, R. Zhang-Shen, N. McKeown, "Processor Sharing
Flows in the Internet", sec. 2 (and N. Dukkipati, N. McKeown, "Why Flow-Completion
Time is the Right Metric for Congestion Control"). Every router keeps one rate R(t)
per link, updated once per control interval (eq. 1 of the former,
p4src/v1model/include/control/rcp.p4); every DATA packet carries a rate field
``R_p`` that each router lowers to its R(t), and an RTT field the routers average
into their control interval. The receiver echoes ``R_p``; the sender sends at it.

Here: ``pacing_rate_bps`` is the echoed rate R_p as bits of frames (the
switches' kb/s of frames times 1000: the transport's pacer counts frame bytes,
hosts/transport/pacing.py), and the window is no limit
(``inflight_gain`` times the rate's bandwidth-delay product, as OBP's sender does),
so the rate alone decides. The XR header's ``rtt_us`` is the transport's smoothed
RTT (0 before its first sample) and ``cwnd_bytes`` 0 (not an XCP sender).

Decisions (docs/algorithms.md, "RCP"):

* **Before the first echo** (the first RTT) and **without an RCP router on the
  path** (the echo comes back unset) the flow is NewReno; RCP's senders start at
  the rate the SYN's answer carries, which this transport's handshake does not
  have, so the first RTT is NewReno's initial window.
* **Floor**: at least two frames per RTT (once the RTT is known; a rate of 0
  before that is ignored), so that a rate of 0 -- which RCP's routers never
  stamp, their lowest is ``rate_min_kbps`` -- or a forged one cannot stall the flow.
* **Losses**: RCP's rate does not react to loss (the papers' routers have
  large buffers and R(t) reacts to the queue); the transport retransmits, the
  rate stays the echoed one.
"""
from __future__ import annotations

from typing import Optional

from bwn.protocol.wire import XR_FEEDBACK_UNSET, XR_RATE_UNSET

from .base import AckInfo, CcState, CongestionControl, XrRequest

U32_MAX = 2**32 - 1
US_PER_S = 1_000_000
MIN_FRAMES_PER_RTT = 2


class Rcp(CongestionControl):
    """RCP: send at R_p, the smallest of the routers' rates R(t) on the path."""

    name = "rcp"
    uses_xr = True
    rate_based = True

    def __init__(self, inflight_gain: float = 2.0) -> None:
        if not inflight_gain >= 1.0:
            raise ValueError(f"inflight_gain must be >= 1, got {inflight_gain}")
        self.inflight_gain = float(inflight_gain)
        self.rate_kbps: Optional[int] = None

    def on_init(self, st: CcState) -> None:
        super().on_init(st)
        self.rate_kbps = None
        st.pacing_rate_bps = None

    def xr_request(self, st: CcState) -> XrRequest:
        rtt_us = min(round(st.srtt_us), U32_MAX) if st.srtt_us else 0
        return XrRequest(rtt_us=rtt_us, cwnd_bytes=0, feedback_bytes=XR_FEEDBACK_UNSET,
                         rate_kbps=XR_RATE_UNSET)

    def on_feedback(self, st: CcState, ack: AckInfo) -> None:
        xr = ack.feedback.xr if ack.feedback is not None else None
        if xr is None or xr.rate_kbps is None:
            return
        rtt_us = st.srtt_us or ack.rtt_sample_us
        rate = float(xr.rate_kbps)
        if rtt_us:
            rate = max(rate, MIN_FRAMES_PER_RTT * st.frame_bytes * 8 * 1000.0 / rtt_us)   # kb/s
        elif rate <= 0:
            return
        self.rate_kbps = xr.rate_kbps
        st.estimate_bps = xr.rate_kbps * 1000.0
        st.extra["rcp_rate_kbps"] = xr.rate_kbps
        # send at R_p
        st.pacing_rate_bps = rate * 1000.0
        if rtt_us:
            bdp = self.inflight_gain * rate * 1000.0 * (rtt_us / US_PER_S) / (8.0 * st.frame_bytes)
            st.cwnd = min(max(bdp, 2.0), st.max_cwnd)

    def _newreno(self) -> bool:
        return self.rate_kbps is None

    def on_ack(self, st: CcState, ack: AckInfo) -> None:
        if self._newreno():
            super().on_ack(st, ack)

    def on_dupack(self, st: CcState, ack: AckInfo) -> None:
        if self._newreno():
            super().on_dupack(st, ack)

    def on_enter_recovery(self, st: CcState) -> None:
        if self._newreno():
            super().on_enter_recovery(st)

    def on_partial_ack(self, st: CcState, ack: AckInfo) -> None:
        if self._newreno():
            super().on_partial_ack(st, ack)

    def on_exit_recovery(self, st: CcState, ack: AckInfo) -> None:
        if self._newreno():
            super().on_exit_recovery(st, ack)

    def on_timeout(self, st: CcState) -> None:
        if self._newreno():
            super().on_timeout(st)
