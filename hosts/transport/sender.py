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
* loss recovery, a strategy chosen in the handshake (:mod:`hosts.transport.recovery`):
  **with SACK** (``SenderConfig.sack``, the default, when the receiver accepts it,
  RFC 2018 sec. 2) RFC 6675's over the scoreboard
  (:mod:`hosts.transport.recovery.sack`), **without** NewReno's (RFC 6582) or
  Reno's (:mod:`hosts.transport.recovery.newreno`);
* the retransmission timer of RFC 6298 (:mod:`hosts.transport.rto`): start
  when data is sent and the timer is off (5.1), stop when all is acknowledged
  (5.2), restart on a new ACK (5.3; NewReno's "impatient" variant restarts it on
  the first partial ACK only), on expiry retransmit the first unacknowledged
  segment, back off and restart (5.4-5.6); then go-back-N from ``snd_una`` in slow
  start (``cwnd`` = 1 from ``on_timeout``) -- with SACK the walk skips every range
  the receiver SACKed, so only data not SACKed is resent;
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
* pacing (:mod:`hosts.transport.pacing`): when ``CcState.pacing_rate_bps`` is set,
  segments leave at most at that rate;
* ECN (``SenderConfig.ecn``, RFC 3168 sec. 6.1): the SYN offers it (ECE|CWR), a
  SYN|ACK with ECE accepts it (:attr:`Sender.ecn` is then true and the event loop
  sends the data ECN-capable, ECT(0)); an ACK with ECE calls the algorithm's
  ``on_ecn`` unless the flow is in loss recovery or has already reduced for data
  sent before its last reduction (at most once per window of data: only an ACK
  beyond ``snd_max`` of the last reduction counts; a loss's cut, fast recovery or
  a timeout, counts as one), and the next new data segment carries CWR.

ACKs are decoded by :mod:`hosts.transport.acks`; the time-series row and the
summary are :mod:`hosts.transport.senderlog`'s.

Why this module is over 500 lines: what is left here is one state machine over
one sequence space (the handshake, the timers, the ACK paths and the pump all
read and move ``snd_una``, ``snd_nxt``, ``snd_max`` and the timer together);
the parts with a life of their own (recovery, pacing, ACK decoding, reporting)
are modules of their own, and cutting the rest would only pass that state around.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, Optional, Tuple

from bwn.protocol.wire import XR_FEEDBACK_UNSET, XR_HEADER_LEN, XR_RATE_UNSET
from hosts.cc.base import AckInfo, CcState, CongestionControl, Feedback, SentSegment, XrEcho
from hosts.flowlog import RttSamples, TimeSeriesLog
from hosts.transport import senderlog
from hosts.transport.acks import AckDecoder
from hosts.transport.pacing import Pacer
from hosts.transport.recovery import LossRecovery, recovery_for
from hosts.transport.rto import DEFAULT_INITIAL_RTO_US, DEFAULT_MAX_RTO_US, DEFAULT_MIN_RTO_US, RtoEstimator
from hosts.transport.source import StreamSource
from hosts.transport.wire import (
    DEFAULT_MSS_BYTES,
    ETHERNET_OVERHEAD_BYTES,
    F_ACK,
    F_CWR,
    F_DATA,
    F_ECE,
    F_FIN,
    F_RETX,
    F_RST,
    F_SYN,
    HEADERS_LEN,
    IP_UDP_OVERHEAD_BYTES,
    TS_MASK,
    TransportOptions,
    encode_options,
    has_xr,
    insert_xr,
    pack_data_headers,
    split_xr,
    ts_diff_us,
)

