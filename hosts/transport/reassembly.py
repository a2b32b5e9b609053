"""One flow's half of the receiver: reassembly, SACK blocks, counters; and where its bytes go.

:class:`ReceiverFlow` holds the state of one flow as :class:`hosts.transport.receiver.Receiver`
drives it: in-order bytes go straight to the flow's :class:`Sink`; out-of-order
segments wait in a dictionary keyed by sequence number (bounded by the fixed
receive window ``[rcv_nxt, rcv_nxt + window)`` and by an :class:`OooBudget`
shared by all flows). Duplicates and overlaps are trimmed, so every byte reaches
the sink once, in order. Its SACK blocks (RFC 2018 sec. 4): the range that holds
the segment that triggered the ACK first (unless it advanced the cumulative
ACK), then the ranges reported first most recently, then the highest others.
"""
from __future__ import annotations

import heapq
from dataclasses import asdict, dataclass
from typing import IO, Any, Dict, List, Optional, Tuple

from hosts.transport.sack import RangeSet
from bwn.protocol.wire import XR_FEEDBACK_MIN, XR_FEEDBACK_UNSET, XR_RATE_UNSET
from hosts.transport.wire import MAX_SACK_BLOCKS


Addr = Any  # (host, port) as the socket module gives it


@dataclass
class ReceiverStats:
    """Receiver-wide counters: every datagram is either used or counted here by kind."""

    datagrams: int = 0
    malformed_short: int = 0        # shorter than the 60 bytes of both headers
    malformed_header: int = 0       # not a BWN DATA packet, or not transport version 1
    malformed_length: int = 0       # hdr_words below 9 or beyond the datagram
    malformed_options: int = 0      # SYN options that do not parse
    syn_received: int = 0
    half_open_opened: int = 0
    half_open_expired: int = 0      # no DATA within half_open_timeout_us
    half_open_evicted: int = 0      # pushed out by newer SYNs (max_half_open)
    flows_opened: int = 0           # first DATA/FIN: the flow got its sink
    flows_refused: int = 0          # max_flows open already: answered by RST
    flows_completed: int = 0
    flows_reset: int = 0            # RST from the sender
    flows_idle_closed: int = 0      # no packet for idle_timeout_us
    unknown_flow: int = 0           # DATA/FIN of no flow (or a closed one): answered by RST
    unknown_rst: int = 0            # RST of no flow: ignored
    ooo_dropped_budget: int = 0     # out-of-order segments not stored: max_ooo_bytes reached
    resets_sent: int = 0
    ce_segments: int = 0            # segments of ECN flows that arrived CE-marked
    # Summed over the flows (also in each flow's summary):
    duplicate_segments: int = 0
    spurious_retransmissions: int = 0

    @property
    def malformed(self) -> int:
        return (self.malformed_short + self.malformed_header + self.malformed_length
                + self.malformed_options)

    def as_dict(self) -> Dict[str, int]:
        out = asdict(self)
        out["malformed"] = self.malformed
        return out


class Sink:
    """Where a flow's bytes go."""

    path: Optional[str] = None

    def write(self, data: memoryview) -> None:
        pass

    def close(self) -> None:
        pass


#: Write buffer of an output file. Every open flow holds one, so it is part of the
#: receiver's memory bound (docs/transport.md "Receiver limits"): 64 KiB is one
#: write system call per ~46 full segments.
FILE_BUFFER_BYTES = 64 * 1024


class FileSink(Sink):
    def __init__(self, path: str) -> None:
        self.path = path
        self._fh: IO[bytes] = open(path, "wb", buffering=FILE_BUFFER_BYTES)

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


class OooBudget:
    """Bytes of out-of-order data all flows may hold together."""

    __slots__ = ("limit", "used", "dropped")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.dropped = 0   # out-of-order segments not stored because the budget was used up


