"""ECN on the transport (RFC 3168 sec. 6.1): the handshake's offer and answer, the
receiver's ECN-Echo until CWR, the sender's one reduction per window of data, and
the socket plumbing that sends ECT(0) and reads the CE mark."""
from __future__ import annotations

import socket

import pytest

from hosts.cc.base import CcState
from hosts.cc.newreno import NewReno
from hosts.cc.reno import Reno
from hosts.sim.channel import LinkModel, Simulation
from hosts.transport.loop import ECN_CE, IP_RECVTOS, TOS_CMSG_SPACE, is_ce, set_ect
from hosts.transport.sender import SenderConfig
from hosts.transport.source import PatternSource
from hosts.transport.wire import BWN_HEADER_LEN, DATA_VK, F_ACK, F_CWR, F_DATA, F_ECE, F_RETX, F_SYN

FLAGS_AT = BWN_HEADER_LEN + 1


def flags_of(pkt: bytes) -> int:
    return pkt[FLAGS_AT]


def is_new_data(pkt: bytes) -> bool:
    return pkt[0] == DATA_VK and flags_of(pkt) & F_DATA and not flags_of(pkt) & F_RETX


class MarkAfter:
    """Mark the first `count` new data packets sent at or after each of `times_us`."""

    def __init__(self, *times_us: int, count: int = 1) -> None:
        self.times = list(times_us)
        self.count = count
        self.left = 0

    def __call__(self, now_us: int, pkt: bytes) -> bool:
        if self.times and now_us >= self.times[0]:
            self.times.pop(0)
            self.left = self.count
        if self.left and is_new_data(pkt):
            self.left -= 1
            return True
        return False


def run(marks: MarkAfter, ecn: bool = True, cc=None, until_us: int = 3_000_000):
    # A 64 KiB receive window (46 segments) over a 34-segment BDP: a short standing
    # queue, no loss, an RTT near 27 ms.
    sim = Simulation(LinkModel(delay_us=10_000, rate_bps=20e6, queue_packets=1000,
                               mark_ce_if=marks), LinkModel(delay_us=10_000), window_bytes=64 * 1024)
    sim.keep_log = True
    sender = sim.add_flow(cc or NewReno(), PatternSource(None, 1412),
                          config=SenderConfig(ecn=ecn, duration_us=until_us))
    reductions: list[tuple[int, float, float, float]] = []     # (t, flight before, cwnd, ssthresh)
    on_ecn = sender.cc.on_ecn

    def spy(st: CcState) -> None:
        flight = st.flight_segments
        on_ecn(st)
        reductions.append((st.now_us, flight, st.cwnd, st.ssthresh))
    sender.cc.on_ecn = spy                                      # type: ignore[method-assign]
    sim.run(until_us=until_us)
    return sim, sender, reductions


def test_the_handshake_offers_and_accepts_ecn():
    sim, sender, _ = run(MarkAfter(), until_us=200_000)
    syn = next(p for _, d, p in sim.sent_log if d == "fwd" and flags_of(p) & F_SYN)
    syn_ack = next(p for _, d, p in sim.sent_log if d == "rev" and flags_of(p) & F_SYN)
    assert flags_of(syn) & (F_ECE | F_CWR) == F_ECE | F_CWR
    assert flags_of(syn_ack) & (F_SYN | F_ACK | F_ECE) == F_SYN | F_ACK | F_ECE
    assert sender.ecn and sender.summary(200_000)["ecn"] is True


def test_without_the_option_the_syn_offers_nothing_and_marks_are_not_made():
    """A sender that did not offer ECN is not ECN-capable: the network does not mark
    its packets (a marking queue drops them instead), the receiver echoes nothing."""
    sim, sender, reductions = run(MarkAfter(300_000), ecn=False)
    syn = next(p for _, d, p in sim.sent_log if d == "fwd" and flags_of(p) & F_SYN)
    syn_ack = next(p for _, d, p in sim.sent_log if d == "rev" and flags_of(p) & F_SYN)
    assert not flags_of(syn) & (F_ECE | F_CWR) and not flags_of(syn_ack) & F_ECE
    assert not sender.ecn and sim.forward.stats.ce_marked == 0 and reductions == []


