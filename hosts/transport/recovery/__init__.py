"""The sender's loss recovery: one module per algorithm behind one small interface.

As Linux keeps one module per congestion-control algorithm, the sender keeps one
per loss-recovery algorithm, chosen in the handshake:

* :mod:`hosts.transport.recovery.newreno` -- without SACK: fast retransmit on the
  3rd duplicate ACK and NewReno fast recovery with partial ACKs (RFC 6582), or
  Reno's (RFC 5681 sec. 3.2) for an algorithm whose ``recovery_style`` is "reno";
* :mod:`hosts.transport.recovery.sack` -- with SACK (RFC 2018, when the receiver
  accepts it): the scoreboard of :mod:`hosts.transport.sack` and RFC 6675's
  conservative loss recovery.

The :class:`~hosts.transport.sender.Sender` owns the sequence space, the timers
(RFC 6298), the go-back-N walk after a timeout, pacing and the sending itself; a
:class:`LossRecovery` owns what is known of the losses (the recovery point, the
scoreboard, the duplicate ACKs that count towards recovery) and decides when
recovery starts and ends, which segments are resent during it and what ``cwnd``
is compared with. The sender calls it at fixed points:

* on every ACK of an established flow, first :meth:`LossRecovery.on_ack` (the
  ACK's SACK blocks);
* for a new cumulative ACK, :meth:`~LossRecovery.on_cumulative_ack` before the
  algorithm sees it, then in recovery :meth:`~LossRecovery.full_ack` decides
  between :meth:`~LossRecovery.on_exit` and :meth:`~LossRecovery.on_partial_ack`,
  outside it :meth:`~LossRecovery.after_new_ack`;
* for a duplicate ACK, :meth:`~LossRecovery.on_duplicate_ack` before the
  algorithm sees it and :meth:`~LossRecovery.after_duplicate_ack` after (where
  recovery is entered);
* on a retransmission timeout, :meth:`~LossRecovery.on_timeout`;
* while sending: :meth:`~LossRecovery.flight` (what ``cwnd`` is compared with),
  :meth:`~LossRecovery.next_sacked_start` and :meth:`~LossRecovery.sacked_range_at`
  (data the receiver holds, skipped when resending), and, while
  :meth:`~LossRecovery.picks_segments`, :meth:`~LossRecovery.send_next` and
  :meth:`~LossRecovery.send_forced` choose the segments.

Each method runs on every ACK or segment: they are small, and a recovery reads
and writes the sender's fields directly (as a Linux recovery module does its
``tcp_sock``) instead of through accessors.
"""
from __future__ import annotations


from hosts.transport.recovery.base import DUPACK_THRESHOLD, LossRecovery, RecoveringSender
from hosts.transport.recovery.newreno import NewRenoRecovery
from hosts.transport.recovery.sack import SackRecovery


__all__ = ["DUPACK_THRESHOLD", "LossRecovery", "NewRenoRecovery", "RecoveringSender", "SackRecovery", "recovery_for"]


def recovery_for(sender: RecoveringSender, sack: bool) -> LossRecovery:
    """The loss recovery of a flow that negotiated SACK (``sack``) or not."""
    return SackRecovery(sender) if sack else NewRenoRecovery(sender)
