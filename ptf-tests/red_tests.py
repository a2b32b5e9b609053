"""PTF tests of RED with ECN marking at a port (p4src/v1model/include/control/red_ecn.p4),
which decides on each packet's arrival: the thresholds, the average's weight, marking
ECN-capable packets and dropping the rest before the queue, forced drops above 2 max_th,
the idle decay, and the per-port counts.

Every test builds its queue with a burst into a slow, deep BMv2 queue: a packet of the
burst joins the packets RED let in before it, still queued (at most a few have left, at
20 packets/s), so the queue it joins, and with it RED's average, is known to within
those departures; controller/aqm.py's RedModel computes what the switch does with it.
(The switch's sample counts the packets it let in since the last departure, so a burst
into a full queue would overcount the packets the queue then drops: no test fills one.)
"""
from __future__ import annotations

import struct
import time

import finsy as fy
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from base import HOST_IP, HOST_MAC, SWITCH_MAC, BwnTest, param
from controller import aqm
from controller import entries as ent

SERVICE_PPS = 20.0
FRAME_BYTES = 1000
ECT0, NOT_ECT, CE = 2, 0, 3


def frames(sport: int, count: int, ecn: int, src: int = 1, dst: int = 2) -> list[bytes]:
    """`count` UDP frames of one flow with IPv4 ECN field `ecn`, each carrying its index."""
    out = []
    for i in range(count):
        pkt = (Ether(src=HOST_MAC[src], dst=SWITCH_MAC)
               / IP(src=HOST_IP[src], dst=HOST_IP[dst], ttl=64, tos=ecn)
               / UDP(sport=sport, dport=5001) / (struct.pack("!I", i) + b"\x00" * (FRAME_BYTES - 46)))
        out.append(bytes(pkt))
    return out


def index_of(pkt: Ether) -> int:
    return struct.unpack("!I", bytes(pkt[UDP].payload)[:4])[0]


class RedTest(BwnTest):
    """A port with RED (its routes carry the option, its red_* entries installed)
    and a slow queue."""

    PORT = 2

    def setUp(self) -> None:
        if param("target", "bmv2") == "ebpf":   # before connecting: nothing to close
            self.skipTest("not on ebpf: RED is the v1model program's only (p4src/psa has no red_* tables)")
        super().setUp()
        self.p4rt = self.sw1.sw      # the P4Runtime session itself (targets.P4RuntimeSwitch)

    def setup_red(self, params: aqm.RedParams, depth: int, ports=(1, 3), rate_pps: float = SERVICE_PPS) -> None:
        """RED at PORT. BMv2 keeps registers between tests: the average an earlier test
        left at the port is cleared by the idle decay (`params`' ranges) after a
        quiet time, which this waits out."""
        self.add_hosts(ports)
        self.add_hosts((self.PORT,), {self.PORT: ent.PortOptions(red=True)})
        self.p4rt.insert(ent.red_entries(self.PORT, params))
        self.set_queue(self.PORT, rate_pps, depth)
        ranges = params.idle_ranges()
        time.sleep(ranges[-1][0] / 1e6 + 0.2 if ranges else 0.2)

    def counter(self, name: str, index: int) -> int:
        [entry] = self.p4rt.read(fy.P4CounterEntry(name, index=index))
        return int(entry.data.packet_count)

    def counts(self) -> dict[str, int]:
        return {name: self.counter(name, self.PORT) for name in
                (ent.RED_MARKED_COUNTER, ent.RED_DROPPED_COUNTER, ent.PORT_ENQUEUED_COUNTER,
                 ent.PORT_DEQUEUED_COUNTER)}

    def burst(self, sent: list[bytes], drain_s: float) -> tuple[list[Ether], dict[str, int]]:
        """Send `sent` at once; collect what leaves; the counters' changes once the queue drained."""
        before = self.counts()
        for f in sent:
            self.dataplane.send(0, 1, f)
        out = self.collect(self.PORT, drain_s)
        time.sleep(0.3)
        after = self.counts()
        return out, {k: after[k] - before[k] for k in after}

    def tearDown(self) -> None:
        try:
            self.reset_queue(self.PORT)
        finally:
            super().tearDown()


def model_levels(params: aqm.RedParams, queues: list[int]) -> list[str]:
    """The decisions the switch makes for packets that found `queues` (the reference model)."""
    model = aqm.RedModel(params)
    return [model.decide(q) for q in queues]


def first(decisions: list[str], what: tuple[str, ...]) -> int:
    return next((i for i, d in enumerate(decisions) if d in what), len(decisions))