def test_a_sender_whose_receiver_does_not_accept_stays_without_ecn():
    """RFC 3168 sec. 6.1.1: without ECE on the SYN|ACK the flow is not ECN-capable."""
    def strip_ece(pkt: bytes, now_us: int) -> bytes:
        out = bytearray(pkt)
        if out[FLAGS_AT] & F_SYN:
            out[FLAGS_AT] &= ~F_ECE & 0xFF
        return bytes(out)
    sim = Simulation(LinkModel(delay_us=10_000, rate_bps=20e6, mark_ce_if=MarkAfter(100_000)),
                     LinkModel(delay_us=10_000), reverse_stamp=strip_ece)
    sender = sim.add_flow(NewReno(), PatternSource(None, 1412),
                          config=SenderConfig(ecn=True, duration_us=500_000))
    sim.run(until_us=500_000)
    assert not sender.ecn and sim.forward.stats.ce_marked == 0 and sender.ecn_reductions == 0


def test_a_receiver_that_was_not_offered_ecn_does_not_accept_it():
    from hosts.transport.receiver import Receiver
    from hosts.transport.wire import pack_data_headers, HEADERS_LEN
    sent: list[bytes] = []
    rx = Receiver(lambda view, addr: sent.append(bytes(view)) or True, lambda addr, fid: None)
    buf = bytearray(HEADERS_LEN)
    pack_data_headers(buf, F_SYN | F_ECE, 7, 0, 1)               # ECE alone is no offer
    rx.on_datagram(bytes(buf), ("10.0.0.1", 1), 10)
    assert flags_of(sent[-1]) & F_SYN and not flags_of(sent[-1]) & F_ECE


def test_one_mark_halves_the_window_once_without_a_retransmission():
    """RFC 3168 sec. 6.1.2: ssthresh = max(FlightSize / 2, 2), cwnd = ssthresh; the
    next new data segment carries CWR, and the receiver then stops echoing."""
    sim, sender, reductions = run(MarkAfter(400_000))
    assert sim.forward.stats.ce_marked == 1
    assert len(reductions) == 1 and sender.ecn_reductions == 1
    t, flight, cwnd, ssthresh = reductions[0]
    assert flight > 8 and ssthresh == pytest.approx(flight / 2) and cwnd == ssthresh
    assert sender.retransmits == 0 and sender.fast_recoveries == 0 and sender.timeouts == 0
    cwr = [(at, p) for at, d, p in sim.sent_log if d == "fwd" and flags_of(p) & F_CWR
           and not flags_of(p) & F_SYN]
    assert len(cwr) == 1 and cwr[0][0] >= t and is_new_data(cwr[0][1])
    echoes = [at for at, d, p in sim.sent_log if d == "rev" and flags_of(p) & F_ECE
              and not flags_of(p) & F_SYN]
    # ECE from the marked segment's ACK until the CWR segment arrives: about one RTT;
    # the ACKs after it carry none.
    assert echoes and echoes[-1] - echoes[0] <= 40_000
    assert all(at < cwr[0][0] + 40_000 for at in echoes)
    assert any(at > echoes[-1] and not flags_of(p) & F_ECE for at, d, p in sim.sent_log if d == "rev")
    assert sender.ecn_echoes == len(echoes)
    assert sim.receiver.stats.ce_segments == 1


def test_marks_within_one_window_reduce_once_marks_a_window_later_again():
    sim, sender, reductions = run(MarkAfter(400_000, count=5))
    assert sim.forward.stats.ce_marked == 5 and len(reductions) == 1
    sim, sender, reductions = run(MarkAfter(400_000, 1_000_000))
    assert len(reductions) == 2 and reductions[1][0] - reductions[0][0] > 500_000
    assert reductions[1][1] > reductions[0][2]        # the window had grown again


class LossThenMark:
    """Drop the first new data packet sent at or after `t_us` and mark the `nth` one
    after it: both before the loss is detected, in one window."""

    def __init__(self, t_us: int, nth: int = 5) -> None:
        self.t_us, self.nth, self.seen = t_us, nth, -1

    def drop_if(self, now_us: int, pkt: bytes) -> bool:
        if now_us >= self.t_us and is_new_data(pkt) and self.seen < self.nth:
            self.seen += 1
            return self.seen == 0
        return False

    def mark_ce_if(self, now_us: int, pkt: bytes) -> bool:
        return self.seen == self.nth and is_new_data(pkt) and not getattr(self, "marked", False) \
            and not setattr(self, "marked", True)


