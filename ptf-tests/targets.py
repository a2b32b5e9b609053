"""The switch under test, one class per target, with the same methods.

The PTF tests (base.py's BwnTest) configure and read a switch only through
these methods, so one test code runs against every target:

* ``bmv2``: p4src/v1model/bwn.p4 on simple_switch_grpc, over P4Runtime (finsy,
  controller/entries.py's entities) and BMv2's Thrift runtime for its queues;
* ``ebpf``: p4src/psa/bwn.p4 under NIKSS, through libnikss (controller/nikss.py,
  controller/ebpf.py's entries); a port's queue is an htb + bfifo qdisc on its
  interface and the program's virtual copy of it.

Both take the same arguments the controller's switch plans hold (prefixes, port
numbers, MACs, port options, capacities, reservations) and return telemetry as
:class:`Report` (controller/entries.py's PortTelemetry, plus the queue the
switch counted in BI, in bytes).
"""
from __future__ import annotations

import errno
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from controller import ebpf as eb
from controller import entries as ent
from controller.nikss import Key, NikssError, Pipeline
from controller.p4rt import SyncSwitch

TARGETS = ("bmv2", "ebpf")


@dataclass(frozen=True)
class Report(ent.PortTelemetry):
    """One closed window's telemetry, as every target reports it."""

    queue_bytes: int = 0       # the queue the switch took as BI


class P4RuntimeSwitch:
    """bwn.p4 (v1model) on BMv2: P4Runtime for tables, counters and digests, Thrift for queues."""

    target = "bmv2"
    # BMv2 counts packets that leave the queue empty behind them (deq_qdepth == 0).
    emptied_counts_departures = True
    # BMv2 serves a rate-limited queue in packets per second, whatever their size.
    serves_packets = True

    def __init__(self, name: str, grpc_addr: str, p4info: Path, p4blob: Path, thrift_port: int) -> None:
        self.name = name
        self.thrift_port = thrift_port
        self.sw = SyncSwitch(name, grpc_addr, device_id=0, p4info=p4info, p4blob=p4blob)
        self.window = ent.WindowConfig()
        self._digest_on = False
        self._served: dict[int, int] = {}      # port -> the slot its packets count (port_service)

    def reset(self, window: ent.WindowConfig) -> None:
        self.window = window
        self._served.clear()
        self.sw.delete_all()
        self.sw.modify(ent.window_config(window))
        self.sw.insert(ent.static_tables(window))

    def route(self, prefix: str, port: int, dst_mac: str, src_mac: str,
              options: ent.PortOptions = ent.PortOptions(), modify: bool = False) -> None:
        (self.sw.modify if modify else self.sw.insert)(ent.route(prefix, port, dst_mac, src_mac, options))

    def delete_route(self, prefix: str, port: int, dst_mac: str, src_mac: str) -> None:
        self.sw.delete(ent.route(prefix, port, dst_mac, src_mac))

    def set_capacity(self, port: int, capacity_bps: float) -> None:
        self.sw.insert([ent.port_capacity(port, capacity_bps, self.window)])

    def delete_capacity(self, port: int, capacity_bps: float) -> None:
        self.sw.delete([ent.port_capacity(port, capacity_bps, self.window)])

    def add_reservation(self, res: ent.Reservation) -> None:
        entry, meter = ent.reservation(res)
        self.sw.insert([entry])
        self.sw.modify([meter])

    def telemetry(self) -> "P4RuntimeTelemetry":
        """Collect every telemetry report from now on (`.stop()` returns them)."""
        if not self._digest_on:
            try:
                self.sw.insert([ent.telemetry_digest()])
            except Exception:   # configured by an earlier session of this switch
                self.sw.modify([ent.telemetry_digest()])
            self._digest_on = True
        return P4RuntimeTelemetry(self.sw.start_digests(ent.TELEMETRY_DIGEST), self.window.queue_unit_bytes)

    def _counter(self, name: str, index: Optional[int]) -> dict[int, int]:
        import finsy as fy
        entity = fy.P4CounterEntry(name) if index is None else fy.P4CounterEntry(name, index=index)
        return {int(e.index): int(e.data.packet_count) for e in self.sw.read(entity)}

    def drops(self, reason: int) -> int:
        return self._counter(ent.DROP_COUNTER, reason)[reason]

    def all_drops(self) -> dict[int, int]:
        counts = self._counter(ent.DROP_COUNTER, None)
        return {code: counts.get(code, 0) for code in ent.DROP_REASONS}

    def queue_emptied(self, port: int) -> int:
        return self._counter(ent.QUEUE_EMPTIED_COUNTER, port)[port]

    def set_queue(self, port: int, rate_pps: float, depth_packets: int, frame_bytes: int) -> None:
        """BMv2's egress queue of `port`: `rate_pps` packets/s, `depth_packets` deep;
        as the controller does, every packet to the port then counts one frame of
        `frame_bytes` in what the port received (port_service)."""
        self._queue(port, rate_pps, depth_packets)
        entry = [ent.port_service(port, frame_bytes)]
        (self.sw.modify if port in self._served else self.sw.insert)(entry)
        self._served[port] = frame_bytes

    def _queue(self, port: int, rate_pps: float, depth_packets: int) -> None:
        from controller.bmv2 import QueueControl
        q = QueueControl(self.thrift_port)
        try:
            q.set_rate(port, rate_pps)
            q.set_depth(port, depth_packets)
        finally:
            q.close()

    def reset_queue(self, port: int) -> None:
        """Back to an unlimited, deep queue (as run_ptf.py starts the switches),
        whose packets count their length."""
        self._queue(port, 1e9, 10_000)
        slot_bytes = self._served.pop(port, None)
        if slot_bytes is not None:
            self.sw.delete([ent.port_service(port, slot_bytes)])

    def clear(self) -> None:
        self.sw.delete_all()

    def close(self) -> None:
        self.sw.close()