class RedMarksEctAndDropsTheRestTest(RedTest):
    """With w_q = 1 (the average is the queue each packet joins): no packet that
    joined the queue below min_th is marked; ECN-capable packets above it are marked
    CE, with a valid header checksum, and never dropped below 2 max_th; the same
    burst without ECT loses packets to RED instead and none leaves marked. RED's
    counters count what left marked and what it dropped, and a packet RED drops
    is dropped before the queue: never handed to the port, never leaving it."""

    PARAMS = aqm.RedParams(min_th=3, max_th=6, weight_log2=0, rate_pps=SERVICE_PPS)
    DEPTH = 100
    BURST = 12           # the last joins 11 packets, below 2 max_th = 12: no forced drop

    def runTest(self) -> None:
        self.setup_red(self.PARAMS, self.DEPTH)
        # The same burst five times, so that several marks fall on the levels above min_th.
        # Each mark needs the count's sum of p_b to grow by at least 1 since the last: at
        # most the burst's sum of p_b marks, the levels 3..11 and a second packet at 11
        # for each departure during the burst (allow two).
        table = self.PARAMS.probability_table()
        levels = [q * aqm.LEVELS_PER_PACKET for q in range(self.BURST)] + [(self.BURST - 1) * aqm.LEVELS_PER_PACKET] * 2
        most = int(sum(table.get(level, 0) for level in levels) / aqm.PROB_ONE)
        marked_total = 0
        for rnd in range(5):
            out, d = self.burst(frames(46000 + rnd, self.BURST, ECT0), 1.5)
            idx = [index_of(p) for p in out]
            marked = [index_of(p) for p in out if p[IP].tos & 3 == CE]
            print(f"\n  ECT round {rnd}: {len(out)} out, marked {marked}, counters {d}")
            self.assertEqual(d[ent.RED_DROPPED_COUNTER], 0, "an ECN-capable packet was dropped below 2 max_th")
            self.assertEqual(d[ent.RED_MARKED_COUNTER], len(marked))
            self.assertLessEqual(len(marked), most, "marks closer than RED's count spaces them")
            self.assertTrue(all(i >= self.PARAMS.min_th for i in marked),
                            f"marked below min_th (found the queue at most at its index): {marked}")
            self.assertTrue(all(p[IP].tos >> 2 == 0 for p in out), "the DSCP changed")
            self.assertEqual(idx, sorted(idx))
            self.assertEqual(d[ent.PORT_ENQUEUED_COUNTER], self.BURST)
            self.assertEqual(d[ent.PORT_DEQUEUED_COUNTER], len(out))
            marked_total += len(marked)
        # Each burst sums RED's p_b over the levels 3..11 (~3.9: at least one mark per 2).
        self.assertGreaterEqual(marked_total, 5)
        out, d = self.burst(frames(46100, self.BURST, NOT_ECT), 1.5)
        print(f"\n  not ECT: {len(out)} out, counters {d}")
        self.assertFalse([p for p in out if p[IP].tos & 3], "a packet that was not ECN-capable left marked")
        self.assertEqual(d[ent.RED_MARKED_COUNTER], 0)
        self.assertGreaterEqual(d[ent.RED_DROPPED_COUNTER], 1)
        lost = {i for i in range(self.BURST)} - {index_of(p) for p in out}
        self.assertEqual(len(lost), d[ent.RED_DROPPED_COUNTER], "a packet was lost that RED did not drop")
        self.assertEqual(d[ent.PORT_ENQUEUED_COUNTER], len(out), "a packet RED dropped was handed to the port")
        self.assertEqual(d[ent.PORT_DEQUEUED_COUNTER], len(out), "a packet RED dropped left the queue")
        self.assertTrue(all(i >= self.PARAMS.min_th for i in lost), f"dropped below min_th: {sorted(lost)}")


