"""PTF tests of XCP's and RCP's routers (p4src/v1model/include/control/xcp.p4,
rcp.p4) against their reference model, controller/xr_math.py, bit for bit.

Each test reads the figures of the interval the switch closed (its registers, over
Thrift) and recomputes the close with the model from the same inputs (T, y, Q, the
packets' terms); it then checks every packet's feedback or rate against what the
model gives for the state the switch holds."""
from __future__ import annotations


import ptf.testutils as tu
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from base import HOST_IP, HOST_MAC, SWITCH2_MAC, SWITCH_MAC, BwnTest, param, udp_packet
from bwn.protocol import dataplane_math as dm
from bwn.protocol.scapy_layer import BWN, XR
from bwn.protocol.wire import BWN_UDP_PORT, FLAG_XR, XR_FEEDBACK_UNSET, XR_RATE_UNSET
from controller import entries as ent
from controller import xr_math as xm
from controller.bmv2 import RegisterAccess

XCP_REGISTERS = ("interval_end", "interval_start", "rx_mark", "sum_a", "sum_b", "sum_s", "queue_min",
                 "d_us", "log_d", "log_xi_p", "log_xi_n", "phi_bytes", "shuffle_bytes", "closed_us",
                 "closed_bytes", "closed_queue", "intervals")
RCP_REGISTERS = ("interval_end", "interval_start", "rx_mark", "rate_kbps", "d0_us", "closed_us",
                 "closed_bytes", "closed_queue", "intervals")
FRAME_BYTES = 1000


def s32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x >= 1 << 31 else x


def xr_packet(src_port: int, dst_port: int, sport: int, *, rtt_us: int, cwnd_bytes: int = 0,
              feedback_bytes: int = XR_FEEDBACK_UNSET, rate_kbps: int = XR_RATE_UNSET,
              size: int = FRAME_BYTES) -> bytes:
    """A BWN DATA frame with the XR header of an XCP (cwnd_bytes != 0) or RCP sender."""
    pkt = (Ether(src=HOST_MAC[src_port], dst=SWITCH_MAC)
           / IP(src=HOST_IP[src_port], dst=HOST_IP[dst_port], ttl=64)
           / UDP(sport=sport, dport=BWN_UDP_PORT) / BWN(flags=FLAG_XR)
           / XR(rtt_us=rtt_us, cwnd_bytes=cwnd_bytes, feedback_bytes=feedback_bytes, rate_kbps=rate_kbps))
    return bytes(pkt / (b"\x00" * (size - len(pkt))))


