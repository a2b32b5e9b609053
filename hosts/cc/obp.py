"""OBP, the Open Box transport Protocol: rate-based MICMDC from path state.

Source: P. Loureiro, E. Monteiro, "What if the end systems knew the bandwidth
available in the network?" (sec. III-B-1, eqs. (1)-(5)); where the text lost a step,
docs/algorithms.md says how it is read.

The switches stamp the *narrow link* (smallest capacity on the path,
``Feedback.narrow_kbps``) and the *tight link* (smallest available bandwidth,
signed, ``Feedback.tight_kbps``; eq. (6) at the switch). The sender keeps an
equilibrium point EP and computes, on every ACK that carries feedback, a
transmission rate TR, with ``Max.TR`` = narrow link and ``AB`` = tight link:

* eq. (1), ``AB >= 0`` (multiplicative increase conditioned, MIC):
  ``TR = EP + EP * ((AB + gamma*Max.TR) / Max.TR) * (1 - delta * EP / sqrt(EP^2 + (Max.TR/2)^2))``
  -- eq. (2) is the control factor, eq. (3) the fairness factor;
* eq. (4), ``AB < 0`` (multiplicative decrease conditioned, MDC):
  ``PR = EP + EP * (AB / (Max.TR - AB))`` -- the new TR (docs/algorithms.md);
* eq. (5), once per RTT: ``EP = sum(TR) / T``, read as the *mean* of the TR values
  computed during the previous RTT (docs/algorithms.md);
* ``delta = 0.9``, ``gamma = 0.09``.

Units: the paper counts packets/s; here EP, TR, AB and Max.TR are all bit/s
(kb/s fields * 1000) of Ethernet frames, what the switches count and the
transport paces, so every ratio in eqs. (1)-(4) is unit-free and unchanged.

The sender is rate based (``rate_based = True``): ``CcState.pacing_rate_bps = TR``;
cwnd is only a safety bound on the data in flight,
``cwnd = inflight_gain * TR * srtt / (8 * frame_bytes)`` (``inflight_gain = 2``).

Decisions (the paper is silent on all of these):

* **RTT**: ``st.srtt_us`` (the latest RTT sample before the transport has an
  srtt). The RTT period of eq. (5) is time based: it ends at the first ACK at
  least one RTT after it started. The period is closed (EP updated) *before* the
  TR of the ACK that closes it is computed; a period in which no TR was computed
  leaves EP unchanged.
* **Start**: until the first ACK with feedback the flow is window based with the
  base class's initial window of 2 segments (no pacing). At the first feedback EP
  is set to ``cwnd`` segments per RTT -- TCP's initial window expressed as a rate,
  raised to the floor below (4 frames per RTT) -- and from then on TR rules.
* **No switch on the path** (echo ``hop_count == 0``, or the narrow/tight fields
  unset, or no echo at all): such ACKs compute no TR. A flow that never sees
  feedback stays plain NewReno (window based, no pacing). A flow that had feedback
  and then sees none for ``fallback_rtts`` (2) whole RTT periods (the path changed)
  falls back to NewReno with ``cwnd = ssthresh = TR * srtt / mss``; it returns to
  rate mode, with EP = that window's rate, at the next feedback.
* **Loss**: the paper reports none (the feedback prevents it). A retransmission
  timeout is taken as evidence that the feedback is wrong or stale:
  ``EP = TR = EP * timeout_factor`` (0.5).
* **Deviation -- losses the feedback does not explain**: on a real
  network a sender also loses packets where the stamped AB says there is room (a
  full input buffer, a port that drops before its AB turns negative, a link
  without a BWN switch). At the start of a fast recovery, if the last AB was
  ``>= 0``, ``EP = TR = EP * unexplained_loss_factor`` (0.5, TCP's halving, RFC
  5681 eq. 4); with AB < 0 eq. (4) is already reducing TR and nothing more is
  done. The paper's sender ignores such losses (it reports none);
  ``unexplained_loss_factor = 1`` restores that.
* **Floors** (the floor trap): EP and TR are never below
  ``min_segments_per_rtt`` (4 = DupThresh + 1) frames per RTT and cwnd never
  below 4 segments, so that one loss still leaves three later segments to
  produce three duplicate ACKs before the retransmission timer (restarted by
  every new ACK) expires. With the former floor of one segment per RTT and
  cwnd = 2, every loss at the floor was a timeout, which halved EP again: a flow
  that reached the floor could not leave it. ``Max.TR = 0`` (no capacity) yields
  no TR.
* **Deviation -- a floor at the path's EBN share** (off by default:
  ``share_floor = 0`` is the paper's sender). With ``share_floor = f > 0``, a TR
  is never below ``f`` times the EBN share the same ACK echoes (the smallest
  ``C / N`` on the path, Dutta & Zhang's EBN code, which every bwn switch stamps
  beside the narrow and tight link). Why: under the min-AB rule a flow that
  crosses several bottlenecks is cut (eq. 4) whenever any of them is
  overloaded but grows only by the smallest AB, so in the parking lot the long
  flow gets a small fraction of its max-min share (the "beat-down" of
  explicit-rate schemes over several bottlenecks; docs/algorithms.md). The
  floor cannot overload a link: for every flow on a link the path's smallest
  ``C / N`` is at most that link's ``C / N``, so the floors of a link's ``N``
  flows sum to at most ``f * C`` (the code rounds to 1/8 octave, up to 4.4 %
  above ``C / N``: ``f <= 0.95`` keeps the sum below C). It holds only while N
  counts the flows (the switch's linear counting, docs/dataplane.md). The floor
  applies where TR is computed (every ACK with feedback); timeouts and
  unexplained losses still cut EP and TR, and the next feedback lifts TR back
  to the floor. An unset code (255) sets no floor.
* **Bounds under forged or absurd feedback**: AB is taken as at most
  Max.TR (a tight link cannot have more room than the narrow link's capacity),
  and TR is kept within ``[floor, max(floor, Max.TR)]``: a flow never paces
  above the narrowest link it was told about, whatever AB says.
"""
import math
from typing import List, Optional

