"""The sending half of the transport: a TCP-like sender driven by ACKs and timers.

Pure logic, no sockets and no clock: every method takes ``now_us`` and packets
leave through the ``emit`` callback, so the same object runs in the event loop
(:mod:`hosts.transport.loop`) and in the unit tests' simulated channel.

What the transport owns (docs/transport.md; hosts/cc/base.py owns the numbers):

* sequence numbers: byte offsets from 0; SYN has seq 0 and consumes nothing,
  FIN has seq = stream length and consumes one number (like TCP's FIN);
* cumulative ACKs and duplicate ACK detection (RFC 5681 sec. 2: an ACK that
  acknowledges nothing new while data is outstanding; our ACKs carry no data and
  the window only moves with ``ack``, so the window condition always holds);
* **with SACK** (``SenderConfig.sack``, the default, when the receiver accepts it
  in the handshake, RFC 2018 sec. 2): the scoreboard of
  :mod:`hosts.transport.sack` and RFC 6675 loss recovery -- DupAcks counted
  as RFC 6675 sec. 2 defines them (ACKs that SACK new data), recovery entered at
  ``DupThresh`` of them or when ``IsLost(HighACK + 1)`` (sec. 5 steps 1-4),
  segments chosen by ``NextSeg()`` (rules 1-4, one rescue retransmission per
  recovery) while ``cwnd - pipe`` allows one (step C), recovery ended by the
  cumulative ACK of the recovery point (step A); the retransmission timer is
  restarted by every cumulative ACK (RFC 6298 sec. 5.3);
* **without SACK**: fast retransmit on the 3rd duplicate ACK and NewReno fast
  recovery with partial ACKs (RFC 6582 sec. 3.2) and the recovery point
  ``recover`` (sec. 3.2 step 2, also set after a timeout: sec. 3.2 step 2 and
  sec. 4.1), the "impatient" timer reset on the first partial ACK only (sec. 3.2
  step 5); with ``recovery_style == "reno"`` the first new ACK ends recovery
  (RFC 5681 sec. 3.2 step 6) and only a timeout sets ``recover``, so Reno may
  halve twice per window (NS-2's Reno/NewReno agents: the papers' baseline);
* the retransmission timer of RFC 6298 (:mod:`hosts.transport.rto`): start
  when data is sent and the timer is off (5.1), stop when all is acknowledged
  (5.2), restart on a new ACK (5.3), on expiry retransmit the first unacknowledged
  segment, back off and restart (5.4-5.6); then go-back-N from ``snd_una`` in slow
  start (``cwnd`` = 1 from ``on_timeout``) -- with SACK the walk skips every range
  the receiver SACKed (the scoreboard survives the timeout, RFC 6675 sec. 5.1,
  unless the receiver is seen to renege), so only data not SACKed is resent;
* forced transmissions: ``CcState.force_segments`` segments leave at once,
  outside cwnd (GTCP's forced transmissions): *new* data -- also during timeout
  recovery, as the paper wants -- except in SACK fast recovery, where they are
  what NextSeg() picks (lost data first, then new data); the go-back-N walk
  after a timeout skips what was sent after the timeout;
* Karn's rule: data segments sent again carry the RETX flag, the receiver echoes it
  with the timestamp, and such ACKs give no RTT sample;
* the receive window: never send beyond ``snd_una + rwnd``;
* an application-limited source (``SenderConfig.app_rate_bps``): new data exists
  only at that rate, sent in whole segments as it appears;
* pacing: when ``CcState.pacing_rate_bps`` is set, segments leave at most at that
  rate (next-send-time pacing with a ``pacing_burst_us`` allowance for timer
  lateness), counted in Ethernet frame bytes like the switches' rates.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

from hosts.cc.base import AckInfo, CcState, CongestionControl, Feedback, SentSegment
from hosts.flowlog import RttSamples, TimeSeriesLog, rtt_stats_ms
from hosts.transport.rto import DEFAULT_INITIAL_RTO_US, DEFAULT_MAX_RTO_US, DEFAULT_MIN_RTO_US, RtoEstimator
from hosts.transport.sack import DUP_THRESH, Scoreboard
from hosts.transport.source import StreamSource
from hosts.transport.wire import (
    ACK_IN_STRUCT,
    ACK_VK,
    BWN_HEADER_LEN,
    DEFAULT_MSS_BYTES,
    ETHERNET_OVERHEAD_BYTES,
    F_ACK,
    F_DATA,
    F_FIN,
    F_RETX,
    F_RST,
    F_SYN,
    HDR_WORDS,
    HEADERS_LEN,
    IP_UDP_OVERHEAD_BYTES,
    TRANSPORT_VERSION,
    TS_MASK,
    OptionError,
    TransportOptions,
    encode_options,
    feedback_from_echo,
    pack_data_headers,
    parse_options,
    ts_diff_us,
)

from bwn.protocol.wire import ebn_decode_kbps

DUPACK_THRESHOLD = DUP_THRESH  # RFC 5681 sec. 3.2, RFC 6675 DupThresh
DEFAULT_RWND_BYTES = 64 * 1024  # assumed until the SYN-ACK tells the real window
#: Bytes of a data frame beyond its payload: Ethernet + IPv4 + UDP + BWN + transport
#: header (14 + 20 + 8 + 24 + 36 = 102), what the switches' meters and rates count.
FRAME_OVERHEAD_BYTES = HEADERS_LEN + IP_UDP_OVERHEAD_BYTES + ETHERNET_OVERHEAD_BYTES
_NO_OPTIONS = TransportOptions()

Emit = Callable[[memoryview], bool]  # False: the socket would block, try again later


class SenderState(enum.Enum):
    CONNECTING = "connecting"
    ESTABLISHED = "established"
    DONE = "done"
    FAILED = "failed"


@dataclass
class SenderConfig:
    mss_bytes: int = DEFAULT_MSS_BYTES
    initial_rto_us: int = DEFAULT_INITIAL_RTO_US
    min_rto_us: int = DEFAULT_MIN_RTO_US
    max_rto_us: int = DEFAULT_MAX_RTO_US
    max_consecutive_timeouts: int = 12   # then give up (Linux tcp_retries2 is 15)
    connect_timeout_us: int = 10_000_000
    duration_us: Optional[int] = None    # --duration: stop new data after this long
    pacing_burst_us: int = 3_000         # pacing may catch up this much lateness (docs)
    fin_give_up_timeouts: int = 3        # all data ACKed but no FIN-ACK: done after this
    app_rate_bps: Optional[float] = None # application-limited source: data appears at this rate
    sack: bool = True                    # offer SACK (RFC 2018); --no-sack: NewReno recovery


class Sender:
    """One flow's sender (SYN, data, FIN) over a datagram channel."""

    def __init__(
        self,
        cc: CongestionControl,
        source: StreamSource,
        emit: Emit,
        *,
        flow_id: int,
        config: Optional[SenderConfig] = None,
        log: Optional[TimeSeriesLog] = None,
    ) -> None:
        self.cc = cc
        self.source = source
        self.emit = emit
        self.flow_id = flow_id & 0xFFFFFFFF
        self.cfg = config or SenderConfig()
        self.mss_bytes = self.cfg.mss_bytes
        self.log = log
        self.st = CcState(mss_bytes=self.mss_bytes, frame_overhead_bytes=FRAME_OVERHEAD_BYTES)
        self.rto = RtoEstimator(initial_rto_us=self.cfg.initial_rto_us,
                                min_rto_us=self.cfg.min_rto_us, max_rto_us=self.cfg.max_rto_us)
        self.state = SenderState.CONNECTING
        self.fail_reason: Optional[str] = None
        self.interrupted = False
        self.blocked = False  # the last emit would have blocked

        # Sequence space (RFC 793 names). snd_nxt is the next byte the sender sends
        # in order: it falls back to snd_una after a timeout (go-back-N) and walks up
        # to snd_max again; during SACK recovery retransmissions do not move it.
        self.snd_una = 0
        self.snd_nxt = 0
        self.snd_max = 0
        self.stream_end: Optional[int] = source.length_bytes  # FIN's seq once known
        self.rwnd_bytes = DEFAULT_RWND_BYTES
        # Loss recovery (RFC 5681 / 6582 / 6675).
        self.sack = False      # negotiated in the handshake (cfg.sack and the receiver's answer)
        self.sb = Scoreboard(self.mss_bytes)
        self.dupacks = 0       # RFC 5681 duplicate ACKs in a row (AckInfo.dupacks)
        self.sack_dupacks = 0  # RFC 6675 DupAcks: ACKs that SACKed new data
        self.recover = 0       # RFC 6582 "recover", exclusive: one past the highest seq sent
        self.rto_recover = 0   # the same, set only by timeouts (used by recovery_style "reno")
        self.rto_high = 0      # snd_max when the last timeout fired (what the walk resends)
        self._first_partial_done = False
        self._retx_pending = False
        self.rto_deadline_us: Optional[int] = None
        self._consecutive_timeouts = 0
        # Pacing.
        self.pace_next_us = 0
        self._pace_waiting = False
        # Application-limited source (--app-rate-mbit): when the next segment's bytes exist.
        self._app_wait_until_us: Optional[int] = None
        # Times.
        self.start_us: Optional[int] = None
        self.established_us: Optional[int] = None
        self.data_done_us: Optional[int] = None
        self.end_us: Optional[int] = None
        self._syn_deadline_us: Optional[int] = None
        self._syn_sends = 0
        self._duration_end_us: Optional[int] = None
        self._duration_applied = False
        # Counters.
        self.packets_sent = 0
        self.payload_bytes_sent = 0
        self.retransmits = 0
        self.timeouts = 0
        self.fast_recoveries = 0
        self.acks_received = 0
        self.dupacks_total = 0
        self.bad_packets = 0
        self.forced_segments = 0
        self.rescue_retransmits = 0
        self.sack_reneging = 0
        self.receiver_stats: Optional[Tuple[int, int, int, int]] = None
        self.rtt_samples = RttSamples()
        self.last_rtt_sample_us: Optional[int] = None
        # ACK send-time (receiver clock) unwrapped from 32 bits.
        self._ack_ts_raw: Optional[int] = None
        self._ack_ts_us = 0
        # The last echo seen, decoded once (most ACKs carry the same echo).
        self._echo_key: Optional[Tuple[int, int, int, int, int]] = None
        self.feedback: Optional[Feedback] = None

        self._syn_options = encode_options(sack_permitted=True) if self.cfg.sack else b""
        self._buf = bytearray(HEADERS_LEN + max(self.mss_bytes, len(self._syn_options)))
        self._view = memoryview(self._buf)

    # -- life cycle ---------------------------------------------------------------------
    def start(self, now_us: int) -> None:
        """Initialise the algorithm and send the SYN."""
        self.start_us = now_us
        self.st.now_us = now_us
        self.cc.on_init(self.st)
        self.st.clamp()
        self._send_syn(now_us, retransmit=False)

    @property
    def finished(self) -> bool:
        return self.state in (SenderState.DONE, SenderState.FAILED)

    def finish_now(self, now_us: int) -> None:
        """End the stream at the bytes already sent (SIGINT): FIN follows them."""
        self.interrupted = True
        if self.state is SenderState.CONNECTING:
            self._fail(now_us, "interrupted before the connection was established")
            return
        self._end_stream_at_sent()
        self.pump(now_us)

    def _end_stream_at_sent(self) -> None:
        """Make the bytes sent so far the whole stream (the FIN follows them)."""
        if self.stream_end is None or self.stream_end > self.snd_max:
            self.stream_end = self.snd_max

    def on_unreachable(self, now_us: int) -> None:
        """The network says no one listens at the receiver's port (ICMP port unreachable).

        After every byte is acknowledged this means the receiver has closed (it
        exited before our FIN-ACK arrived): the flow is done. Otherwise it is
        ignored; the timers decide (the receiver may be restarting)."""
        if (self.state is SenderState.ESTABLISHED and self.stream_end is not None
                and self.snd_una >= self.stream_end):
            self._done(now_us)

    def abort(self, now_us: int, reason: str) -> None:
        """Give up at once (second signal): tell the receiver with a RST."""
        if not self.finished:
            pack_data_headers(self._buf, F_RST, self.flow_id, self.snd_nxt, now_us)
            self.emit(self._view[:HEADERS_LEN])
            self._fail(now_us, reason)

    def _fail(self, now_us: int, reason: str) -> None:
        self.state = SenderState.FAILED
        self.fail_reason = reason
        self.end_us = now_us
        self.rto_deadline_us = None

    # -- timers -------------------------------------------------------------------------
    def next_deadline_us(self) -> Optional[int]:
        """The earliest time :meth:`on_timer` has something to do."""
        if self.finished:
            return None
        if self.state is SenderState.CONNECTING:
            return self._syn_deadline_us
        best = self.rto_deadline_us
        if self._duration_end_us is not None and not self._duration_applied:
            best = self._duration_end_us if best is None else min(best, self._duration_end_us)
        if self._pace_waiting:
            best = self.pace_next_us if best is None else min(best, self.pace_next_us)
        if self._app_wait_until_us is not None:
            w = self._app_wait_until_us
            best = w if best is None else min(best, w)
        return best

    def on_timer(self, now_us: int) -> None:
        if self.finished:
            return
        self.st.now_us = now_us
        if self.state is SenderState.CONNECTING:
            if self._syn_deadline_us is not None and now_us >= self._syn_deadline_us:
                assert self.start_us is not None
                if now_us - self.start_us >= self.cfg.connect_timeout_us:
                    self._fail(now_us, "no answer to SYN (is bwn-recv listening?)")
                    return
                self.rto.on_timeout()
                self._send_syn(now_us, retransmit=True)
            return
        if (self._duration_end_us is not None and not self._duration_applied
                and now_us >= self._duration_end_us):
            self._duration_applied = True
            self._end_stream_at_sent()
        if self.rto_deadline_us is not None and now_us >= self.rto_deadline_us:
            self._on_rto(now_us)
            if self.finished:
                return
        self.pump(now_us)

    def _send_syn(self, now_us: int, retransmit: bool) -> None:
        flags = F_SYN | (F_RETX if retransmit else 0)
        n = pack_data_headers(self._buf, flags, self.flow_id, 0, now_us, self._syn_options)
        if self.emit(self._view[:n]):
            self.packets_sent += 1
        self._syn_sends += 1
        self._syn_deadline_us = now_us + self.rto.rto_us

    def _on_rto(self, now_us: int) -> None:
        """RFC 6298 sec. 5.4-5.7 and RFC 5681 sec. 3.1 eq. (4): timeout, go-back-N."""
        self.timeouts += 1
        self._consecutive_timeouts += 1
        all_data_acked = self.stream_end is not None and self.snd_una >= self.stream_end
        if all_data_acked and self._consecutive_timeouts > self.cfg.fin_give_up_timeouts:
            self._done(now_us)  # every byte is acknowledged; only the FIN-ACK is missing
            return
        if self._consecutive_timeouts > self.cfg.max_consecutive_timeouts:
            self._fail(now_us, f"{self._consecutive_timeouts - 1} consecutive timeouts")
            return
        st = self.st
        self._sync_state()
        st.in_recovery = False
        self.cc.on_timeout(st)
        st.clamp()
        self.dupacks = 0
        self.sack_dupacks = 0
        self._retx_pending = False
        self.recover = self.snd_max     # RFC 6582 sec. 3.2 step 2 (after a timeout)
        self.rto_recover = self.snd_max
        self.rto_high = self.snd_max    # RFC 6675 sec. 5.1: RecoveryPoint = HighData
        self.rto.on_timeout()
        self.snd_nxt = self.snd_una     # go-back-N (with SACK: over the unSACKed ranges)
        if self.sack:
            sb = self.sb
            if sb and sb.ranges[0][0] <= self.snd_una:
                # The receiver SACKed data its cumulative ACK does not cover: it reneged
                # (RFC 2018 sec. 8). Our receiver never does; a scoreboard that lies
                # would make the walk skip data the receiver lacks, so forget it.
                sb.clear()
                self.sack_reneging += 1
            sb.high_rxt = self.snd_una
            sb.rescue_rxt = None
        self.rto_deadline_us = None     # re-armed by the retransmission (sec. 5.6)
        self.pace_next_us = now_us
        self._sync_state()

    # -- sending ------------------------------------------------------------------------
    def _sync_state(self) -> None:
        """Copy the sequence space into CcState (what the algorithm may read)."""
        st = self.st
        st.snd_una = self.snd_una
        st.snd_nxt = self.snd_nxt
        st.snd_max = self.snd_max
        st.bytes_in_flight = self.snd_nxt - self.snd_una
        st.pipe_bytes = self._window_flight()

    def _window_flight(self) -> int:
        """What cwnd is compared with: FlightSize without SACK, RFC 6675 pipe with it."""
        una, nxt = self.snd_una, self.snd_nxt
        if not self.sack:
            return nxt - una
        sb = self.sb
        if nxt < self.snd_max:
            # Go-back-N walk after a timeout: what the walk has resent and the receiver
            # has not SACKed. Data sent after the timeout (forced transmissions, at or
            # above rto_high) is outside this window, as without SACK.
            return sb.unsacked_between(una, nxt) if sb else nxt - una
        if una < self.rto_high:
            # Timeout recovery, walk done: everything below rto_high that is not SACKed
            # was resent once and its original counts as lost (RFC 6675 sec. 5.1).
            return sb.pipe(una, self.snd_max, high_rxt=self.rto_high, lost_below=self.rto_high)
        if self.st.in_recovery:
            return sb.pipe(una, self.snd_max)
        if not sb:
            return nxt - una
        return sb.pipe(una, self.snd_max, high_rxt=una)   # RFC 6675 step (3.1)

    def _new_data_ready(self, seq: int, seg_len: int, now_us: int) -> bool:
        """Application-limited source: are the bytes of this new segment there yet?"""
        app_rate_bps = self.cfg.app_rate_bps
        if not app_rate_bps or seq + seg_len <= self.snd_max:
            return True
        assert self.established_us is not None
        ready_us = self.established_us + int((seq + seg_len) * 8e6 / app_rate_bps)
        if now_us < ready_us:
            self._app_wait_until_us = ready_us
            return False
        return True

    def pump(self, now_us: int) -> None:
        """Send what the window, the receive window and the pacing rate allow."""
        if self.state is not SenderState.ESTABLISHED:
            return
        self.blocked = False
        self._pace_waiting = False
        self._app_wait_until_us = None
        st = self.st
        if self._retx_pending:
            # Fast retransmit (RFC 5681 sec. 3.2 / RFC 6675 step 4.3) or a NewReno
            # partial ACK (RFC 6582 step 5): the first unacknowledged segment.
            seq = self.snd_una
            limit = self.sb.next_sacked_start(seq) if self.sack else None
            if not self._send_segment(seq, now_us, True, limit):
                return
            self._retx_pending = False
        if st.force_segments > 0 and not self._send_forced(now_us):
            self._sync_state()
            return
        mss = self.mss_bytes
        cwnd_bytes = int(st.cwnd * mss)
        rate_bps = st.pacing_rate_bps
        sack_recovery = self.sack and st.in_recovery
        while True:
            if sack_recovery and self.snd_nxt >= self.snd_max:
                if not self._pump_sack_recovery(now_us, cwnd_bytes, rate_bps):
                    break
                continue
            end = self.stream_end
            nxt = self._walk_position()
            if end is None:
                seg_len = mss
            elif nxt < end:
                seg_len = min(mss, end - nxt)
            elif nxt == end:
                seg_len = 0  # the FIN: exempt from windows and pacing
            else:
                break        # FIN already sent
            if seg_len:
                if nxt < self.snd_max:
                    # The walk after a timeout: stop at the next SACKed range and at the
                    # data sent after the timeout.
                    limit = self.sb.next_sacked_start(nxt) if self.sack else None
                    if self.snd_max > self.rto_high > nxt:
                        limit = self.rto_high if limit is None else min(limit, self.rto_high)
                    if limit is not None and limit - nxt < seg_len:
                        seg_len = limit - nxt
                if not self._new_data_ready(nxt, seg_len, now_us):
                    break
                flight = self._window_flight()
                if flight > 0 and (flight + seg_len > cwnd_bytes
                                   or nxt + seg_len > self.snd_una + self.rwnd_bytes):
                    break
                if rate_bps and now_us < self.pace_next_us:
                    self._pace_waiting = True
                    break
            if not self._send_segment(nxt, now_us, nxt < self.snd_max, nxt + seg_len if seg_len else None):
                break
            self.snd_nxt = nxt + (seg_len or 1)
        self._sync_state()

    def _walk_position(self) -> int:
        """``snd_nxt``, moved past what needs no resending: ranges the receiver SACKed
        and data sent after the last timeout (the walk jumps to ``snd_max`` there)."""
        nxt = self.snd_nxt
        while nxt < self.snd_max:
            if nxt >= self.rto_high:
                nxt = self.snd_max
                break
            if not self.sack:
                break
            r = self.sb.sacked_range_at(nxt)
            if r is None:
                break
            nxt = r[1]
        self.snd_nxt = nxt
        return nxt

    def _pump_sack_recovery(self, now_us: int, cwnd_bytes: Optional[int],
                            rate_bps: Optional[float]) -> bool:
        """RFC 6675 sec. 5 step (C): send one segment chosen by NextSeg() if
        ``cwnd - pipe`` allows it (``cwnd_bytes`` None: a forced transmission,
        outside the window); False when nothing (more) can be sent now."""
        choice = self._next_seg(now_us)
        if choice is None:
            return False
        seq, seg_len, rule = choice
        if seg_len:
            if cwnd_bytes is not None:
                pipe = self._window_flight()
                if pipe > 0 and pipe + seg_len > cwnd_bytes:
                    return False
            if rate_bps and now_us < self.pace_next_us:
                self._pace_waiting = True
                return False
        is_new = seq >= self.snd_max
        if not self._send_segment(seq, now_us, not is_new, seq + seg_len if seg_len else None):
            return False
        end = seq + (seg_len or 1)
        sb = self.sb
        if is_new:
            self.snd_nxt = end                          # (C.3) HighData
        elif rule == 4:
            sb.rescue_rxt = self.recover                # RescueRxt = RecoveryPoint; HighRxt unchanged
            self.rescue_retransmits += 1
        elif end > sb.high_rxt:
            sb.high_rxt = end                           # (C.2)
        return True

    def _next_seg(self, now_us: int) -> Optional[Tuple[int, int, int]]:
        """RFC 6675 sec. 4 NextSeg(): ``(seq, length, rule)`` of the next segment, or None."""
        sb = self.sb
        una, mx, mss = self.snd_una, self.snd_max, self.mss_bytes
        end = self.stream_end
        # (1) the first lost, unSACKed range above HighRxt and below the highest SACK
        hole = sb.next_lost_hole(una, sb.high_rxt)
        if hole is not None:
            return hole[0], min(mss, hole[1] - hole[0], self._data_left(hole[0])), 1
        # (2) new data, if the application has some and the receive window allows
        nxt = self.snd_nxt
        if end is None or nxt <= end:
            seg_len = mss if end is None else min(mss, end - nxt)
            if seg_len == 0:
                return nxt, 0, 2                          # the FIN (exempt from windows)
            if (nxt + seg_len <= una + self.rwnd_bytes
                    and self._new_data_ready(nxt, seg_len, now_us)):
                return nxt, seg_len, 2
        # (3) an unSACKed range above HighRxt below the highest SACK, lost or not
        top = sb.highest_sacked_end
        if top is not None:
            hole = sb.next_hole(max(sb.high_rxt, una), top)
            if hole is not None:
                return hole[0], min(mss, hole[1] - hole[0], self._data_left(hole[0])), 3
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
                return start, min(high + 1 - start, self._data_left(start)), 4
        return None

    def _data_left(self, seq: int) -> int:
        end = self.stream_end
        return self.mss_bytes if end is None else max(min(self.mss_bytes, end - seq), 0)

    def _send_forced(self, now_us: int) -> bool:
        """Send the segments the algorithm asked for (``force_segments``), outside
        cwnd: in SACK fast recovery the ones NextSeg() picks (lost data first),
        otherwise new data. Credits that cannot be used now (nothing to send, receive
        window full) are dropped; pacing delays them. False if the pump must stop."""
        st = self.st
        mss = self.mss_bytes
        if self.sack and st.in_recovery:
            while st.force_segments > 0:
                if not self._pump_sack_recovery(now_us, None, st.pacing_rate_bps):
                    if self._pace_waiting or self.blocked:
                        return False
                    st.force_segments = 0
                    return True
                st.force_segments -= 1
                self.forced_segments += 1
            return True
        while st.force_segments > 0:
            seq = self.snd_max
            end = self.stream_end
            seg_len = mss if end is None else min(mss, end - seq)
            if (seg_len <= 0 or seq + seg_len > self.snd_una + self.rwnd_bytes
                    or not self._new_data_ready(seq, seg_len, now_us)):
                st.force_segments = 0
                self._app_wait_until_us = None
                return True
            if st.pacing_rate_bps and now_us < self.pace_next_us:
                self._pace_waiting = True
                return False
            walking = self.snd_nxt < self.snd_max
            if not self._send_segment(seq, now_us, False, seq + seg_len):
                return False
            st.force_segments -= 1
            self.forced_segments += 1
            if not walking:
                self.snd_nxt = self.snd_max
        return True

    def _send_segment(self, seq: int, now_us: int, retransmit: bool,
                      limit: Optional[int] = None) -> bool:
        end = self.stream_end
        if end is not None and seq >= end:
            seg_len = 0
            flags = F_FIN
        else:
            seg_len = self.mss_bytes if end is None else min(self.mss_bytes, end - seq)
            if limit is not None and seq < limit < seq + seg_len:
                seg_len = limit - seq
            flags = F_DATA
            self._buf[HEADERS_LEN:HEADERS_LEN + seg_len] = self.source.view(seq, seg_len)
        if retransmit:
            flags |= F_RETX
        pack_data_headers(self._buf, flags, self.flow_id, seq, now_us)
        if not self.emit(self._view[:HEADERS_LEN + seg_len]):
            self.blocked = True
            return False
        self.packets_sent += 1
        self.payload_bytes_sent += seg_len
        if retransmit:
            self.retransmits += 1
        seg_end = seq + (seg_len or 1)
        if seg_end > self.snd_max:
            self.snd_max = seg_end
        rate_bps = self.st.pacing_rate_bps
        if rate_bps and seg_len:
            self.pace_next_us = (max(self.pace_next_us, now_us - self.cfg.pacing_burst_us)
                                 + int((seg_len + FRAME_OVERHEAD_BYTES) * 8e6 / rate_bps))
        if self.rto_deadline_us is None:
            self.rto_deadline_us = now_us + self.rto.rto_us  # RFC 6298 sec. 5.1
        if seg_len:
            st = self.st
            st.bytes_in_flight = self.snd_nxt - self.snd_una
            st.snd_max = self.snd_max
            self.cc.on_packet_sent(st, SentSegment(now_us, seq, seg_len, retransmit))
        return True

    # -- receiving ----------------------------------------------------------------------
    def on_datagram(self, data: Any, now_us: int) -> None:
        """Process one datagram from the receiver (an ACK), then send what is allowed."""
        n = len(data)
        if n < HEADERS_LEN:
            self.bad_packets += 1
            return
        (vk, echo_ebn, echo_narrow, echo_tight, echo_hop, bwn_flags, tver, flags, words,
         flow_id, ack, rwnd, ts_val, ts_ecr) = ACK_IN_STRUCT.unpack_from(data)
        if (vk != ACK_VK or tver != TRANSPORT_VERSION or flow_id != self.flow_id
                or words < HDR_WORDS or BWN_HEADER_LEN + 4 * words > n):
            self.bad_packets += 1
            return
        if self.finished:
            return
        opts = _NO_OPTIONS
        if words > HDR_WORDS:
            try:
                opts = parse_options(data, HEADERS_LEN, BWN_HEADER_LEN + 4 * words)
            except OptionError:
                self.bad_packets += 1
                return
        if flags & F_RST:
            self._fail(now_us, "reset by the receiver")
            return
        if not flags & F_ACK:
            self.bad_packets += 1
            return
        st = self.st
        st.now_us = now_us
        self.acks_received += 1

        key = (bwn_flags, echo_hop, echo_ebn, echo_narrow, echo_tight)
        if key != self._echo_key:
            self._echo_key = key
            self.feedback = feedback_from_echo(bwn_flags, echo_hop, echo_ebn, echo_narrow,
                                               echo_tight)
        # ACK send time on the receiver's clock, unwrapped to 64 bits (SARBE).
        if self._ack_ts_raw is None:
            self._ack_ts_us = ts_val
        else:
            self._ack_ts_us += ts_diff_us(ts_val, self._ack_ts_raw)
        self._ack_ts_raw = ts_val
        # RTT sample from the echoed timestamp; none for retransmissions (Karn).
        rtt_us: Optional[int] = None
        if not flags & F_RETX:
            rtt = ts_diff_us(now_us & TS_MASK, ts_ecr)
            if rtt >= 0:
                rtt_us = rtt
                self.rto.on_sample(rtt)
                st.latest_rtt_us = rtt
                st.srtt_us = self.rto.srtt_us
                if st.min_rtt_us is None or rtt < st.min_rtt_us:
                    st.min_rtt_us = rtt
                self.rtt_samples.add(rtt)
                self.last_rtt_sample_us = rtt

        if self.state is SenderState.CONNECTING:
            if flags & F_SYN:
                self._on_syn_ack(now_us, rwnd, rtt_us, opts)
            return
        if ack > self.snd_max:
            self.bad_packets += 1  # acknowledges what was never sent
            return
        if opts.rcv_stats is not None:
            self.receiver_stats = opts.rcv_stats
        self._set_rwnd(rwnd)
        new_sacked = 0
        if self.sack:
            una = max(ack, self.snd_una)
            self.sb.advance(una)
            if opts.sack_blocks:
                new_sacked = self.sb.update(opts.sack_blocks, una, self.snd_max)
        if ack > self.snd_una:
            self._on_new_ack(now_us, ack, rtt_us, new_sacked)
        elif ack == self.snd_una and self.snd_max > self.snd_una and not flags & F_SYN:
            self._on_dupack(now_us, ack, rtt_us, new_sacked)  # a repeated SYN-ACK is no duplicate ACK
        else:
            self._sync_state()
            self.cc.on_feedback(st, self._ack_info(now_us, ack, 0, rtt_us, 0))
            st.clamp()
        self._log_row(now_us)
        if not self.finished:
            self.pump(now_us)

    def _ack_info(self, now_us: int, ack: int, acked: int, rtt_us: Optional[int],
                  dupacks: int) -> AckInfo:
        return AckInfo(now_us=now_us, ack_seq=ack, acked_bytes=acked, rtt_sample_us=rtt_us,
                       ack_send_time_us=self._ack_ts_us, feedback=self.feedback,
                       dupacks=dupacks)

    def _set_rwnd(self, rwnd: int) -> None:
        if rwnd != self.rwnd_bytes:
            self.rwnd_bytes = rwnd
            self.st.max_cwnd = max(rwnd / self.mss_bytes, 1.0)

    def _on_syn_ack(self, now_us: int, rwnd: int, rtt_us: Optional[int],
                    opts: TransportOptions) -> None:
        self.state = SenderState.ESTABLISHED
        self.established_us = now_us
        self._syn_deadline_us = None
        self.sack = self.cfg.sack and opts.sack_permitted   # RFC 2018 sec. 2
        self.st.sack = self.sack
        self._set_rwnd(rwnd)
        self.pace_next_us = now_us
        if self.cfg.duration_us is not None:
            self._duration_end_us = now_us + self.cfg.duration_us
            if self.cfg.duration_us <= 0:
                self._duration_applied = True
                self._end_stream_at_sent()
        if rtt_us is None:
            # RFC 6298 sec. 5.7: the SYN was retransmitted; keep the backed-off RTO.
            pass
        self._sync_state()
        self.cc.on_feedback(self.st, self._ack_info(now_us, 0, 0, rtt_us, 0))
        self.st.clamp()
        self._log_row(now_us)
        self.pump(now_us)

    def _on_new_ack(self, now_us: int, ack: int, rtt_us: Optional[int], new_sacked: int) -> None:
        st = self.st
        end = self.stream_end
        if end is None:
            acked_bytes = ack - self.snd_una
        else:  # the FIN's sequence number is not a byte of the stream
            acked_bytes = max(min(ack, end) - min(self.snd_una, end), 0)
        self.snd_una = ack
        if self.snd_nxt < ack:
            self.snd_nxt = ack  # after go-back-N the receiver may hold more than we resent
        st.delivered_bytes += acked_bytes
        self.dupacks = 0
        self._consecutive_timeouts = 0
        if self.sack:
            # RFC 6675 sec. 5: a cumulative ACK resets DupAcks; it still counts as a
            # duplicate acknowledgment when it SACKs new data (sec. 2).
            self.sack_dupacks = 1 if new_sacked and not st.in_recovery else 0
        self._sync_state()
        info = self._ack_info(now_us, ack, acked_bytes, rtt_us, 0)
        self.cc.on_feedback(st, info)
        restart_timer = True
        if st.in_recovery:
            if ack >= self.recover or (self.cc.recovery_style == "reno" and not self.sack):
                st.in_recovery = False        # full ACK (RFC 6582 step 6, RFC 6675 step A) / Reno
                if self.sack:
                    self.sb.high_rxt = self.snd_una
                    self.sb.rescue_rxt = None
                self._sync_state()
                self.cc.on_exit_recovery(st, info)
            else:
                self.cc.on_partial_ack(st, info)
                if not self.sack:
                    self._retx_pending = True     # partial ACK (RFC 6582 step 5)
                    restart_timer = not self._first_partial_done  # "impatient" (step 5)
                    self._first_partial_done = True
        else:
            self.cc.on_ack(st, info)
            if self.sack:
                self._maybe_enter_sack_recovery()
        st.clamp()
        if end is not None and self.data_done_us is None and ack >= end:
            self.data_done_us = now_us
        if end is not None and ack > end:
            self._done(now_us)  # our FIN is acknowledged
            return
        if self.snd_una >= self.snd_max:
            self.rto_deadline_us = None                               # RFC 6298 sec. 5.2
        elif restart_timer:
            self.rto_deadline_us = now_us + self.rto.rto_us           # RFC 6298 sec. 5.3

    def _on_dupack(self, now_us: int, ack: int, rtt_us: Optional[int], new_sacked: int) -> None:
        st = self.st
        self.dupacks += 1
        self.dupacks_total += 1
        if self.sack and new_sacked and not st.in_recovery:
            self.sack_dupacks += 1
        self._sync_state()
        info = self._ack_info(now_us, ack, 0, rtt_us, self.dupacks)
        self.cc.on_feedback(st, info)
        self.cc.on_dupack(st, info)
        if self.sack:
            self._maybe_enter_sack_recovery()
        elif self.dupacks == DUPACK_THRESHOLD and not st.in_recovery:
            if self.cc.recovery_style == "reno":
                allowed = ack >= self.rto_recover
            else:
                allowed = ack >= self.recover  # "covers more than recover" (RFC 6582 step 2)
            if allowed:
                self._enter_recovery()
        st.clamp()

    def _maybe_enter_sack_recovery(self) -> None:
        """RFC 6675 sec. 5 steps (1)-(2): DupAcks >= DupThresh, or IsLost(HighACK + 1);
        not before the cumulative ACK passed the last recovery point (sec. 5.1)."""
        st = self.st
        if st.in_recovery or self.snd_una < self.recover or self.snd_una >= self.snd_max:
            return
        if self.sack_dupacks >= DUPACK_THRESHOLD or (self.sb and self.sb.is_lost(self.snd_una, self.snd_una)):
            self._enter_recovery()

    def _enter_recovery(self) -> None:
        st = self.st
        self.recover = self.snd_max
        st.in_recovery = True
        st.recovery_point = self.snd_max
        self._first_partial_done = False
        self.fast_recoveries += 1
        if self.sack:
            self.sb.high_rxt = self.snd_una   # set to the end of the fast retransmission (4.3)
            self.sb.rescue_rxt = None
            self.sack_dupacks = 0
        self._sync_state()
        self.cc.on_enter_recovery(st)
        self._retx_pending = True   # fast retransmit (RFC 5681 sec. 3.2 step 2, RFC 6675 4.3)
        if self.sack:
            seq = self.snd_una
            nxt = self.sb.next_sacked_start(seq)
            seg_end = seq + self._data_left(seq) if self.stream_end is None or seq < self.stream_end else seq + 1
            if nxt is not None:
                seg_end = min(seg_end, nxt)
            self.sb.high_rxt = seg_end          # RFC 6675 4.3: HighRxt = RescueRxt = end
            self.sb.rescue_rxt = seg_end        # of the retransmitted segment

    def _done(self, now_us: int) -> None:
        self.state = SenderState.DONE
        self.end_us = now_us
        if self.data_done_us is None:
            self.data_done_us = now_us
        self.rto_deadline_us = None
        self._log_row(now_us, force=True)

    # -- reporting ----------------------------------------------------------------------
    def _log_row(self, now_us: int, force: bool = False) -> None:
        log = self.log
        if log is None or not (force or log.due(self.flow_id, now_us)):
            return
        st = self.st
        fb = self.feedback
        t0 = self.start_us if self.start_us is not None else now_us
        row: Dict[str, Any] = {
            "time_s": round((now_us - t0) / 1e6, 6),
            "flow_id": self.flow_id,
            "algo": self.cc.name,
            "cwnd": round(st.cwnd, 4),
            "ssthresh": st.ssthresh,
            "pacing_rate_bps": st.pacing_rate_bps,
            "rtt_sample_us": self.last_rtt_sample_us,
            "srtt_us": None if st.srtt_us is None else round(st.srtt_us, 1),
            "min_rtt_us": st.min_rtt_us,
            "rto_us": self.rto.rto_us,
            "bytes_in_flight": st.bytes_in_flight,
            "delivered_bytes": st.delivered_bytes,
            "retransmits": self.retransmits,
            "timeouts": self.timeouts,
            "in_recovery": int(st.in_recovery),
            "estimate_bps": st.estimate_bps,
            "echo_hop_count": None if fb is None else fb.hop_count,
            "echo_ebn_code": None if fb is None else fb.ebn_code,
            "echo_ebn_kbps": (None if fb is None or fb.ebn_code is None
                              else round(ebn_decode_kbps(fb.ebn_code) or 0.0, 3)),
            "echo_narrow_kbps": None if fb is None else fb.narrow_kbps,
            "echo_tight_kbps": None if fb is None else fb.tight_kbps,
            "extra": dict(st.extra) if st.extra else None,
            "pipe_bytes": st.pipe_bytes,
            "sacked_bytes": self.sb.sacked_bytes if self.sack else None,
        }
        log.offer(self.flow_id, now_us, row, force=force)

    def summary(self, now_us: int) -> Dict[str, Any]:
        """The end-of-flow figures (docs/transport.md, "Summary")."""
        begin = self.established_us
        end = self.data_done_us if self.data_done_us is not None else (self.end_us or now_us)
        duration_s = None if begin is None else max(end - begin, 0) / 1e6
        delivered = self.st.delivered_bytes
        goodput = (delivered * 8 / duration_s) if duration_s else None
        if self.state is SenderState.DONE:
            status = "interrupted" if self.interrupted else "complete"
        elif self.state is SenderState.FAILED:
            status = f"failed: {self.fail_reason}"
        else:
            status = "incomplete"
        rs = self.receiver_stats
        out: Dict[str, Any] = {
            "flow_id": self.flow_id,
            "algo": self.cc.name,
            "status": status,
            "bytes": delivered,
            "stream_bytes": self.stream_end,
            "duration_s": None if duration_s is None else round(duration_s, 6),
            "goodput_bps": None if goodput is None else round(goodput, 1),
            "mss_bytes": self.mss_bytes,
            "sack": self.sack,
            "packets_sent": self.packets_sent,
            "payload_bytes_sent": self.payload_bytes_sent,
            "retransmits": self.retransmits,
            "timeouts": self.timeouts,
            "fast_recoveries": self.fast_recoveries,
            "rescue_retransmits": self.rescue_retransmits,
            "forced_segments": self.forced_segments,
            "sack_reneging": self.sack_reneging,
            "acks_received": self.acks_received,
            "dupacks": self.dupacks_total,
            "bad_packets": self.bad_packets,
            # The receiver's own counts, from the RCV_STATS option of its FIN|ACK
            # (None when no FIN|ACK arrived): docs/transport.md "Counters".
            "receiver_segments": None if rs is None else rs[0],
            "duplicate_segments": None if rs is None else rs[1],
            "out_of_order_segments": None if rs is None else rs[2],
            "spurious_retransmits": None if rs is None else rs[3],
            "final_cwnd": round(self.st.cwnd, 3),
            "final_ssthresh": self.st.ssthresh if self.st.ssthresh != float("inf") else None,
            "srtt_ms": None if self.rto.srtt_us is None else round(self.rto.srtt_us / 1e3, 3),
            "min_rtt_ms": None if self.st.min_rtt_us is None else self.st.min_rtt_us / 1e3,
        }
        out.update(rtt_stats_ms(self.rtt_samples.values))
        return out