class XrTest(BwnTest):
    """Clears XCP's and RCP's per-port registers on the switches the test uses
    before it (P4Runtime's delete_all leaves registers as they are)."""

    SWITCHES: tuple[int, ...] = (1,)

    def setUp(self) -> None:
        if param("target", "bmv2") == "ebpf":   # before connecting: nothing to close
            self.skipTest("not on ebpf: XCP's and RCP's routers are the v1model program's only")
        super().setUp()
        try:
            if 2 in self.SWITCHES:
                assert self.sw2 is not None     # connected: its program is loaded
            for sw in self.SWITCHES:
                regs = self.registers(sw)
                try:
                    for name in XCP_REGISTERS:
                        regs.reset(f"BwnEgress.xcp_{name}")
                    for name in RCP_REGISTERS:
                        regs.reset(f"BwnEgress.rcp_{name}")
                finally:
                    regs.close()
        except BaseException:
            super().tearDown()
            raise

    def tearDown(self) -> None:
        try:
            for sw, port in ((1, 2), (1, 3), (1, int(param("uplink_port"))), (2, 2)):
                if sw in self.SWITCHES:
                    self.reset_queue(port, sw)
        finally:
            super().tearDown()

    @staticmethod
    def registers(sw: int) -> RegisterAccess:
        return RegisterAccess(int(param("thrift_port" if sw == 1 else "thrift_port2")))

    def read_port(self, sw: int, prefix: str, port: int) -> dict[str, int]:
        names = XCP_REGISTERS if prefix == "xcp" else RCP_REGISTERS
        regs = self.registers(sw)
        try:
            return {n: regs.read(f"BwnEgress.{prefix}_{n}", port) for n in names}
        finally:
            regs.close()

    def cap_log7(self, cap_bps: float) -> int:
        return dm.PortCapacity.from_bps(cap_bps, self.window_cfg.window_us).cap_log7

    def cap_kbps(self, cap_bps: float) -> int:
        return dm.PortCapacity.from_bps(cap_bps, self.window_cfg.window_us).cap_kbps

    def receive_xr(self, port: int, count: int, timeout_s: float = 1.0, others: int = 0) -> list[Ether]:
        """The `count` XR packets that arrive on `port`, after `others` packets without XR."""
        out = self.collect(port, timeout_s)
        self.assertEqual(len(out), count + others, f"sent {count} XR and {others} other packets, "
                                                   f"{len(out)} arrived")
        self.assertTrue(all(XR not in p for p in out[:others]) and all(XR in p for p in out[others:]))
        return out[others:]

    def drain(self, port: int) -> list[Ether]:
        """What has arrived on `port` so far, without waiting for more."""
        got = []
        while True:
            res = self.dataplane.poll(device_number=0, port_number=port, timeout=0.001)
            if isinstance(res, self.dataplane.PollFailure):
                return got
            got.append(Ether(res.packet))

    # -- XCP ----------------------------------------------------------------------------
    def check_xcp_close(self, reg: dict[str, int], cfg: xm.XcpConfig, cap_bps: float, rtt_us: int,
                        cwnd_bytes: int) -> xm.XcpClose:
        """The switch's first close recomputed by the model from its inputs: T, y and Q
        as the switch recorded them, and the sums of the y / FRAME_BYTES identical
        packets of the interval."""
        self.assertEqual(reg["intervals"], 1, f"expected one closed interval: {reg}")
        y, t_us = reg["closed_bytes"], reg["closed_us"]
        self.assertEqual(y % FRAME_BYTES, 0, "y counts whole frames of this test")
        n = y // FRAME_BYTES
        a, b, _, _ = xm.xcp_packet_terms(xm.log7(rtt_us), xm.log7(cwnd_bytes), xm.log7(FRAME_BYTES),
                                         xm.LOG7_ZERO, xm.LOG7_ZERO)
        port = xm.XcpPort(interval_start=0, rx_mark=0, sum_a=n * a, sum_b=n * b, sum_s=n * FRAME_BYTES,
                          queue_min=reg["closed_queue"])
        close = xm.xcp_close(port, cfg, t_us, y, self.cap_log7(cap_bps))
        self.assertEqual(s32(reg["phi_bytes"]), xm.clamp_int32(close.phi), "phi (eq. 1)")
        self.assertEqual(reg["shuffle_bytes"], min(close.h, xm.INT32_MAX), "h (eq. 2)")
        self.assertEqual(reg["d_us"], close.d_us, "control interval d")
        self.assertEqual(s32(reg["log_xi_p"]), close.log_xi_p, "xi_p")
        self.assertEqual(s32(reg["log_xi_n"]), close.log_xi_n, "xi_n")
        return close

    @staticmethod
    def xcp_feedback(reg: dict[str, int], rtt_us: int, cwnd_bytes: int) -> int:
        return xm.xcp_feedback(s32(reg["log_xi_p"]), s32(reg["log_xi_n"]), rtt_us, cwnd_bytes, FRAME_BYTES)


XCP_RTT_US = 1_500_000          # the interval after the first close lasts about 1.5 s
XCP_CWND_BYTES = 20_000
XCP_CFG = xm.XcpConfig(d_init_us=50_000)
# Probes at the end of a burst (still in the second interval): (rtt, cwnd, the
# sender's H_feedback). Other RTTs and windows; a sender's smaller wish is kept.
XCP_PROBES = ((500_000, 5_000, XR_FEEDBACK_UNSET), (2_000_000, 60_000, XR_FEEDBACK_UNSET),
              (XCP_RTT_US, XCP_CWND_BYTES, 1), (XCP_RTT_US, XCP_CWND_BYTES, -(2**31)))


