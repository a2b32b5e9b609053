"""A multi-hop extension of the simulated channel: ports, paths, an edge meter.

:mod:`hosts.sim.channel` has one link between senders and one receiver. This
module drives the same real :class:`~hosts.transport.sender.Sender` and
:class:`~hosts.transport.receiver.Receiver` objects over a network of output
ports (fake clock, seeded randomness), so that the papers' topologies -- GTCP's
reserved flows behind one edge switch, OBP's parking lot -- can be reproduced
without Mininet:

* a :class:`Port` is one output queue: a FIFO served at ``rate_bps`` (frame bytes:
  the UDP payload + 42 bytes of Ethernet, IPv4 and UDP), ``queue_packets`` long,
  followed by ``delay_us`` of propagation; packets of one flow never overtake
  each other inside a port;
* **edge model** (the switch side of GTCP's reservations, RFC 2597 Assured Forwarding): a flow
  with a reservation is metered by a token bucket (``reserved_bps``, depth
  ``burst_bytes``, frame bytes) at the first port that has
  ``af_threshold_packets``; a packet that finds enough tokens is *in profile*.
  Above ``af_threshold_packets`` queued packets, out-of-profile and best-effort
  packets are dropped; in-profile packets only when the queue is full. One queue
  for all: no reordering inside a flow, and unused reservation is anybody's
  (work-conserving);
* **BWN feedback** (``bwn=True``): on a DATA packet the port lowers the narrow link
  to its capacity and the tight link to its available bandwidth
  ``AB = IC - BR - BI`` (OBP eq. 6) of the last ``ab_period_us``, where BR is the
  bytes *received* by the port in that period (including those it dropped) and BI
  the bytes queued when the period began, both as rates; the EBN code is the
  fair share ``C / N`` over the flows seen in the last period
  (docs/dataplane.md has the P4 side);
* a flow has a forward path and a reverse path (lists of ports); one
  :class:`~hosts.transport.receiver.Receiver` per destination host.

Used by ``benchmarks/gtcp_sim.py``, ``benchmarks/obp_parking_lot_sim.py`` and
tests/test_netsim.py.
"""
from __future__ import annotations

import heapq
import math
import random
import struct
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Deque, Dict, List, Optional, Set, Tuple

from bwn.protocol.wire import ebn_encode_kbps

from hosts.cc.base import CongestionControl
from hosts.transport.reassembly import MemorySink, Sink
from hosts.transport.receiver import Receiver
from hosts.transport.sender import FRAME_OVERHEAD_BYTES, Sender, SenderConfig
from hosts.transport.source import StreamSource
from hosts.transport.wire import DATA_VK, HEADERS_LEN

#: Ethernet + IPv4 + UDP: what a frame has beyond the UDP payload the transport emits.
L2_L4_OVERHEAD_BYTES = 42
_FWD = struct.Struct("!BBBBIi")   # vk, hop, ebn, echo_ebn, narrow, tight (docs/wire-format.md)
_NARROW_MAX = 0xFFFFFFFE
_TIGHT_MIN, _TIGHT_MAX = -(2**31), 2**31 - 2

Addr = Tuple[str, int]


@dataclass
class PortStats:
    packets: int = 0
    dropped_queue: int = 0           # full queue (in profile or not)
    dropped_precedence: int = 0      # out of profile / best effort above the AF threshold
    dropped_loss: int = 0
    in_profile: int = 0
    bytes_by_flow: Dict[int, int] = field(default_factory=dict)            # frames sent on
    in_profile_bytes_by_flow: Dict[int, int] = field(default_factory=dict)


