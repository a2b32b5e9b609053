"""TCP-EBN: NewReno plus cwnd scaling by the ratio of successive EBN values.

Source: D. Dutta, Y. Zhang, "An Early Bandwidth Notification (EBN) Architecture
for Dynamic Bandwidth Environment", sec. III-C (the paper numbers no equations):

1) ``currentbn == lastebn``: do nothing;
2) ``currentbn < lastebn``: ``cwnd *= beta1 * currentbn / lastebn``, ``beta1 = 1``;
3) ``currentbn > lastebn``: ``cwnd *= beta2 * currentbn / lastebn``, ``beta2 = 2``.

"The modification to TCP algorithm is implemented as a derivative of TCP-NewReno"
(sec. IV): slow start, congestion avoidance and fast recovery are the base
class's. ``currentbn / lastebn`` is :func:`bwn.protocol.wire.ebn_ratio` of the echoed
codes, ``2 ** ((code_now - code_last) / 8)`` (docs/wire-format.md).

Decisions (the first is the paper's open question; docs/algorithms.md):

* **Literal rule by default** (``variant="literal"``): any increase multiplies
  cwnd by ``beta2 * ratio`` -- for the smallest possible step (one code, ratio
  1.09) that is x2.18. The result is bounded by ``st.max_cwnd`` (the receive
  window), as the paper's NS-2 runs were bounded by the maximum window.
  ``variant="relative"`` is a gentler reading, offered only under that name:
  the beta scales the *relative change*, ``cwnd *= 1 + beta * (ratio - 1)``
  (for a decrease with beta1 = 1 this is the same as the literal rule; an increase
  of one code step gives x1.18 instead of x2.18).
* **When**: on every ACK (new or duplicate) whose echo carries a set EBN code
  (``Feedback.ebn_code`` not None) that differs from the last one seen. The first
  code only initialises ``lastebn``. Unset codes (no BWN switch on the path,
  ``hop_count = 0``) change nothing: the flow is then plain NewReno.
* **Not during fast recovery**: while ``st.in_recovery`` the window belongs to
  NewReno's recovery (inflation/deflation and the final
  ``min(ssthresh, FlightSize + 1)``), so codes only update ``lastebn`` and cwnd is
  not scaled; the change is not replayed after recovery (recovery has already cut
  the window once). Outside recovery -- including the slow start after a timeout --
  the rule applies.
* **Only cwnd is scaled** (``ssthresh_follows=False``), as the rule reads: the
  paper never mentions ssthresh, and in NS-2's TCP (which TCP-EBN derives from)
  setting cwnd leaves ssthresh where it is, so after a decrease during slow
  start the window keeps doubling. ``ssthresh_follows=True`` is a named option:
  after a decrease ``ssthresh = min(ssthresh, cwnd)`` (at least 2), so slow
  start does not undo it. It changes results: in the reproduction's slow-start case at a 1000 ms delay, the
  decrease that comes when the background flow appears (N 1 -> 2) set ssthresh
  to 2 segments and left the flow in congestion avoidance at a 2 s RTT
  (utilization 0.29 against 0.39 with cwnd only, NewReno 0.38: one seed,
  docs/results/ebn.md has the grid).
* **Bounds**: cwnd stays within ``[1, max_cwnd]`` segments (``CcState.clamp``).
"""
from typing import Literal, Optional

from bwn.protocol.wire import ebn_ratio, ebn_decode_kbps

from .base import AckInfo, CcState, CongestionControl
from .filters import as_bool

VARIANTS = ("literal", "relative")


class TcpEbn(CongestionControl):
    """TCP-EBN: NewReno; cwnd *= beta*currentbn/lastebn when the echoed EBN code changes."""

    name = "ebn"

    def __init__(
        self,
        beta1: float = 1.0,
        beta2: float = 2.0,
        variant: Literal["literal", "relative"] = "literal",
        ssthresh_follows: bool = False,
    ) -> None:
        if variant not in VARIANTS:
            raise ValueError(f"ebn variant must be one of {VARIANTS}, got {variant!r}")
        if beta1 <= 0 or beta2 <= 0:
            raise ValueError("beta1 and beta2 must be > 0")
        self.beta1 = float(beta1)
        self.beta2 = float(beta2)
        self.variant = variant
        self.ssthresh_follows = as_bool(ssthresh_follows)
        self.last_code: Optional[int] = None
        self.scalings = 0

    def on_init(self, st: CcState) -> None:
        super().on_init(st)
        self.last_code = None
        st.estimate_bps = None

    def factor(self, ratio: float) -> float:
        """The multiplier applied to cwnd for ``ratio = currentbn / lastebn``."""
        if ratio == 1.0:
            return 1.0
        beta = self.beta1 if ratio < 1.0 else self.beta2
        if self.variant == "literal":
            return beta * ratio
        return max(1.0 + beta * (ratio - 1.0), 0.0)

    def on_feedback(self, st: CcState, ack: AckInfo) -> None:
        fb = ack.feedback
        code = fb.ebn_code if fb is not None else None
        if code is None or code == 0xFF:
            return
        kbps = ebn_decode_kbps(code)
        st.estimate_bps = kbps * 1000.0 if kbps is not None else None
        st.extra["ebn_code"] = code
        last = self.last_code
        self.last_code = code
        if last is None or code == last or st.in_recovery:
            return
        ratio = ebn_ratio(code, last)
        old = st.cwnd
        st.cwnd = old * self.factor(ratio)
        st.clamp()
        if ratio < 1.0 and self.ssthresh_follows:
            st.ssthresh = max(min(st.ssthresh, st.cwnd), 2.0)
        self.scalings += 1
        st.extra["ebn_ratio"] = ratio
        st.extra["ebn_scalings"] = self.scalings
