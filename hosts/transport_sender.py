"""The sending half of the transport: a TCP-like sender driven by ACKs and timers.

Pure logic, no sockets and no clock: every method takes ``now_us`` and packets
leave through the ``emit`` callback, so the same object runs in the event loop
(:mod:`bwn.hosts.transport_loop`) and in the unit tests' simulated channel.

What the transport owns (docs/transport.md; hosts/cc/base.py owns the numbers):

* sequence numbers: byte offsets from 0; SYN has seq 0 and consumes nothing,
  FIN has seq = stream length and consumes one number (like TCP's FIN);
* cumulative ACKs and duplicate ACK detection (RFC 5681 sec. 2: an ACK that
  acknowledges nothing new while data is outstanding; our ACKs carry no data and
  the window only moves with ``ack``, so the window condition always holds);
* fast retransmit on the 3rd duplicate ACK and NewReno fast recovery with partial
  ACKs (RFC 6582 sec. 3.2) and the recovery point ``recover`` (sec. 3.2 step 2,
  also set after a timeout: sec. 3.2 step 2 and sec. 4.1), the "impatient" timer
  reset on the first partial ACK only (sec. 3.2 step 5); with
  ``recovery_style == "reno"`` the first new ACK ends recovery (RFC 5681 sec. 3.2
  step 6) and only a timeout sets ``recover``, so Reno may halve twice per window;
* the retransmission timer of RFC 6298 (:mod:`bwn.hosts.transport_rto`): start
  when data is sent and the timer is off (5.1), stop when all is acknowledged
  (5.2), restart on a new ACK (5.3), on expiry retransmit the first unacknowledged
  segment, back off and restart (5.4-5.6); then go-back-N from ``snd_una`` in slow
  start (``cwnd`` = 1 from ``on_timeout``);
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

from .cc.base import AckInfo, CcState, CongestionControl, Feedback, SentSegment
from .flowlog import RttSamples, TimeSeriesLog, rtt_stats_ms
from .transport_rto import (
    DEFAULT_INITIAL_RTO_US,
    DEFAULT_MAX_RTO_US,
    DEFAULT_MIN_RTO_US,
    RtoEstimator,
)
from .transport_source import StreamSource
from .transport_wire import (
    ACK_IN_STRUCT,
    ACK_VK,
    DEFAULT_MSS_BYTES,
    ETHERNET_OVERHEAD_BYTES,
    F_ACK,
    F_DATA,
    F_FIN,
    F_RETX,
    F_RST,
    F_SYN,
    HEADERS_LEN,
    IP_UDP_OVERHEAD_BYTES,
    TRANSPORT_VERSION,
    TS_MASK,
    feedback_from_echo,
    pack_data_headers,
    ts_diff_us,
)

from bwn.wire import ebn_decode_kbps

DUPACK_THRESHOLD = 3  # RFC 5681 sec. 3.2
DEFAULT_RWND_BYTES = 64 * 1024  # assumed until the SYN-ACK tells the real window
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
        self.st = CcState(mss_bytes=self.mss_bytes)
        self.rto = RtoEstimator(initial_rto_us=self.cfg.initial_rto_us,
                                min_rto_us=self.cfg.min_rto_us, max_rto_us=self.cfg.max_rto_us)
        self.state = SenderState.CONNECTING
        self.fail_reason: Optional[str] = None
        self.interrupted = False
        self.blocked = False  # the last emit would have blocked

        # Sequence space (RFC 793 names).
        self.snd_una = 0
        self.snd_nxt = 0
        self.snd_max = 0
        self.stream_end: Optional[int] = source.length_bytes  # FIN's seq once known
        self.rwnd_bytes = DEFAULT_RWND_BYTES
        # Loss recovery (RFC 5681 / 6582).
        self.dupacks = 0
        self.recover = 0       # RFC 6582 "recover", exclusive: one past the highest seq sent
        self.rto_recover = 0   # the same, set only by timeouts (used by recovery_style "reno")
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
        self.rtt_samples = RttSamples()
        self.last_rtt_sample_us: Optional[int] = None
        # ACK send-time (receiver clock) unwrapped from 32 bits.
        self._ack_ts_raw: Optional[int] = None
        self._ack_ts_us = 0
        # The last echo seen, decoded once (most ACKs carry the same echo).
        self._echo_key: Optional[Tuple[int, int, int, int, int]] = None
        self.feedback: Optional[Feedback] = None

        self._buf = bytearray(HEADERS_LEN + self.mss_bytes)
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
        pack_data_headers(self._buf, flags, self.flow_id, 0, now_us)
        if self.emit(self._view[:HEADERS_LEN]):
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
        st.bytes_in_flight = self.snd_nxt - self.snd_una
        st.in_recovery = False
        self.cc.on_timeout(st)
        st.clamp()
        self.dupacks = 0
        self._retx_pending = False
        self.recover = self.snd_max     # RFC 6582 sec. 3.2 step 2 (after a timeout)
        self.rto_recover = self.snd_max
        self.rto.on_timeout()
        self.snd_nxt = self.snd_una     # go-back-N
        st.bytes_in_flight = 0
        self.rto_deadline_us = None     # re-armed by the retransmission (sec. 5.6)
        self.pace_next_us = now_us

    # -- sending ------------------------------------------------------------------------
    def pump(self, now_us: int) -> None:
        """Send what the window, the receive window and the pacing rate allow."""
        if self.state is not SenderState.ESTABLISHED:
            return
        self.blocked = False
        self._pace_waiting = False
        self._app_wait_until_us = None
        st = self.st
        if self._retx_pending:
            if not self._send_segment(self.snd_una, now_us, True):
                return
            self._retx_pending = False
        mss = self.mss_bytes
        cwnd_bytes = int(st.cwnd * mss)
        rate_bps = st.pacing_rate_bps
        app_rate_bps = self.cfg.app_rate_bps
        while True:
            end = self.stream_end
            nxt = self.snd_nxt
            if end is None:
                seg_len = mss
            elif nxt < end:
                seg_len = min(mss, end - nxt)
            elif nxt == end:
                seg_len = 0  # the FIN: exempt from windows and pacing
            else:
                return       # FIN already sent
            if seg_len and app_rate_bps and nxt + seg_len > self.snd_max:
                # Application-limited: whole segments (like Nagle) once the bytes exist.
                assert self.established_us is not None
                ready_us = self.established_us + int((nxt + seg_len) * 8e6 / app_rate_bps)
                if now_us < ready_us:
                    self._app_wait_until_us = ready_us
                    return
            if seg_len:
                flight = nxt - self.snd_una
                if flight > 0 and (flight + seg_len > cwnd_bytes
                                   or nxt + seg_len > self.snd_una + self.rwnd_bytes):
                    return
                if rate_bps and now_us < self.pace_next_us:
                    self._pace_waiting = True
                    return
            if not self._send_segment(nxt, now_us, nxt < self.snd_max):
                return
            self.snd_nxt = nxt + (seg_len or 1)
            st.bytes_in_flight = self.snd_nxt - self.snd_una

    def _send_segment(self, seq: int, now_us: int, retransmit: bool) -> bool:
        end = self.stream_end
        if end is not None and seq >= end:
            seg_len = 0
            flags = F_FIN
        else:
            seg_len = self.mss_bytes if end is None else min(self.mss_bytes, end - seq)
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
            self.cc.on_packet_sent(self.st, SentSegment(now_us, seq, seg_len, retransmit))
        return True

    # -- receiving ----------------------------------------------------------------------
    def on_datagram(self, data: Any, now_us: int) -> None:
        """Process one datagram from the receiver (an ACK), then send what is allowed."""
        if len(data) < HEADERS_LEN:
            self.bad_packets += 1
            return
        (vk, echo_ebn, echo_narrow, echo_tight, echo_hop, bwn_flags, tver, flags, _words,
         flow_id, ack, rwnd, ts_val, ts_ecr) = ACK_IN_STRUCT.unpack_from(data)
        if vk != ACK_VK or tver != TRANSPORT_VERSION or flow_id != self.flow_id:
            self.bad_packets += 1
            return
        if self.finished:
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
                self._on_syn_ack(now_us, rwnd, rtt_us)
            return
        if ack > self.snd_max:
            self.bad_packets += 1  # acknowledges what was never sent
            return
        self._set_rwnd(rwnd)
        if ack > self.snd_una:
            self._on_new_ack(now_us, ack, rtt_us)
        elif ack == self.snd_una and self.snd_max > self.snd_una and not flags & F_SYN:
            self._on_dupack(now_us, ack, rtt_us)  # a repeated SYN-ACK is no duplicate ACK
        else:
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

    def _on_syn_ack(self, now_us: int, rwnd: int, rtt_us: Optional[int]) -> None:
        self.state = SenderState.ESTABLISHED
        self.established_us = now_us
        self._syn_deadline_us = None
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
        self.cc.on_feedback(self.st, self._ack_info(now_us, 0, 0, rtt_us, 0))
        self.st.clamp()
        self._log_row(now_us)
        self.pump(now_us)

    def _on_new_ack(self, now_us: int, ack: int, rtt_us: Optional[int]) -> None:
        st = self.st
        end = self.stream_end
        if end is None:
            acked_bytes = ack - self.snd_una
        else:  # the FIN's sequence number is not a byte of the stream
            acked_bytes = max(min(ack, end) - min(self.snd_una, end), 0)
        self.snd_una = ack
        if self.snd_nxt < ack:
            self.snd_nxt = ack  # after go-back-N the receiver may hold more than we resent
        st.bytes_in_flight = self.snd_nxt - self.snd_una
        st.delivered_bytes += acked_bytes
        self.dupacks = 0
        self._consecutive_timeouts = 0
        info = self._ack_info(now_us, ack, acked_bytes, rtt_us, 0)
        self.cc.on_feedback(st, info)
        restart_timer = True
        if st.in_recovery:
            if ack >= self.recover or self.cc.recovery_style == "reno":
                st.in_recovery = False        # full ACK (RFC 6582 step 6) / Reno
                self.cc.on_exit_recovery(st, info)
            else:
                self._retx_pending = True     # partial ACK (RFC 6582 step 5)
                self.cc.on_partial_ack(st, info)
                restart_timer = not self._first_partial_done
                self._first_partial_done = True
        else:
            self.cc.on_ack(st, info)
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

    def _on_dupack(self, now_us: int, ack: int, rtt_us: Optional[int]) -> None:
        st = self.st
        self.dupacks += 1
        self.dupacks_total += 1
        info = self._ack_info(now_us, ack, 0, rtt_us, self.dupacks)
        self.cc.on_feedback(st, info)
        self.cc.on_dupack(st, info)
        if self.dupacks == DUPACK_THRESHOLD and not st.in_recovery:
            if self.cc.recovery_style == "reno":
                allowed = ack >= self.rto_recover
            else:
                allowed = ack >= self.recover  # "covers more than recover" (RFC 6582 step 2)
            if allowed:
                self.recover = self.snd_max
                st.in_recovery = True
                st.recovery_point = self.snd_max
                st.bytes_in_flight = self.snd_nxt - self.snd_una
                self._first_partial_done = False
                self.fast_recoveries += 1
                self.cc.on_enter_recovery(st)
                self._retx_pending = True   # fast retransmit (RFC 5681 sec. 3.2 step 2)
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
        out: Dict[str, Any] = {
            "flow_id": self.flow_id,
            "algo": self.cc.name,
            "status": status,
            "bytes": delivered,
            "stream_bytes": self.stream_end,
            "duration_s": None if duration_s is None else round(duration_s, 6),
            "goodput_bps": None if goodput is None else round(goodput, 1),
            "mss_bytes": self.mss_bytes,
            "packets_sent": self.packets_sent,
            "payload_bytes_sent": self.payload_bytes_sent,
            "retransmits": self.retransmits,
            "timeouts": self.timeouts,
            "fast_recoveries": self.fast_recoveries,
            "acks_received": self.acks_received,
            "dupacks": self.dupacks_total,
            "final_cwnd": round(self.st.cwnd, 3),
            "final_ssthresh": self.st.ssthresh if self.st.ssthresh != float("inf") else None,
            "srtt_ms": None if self.rto.srtt_us is None else round(self.rto.srtt_us / 1e3, 3),
            "min_rtt_ms": None if self.st.min_rtt_us is None else self.st.min_rtt_us / 1e3,
        }
        out.update(rtt_stats_ms(self.rtt_samples.values))
        return out
