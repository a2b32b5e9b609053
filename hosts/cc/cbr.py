"""A constant-rate, unresponsive source: the papers' UDP/CBR cross traffic.

Sources: A. Capone, F. Martignon, "Bandwidth Estimates in the TCP Congestion
Control Scheme" (sec. 3, Figs. 4-5: "a UDP flow of 4 Mbit/s", and "constant rate
flows, such as UDP flows for IP telephony or video conference"); Le Tuan Anh,
Choong Seon Hong, "Stable Accurate Rapid Bandwidth Estimate for Improving TCP
over Wireless Networks", Fig. 1(b) (constant-rate flows that change the
available bandwidth).
Both ran NS-2's CBR agent over UDP: a packet of fixed size at fixed intervals,
whatever the network does.

Here the flow sends at ``rate_mbit`` of frames on the wire (the unit in which the
scenarios give link rates and the transport paces: ``pacing_rate_bps`` counts
frame bits), i.e. ``rate * mss / frame_bytes`` of payload, and nothing it learns
changes that: no slow start, no reaction to
duplicate ACKs, timeouts or ECN. The window is the receive window, so the pacer
alone decides when a segment leaves.

Decision (docs/algorithms.md, "CBR"): the flow runs on bwn's transport, not on a
bare UDP socket, so that the report measures it as any other flow (its log,
goodput, and its demand in the max-min fair shares). Two things differ from
NS-2's CBR, and neither changes the load the bottleneck carries: a lost segment is
sent again, inside the same constant rate (the offered load stays ``rate_mbit``;
the goodput is that less the losses, as NS-2's CBR delivers), and the receiver's
ACKs (102-byte frames, one per DATA frame) flow the other way, on links the
papers' cases do not load in that direction.

``rate_mbit`` defaults to 1 Mb/s (NS-2's CBR agent has a default rate too); a
scenario's constant-rate flow always gives its own (docs/config.md, ``kind``).
"""
from __future__ import annotations

from .base import AckInfo, CcState, CongestionControl


class ConstantRate(CongestionControl):
    """CBR: ``rate_mbit`` of frames, whatever happens to them."""

    name = "cbr"
    rate_based = True

    def __init__(self, rate_mbit: float = 1.0) -> None:
        if not rate_mbit > 0:
            raise ValueError(f"rate_mbit must be > 0 (Mb/s of frames), got {rate_mbit}")
        self.rate_mbit = float(rate_mbit)

    @property
    def rate_bps(self) -> float:
        """Frame bits per second: what the pacer counts."""
        return self.rate_mbit * 1e6

    def on_init(self, st: CcState) -> None:
        st.cwnd = st.max_cwnd
        st.pacing_rate_bps = self.rate_bps

    def on_ack(self, st: CcState, ack: AckInfo) -> None:
        pass

    def on_dupack(self, st: CcState, ack: AckInfo) -> None:
        pass

    def on_enter_recovery(self, st: CcState) -> None:
        pass

    def on_partial_ack(self, st: CcState, ack: AckInfo) -> None:
        pass

    def on_exit_recovery(self, st: CcState, ack: AckInfo) -> None:
        pass

    def on_ecn(self, st: CcState) -> None:
        pass

    def on_timeout(self, st: CcState) -> None:
        pass