def xcp_burst(dst_port: int, count: int, sport: int) -> list[bytes]:
    return ([xr_packet(1, dst_port, sport, rtt_us=XCP_RTT_US, cwnd_bytes=XCP_CWND_BYTES) for _ in range(count)]
            + [xr_packet(1, dst_port, sport + 1, rtt_us=r, cwnd_bytes=c, feedback_bytes=w) for r, c, w in XCP_PROBES])


class XcpFeedbackTest(XrTest):
    """XCP (Katabi, Handley, Rohrs, sec. 3.5) on an idle and on a congested port: the
    close computes phi = alpha d S - beta Q, h and xi_p, xi_n exactly as the model,
    and every packet's H_feedback is the model's p - n for the interval in force (0
    before the first close): positive with spare bandwidth, negative under overload;
    a sender's smaller H_feedback is kept (the minimum)."""

    def run_case(self, port: int, cap_bps: float, load_pps: float,
                 queue_first: int = 0) -> tuple[xm.XcpClose, list[int]]:
        """`queue_first` UDP packets that are not XCP's first: the XCP packets meet a
        persistent queue (Q, eq. 1)."""
        for _ in range(queue_first):
            self.dataplane.send(0, 1, bytes(udp_packet(1, port)))
        frames = xcp_burst(port, int(load_pps * 0.1), 44000)   # 100 ms: the 50 ms first interval closes
        self.send_paced(1, frames, load_pps)
        out = self.receive_xr(port, len(frames), others=queue_first)
        reg = self.read_port(1, "xcp", port)
        close = self.check_xcp_close(reg, XCP_CFG, cap_bps, XCP_RTT_US, XCP_CWND_BYTES)
        fb = [p[XR].feedback_bytes for p in out]
        n_first = reg["closed_bytes"] // FRAME_BYTES       # the first interval's packets
        self.assertEqual(fb[:n_first], [0] * n_first, "no feedback before the first close (xi = 0)")
        expected = self.xcp_feedback(reg, XCP_RTT_US, XCP_CWND_BYTES)
        probes = len(XCP_PROBES)
        self.assertEqual(fb[n_first:-probes], [expected] * (len(fb) - n_first - probes),
                         "p - n of the interval in force")
        self.assertEqual(fb[-probes:], [min(w, self.xcp_feedback(reg, r, c)) for r, c, w in XCP_PROBES])
        print(f"\n  C {cap_bps / 1e6:g} Mb/s, {load_pps:g} pps: T {reg['closed_us']} us, y {reg['closed_bytes']} B, "
              f"Q {reg['closed_queue']}, d {reg['d_us']} us, phi {close.phi} B, h {close.h} B, "
              f"feedback {expected} B/packet")
        return close, fb[n_first:-probes]

    def runTest(self) -> None:
        self.add_hosts((1, 2, 3))
        self.set_capacity(2, 100e6)           # idle: 1.6 Mb/s offered on 100 Mb/s, no queue
        self.set_capacity(3, 1e6)             # congested: 4 Mb/s offered on 1 Mb/s, 125 packets/s
        self.set_queue(3, 125, 1000)
        self.sw1.sw.insert([ent.xcp_port(2, XCP_CFG), ent.xcp_port(3, XCP_CFG)])
        close, fb = self.run_case(2, 100e6, 200)
        self.assertGreater(close.phi, 0)
        self.assertTrue(fb and all(f > 0 for f in fb), fb)
        close, fb = self.run_case(3, 1e6, 500, queue_first=30)
        self.assertLess(close.phi, 0)
        self.assertGreater(close.t3, 0, "the persistent queue counts (beta Q)")
        self.assertTrue(fb and all(f < 0 for f in fb), fb)