class RedAverageAndForcedDropTest(RedTest):
    """The average follows the queue with the port's weight (w_q = 2^-2), and at
    2 max_th RED drops ECN-capable packets too: in a burst into an empty queue
    (deep enough for no tail drop), the first packet RED drops is where the model's
    average reaches 2 max_th: not before it with the queue each packet could at most
    have joined, not after it with the least (one packet may have left). What RED
    dropped never reached the queue. A lead packet leaves first, so that the burst
    waits for the port's next slot, 0.2 s later: a departure whose egress runs while
    the burst arrives would hide the packets let in meanwhile from the switch's
    sample until the next departure (docs/dataplane.md, "RED with ECN marking")."""

    PARAMS = aqm.RedParams(min_th=2, max_th=4, weight_log2=2, rate_pps=SERVICE_PPS)
    DEPTH = 100
    BURST = 18
    SLOW_PPS = 5.0       # the lead leaves at once, the burst's first 0.2 s later: the burst is in by then
    DEPARTED = 1

    def runTest(self) -> None:
        self.setup_red(self.PARAMS, self.DEPTH, rate_pps=self.SLOW_PPS)
        earliest = first(model_levels(self.PARAMS, list(range(self.BURST))), (aqm.FORCED,))
        latest = first(model_levels(self.PARAMS, [max(0, i - self.DEPARTED) for i in range(self.BURST)]),
                       (aqm.FORCED,))
        self.dataplane.send(0, 1, frames(46199, 1, ECT0)[0])
        lead = self.dataplane.poll(device_number=0, port_number=self.PORT, timeout=2.0)
        self.assertNotIsInstance(lead, self.dataplane.PollFailure, "the lead packet did not leave")
        out, d = self.burst(frames(46200, self.BURST, ECT0), 1.0 + 1 / self.SLOW_PPS)
        lost = sorted(set(range(self.BURST)) - {index_of(p) for p in out})
        first_marked = min((index_of(p) for p in out if p[IP].tos & 3 == CE), default=None)
        print(f"\n  {len(out)} out; first forced drop {lost[:1]} (model: {earliest}..{latest}); "
              f"first mark {first_marked}; counters {d}")
        self.assertTrue(lost, "RED never dropped though its average passed 2 max_th")
        self.assertGreaterEqual(lost[0], earliest, "dropped before the average could reach 2 max_th")
        self.assertLessEqual(lost[0], latest, "the average reached 2 max_th later than its weight allows")
        self.assertEqual(d[ent.RED_DROPPED_COUNTER], len(lost))
        self.assertEqual(d[ent.PORT_ENQUEUED_COUNTER], len(out), "a packet RED dropped was handed to the port")
        self.assertEqual(d[ent.PORT_DEQUEUED_COUNTER], len(out), "the queue dropped a packet")
        min_mark = first(model_levels(self.PARAMS, list(range(self.BURST))), (aqm.SIGNAL, aqm.FORCED))
        if first_marked is not None:
            self.assertGreaterEqual(first_marked, min_mark, "marked before the average reached min_th")


class RedIdleDecayTest(RedTest):
    """After the queue has been empty for long (here 2 s, over 16 halvings of the
    average at the port's rate), the average starts again from 0 (Floyd and
    Jacobson's idle correction): a second burst, whose first packet finds the
    queue empty, is not dropped where the first burst's average would drop it."""

    PARAMS = aqm.RedParams(min_th=2, max_th=4, weight_log2=2, rate_pps=SERVICE_PPS)
    DEPTH = 100
    BURST = 25

    def runTest(self) -> None:
        self.setup_red(self.PARAMS, self.DEPTH)
        self.assertLess(self.PARAMS.idle_ranges()[-1][0], 2_000_000, "2 s no longer clears the average")
        out1, d1 = self.burst(frames(46300, self.BURST, ECT0), self.BURST / SERVICE_PPS + 0.5)
        time.sleep(2.0)                       # the queue drained (1.25 s) and stayed empty
        out2, d2 = self.burst(frames(46301, 6, ECT0), 1.0)
        print(f"\n  first burst: {len(out1)} out, RED dropped {d1[ent.RED_DROPPED_COUNTER]}; "
              f"after 2 s idle: {len(out2)}/6 out, RED dropped {d2[ent.RED_DROPPED_COUNTER]}")
        self.assertGreater(d1[ent.RED_DROPPED_COUNTER], 0, "the first burst never took the average past 2 max_th")
        # Without the decay the average stays where the first burst left it (> 2 max_th):
        # the second burst's first packets would be dropped. With it, they find an
        # average below min_th: forwarded, unmarked.
        self.assertEqual([(index_of(p), p[IP].tos & 3) for p in out2][:3], [(0, ECT0), (1, ECT0), (2, ECT0)],
                         "the average did not decay over the idle time")


class RedShortIdleKeepsTheAverageTest(RedTest):
    """A short idle time leaves the average nearly as it was: with a slow decay
    (one halving per 2.6 s of idle time, at 2 packets/s and w_q = 2^-3), a packet
    sent 0.3 s after a burst whose average passed 2 max_th has drained finds that
    average still above it (7/8 of it after its own sample of 0: the average lags
    the queue by about 7 packets, so the forced drops that stop the queue's growth
    begin near a queue of 14 packets, 2 max_th = 8) and is dropped, ECN or not."""

    PARAMS = aqm.RedParams(min_th=2, max_th=4, weight_log2=3, rate_pps=2.0)
    DEPTH = 100
    BURST = 25

    def runTest(self) -> None:
        # No wait for an earlier test's average to decay: the burst sets its own.
        self.add_hosts((1, 3))
        self.add_hosts((self.PORT,), {self.PORT: ent.PortOptions(red=True)})
        self.p4rt.insert(ent.red_entries(self.PORT, self.PARAMS))
        self.set_queue(self.PORT, SERVICE_PPS, self.DEPTH)
        before = self.counts()
        out1, d1 = self.burst(frames(46500, self.BURST, ECT0), 0.2)
        deadline = time.monotonic() + 10
        while (self.counter(ent.PORT_DEQUEUED_COUNTER, self.PORT) - before[ent.PORT_DEQUEUED_COUNTER]
               < self.counter(ent.PORT_ENQUEUED_COUNTER, self.PORT) - before[ent.PORT_ENQUEUED_COUNTER]):
            self.assertLess(time.monotonic(), deadline, "the queue did not drain")
            time.sleep(0.02)
        time.sleep(0.3)
        out2, d2 = self.burst(frames(46501, 1, ECT0), 0.5)
        print(f"\n  burst: {len(out1)} out, RED dropped {d1[ent.RED_DROPPED_COUNTER]}; "
              f"0.3 s later: {len(out2)}/1 out, RED dropped {d2[ent.RED_DROPPED_COUNTER]}")
        self.assertGreater(d1[ent.RED_DROPPED_COUNTER], 0)
        self.assertEqual((len(out2), d2[ent.RED_DROPPED_COUNTER]), (0, 1),
                         "the average decayed over a short idle time")


