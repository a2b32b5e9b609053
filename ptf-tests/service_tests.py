"""PTF tests of the guaranteed service for reservations (p4src/v1model/include/control/guaranteed.p4)
and of the per-port counts of what each egress port was given, sent and dropped
(port_counters.p4, queue.p4).

run_ptf.py starts sw1 with two priority queues per port (BMv2 --priority-queues 2):
a packet the program gives priority 1 is served before any of priority 0 that is
due, each queue at its own rate and depth (set here through Thrift).
"""
from __future__ import annotations

import struct
import time

import finsy as fy
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from base import HOST_IP, HOST_MAC, SWITCH_MAC, BwnTest, bwn_packet, param
from controller import entries as ent

FRAME_BYTES = 1000


def frames(sport: int, count: int, src: int, dst: int = 2) -> list[bytes]:
    """`count` UDP frames of one flow, each carrying its index."""
    return [bytes(Ether(src=HOST_MAC[src], dst=SWITCH_MAC)
                  / IP(src=HOST_IP[src], dst=HOST_IP[dst], ttl=64)
                  / UDP(sport=sport, dport=5001) / (struct.pack("!I", i) + b"\x00" * (FRAME_BYTES - 46)))
            for i in range(count)]


def index_of(pkt: Ether) -> int:
    return struct.unpack("!I", bytes(pkt[UDP].payload)[:4])[0]


class CountingTest(BwnTest):
    def setUp(self) -> None:
        if param("target", "bmv2") == "ebpf":   # before connecting: nothing to close
            self.skipTest("not on ebpf: the priority queues and per-port counts are the v1model "
                          "program's and BMv2's only (p4src/psa has neither)")
        super().setUp()
        self.p4rt = self.sw1.sw      # the P4Runtime session itself (targets.P4RuntimeSwitch)

    def counter(self, name: str, index: int) -> int:
        [entry] = self.p4rt.read(fy.P4CounterEntry(name, index=index))
        return int(entry.data.packet_count)

    def set_priority_queue(self, port: int, priority: int, rate_pps: float, depth: int) -> None:
        from controller.bmv2 import QueueControl
        q = QueueControl(int(param("thrift_port")))
        try:
            q.set_rate(port, rate_pps, priority)
            q.set_depth(port, depth, priority)
        finally:
            q.close()


class GuaranteedServiceTest(CountingTest):
    """GTCP's service model at a port with the guaranteed service: a reserved flow's
    in-profile (AF11) packets take the priority queue, so they are not dropped
    while best-effort packets are (the best-effort queue is full), and they leave
    before the best-effort packets queued ahead of them. The rest of the reserved
    flow (AF13) shares best effort's queue and its losses."""

    PORT = 2
    BE_PPS, HIGH_PPS = 50.0, 100.0          # C - R and C: the controller's rates for the two queues
    BE_DEPTH, HIGH_DEPTH = 20, 30

    def runTest(self) -> None:
        self.add_hosts((1, 3, 4))
        self.add_hosts((self.PORT,), {self.PORT: ent.PortOptions(reservations=True, guaranteed=True)})
        res = ent.Reservation(src=HOST_IP[1], dst=HOST_IP[2], rate_bps=400e3, src_port=45500, dst_port=5001,
                              burst_bytes=20_000)
        entry, meter = ent.reservation(res)
        self.p4rt.insert([entry])
        self.p4rt.modify([meter])
        self.set_priority_queue(self.PORT, 0, self.BE_PPS, self.BE_DEPTH)
        self.set_priority_queue(self.PORT, 1, self.HIGH_PPS, self.HIGH_DEPTH)
        try:
            self.settle(1)
            # 1. Best effort fills its queue (and loses what does not fit); 10 reserved
            # packets (within the meter's 20 kB burst: all in profile) come right after.
            before = {n: self.counter(n, self.PORT) for n in (ent.PORT_ENQUEUED_COUNTER, ent.PORT_DEQUEUED_COUNTER)}
            for f in frames(45501, 50, src=3):
                self.dataplane.send(0, 1, f)
            for f in frames(45500, 10, src=1):
                self.dataplane.send(0, 1, f)
            out = self.collect(self.PORT, 1.5)
            time.sleep(0.3)
            d = {n: self.counter(n, self.PORT) - before[n] for n in before}
            order = [("r" if p[IP].src == HOST_IP[1] else "b", index_of(p), p[IP].tos >> 2) for p in out]
            reserved = [o for o in order if o[0] == "r"]
            best_effort = [o for o in order if o[0] == "b"]
            after_last_reserved = len(order) - 1 - max(i for i, o in enumerate(order) if o[0] == "r") \
                if reserved else 0
            print(f"\n  {len(reserved)}/10 reserved out ({[o[2] for o in reserved]}), {len(best_effort)}/50 "
                  f"best effort out, {after_last_reserved} best effort after the last reserved; counters {d}")
            self.assertEqual(len(reserved), 10, "an in-profile packet was dropped")
            self.assertTrue(all(o[2] == ent.DSCP_AF11 for o in reserved))
            self.assertEqual([o[1] for o in reserved], list(range(10)))
            self.assertLess(len(best_effort), 50 - 20, "best effort did not fill its queue")
            self.assertEqual(d[ent.PORT_ENQUEUED_COUNTER] - d[ent.PORT_DEQUEUED_COUNTER], 60 - len(out),
                             "the tail drops are not what the port was given less what left it")
            # The reserved packets waited for each other only (10 at 100/s: 0.1 s), not
            # for the ~20 best-effort packets queued ahead of them (0.4 s at 50/s).
            self.assertGreaterEqual(after_last_reserved, 10, "in-profile packets waited behind best effort")
            # 2. The reserved flow alone, beyond its profile: AF11 to the priority
            # queue, never dropped; AF13 to best effort's queue, after them.
            time.sleep(1.0)                                    # the meter's bucket refills (20 kB at 50 kB/s)
            sent = frames(45500, 40, src=1)
            for f in sent:
                self.dataplane.send(0, 1, f)
            out = self.collect(self.PORT, 1.5)
        finally:
            self.reset_queue(self.PORT)
        green = [index_of(p) for p in out if p[IP].tos >> 2 == ent.DSCP_AF11]
        yellow = [index_of(p) for p in out if p[IP].tos >> 2 == ent.DSCP_AF13]
        lost = sorted(set(range(len(sent))) - set(green) - set(yellow))
        print(f"\n  beyond the profile: AF11 {green}, AF13 {yellow}, lost {lost}")
        self.assertGreater(len(green), 5)
        self.assertGreater(len(yellow), 5)
        self.assertEqual(green, list(range(len(green))), "the meter's in-profile packets are its first ones")
        self.assertTrue(all(i >= len(green) for i in lost), "an in-profile packet was dropped")


