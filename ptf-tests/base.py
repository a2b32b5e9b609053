"""PTF base class: a P4Runtime session per switch, helpers, and auto-cleanup.

Every test starts from an empty switch (all entries deleted), gets the
dataplane's static lookup tables installed (the same entities the controller
installs: controller/entries.py), and leaves nothing behind: tearDown deletes
every entry it or the test wrote.
"""
from __future__ import annotations

import socket
import statistics
import time
from pathlib import Path
from typing import Iterable

import finsy as fy
import ptf
import ptf.testutils as tu
from ptf.base_tests import BaseTest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Ether

from controller import entries as ent
from controller.p4rt import SyncSwitch
from bwn.protocol.scapy_layer import BWN
from bwn.protocol.wire import BWN_UDP_PORT, BwnHeader

SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)  # root may exceed net.core.rmem_max

# Addresses used by the tests: hosts behind PTF ports.
SWITCH_MAC = "00:00:00:00:01:01"
SWITCH2_MAC = "00:00:00:00:02:02"
HOST_MAC = {1: "00:00:00:00:00:01", 2: "00:00:00:00:00:02", 3: "00:00:00:00:00:03",
            4: "00:00:00:00:00:04", 6: "00:00:00:00:00:06"}
HOST_IP = {1: "10.0.1.1", 2: "10.0.2.2", 3: "10.0.3.3", 4: "10.0.4.4", 6: "10.0.6.6"}


def param(name: str, default=None):
    return tu.test_params_get().get(name, default)


def bwn_packet(src_port: int = 1, dst_port: int = 2, sport: int = 40000, size: int = 0,
               payload: bytes = b"", **bwn_fields) -> Ether:
    """A BWN DATA packet from the host on PTF port `src_port` to the one on `dst_port`,
    carrying `payload` after the BWN header, padded to a `size`-byte frame when given."""
    pad = max(0, size - (14 + 20 + 8 + 24 + len(payload)))
    pkt = (Ether(src=HOST_MAC[src_port], dst=SWITCH_MAC)
           / IP(src=HOST_IP[src_port], dst=HOST_IP[dst_port], ttl=64, id=7)
           / UDP(sport=sport, dport=BWN_UDP_PORT) / BWN(**bwn_fields) / (payload + b"\x00" * pad))
    return Ether(bytes(pkt))  # lengths and checksums computed


def routed(pkt: Ether, dst_port: int, switch_mac: str = SWITCH_MAC, hops: int = 1) -> Ether:
    """What a packet looks like after `hops` routers: MACs rewritten, TTL and IPv4
    checksum updated, nothing else changed."""
    out = Ether(bytes(pkt))
    out[Ether].src = switch_mac
    out[Ether].dst = HOST_MAC[dst_port]
    out[IP].ttl -= hops
    del out[IP].chksum
    return Ether(bytes(out))