class XcpPathMinimumTest(XrTest):
    """sw1 -> sw2, XCP on both: the receiver sees the smaller of the two switches'
    feedback (XCP sec. 3.4: a router replaces H_feedback only with a smaller value):
    a congested first hop's negative feedback is not overwritten by an idle second
    hop's positive one, and a sender's still smaller wish survives both."""

    SWITCHES = (1, 2)

    def runTest(self) -> None:
        uplink, far = int(param("uplink_port")), int(param("sw2_port"))
        self.sw1.sw.insert(ent.route(f"{HOST_IP[far]}/32", uplink, SWITCH2_MAC, SWITCH_MAC))
        self.sw2.sw.insert(ent.route(f"{HOST_IP[far]}/32", 2, HOST_MAC[far], SWITCH2_MAC))
        self.set_capacity(uplink, 1e6)
        self.set_capacity(2, 100e6, sw=self.sw2)
        self.set_queue(uplink, 125, 1000)
        self.sw1.sw.insert([ent.xcp_port(uplink, XCP_CFG)])
        self.sw2.sw.insert([ent.xcp_port(2, XCP_CFG)])
        frames = xcp_burst(far, 50, 44100)
        self.send_paced(1, frames, 500)
        out = self.receive_xr(far, len(frames))
        r1, r2 = self.read_port(1, "xcp", uplink), self.read_port(2, "xcp", 2)
        self.check_xcp_close(r1, XCP_CFG, 1e6, XCP_RTT_US, XCP_CWND_BYTES)
        self.check_xcp_close(r2, XCP_CFG, 100e6, XCP_RTT_US, XCP_CWND_BYTES)
        f1 = self.xcp_feedback(r1, XCP_RTT_US, XCP_CWND_BYTES)
        f2 = self.xcp_feedback(r2, XCP_RTT_US, XCP_CWND_BYTES)
        self.assertLess(f1, 0)
        self.assertGreater(f2, 0)
        got = [p[XR].feedback_bytes for p in out[-len(XCP_PROBES):]]
        self.assertEqual(got, [min(w, self.xcp_feedback(r1, r, c), self.xcp_feedback(r2, r, c))
                               for r, c, w in XCP_PROBES])
        self.assertEqual(got[2], self.xcp_feedback(r1, XCP_RTT_US, XCP_CWND_BYTES), "sw1's, not sw2's")
        print(f"\n  sw1 (congested) {f1} B, sw2 (idle) {f2} B: the receiver sees {got[2]} B")


# -- RCP ----------------------------------------------------------------------------------
RCP_RTT_US = 100_000


