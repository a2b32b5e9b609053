"""A deterministic discrete-event channel for the transport, without sockets.

Drives real :class:`~hosts.transport.sender.Sender` and
:class:`~hosts.transport.receiver.Receiver` objects over a simulated link
(fake clock in microseconds, seeded randomness): propagation delay, a
drop-tail bottleneck (rate + queue), random loss, duplication and reordering,
and drops of chosen packet numbers for exact unit tests, and ECN: ``mark_ce_if``
sets the CE mark on the ECN-capable packets it picks (those of a sender that
negotiated ECN), as a marking queue would. ``stamp`` lets a test
play the BWN switch on DATA packets (see :func:`stamp_constant`), ``reverse_stamp``
rewrites (or drops, returning None) what the receiver sends back.

Used by tests/test_transport*.py; usable by the algorithms' tests too::

    sim = Simulation(LinkModel(delay_us=10_000, rate_bps=10e6, queue_packets=50))
    s = sim.add_flow(NewReno(), BytesSource(data))
    sim.run(until_us=60_000_000)
    assert sim.sink_of(s).data == data
"""
from __future__ import annotations

import heapq
import random
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Deque, Dict, List, Optional, Set, Tuple

from bwn.protocol.wire import BWN_HEADER_LEN, BwnHeader

from hosts.cc.base import CongestionControl
from hosts.transport.reassembly import MemorySink, Sink
from hosts.transport.receiver import Receiver
from hosts.transport.sender import Sender, SenderConfig
from hosts.transport.source import StreamSource
from hosts.transport.wire import DATA_VK

Addr = Tuple[str, int]
RECEIVER_ADDR: Addr = ("10.0.0.2", 16983)


@dataclass
class LinkModel:
    """One direction of the simulated link."""

    delay_us: int = 10_000
    rate_bps: Optional[float] = None       # bottleneck rate (None: infinitely fast)
    queue_packets: Optional[int] = None    # drop-tail queue behind the bottleneck
    loss: float = 0.0
    duplicate: float = 0.0
    reorder: float = 0.0                   # probability a packet is held back
    reorder_extra_us: int = 5_000
    drop_indices: Set[int] = field(default_factory=set)  # 0-based packet numbers to drop
    drop_if: Optional[Callable[[int, bytes], bool]] = None  # (now_us, packet) -> drop?
    mark_ce_if: Optional[Callable[[int, bytes], bool]] = None  # (now_us, ECT packet) -> CE?
    frame_overhead_bytes: int = 42         # Ethernet + IPv4 + UDP, for the rate


@dataclass
class LinkStats:
    packets: int = 0
    dropped_loss: int = 0
    dropped_queue: int = 0
    dropped_index: int = 0
    ce_marked: int = 0
    duplicated: int = 0
    reordered: int = 0


class Direction:
    def __init__(self, model: LinkModel, rng: random.Random,
                 schedule: Callable[[int, bytes, bool], None]) -> None:
        self.model = model
        self.rng = rng
        self.schedule = schedule
        self.stats = LinkStats()
        self._busy_until_us = 0.0
        self._departures: Deque[float] = deque()

    def send(self, pkt: bytes, now_us: int, ect: bool = False) -> None:
        """``ect``: the packet is ECN-capable (its sender negotiated ECN)."""
        m = self.model
        index = self.stats.packets
        self.stats.packets += 1
        if index in m.drop_indices or (m.drop_if is not None and m.drop_if(now_us, pkt)):
            self.stats.dropped_index += 1
            return
        if m.loss and self.rng.random() < m.loss:
            self.stats.dropped_loss += 1
            return
        ce = ect and m.mark_ce_if is not None and m.mark_ce_if(now_us, pkt)
        if ce:
            self.stats.ce_marked += 1
        copies = 1
        if m.duplicate and self.rng.random() < m.duplicate:
            copies = 2
            self.stats.duplicated += 1
        for _ in range(copies):
            self._one(pkt, now_us, ce)

    def _one(self, pkt: bytes, now_us: int, ce: bool = False) -> None:
        m = self.model
        depart = float(now_us)
        if m.rate_bps:
            deps = self._departures
            while deps and deps[0] <= now_us:
                deps.popleft()
            if m.queue_packets is not None and len(deps) > m.queue_packets:
                self.stats.dropped_queue += 1
                return
            start = max(float(now_us), self._busy_until_us)
            depart = start + (len(pkt) + m.frame_overhead_bytes) * 8e6 / m.rate_bps
            self._busy_until_us = depart
            deps.append(depart)
        arrive = depart + m.delay_us
        if m.reorder and self.rng.random() < m.reorder:
            arrive += m.reorder_extra_us
            self.stats.reordered += 1
        self.schedule(int(arrive), pkt, ce)


def stamp_constant(*, ebn_code: int, narrow_kbps: int, tight_kbps: int) -> Callable[[bytes, int], bytes]:
    """A switch that stamps fixed values into every DATA packet (bwn.protocol.wire reference model)."""
    def stamp(pkt: bytes, now_us: int) -> bytes:
        if pkt[0] != DATA_VK:
            return pkt
        hdr = BwnHeader.unpack(pkt).stamped(ebn_code=ebn_code, narrow_kbps=narrow_kbps,
                                            tight_kbps=tight_kbps)
        return hdr.pack() + pkt[BWN_HEADER_LEN:]
    return stamp


