"""The one narrow interface between the transport and a sender algorithm.

Modelled on Linux's ``struct tcp_congestion_ops``: the transport
(:mod:`hosts.transport`) owns sequence numbers, loss detection (duplicate
ACK counting, the recovery point of RFC 6582, the RFC 6298 timer) and
retransmission; the algorithm owns every number that decides *how much* to send:
``cwnd``, ``ssthresh`` and the pacing rate, all held in :class:`CcState`.

The transport calls, for each event, exactly one callback:

====================  =========================================================
event                 callback
====================  =========================================================
flow starts           :meth:`CongestionControl.on_init`
segment sent          :meth:`CongestionControl.on_packet_sent`
new cumulative ACK    :meth:`CongestionControl.on_ack` (outside recovery)
partial ACK           :meth:`CongestionControl.on_partial_ack` (in recovery)
duplicate ACK         :meth:`CongestionControl.on_dupack` (always, also in recovery)
3rd duplicate ACK     :meth:`CongestionControl.on_enter_recovery` (with SACK: RFC 6675's
                      trigger, which may also be a new ACK, after its ``on_ack``)
full ACK              :meth:`CongestionControl.on_exit_recovery`
RTO expiry            :meth:`CongestionControl.on_timeout`
ECN-Echo (ECE)        :meth:`CongestionControl.on_ecn` (ECN negotiated; at most once per
                      window of data, never in recovery: RFC 3168 sec. 6.1.2)
every ACK             :meth:`CongestionControl.on_feedback` (before the above,
                      with the BWN echo section the ACK carried)
====================  =========================================================

Units: ``cwnd`` and ``ssthresh`` are in segments of ``mss_bytes`` (floats, as
in the papers, which count packets); the transport sends a segment while
``pipe_bytes + segment <= cwnd * mss_bytes``. ``pacing_rate_bps`` (bits per second)
limits the sending rate when set; a rate-based algorithm (OBP) sets it and keeps
``cwnd`` large. Times are integer microseconds from a monotonic clock.

**SACK** (``CcState.sack``, negotiated per flow; docs/transport.md): the transport
recovers losses as RFC 6675 says and compares cwnd with ``pipe`` (the data RFC 6675
presumes in the network: SACKed and lost segments excluded), so a window must *not*
be inflated by duplicate ACKs or deflated by partial ACKs there; the defaults below
do RFC 6675's ``cwnd = ssthresh`` at the start of recovery and leave cwnd alone
until the end. Without SACK ``pipe_bytes == bytes_in_flight`` and the defaults are
NewReno's inflation/deflation.

The defaults below are NewReno (RFC 5681 slow start and congestion avoidance,
RFC 6582 fast recovery, or RFC 6675 with SACK), so a module overrides only what
its paper changes.
"""
from __future__ import annotations

from abc import ABC
from dataclasses import dataclass, field
from typing import ClassVar, Literal, Optional

INITIAL_CWND_SEGMENTS = 2.0  # RFC 5681 IW for SMSS > 2190... we use 2, as the papers' NS-2 runs
MIN_CWND_SEGMENTS = 1.0
SSTHRESH_INFINITE = float("inf")


@dataclass(frozen=True)
class XrEcho:
    """The XR header's echo section of one ACK (docs/wire-format.md, "The XR header"):
    what XCP's and RCP's switches wrote into the DATA packets it acknowledges;
    ``None`` where no switch wrote (the sender's "unset" came back)."""

    feedback_bytes: Optional[int]    # XCP's H_feedback, summed over the acknowledged packets
    rate_kbps: Optional[int]         # RCP's R_p of the newest acknowledged packet


@dataclass(frozen=True)
class Feedback:
    """The BWN echo section of one ACK (docs/wire-format.md); ``None`` fields are unset."""

    hop_count: int
    ebn_code: Optional[int]          # 0..254, None if unset
    narrow_kbps: Optional[int]       # None if unset
    tight_kbps: Optional[int]        # signed; None if unset
    xr: Optional[XrEcho] = None      # the XR echo, on the ACKs of a flow whose sender uses XR