class PortDropCountersTest(CountingTest):
    """The counts behind the drops:LINK metric: what the port was given (ingress)
    less what left its queue (egress) is what its full queue dropped; the drops the
    ingress decides after routing (random loss, Assured Forwarding) are counted
    under the port and the reason, as many as the switch-wide drop counter has,
    and at no other port."""

    SERVICE_PPS = 20.0

    def runTest(self) -> None:
        # 1. Tail drops at a plain port: a burst of 30 into a queue of 10.
        self.add_hosts((1, 3, 4))
        self.add_hosts((2,), {2: ent.PortOptions(loss=0.5)})
        self.set_queue(3, self.SERVICE_PPS, 10)
        try:
            names = (ent.PORT_ENQUEUED_COUNTER, ent.PORT_DEQUEUED_COUNTER)
            before = {(n, p): self.counter(n, p) for n in names for p in (2, 3)}
            for f in frames(45600, 30, src=1, dst=3):
                self.dataplane.send(0, 1, f)
            out = self.collect(3, 1.5 + 30 / self.SERVICE_PPS)
            time.sleep(0.3)
            d = {k: self.counter(*k) - v for k, v in before.items()}
        finally:
            self.reset_queue(3)
        print(f"\n  burst of 30 into a queue of 10: {len(out)} out; counters {d}")
        self.assertLess(len(out), 30)
        self.assertEqual(d[(ent.PORT_ENQUEUED_COUNTER, 3)], 30)
        self.assertEqual(d[(ent.PORT_DEQUEUED_COUNTER, 3)], len(out))
        self.assertEqual((d[(ent.PORT_ENQUEUED_COUNTER, 2)], d[(ent.PORT_DEQUEUED_COUNTER, 2)]), (0, 0))
        # 2. Random loss at port 2: under the port and the reason, as in drop_counter.
        loss = ent.DROP_REASON_CODES["random_loss"]
        before_all = self.read_drops(loss)
        before_port = {p: self.counter(ent.PORT_DROPS_COUNTER, ent.port_drops_index(p, "random_loss"))
                       for p in (2, 3)}
        before_enq = self.counter(ent.PORT_ENQUEUED_COUNTER, 2)
        for i in range(200):
            self.dataplane.send(0, 1, bytes(bwn_packet(1, 2, sport=45700 + i % 4)))
        out = self.collect(2, 1.0)
        dropped_all = self.settled_drops(loss) - before_all
        dropped = {p: self.counter(ent.PORT_DROPS_COUNTER, ent.port_drops_index(p, "random_loss")) - before_port[p]
                   for p in (2, 3)}
        enqueued = self.counter(ent.PORT_ENQUEUED_COUNTER, 2) - before_enq
        print(f"\n  200 at 50 % loss: {len(out)} out, {dropped_all} lost; by port {dropped}; "
              f"given to port 2: {enqueued}")
        self.assertGreater(dropped_all, 50)
        self.assertEqual(dropped[2], dropped_all)
        self.assertEqual(dropped[3], 0)
        self.assertEqual(enqueued, 200 - dropped_all, "a lost packet was counted as given to the port")
        # 3. Assured Forwarding drops at port 4 (its queue at the AF threshold: DATA
        # packets at twice its rate), under port 4 and the reason.
        self.add_hosts((4,), {4: ent.PortOptions(reservations=True, af_queue_packets=3)}, modify=True)
        self.set_queue(4, self.SERVICE_PPS, 30)
        af = ent.DROP_REASON_CODES["af_out_of_profile"]
        try:
            before_all = self.read_drops(af)
            before_port = {p: self.counter(ent.PORT_DROPS_COUNTER, ent.port_drops_index(p, "af_out_of_profile"))
                           for p in (2, 4)}
            self.send_paced(1, [bytes(bwn_packet(1, 4, sport=45800, size=FRAME_BYTES)) for _ in range(80)],
                            2 * self.SERVICE_PPS)
            self.collect(4, 2.0)
            dropped_all = self.settled_drops(af) - before_all
            dropped = {p: self.counter(ent.PORT_DROPS_COUNTER, ent.port_drops_index(p, "af_out_of_profile"))
                       - before_port[p] for p in (2, 4)}
        finally:
            self.reset_queue(4)
        print(f"\n  AF port: {dropped_all} AF drops; by port {dropped}")
        self.assertGreater(dropped_all, 10)
        self.assertEqual(dropped, {2: 0, 4: dropped_all})