class RcpCloseAndPathMinimumTest(XrTest):
    """RCP (Dukkipati, McKeown et al.) on sw1 -> sw2: R starts at each port's
    capacity; the first close computes R(t) = R [1 + (T/d0)(alpha (C - y/T) -
    beta q/d0)/C] exactly as the model, falling on the overloaded first hop and
    staying at C on the idle second; every packet carries the smaller of the two
    switches' rates, or the sender's if smaller (R_p, the path minimum)."""

    SWITCHES = (1, 2)

    def runTest(self) -> None:
        uplink, far = int(param("uplink_port")), int(param("sw2_port"))
        self.sw1.sw.insert(ent.route(f"{HOST_IP[far]}/32", uplink, SWITCH2_MAC, SWITCH_MAC))
        self.sw2.sw.insert(ent.route(f"{HOST_IP[far]}/32", 2, HOST_MAC[far], SWITCH2_MAC))
        cap1, cap2 = 2e6, 50e6
        self.set_capacity(uplink, cap1)
        self.set_capacity(2, cap2, sw=self.sw2)
        self.set_queue(uplink, 400, 1000)     # a queue builds (the q term) and sw2 sees 3.2 Mb/s
        cfg = xm.RcpConfig()
        rtt_us = 150_000
        self.sw1.sw.insert([ent.rcp_port(uplink, cfg)])
        self.sw2.sw.insert([ent.rcp_port(2, cfg)])
        # 4 Mb/s for 170 ms on the 2 Mb/s first hop: one close (after d0 = 150 ms) on each switch.
        wishes = (XR_RATE_UNSET, 100)
        frames = ([xr_packet(1, far, 45000, rtt_us=rtt_us) for _ in range(83)]
                  + [xr_packet(1, far, 45001, rtt_us=rtt_us, rate_kbps=w) for w in wishes])
        self.send_paced(1, frames, 500)
        out = self.receive_xr(far, len(frames))
        r1, r2 = self.read_port(1, "rcp", uplink), self.read_port(2, "rcp", 2)
        closes = []
        for reg, cap in ((r1, cap1), (r2, cap2)):
            self.assertEqual(reg["intervals"], 1, f"one close expected: {reg}")
            self.assertEqual(reg["d0_us"], rtt_us)
            port = xm.RcpPort(interval_start=0, rx_mark=0, rate_kbps=self.cap_kbps(cap), d0_us=reg["d0_us"])
            close = xm.rcp_close(port, cfg, reg["closed_us"], reg["closed_bytes"], reg["closed_queue"],
                                 self.cap_kbps(cap), self.cap_log7(cap))
            self.assertEqual(reg["rate_kbps"], close.rate_kbps, f"R(t) of the close: {close}")
            closes.append(close)
        self.assertGreater(closes[0].queue, 0, "sw1's queue counts (beta q / d0)")
        self.assertLess(r1["rate_kbps"], 0.95 * self.cap_kbps(cap1), "the overloaded port's rate falls")
        self.assertEqual(r2["rate_kbps"], self.cap_kbps(cap2), "an idle port stays at its capacity")
        rates = [p[XR].rate_kbps for p in out]
        n_first = r1["closed_bytes"] // FRAME_BYTES
        self.assertEqual(rates[:n_first], [self.cap_kbps(cap1)] * n_first, "before the close: min(C1, C2)")
        self.assertEqual(rates[n_first:-2], [r1["rate_kbps"]] * (len(rates) - n_first - 2), "after: R1 < R2")
        self.assertEqual(rates[-2:], [r1["rate_kbps"], 100])
        print(f"\n  sw1: T {r1['closed_us']} us, y {r1['closed_bytes']} B, q {r1['closed_queue']}: "
              f"R1 {r1['rate_kbps']} kb/s (C1 {self.cap_kbps(cap1)}); R2 {r2['rate_kbps']} kb/s")


class RcpConvergesToFairShareTest(XrTest):
    """Closed loop: N = 4 flows each sending at the rate the switch stamps (RCP's
    senders) through a port of capacity C; R(t) falls from C toward C / N, the
    processor-sharing rate, where the spare-capacity term alpha (C - y/T) is 0."""

    CAP_BPS = 800e3
    FLOWS = 4
    STEPS = 30

    def runTest(self) -> None:
        self.add_hosts((1, 2))
        self.set_capacity(2, self.CAP_BPS)
        self.sw1.sw.insert([ent.rcp_port(2, xm.RcpConfig())])
        cap = self.cap_kbps(self.CAP_BPS)
        rate, history, sent = cap, [], 0
        for _ in range(self.STEPS):
            pps = self.FLOWS * rate * 1000 / (8 * FRAME_BYTES)
            n = max(1, round(pps * RCP_RTT_US / 1e6))
            frames = [xr_packet(1, 2, 46000 + (sent + i) % self.FLOWS, rtt_us=RCP_RTT_US) for i in range(n)]
            sent += n
            self.send_paced(1, frames, pps)
            out = self.drain(2)
            if out:
                rate = out[-1][XR].rate_kbps
            history.append(rate)
        self.collect(2, 0.3)
        fair = cap / self.FLOWS
        late = self.median(history[-8:])
        print(f"\n  C {cap} kb/s, N {self.FLOWS}: R by step {history}; late median {late:.0f} kb/s "
              f"(C/N {fair:.0f})")
        self.assertLess(min(history), 0.7 * cap, "R moved down from C")
        self.assertLess(abs(late - fair), 0.35 * fair, f"R {late:.0f} kb/s is not near C/N = {fair:.0f} kb/s")
