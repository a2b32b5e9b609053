"""PTF tests that build real queues on BMv2 (a queue rate below the offered
load), and the packet-level rules the other suites take for granted: OBP's BI
term and the telemetry queue, Assured Forwarding for GTCP reservations, TTL,
hop-count saturation, an idle link."""
from __future__ import annotations

import math
import struct
import time

import finsy as fy
import ptf.testutils as tu
from scapy.layers.inet import IP

from base import HOST_IP, BwnTest, bwn_packet, routed
from bwn.protocol import dataplane_math as dm
from controller import entries as ent
from bwn.protocol.scapy_layer import BWN
from bwn.protocol.wire import BWN_UDP_PORT, BwnHeader

FRAME_BYTES = 1000


def numbered(sport: int, count: int, src: int = 1, dst: int = 2) -> list[bytes]:
    """`count` DATA frames of one flow, carrying their index after the BWN header."""
    return [bytes(bwn_packet(src, dst, sport=sport, size=FRAME_BYTES, payload=struct.pack("!I", i)))
            for i in range(count)]


def index_of(pkt) -> int:
    return struct.unpack("!I", bytes(pkt[BWN].payload)[:4])[0]


class QueueBiTermTest(BwnTest):
    """OBP eq. 6 with a real queue: AB = IC - BR - BI, where BI is the queue
    the port holds when the window starts. The telemetry reports that queue,
    and each report's AB is its IC - BR - BI to the switch's rounding."""

    window_cfg = ent.WindowConfig(window_us=131_072, flow_window_us=262_144)
    CAPACITY_BPS = 2e6

    def runTest(self) -> None:
        self.add_hosts()
        self.set_capacity(2, self.CAPACITY_BPS)
        service_pps = self.CAPACITY_BPS / (8 * FRAME_BYTES)          # 250 pps
        self.set_queue(2, service_pps, 40)
        try:
            self.sw1.insert([ent.telemetry_digest()])
            self.settle()
            collector = self.sw1.start_digests(ent.TELEMETRY_DIGEST)
            frames = numbered(43100, int(1.6 * service_pps * 3.0))    # 1.6x the capacity, 3 s
            self.send_paced(1, frames, 1.6 * service_pps)
            out = self.collect(2, 1.5)
            reports = [ent.PortTelemetry.from_digest(d) for d in collector.stop()]
        finally:
            self.reset_queue(2)
        reports = [r for r in reports if r.port == 2 and r.rate_kbps > 0]
        queued = [r for r in reports if r.queue_pkts > 0]
        print(f"\n  {len(reports)} reports, queue up to {max(r.queue_pkts for r in reports)} packets, "
              f"AB down to {min(r.avail_kbps for r in reports):.0f} kb/s; {len(out)}/{len(frames)} forwarded")
        self.assertGreater(len(queued), 3, "the queue never built up")
        self.assertGreaterEqual(max(r.queue_pkts for r in reports), 20)
        unit_bytes = self.window_cfg.queue_unit_bytes
        w_ms = self.window_cfg.window_us / 1000
        for r in reports:
            bi_kbps = r.queue_pkts * unit_bytes * 8 / w_ms
            # Floors of the switch (BR and AB each within 1 kb/s) and of IC (< 0.5 byte/window).
            self.assertAlmostEqual(r.avail_kbps, r.capacity_kbps - r.rate_kbps - bi_kbps, delta=2.5)
        # Overloaded and queued: AB is negative, and BI makes it more so than IC - BR.
        steady = queued[len(queued) // 2:]
        self.assertTrue(all(r.avail_kbps < 0 for r in steady))
        self.assertTrue(all(r.avail_kbps < r.capacity_kbps - r.rate_kbps - 100 for r in steady))
        # BR counts bytes received (1.6x), not the capacity the queue lets through.
        self.assertGreater(self.median([r.rate_kbps for r in steady]), 1.4 * self.CAPACITY_BPS / 1000)
        # The stamps carry it: the tight link of the later packets is negative too.
        tights = [BwnHeader.unpack(bytes(p[BWN])[:24]).tight_kbps for p in out[len(out) // 2:]]
        self.assertLess(self.median(tights), 0)


class AssuredForwardingTest(BwnTest):
    """GTCP reservations as RFC 2597 Assured Forwarding, on a congested port:
    in-profile packets (AF11) are not dropped before the queue is full, the
    out-of-profile and best-effort ones are dropped once the queue holds the
    port's threshold; one flow's packets are never reordered; with no queue,
    nothing is dropped."""

    AF_QUEUE = 5
    SERVICE_PPS = 100.0

    def setup_port(self) -> None:
        self.add_hosts((1, 3, 4))
        self.add_hosts((2,), {2: ent.PortOptions(reservations=True, af_queue_packets=self.AF_QUEUE)})
        res = ent.Reservation(src=HOST_IP[1], dst=HOST_IP[2], rate_bps=400e3, src_port=45000,
                              dst_port=BWN_UDP_PORT, burst_bytes=2000)
        entry, meter = ent.reservation(res)
        self.sw1.insert([entry])
        self.sw1.modify([meter])

    def send_mix(self, reserved_pps: float, best_effort_pps: float, seconds: float) -> tuple[list, list, int]:
        a = numbered(45000, int(reserved_pps * seconds))
        b = numbered(45001, int(best_effort_pps * seconds), src=3)
        # Interleave by time: frame i of a flow is due at i / rate.
        schedule = sorted([(i / reserved_pps, f) for i, f in enumerate(a)]
                          + [(i / best_effort_pps, f) for i, f in enumerate(b)], key=lambda x: x[0])
        before = self.read_drops(ent.DROP_REASON_CODES["af_out_of_profile"])
        start = time.monotonic()
        for due, frame in schedule:
            delay = start + due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            self.dataplane.send(0, 1, frame)
        out = self.collect(2, 2.0)
        af_drops = self.settled_drops(ent.DROP_REASON_CODES["af_out_of_profile"]) - before
        mine = [p for p in out if p[IP].src == HOST_IP[1]]
        other = [p for p in out if p[IP].src == HOST_IP[3]]
        return mine, other, af_drops

    def runTest(self) -> None:
        self.setup_port()
        # 1. Below the port's rate: no queue, no AF drop, both colours present.
        mine, other, af_drops = self.send_mix(40, 20, 2.0)
        self.assertEqual(af_drops, 0)
        self.assertEqual(len(mine), 80)
        self.assertEqual(len(other), 40)
        # 2. Congested: the service rate is 100 pps, offered 80 + 120 pps.
        self.set_queue(2, self.SERVICE_PPS, 60)
        try:
            self.settle()
            mine, other, af_drops = self.send_mix(80, 120, 4.0)
        finally:
            self.reset_queue(2)
        in_profile = [p for p in mine if p[IP].tos >> 2 == ent.DSCP_AF11]
        print(f"\n  congested: reserved flow {len(mine)}/320 ({len(in_profile)} AF11), "
              f"best effort {len(other)}/480, AF drops {af_drops}")
        self.assertGreater(af_drops, 100)
        # Never reordered: one queue for both colours.
        indices = [index_of(p) for p in mine]
        self.assertEqual(indices, sorted(indices), "the reserved flow was reordered")
        # In profile is 400 kb/s = 50 pps of 1000-byte frames, none of it dropped:
        # the AF drops never touch AF11, and the queue (60) never fills.
        self.assertGreater(len(in_profile), 0.85 * 50 * 4.0)
        self.assertTrue(all(p[IP].tos >> 2 in (ent.DSCP_AF11, ent.DSCP_AF13) for p in mine))
        # The reservation protects the flow: it offered 320 of the 800 frames
        # (40 %) and leaves with at least its reserved half of the 100-pps port.
        # Without the meter both colours share the FIFO by what they offer
        # (about 40 %). How the out-of-profile remainder splits is not guaranteed
        # (it depends on where the meter's recolouring falls in the queue's
        # cycle), so the bound is on the share, not on beating best effort.
        share = len(mine) / max(1, len(mine) + len(other))
        self.assertGreater(share, 0.45, f"the reserved flow left with {share:.0%} of the port")


class AfThresholdTest(BwnTest):
    """Where AF drops start: best-effort traffic at twice a congested AF port's
    rate holds the queue at the controller's threshold (the queue telemetry
    never sees more than the threshold and a packet), far below the port's
    buffer, and what the queue cannot take is dropped as out of profile."""

    AF_QUEUE = 5
    SERVICE_PPS = 100.0
    window_cfg = ent.WindowConfig(window_us=131_072, flow_window_us=262_144)

    def runTest(self) -> None:
        self.add_hosts((1, 3, 4))
        self.add_hosts((2,), {2: ent.PortOptions(reservations=True, af_queue_packets=self.AF_QUEUE)})
        self.set_capacity(2, self.SERVICE_PPS * 8 * FRAME_BYTES)
        self.set_queue(2, self.SERVICE_PPS, 60)
        try:
            self.sw1.insert([ent.telemetry_digest()])
            self.settle()
            collector = self.sw1.start_digests(ent.TELEMETRY_DIGEST)
            before = self.read_drops(ent.DROP_REASON_CODES["af_out_of_profile"])
            frames = numbered(45100, int(2 * self.SERVICE_PPS * 3.0), src=3)
            self.send_paced(1, frames, 2 * self.SERVICE_PPS)
            out = self.collect(2, 1.5)
            af_drops = self.settled_drops(ent.DROP_REASON_CODES["af_out_of_profile"]) - before
            reports = [ent.PortTelemetry.from_digest(d) for d in collector.stop()]
        finally:
            self.reset_queue(2)
        queues = [r.queue_pkts for r in reports if r.port == 2 and r.rate_kbps > 0]
        print(f"\n  {len(out)}/{len(frames)} forwarded, {af_drops} AF drops, queue samples {queues}")
        self.assertGreater(len(queues), 3, "no telemetry from the congested port")
        self.assertGreater(max(queues), 0, "the queue never built up")
        self.assertLessEqual(max(queues), self.AF_QUEUE + 1, "the queue grew past the AF threshold")
        self.assertGreater(af_drops, 0.25 * len(frames))
        self.assertEqual(len(out) + af_drops, len(frames), "a packet was lost other than by the AF rule")


class LossAndAfCountEachDropOnceTest(BwnTest):
    """A congested AF port that also loses packets at random: every packet is
    either forwarded or dropped and counted once, under one reason. A packet
    the loss draw dropped must not also meet the AF rule, which would count it
    again as out of profile."""

    SERVICE_PPS = 100.0

    def runTest(self) -> None:
        self.add_hosts((1, 3, 4))
        self.add_hosts((2,), {2: ent.PortOptions(loss=0.3, reservations=True, af_queue_packets=5)})
        self.set_queue(2, self.SERVICE_PPS, 60)
        af, loss = (ent.DROP_REASON_CODES[r] for r in ("af_out_of_profile", "random_loss"))
        try:
            self.settle()
            before = {r: self.read_drops(r) for r in (af, loss)}
            frames = numbered(45200, int(2.5 * self.SERVICE_PPS * 3.0), src=3)
            self.send_paced(1, frames, 2.5 * self.SERVICE_PPS)
            out = self.collect(2, 1.5)
            dropped = {r: self.settled_drops(r) - before[r] for r in (af, loss)}
        finally:
            self.reset_queue(2)
        print(f"\n  {len(out)}/{len(frames)} forwarded, {dropped[loss]} lost, {dropped[af]} AF drops")
        self.assertGreater(dropped[af], 0, "the AF threshold was never reached")
        self.assertGreater(dropped[loss], 0.15 * len(frames))
        self.assertEqual(len(out) + dropped[af] + dropped[loss], len(frames),
                         "a drop was counted twice, or a packet lost uncounted")


class LossOnAnAfPortIsCountedAsLossTest(BwnTest):
    """On a congested AF port that also loses packets at random, the packets the
    loss draw drops are counted as lost, as many as the loss rate says (binomial
    bounds, 4.5 sigma), whatever the queue: a lost packet never meets the AF rule,
    which would count it as out of profile instead (and the meter would count it
    as part of a reservation)."""

    SERVICE_PPS = 100.0
    LOSS = 0.3

    def runTest(self) -> None:
        self.add_hosts((1, 3, 4))
        self.add_hosts((2,), {2: ent.PortOptions(loss=self.LOSS, reservations=True, af_queue_packets=5)})
        self.set_queue(2, self.SERVICE_PPS, 60)
        af, loss = (ent.DROP_REASON_CODES[r] for r in ("af_out_of_profile", "random_loss"))
        try:
            self.settle()
            before = {r: self.read_drops(r) for r in (af, loss)}
            frames = numbered(45250, int(2.5 * self.SERVICE_PPS * 3.0), src=3)
            self.send_paced(1, frames, 2.5 * self.SERVICE_PPS)
            out = self.collect(2, 1.5)
            dropped = {r: self.settled_drops(r) - before[r] for r in (af, loss)}
        finally:
            self.reset_queue(2)
        n = len(out) + dropped[af] + dropped[loss]       # what reached the switch
        sigma = math.sqrt(n * self.LOSS * (1 - self.LOSS))
        print(f"\n  {dropped[loss]} of {n} lost (expected {n * self.LOSS:.0f} +- {4.5 * sigma:.0f}), "
              f"{dropped[af]} AF drops")
        self.assertGreater(dropped[af], 0, "the AF threshold was never reached")
        self.assertLessEqual(abs(dropped[loss] - n * self.LOSS), 4.5 * sigma + 0.5,
                             "lost packets counted under another reason")


class AfDroppedFlowIsNotCountedTest(BwnTest):
    """A flow whose every packet the Assured Forwarding rule drops is not one of
    the port's active flows: a dropped packet does not count as a flow. A
    reserved flow, in profile (AF11), at twice a port's rate keeps its queue
    full, so every packet of a best-effort flow sent meanwhile is dropped as out
    of profile; the reserved flow's packets are then still stamped with the
    share of one flow. (The flow window, 2^23 us, holds the whole test.)"""

    SERVICE_PPS = 50.0
    window_cfg = ent.WindowConfig(window_us=16_384, flow_window_us=1 << 23)

    def runTest(self) -> None:
        self.add_hosts((1, 3, 4))
        self.add_hosts((2,), {2: ent.PortOptions(reservations=True, af_queue_packets=1)})
        self.set_capacity(2, 10e6)
        res = ent.Reservation(src=HOST_IP[1], dst=HOST_IP[2], rate_bps=10e6, src_port=45300,
                              dst_port=BWN_UDP_PORT, burst_bytes=1_000_000)
        entry, meter = ent.reservation(res)
        self.sw1.insert([entry])
        self.sw1.modify([meter])
        self.set_queue(2, self.SERVICE_PPS, 60)
        try:
            self.settle()
            reserved = numbered(45300, int(2 * self.SERVICE_PPS * 3.0))
            best_effort = numbered(45301, 20, src=3)
            # The best-effort packets go in the last two seconds, one after every
            # 10th reserved packet: by then the queue has been full for a while.
            frames = [f for i, r in enumerate(reserved)
                      for f in ([r, best_effort[(i - 100) // 10]] if i >= 100 and i % 10 == 0 else [r])]
            before = self.read_drops(ent.DROP_REASON_CODES["af_out_of_profile"])
            self.send_paced(1, frames, 2 * self.SERVICE_PPS * len(frames) / len(reserved))
            out = self.collect(2, 2.0)
            af_drops = self.settled_drops(ent.DROP_REASON_CODES["af_out_of_profile"]) - before
        finally:
            self.reset_queue(2)
        mine = [p for p in out if p[IP].src == HOST_IP[1]]
        print(f"\n  {len(mine)} reserved packets out, {len(out) - len(mine)} best effort, {af_drops} AF drops")
        self.assertEqual(len(out) - len(mine), 0, "a best-effort packet got through the full queue")
        self.assertEqual(af_drops, len(best_effort))
        codes = [BwnHeader.unpack(bytes(p[BWN])[:24]).ebn_code for p in mine[-20:]]
        self.assertEqual(set(codes), {dm.expected_ebn_code(10_000, 1)},
                         "the flow the AF rule dropped whole counts in the share")


class QueueEmptiedCounterTest(BwnTest):
    """The egress counter the fidelity monitor reads to know a port was
    backlogged: it counts the packets that left their port's queue empty. Paced
    below the port's rate, every packet does; a burst into a slow queue leaves
    it empty only at its end (a packet that leaves one waiting behind it, not
    counted, is what the fidelity monitor relies on)."""

    SERVICE_PPS = 20.0
    BURST = 30

    def emptied(self, port: int) -> int:
        [entry] = self.sw1.read(fy.P4CounterEntry(ent.QUEUE_EMPTIED_COUNTER, index=port))
        return int(entry.data.packet_count)

    def runTest(self) -> None:
        self.add_hosts()
        self.settle(1)
        # 1. An unlimited queue, 20 packets 20 ms apart: each leaves it empty.
        before2, before3 = self.emptied(2), self.emptied(3)
        self.send_paced(1, numbered(45200, 20), 50)
        out = self.collect(2, 0.5)
        self.assertEqual(len(out), 20)
        self.assertEqual(self.emptied(2) - before2, 20)
        self.assertEqual(self.emptied(3), before3, "counted on a port the packets did not leave by")
        # 2. A burst into a 20 pps queue: backlogged until its last packet. The
        # first packet may leave before the second is queued (a race, read
        # while the rest still wait); after that, only the last one counts.
        self.set_queue(2, self.SERVICE_PPS, 60)
        try:
            before = self.emptied(2)
            for frame in numbered(45201, self.BURST):
                self.dataplane.send(0, 1, frame)
            time.sleep(0.3)
            first = self.emptied(2) - before
            out = self.collect(2, 1.0)
        finally:
            self.reset_queue(2)
        rest = self.emptied(2) - before - first
        print(f"\n  burst of {self.BURST}: {len(out)} out; left the queue empty: {first} while it "
              f"drained, {rest} after")
        self.assertEqual(len(out), self.BURST)
        self.assertLessEqual(first, 1, "packets of a backlogged burst counted as leaving an empty queue")
        self.assertEqual(rest, 1, "only the burst's last packet leaves the queue empty")


class TtlTest(BwnTest):
    """TTL 0 and 1 are dropped under their reason; TTL 2 leaves with 1 and a
    correct header checksum."""

    def runTest(self) -> None:
        self.add_hosts()
        before = self.read_drops(ent.DROP_REASON_CODES["ttl"])
        for ttl in (0, 1):
            pkt = bwn_packet(1, 2, sport=43200)
            pkt[IP].ttl = ttl
            del pkt[IP].chksum
            tu.send_packet(self, 1, bytes(pkt))
        tu.verify_no_other_packets(self, timeout=0.5)
        self.assertEqual(self.settled_drops(ent.DROP_REASON_CODES["ttl"]), before + 2)
        pkt = bwn_packet(1, 2, sport=43200)
        pkt[IP].ttl = 2
        del pkt[IP].chksum
        tu.send_packet(self, 1, bytes(pkt))
        [out] = self.collect(2, 0.5)
        self.assertEqual(out[IP].ttl, 1)


def with_checksum(pkt, checksum: int):
    """`pkt` with its IPv4 identification chosen so that its header checksum is
    `checksum` (one's complement: id = ~checksum - the sum of the other words)."""
    pkt = pkt.copy()
    pkt[IP].id = 0
    del pkt[IP].chksum
    header = bytes(pkt[IP])[:20]
    total = 0
    for k in range(0, 20, 2):
        if k != 10:
            total += int.from_bytes(header[k:k + 2], "big")
            total = (total & 0xFFFF) + (total >> 16)
    ident = (~checksum & 0xFFFF) + (~total & 0xFFFF)
    pkt[IP].id = (ident & 0xFFFF) + (ident >> 16)
    pkt = pkt.__class__(bytes(pkt))
    assert pkt[IP].chksum == checksum, (hex(pkt[IP].chksum), hex(checksum))
    return pkt


class TtlChecksumCarryTest(BwnTest):
    """The TTL decrement's incremental checksum update (RFC 1624 eq. 3) at and
    around the checksums where its one's complement sum carries (HC >= 0xFEFF):
    each packet leaves exactly as a router that recomputes the checksum sends it."""

    def runTest(self) -> None:
        self.add_hosts()
        for checksum in (0x0000, 0x1234, 0xFEFE, 0xFEFF, 0xFF00, 0xFFFE):
            pkt = with_checksum(bwn_packet(1, 2, sport=43300), checksum)
            tu.send_packet(self, 1, bytes(pkt))
            [out] = self.collect(2, 0.5)
            expected = routed(pkt, 2)
            self.assertEqual((out[IP].ttl, out[IP].chksum), (expected[IP].ttl, expected[IP].chksum),
                             f"checksum {checksum:#06x} in")


class HopCountSaturatesTest(BwnTest):
    """hop_count grows by one per stamping switch and stops at 255."""

    def runTest(self) -> None:
        self.add_hosts()
        self.set_capacity(2, 10e6)
        for sent, expected in ((0, 1), (200, 201), (254, 255), (255, 255)):
            tu.send_packet(self, 1, bwn_packet(1, 2, sport=43300, hop_count=sent))
            [out] = self.collect(2, 0.5)
            self.assertEqual(out[BWN].hop_count, expected, f"hop_count {sent} in")


class IdleLinkTest(BwnTest):
    """After whole windows without a packet, the first packet sees an idle link:
    AB = IC exactly (BR and BI are 0), and one flow (the flow windows that
    passed forgot the others)."""

    window_cfg = ent.WindowConfig(window_us=16_384, flow_window_us=131_072)
    CAPACITY_BPS = 10e6

    def runTest(self) -> None:
        self.add_hosts()
        self.set_capacity(2, self.CAPACITY_BPS)
        # Busy first: 8 flows.
        frames = [bytes(bwn_packet(1, 2, sport=43400 + f)) for f in range(8)] * 20
        self.send_paced(1, frames, 400)
        self.collect(2, 0.5)
        self.settle(3)                                            # > 2 flow windows idle
        tu.send_packet(self, 1, bwn_packet(1, 2, sport=43500))
        [out] = self.collect(2, 0.5)
        h = BwnHeader.unpack(bytes(out[BWN])[:24])
        cap = dm.PortCapacity.from_bps(self.CAPACITY_BPS, self.window_cfg.window_us)
        self.assertEqual(h.tight_kbps, dm.window_bytes_to_kbps(cap.cap_bytes, self.window_cfg.window_us))
        self.assertEqual(h.tight_kbps, 10_000)
        self.assertEqual(h.ebn_code, dm.expected_ebn_code(10_000, 1))
        self.assertTrue(math.isclose(h.narrow_kbps, 10_000))
