"""Loss recovery without SACK: NewReno (RFC 6582), or Reno (RFC 5681 sec. 3.2).

* Fast retransmit on the 3rd duplicate ACK (RFC 5681 sec. 3.2 step 2), if the
  ACK covers more than ``recover`` (RFC 6582 sec. 3.2 step 2: the "careful"
  variant, so one window's losses enter recovery once);
* NewReno fast recovery: a partial ACK retransmits the first unacknowledged
  segment (sec. 3.2 step 5) and the recovery point ``recover`` ends it (step 6);
  the retransmission timer restarts on the first partial ACK only (the
  "impatient" variant of step 5);
* ``recover`` is also set when the timer fires (sec. 3.2 step 2 and sec. 4.1).

With an algorithm whose ``recovery_style`` is "reno" the first new ACK ends
recovery (RFC 5681 sec. 3.2 step 6) and only a timeout sets the point a
duplicate ACK must pass (``rto_recover``), so Reno may halve twice per window:
NS-2's Reno and NewReno agents, the papers' baseline.

What cwnd does meanwhile is the congestion-control algorithm's
(``CongestionControl.on_enter_recovery``, ``on_dupack``, ``on_partial_ack``,
``on_exit_recovery``); here cwnd is compared with FlightSize
(:meth:`LossRecovery.flight`).
"""
from __future__ import annotations


from hosts.transport.recovery.base import DUPACK_THRESHOLD, LossRecovery, RecoveringSender



class NewRenoRecovery(LossRecovery):
    """RFC 6582 NewReno (or Reno) fast retransmit and fast recovery."""

    sack = False

    def __init__(self, sender: RecoveringSender) -> None:
        super().__init__(sender)
        self.rto_recover = 0            # "recover", set only by timeouts (recovery_style "reno")
        self._first_partial_done = False

    def _enter(self) -> None:
        s = self.s
        self._start()
        self._first_partial_done = False
        s._sync_state()
        s.cc.on_enter_recovery(s.st)
        s._retx_pending = True    # fast retransmit (RFC 5681 sec. 3.2 step 2)

    def full_ack(self, ack: int) -> bool:
        # RFC 6582 step 6; Reno: any new ACK (RFC 5681 sec. 3.2 step 6)
        return ack >= self.recover or self.s.cc.recovery_style == "reno"

    def on_partial_ack(self) -> bool:
        self.s._retx_pending = True               # partial ACK (RFC 6582 step 5)
        restart_timer = not self._first_partial_done  # "impatient" (step 5)
        self._first_partial_done = True
        return restart_timer

    def after_duplicate_ack(self, ack: int) -> None:
        s = self.s
        if s.dupacks == DUPACK_THRESHOLD and not s.st.in_recovery:
            if s.cc.recovery_style == "reno":
                allowed = ack >= self.rto_recover
            else:
                allowed = ack >= self.recover  # "covers more than recover" (RFC 6582 step 2)
            if allowed:
                self._enter()

    def on_timeout(self) -> None:
        s = self.s
        self.recover = s.snd_max       # RFC 6582 sec. 3.2 step 2 (after a timeout)
        self.rto_recover = s.snd_max