class ReceiverFlow:
    """Reassembly and ACK state of one flow."""

    __slots__ = (
        "addr", "flow_id", "sink", "window_bytes", "budget", "sack_ok", "established",
        "rcv_nxt", "ooo", "_ooo_keys", "ooo_bytes", "ooo_ranges", "_sack_recent",
        "_trigger", "fin_seq", "complete", "aborted", "echo", "ts_ecr_us", "ts_retx",
        "ts_recent", "ts_recent_retx", "unacked_segments", "delack_deadline_us",
        "first_us", "last_us", "closed_us", "segments", "duplicate_segments",
        "out_of_order_segments", "spurious_retransmissions", "beyond_window_segments",
        "acks_sent", "sack_blocks_sent", "reordered_segments", "_first_end", "totals",
        "ecn_ok", "ece", "ce_segments", "payload_bytes_by_dscp",
        "xr", "xr_feedback_bytes", "xr_rate_kbps",
    )

    def __init__(self, addr: Addr, flow_id: int, sink: Optional[Sink], window_bytes: int,
                 now_us: int, *, budget: Optional[OooBudget] = None,
                 sack_ok: bool = False, totals: Optional[ReceiverStats] = None) -> None:
        self.addr = addr
        # The receiver's counters, to which duplicates are added as they are counted
        # (also after the flow's end: copies that arrive in TIME_WAIT).
        self.totals = totals
        self.flow_id = flow_id
        self.sink: Sink = sink if sink is not None else Sink()
        self.established = sink is not None
        self.window_bytes = window_bytes
        self.budget = budget
        self.sack_ok = sack_ok
        # ECN (RFC 3168 sec. 6.1): accepted when the SYN offered it; ``ece`` is set by a
        # CE-marked segment and cleared by a CWR one, and every ACK carries it while set.
        self.ecn_ok = False
        self.ece = False
        self.ce_segments = 0
        # new payload bytes by the DSCP of the segment that brought them first (a
        # reservation's edge marks in-profile packets AF11: GTCP's compliant component)
        self.payload_bytes_by_dscp: Dict[int, int] = {}
        self.rcv_nxt = 0
        self.ooo: Dict[int, bytes] = {}
        self._ooo_keys: List[int] = []  # heap of keys (lazy deletion) to find overlaps
        self.ooo_bytes = 0
        self.ooo_ranges = RangeSet()    # the out-of-order data as merged ranges (SACK)
        self._sack_recent: List[int] = []  # starts of the first SACK blocks sent, newest first
        self._trigger: Optional[int] = None  # seq of the out-of-order segment just taken
        self.fin_seq: Optional[int] = None
        self.complete = False           # FIN received after every byte
        self.aborted = False
        self.echo: Optional[Tuple[int, int, int, int]] = None
        self.ts_ecr_us = 0
        self.ts_retx = 0
        self.ts_recent: Optional[int] = None   # newest ts_val seen (RFC 7323 TS.Recent)
        self.ts_recent_retx = 0
        self.unacked_segments = 0
        self.delack_deadline_us: Optional[int] = None
        self.first_us = now_us
        self.last_us = now_us
        self.closed_us: Optional[int] = None
        self.segments = 0
        self.duplicate_segments = 0
        self.out_of_order_segments = 0
        self.spurious_retransmissions = 0
        self.beyond_window_segments = 0
        self.reordered_segments = 0
        self._first_end = 0              # highest end of a first transmission seen
        self.acks_sent = 0
        self.sack_blocks_sent = 0
        # The XR header (XCP, RCP; docs/wire-format.md): the flow's DATA carry it and
        # its ACKs echo the sum of the feedback since the last ACK and the newest rate.
        self.xr = False
        self.xr_feedback_bytes: Optional[int] = None
        self.xr_rate_kbps = XR_RATE_UNSET

    def take_xr(self, feedback_bytes: int, rate_kbps: int) -> None:
        """One DATA packet's XR forward section: its feedback adds to what the next
        ACK echoes (unless no switch set it), its rate is the newest."""
        self.xr = True
        if feedback_bytes != XR_FEEDBACK_UNSET:
            total = (self.xr_feedback_bytes or 0) + feedback_bytes
            self.xr_feedback_bytes = max(min(total, XR_FEEDBACK_UNSET - 1), XR_FEEDBACK_MIN)
        self.xr_rate_kbps = rate_kbps

    def pop_xr_echo(self) -> Tuple[int, int]:
        """The echo section of the next ACK, (echo_feedback_bytes, echo_rate_kbps); the
        feedback is echoed once."""
        feedback = XR_FEEDBACK_UNSET if self.xr_feedback_bytes is None else self.xr_feedback_bytes
        self.xr_feedback_bytes = None
        return feedback, self.xr_rate_kbps

    @property
    def ack_seq(self) -> int:
        return self.rcv_nxt + 1 if self.complete else self.rcv_nxt

    @property
    def in_time_wait(self) -> bool:
        """Completed and closed: kept ``time_wait_us`` only to answer a retransmitted FIN."""
        return self.complete and self.closed_us is not None

    def on_segment(self, seq: int, payload: memoryview, fin: bool, retx: bool = False) -> bool:
        """Take one segment; True if it must be acknowledged at once.

        Counters (docs/transport.md "Counters"): ``duplicate_segments`` -- no byte
        the flow did not already have (also every segment after the FIN completed
        the stream); ``out_of_order_segments`` -- starts beyond ``rcv_nxt`` (a hole
        before it); ``spurious_retransmissions`` -- a duplicate that carried the
        RETX flag; ``beyond_window_segments`` -- starts at or beyond the window;
        ``reordered_segments`` -- a first transmission (no RETX flag) with bytes the
        flow lacks that ends at or below the end of another first transmission
        already received: a sender sends new data in sequence order, so the
        network reordered it (a network duplicate is a duplicate, not this)."""
        self.segments += 1
        if not retx and payload:
            end_first = seq + len(payload)
            if end_first > self._first_end:
                self._first_end = end_first
            elif end_first > self.rcv_nxt and seq not in self.ooo:   # new bytes: not a duplicate
                self.reordered_segments += 1
        self._trigger = None
        n = len(payload)
        if self.complete:
            self._duplicate(retx)
            return True
        immediate = False
        if fin:
            self.fin_seq = seq + n
            immediate = True
        if n:
            end = seq + n
            nxt = self.rcv_nxt
            if end <= nxt:
                self._duplicate(retx)
                immediate = True
            elif seq > nxt:
                immediate = True
                self.out_of_order_segments += 1
                limit = nxt + self.window_bytes
                if seq >= limit:
                    self.beyond_window_segments += 1
                elif seq in self.ooo:
                    self._duplicate(retx)
                    self._trigger = seq
                else:
                    if end > limit:
                        payload = payload[:limit - seq]
                    budget = self.budget
                    size = len(payload)
                    if budget is not None and budget.used + size > budget.limit:
                        budget.dropped += 1   # not stored, so never SACKed: no reneging
                        return immediate
                    self.ooo[seq] = bytes(payload)
                    heapq.heappush(self._ooo_keys, seq)
                    self.ooo_bytes += size
                    if budget is not None:
                        budget.used += size
                    self.ooo_ranges.add(seq, seq + size)
                    self._trigger = seq
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

    def _duplicate(self, retx: bool) -> None:
        self.duplicate_segments += 1
        if retx:
            self.spurious_retransmissions += 1
        if self.totals is not None:
            self.totals.duplicate_segments += 1
            self.totals.spurious_retransmissions += int(retx)

    def _release(self, size: int) -> None:
        self.ooo_bytes -= size
        if self.budget is not None:
            self.budget.used -= size

    def _drain(self) -> None:
        """Deliver the out-of-order segments that are now in order."""
        ooo = self.ooo
        keys = self._ooo_keys
        while ooo:
            seg = ooo.pop(self.rcv_nxt, None)
            if seg is not None:
                self._release(len(seg))
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
                self._release(len(seg))
                if k + len(seg) > self.rcv_nxt:
                    self.sink.write(memoryview(seg)[self.rcv_nxt - k:])
                    self.rcv_nxt = k + len(seg)
                    progressed = True
                    break
            if not progressed:
                break
        if not ooo:
            keys.clear()
        self.ooo_ranges.advance(self.rcv_nxt)

    def drop_buffers(self) -> None:
        """Release the out-of-order data (the flow is closed or forgotten)."""
        if self.ooo:
            self._release(self.ooo_bytes)
            self.ooo_bytes = 0
            self.ooo.clear()
            self._ooo_keys.clear()
            self.ooo_ranges.clear()

    def sack_blocks(self) -> List[Tuple[int, int]]:
        """The SACK blocks of the next ACK (RFC 2018 sec. 4), at most 4."""
        ranges = self.ooo_ranges
        if not self.sack_ok or not ranges:
            return []
        blocks: List[Tuple[int, int]] = []
        if self._trigger is not None:
            r = ranges.sacked_range_at(self._trigger)
            if r is not None:
                blocks.append(r)
                self._sack_recent = [r[0]] + [s for s in self._sack_recent if s != r[0]][:7]
        for start in self._sack_recent:
            if len(blocks) >= MAX_SACK_BLOCKS:
                break
            r = ranges.sacked_range_at(start)
            if r is not None and r not in blocks:
                blocks.append(r)
        if len(blocks) < MAX_SACK_BLOCKS:
            for r in reversed(ranges.ranges):
                if r not in blocks:
                    blocks.append(r)
                    if len(blocks) >= MAX_SACK_BLOCKS:
                        break
        self._trigger = None
        return blocks

    def stats_tuple(self) -> Tuple[int, int, int, int]:
        return (self.segments, self.duplicate_segments, self.out_of_order_segments,
                self.spurious_retransmissions)

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
            "sack": self.sack_ok,
            "segments": self.segments,
            "duplicate_segments": self.duplicate_segments,
            "out_of_order_segments": self.out_of_order_segments,
            "spurious_retransmissions": self.spurious_retransmissions,
            "beyond_window_segments": self.beyond_window_segments,
            "reordered_segments": self.reordered_segments,
            "acks_sent": self.acks_sent,
            "sack_blocks_sent": self.sack_blocks_sent,
            "ecn": self.ecn_ok,
            "ce_segments": self.ce_segments,
            "payload_bytes_by_dscp": {str(k): v for k, v in sorted(self.payload_bytes_by_dscp.items())},
            "out": self.sink.path,
        }
