"""GTCP: TCP for flows with a guaranteed (reserved) rate plus best effort.

Source: Y. Zhu, O. Oladeji, K.-H. Kim, R. Sivakumar, "Enhancing TCP for Networks
with Guaranteed Bandwidth Services", sec. III (the paper numbers no equations;
below "III-A" etc. are its subsections). GTCP is built on NewReno.

Implemented:

* III-A: ``rtt_base = min(rtt_base, rtt_sample)``; ``cwnd_G = rate_G * rtt_base``
  in packets (footnote 3), i.e. ``rate_G[b/s] * rtt_base[s] / (8 * frame_bytes)``
  segments, where ``frame_bytes`` is what one segment is on the wire (payload +
  Ethernet, IPv4, UDP, BWN and transport headers: ``CcState.frame_bytes``), the
  unit in which the edge switch meters the reservation; ``cwnd = cwnd_G + cwnd_BE``.
* III-B start-up: initial cwnd 2 (one for each component); +1 per ACK in slow
  start; slow start ends when ``cwnd > default ssthresh + cwnd_G``.
* III-C congestion avoidance: ``cwnd += 1/cwnd`` per ACK (NewReno's).
* III-D congestion control, at the 3rd duplicate ACK:
  ``cwnd_update = cwnd_G + cwnd_BE / 2`` is saved and cwnd is *not* changed;
  each of the first ``cwnd_G`` further duplicate ACKs is a forced transmission
  (cwnd + 1); the following ``cwnd_BE / 2`` duplicate ACKs are ignored; every
  later one sends new data (cwnd + 1); at the full ACK cwnd collapses to
  ``cwnd_update``.
* III-D(2) timeout recovery: cwnd = 1 (the best-effort component), the highest
  sequence sent is saved as ``ssexit_thresh``; each of the first ``cwnd_G``
  duplicate ACKs forces the transmission of a *new* data segment; later
  duplicate ACKs are not answered until their total exceeds the number of
  segments outstanding at the timeout, then each sends one new segment; new ACKs
  slow-start the best-effort component and the transport resends what lies
  within that window; when the ACK passes ``ssexit_thresh`` the window collapses
  to ``cwnd_G + cwnd_BE``.

What the interface and the transport make of it (approximations, also in
docs/algorithms.md):

* **Units**: ``cwnd_G`` counts frames, so the reserved component sends
  ``rate_G`` of frame bits per ``rtt_base`` -- what the edge meter marks in
  profile -- and not about 10 % more, as counting payload segments did (a
  1000-byte segment is a 1102-byte frame).
* **Fast recovery without SACK** (``--no-sack``, NS-2's NewReno agent, the
  paper's): a forced transmission is ``cwnd += 1`` on that duplicate ACK (the
  transport compares cwnd with FlightSize, which duplicate ACKs do not lower, so
  one more segment of window is one new segment sent); "ignored" duplicate ACKs
  leave cwnd unchanged.
* **Fast recovery with SACK** (the transport's default): the transport compares
  cwnd with RFC 6675's pipe, which already drops by one segment per duplicate
  ACK, so inflating cwnd would count every such segment twice. GTCP's rule
  becomes: cwnd = ``cwnd_update`` at the 3rd duplicate ACK (RFC 6675's
  ``cwnd = ssthresh`` with GTCP's ssthresh), and each of the first ``cwnd_G``
  further duplicate ACKs asks for one new segment outside the window
  (``CcState.force_segments``). The reserved component still leaves first and
  the rest follows as pipe drops below ``cwnd_update`` (the paper's "ignored"
  duplicate ACKs); over the recovery RTT this sends ``cwnd_update`` segments,
  at least the paper's ``FR_ideal = max(cwnd_G, cwnd - k - cwnd_BE/2)``.
* **Timeout recovery** (both): forced transmissions are new data
  (``force_segments``), sent outside cwnd; cwnd is the best-effort component
  alone and governs the transport's resending from the first unacknowledged
  segment (go-back-N without SACK, only the unSACKed holes with SACK), which the
  transport does not extend over the data forced after the timeout. (Were forced
  transmissions to widen the window of the go-back-N walk, it would resend data
  the receiver already has: a retransmission storm.)
* The number of losses ``k`` is unknown to the sender; the paper's "ignore
  ``cwnd_BE - k`` if ``k > cwnd_BE/2``" is what ignoring ``cwnd_BE/2`` gives anyway
  (with k losses only ``cwnd - k`` duplicate ACKs come back), so the rule is
  implemented as ignore ``cwnd_BE / 2``. ``cwnd_G`` and ``cwnd_BE`` are frozen at
  the 3rd duplicate ACK (``cwnd_BE = max(cwnd - cwnd_G, 0)``); duplicate ACKs are
  counted over the whole recovery episode (a partial ACK does not restart the
  pattern); partial ACKs deflate as NewReno (RFC 6582 step 5) without SACK.
* ``ssthresh`` after a fast retransmit is ``cwnd_update`` (the paper gives none;
  this makes the flow continue in congestion avoidance after the collapse, as
  NewReno does with its ssthresh).
* During timeout recovery the best-effort component slow-starts up to
  ``ssthresh_BE = max((FlightSize - cwnd_G) / 2, 2)`` and then grows by
  ``1/cwnd_BE`` per ACK (TCP's behaviour after a timeout, applied to the best-effort
  part only, design goal (c) "TCP-friendliness"); at the exit ``ssthresh =
  cwnd_G + ssthresh_BE``, so the flow is in congestion avoidance if the best-effort
  part has passed ssthresh_BE (the paper's "exits slow-start") and otherwise
  finishes its slow start.
* **"default ssthresh"** is ``initial_ssthresh`` (default infinite, the base class's
  initial value): with it the start-up slow start ends at the first loss, as
  NewReno's. Until the first loss, ``ssthresh = initial_ssthresh + cwnd_G`` and is
  recomputed as ``rtt_base`` falls.
* ``rate_g_bps = 0`` (the default: no reservation) is exactly NewReno (the base
  class), not GTCP's rules with ``cwnd_G = 0``. Before the first RTT sample
  ``cwnd_G = 0``.
* ``estimate_bps`` is left unset (GTCP estimates nothing); ``extra`` logs
  ``cwnd_g``, ``cwnd_be``, the recovery phase and ``forced`` (segments forced).
"""
from typing import Literal, Optional

