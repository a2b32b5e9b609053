"""Switch fuzzing on BMv2: the replayable corpus of fuzz_corpus.pcap (10 000
frames from Scapy's fuzz() and every malformed case the wire format names).

Run with `make ptf` (or `ptf-tests/run_ptf.py --test-spec fuzz_tests`).
"""
from __future__ import annotations

import time
from pathlib import Path

import finsy as fy
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from base import HOST_IP, SWITCH_MAC, BwnTest, bwn_packet, ipv4_checksum_ok
from bwn.protocol import dataplane_math as dm
from controller import entries as ent
from bwn.protocol.scapy_layer import BWN
from bwn.protocol.wire import BwnHeader
from fuzz_corpus import read_pcap

CORPUS = Path(__file__).resolve().parent / "fuzz_corpus.pcap"


class FuzzCorpusTest(BwnTest):
    """Every frame of the corpus is either forwarded well formed or counted
    under a drop reason, and the two add up to what was sent; no forwarded
    packet has a bad IPv4 checksum; the switch is alive and stamps a
    well-formed flow correctly afterwards."""

    RATE_PPS = 2000
    BATCH = 100   # small bursts: the kernel backlog of a loaded CPU holds 1000 frames
    CAPACITY_BPS = 10e6

    def all_drops(self) -> dict[str, int]:
        entries = self.sw1.read(fy.P4CounterEntry(ent.DROP_COUNTER))
        counts = {int(e.index): int(e.data.packet_count) for e in entries}
        return {name: counts.get(code, 0) for code, name in ent.DROP_REASONS.items()}

    def drain(self, out: list, quiet_s: float) -> None:
        while True:
            res = self.dataplane.poll(device_number=0, port_number=None, timeout=quiet_s)
            if isinstance(res, self.dataplane.PollFailure):
                return
            out.append((res.port, bytes(res.packet)))

    def runTest(self) -> None:
        self.add_hosts()
        for port in (2, 3, 4):
            self.set_capacity(port, self.CAPACITY_BPS)
        frames = read_pcap(CORPUS)
        self.assertGreaterEqual(len(frames), 10_000)
        before = self.all_drops()

        # Batches: each is sent paced, then waited for until every frame of it
        # has come out or been counted, so that a slow (loaded) machine cannot
        # turn into losses the switch never saw.
        sent = 0
        out: list[tuple[int, bytes]] = []
        drops = dict.fromkeys(before, 0)
        for first in range(0, len(frames), self.BATCH):
            start = time.monotonic()
            for i, frame in enumerate(frames[first:first + self.BATCH]):
                delay = start + i / self.RATE_PPS - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                try:
                    self.dataplane.send(0, 1, frame)
                    sent += 1
                except OSError:
                    pass  # the kernel refuses it (e.g. a runt): it never reaches the switch
            deadline = time.monotonic() + 30
            while True:
                self.drain(out, 0.2)
                now = self.all_drops()
                drops = {k: now[k] - before[k] for k in now}
                if len(out) + sum(drops.values()) >= sent:
                    break
                if time.monotonic() > deadline:
                    self.fail(f"frames {first}..{first + self.BATCH - 1}: after 30 s, "
                              f"{sent - len(out) - sum(drops.values())} of {sent} sent are neither "
                              f"forwarded nor counted (drops {drops})")
        self.drain(out, 1.0)
        forwarded = len(out)
        print(f"\n  sent {sent} of {len(frames)}, forwarded {forwarded}, dropped {sum(drops.values())}: "
              + ", ".join(f"{k} {v}" for k, v in drops.items() if v))

        # Every frame is accounted for, exactly.
        self.assertEqual(forwarded + sum(drops.values()), sent, f"drops {drops}")
        # Every forwarded frame is well formed: IPv4, a header checksum that
        # verifies, routed (the switch's MAC as source), TTL at least 1.
        for port, raw in out:
            pkt = Ether(raw)
            self.assertIn(IP, pkt, f"non-IPv4 frame forwarded on port {port}: {raw[:40].hex()}")
            self.assertTrue(ipv4_checksum_ok(pkt), f"bad IPv4 checksum forwarded: {raw[:40].hex()}")
            self.assertEqual(pkt[Ether].src, SWITCH_MAC)
            self.assertGreaterEqual(pkt[IP].ttl, 1)

        # The corpus reaches every drop reason it is made for.
        for reason in ("no_route", "ttl", "ipv4_malformed", "bwn_malformed", "not_ipv4", "ipv4_checksum"):
            self.assertGreater(drops[reason], 0, f"no frame was dropped for {reason}")
        self.assertGreater(forwarded, 100)
        # Alive, and a well-formed flow is stamped as the arithmetic says.
        self.settle()
        pkt = bwn_packet(1, 2, sport=48000)
        self.dataplane.send(0, 1, bytes(pkt))
        res = self.dataplane.poll(device_number=0, port_number=2, timeout=3)
        self.assertNotIsInstance(res, self.dataplane.PollFailure, "the switch no longer forwards")
        good = Ether(res.packet)
        h = BwnHeader.unpack(bytes(good[BWN])[:24])
        self.assertEqual(h.hop_count, 1)
        self.assertEqual(h.narrow_kbps, round(self.CAPACITY_BPS / 1000))
        self.assertEqual(h.ebn_code, dm.expected_ebn_code(self.CAPACITY_BPS / 1000, 1))
        self.assertTrue(ipv4_checksum_ok(good))
        self.assertEqual(good[UDP].chksum, 0)
        self.assertEqual(good[IP].dst, HOST_IP[2])