class BwnTest(BaseTest):
    """Connects to sw1 (and sw2 on demand) and cleans up after each test."""

    window_cfg = ent.WindowConfig(window_us=16_384, flow_window_us=131_072)
    MAX_CATCH_UP_S = 0.05

    def setUp(self) -> None:
        BaseTest.setUp(self)
        self.dataplane = ptf.dataplane_instance
        self._deepen_receive_buffers()
        self.dataplane.flush()
        self.p4info = Path(param("p4info"))
        self.p4blob = Path(param("p4blob"))
        self.sw1 = self.connect("sw1", param("grpc_addr"))
        self._sw2: SyncSwitch | None = None

    def _deepen_receive_buffers(self, size_bytes: int = 16 << 20) -> None:
        """PTF's port sockets keep the kernel's default receive buffer (~200 kB,
        about 230 frames): when PTF's reader thread falls behind on a loaded
        machine, the kernel drops what the switch sent. Give them 16 MB."""
        for port in getattr(self.dataplane, "ports", {}).values():
            sock = getattr(port, "socket", None)
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, size_bytes)

    def connect(self, name: str, addr: str) -> SyncSwitch:
        sw = SyncSwitch(name, addr, device_id=0, p4info=self.p4info, p4blob=self.p4blob)
        sw.delete_all()
        sw.modify(ent.window_config(self.window_cfg))
        sw.insert(ent.static_tables(self.window_cfg))
        return sw

    @property
    def sw2(self) -> SyncSwitch:
        if self._sw2 is None:
            self._sw2 = self.connect("sw2", param("grpc_addr2"))
        return self._sw2

    def tearDown(self) -> None:
        for sw in (self.sw1, self._sw2):
            if sw is not None:
                try:
                    sw.delete_all()
                finally:
                    sw.close()
        BaseTest.tearDown(self)

    # -- configuration helpers ------------------------------------------------------
    def add_hosts(self, ports: Iterable[int] = (1, 2, 3, 4), options: dict[int, ent.PortOptions] | None = None,
                  modify: bool = False) -> None:
        """Routes to the hosts behind `ports` (each route with its port's options)."""
        options = options or {}
        entries = [e for p in ports
                   for e in ent.route(f"{HOST_IP[p]}/32", p, HOST_MAC[p], SWITCH_MAC, options.get(p, ent.PortOptions()))]
        (self.sw1.modify if modify else self.sw1.insert)(entries)

    def set_capacity(self, port: int, capacity_bps: float, sw: SyncSwitch | None = None) -> None:
        (sw or self.sw1).insert([ent.port_capacity(port, capacity_bps, self.window_cfg)])

    def settle(self, windows: int = 2) -> None:
        """Let stale measurement windows from earlier tests expire.

        Two flow windows are the least that clears EBN's flow count: the switch
        rolls its windows only when a packet arrives, and a first packet in the
        flow window right after the port's last one hands that window's count
        on as `last` (N = max(current, last)). After one window of quiet that
        can still happen (the earlier test's last packet need not have been at
        its window's start); after two it cannot."""
        time.sleep(windows * self.window_cfg.flow_window_us / 1e6)

    def read_drops(self, reason: int) -> int:
        [entry] = self.sw1.read(fy.P4CounterEntry(ent.DROP_COUNTER, index=reason))
        return int(entry.data.packet_count)

    def settled_drops(self, reason: int, quiet_s: float = 0.5, timeout_s: float = 20.0) -> int:
        """The drop count once it has stopped changing for `quiet_s` (a switch on a
        loaded machine may still be working through what the test sent)."""
        deadline = time.monotonic() + timeout_s
        last = self.read_drops(reason)
        while time.monotonic() < deadline:
            time.sleep(quiet_s)
            now = self.read_drops(reason)
            if now == last:
                return now
            last = now
        return last

    # -- traffic helpers ---------------------------------------------------------
    def send_paced(self, port: int, frames: list[bytes], rate_pps: float) -> float:
        """Send raw frames at `rate_pps` (absolute schedule, so jitter does not
        accumulate); returns the achieved rate. When this process fell more than
        `MAX_CATCH_UP_S` behind (a loaded machine), the schedule slips instead of
        sending the backlog in one burst, which the kernel's per-CPU backlog
        (1000 frames) would drop before the switch saw it."""
        start = time.monotonic()
        for i, frame in enumerate(frames):
            due = start + i / rate_pps
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            elif delay < -self.MAX_CATCH_UP_S:
                start -= delay + self.MAX_CATCH_UP_S
            self.dataplane.send(0, port, frame)
        elapsed = time.monotonic() - start
        return (len(frames) - 1) / elapsed if elapsed > 0 else float("inf")

    def collect(self, port: int, timeout_s: float = 1.0) -> list[Ether]:
        """Every packet that arrives on `port` until none arrives for `timeout_s`;
        each must be well formed (`assert_well_formed`)."""
        got = []
        while True:
            res = self.dataplane.poll(device_number=0, port_number=port, timeout=timeout_s)
            if isinstance(res, self.dataplane.PollFailure):
                return got
            pkt = Ether(res.packet)
            self.assert_well_formed(pkt)
            got.append(pkt)

    def assert_well_formed(self, pkt: Ether) -> None:
        """What every packet a switch sends must be: a valid IPv4 header checksum,
        and for a BWN DATA packet it stamped, UDP checksum 0 (docs/wire-format.md)
        and the UDP length still the IP payload's (RFC 768; the stamp rewrites the
        field that holds both)."""
        if IP not in pkt:
            return
        self.assertTrue(ipv4_checksum_ok(pkt), f"bad IPv4 header checksum: {bytes(pkt)[:40].hex()}")
        if (UDP in pkt and pkt[UDP].dport == BWN_UDP_PORT and BWN in pkt
                and pkt[BWN].version == 1 and pkt[BWN].kind == 0 and pkt[BWN].hop_count > 0):
            self.assertEqual(pkt[UDP].chksum, 0, "a stamped packet kept a UDP checksum")
            self.assertEqual(pkt[UDP].len, pkt[IP].len - 4 * pkt[IP].ihl,
                             "a stamped packet's UDP length is not its IP payload's")

    def set_queue(self, port: int, rate_pps: float, depth_packets: int, sw: int = 1) -> None:
        """BMv2's egress queue of `port`: service rate and depth (Thrift)."""
        from controller.bmv2 import QueueControl
        q = QueueControl(int(param("thrift_port" if sw == 1 else "thrift_port2")))
        try:
            q.set_rate(port, rate_pps)
            q.set_depth(port, depth_packets)
        finally:
            q.close()

    def reset_queue(self, port: int, sw: int = 1) -> None:
        """Back to an unlimited, deep queue (as run_ptf.py starts the switches)."""
        from controller.bmv2 import QueueControl
        q = QueueControl(int(param("thrift_port" if sw == 1 else "thrift_port2")))
        try:
            q.set_rate(port, 1e9)
            q.set_depth(port, 10_000)
        finally:
            q.close()

    @staticmethod
    def median(values: list[float]) -> float:
        return statistics.median(values)

    @staticmethod
    def late_ebn_codes(out: list[Ether]) -> list[int]:
        """The EBN codes stamped on the second half of `out` (the first windows of
        a run still count the flows of the one before)."""
        return [BwnHeader.unpack(bytes(p[BWN])[:24]).ebn_code for p in out[len(out) // 2:]]


def ipv4_checksum_ok(pkt: Ether) -> bool:
    """The IPv4 header checksum of `pkt` is what Scapy computes afresh."""
    fresh = IP(bytes(pkt[IP]))
    del fresh.chksum
    return IP(bytes(fresh)).chksum == pkt[IP].chksum


def tcp_packet(src_port: int = 1, dst_port: int = 2) -> Ether:
    return Ether(bytes(Ether(src=HOST_MAC[src_port], dst=SWITCH_MAC)
                       / IP(src=HOST_IP[src_port], dst=HOST_IP[dst_port], ttl=64)
                       / TCP(sport=33000, dport=5201, flags="PA", seq=1000, ack=77)
                       / (b"tcp payload " * 8)))


def udp_packet(src_port: int = 1, dst_port: int = 2, dport: int = 5000) -> Ether:
    return Ether(bytes(Ether(src=HOST_MAC[src_port], dst=SWITCH_MAC)
                       / IP(src=HOST_IP[src_port], dst=HOST_IP[dst_port], ttl=64)
                       / UDP(sport=33001, dport=dport) / (b"udp payload " * 8)))