class Port:
    """One output port: FIFO queue, serialization at ``rate_bps``, propagation delay."""

    def __init__(self, net: "NetworkSim", name: str, rate_bps: float, delay_us: int,
                 queue_packets: int, af_threshold_packets: Optional[int], bwn: bool,
                 ab_period_us: int, loss: float,
                 stamp_only: Optional[Set[str]] = None) -> None:
        if af_threshold_packets is not None and not 0 <= af_threshold_packets <= queue_packets:
            raise ValueError(f"port {name}: need 0 <= af_threshold_packets <= queue_packets")
        self.net = net
        self.name = name
        self.rate_bps = rate_bps
        self.delay_us = delay_us
        self.queue_packets = queue_packets
        self.af_threshold_packets = af_threshold_packets
        self.bwn = bwn
        self.ab_period_us = ab_period_us
        self.loss = loss
        # Experiments only: stamp the packets of these flows (by name), not the others'.
        self.stamp_only = stamp_only
        self.stats = PortStats()
        self._busy_until_us = 0.0
        self._queue: Deque[Tuple[float, int]] = deque()   # (departure time, frame bytes)
        self._queued_bytes = 0
        # eq. (6) bookkeeping
        self._period_start_us = 0
        self._period_rx_bytes = 0
        self._period_backlog_bytes = 0
        self._period_flows: Set[int] = set()
        self.ab_bps = rate_bps
        self.fair_share_bps = rate_bps
        self.narrow_kbps = min(int(rate_bps / 1000), _NARROW_MAX)

    def _expire(self, now_us: int) -> None:
        q = self._queue
        while q and q[0][0] <= now_us:
            self._queued_bytes -= q.popleft()[1]

    def _roll_period(self, now_us: int) -> None:
        elapsed = now_us - self._period_start_us
        if elapsed < self.ab_period_us:
            return
        secs = elapsed / 1e6
        self.ab_bps = (self.rate_bps - self._period_rx_bytes * 8 / secs
                       - self._period_backlog_bytes * 8 / secs)
        self.fair_share_bps = self.rate_bps / max(len(self._period_flows), 1)
        self._period_start_us = now_us
        self._period_rx_bytes = 0
        self._period_backlog_bytes = self._queued_bytes
        self._period_flows = set()

    def arrive(self, pkt: bytearray, flow: "NetFlow", now_us: int) -> Optional[float]:
        """A packet arrives; returns when it reaches the far end, or None if dropped."""
        self._expire(now_us)
        st = self.stats
        st.packets += 1
        size = len(pkt) + L2_L4_OVERHEAD_BYTES
        is_data = pkt[0] == DATA_VK
        if self.bwn:
            self._roll_period(now_us)
            self._period_rx_bytes += size            # eq. (6) BR: bytes received
            if is_data:
                self._period_flows.add(flow.index)
        if self.loss and self.net.rng.random() < self.loss:
            st.dropped_loss += 1
            return None
        qlen = len(self._queue)
        in_profile = False
        if self.af_threshold_packets is not None and is_data and flow.meter is not None:
            in_profile = flow.meter.conforms(size, now_us)
        if qlen > self.queue_packets:
            st.dropped_queue += 1
            return None
        if (self.af_threshold_packets is not None and qlen > self.af_threshold_packets
                and not in_profile):
            st.dropped_precedence += 1
            return None
        if in_profile:
            st.in_profile += 1
            st.in_profile_bytes_by_flow[flow.index] = (
                st.in_profile_bytes_by_flow.get(flow.index, 0) + size)
            flow.meter.consume(size)  # type: ignore[union-attr]
        if self.bwn and is_data and (self.stamp_only is None or flow.name in self.stamp_only):
            self._stamp(pkt)
        start = max(float(now_us), self._busy_until_us)
        depart = start + size * 8e6 / self.rate_bps
        self._busy_until_us = depart
        self._queue.append((depart, size))
        self._queued_bytes += size
        st.bytes_by_flow[flow.index] = st.bytes_by_flow.get(flow.index, 0) + size
        return depart + self.delay_us

    def _stamp(self, pkt: bytearray) -> None:
        vk, hop, ebn, echo_ebn, narrow, tight = _FWD.unpack_from(pkt)
        tight_kbps = int(max(min(self.ab_bps / 1000, _TIGHT_MAX), _TIGHT_MIN))
        code = ebn_encode_kbps(self.fair_share_bps / 1000)
        _FWD.pack_into(pkt, 0, vk, min(hop + 1, 0xFF), min(ebn, code), echo_ebn,
                       min(narrow, self.narrow_kbps), min(tight, tight_kbps))