DEFAULT_RWND_BYTES = 64 * 1024  # assumed until the SYN-ACK tells the real window
#: Bytes of a data frame beyond its payload: Ethernet + IPv4 + UDP + BWN + transport
#: header (14 + 20 + 8 + 24 + 36 = 102), what the switches' meters and rates count.
FRAME_OVERHEAD_BYTES = HEADERS_LEN + IP_UDP_OVERHEAD_BYTES + ETHERNET_OVERHEAD_BYTES

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
    ecn: bool = False                    # offer ECN (RFC 3168); bwn-send --ecn


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
        # An algorithm that uses the XR header (XCP, RCP) sends it in every packet; it
        # takes its 24 bytes from the segment, so that frames stay the size the MTU allows.
        self.uses_xr = cc.uses_xr
        xr_len = XR_HEADER_LEN if self.uses_xr else 0
        self.mss_bytes = self.cfg.mss_bytes - xr_len
        if self.mss_bytes < 1:
            raise ValueError(f"mss_bytes {self.cfg.mss_bytes} leaves no room for data after the XR header")
        self.frame_overhead_bytes = FRAME_OVERHEAD_BYTES + xr_len
        self.log = log
        self.st = CcState(mss_bytes=self.mss_bytes, frame_overhead_bytes=self.frame_overhead_bytes)
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
        # Loss recovery (hosts/transport/recovery/): NewReno's until the handshake
        # says whether the receiver takes SACK.
        self.sack = False      # negotiated in the handshake (cfg.sack and the receiver's answer)
        self.ecn = False       # negotiated in the handshake (cfg.ecn and the receiver's ECE)
        self._ecn_high = 0     # snd_max at the last ECN reduction: ECE counts only for later data
        self._cwr_pending = False   # the next new data segment carries CWR
        # Called once when ECN is negotiated, before any data leaves: the event loop
        # makes the socket's datagrams ECN-capable (ECT(0)) there.
        self.on_ecn_ok: Optional[Callable[[], None]] = None
        self.recovery: LossRecovery = recovery_for(self, sack=False)
        self.dupacks = 0       # RFC 5681 duplicate ACKs in a row (AckInfo.dupacks)
        self.rto_high = 0      # snd_max when the last timeout fired (what the walk resends)
        self._retx_pending = False  # resend the first unacknowledged segment now
        self.rto_deadline_us: Optional[int] = None
        self._consecutive_timeouts = 0
        self.pacer = Pacer(self.cfg.pacing_burst_us, self.frame_overhead_bytes)
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
        self.ecn_echoes = 0    # ACKs with ECE received (ECN negotiated)
        self.ecn_reductions = 0
        self.receiver_stats: Optional[Tuple[int, int, int, int]] = None
        self.rtt_samples = RttSamples()
        self.last_rtt_sample_us: Optional[int] = None
        self._acks = AckDecoder(self.flow_id)
        self._ack_ts_us = 0    # the last ACK's send time (receiver clock, 64 bits)
        self._xr_echo: Optional[XrEcho] = None   # the last ACK's XR echo

        self._syn_options = encode_options(sack_permitted=True) if self.cfg.sack else b""
        self._buf = bytearray(HEADERS_LEN + xr_len + max(self.mss_bytes, len(self._syn_options)))
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

    @property
    def feedback(self) -> Optional[Feedback]:
        """The switches' feedback the last ACK echoed (None before the first)."""
        fb = self._acks.last_feedback
        if fb is not None and self._xr_echo is not None:
            return replace(fb, xr=self._xr_echo)
        return fb

    def _with_xr(self, n: int) -> int:
        """The packet in the buffer's first ``n`` bytes with the XR header the
        algorithm asks for; its new length."""
        req = self.cc.xr_request(self.st)
        return insert_xr(self._buf, n, (req.rtt_us, req.cwnd_bytes, req.feedback_bytes, req.rate_kbps,
                                        XR_FEEDBACK_UNSET, XR_RATE_UNSET))

    @property
    def status(self) -> str:
        """The summary's status: complete, interrupted, failed: <why>, incomplete."""
        if self.state is SenderState.DONE:
            return "interrupted" if self.interrupted else "complete"
        if self.state is SenderState.FAILED:
            return f"failed: {self.fail_reason}"
        return "incomplete"

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
        if self.pacer.waiting:
            pace_us = self.pacer.next_us
            best = pace_us if best is None else min(best, pace_us)
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
        flags = F_SYN | (F_RETX if retransmit else 0) | (F_ECE | F_CWR if self.cfg.ecn else 0)
        n = pack_data_headers(self._buf, flags, self.flow_id, 0, now_us, self._syn_options)
        if self.uses_xr:
            n = self._with_xr(n)
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
        self._retx_pending = False
        self.rto_high = self.snd_max    # what the walk resends (RFC 6675 sec. 5.1: RecoveryPoint)
        self.note_window_cut()
        self.rto.on_timeout()
        self.snd_nxt = self.snd_una     # go-back-N (with SACK: over the unSACKed ranges)
        self.recovery.on_timeout()      # the recovery point; the scoreboard's pointers
        self.rto_deadline_us = None     # re-armed by the retransmission (sec. 5.6)
        self.pacer.restart(now_us)
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
        return self.recovery.flight()

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
        self.pacer.waiting = False
        self._app_wait_until_us = None
        st = self.st
        if self._retx_pending:
            # Fast retransmit (RFC 5681 sec. 3.2 / RFC 6675 step 4.3) or a NewReno
            # partial ACK (RFC 6582 step 5): the first unacknowledged segment.
            seq = self.snd_una
            limit = self.recovery.next_sacked_start(seq)
            if not self._send_segment(seq, now_us, True, limit):
                return
            self._retx_pending = False
        if st.force_segments > 0 and not self._send_forced(now_us):
            self._sync_state()
            return
        mss = self.mss_bytes
        cwnd_bytes = int(st.cwnd * mss)
        rate_bps = st.pacing_rate_bps
        recovery = self.recovery
        picking = recovery.picks_segments()   # SACK fast recovery: NextSeg() chooses
        while True:
            if picking and self.snd_nxt >= self.snd_max:
                if not recovery.send_next(now_us, cwnd_bytes, rate_bps):
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
                    limit = recovery.next_sacked_start(nxt)
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
                if self.pacer.holds(now_us, rate_bps):
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
            r = self.recovery.sacked_range_at(nxt)
            if r is None:
                break
            nxt = r[1]
        self.snd_nxt = nxt
        return nxt

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
        if self.recovery.picks_segments():
            return self.recovery.send_forced(now_us)
        while st.force_segments > 0:
            seq = self.snd_max
            end = self.stream_end
            seg_len = mss if end is None else min(mss, end - seq)
            if (seg_len <= 0 or seq + seg_len > self.snd_una + self.rwnd_bytes
                    or not self._new_data_ready(seq, seg_len, now_us)):
                st.force_segments = 0
                self._app_wait_until_us = None
                return True
            if self.pacer.holds(now_us, st.pacing_rate_bps):
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
        elif self._cwr_pending and seg_len:
            flags |= F_CWR     # RFC 3168 sec. 6.1.2: the first new data after the reduction
            self._cwr_pending = False
        pack_data_headers(self._buf, flags, self.flow_id, seq, now_us)
        n = HEADERS_LEN + seg_len
        if self.uses_xr:
            n = self._with_xr(n)
        if not self.emit(self._view[:n]):
            self.blocked = True
            return False
        self.packets_sent += 1
        self.payload_bytes_sent += seg_len
        if retransmit:
            self.retransmits += 1
        seg_end = seq + (seg_len or 1)
        if seg_end > self.snd_max:
            self.snd_max = seg_end
        self.pacer.on_sent(now_us, seg_len, self.st.pacing_rate_bps)
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
        acks = self._acks
        if self.uses_xr:
            self._xr_echo = None
            if has_xr(data):
                split = split_xr(data)
                if split is None:
                    self.bad_packets += 1
                    return
                data, xr = split
                self._xr_echo = XrEcho(feedback_bytes=None if xr[4] == XR_FEEDBACK_UNSET else xr[4],
                                       rate_kbps=None if xr[5] == XR_RATE_UNSET else xr[5])
        header = acks.header(data)
        if header is None:
            self.bad_packets += 1
            return
        (_, echo_ebn, echo_narrow, echo_tight, echo_hop, bwn_flags, _, flags, words,
         _, ack, rwnd, ts_val, ts_ecr) = header
        if self.finished:
            return
        opts = acks.options(data, words)
        if opts is None:
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

        acks.feedback(bwn_flags, echo_hop, echo_ebn, echo_narrow, echo_tight)
        self._ack_ts_us = acks.send_time_us(ts_val)   # receiver's clock (SARBE)
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
                self._on_syn_ack(now_us, rwnd, rtt_us, opts, flags)
            return
        if ack > self.snd_max:
            self.bad_packets += 1  # acknowledges what was never sent
            return
        if opts.rcv_stats is not None:
            self.receiver_stats = opts.rcv_stats
        self._set_rwnd(rwnd)
        new_sacked = self.recovery.on_ack(ack, opts.sack_blocks)
        if flags & F_ECE and self.ecn and not flags & F_SYN:
            self._on_ecn_echo(ack)
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

    def note_window_cut(self) -> None:
        """A loss cut the window (fast recovery, a timeout). With ECN that cut answers
        the marks of the same data too (RFC 3168 sec. 6.1.2: once per window): the
        ECN-Echoes of data sent before it cut nothing more, and the next new data
        carries CWR, so that the receiver stops echoing them."""
        self._ecn_high = self.snd_max
        if self.ecn:
            self._cwr_pending = True

    def _on_ecn_echo(self, ack: int) -> None:
        """RFC 3168 sec. 6.1.2: an ECN-Echo reduces the window once per window of data
        and not again while a loss has already reduced it (fast recovery)."""
        self.ecn_echoes += 1
        st = self.st
        if st.in_recovery or ack <= max(self._ecn_high, st.recovery_point):
            return
        self._ecn_high = self.snd_max
        self._cwr_pending = True
        self.ecn_reductions += 1
        self._sync_state()
        self.cc.on_ecn(st)
        st.clamp()

    def _on_syn_ack(self, now_us: int, rwnd: int, rtt_us: Optional[int],
                    opts: TransportOptions, flags: int = 0) -> None:
        self.state = SenderState.ESTABLISHED
        self.established_us = now_us
        self._syn_deadline_us = None
        self.sack = self.cfg.sack and opts.sack_permitted   # RFC 2018 sec. 2
        self.ecn = self.cfg.ecn and bool(flags & F_ECE)      # RFC 3168 sec. 6.1.1
        if self.ecn and self.on_ecn_ok is not None:
            self.on_ecn_ok()
        self.st.sack = self.sack
        self.recovery = recovery_for(self, self.sack)
        self._set_rwnd(rwnd)
        self.pacer.restart(now_us)
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
        recovery = self.recovery
        recovery.on_cumulative_ack(new_sacked)
        self._sync_state()
        info = self._ack_info(now_us, ack, acked_bytes, rtt_us, 0)
        self.cc.on_feedback(st, info)
        restart_timer = True
        if st.in_recovery:
            if recovery.full_ack(ack):
                st.in_recovery = False        # full ACK (RFC 6582 step 6, RFC 6675 step A) / Reno
                recovery.on_exit()
                self._sync_state()
                self.cc.on_exit_recovery(st, info)
            else:
                self.cc.on_partial_ack(st, info)
                restart_timer = recovery.on_partial_ack()
        else:
            self.cc.on_ack(st, info)
            recovery.after_new_ack()
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
        self.recovery.on_duplicate_ack(new_sacked)
        self._sync_state()
        info = self._ack_info(now_us, ack, 0, rtt_us, self.dupacks)
        self.cc.on_feedback(st, info)
        self.cc.on_dupack(st, info)
        self.recovery.after_duplicate_ack(ack)
        st.clamp()

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
        log.offer(self.flow_id, now_us, senderlog.log_row(self, now_us), force=force)

    def summary(self, now_us: int) -> Dict[str, Any]:
        """The end-of-flow figures (docs/transport.md, "Summary")."""
        return senderlog.summary(self, now_us)
