"""Reno: RFC 5681 fast retransmit / fast recovery without NewReno's partial ACKs.

Differences from :mod:`hosts.cc.newreno`:

* ``recovery_style = "reno"``: the transport ends fast recovery at the first ACK
  that acknowledges new data, partial or not (RFC 5681 sec. 3.2 step 6), so a second
  loss in the same window needs three more duplicate ACKs (a second halving) or a
  retransmission timeout - the behaviour RFC 6582 was written to fix;
* on leaving recovery cwnd is deflated to ssthresh (RFC 5681 sec. 3.2 step 6: "set
  cwnd to the value of ssthresh"), not to min(ssthresh, FlightSize + 1).
"""
from __future__ import annotations

from typing import ClassVar, Literal

from .base import AckInfo, CcState, CongestionControl


class Reno(CongestionControl):
    """Reno (RFC 5681): fast recovery ends at the first new ACK."""

    name: ClassVar[str] = "reno"
    recovery_style: ClassVar[Literal["newreno", "reno"]] = "reno"

    def on_exit_recovery(self, st: CcState, ack: AckInfo) -> None:
        # RFC 5681 sec. 3.2 step 6: deflate the window to ssthresh.
        st.cwnd = st.ssthresh