class Simulation:
    """Senders -> forward link -> one receiver -> reverse link -> senders."""

    def __init__(
        self,
        forward: Optional[LinkModel] = None,
        reverse: Optional[LinkModel] = None,
        *,
        seed: int = 1,
        delayed_ack: bool = False,
        window_bytes: int = 4 * 1024 * 1024,
        stamp: Optional[Callable[[bytes, int], bytes]] = None,
        reverse_stamp: Optional[Callable[[bytes, int], Optional[bytes]]] = None,
        receiver_kw: Optional[Dict[str, object]] = None,
    ) -> None:
        self.rng = random.Random(seed)
        self.now_us = 0
        self._events: List[Tuple[int, int, int, Addr, bytes, bool]] = []
        self._counter = 0
        self.forward = Direction(forward or LinkModel(), self.rng, self._to_receiver)
        self.reverse = Direction(reverse or LinkModel(), self.rng, self._to_sender)
        self._pending_dst: Optional[Addr] = None
        self._pending_src: Optional[Addr] = None
        self.stamp = stamp
        self.reverse_stamp = reverse_stamp
        self.sinks: Dict[Tuple[Addr, int], MemorySink] = {}
        self.receiver = Receiver(self._receiver_emit, self._sink_factory,  # type: ignore[arg-type]
                                 delayed_ack=delayed_ack, window_bytes=window_bytes,
                                 **(receiver_kw or {}))
        self.senders: Dict[Addr, Sender] = {}
        self.sent_log: List[Tuple[int, str, bytes]] = []  # (time, "fwd"/"rev", packet)
        self.keep_log = False

    # -- wiring -------------------------------------------------------------------------
    def _sink_factory(self, addr: Addr, flow_id: int) -> Sink:
        sink = MemorySink()
        self.sinks[(addr, flow_id)] = sink
        return sink

    def _push(self, at_us: int, direction: int, addr: Addr, pkt: bytes, ce: bool = False) -> None:
        self._counter += 1
        heapq.heappush(self._events, (at_us, self._counter, direction, addr, pkt, ce))

    def _to_receiver(self, at_us: int, pkt: bytes, ce: bool = False) -> None:
        assert self._pending_src is not None
        self._push(at_us, 0, self._pending_src, pkt, ce)

    def _to_sender(self, at_us: int, pkt: bytes, ce: bool = False) -> None:
        assert self._pending_dst is not None
        self._push(at_us, 1, self._pending_dst, pkt, ce)

    def _receiver_emit(self, view: memoryview, addr: Addr) -> bool:
        pkt: Optional[bytes] = bytes(view)
        if self.keep_log:
            self.sent_log.append((self.now_us, "rev", pkt))
        if self.reverse_stamp is not None:
            pkt = self.reverse_stamp(pkt, self.now_us)   # a forger on the way back
            if pkt is None:
                return True
        self._pending_dst = addr
        self.reverse.send(pkt, self.now_us)
        return True

    def add_flow(self, cc: CongestionControl, source: StreamSource, *, flow_id: int = 1,
                 config: Optional[SenderConfig] = None, start_us: Optional[int] = None,
                 **sender_kw: object) -> Sender:
        addr: Addr = ("10.0.0.1", 40000 + len(self.senders))

        def emit(view: memoryview) -> bool:
            pkt = bytes(view)
            if self.keep_log:
                self.sent_log.append((self.now_us, "fwd", pkt))
            if self.stamp is not None:
                pkt = self.stamp(pkt, self.now_us)
            self._pending_src = addr
            self.forward.send(pkt, self.now_us, ect=sender.ecn)
            return True

        sender = Sender(cc, source, emit, flow_id=flow_id, config=config, **sender_kw)  # type: ignore[arg-type]
        self.senders[addr] = sender
        sender.start(self.now_us if start_us is None else start_us)
        return sender

    def inject(self, pkt: bytes, src: Addr, at_us: Optional[int] = None) -> None:
        """Deliver ``pkt`` to the receiver as if sent from ``src`` (garbage, replays)."""
        self._push(self.now_us if at_us is None else at_us, 0, src, pkt)

    def sink_of(self, sender: Sender) -> MemorySink:
        for addr, s in self.senders.items():
            if s is sender:
                return self.sinks[(addr, sender.flow_id)]
        raise KeyError("unknown sender")

    # -- running ------------------------------------------------------------------------
    def run(self, until_us: int = 600_000_000,
            stop: Optional[Callable[["Simulation"], bool]] = None) -> None:
        """Run until every sender has finished, ``stop`` is true, or ``until_us``."""
        while True:
            if all(s.finished for s in self.senders.values()):
                return
            if stop is not None and stop(self):
                return
            t_event = self._events[0][0] if self._events else None
            t_timer: Optional[int] = None
            for s in self.senders.values():
                d = s.next_deadline_us()
                if d is not None and (t_timer is None or d < t_timer):
                    t_timer = d
            d = self.receiver.next_deadline_us()
            if d is not None and (t_timer is None or d < t_timer):
                t_timer = d
            candidates = [t for t in (t_event, t_timer) if t is not None]
            if not candidates:
                return  # nothing will ever happen again
            t = max(min(candidates), self.now_us)
            if t > until_us:
                self.now_us = until_us
                return
            self.now_us = t
            if t_event is not None and t_event <= t:
                _, _, direction, addr, pkt, ce = heapq.heappop(self._events)
                if direction == 0:
                    self.receiver.on_datagram(pkt, addr, t, ce)
                else:
                    sender = self.senders.get(addr)
                    if sender is not None:
                        sender.on_datagram(pkt, t)
                continue
            for s in self.senders.values():
                d = s.next_deadline_us()
                if d is not None and d <= t:
                    s.on_timer(t)
            d = self.receiver.next_deadline_us()
            if d is not None and d <= t:
                self.receiver.on_timer(t)