from bwn.protocol.wire import ebn_decode_kbps

from .base import AckInfo, CcState, CongestionControl, Feedback, SentSegment
from .filters import US_PER_S

#: cwnd never below DupThresh + 1 segments: one loss can still produce 3 duplicate ACKs.
MIN_CWND_SEGMENTS = 4.0


class Obp(CongestionControl):
    """OBP: rate-based MICMDC from the narrow/tight link feedback (Loureiro & Monteiro eqs. 1-5)."""

    name = "obp"
    rate_based = True

    def __init__(
        self,
        delta: float = 0.9,
        gamma: float = 0.09,
        inflight_gain: float = 2.0,
        timeout_factor: float = 0.5,
        fallback_rtts: int = 2,
        unexplained_loss_factor: float = 0.5,
        min_segments_per_rtt: float = 4.0,
        share_floor: float = 0.0,
    ) -> None:
        if not 0 <= delta <= 1:
            raise ValueError(f"delta must be in [0, 1] (eq. (3)'s fairness factor; the paper's 0.9), "
                             f"got {delta}")
        if gamma < 0:
            raise ValueError(f"gamma must be >= 0 (eq. (2)'s growth at AB = 0; the paper's 0.09), got {gamma}")
        if inflight_gain <= 0:
            raise ValueError("inflight_gain must be > 0")
        if not 0 < timeout_factor <= 1:
            raise ValueError("timeout_factor must be in (0, 1]")
        if not 0 < unexplained_loss_factor <= 1:
            raise ValueError("unexplained_loss_factor must be in (0, 1] (1: ignore such losses)")
        if min_segments_per_rtt <= 0:
            raise ValueError("min_segments_per_rtt must be > 0")
        if not 0 <= share_floor <= 0.95:
            raise ValueError(f"share_floor must be in [0, 0.95] (a fraction of the path's EBN share; "
                             f"0 = the paper's sender; above 0.95 the floors of a link's flows can "
                             f"exceed its capacity), got {share_floor}")
        self.delta = float(delta)
        self.gamma = float(gamma)
        self.inflight_gain = float(inflight_gain)
        self.timeout_factor = float(timeout_factor)
        self.fallback_rtts = int(fallback_rtts)
        self.unexplained_loss_factor = float(unexplained_loss_factor)
        self.min_segments_per_rtt = float(min_segments_per_rtt)
        self.share_floor = float(share_floor)
        self.unexplained_losses = 0
        self.mode = "window"
        self.ep: Optional[float] = None
        self.tr: Optional[float] = None
        self.round_trs: List[float] = []
        self.round_start_us: Optional[int] = None
        self.rounds_without_feedback = 0
        self.feedback_in_round = False
        self.max_tr: Optional[float] = None
        self.ab: Optional[float] = None
        self.share_bps: Optional[float] = None

    # -- the paper's equations ---------------------------------------------------
    def rate(self, ep: float, ab: float, max_tr: float) -> float:
        """TR from EP, AB and Max.TR: eq. (1) for AB >= 0, eq. (4) for AB < 0
        (AB above Max.TR is taken as Max.TR: see "Bounds")."""
        ab = min(ab, max_tr)
        if ab >= 0:
            control = (ab + self.gamma * max_tr) / max_tr                          # eq. (2)/EP
            fairness = 1.0 - self.delta * ep / math.sqrt(ep * ep + (max_tr / 2.0) ** 2)
            return ep + ep * control * fairness                                     # eq. (1)
        return ep + ep * (ab / (max_tr - ab))                                       # eq. (4)

    # -- helpers -----------------------------------------------------------------
    @staticmethod
    def _rtt_us(st: CcState, ack: Optional[AckInfo] = None) -> Optional[float]:
        for v in (st.srtt_us, ack.rtt_sample_us if ack else None, st.latest_rtt_us, st.min_rtt_us):
            if v:
                return float(v)
        return None

    @staticmethod
    def _valid(fb: Optional[Feedback]) -> bool:
        return (
            fb is not None
            and fb.hop_count > 0
            and fb.narrow_kbps is not None
            and fb.narrow_kbps > 0
            and fb.tight_kbps is not None
        )

    def _floor(self, st: CcState, rtt_us: float) -> float:
        """min_segments_per_rtt frames per RTT, in frame bits/s (the floor-trap fix)."""
        return self.min_segments_per_rtt * 8.0 * st.frame_bytes * US_PER_S / rtt_us

    @staticmethod
    def _ebn_share_bps(fb: Feedback) -> Optional[float]:
        """The path's EBN share the ACK echoes, in frame bits/s; None when no switch set it."""
        share_kbps = None if fb.ebn_code is None else ebn_decode_kbps(fb.ebn_code)   # 255: unset
        return None if share_kbps is None else share_kbps * 1000.0

    def _apply(self, st: CcState, rtt_us: Optional[float]) -> None:
        st.pacing_rate_bps = self.tr
        st.estimate_bps = self.tr
        if self.tr is not None and rtt_us:
            bound = self.inflight_gain * self.tr * (rtt_us / US_PER_S) / (8.0 * st.frame_bytes)
            st.cwnd = min(max(bound, MIN_CWND_SEGMENTS), st.max_cwnd)
        st.extra["ep_bps"] = self.ep
        st.extra["ab_bps"] = self.ab
        st.extra["max_tr_bps"] = self.max_tr
        if self.share_floor > 0:
            st.extra["ebn_share_bps"] = self.share_bps
        st.extra["mode"] = self.mode

    # -- callbacks ---------------------------------------------------------------
    def on_init(self, st: CcState) -> None:
        super().on_init(st)
        st.pacing_rate_bps = None
        st.estimate_bps = None
        self.mode = "window"

    def on_feedback(self, st: CcState, ack: AckInfo) -> None:
        rtt = self._rtt_us(st, ack)
        valid = self._valid(ack.feedback)
        if self.mode == "window":
            if not valid or not rtt:
                return
            # switch to rate mode: EP = the current window per RTT (2 MSS per initial RTT at start)
            self.mode = "rate"
            self.ep = max(st.cwnd * st.frame_bytes * 8.0 * US_PER_S / rtt, self._floor(st, rtt))
            self.tr = self.ep
            self.round_trs = []
            self.round_start_us = ack.now_us
            self.rounds_without_feedback = 0
            self.feedback_in_round = False
        # rate mode: close the RTT period first (eq. 5)
        if rtt and self.round_start_us is not None and ack.now_us - self.round_start_us >= rtt:
            if self.round_trs:
                self.ep = max(sum(self.round_trs) / len(self.round_trs), self._floor(st, rtt))
            if self.feedback_in_round:
                self.rounds_without_feedback = 0
            else:
                self.rounds_without_feedback += 1
            self.round_trs = []
            self.feedback_in_round = False
            self.round_start_us = ack.now_us
            if self.rounds_without_feedback >= self.fallback_rtts:
                self._fall_back(st, rtt)
                return
        if valid and self.ep is not None:
            fb = ack.feedback
            assert fb is not None and fb.narrow_kbps is not None and fb.tight_kbps is not None
            self.max_tr = fb.narrow_kbps * 1000.0
            self.ab = fb.tight_kbps * 1000.0
            tr = min(self.rate(self.ep, self.ab, self.max_tr), self.max_tr)   # "Bounds"
            # DEVIATION (share_floor > 0 only): never below a fraction of the path's EBN share.
            share_bps = self._ebn_share_bps(fb)
            if share_bps is not None:
                self.share_bps = share_bps                    # the latest, for the flow log
                tr = max(tr, min(self.share_floor * share_bps, self.max_tr))
            if rtt:
                tr = max(tr, self._floor(st, rtt))
            self.tr = tr
            self.round_trs.append(tr)
            self.feedback_in_round = True
        self._apply(st, rtt)

    def _fall_back(self, st: CcState, rtt_us: float) -> None:
        rate = self.tr or self.ep or 0.0
        self.mode = "window"
        st.cwnd = max(rate * (rtt_us / US_PER_S) / (8.0 * st.frame_bytes), 2.0)
        st.ssthresh = st.cwnd
        st.pacing_rate_bps = None
        st.extra["mode"] = self.mode
        st.clamp()

    def on_packet_sent(self, st: CcState, seg: SentSegment) -> None:
        pass

    def on_ack(self, st: CcState, ack: AckInfo) -> None:
        if self.mode == "window":
            super().on_ack(st, ack)

    def on_dupack(self, st: CcState, ack: AckInfo) -> None:
        if self.mode == "window":
            super().on_dupack(st, ack)

    def on_enter_recovery(self, st: CcState) -> None:
        if self.mode == "window":
            super().on_enter_recovery(st)
            return
        # DEVIATION from the paper (docs/algorithms.md, OBP "Loss"): a loss while the
        # tight link said there was room is one the feedback does not explain; back
        # off as TCP would. unexplained_loss_factor = 1 is the paper's sender.
        if self.ab is not None and self.ab >= 0 and self.unexplained_loss_factor < 1.0:
            assert self.ep is not None
            rtt = self._rtt_us(st)
            self.ep = self.ep * self.unexplained_loss_factor
            if rtt:
                self.ep = max(self.ep, self._floor(st, rtt))
            self.tr = self.ep
            self.round_trs = []
            self.unexplained_losses += 1
            st.extra["unexplained_losses"] = self.unexplained_losses
            self._apply(st, rtt)

    def on_partial_ack(self, st: CcState, ack: AckInfo) -> None:
        if self.mode == "window":
            super().on_partial_ack(st, ack)

    def on_exit_recovery(self, st: CcState, ack: AckInfo) -> None:
        if self.mode == "window":
            super().on_exit_recovery(st, ack)

    def on_timeout(self, st: CcState) -> None:
        if self.mode == "window":
            super().on_timeout(st)
            return
        rtt = self._rtt_us(st)
        assert self.ep is not None
        self.ep = self.ep * self.timeout_factor
        if rtt:
            self.ep = max(self.ep, self._floor(st, rtt))
        self.tr = self.ep
        self.round_trs = []
        self._apply(st, rtt)
