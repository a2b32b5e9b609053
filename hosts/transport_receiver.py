"""The receiving half of the transport: reassembly, ACKs and the BWN echo.

Pure logic like :mod:`bwn.hosts.transport_sender`: ``now_us`` comes in with every
call and ACKs leave through ``emit(view, addr)``.

* Flows are told apart by ``(source address, source port, flow id)``; a SYN opens
  a flow (answered by SYN|ACK, again for every retransmitted SYN), data for an
  unknown flow is answered by RST.
* Reassembly: in-order bytes go straight to the flow's sink; out-of-order
  segments wait in a dictionary keyed by sequence number (bounded by the receive
  window, which is fixed: the receiver accepts ``[rcv_nxt, rcv_nxt + window)``).
  Duplicates and overlaps are trimmed, so every byte reaches the sink once, in
  order.
* ACKs (RFC 5681 sec. 4.2, RFC 1122 sec. 4.2.3.2): by default one per segment. With
  ``delayed_ack``, an in-order segment is acknowledged at the latest with the
  second segment or after ``delack_us`` (40 ms default, Linux's minimum delayed-ACK
  timeout; the CLI allows at most 200 ms, well inside RFC 1122 sec. 4.2.3.2's
  0.5 s); out-of-order segments, duplicates, segments that fill a gap (RFC 5681
  sec. 4.2), SYN and FIN are acknowledged at once.
* Every ACK echoes the ``ts_val`` (and RETX flag, for Karn's rule) of the segment
  that triggered it, carries the receiver's own send time in ``ts_val`` (SARBE),
  and echoes the newest BWN forward section the flow received (ECHO_VALID).
* FIN: when every byte before the FIN has arrived the sink is closed and the FIN
  acknowledged (``ack = stream length + 1``, FIN|ACK). The flow then lingers for
  ``time_wait_us`` to answer retransmitted FINs.
"""
from __future__ import annotations

import heapq
from typing import IO, Any, Callable, Dict, List, Optional, Tuple

from .flowlog import TimeSeriesLog
from .transport_wire import (
    DATA_IN_STRUCT,
    DATA_VK,
    F_ACK,
    F_FIN,
    F_RETX,
    F_RST,
    F_SYN,
    HDR_WORDS,
    HEADERS_LEN,
    TRANSPORT_VERSION,
    pack_ack_headers,
)
from bwn.wire import BWN_HEADER_LEN

DEFAULT_WINDOW_BYTES = 4 * 1024 * 1024
DEFAULT_DELACK_US = 40_000
DEFAULT_TIME_WAIT_US = 10_000_000
DEFAULT_IDLE_TIMEOUT_US = 120_000_000

Addr = Any  # (host, port) as the socket module gives it
FlowKey = Tuple[Addr, int]
EmitTo = Callable[[memoryview, Addr], bool]


class Sink:
    """Where a flow's bytes go."""

    path: Optional[str] = None

    def write(self, data: memoryview) -> None:
        pass

    def close(self) -> None:
        pass


class FileSink(Sink):
    def __init__(self, path: str) -> None:
        self.path = path
        self._fh: IO[bytes] = open(path, "wb", buffering=1 << 20)

    def write(self, data: memoryview) -> None:
        self._fh.write(data)

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()