from .base import AckInfo, CcState, CongestionControl, SSTHRESH_INFINITE
from .filters import RttMin, bdp_segments


class Gtcp(CongestionControl):
    """GTCP: cwnd = cwnd_G + cwnd_BE for a reserved rate rate_g_bps; only the best-effort part backs off."""

    name = "gtcp"

    def __init__(self, rate_g_bps: float = 0.0, initial_ssthresh: float = SSTHRESH_INFINITE,
                 cwnd_g_rtt: Literal["base", "srtt"] = "base") -> None:
        if rate_g_bps < 0:
            raise ValueError(f"rate_g_bps must be >= 0, got {rate_g_bps}")
        if initial_ssthresh <= 0:
            raise ValueError(f"initial_ssthresh must be > 0, got {initial_ssthresh}")
        if cwnd_g_rtt not in ("base", "srtt"):
            raise ValueError(f"cwnd_g_rtt must be 'base' (the paper's rtt_base) or 'srtt', "
                             f"got {cwnd_g_rtt!r}")
        self.cwnd_g_rtt = cwnd_g_rtt
        self.rate_g_bps = float(rate_g_bps)
        self.initial_ssthresh = float(initial_ssthresh)
        self.rtt_base = RttMin()
        self.initial_phase = True
        # fast recovery (III-D 1)
        self.fr_active = False
        self.fr_dupacks = 0
        self.fr_g = 0.0
        self.fr_be = 0.0
        self.cwnd_update: Optional[float] = None
        # timeout recovery (III-D 2)
        self.to_active = False
        self.to_dupacks = 0
        self.to_outstanding = 0.0
        self.to_high = 0
        self.to_g = 0.0
        self.cwnd_be = 1.0
        self.ssthresh_be = 2.0
        self.forced = 0.0

    @property
    def enabled(self) -> bool:
        return self.rate_g_bps > 0

    def cwnd_g(self, st: CcState) -> float:
        """rate_G * rtt_base in segments, each counted as the frame it is on the wire."""
        rtt = self.rtt_base.get(st)
        if self.cwnd_g_rtt == "srtt" and st.srtt_us:
            rtt = st.srtt_us     # named variant: the queueing delay counts (docs/algorithms.md)
        if not self.enabled or not rtt:
            return 0.0
        return bdp_segments(self.rate_g_bps, rtt, st.frame_bytes)

    def _log(self, st: CcState, phase: str) -> None:
        g = self.cwnd_g(st)
        st.extra["cwnd_g"] = g
        st.extra["cwnd_be"] = self.cwnd_be if self.to_active else max(st.cwnd - g, 0.0)
        st.extra["phase"] = phase
        st.extra["forced"] = self.forced

    # -- callbacks ---------------------------------------------------------------
    def on_init(self, st: CcState) -> None:
        super().on_init(st)  # cwnd = 2: one segment for each component
        if self.enabled:
            st.ssthresh = self.initial_ssthresh + self.cwnd_g(st)

    def on_feedback(self, st: CcState, ack: AckInfo) -> None:
        self.rtt_base.update(ack.rtt_sample_us)
        if self.enabled and self.initial_phase:
            st.ssthresh = self.initial_ssthresh + self.cwnd_g(st)

    def on_ack(self, st: CcState, ack: AckInfo) -> None:
        if not self.enabled:
            super().on_ack(st, ack)
            return
        if self.to_active:
            acked = ack.acked_bytes / st.mss_bytes
            if self.cwnd_be < self.ssthresh_be:
                self.cwnd_be += min(acked, 1.0) if acked else 0.0
            else:
                self.cwnd_be += acked / self.cwnd_be
            if ack.ack_seq >= self.to_high:
                self.to_active = False
                g = self.cwnd_g(st)
                st.cwnd = g + self.cwnd_be
                st.ssthresh = g + self.ssthresh_be
                self._log(st, "open")
            else:
                st.cwnd = self.cwnd_be   # forced segments are sent outside the window
                self._log(st, "timeout_recovery")
        else:
            self.reno_increase(st, ack.acked_bytes)
            self._log(st, "open")
        st.clamp()

    def on_dupack(self, st: CcState, ack: AckInfo) -> None:
        if not self.enabled:
            super().on_dupack(st, ack)
            return
        if self.fr_active and st.in_recovery:
            self.fr_dupacks += 1
            n = self.fr_dupacks
            if st.sack:
                if n <= self.fr_g:                    # forced transmission of new data;
                    st.force_segments += 1        # the pipe does the rest (docstring)
                    self.forced += 1.0
            elif n <= self.fr_g:
                st.cwnd += 1.0                        # forced transmission
                self.forced += 1.0
            elif n <= self.fr_g + self.fr_be / 2.0:
                pass                                  # ignored
            else:
                st.cwnd += 1.0                        # new data for further dupacks
            self._log(st, "fast_recovery")
        elif self.to_active:
            self.to_dupacks += 1
            if self.to_dupacks <= self.to_g or self.to_dupacks > self.to_outstanding:
                st.force_segments += 1            # a NEW segment, outside cwnd
                self.forced += 1.0
            self._log(st, "timeout_recovery")
        st.clamp()

    def on_enter_recovery(self, st: CcState) -> None:
        if not self.enabled:
            super().on_enter_recovery(st)
            return
        self.to_active = False
        self.initial_phase = False
        g = self.cwnd_g(st)
        be = max(st.cwnd - g, 0.0)
        self.fr_g, self.fr_be = g, be
        self.cwnd_update = g + be / 2.0
        self.fr_dupacks = 0
        self.fr_active = True
        self.forced = 0.0
        st.ssthresh = max(self.cwnd_update, 2.0)
        if st.sack:
            st.cwnd = st.ssthresh   # RFC 6675 4.2 with GTCP's ssthresh; the pipe, not
                                    # inflation, lets the later duplicate ACKs send
        # without SACK cwnd is deliberately unchanged until the full ACK
        self._log(st, "fast_recovery")
        st.clamp()

    def on_partial_ack(self, st: CcState, ack: AckInfo) -> None:
        super().on_partial_ack(st, ack)   # NewReno's deflation; nothing with SACK

    def on_exit_recovery(self, st: CcState, ack: AckInfo) -> None:
        if not self.enabled or not self.fr_active or self.cwnd_update is None:
            super().on_exit_recovery(st, ack)
        else:
            st.cwnd = self.cwnd_update
        self.fr_active = False
        self._log(st, "open")
        st.clamp()

    def on_timeout(self, st: CcState) -> None:
        if not self.enabled:
            super().on_timeout(st)
            return
        self.fr_active = False
        self.initial_phase = False
        g = self.cwnd_g(st)
        flight = st.flight_segments
        self.to_active = True
        self.to_dupacks = 0
        self.to_outstanding = flight
        self.to_high = st.snd_max                 # ssexit_thresh: highest sequence sent
        self.to_g = g
        self.cwnd_be = 1.0
        self.ssthresh_be = max((flight - g) / 2.0, 2.0)
        self.forced = 0.0
        st.cwnd = 1.0
        st.ssthresh = g + self.ssthresh_be
        self._log(st, "timeout_recovery")
        st.clamp()