class P4RuntimeTelemetry:
    def __init__(self, collector, queue_unit_bytes: int) -> None:
        self._collector = collector
        self._unit = queue_unit_bytes

    def stop(self) -> list[Report]:
        out = []
        for item in self._collector.stop():
            r = ent.PortTelemetry.from_digest(item)
            out.append(Report(**r.__dict__, queue_bytes=r.queue_pkts * self._unit))
        return out


class NikssSwitch:
    """bwn.p4 (PSA) under NIKSS: libnikss for tables, counters, meters and
    digests; a port's queue is the qdisc on its interface (this process runs
    in the switch's network namespace) and the program's virtual queue."""

    target = "ebpf"
    # The program counts packets that find its virtual queue empty: the one
    # before them left it empty (docs/dataplane.md, "PSA on eBPF").
    emptied_counts_departures = False
    # The qdisc (htb) serves bytes: a packet takes the link for its length.
    serves_packets = False

    def __init__(self, name: str, pipe_id: int, ports: dict[int, str]) -> None:
        self.name = name
        self.ports = dict(ports)
        self.pipe = Pipeline(pipe_id)
        if not self.pipe.exists():
            raise RuntimeError(f"{name}: NIKSS pipeline {pipe_id} is not loaded (run_ptf.py --target ebpf loads it)")
        self.ifindex = {port: socket.if_nametoindex(ifname) for port, ifname in self.ports.items()}
        self.window = ent.WindowConfig()
        self.queue_frame_bytes = 1000     # the frame size of the AF threshold's packets (set by the test)
        self._meters = 0
        self._qdiscs: dict[int, eb.PortQdisc] = {}
        self._digests = self.pipe.digests(eb.TELEMETRY_DIGEST)

    def reset(self, window: ent.WindowConfig) -> None:
        """Every table empty (no route, capacity, queue or reservation), the
        window configuration and the static tables installed."""
        self.window = window
        for table in (eb.T_ROUTES, eb.T_PORT, eb.T_QUEUE, eb.T_RESERVATIONS, eb.T_FLOWS_LOG):
            self.pipe.table_clear(table)
        self.pipe.meter_reset(eb.METER)
        self._meters = 0
        wc = eb.window_config(window)
        self.pipe.table_default(wc.table, wc.action, wc.params)
        for e in eb.static_tables(window):
            e.add(self.pipe)

    def _route_key(self, prefix: str) -> list[Key]:
        import ipaddress
        net = ipaddress.IPv4Network(prefix, strict=False)
        return [Key.lpm(int(net.network_address), net.prefixlen)]

    def route(self, prefix: str, port: int, dst_mac: str, src_mac: str,
              options: ent.PortOptions = ent.PortOptions(), modify: bool = False) -> None:
        e = eb.route(prefix, self.ifindex[port], port, dst_mac, src_mac, options, self.queue_frame_bytes)
        (self.pipe.table_update if modify else self.pipe.table_add)(e.table, e.action, e.keys, e.params)

    def delete_route(self, prefix: str, port: int, dst_mac: str, src_mac: str) -> None:
        self.pipe.table_delete(eb.T_ROUTES, self._route_key(prefix))

    def set_capacity(self, port: int, capacity_bps: float) -> None:
        eb.port_capacity(port, capacity_bps, self.window).add(self.pipe)

    def delete_capacity(self, port: int, capacity_bps: float) -> None:
        self.pipe.table_delete(eb.T_PORT, [Key.exact(port)])

    def add_reservation(self, res: ent.Reservation) -> None:
        eb.install_reservation(self.pipe, res, self._meters)
        self._meters += 1

    def telemetry(self) -> "NikssTelemetry":
        self._digests.poll()        # the reports of earlier tests
        return NikssTelemetry(self._digests, self.queue_frame_bytes)

    def drops(self, reason: int) -> int:
        return self.pipe.counter_get(eb.DROP_COUNTER, reason)[0]

    def all_drops(self) -> dict[int, int]:
        return {code: self.drops(code) for code in ent.DROP_REASONS}

    def queue_emptied(self, port: int) -> int:
        return self.pipe.counter_get(eb.QUEUE_EMPTIED_COUNTER, port)[0]

    def set_queue(self, port: int, rate_pps: float, depth_packets: int, frame_bytes: int) -> None:
        """The port's qdisc at `rate_pps` frames of `frame_bytes` per second
        (in bits/s), `depth_packets` such frames deep (in bytes), and the
        program's virtual queue of the same rate and limit."""
        rate_bps = rate_pps * 8 * frame_bytes
        limit = depth_packets * frame_bytes
        q = self._qdiscs.get(port) or eb.PortQdisc(self.ports[port], limit)
        q.limit_bytes = limit
        q.install(rate_bps)
        self._qdiscs[port] = q
        eb.VirtualQueue.of(rate_bps, limit).entry(port).set(self.pipe)

    def reset_queue(self, port: int) -> None:
        q = self._qdiscs.pop(port, None)
        if q is not None:
            q.remove()
        try:
            self.pipe.table_delete(eb.T_QUEUE, [Key.exact(port)])
        except NikssError as exc:
            if exc.errno != errno.ENOENT:
                raise

    def clear(self) -> None:
        for port in list(self._qdiscs):
            self.reset_queue(port)
        for table in (eb.T_ROUTES, eb.T_PORT, eb.T_QUEUE, eb.T_RESERVATIONS):
            self.pipe.table_clear(table)

    def close(self) -> None:
        self._digests.close()
        self.pipe.close()


class NikssTelemetry:
    def __init__(self, reader, queue_unit_bytes: int) -> None:
        self._reader = reader
        self._unit = queue_unit_bytes

    def stop(self) -> list[Report]:
        time.sleep(0.05)   # the last packets' digests
        out = []
        for item in self._reader.poll():
            t = eb.EbpfTelemetry.from_digest(item)
            r = t.as_port_telemetry(self._unit)
            out.append(Report(**r.__dict__, queue_bytes=t.queue_bytes))
        return out