@dataclass(frozen=True)
class XrRequest:
    """What a sender that uses XR (XCP, RCP) writes into the XR header of each DATA
    packet (docs/wire-format.md): its RTT estimate, its window (XCP's H_cwnd; 0 for
    a sender that is not XCP) and the initial forward values (its wishes)."""

    rtt_us: int
    cwnd_bytes: int
    feedback_bytes: int
    rate_kbps: int


@dataclass(frozen=True)
class AckInfo:
    """What the transport learned from one ACK."""

    now_us: int
    ack_seq: int                     # cumulative ACK (next byte expected)
    acked_bytes: int                 # bytes newly acknowledged (0 for a dup ACK)
    rtt_sample_us: Optional[int]     # from the echoed data timestamp (Karn: None for retransmits)
    ack_send_time_us: Optional[int]  # receiver's clock when it sent this ACK (SARBE)
    feedback: Optional[Feedback]
    dupacks: int                     # consecutive duplicate ACKs so far (0 for a new ACK)


@dataclass(frozen=True)
class SentSegment:
    now_us: int
    seq: int
    size_bytes: int
    is_retransmit: bool


@dataclass
class CcState:
    """Congestion state shared by the transport (reads) and the algorithm (writes)."""

    mss_bytes: int
    cwnd: float = INITIAL_CWND_SEGMENTS
    ssthresh: float = SSTHRESH_INFINITE
    pacing_rate_bps: Optional[float] = None
    # Maintained by the transport; algorithms read them.
    now_us: int = 0
    bytes_in_flight: int = 0
    delivered_bytes: int = 0
    srtt_us: Optional[float] = None
    min_rtt_us: Optional[int] = None
    latest_rtt_us: Optional[int] = None
    in_recovery: bool = False
    recovery_point: int = 0          # highest seq sent when recovery started (RFC 6582 "recover")
    max_cwnd: float = 1e6            # receive-window bound, in segments
    # Sequence space (byte offsets; RFC 793 names). snd_nxt falls back to snd_una
    # after a timeout (go-back-N); snd_max is one past the highest byte ever sent.
    snd_una: int = 0
    snd_nxt: int = 0
    snd_max: int = 0
    sack: bool = False               # SACK in use: RFC 6675 recovery, cwnd compared with pipe
    pipe_bytes: int = 0              # what cwnd is compared with (== bytes_in_flight without SACK)
    #: Bytes of a data frame beyond its payload (Ethernet + IPv4 + UDP + BWN +
    #: transport header): a segment of ``mss_bytes`` is ``mss_bytes + this`` on the
    #: wire, the unit in which switches meter and count.
    frame_overhead_bytes: int = 0
    # Set by the algorithm, used and reset by the transport: this many segments leave
    # at once, outside cwnd (GTCP's forced transmissions): new data, except in SACK
    # fast recovery, where RFC 6675's NextSeg() picks them (lost data first). Credits
    # that cannot be used at once (nothing to send, receive window full) are dropped.
    force_segments: int = 0
    # The algorithm's own estimate, for the flow log (bits per second or None).
    estimate_bps: Optional[float] = None
    extra: dict = field(default_factory=dict)  # algorithm-specific values to log

    @property
    def flight_segments(self) -> float:
        """FlightSize (RFC 5681: sent and not cumulatively acknowledged) in segments."""
        return self.bytes_in_flight / self.mss_bytes

    @property
    def frame_bytes(self) -> int:
        """Bytes on the wire of one full-sized segment."""
        return self.mss_bytes + self.frame_overhead_bytes

    def clamp(self) -> None:
        """Keep cwnd within [1, max_cwnd] segments and ssthresh >= 2 segments."""
        self.cwnd = min(max(self.cwnd, MIN_CWND_SEGMENTS), self.max_cwnd)
        if self.ssthresh != SSTHRESH_INFINITE:
            self.ssthresh = max(self.ssthresh, 2.0)


