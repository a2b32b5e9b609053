"""The interface every loss recovery implements (:class:`LossRecovery`), and the
steps they share; the package's docstring says when the sender calls each method."""
from __future__ import annotations

from typing import Optional, Protocol, Sequence, Tuple

from hosts.cc.base import CcState, CongestionControl
from hosts.transport.pacing import Pacer
from hosts.transport.sack import DUP_THRESH

DUPACK_THRESHOLD = DUP_THRESH  # RFC 5681 sec. 3.2, RFC 6675 DupThresh


class RecoveringSender(Protocol):
    """What a loss recovery reads and writes of its sender
    (:class:`hosts.transport.sender.Sender` is the one there is): the sequence
    space, the algorithm and its state, and the steps of sending."""

    mss_bytes: int
    snd_una: int
    snd_nxt: int
    snd_max: int
    stream_end: Optional[int]          # the FIN's sequence number once known
    rto_high: int                      # snd_max when the last timeout fired
    rwnd_bytes: int
    dupacks: int
    blocked: bool                      # the last emit would have blocked
    cc: CongestionControl
    st: CcState
    pacer: Pacer
    fast_recoveries: int
    forced_segments: int
    rescue_retransmits: int
    sack_reneging: int
    _retx_pending: bool                # resend the first unacknowledged segment now

    def _sync_state(self) -> None: ...

    def _data_left(self, seq: int) -> int: ...

    def _new_data_ready(self, seq: int, seg_len: int, now_us: int) -> bool: ...

    def _send_segment(self, seq: int, now_us: int, retransmit: bool, limit: Optional[int] = None) -> bool: ...


class LossRecovery:
    """What every loss recovery does the same way; the hooks it leaves to each
    algorithm are the methods that raise NotImplementedError."""

    #: True for SACK-based recovery (the summary's and the algorithms' ``sack``)
    sack = False

    def __init__(self, sender: RecoveringSender) -> None:
        self.s = sender
        # RFC 6582 "recover" (exclusive: one past the highest seq sent when recovery
        # started or the last timeout fired); RFC 6675's RecoveryPoint.
        self.recover = 0

    # -- entering recovery ---------------------------------------------------------------
    def _start(self) -> None:
        """The common first steps of entering fast recovery: the recovery point, the
        algorithm's view of it, the count."""
        s = self.s
        st = s.st
        self.recover = s.snd_max
        st.in_recovery = True
        st.recovery_point = s.snd_max
        s.fast_recoveries += 1
        s.note_window_cut()

    # -- the hooks -----------------------------------------------------------------------
    @property
    def sacked_bytes(self) -> Optional[int]:
        """Bytes the receiver SACKed above ``snd_una`` (None without SACK)."""
        return None

    def on_ack(self, ack: int, blocks: Sequence[Tuple[int, int]]) -> int:
        """An ACK of the established flow with ``blocks`` (its SACK blocks); returns
        the bytes SACKed for the first time."""
        return 0

    def on_cumulative_ack(self, new_sacked: int) -> None:
        """A new cumulative ACK, before the algorithm sees it."""

    def full_ack(self, ack: int) -> bool:
        """In recovery: whether the new cumulative ACK ``ack`` ends it."""
        raise NotImplementedError

    def on_exit(self) -> None:
        """Recovery ended (the sender has cleared ``in_recovery``)."""

    def on_partial_ack(self) -> bool:
        """In recovery, an ACK that does not end it (after the algorithm's
        ``on_partial_ack``); returns whether the retransmission timer restarts."""
        raise NotImplementedError

    def after_new_ack(self) -> None:
        """Outside recovery, after the algorithm's ``on_ack``."""

    def on_duplicate_ack(self, new_sacked: int) -> None:
        """A duplicate ACK, before the algorithm sees it."""

    def after_duplicate_ack(self, ack: int) -> None:
        """A duplicate ACK, after the algorithm's ``on_dupack``: enter recovery if due."""
        raise NotImplementedError

    def on_timeout(self) -> None:
        """The retransmission timer fired (RFC 6298 sec. 5.4-5.7): after it, the
        sender resends from ``snd_una``."""
        raise NotImplementedError

    def flight(self) -> int:
        """What ``cwnd`` is compared with: FlightSize, or RFC 6675's pipe."""
        s = self.s
        return s.snd_nxt - s.snd_una

    def next_sacked_start(self, seq: int) -> Optional[int]:
        """Where the receiver's next SACKed data above ``seq`` starts (a resent
        segment stops there), None if nowhere."""
        return None

    def sacked_range_at(self, seq: int) -> Optional[Tuple[int, int]]:
        """The SACKed range holding ``seq`` (the walk after a timeout skips it)."""
        return None

    def picks_segments(self) -> bool:
        """Whether the recovery chooses what is sent now (:meth:`send_next`)."""
        return False

    def send_next(self, now_us: int, cwnd_bytes: Optional[int], rate_bps: Optional[float]) -> bool:
        """Send the segment the recovery chooses, if the window (``cwnd_bytes``;
        None: a forced transmission) and pacing allow; False when nothing (more)
        can be sent now."""
        raise NotImplementedError

    def send_forced(self, now_us: int) -> bool:
        """Send the algorithm's forced transmissions (``force_segments``) while
        :meth:`picks_segments`; False if the sender's pump must stop."""
        raise NotImplementedError