class RedDropTakesNoDepartureSlotTest(RedTest):
    """RED decides on arrival, as Floyd and Jacobson's RED does: a packet it drops
    never enters the queue, so it never takes one of the port's departure slots
    (BMv2 serves a port in packets per second). With w_q = 1 and 2 max_th at 4
    packets, a burst into a slow queue loses every packet that would join 4 or more
    to a forced drop: the port is handed only the packets RED let in, and every
    departure of the port is one of them (the counters of port_counters.p4 and
    queue.p4), so the packets RED let in leave at the port's full rate."""

    PARAMS = aqm.RedParams(min_th=1, max_th=2, weight_log2=0, rate_pps=SERVICE_PPS)
    SLOW_PPS = 5.0
    DEPTH = 100
    BURST = 30

    def runTest(self) -> None:
        self.setup_red(self.PARAMS, self.DEPTH, rate_pps=self.SLOW_PPS)
        before = self.counts()
        sent_at = time.monotonic()
        for f in frames(46600, self.BURST, ECT0):
            self.dataplane.send(0, 1, f)
        out, times = [], []
        while True:
            res = self.dataplane.poll(device_number=0, port_number=self.PORT, timeout=1.0 + 1 / self.SLOW_PPS)
            if isinstance(res, self.dataplane.PollFailure):
                break
            out.append(Ether(res.packet))
            times.append(time.monotonic())
        time.sleep(0.3)
        after = self.counts()
        d = {k: after[k] - before[k] for k in after}
        drained_s = times[-1] - sent_at if times else 0.0
        print(f"\n  {len(out)} of {self.BURST} out, counters {d}; the last left {drained_s:.2f} s after "
              f"the burst: {len(out)} slots of the port take {(len(out) - 1) / self.SLOW_PPS:.2f} s, "
              f"{self.BURST} would take {(self.BURST - 1) / self.SLOW_PPS:.2f} s")
        self.assertGreaterEqual(d[ent.RED_DROPPED_COUNTER], self.BURST // 2, "RED's forced drops did not start")
        self.assertEqual(len(out) + d[ent.RED_DROPPED_COUNTER], self.BURST)
        self.assertEqual(d[ent.PORT_ENQUEUED_COUNTER], len(out), "a packet RED dropped was handed to the port")
        self.assertEqual(d[ent.PORT_DEQUEUED_COUNTER], len(out), "a packet RED dropped took a departure slot")


class RedOnlyAtItsPortTest(RedTest):
    """A port whose routes do not carry the RED option is drop-tail, whatever the
    red_config entries say: the same burst leaves port 3 unmarked and RED's
    counters at port 3 do not move."""

    def runTest(self) -> None:
        self.add_hosts((1, 3, 4))
        self.add_hosts((2,), {2: ent.PortOptions(red=True)})
        params = aqm.RedParams(min_th=1, max_th=2, weight_log2=0, rate_pps=SERVICE_PPS)
        self.p4rt.insert(ent.red_entries(3, params))
        self.set_queue(3, SERVICE_PPS, 30)
        try:
            before = [self.counter(n, 3) for n in (ent.RED_MARKED_COUNTER, ent.RED_DROPPED_COUNTER)]
            for f in frames(46400, 20, ECT0, dst=3):
                self.dataplane.send(0, 1, f)
            out = self.collect(3, 1.5)
            after = [self.counter(n, 3) for n in (ent.RED_MARKED_COUNTER, ent.RED_DROPPED_COUNTER)]
        finally:
            self.reset_queue(3)
        self.assertEqual(len(out), 20)
        self.assertFalse([p for p in out if p[IP].tos & 3 == CE])
        self.assertEqual(after, before)