class CongestionControl(ABC):
    """NewReno by default; subclasses override what their paper changes."""

    name: ClassVar[str] = "newreno"
    # "newreno": partial ACKs keep the flow in recovery (RFC 6582);
    # "reno": the first new ACK ends recovery (RFC 5681).
    recovery_style: ClassVar[Literal["newreno", "reno"]] = "newreno"
    rate_based: ClassVar[bool] = False
    #: The flow's DATA packets carry the XR header (:meth:`xr_request`) and its ACKs
    #: echo it (``Feedback.xr``): XCP and RCP.
    uses_xr: ClassVar[bool] = False

    def xr_request(self, st: CcState) -> XrRequest:
        """The XR header of the next DATA packet (only called when ``uses_xr``)."""
        raise NotImplementedError(f"{self.name} does not use the XR header")

    def on_init(self, st: CcState) -> None:
        st.cwnd = INITIAL_CWND_SEGMENTS
        st.ssthresh = SSTHRESH_INFINITE

    def on_packet_sent(self, st: CcState, seg: SentSegment) -> None:
        pass

    def on_feedback(self, st: CcState, ack: AckInfo) -> None:
        pass

    def on_ack(self, st: CcState, ack: AckInfo) -> None:
        self.reno_increase(st, ack.acked_bytes)

    def on_dupack(self, st: CcState, ack: AckInfo) -> None:
        # RFC 6582 step 4: each further duplicate ACK inflates cwnd by one segment.
        # With SACK the transport's pipe already drops by what the receiver got.
        if st.in_recovery and not st.sack:
            st.cwnd += 1.0

    def ssthresh_after_loss(self, st: CcState) -> float:
        # RFC 5681 eq. (4): ssthresh = max(FlightSize / 2, 2 * SMSS)
        return max(st.flight_segments / 2.0, 2.0)

    def on_enter_recovery(self, st: CcState) -> None:
        # RFC 6582 step 3 (RFC 5681 fast retransmit): cwnd = ssthresh + 3 * SMSS;
        # with SACK, RFC 6675 step 4.2: ssthresh = cwnd = FlightSize / 2.
        st.ssthresh = self.ssthresh_after_loss(st)
        st.cwnd = st.ssthresh + (0.0 if st.sack else 3.0)

    def on_partial_ack(self, st: CcState, ack: AckInfo) -> None:
        # RFC 6582 step 5: deflate by the amount acked, add back one SMSS
        # (with SACK nothing: RFC 6675 keeps cwnd = ssthresh through recovery).
        if not st.sack:
            st.cwnd = max(st.cwnd - ack.acked_bytes / st.mss_bytes + 1.0, 1.0)

    def on_exit_recovery(self, st: CcState, ack: AckInfo) -> None:
        # RFC 6582 step 6, option (1): cwnd = min(ssthresh, FlightSize + SMSS)
        st.cwnd = min(st.ssthresh, st.flight_segments + 1.0)

    def on_ecn(self, st: CcState) -> None:
        # RFC 3168 sec. 6.1.2: an ECN-Echo halves the window as a loss would (ssthresh =
        # max(FlightSize / 2, 2 SMSS), RFC 5681 eq. 4) and sets cwnd = ssthresh (never
        # above the cwnd it had), with no retransmission and no fast recovery; the
        # transport calls it at most once per window of data.
        st.ssthresh = self.ssthresh_after_loss(st)
        st.cwnd = min(st.cwnd, st.ssthresh)

    def on_timeout(self, st: CcState) -> None:
        # RFC 5681 eq. (4) and loss window of one segment.
        st.ssthresh = max(st.flight_segments / 2.0, 2.0)
        st.cwnd = 1.0

    # -- helpers shared by the algorithms ------------------------------------------
    @staticmethod
    def reno_increase(st: CcState, acked_bytes: int) -> None:
        """RFC 5681 slow start (cwnd += acked, at most 1 SMSS per ACK... counted in
        segments) and congestion avoidance (cwnd += 1/cwnd per acked segment)."""
        acked_segments = acked_bytes / st.mss_bytes
        if st.cwnd < st.ssthresh:
            st.cwnd += min(acked_segments, 1.0) if acked_segments else 0.0
        else:
            st.cwnd += acked_segments / st.cwnd
        st.cwnd = min(st.cwnd, st.max_cwnd)
