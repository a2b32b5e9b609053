"""The receiving half of the transport: flows, ACKs, SACK and the BWN echo.

Pure logic like :mod:`hosts.transport.sender`: ``now_us`` comes in with every
call and ACKs leave through ``emit(view, addr)``. One flow's reassembly and SACK
blocks are :class:`hosts.transport.reassembly.ReceiverFlow`'s; this module is
the demultiplexing, the flows' life, the ACKs and the limits.

* Flows are told apart by ``(source address, source port, flow id)``. A SYN opens
  a *half-open* flow (answered by SYN|ACK, again for every retransmitted SYN) that
  holds no output file and little memory; its first DATA or FIN makes it an open
  flow with a sink. Data for an unknown flow is answered by RST.
* Reassembly: in-order bytes go straight to the flow's sink; out-of-order
  segments wait in a dictionary keyed by sequence number (bounded by the receive
  window, which is fixed: the receiver accepts ``[rcv_nxt, rcv_nxt + window)``,
  and by a budget shared by all flows). Duplicates and overlaps are trimmed, so
  every byte reaches the sink once, in order.
* ACKs (RFC 5681 sec. 4.2, RFC 1122 sec. 4.2.3.2): by default one per segment. With
  ``delayed_ack``, an in-order segment is acknowledged at the latest with the
  second segment or after ``delack_us`` (40 ms default, Linux's minimum delayed-ACK
  timeout; the CLI allows at most 200 ms, well inside RFC 1122 sec. 4.2.3.2's
  0.5 s); out-of-order segments, duplicates, segments that fill a gap (RFC 5681
  sec. 4.2), SYN and FIN are acknowledged at once.
* SACK (RFC 2018), when the SYN offered it: every ACK sent while out-of-order data
  is held carries up to 4 SACK blocks, the first one the range that holds the
  segment that triggered the ACK (unless it advanced the cumulative ACK), then the
  ranges reported first most recently, then the highest others (sec. 4). The
  receiver never discards data it has SACKed (no reneging).
* Every ACK echoes the ``ts_val`` (and RETX flag, for Karn's rule) of the segment
  that triggered it, carries the receiver's own send time in ``ts_val`` (SARBE),
  and echoes the newest BWN forward section the flow received (ECHO_VALID). A
  segment whose timestamp is older than the newest one seen and that brings no new
  byte (a network duplicate, a replay) moves neither: the ACK echoes the newest
  timestamp instead (RFC 7323 sec. 4.3's TS.Recent), so a replayed segment cannot
  feed the sender an ancient RTT sample or stale feedback.
* FIN: when every byte before the FIN has arrived the sink is closed and the FIN
  acknowledged (``ack = stream length + 1``, FIN|ACK, with the flow's counters in
  an RCV_STATS option). The flow then lingers for ``time_wait_us`` to answer
  retransmitted FINs.
* ECN (RFC 3168 sec. 6.1), when the SYN offered it (ECE|CWR): the SYN|ACK carries
  ECE; a data segment that arrived with the CE mark (the event loop reads the IP
  header's ECN field, ``on_datagram(..., ce=True)``) makes every following ACK
  carry ECE until a segment with CWR arrives.
* Bounds (docs/transport.md "Receiver limits"): at most ``max_flows`` open and
  ``max_half_open`` half-open flows (the oldest half-open one is evicted for a new
  SYN; a first DATA beyond ``max_flows`` is refused with RST); half-open flows time
  out after ``half_open_timeout_us``, open ones after ``idle_timeout_us`` without a
  packet; all out-of-order data together at most ``max_ooo_bytes``. Every datagram
  that is not used is counted by kind in :class:`ReceiverStats`.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Dict, List, Optional, Tuple

from hosts.flowlog import TimeSeriesLog
from hosts.transport.reassembly import Addr, OooBudget, ReceiverFlow, ReceiverStats, Sink
from hosts.transport.wire import (
    DATA_IN_STRUCT,
    DATA_VK,
    F_ACK,
    F_CWR,
    F_ECE,
    F_FIN,
    F_RETX,
    F_RST,
    F_SYN,
    HDR_WORDS,
    HEADERS_LEN,
    TRANSPORT_VERSION,
    OptionError,
    encode_options,
    has_xr,
    insert_xr,
    pack_ack_headers,
    parse_options,
    split_xr,
    ts_diff_us,
)
from bwn.protocol.wire import BWN_HEADER_LEN, XR_FEEDBACK_UNSET, XR_HEADER_LEN, XR_RATE_UNSET

DEFAULT_WINDOW_BYTES = 4 * 1024 * 1024
DEFAULT_DELACK_US = 40_000
DEFAULT_TIME_WAIT_US = 10_000_000
DEFAULT_IDLE_TIMEOUT_US = 120_000_000
DEFAULT_HALF_OPEN_TIMEOUT_US = 10_000_000   # bwn-send's default --connect-timeout
DEFAULT_MAX_FLOWS = 1000                    # open flows (each may hold an output file)
DEFAULT_MAX_HALF_OPEN = 4096
DEFAULT_MAX_OOO_BYTES = 64 * 1024 * 1024    # out-of-order data of all flows together
HOUSEKEEPING_US = 500_000

FlowKey = Tuple[Addr, int]
EmitTo = Callable[[memoryview, Addr], bool]




SinkFactory = Callable[[Addr, int], Sink]
FlowCallback = Callable[[ReceiverFlow], None]


class Receiver:
    """All flows arriving at one UDP port."""

    def __init__(
        self,
        emit: EmitTo,
        sink_factory: SinkFactory,
        *,
        window_bytes: int = DEFAULT_WINDOW_BYTES,
        delayed_ack: bool = False,
        delack_us: int = DEFAULT_DELACK_US,
        time_wait_us: int = DEFAULT_TIME_WAIT_US,
        idle_timeout_us: int = DEFAULT_IDLE_TIMEOUT_US,
        half_open_timeout_us: int = DEFAULT_HALF_OPEN_TIMEOUT_US,
        max_flows: int = DEFAULT_MAX_FLOWS,
        max_half_open: int = DEFAULT_MAX_HALF_OPEN,
        max_ooo_bytes: int = DEFAULT_MAX_OOO_BYTES,
        sack: bool = True,
        log: Optional[TimeSeriesLog] = None,
        on_flow_end: Optional[FlowCallback] = None,
    ) -> None:
        if max_flows < 1 or max_half_open < 1 or max_ooo_bytes < 0:
            raise ValueError("max_flows and max_half_open must be >= 1, max_ooo_bytes >= 0")
        self.emit = emit
        self.sink_factory = sink_factory
        self.window_bytes = min(window_bytes, 0xFFFFFFFF)
        self.delayed_ack = delayed_ack
        self.delack_us = delack_us
        self.time_wait_us = time_wait_us
        self.idle_timeout_us = idle_timeout_us
        self.half_open_timeout_us = half_open_timeout_us
        self.max_flows = max_flows
        self.max_half_open = max_half_open
        self.budget = OooBudget(max_ooo_bytes)
        self.sack = sack
        self.log = log
        self.on_flow_end = on_flow_end
        self.flows: Dict[FlowKey, ReceiverFlow] = {}
        self._half_open: "OrderedDict[FlowKey, None]" = OrderedDict()  # oldest first
        self._open_count = 0
        self._delack: Dict[FlowKey, ReceiverFlow] = {}
        self._buf = bytearray(HEADERS_LEN + XR_HEADER_LEN + 128)
        self._view = memoryview(self._buf)
        self._syn_ack_options = encode_options(sack_permitted=True)
        self.stats = ReceiverStats()
        self._next_housekeeping_us = 0

    def stats_dict(self) -> Dict[str, int]:
        """Receiver-wide counters (``--stats-json``, the exit line of bwn-recv)."""
        st = self.stats
        st.ooo_dropped_budget = self.budget.dropped
        out = st.as_dict()
        # Established flows hold state until forgotten; one in TIME_WAIT is not open.
        time_wait = sum(1 for f in self.flows.values() if f.established and f.in_time_wait)
        out["open_flows"] = self._open_count - time_wait
        out["time_wait_flows"] = time_wait
        out["half_open_flows"] = len(self._half_open)
        out["ooo_bytes_held"] = self.budget.used
        return out

    @property
    def bad_packets(self) -> int:
        return self.stats.malformed

    @property
    def resets_sent(self) -> int:
        return self.stats.resets_sent

    @property
    def half_open_count(self) -> int:
        return len(self._half_open)

    @property
    def open_count(self) -> int:
        return self._open_count

    # -- packets ------------------------------------------------------------------------
    def on_datagram(self, data: Any, addr: Addr, now_us: int, ce: bool = False, dscp: int = 0) -> None:
        """One datagram from ``addr``; ``ce``: its IP header carried the CE mark (ECN);
        ``dscp``: its IP header's DSCP (the new payload it brings is counted by DSCP)."""
        stats = self.stats
        stats.datagrams += 1
        xr = None
        if has_xr(data):                  # XCP's and RCP's header: taken out, echoed in the ACK
            split = split_xr(data)
            if split is None:
                stats.malformed_short += 1
                return
            data, xr = split
        n = len(data)
        if n < HEADERS_LEN:
            stats.malformed_short += 1
            return
        (vk, hop, ebn, narrow, tight, tver, flags, words, flow_id, seq,
         ts_val) = DATA_IN_STRUCT.unpack_from(data)
        if vk != DATA_VK or tver != TRANSPORT_VERSION:
            stats.malformed_header += 1
            return
        hdr_len = BWN_HEADER_LEN + 4 * words
        if words < HDR_WORDS or hdr_len > n:
            stats.malformed_length += 1
            return
        key = (addr, flow_id)
        flow = self.flows.get(key)
        if flags & F_SYN:
            sack_offered = False
            if words > HDR_WORDS:
                try:
                    sack_offered = parse_options(data, HEADERS_LEN, hdr_len).sack_permitted
                except OptionError:
                    stats.malformed_options += 1
                    return
            stats.syn_received += 1
            if flow is None or (flow.complete and seq == 0 and flow.rcv_nxt > 0):
                if flow is not None:
                    self._forget(key)
                flow = self._open_half(key, addr, flow_id, now_us, self.sack and sack_offered)
                # RFC 3168 sec. 6.1.1: a SYN with ECE and CWR offers ECN; the SYN|ACK's ECE accepts.
                flow.ecn_ok = flags & (F_ECE | F_CWR) == F_ECE | F_CWR
            elif not flow.established:
                self._half_open.move_to_end(key)
            self._take_echo(flow, hop, ebn, narrow, tight, ts_val, flags, not flow.established)
            if xr is not None:
                flow.take_xr(xr[2], xr[3])
            flow.last_us = now_us
            self._send_ack(flow, now_us, F_SYN | (F_ECE if flow.ecn_ok else 0),
                           self._syn_ack_options if flow.sack_ok else b"")
            return
        if flow is None:
            if flags & F_RST:
                stats.unknown_rst += 1
            else:
                stats.unknown_flow += 1
                self._send_rst(addr, flow_id, now_us, ts_val)
            return
        if flags & F_RST:
            if not flow.complete:
                flow.aborted = True
                if flow.established:
                    stats.flows_reset += 1
                    self._end_flow(flow, now_us)
            self._forget(key)
            return
        if not flow.established and not self._establish(flow, key, now_us, ts_val):
            return
        flow.last_us = now_us
        if flow.ecn_ok:
            # RFC 3168 sec. 6.1.3: CWR ends the echo of the marks before it; a CE mark
            # (this segment's too) starts it again.
            if flags & F_CWR:
                flow.ece = False
            if ce:
                flow.ece = True
                flow.ce_segments += 1
                stats.ce_segments += 1
        was_complete = flow.complete
        ooo_before = flow.ooo_bytes
        delivered_before = flow.rcv_nxt
        view = data if isinstance(data, memoryview) else memoryview(data)
        immediate = flow.on_segment(seq, view[hdr_len:n], bool(flags & F_FIN),
                                    bool(flags & F_RETX))
        new_bytes = flow.rcv_nxt - delivered_before + flow.ooo_bytes - ooo_before
        new_data = new_bytes > 0
        if new_data:
            flow.payload_bytes_by_dscp[dscp] = flow.payload_bytes_by_dscp.get(dscp, 0) + new_bytes
        self._take_echo(flow, hop, ebn, narrow, tight, ts_val, flags, new_data)
        if xr is not None:
            flow.take_xr(xr[2], xr[3])
        if flow.complete and not was_complete:
            stats.flows_completed += 1
            self._end_flow(flow, now_us)
        if immediate or not self.delayed_ack:
            self._send_ack(flow, now_us)
        else:
            flow.unacked_segments += 1
            if flow.unacked_segments >= 2:  # RFC 1122 / RFC 5681 sec. 4.2: every 2nd segment
                self._send_ack(flow, now_us)
            elif flow.delack_deadline_us is None:
                flow.delack_deadline_us = now_us + self.delack_us
                self._delack[key] = flow
        log = self.log
        if log is not None and log.due(key, now_us):
            log.offer(key, now_us, self._row(flow, now_us))

    @staticmethod
    def _take_echo(flow: ReceiverFlow, hop: int, ebn: int, narrow: int, tight: int,
                   ts_val: int, flags: int, new_data: bool) -> None:
        """What the next ACK echoes (module docstring): this segment's timestamp if it
        is the newest seen or brought new bytes, else the newest one (TS.Recent)."""
        retx = flags & F_RETX
        recent = flow.ts_recent
        if recent is None or ts_diff_us(ts_val, recent) >= 0:
            flow.ts_recent = ts_val
            flow.ts_recent_retx = retx
            flow.echo = (hop, ebn, narrow, tight)
        if new_data or recent is None or ts_diff_us(ts_val, recent) >= 0:
            flow.ts_ecr_us = ts_val
            flow.ts_retx = retx
        else:
            flow.ts_ecr_us = flow.ts_recent if flow.ts_recent is not None else ts_val
            flow.ts_retx = flow.ts_recent_retx

    def _open_half(self, key: FlowKey, addr: Addr, flow_id: int, now_us: int,
                   sack_ok: bool) -> ReceiverFlow:
        while len(self._half_open) >= self.max_half_open:
            old, _ = self._half_open.popitem(last=False)
            self.flows.pop(old, None)
            self.stats.half_open_evicted += 1
        flow = ReceiverFlow(addr, flow_id, None, self.window_bytes, now_us,
                            budget=self.budget, sack_ok=sack_ok, totals=self.stats)
        self.flows[key] = flow
        self._half_open[key] = None
        self.stats.half_open_opened += 1
        return flow

    def _establish(self, flow: ReceiverFlow, key: FlowKey, now_us: int, ts_val: int) -> bool:
        """The first DATA/FIN of a half-open flow: give it its sink (or refuse it)."""
        self._half_open.pop(key, None)
        if self._open_count >= self.max_flows:
            self.flows.pop(key, None)
            self.stats.flows_refused += 1
            self._send_rst(flow.addr, flow.flow_id, now_us, ts_val)
            return False
        flow.sink = self.sink_factory(flow.addr, flow.flow_id)
        flow.established = True
        flow.first_us = now_us
        self._open_count += 1
        self.stats.flows_opened += 1
        return True

    def _send_ack(self, flow: ReceiverFlow, now_us: int, extra_flags: int = 0,
                  options: bytes = b"") -> None:
        flags = F_ACK | extra_flags | flow.ts_retx | (F_ECE if flow.ece else 0)
        if flow.complete:
            flags |= F_FIN
            options = options + encode_options(rcv_stats=flow.stats_tuple())
        elif flow.sack_ok and flow.ooo_ranges:
            blocks = flow.sack_blocks()
            if blocks:
                options = options + encode_options(sack_blocks=blocks)
                flow.sack_blocks_sent += len(blocks)
        n = pack_ack_headers(self._buf, flags, flow.flow_id, flow.ack_seq, flow.window_bytes,
                             now_us, flow.ts_ecr_us, flow.echo, options)
        if flow.xr:
            n = insert_xr(self._buf, n, (0, 0, XR_FEEDBACK_UNSET, XR_RATE_UNSET) + flow.pop_xr_echo())
        self.emit(self._view[:n], flow.addr)
        flow.acks_sent += 1
        flow.unacked_segments = 0
        if flow.delack_deadline_us is not None:
            flow.delack_deadline_us = None
            self._delack.pop((flow.addr, flow.flow_id), None)

    def _send_rst(self, addr: Addr, flow_id: int, now_us: int, ts_ecr: int) -> None:
        n = pack_ack_headers(self._buf, F_RST | F_ACK, flow_id, 0, 0, now_us, ts_ecr, None)
        self.emit(self._view[:n], addr)
        self.stats.resets_sent += 1

    def _end_flow(self, flow: ReceiverFlow, now_us: int) -> None:
        flow.closed_us = now_us
        flow.sink.close()
        if self.log is not None:
            self.log.offer((flow.addr, flow.flow_id), now_us, self._row(flow, now_us),
                           force=True)
        if self.on_flow_end is not None:
            self.on_flow_end(flow)

    def _forget(self, key: FlowKey) -> None:
        flow = self.flows.pop(key, None)
        self._delack.pop(key, None)
        if key in self._half_open:
            del self._half_open[key]
        elif flow is not None and flow.established:
            self._open_count -= 1
        if flow is not None:
            flow.drop_buffers()

    # -- timers -------------------------------------------------------------------------
    def next_deadline_us(self) -> Optional[int]:
        best: Optional[int] = None
        for flow in self._delack.values():
            d = flow.delack_deadline_us
            if d is not None and (best is None or d < best):
                best = d
        if self.flows:
            h = self._next_housekeeping_us
            best = h if best is None else min(best, h)
        return best

    def on_timer(self, now_us: int) -> None:
        for flow in [f for f in self._delack.values()
                     if f.delack_deadline_us is not None and f.delack_deadline_us <= now_us]:
            self._send_ack(flow, now_us)
        if now_us >= self._next_housekeeping_us:
            self._next_housekeeping_us = now_us + HOUSEKEEPING_US
            self.expire(now_us)

    def expire(self, now_us: int) -> None:
        """Time out half-open, idle and finished flows (also called by on_timer)."""
        half = self._half_open
        while half:
            key = next(iter(half))
            flow = self.flows.get(key)
            if flow is not None and now_us - flow.last_us < self.half_open_timeout_us:
                break
            half.popitem(last=False)
            self.flows.pop(key, None)
            self.stats.half_open_expired += 1
        for key, flow in list(self.flows.items()):
            if not flow.established:
                continue
            if flow.in_time_wait:
                assert flow.closed_us is not None
                if now_us - flow.closed_us >= self.time_wait_us:
                    self._forget(key)
            elif now_us - flow.last_us >= self.idle_timeout_us:
                self.stats.flows_idle_closed += 1
                self._end_flow(flow, now_us)
                self._forget(key)

    def close_all(self, now_us: int) -> List[ReceiverFlow]:
        """End every open flow (shutdown); returns the flows that were still open."""
        still_open = [f for f in self.flows.values()
                      if f.established and not f.complete and f.closed_us is None]
        for flow in still_open:
            self._end_flow(flow, now_us)
        return still_open

    def _row(self, flow: ReceiverFlow, now_us: int) -> Dict[str, Any]:
        echo = flow.echo or (None, None, None, None)
        return {
            "time_s": round((now_us - flow.first_us) / 1e6, 6),
            "flow_id": flow.flow_id,
            "peer": f"{flow.addr[0]}:{flow.addr[1]}",
            "delivered_bytes": flow.rcv_nxt,
            "ooo_bytes": flow.ooo_bytes,
            "segments": flow.segments,
            "duplicate_segments": flow.duplicate_segments,
            "out_of_order_segments": flow.out_of_order_segments,
            "acks_sent": flow.acks_sent,
            "hop_count": echo[0],
            "ebn_code": echo[1],
            "narrow_kbps": echo[2],
            "tight_kbps": echo[3],
            "spurious_retransmissions": flow.spurious_retransmissions,
            "sack_blocks_sent": flow.sack_blocks_sent,
        }
