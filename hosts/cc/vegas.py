"""TCP Vegas congestion avoidance and modified slow start, with NewReno recovery.

Source: L.S. Brakmo, S.W. O'Malley, L.L. Peterson, "TCP Vegas: New Techniques for
Congestion Detection and Avoidance", SIGCOMM 1994 (sec. 3.2 congestion avoidance,
sec. 3.3 slow start; the paper numbers no equations), and its structure as in
Linux ``net/ipv4/tcp_vegas.c``:

* ``BaseRTT`` = the minimum RTT sample of the flow;
* once per RTT (when an ACK covers the first byte sent after the previous
  adjustment, Linux's ``beg_snd_nxt``):
  ``Expected = cwnd / BaseRTT``, ``Actual = cwnd / RTT``,
  ``Diff = (Expected - Actual) * BaseRTT = cwnd * (1 - BaseRTT / RTT)`` segments
  (the number of this flow's segments queued in the network);
* congestion avoidance: ``Diff < alpha`` -> cwnd + 1; ``Diff > beta`` -> cwnd - 1;
  otherwise unchanged;
* modified slow start: exponential growth only every other RTT (cwnd is held in
  between so that Expected and Actual are compared on a constant window); leave
  slow start when ``Diff > gamma``, with ``cwnd = min(cwnd, cwnd*BaseRTT/RTT + 1)``
  and ``ssthresh = min(ssthresh, cwnd)`` (Linux's exit);
* losses: NewReno fast retransmit / fast recovery and RTO handling of the base
  class, as Linux Vegas does (it falls back to Reno's ``ssthresh``, cwnd/2). The
  EBN paper blames Vegas's poor showing in its NS-2 runs on the NS-2 Vegas agent
  lacking fast retransmit/fast recovery; this module has them, so our Vegas is
  expected to do better than the paper's.

Decisions:

* **alpha = 1, beta = 3, gamma = 1**: the paper's values (and NS-2's
  ``v_alpha_ 1, v_beta_ 3, v_gamma_ 1``, i.e. the Vegas the EBN paper compared
  with). Linux uses alpha = 2, beta = 4, gamma = 1: pass ``--param alpha=2
  --param beta=4`` for that.
* **RTT** in Diff is the *minimum* RTT sample seen during the last RTT (Linux; it
  filters delayed-ACK noise), not the paper's RTT of one distinguished segment.
  With 2 or fewer samples in that RTT the comparison is not made and the ACK gets
  the Reno increase (Linux's ``cntRTT <= 2`` rule).
* **cwnd** in Expected/Actual is the current cwnd at the end of the RTT (Linux),
  not the bytes actually sent during it.
* The +1 / -1 of congestion avoidance is applied at once at the RTT boundary
  (Linux), not spread over the ACKs of the RTT. cwnd never drops below 2 there.
* The slow-start "every other RTT" toggle starts in a growing RTT and flips at each
  RTT boundary; ``every_other_rtt=False`` grows every RTT (Linux's behaviour).
* After fast recovery or a timeout the per-RTT bookkeeping restarts (Linux
  re-enables Vegas on returning to the Open state) and slow start starts with a
  growing RTT.
"""
from typing import Optional

from .base import AckInfo, CcState, CongestionControl, SentSegment
from .filters import RttMin, US_PER_S, as_bool


class Vegas(CongestionControl):
    """TCP Vegas: keep alpha..beta segments queued (Diff once per RTT), modified slow start, NewReno recovery."""

    name = "vegas"

    def __init__(
        self,
        alpha: float = 1.0,
        beta: float = 3.0,
        gamma: float = 1.0,
        every_other_rtt: bool = True,
    ) -> None:
        if not 0 <= alpha <= beta:
            raise ValueError(f"need 0 <= alpha <= beta, got alpha={alpha} beta={beta}")
        if gamma < 0:
            raise ValueError(f"gamma must be >= 0 (segments of Diff that end slow start), got {gamma}")
        self.alpha = float(alpha)
        self.beta = float(beta)
        self.gamma = float(gamma)
        self.every_other_rtt = as_bool(every_other_rtt)
        self.base_rtt = RttMin()
        self.snd_nxt = 0
        self.beg_snd_nxt = 0
        self.cnt_rtt = 0
        self.round_min_rtt_us: Optional[int] = None
        self.grow = True
        self.diff: Optional[float] = None

    def on_init(self, st: CcState) -> None:
        super().on_init(st)
        self._restart_rounds()

    def _restart_rounds(self) -> None:
        self.beg_snd_nxt = self.snd_nxt
        self.cnt_rtt = 0
        self.round_min_rtt_us = None
        self.grow = True

    def on_packet_sent(self, st: CcState, seg: SentSegment) -> None:
        self.snd_nxt = max(self.snd_nxt, seg.seq + seg.size_bytes)

    def on_feedback(self, st: CcState, ack: AckInfo) -> None:
        rtt = ack.rtt_sample_us
        if rtt is not None and rtt > 0:
            self.base_rtt.update(rtt)
            self.cnt_rtt += 1
            if self.round_min_rtt_us is None or rtt < self.round_min_rtt_us:
                self.round_min_rtt_us = rtt

    def _slow_start(self, st: CcState, acked_bytes: int) -> None:
        if acked_bytes > 0:
            st.cwnd = min(st.cwnd + min(acked_bytes / st.mss_bytes, 1.0), st.max_cwnd)

    def on_ack(self, st: CcState, ack: AckInfo) -> None:
        in_ss = st.cwnd < st.ssthresh
        if ack.ack_seq <= self.beg_snd_nxt:
            # inside an RTT: only slow start moves cwnd (in its growing RTTs)
            if in_ss and (self.grow or not self.every_other_rtt):
                self._slow_start(st, ack.acked_bytes)
            return
        # --- once per RTT -------------------------------------------------------
        self.beg_snd_nxt = self.snd_nxt
        base = self.base_rtt.get(st)
        rtt = self.round_min_rtt_us
        if self.cnt_rtt <= 2 or not base or not rtt:
            self.reno_increase(st, ack.acked_bytes)
        else:
            self.diff = st.cwnd * (1.0 - base / rtt)          # (Expected - Actual) * BaseRTT
            st.estimate_bps = st.cwnd * st.mss_bytes * 8.0 * US_PER_S / rtt  # Actual
            st.extra["expected_bps"] = st.cwnd * st.mss_bytes * 8.0 * US_PER_S / base
            if in_ss:
                if self.diff > self.gamma:
                    st.cwnd = min(st.cwnd, st.cwnd * base / rtt + 1.0)
                    st.ssthresh = min(st.ssthresh, st.cwnd)
                else:
                    self.grow = not self.grow
                    if self.grow or not self.every_other_rtt:
                        self._slow_start(st, ack.acked_bytes)
            else:
                if self.diff > self.beta:
                    st.cwnd -= 1.0
                    st.ssthresh = min(st.ssthresh, st.cwnd)
                elif self.diff < self.alpha:
                    st.cwnd += 1.0
            st.cwnd = min(max(st.cwnd, 2.0), st.max_cwnd)
        self.cnt_rtt = 0
        self.round_min_rtt_us = None
        st.extra["diff"] = self.diff
        st.extra["base_rtt_us"] = base
        st.clamp()

    def on_exit_recovery(self, st: CcState, ack: AckInfo) -> None:
        super().on_exit_recovery(st, ack)
        self._restart_rounds()

    def on_timeout(self, st: CcState) -> None:
        super().on_timeout(st)
        self._restart_rounds()