class TokenBucket:
    """A single-rate meter in frame bytes: in profile while tokens last."""

    def __init__(self, rate_bps: float, burst_bytes: int) -> None:
        self.rate_bps = rate_bps
        self.burst_bytes = burst_bytes
        self.tokens = float(burst_bytes)
        self._last_us = 0

    def conforms(self, size: int, now_us: int) -> bool:
        self.tokens = min(self.burst_bytes,
                          self.tokens + (now_us - self._last_us) * self.rate_bps / 8e6)
        self._last_us = now_us
        return self.tokens >= size

    def consume(self, size: int) -> None:
        self.tokens -= size


@dataclass
class NetFlow:
    index: int
    sender: Sender
    addr: Addr
    dst: str
    forward: List[Port]
    reverse: List[Port]
    meter: Optional[TokenBucket]
    name: str
    delivered_marks: List[Tuple[int, int]] = field(default_factory=list)  # (time, bytes)


class NetworkSim:
    """Senders -> ports -> receivers -> ports -> senders, on a fake clock."""

    def __init__(self, *, seed: int = 1, delayed_ack: bool = False,
                 window_bytes: int = 4 * 1024 * 1024) -> None:
        self.rng = random.Random(seed)
        self.now_us = 0
        self._events: List[Tuple[int, int, Callable[[int], None]]] = []
        self._counter = 0
        self.ports: Dict[str, Port] = {}
        self.flows: List[NetFlow] = []
        self._by_addr: Dict[Addr, NetFlow] = {}
        self.receivers: Dict[str, Receiver] = {}
        self.sinks: Dict[Tuple[Addr, int], MemorySink] = {}
        self.delayed_ack = delayed_ack
        self.window_bytes = window_bytes
        self.sample_every_us: Optional[int] = None
        self._next_sample_us = 0

    # -- building --------------------------------------------------------------------
    def port(self, name: str, *, rate_bps: float, delay_us: int, queue_packets: int = 1000,
             af_threshold_packets: Optional[int] = None, bwn: bool = True,
             ab_period_us: int = 10_000, loss: float = 0.0,
             stamp_only: Optional[Set[str]] = None) -> Port:
        if name in self.ports:
            raise ValueError(f"port {name!r} exists")
        p = Port(self, name, rate_bps, delay_us, queue_packets, af_threshold_packets, bwn,
                 ab_period_us, loss, stamp_only)
        self.ports[name] = p
        return p

    def _receiver(self, dst: str) -> Receiver:
        rx = self.receivers.get(dst)
        if rx is None:
            def emit(view: memoryview, addr: Addr) -> bool:
                flow = self._by_addr.get(addr)
                if flow is not None:
                    self._travel(bytearray(view), flow, flow.reverse, 0, self.now_us,
                                 lambda pkt, t, f=flow: f.sender.on_datagram(bytes(pkt), t))
                return True

            def sink(addr: Addr, flow_id: int) -> Sink:
                s = MemorySink()
                self.sinks[(addr, flow_id)] = s
                return s

            rx = Receiver(emit, sink, delayed_ack=self.delayed_ack, window_bytes=self.window_bytes)
            self.receivers[dst] = rx
        return rx

    def add_flow(self, cc: CongestionControl, source: StreamSource, *, dst: str,
                 forward: List[Port], reverse: List[Port], name: str = "",
                 reserved_bps: float = 0.0, burst_bytes: int = 15_000,
                 config: Optional[SenderConfig] = None, start_us: int = 0,
                 flow_id: Optional[int] = None) -> NetFlow:
        index = len(self.flows)
        addr: Addr = (f"10.0.{index // 250}.{index % 250 + 1}", 40000 + index)
        rx = self._receiver(dst)
        holder: Dict[str, NetFlow] = {}

        def emit(view: memoryview) -> bool:
            f = holder["flow"]
            self._travel(bytearray(view), f, f.forward, 0, self.now_us,
                         lambda pkt, t: rx.on_datagram(bytes(pkt), f.addr, t))
            return True

        sender = Sender(cc, source, emit, flow_id=index + 1 if flow_id is None else flow_id,
                        config=config)
        meter = TokenBucket(reserved_bps, burst_bytes) if reserved_bps > 0 else None
        flow = NetFlow(index, sender, addr, dst, forward, reverse, meter, name or f"f{index}")
        holder["flow"] = flow
        self.flows.append(flow)
        self._by_addr[addr] = flow
        self._at(start_us, lambda t, s=sender: s.start(t))
        return flow

    # -- moving packets ----------------------------------------------------------------
    def _at(self, t: float, fn: Callable[[int], None]) -> None:
        """Schedule ``fn`` at ``t`` rounded up to the clock's microsecond."""
        self._counter += 1
        heapq.heappush(self._events, (math.ceil(t), self._counter, fn))

    def _travel(self, pkt: bytearray, flow: NetFlow, path: List[Port], hop: int, now_us: int,
                deliver: Callable[[bytearray, int], None]) -> None:
        if hop == len(path):
            deliver(pkt, now_us)
            return
        arrive = path[hop].arrive(pkt, flow, now_us)
        if arrive is not None:
            self._at(arrive, lambda t: self._travel(pkt, flow, path, hop + 1, t, deliver))

    # -- running -----------------------------------------------------------------------
    def run(self, until_us: int, on_sample: Optional[Callable[["NetworkSim"], None]] = None) -> None:
        """Run until every sender finished or ``until_us``; ``on_sample`` every
        :attr:`sample_every_us` of simulated time."""
        while True:
            if self.flows and all(f.sender.finished for f in self.flows) and not self._events:
                return
            t_event = self._events[0][0] if self._events else None
            t_timer: Optional[int] = None
            for f in self.flows:
                d = f.sender.next_deadline_us()
                if d is not None and (t_timer is None or d < t_timer):
                    t_timer = d
            for rx in self.receivers.values():
                d = rx.next_deadline_us()
                if d is not None and (t_timer is None or d < t_timer):
                    t_timer = d
            candidates = [t for t in (t_event, t_timer) if t is not None]
            if not candidates:
                return
            t = max(min(candidates), self.now_us)
            if t > until_us:
                self.now_us = until_us
                return
            self.now_us = t
            if on_sample is not None and self.sample_every_us and t >= self._next_sample_us:
                on_sample(self)
                self._next_sample_us = t + self.sample_every_us
            if t_event is not None and t_event <= t:
                _, _, fn = heapq.heappop(self._events)
                fn(t)
                continue
            for f in self.flows:
                d = f.sender.next_deadline_us()
                if d is not None and d <= t:
                    f.sender.on_timer(t)
            for rx in self.receivers.values():
                d = rx.next_deadline_us()
                if d is not None and d <= t:
                    rx.on_timer(t)

    def sink_of(self, flow: NetFlow) -> MemorySink:
        return self.sinks[(flow.addr, flow.sender.flow_id)]


def payload_to_frame(payload_bps: float, mss_bytes: int) -> float:
    """Full-sized segments: the frame bit rate that carries ``payload_bps``."""
    return payload_bps * (mss_bytes + FRAME_OVERHEAD_BYTES) / mss_bytes


assert FRAME_OVERHEAD_BYTES == HEADERS_LEN + L2_L4_OVERHEAD_BYTES