class MemorySink(Sink):
    """Keeps the stream in memory (tests)."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.closed = False

    def write(self, data: memoryview) -> None:
        self.data += data

    def close(self) -> None:
        self.closed = True


class ReceiverFlow:
    """Reassembly and ACK state of one flow."""

    def __init__(self, addr: Addr, flow_id: int, sink: Sink, window_bytes: int,
                 now_us: int) -> None:
        self.addr = addr
        self.flow_id = flow_id
        self.sink = sink
        self.window_bytes = window_bytes
        self.rcv_nxt = 0
        self.ooo: Dict[int, bytes] = {}
        self._ooo_keys: List[int] = []  # heap of keys (lazy deletion) to find overlaps
        self.ooo_bytes = 0
        self.fin_seq: Optional[int] = None
        self.complete = False           # FIN received after every byte
        self.aborted = False
        self.echo: Optional[Tuple[int, int, int, int]] = None
        self.ts_ecr_us = 0
        self.ts_retx = 0
        self.unacked_segments = 0
        self.delack_deadline_us: Optional[int] = None
        self.first_us = now_us
        self.last_us = now_us
        self.closed_us: Optional[int] = None
        self.segments = 0
        self.duplicate_segments = 0
        self.out_of_order_segments = 0
        self.acks_sent = 0

    @property
    def ack_seq(self) -> int:
        return self.rcv_nxt + 1 if self.complete else self.rcv_nxt

    def on_segment(self, seq: int, payload: memoryview, fin: bool) -> bool:
        """Take one segment; True if it must be acknowledged at once."""
        self.segments += 1
        n = len(payload)
        if self.complete:
            self.duplicate_segments += 1
            return True
        immediate = False
        if fin:
            self.fin_seq = seq + n
            immediate = True
        if n:
            end = seq + n
            nxt = self.rcv_nxt
            if end <= nxt:
                self.duplicate_segments += 1
                immediate = True
            elif seq > nxt:
                immediate = True
                self.out_of_order_segments += 1
                limit = nxt + self.window_bytes
                if seq < limit and seq not in self.ooo:
                    if end > limit:
                        payload = payload[:limit - seq]
                    self.ooo[seq] = bytes(payload)
                    heapq.heappush(self._ooo_keys, seq)
                    self.ooo_bytes += len(payload)
                elif seq in self.ooo:
                    self.duplicate_segments += 1
            else:
                self.sink.write(payload[nxt - seq:] if seq < nxt else payload)
                self.rcv_nxt = end
                if self.ooo:
                    immediate = True  # filled (part of) a gap: RFC 5681 sec. 4.2
                    self._drain()
        if self.fin_seq is not None and self.rcv_nxt >= self.fin_seq and not self.complete:
            self.rcv_nxt = self.fin_seq
            self.complete = True
            self.sink.close()
            immediate = True
        return immediate

    def _drain(self) -> None:
        """Deliver the out-of-order segments that are now in order."""
        ooo = self.ooo
        keys = self._ooo_keys
        while ooo:
            seg = ooo.pop(self.rcv_nxt, None)
            if seg is not None:
                self.ooo_bytes -= len(seg)
                self.sink.write(memoryview(seg))
                self.rcv_nxt += len(seg)
                continue
            # A stored segment that starts before rcv_nxt (overlap) or nothing usable.
            progressed = False
            while keys and (keys[0] not in ooo or keys[0] < self.rcv_nxt):
                k = heapq.heappop(keys)
                seg = ooo.pop(k, None)
                if seg is None:
                    continue
                self.ooo_bytes -= len(seg)
                if k + len(seg) > self.rcv_nxt:
                    self.sink.write(memoryview(seg)[self.rcv_nxt - k:])
                    self.rcv_nxt = k + len(seg)
                    progressed = True
                    break
            if not progressed:
                break
        if not ooo:
            keys.clear()

    def summary(self, now_us: int) -> Dict[str, Any]:
        end = self.closed_us if self.closed_us is not None else self.last_us
        duration_s = max(end - self.first_us, 0) / 1e6
        delivered = self.rcv_nxt
        status = "complete" if self.complete else ("reset" if self.aborted else "incomplete")
        return {
            "flow_id": self.flow_id,
            "peer": f"{self.addr[0]}:{self.addr[1]}",
            "status": status,
            "bytes": delivered,
            "duration_s": round(duration_s, 6),
            "goodput_bps": round(delivered * 8 / duration_s, 1) if duration_s > 0 else None,
            "segments": self.segments,
            "duplicate_segments": self.duplicate_segments,
            "out_of_order_segments": self.out_of_order_segments,
            "acks_sent": self.acks_sent,
            "out": self.sink.path,
        }


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
        log: Optional[TimeSeriesLog] = None,
        on_flow_end: Optional[FlowCallback] = None,
    ) -> None:
        self.emit = emit
        self.sink_factory = sink_factory
        self.window_bytes = min(window_bytes, 0xFFFFFFFF)
        self.delayed_ack = delayed_ack
        self.delack_us = delack_us
        self.time_wait_us = time_wait_us
        self.idle_timeout_us = idle_timeout_us
        self.log = log
        self.on_flow_end = on_flow_end
        self.flows: Dict[FlowKey, ReceiverFlow] = {}
        self._delack: Dict[FlowKey, ReceiverFlow] = {}
        self._buf = bytearray(HEADERS_LEN)
        self._view = memoryview(self._buf)
        self.bad_packets = 0
        self.resets_sent = 0
        self._next_housekeeping_us = 0

    # -- packets ------------------------------------------------------------------------
    def on_datagram(self, data: Any, addr: Addr, now_us: int) -> None:
        n = len(data)
        if n < HEADERS_LEN:
            self.bad_packets += 1
            return
        (vk, hop, ebn, narrow, tight, tver, flags, words, flow_id, seq,
         ts_val) = DATA_IN_STRUCT.unpack_from(data)
        hdr_len = BWN_HEADER_LEN + 4 * words
        if vk != DATA_VK or tver != TRANSPORT_VERSION or words < HDR_WORDS or hdr_len > n:
            self.bad_packets += 1
            return
        key = (addr, flow_id)
        flow = self.flows.get(key)
        if flags & F_SYN:
            if flow is None or (flow.complete and seq == 0 and flow.rcv_nxt > 0):
                if flow is not None:
                    self._forget(key)
                flow = ReceiverFlow(addr, flow_id, self.sink_factory(addr, flow_id),
                                    self.window_bytes, now_us)
                self.flows[key] = flow
            flow.echo = (hop, ebn, narrow, tight)
            flow.ts_ecr_us = ts_val
            flow.ts_retx = flags & F_RETX
            flow.last_us = now_us
            self._send_ack(flow, now_us, F_SYN)
            return
        if flow is None:
            if not flags & F_RST:
                self._send_rst(addr, flow_id, now_us, ts_val)
            return
        flow.last_us = now_us
        if flags & F_RST:
            if not flow.complete:
                flow.aborted = True
                self._end_flow(flow, now_us)
            self._forget(key)
            return
        flow.echo = (hop, ebn, narrow, tight)
        flow.ts_ecr_us = ts_val
        flow.ts_retx = flags & F_RETX
        was_complete = flow.complete
        view = data if isinstance(data, memoryview) else memoryview(data)
        immediate = flow.on_segment(seq, view[hdr_len:n], bool(flags & F_FIN))
        if flow.complete and not was_complete:
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

    def _send_ack(self, flow: ReceiverFlow, now_us: int, extra_flags: int = 0) -> None:
        flags = F_ACK | extra_flags | flow.ts_retx
        if flow.complete:
            flags |= F_FIN
        pack_ack_headers(self._buf, flags, flow.flow_id, flow.ack_seq, flow.window_bytes,
                         now_us, flow.ts_ecr_us, flow.echo)
        self.emit(self._view, flow.addr)
        flow.acks_sent += 1
        flow.unacked_segments = 0
        if flow.delack_deadline_us is not None:
            flow.delack_deadline_us = None
            self._delack.pop((flow.addr, flow.flow_id), None)

    def _send_rst(self, addr: Addr, flow_id: int, now_us: int, ts_ecr: int) -> None:
        pack_ack_headers(self._buf, F_RST | F_ACK, flow_id, 0, 0, now_us, ts_ecr, None)
        self.emit(self._view, addr)
        self.resets_sent += 1

    def _end_flow(self, flow: ReceiverFlow, now_us: int) -> None:
        flow.closed_us = now_us
        flow.sink.close()
        if self.log is not None:
            self.log.offer((flow.addr, flow.flow_id), now_us, self._row(flow, now_us),
                           force=True)
        if self.on_flow_end is not None:
            self.on_flow_end(flow)

    def _forget(self, key: FlowKey) -> None:
        self.flows.pop(key, None)
        self._delack.pop(key, None)

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
            self._next_housekeeping_us = now_us + 500_000
            for key, flow in list(self.flows.items()):
                if flow.complete and flow.closed_us is not None:
                    if now_us - flow.closed_us >= self.time_wait_us:
                        self._forget(key)
                elif now_us - flow.last_us >= self.idle_timeout_us:
                    self._end_flow(flow, now_us)
                    self._forget(key)

    def close_all(self, now_us: int) -> List[ReceiverFlow]:
        """End every open flow (shutdown); returns the flows that were still open."""
        still_open = [f for f in self.flows.values() if not f.complete and f.closed_us is None]
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
        }
