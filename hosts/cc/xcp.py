"""XCP's sender: the window moves by the routers' explicit feedback.

Source: D. Katabi, M. Handley, C. Rohrs, "Congestion Control for High
Bandwidth-Delay Product Networks", sec. 3.1 (the congestion header) and sec. 3.2
(the XCP sender). Every DATA packet carries the sender's ``H_cwnd`` (its window,
bytes), ``H_rtt`` (its RTT estimate) and ``H_feedback``, which the sender sets to
the window increase it wants and every XCP router on the path lowers to its own
feedback (sec. 3.5, p4src/v1model/include/control/xcp.p4). The receiver copies
``H_feedback`` into the ACK; on each ACK the sender applies

    cwnd = max(cwnd + H_feedback, s)          (sec. 3.2; s: one packet)

Units: the XR header counts bytes of whole frames (what the switches count), so
``H_cwnd = cwnd * frame_bytes`` and a feedback of ``f`` bytes is ``f / frame_bytes``
segments; ``H_rtt`` is the transport's smoothed RTT (0 before its first sample,
which XCP's routers skip, sec. 3.5).

Decisions (docs/algorithms.md, "XCP"):

* **Demand**: the sender asks for as much as it is given (``H_feedback`` starts at
  its largest value); the papers' senders are backlogged too.
* **No XCP router on the path** (the echo comes back unset): the flow is NewReno,
  so that it still probes (the paper leaves a path without XCP routers aside).
  Once an echo carries feedback, NewReno's increase stops: the window moves only
  by the routers' feedback.
* **Losses**: as the paper says (sec. 3.2), "XCP responds to losses in a manner
  similar to TCP": the base class's fast recovery and timeout; feedback is not
  applied while in recovery (the window belongs to recovery then).
"""
from __future__ import annotations

from bwn.protocol.wire import XR_FEEDBACK_UNSET, XR_RATE_UNSET

from .base import AckInfo, CcState, CongestionControl, MIN_CWND_SEGMENTS, XrRequest

U32_MAX = 2**32 - 1


class Xcp(CongestionControl):
    """XCP: cwnd = max(cwnd + H_feedback, s), H_feedback the path's explicit feedback."""

    name = "xcp"
    uses_xr = True

    def __init__(self) -> None:
        self.routed = False           # an echo has carried XCP feedback
        self.feedback_bytes_total = 0

    def on_init(self, st: CcState) -> None:
        super().on_init(st)
        self.routed = False
        self.feedback_bytes_total = 0

    def xr_request(self, st: CcState) -> XrRequest:
        rtt_us = min(round(st.srtt_us), U32_MAX) if st.srtt_us else 0
        cwnd_bytes = min(max(round(st.cwnd * st.frame_bytes), 1), U32_MAX)   # 0 would say "not XCP"
        return XrRequest(rtt_us=rtt_us, cwnd_bytes=cwnd_bytes, feedback_bytes=XR_FEEDBACK_UNSET,
                         rate_kbps=XR_RATE_UNSET)

    def on_feedback(self, st: CcState, ack: AckInfo) -> None:
        xr = ack.feedback.xr if ack.feedback is not None else None
        if xr is None or xr.feedback_bytes is None:
            return
        self.routed = True
        self.feedback_bytes_total += xr.feedback_bytes
        st.extra["xcp_feedback_bytes"] = xr.feedback_bytes
        if st.in_recovery:
            return
        # sec. 3.2: cwnd = max(cwnd + H_feedback, s)
        st.cwnd = max(st.cwnd + xr.feedback_bytes / st.frame_bytes, MIN_CWND_SEGMENTS)
        st.clamp()

    def on_ack(self, st: CcState, ack: AckInfo) -> None:
        if not self.routed:
            super().on_ack(st, ack)       # no XCP router on the path: NewReno