@pytest.mark.parametrize("sack", [True, False])
def test_a_loss_and_a_mark_in_one_window_cut_it_once(sack):
    """The loss's fast recovery cuts the window; the mark of the same window then cuts
    nothing more: its ECN-Echoes arrive in recovery, and the CWR the sender sends once
    recovery starts ends them (RFC 3168 sec. 6.1.2: once per window of data)."""
    plan = LossThenMark(400_000)
    sim = Simulation(LinkModel(delay_us=10_000, rate_bps=20e6, queue_packets=1000, drop_if=plan.drop_if,
                               mark_ce_if=plan.mark_ce_if), LinkModel(delay_us=10_000), window_bytes=64 * 1024)
    sim.keep_log = True
    sender = sim.add_flow(NewReno(), PatternSource(None, 1412),
                          config=SenderConfig(ecn=True, sack=sack, duration_us=3_000_000))
    sim.run(until_us=3_000_000)
    assert sim.forward.stats.ce_marked == 1 and sim.forward.stats.dropped_index == 1
    assert sender.fast_recoveries == 1 and sender.timeouts == 0
    assert sender.ecn_echoes > 0 and sender.ecn_reductions == 0
    cwr = [p for _, d, p in sim.sent_log if d == "fwd" and flags_of(p) & F_CWR and not flags_of(p) & F_SYN]
    assert len(cwr) == 1


def test_a_timeout_answers_the_marks_sent_before_it():
    """Every ACK is lost for 0.6 s just after a packet was marked: the timer fires and
    cuts the window to one segment; the marks of the data sent before it cut nothing
    more (the ECN-Echoes that arrive afterwards are for that data, and the CWR of the
    first new data after the timeout ends them)."""
    t_us = 400_000
    sim = Simulation(LinkModel(delay_us=10_000, rate_bps=20e6, queue_packets=1000,
                               mark_ce_if=MarkAfter(t_us - 15_000)),
                     LinkModel(delay_us=10_000, drop_if=lambda now, pkt: t_us <= now < t_us + 600_000),
                     window_bytes=64 * 1024)
    sim.keep_log = True
    sender = sim.add_flow(NewReno(), PatternSource(None, 1412), config=SenderConfig(ecn=True, duration_us=3_000_000))
    sim.run(until_us=3_000_000)
    assert sim.forward.stats.ce_marked == 1 and sender.timeouts >= 1
    assert sender.ecn_echoes > 0 and sender.ecn_reductions == 0


def test_reno_reacts_to_ecn_as_newreno_does():
    _, sender, reductions = run(MarkAfter(400_000), cc=Reno())
    assert len(reductions) == 1 and sender.retransmits == 0
    assert reductions[0][2] == pytest.approx(reductions[0][1] / 2)


def test_on_ecn_sets_ssthresh_from_the_flight_and_cwnd_to_it():
    st = CcState(mss_bytes=1000, cwnd=30.0, bytes_in_flight=24_000)
    NewReno().on_ecn(st)
    assert (st.ssthresh, st.cwnd) == (12.0, 12.0)
    st = CcState(mss_bytes=1000, cwnd=3.0, bytes_in_flight=3_000)
    NewReno().on_ecn(st)
    assert (st.ssthresh, st.cwnd) == (2.0, 2.0)                # never below 2 segments
    st = CcState(mss_bytes=1000, cwnd=1.0, bytes_in_flight=10_000)   # after a timeout
    NewReno().on_ecn(st)
    assert (st.ssthresh, st.cwnd) == (5.0, 1.0)                # never above the cwnd it had


def test_the_sockets_send_ect0_and_read_the_ce_mark():
    """On loopback: set_ect makes a socket's datagrams ECT(0); the receiving side's
    IP_RECVTOS ancillary data says whether a datagram arrived CE-marked."""
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        rx.bind(("127.0.0.1", 0))
        rx.setsockopt(socket.IPPROTO_IP, IP_RECVTOS, 1)
        rx.settimeout(5)
        seen = []
        for tos in (None, ECN_CE):
            if tos is None:
                set_ect(tx)
            else:
                tx.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
            tx.sendto(b"x", rx.getsockname())
            buf = bytearray(16)
            _n, cmsgs, _flags, _addr = rx.recvmsg_into([buf], TOS_CMSG_SPACE)
            seen.append(([c[2][0] & 3 for c in cmsgs if c[1] == socket.IP_TOS], is_ce(cmsgs)))
        assert seen == [([0b10], False), ([0b11], True)]      # ECT(0), CE (RFC 3168 sec. 5)
    finally:
        rx.close()
        tx.close()
