"""Loss recovery with SACK: RFC 6675's conservative recovery over the scoreboard.

Used when the sender offers SACK (``SenderConfig.sack``, the default) and the
receiver accepts it in the handshake (RFC 2018 sec. 2). The scoreboard is
:class:`hosts.transport.sack.Scoreboard` (RFC 6675 sec. 3-4: ``Update()``,
``IsLost()``, ``SetPipe()``); this module is RFC 6675 sec. 5:

* DupAcks are counted as sec. 2 defines them: ACKs that SACK new data; a
  cumulative ACK resets the count, and is itself one when it SACKs new data;
* recovery is entered at ``DupThresh`` of them or when ``IsLost(HighACK + 1)``
  (steps 1-4), not before the cumulative ACK has passed the last recovery point
  (sec. 5.1); the first unacknowledged segment is retransmitted at once (4.3);
* during recovery the segments are chosen by ``NextSeg()`` (rules 1-4, one
  rescue retransmission per recovery) while ``cwnd - pipe`` allows one (step C);
* the cumulative ACK of the recovery point ends it (step A); the
  retransmission timer is restarted by every cumulative ACK (RFC 6298 sec. 5.3);
* after a timeout the scoreboard survives (sec. 5.1), unless the receiver is
  seen to renege (RFC 2018 sec. 8), so the sender's go-back-N walk resends only
  data not SACKed.

Forced transmissions (GTCP's) during recovery are what ``NextSeg()`` picks: lost
data first, then new data.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

from hosts.transport.recovery.base import DUPACK_THRESHOLD, LossRecovery, RecoveringSender
from hosts.transport.sack import Scoreboard



class SackRecovery(LossRecovery):
    """RFC 6675 loss recovery of one flow."""

    sack = True

    def __init__(self, sender: RecoveringSender) -> None:
        super().__init__(sender)
        self.sb = Scoreboard(sender.mss_bytes)
        self.dupacks = 0       # RFC 6675 DupAcks: ACKs that SACKed new data

    @property
    def sacked_bytes(self) -> Optional[int]:
        return self.sb.sacked_bytes

    # -- ACKs ----------------------------------------------------------------------------
    def on_ack(self, ack: int, blocks: Sequence[Tuple[int, int]]) -> int:
        s = self.s
        una = max(ack, s.snd_una)
        self.sb.advance(una)
        if blocks:
            return self.sb.update(blocks, una, s.snd_max)
        return 0

    def on_cumulative_ack(self, new_sacked: int) -> None:
        # RFC 6675 sec. 5: a cumulative ACK resets DupAcks; it still counts as a
        # duplicate acknowledgment when it SACKs new data (sec. 2).
        self.dupacks = 1 if new_sacked and not self.s.st.in_recovery else 0

    def full_ack(self, ack: int) -> bool:
        return ack >= self.recover       # RFC 6675 step A

    def on_exit(self) -> None:
        self.sb.high_rxt = self.s.snd_una
        self.sb.rescue_rxt = None

    def on_partial_ack(self) -> bool:
        return True

    def after_new_ack(self) -> None:
        self._maybe_enter()

    def on_duplicate_ack(self, new_sacked: int) -> None:
        if new_sacked and not self.s.st.in_recovery:
            self.dupacks += 1

    def after_duplicate_ack(self, ack: int) -> None:
        self._maybe_enter()

    def _maybe_enter(self) -> None:
        """RFC 6675 sec. 5 steps (1)-(2): DupAcks >= DupThresh, or IsLost(HighACK + 1);
        not before the cumulative ACK passed the last recovery point (sec. 5.1)."""
        s = self.s
        if s.st.in_recovery or s.snd_una < self.recover or s.snd_una >= s.snd_max:
            return
        if self.dupacks >= DUPACK_THRESHOLD or (self.sb and self.sb.is_lost(s.snd_una, s.snd_una)):
            self._enter()

    def _enter(self) -> None:
        s = self.s
        sb = self.sb
        self._start()
        sb.high_rxt = s.snd_una   # set to the end of the fast retransmission (4.3)
        sb.rescue_rxt = None
        self.dupacks = 0
        s._sync_state()
        s.cc.on_enter_recovery(s.st)
        s._retx_pending = True    # fast retransmit (RFC 6675 4.3)
        seq = s.snd_una
        nxt = sb.next_sacked_start(seq)
        seg_end = seq + s._data_left(seq) if s.stream_end is None or seq < s.stream_end else seq + 1
        if nxt is not None:
            seg_end = min(seg_end, nxt)
        sb.high_rxt = seg_end          # RFC 6675 4.3: HighRxt = RescueRxt = end
        sb.rescue_rxt = seg_end        # of the retransmitted segment

    def on_timeout(self) -> None:
        s = self.s
        self.recover = s.snd_max        # RFC 6675 sec. 5.1: RecoveryPoint = HighData
        self.dupacks = 0
        sb = self.sb
        if sb and sb.ranges[0][0] <= s.snd_una:
            # The receiver SACKed data its cumulative ACK does not cover: it reneged
            # (RFC 2018 sec. 8). Our receiver never does; a scoreboard that lies
            # would make the walk skip data the receiver lacks, so forget it.
            sb.clear()
            s.sack_reneging += 1
        sb.high_rxt = s.snd_una
        sb.rescue_rxt = None

    # -- sending -------------------------------------------------------------------------
    def flight(self) -> int:
        """RFC 6675 pipe, in the states a flow can be in."""
        s = self.s
        una, nxt = s.snd_una, s.snd_nxt
        sb = self.sb
        if nxt < s.snd_max:
            # Go-back-N walk after a timeout: what the walk has resent and the receiver
            # has not SACKed. Data sent after the timeout (forced transmissions, at or
            # above rto_high) is outside this window, as without SACK.
            return sb.unsacked_between(una, nxt) if sb else nxt - una
        if una < s.rto_high:
            # Timeout recovery, walk done: everything below rto_high that is not SACKed
            # was resent once and its original counts as lost (RFC 6675 sec. 5.1).
            return sb.pipe(una, s.snd_max, high_rxt=s.rto_high, lost_below=s.rto_high)
        if s.st.in_recovery:
            return sb.pipe(una, s.snd_max)
        if not sb:
            return nxt - una
        return sb.pipe(una, s.snd_max, high_rxt=una)   # RFC 6675 step (3.1)

    def next_sacked_start(self, seq: int) -> Optional[int]:
        return self.sb.next_sacked_start(seq)

    def sacked_range_at(self, seq: int) -> Optional[Tuple[int, int]]:
        return self.sb.sacked_range_at(seq)

    def picks_segments(self) -> bool:
        return self.s.st.in_recovery

    def send_next(self, now_us: int, cwnd_bytes: Optional[int], rate_bps: Optional[float]) -> bool:
        """RFC 6675 sec. 5 step (C): send one segment chosen by NextSeg() if
        ``cwnd - pipe`` allows it (``cwnd_bytes`` None: a forced transmission,
        outside the window); False when nothing (more) can be sent now."""
        s = self.s
        choice = self._next_seg(now_us)
        if choice is None:
            return False
        seq, seg_len, rule = choice
        if seg_len:
            if cwnd_bytes is not None:
                pipe = self.flight()
                if pipe > 0 and pipe + seg_len > cwnd_bytes:
                    return False
            if s.pacer.holds(now_us, rate_bps):
                return False
        is_new = seq >= s.snd_max
        if not s._send_segment(seq, now_us, not is_new, seq + seg_len if seg_len else None):
            return False
        end = seq + (seg_len or 1)
        sb = self.sb
        if is_new:
            s.snd_nxt = end                             # (C.3) HighData
        elif rule == 4:
            sb.rescue_rxt = self.recover                # RescueRxt = RecoveryPoint; HighRxt unchanged
            s.rescue_retransmits += 1
        elif end > sb.high_rxt:
            sb.high_rxt = end                           # (C.2)
        return True

    def send_forced(self, now_us: int) -> bool:
        """The forced transmissions are NextSeg()'s picks, outside cwnd; credits
        that find nothing to send are dropped."""
        s = self.s
        st = s.st
        while st.force_segments > 0:
            if not self.send_next(now_us, None, st.pacing_rate_bps):
                if s.pacer.waiting or s.blocked:
                    return False
                st.force_segments = 0
                return True
            st.force_segments -= 1
            s.forced_segments += 1
        return True

    def _next_seg(self, now_us: int) -> Optional[Tuple[int, int, int]]:
        """RFC 6675 sec. 4 NextSeg(): ``(seq, length, rule)`` of the next segment, or None."""
        s = self.s
        sb = self.sb
        una, mx, mss = s.snd_una, s.snd_max, s.mss_bytes
        end = s.stream_end
        # (1) the first lost, unSACKed range above HighRxt and below the highest SACK
        hole = sb.next_lost_hole(una, sb.high_rxt)
        if hole is not None:
            return hole[0], min(mss, hole[1] - hole[0], s._data_left(hole[0])), 1
        # (2) new data, if the application has some and the receive window allows
        nxt = s.snd_nxt
        if end is None or nxt <= end:
            seg_len = mss if end is None else min(mss, end - nxt)
            if seg_len == 0:
                return nxt, 0, 2                          # the FIN (exempt from windows)
            if (nxt + seg_len <= una + s.rwnd_bytes
                    and s._new_data_ready(nxt, seg_len, now_us)):
                return nxt, seg_len, 2
        # (3) an unSACKed range above HighRxt below the highest SACK, lost or not
        top = sb.highest_sacked_end
        if top is not None:
            hole = sb.next_hole(max(sb.high_rxt, una), top)
            if hole is not None:
                return hole[0], min(mss, hole[1] - hole[0], s._data_left(hole[0])), 3
        # (4) one rescue retransmission per recovery: a segment that includes the
        # highest outstanding unSACKed byte, if HighACK > RescueRxt
        if sb.rescue_rxt is None or una > sb.rescue_rxt:
            high = sb.highest_unsacked(una, mx)
            if high is not None:
                if end is not None and high >= end > una and not sb.is_sacked(end - 1):
                    # Our FIN is a packet of its own; the last data byte is what the
                    # receiver needs first (TCP would carry both in one segment).
                    high = end - 1
                start = max(high + 1 - mss, sb.hole_start(high, una))
                if end is not None and start >= end:
                    return start, 0, 4                    # the FIN itself
                return start, min(high + 1 - start, s._data_left(start)), 4
        return None
