"""SACK: the RFC 2018 option, the RFC 6675 scoreboard and loss recovery, the
handshake that turns it on, and the counters reported in the FIN|ACK.

The scoreboard is checked by hand against RFC 6675's definitions; the recovery
over the simulated channel (hosts.sim.channel) with chosen losses."""
from __future__ import annotations

from typing import Any, List, Optional, Tuple

import pytest

from hosts.cc.newreno import NewReno
from hosts.transport.reassembly import MemorySink, ReceiverFlow
from hosts.transport.sack import Scoreboard
from hosts.transport.sender import SenderConfig, SenderState
from hosts.sim.channel import LinkModel, Simulation
from hosts.transport.source import PatternSource, pattern_bytes
from hosts.transport.wire import (
    F_ACK,
    F_DATA,
    F_FIN,
    F_RETX,
    F_SYN,
    HEADERS_LEN,
    OPT_SACK,
    TransportHeader,
    encode_options,
)

MSS = 1000


def cfg(**kw: Any) -> SenderConfig:
    kw.setdefault("mss_bytes", MSS)
    return SenderConfig(**kw)


def fwd_index(seq: int) -> int:
    return 1 + seq // MSS   # forward packet number of a first transmission (SYN is 0)


def sent(sim: Simulation, direction: str) -> List[Tuple[int, TransportHeader]]:
    return [(t, TransportHeader.unpack(p)) for t, d, p in sim.sent_log if d == direction]


# -- the scoreboard (RFC 6675 sec. 4) -----------------------------------------------------------
def test_update_merges_clips_and_ignores_blocks_never_sent() -> None:
    sb = Scoreboard(MSS)
    assert sb.update([(3000, 4000), (5000, 6000)], 1000, 10_000) == 2000
    assert sb.update([(4000, 5000)], 1000, 10_000) == 1000         # fills the gap: merged
    assert sb.ranges == [(3000, 6000)]
    assert sb.update([(3000, 6000)], 1000, 10_000) == 0             # nothing new: no DupAck
    assert sb.update([(500, 2000)], 1000, 10_000) == 1000           # clipped at snd_una
    assert sb.update([(9000, 12_000)], 1000, 10_000) == 0           # beyond snd_max: ignored
    assert sb.ranges == [(1000, 2000), (3000, 6000)]
    sb.advance(3500)
    assert sb.ranges == [(3500, 6000)] and sb.sacked_bytes == 2500


def test_is_lost_by_bytes_and_by_segments() -> None:
    sb = Scoreboard(MSS)
    sb.update([(2000, 4000)], 0, 20_000)            # 2 segments SACKed above 0..2000
    assert not sb.is_lost(0, 0)                     # not more than 2 * SMSS
    sb.update([(5000, 5100)], 0, 20_000)            # a third, small, discontiguous one
    assert sb.is_lost(0, 0) and sb.is_lost(1999, 0) # 3 SACKed segments above
    assert not sb.is_lost(4000, 0)                  # only 1 above the hole 4000..5000
    sb2 = Scoreboard(MSS)
    sb2.update([(1000, 3001)], 0, 20_000)           # 2001 bytes > 2 * SMSS: 3 segments
    assert sb2.is_lost(0, 0)
    sb3 = Scoreboard(MSS)
    sb3.update([(1000, 3000)], 0, 20_000)           # exactly 2 * SMSS: not lost
    assert not sb3.is_lost(0, 0)


def test_pipe_counts_unsacked_not_lost_plus_retransmitted() -> None:
    # Segments 0..9 sent; 2 and 5 lost; 3,4 and 6..9 SACKed.
    sb = Scoreboard(MSS)
    sb.update([(3000, 5000), (6000, 10_000)], 0, 10_000)
    # Lost: unSACKed below the highest point with > 2 segments SACKed above -> 0,1,2,5.
    assert sb.lost_boundary(0) == 6000
    assert sb.pipe(0, 10_000, high_rxt=0) == 0
    # After retransmitting segment 0..1000 (HighRxt), it counts once.
    assert sb.pipe(0, 10_000, high_rxt=1000) == 1000
    # New data 10..11 sent: not lost, in pipe.
    assert sb.pipe(0, 12_000, high_rxt=1000) == 3000


def test_next_hole_and_rescue_candidates() -> None:
    sb = Scoreboard(MSS)
    sb.update([(3000, 5000), (6000, 10_000)], 0, 12_000)
    assert sb.next_lost_hole(0, 0) == (0, 3000)
    assert sb.next_lost_hole(0, 3000) == (5000, 6000)
    assert sb.next_lost_hole(0, 6000) is None        # above the highest SACK: not rule (1)
    assert sb.highest_unsacked(0, 12_000) == 11_999  # rule (4) must include it
    assert sb.hole_start(11_999, 0) == 10_000


# -- the handshake ------------------------------------------------------------------------
@pytest.mark.parametrize("sender_sack,receiver_sack", [(True, True), (False, True), (True, False)])
def test_sack_used_only_when_both_ends_agree(sender_sack: bool, receiver_sack: bool) -> None:
    fwd = LinkModel(delay_us=5_000, drop_indices={fwd_index(20 * MSS), fwd_index(25 * MSS)})
    sim = Simulation(fwd, LinkModel(delay_us=5_000), seed=1,
                     receiver_kw={"sack": receiver_sack})
    sim.keep_log = True
    s = sim.add_flow(NewReno(), PatternSource(60 * MSS, MSS), config=cfg(sack=sender_sack))
    sim.run(until_us=20_000_000)
    assert s.state is SenderState.DONE
    assert bytes(sim.sink_of(s).data) == pattern_bytes(0, 60 * MSS)
    agreed = sender_sack and receiver_sack
    assert s.sack is agreed and s.summary(sim.now_us)["sack"] is agreed
    syn = sent(sim, "fwd")[0][1]
    assert syn.flags & F_SYN and syn.options.sack_permitted is sender_sack
    syn_ack = sent(sim, "rev")[0][1]
    assert syn_ack.options.sack_permitted is agreed
    with_blocks = [h for _, h in sent(sim, "rev") if h.options.sack_blocks]
    assert bool(with_blocks) is agreed               # no SACK blocks unless agreed
    # Data segments never carry options: their frames are what the switches count.
    assert all(h.hdr_words == 9 for _, h in sent(sim, "fwd") if h.flags & F_DATA)


# -- the receiver's SACK blocks (RFC 2018 sec. 4) ------------------------------------------
def test_first_block_holds_the_triggering_segment_then_recent_ones() -> None:
    flow = ReceiverFlow(("x", 1), 1, MemorySink(), 1 << 20, 0, sack_ok=True)
    data = pattern_bytes(0, 20 * MSS)

    def seg(k: int) -> List[Tuple[int, int]]:
        flow.on_segment(k * MSS, memoryview(data[k * MSS:(k + 1) * MSS]), False)
        return flow.sack_blocks()

    assert seg(0) == []                                     # in order: no block
    assert seg(2) == [(2000, 3000)]
    assert seg(5) == [(5000, 6000), (2000, 3000)]
    assert seg(8) == [(8000, 9000), (5000, 6000), (2000, 3000)]
    assert seg(3) == [(2000, 4000), (8000, 9000), (5000, 6000)]   # merged, reported first
    assert seg(11) == [(11_000, 12_000), (2000, 4000), (8000, 9000), (5000, 6000)]
    assert seg(14)[0] == (14_000, 15_000) and len(flow.sack_blocks()) == 4  # at most 4
    assert seg(1) [0] != (2000, 4000)                       # advanced the ACK: not first
    assert flow.rcv_nxt == 4000 and all(a >= 4000 for a, _ in flow.sack_blocks())


def test_receiver_without_sack_sends_no_blocks() -> None:
    flow = ReceiverFlow(("x", 1), 1, MemorySink(), 1 << 20, 0, sack_ok=False)
    flow.on_segment(5 * MSS, memoryview(b"x" * MSS), False)
    assert flow.sack_blocks() == []


# -- RFC 6675 recovery ------------------------------------------------------------------------
def test_many_losses_in_one_window_recovered_in_one_rtt() -> None:
    lost = [30, 32, 34, 36, 38, 40]
    fwd = LinkModel(delay_us=10_000, drop_indices={fwd_index(k * MSS) for k in lost})
    sim = Simulation(fwd, LinkModel(delay_us=10_000), seed=1)
    sim.keep_log = True
    s = sim.add_flow(NewReno(), PatternSource(150 * MSS, MSS), config=cfg())
    sim.run(until_us=30_000_000)
    assert s.state is SenderState.DONE and s.sack
    assert bytes(sim.sink_of(s).data) == pattern_bytes(0, 150 * MSS)
    assert s.timeouts == 0 and s.fast_recoveries == 1
    retx = [(t, h.seq) for t, h in sent(sim, "fwd") if h.flags & F_RETX]
    assert [q for _, q in retx] == [k * MSS for k in lost]  # each hole once, in order
    assert retx[-1][0] - retx[0][0] < 25_000                # within about one RTT (20 ms)
    summ = s.summary(sim.now_us)
    assert summ["spurious_retransmits"] == 0 and summ["duplicate_segments"] == 0


def test_newreno_needs_an_rtt_per_hole_where_sack_does_not() -> None:
    lost = [30, 32, 34, 36]

    def retransmission_spread_us(sack: bool) -> int:
        fwd = LinkModel(delay_us=10_000, drop_indices={fwd_index(k * MSS) for k in lost})
        sim = Simulation(fwd, LinkModel(delay_us=10_000), seed=1)
        sim.keep_log = True
        s = sim.add_flow(NewReno(), PatternSource(150 * MSS, MSS), config=cfg(sack=sack))
        sim.run(until_us=30_000_000)
        assert s.state is SenderState.DONE and s.timeouts == 0
        times = [t for t, h in sent(sim, "fwd") if h.flags & F_RETX]
        assert len(times) == len(lost)
        return times[-1] - times[0]

    assert retransmission_spread_us(True) < 1_000                 # all holes at once
    assert retransmission_spread_us(False) >= 3 * 20_000           # one per 20 ms RTT


def test_timeout_resends_only_what_was_not_sacked() -> None:
    # A blackout on the forward path loses a burst (segments 160-169 at 20 Mb/s); the
    # ACKs of the later segments SACK everything else. Two of the retransmissions of
    # the burst (160, 165) are lost as well, which only a timeout repairs; the walk
    # after it resends 160, then 165, and nothing the receiver SACKed.
    n = 3000  # long enough that everything resent arrives before the stream ends
    lose_twice = {160 * MSS, 165 * MSS}

    def drop(t: int, pkt: bytes, seen: set) -> bool:
        h = TransportHeader.unpack(pkt)
        if h.flags & F_RETX and h.seq in lose_twice and h.seq not in seen:
            seen.add(h.seq)
            return True
        return 150_000 <= t < 152_000

    def run(sack: bool) -> Tuple[Any, Simulation]:
        seen: set = set()
        fwd = LinkModel(delay_us=10_000, rate_bps=20e6, drop_if=lambda t, p: drop(t, p, seen))
        sim = Simulation(fwd, LinkModel(delay_us=10_000), seed=1)
        sim.keep_log = True
        s = sim.add_flow(NewReno(), PatternSource(n * MSS, MSS), config=cfg(sack=sack))
        sim.run(until_us=30_000_000)
        assert s.state is SenderState.DONE and s.timeouts >= 1
        assert bytes(sim.sink_of(s).data) == pattern_bytes(0, n * MSS)
        return s, sim

    s, sim = run(True)
    assert s.timeouts == 1
    summ = s.summary(sim.now_us)
    assert summ["retransmits"] == sim.forward.stats.dropped_index  # each loss resent once
    assert summ["spurious_retransmits"] == 0           # nothing the receiver had was resent
    # Without SACK the same losses make go-back-N resend data the receiver holds.
    s2, sim2 = run(False)
    assert s2.summary(sim2.now_us)["spurious_retransmits"] > 0


def test_rescue_retransmission_repairs_a_lost_tail_without_timeout() -> None:
    # 40 segments; 30 and the last one (39) lost. After the fast retransmit of 30 no
    # new data exists and nothing is SACKed above 39, so rules (1)-(3) never pick it:
    # without rule (4) (one rescue per recovery, once HighACK > RescueRxt) only the
    # retransmission timer would.
    n = 40
    fwd = LinkModel(delay_us=10_000, drop_indices={fwd_index(30 * MSS), fwd_index(39 * MSS)})
    sim = Simulation(fwd, LinkModel(delay_us=10_000), seed=1)
    sim.keep_log = True
    s = sim.add_flow(NewReno(), PatternSource(n * MSS, MSS), config=cfg())
    sim.run(until_us=30_000_000)
    assert s.state is SenderState.DONE
    assert s.timeouts == 0 and s.rescue_retransmits == 1 and s.fast_recoveries == 1
    retx = [(t, h.seq) for t, h in sent(sim, "fwd") if h.flags & F_RETX and h.flags & F_DATA]
    assert [q for _, q in retx] == [30 * MSS, 39 * MSS]
    assert retx[1][0] - retx[0][0] == 20_000          # when the fast retransmit is ACKed


def test_sack_recovery_keeps_cwnd_at_ssthresh_no_inflation() -> None:
    seen: List[Tuple[str, float, float]] = []

    class Spy(NewReno):
        def on_dupack(self, st: Any, ack: Any) -> None:
            super().on_dupack(st, ack)
            if st.in_recovery:
                seen.append(("dup", st.cwnd, st.ssthresh))

        def on_enter_recovery(self, st: Any) -> None:
            super().on_enter_recovery(st)
            seen.append(("enter", st.cwnd, st.ssthresh))

    lost = [40, 45]
    fwd = LinkModel(delay_us=10_000, drop_indices={fwd_index(k * MSS) for k in lost})
    sim = Simulation(fwd, LinkModel(delay_us=10_000), seed=1)
    s = sim.add_flow(Spy(), PatternSource(120 * MSS, MSS), config=cfg())
    sim.run(until_us=30_000_000)
    assert s.state is SenderState.DONE and seen
    assert seen[0][0] == "enter" and seen[0][1] == seen[0][2]       # RFC 6675 4.2
    assert all(c == seen[0][1] for _, c, _ in seen)                # no inflation


@pytest.mark.parametrize("holes", [[10], [10, 30]])
def test_lying_receiver_reneges_and_the_sender_still_finishes(holes: List[int]) -> None:
    # The way back adds a SACK block for data the receiver does not have (forged),
    # so the walk after a timeout would skip it forever; the sender must notice,
    # once at each timeout (each hole here: two segments lost, repaired by one).
    def forge(pkt: bytes, now_us: int) -> Optional[bytes]:
        h = TransportHeader.unpack(pkt)
        if h.flags & (F_SYN | F_FIN) or not h.flags & F_ACK or h.ack >= 50 * MSS:
            return pkt
        lie = encode_options(sack_blocks=[(h.ack + MSS, h.ack + 3 * MSS)])
        forged = TransportHeader.with_options(lie, flags=h.flags, flow_id=h.flow_id,
                                              ack=h.ack, rwnd_bytes=h.rwnd_bytes,
                                              ts_val_us=h.ts_val_us, ts_ecr_us=h.ts_ecr_us)
        return pkt[:24] + forged.pack()

    lost = {fwd_index(k * MSS) for hole in holes for k in (hole, hole + 1)}
    fwd = LinkModel(delay_us=5_000, drop_indices=lost)
    sim = Simulation(fwd, LinkModel(delay_us=5_000), seed=1, reverse_stamp=forge)
    s = sim.add_flow(NewReno(), PatternSource(60 * MSS, MSS), config=cfg())
    sim.run(until_us=60_000_000)
    assert s.state is SenderState.DONE
    assert bytes(sim.sink_of(s).data) == pattern_bytes(0, 60 * MSS)
    assert s.sack_reneging == s.timeouts == len(holes)


def test_sack_block_options_fit_an_ack() -> None:
    opts = encode_options(sack_blocks=[(1, 2)] * 4)
    assert opts[2] == OPT_SACK and len(opts) == 68 and HEADERS_LEN + len(opts) == 128


# -- counters ---------------------------------------------------------------------------------
def test_duplicate_out_of_order_and_spurious_counters_reach_the_sender() -> None:
    # One packet duplicated by the network, one reordered behind two others, and
    # the receiver's counts arrive in the FIN|ACK (RCV_STATS).
    dup_at, late_at = fwd_index(10 * MSS), fwd_index(20 * MSS)
    count = {"n": 0}
    fwd = LinkModel(delay_us=10_000, rate_bps=8e6, reorder_extra_us=3_000)
    sim = Simulation(fwd, LinkModel(delay_us=10_000), seed=1)
    orig = sim.forward.send

    def send(pkt: bytes, now_us: int, ect: bool = False) -> None:
        i = count["n"]
        count["n"] += 1
        fwd.duplicate = 1.0 if i == dup_at else 0.0
        fwd.reorder = 1.0 if i == late_at else 0.0
        orig(pkt, now_us, ect)

    sim.forward.send = send  # type: ignore[assignment]
    s = sim.add_flow(NewReno(), PatternSource(40 * MSS, MSS), config=cfg())
    sim.run(until_us=20_000_000)
    summ = s.summary(sim.now_us)
    assert summ["status"] == "complete"
    assert summ["duplicate_segments"] == 1
    assert summ["out_of_order_segments"] == 2            # the two that overtook the late one
    assert summ["spurious_retransmits"] == 0 and summ["retransmits"] == 0
    assert summ["receiver_segments"] == 40 + 1 + 1       # 40 data, 1 copy, the FIN


# -- reordering, as the receiver counts it (docs/transport.md) --------------------------------
def test_reordered_segments_count_late_first_transmissions_not_losses() -> None:
    flow = ReceiverFlow(("x", 1), 1, MemorySink(), 1 << 20, 0)
    data = pattern_bytes(0, 10 * MSS)

    def seg(k: int, retx: bool = False) -> None:
        flow.on_segment(k * MSS, memoryview(data[k * MSS:(k + 1) * MSS]), False, retx=retx)

    seg(0), seg(2), seg(3)          # 1 is missing: lost or late
    assert flow.reordered_segments == 0 and flow.out_of_order_segments == 2
    seg(1)                          # late, without RETX: the network reordered it
    assert flow.reordered_segments == 1
    seg(5), seg(4, retx=True)       # a loss repaired by a retransmission: not reordering
    seg(5)                          # a network duplicate of a first transmission: a duplicate
    seg(7), seg(6)                  # and another late one
    assert flow.reordered_segments == 2 and flow.duplicate_segments == 1
    assert flow.summary(1.0)["reordered_segments"] == 2


def test_sacked_bytes_at_the_edges_of_each_range() -> None:
    sb = Scoreboard(MSS)
    sb.update([(1000, 2000), (3000, 4000)], 0, 10_000)
    assert [sb.is_sacked(s) for s in (999, 1000, 1999, 2000, 2500, 2999, 3000, 3999, 4000)] == [
        False, True, True, False, False, False, True, True, False]
    assert (sb.sacked_range_at(3500), sb.sacked_range_at(2500)) == ((3000, 4000), None)
    assert (sb.hole_start(500, 0), sb.hole_start(2500, 0), sb.hole_start(5000, 0)) == (0, 2000, 4000)
    assert sb.hole_start(500, 200) == 200                      # a hole starts at snd_una at the lowest
    sb.clear()
    assert (sb.ranges, sb.sacked_bytes, bool(sb)) == ([], 0, False)


def test_highest_unsacked_is_nextseg_rule_4() -> None:
    """RFC 6675 NextSeg (4): the highest byte below snd_max that is not SACKed."""
    sb = Scoreboard(MSS)
    assert sb.highest_unsacked(5000, 5000) is None             # nothing outstanding
    assert sb.highest_unsacked(0, 5000) == 4999
    sb.update([(3000, 5000)], 0, 5000)                         # the tail is SACKed
    assert sb.highest_unsacked(0, 5000) == 2999
    assert sb.highest_unsacked(2999, 5000) == 2999             # snd_una itself may be the one
    assert sb.highest_unsacked(3000, 5000) is None             # all outstanding bytes SACKed


# -- the socket loop (hosts.transport.loop) over 127.0.0.1 ---------------------------
import errno as _errno  # noqa: E402
import os as _os  # noqa: E402
import signal as _signal  # noqa: E402
import socket as _socket  # noqa: E402
import sys as _sys  # noqa: E402
import threading as _threading  # noqa: E402
import time as _time  # noqa: E402

from hosts.transport import loop  # noqa: E402
from hosts.transport.receiver import Receiver  # noqa: E402
from hosts.transport.sender import Sender  # noqa: E402

GUARD_S = 10.0       # only a broken loop gets near this: it aborts the flow instead of hanging


class QuietWakeup:
    """The wake-up a loop in a helper thread uses: no signals, a pipe that can be poked."""

    def __init__(self) -> None:
        self.count = 0
        self.fd, self.w = _os.pipe()
        _os.set_blocking(self.fd, False)

    def drain(self) -> None:
        try:
            while _os.read(self.fd, 512):
                pass
        except BlockingIOError:
            pass

    def close(self) -> None:
        _os.close(self.fd)
        _os.close(self.w)


class LoopbackReceiver:
    """run_receiver on 127.0.0.1 in a helper thread, the flows' bytes kept in memory."""

    def __init__(self, **kw: Any) -> None:
        self.sock = loop.open_udp_socket(bind=("127.0.0.1", 0))
        self.sinks: List[MemorySink] = []
        self.rx = Receiver(loop.receiver_emitter(self.sock), self._sink, **kw)
        self.wake = QuietWakeup()
        self.stop = _threading.Event()
        self.iterations = 0
        self.thread = _threading.Thread(target=self._run, daemon=True)

    def _sink(self, addr: Any, flow_id: int) -> MemorySink:
        self.sinks.append(MemorySink())
        return self.sinks[-1]

    def _should_stop(self, t: int) -> bool:
        self.iterations += 1
        return self.stop.is_set()

    def _run(self) -> None:
        loop.run_receiver(self.rx, self.sock, self.wake, self._should_stop)  # type: ignore[arg-type]

    @property
    def addr(self) -> Tuple[str, int]:
        return self.sock.getsockname()

    def __enter__(self) -> "LoopbackReceiver":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        _os.write(self.wake.w, b"x")          # wakes its poll at once
        self.thread.join(GUARD_S)
        self.sock.close()
        self.wake.close()


def loopback_sender(dst: Tuple[str, int], nbytes: Optional[int], emit_filter: Any = None,
                    **cfg_kw: Any) -> Tuple[Sender, _socket.socket]:
    sock = loop.open_udp_socket(connect=dst)
    emit = loop.socket_emitter(sock)
    if emit_filter is not None:
        emit = emit_filter(emit)
    cfg_kw.setdefault("mss_bytes", MSS)
    return Sender(NewReno(), PatternSource(nbytes, MSS), emit, flow_id=0x5EED,
                  config=SenderConfig(**cfg_kw)), sock


def run_guarded(sender: Sender, sock: _socket.socket, wake: Any,
                on_tick: Optional[Any] = None) -> List[int]:
    """run_sender; returns the times on_tick saw. A loop that stalls is aborted by the guard."""
    ticks: List[int] = []
    t0 = _time.monotonic()

    def tick(t: int) -> None:
        ticks.append(t)
        if on_tick is not None:
            on_tick(t)
        if _time.monotonic() - t0 > GUARD_S:
            sender.abort(t, "stalled (test guard)")

    try:
        loop.run_sender(sender, sock, wake, on_tick=tick)
    finally:
        sock.close()
    return ticks


def test_a_flow_over_loopback_arrives_intact_with_loopback_rtts() -> None:
    with LoopbackReceiver() as r, loop.SignalWakeup() as wake:
        sender, sock = loopback_sender(r.addr, 200 * MSS)
        ticks = run_guarded(sender, sock, wake)
    assert sender.state is SenderState.DONE, sender.summary(loop.now_us())
    assert bytes(r.sinks[0].data) == pattern_bytes(0, 200 * MSS)
    # RTTs are measured on one clock: on 127.0.0.1 they are far below a second.
    s = sender.summary(loop.now_us())
    assert s["srtt_ms"] is not None and 0 <= s["srtt_ms"] < 1000, s
    assert 0 <= s["min_rtt_ms"] < 1000, s
    # on_tick gets the loop's clock, in microseconds, never going back.
    assert ticks and all(isinstance(t, int) for t in ticks) and ticks == sorted(ticks)
    assert abs(ticks[-1] - _time.monotonic_ns() // 1000) < 60_000_000
    # The loop waits for events: no more wake-ups than datagrams it got plus a few timers.
    assert len(ticks) <= sender.acks_received + 50, (len(ticks), sender.acks_received)


def test_a_full_socket_buffer_delays_segments_but_loses_none() -> None:
    """emit says 'would block' (EAGAIN) on some DATA segments, the first one included,
    when nothing is in flight: the loop waits for the socket to be writable and sends
    them then, without a timeout."""
    refused = {"n": 0, "calls": 0}

    def flaky(emit: Any) -> Any:
        def wrapped(view: memoryview) -> bool:
            if TransportHeader.unpack(bytes(view)).flags & F_DATA:
                refused["calls"] += 1
                if refused["calls"] % 7 == 1:        # the 1st, 8th, 15th ... DATA emit
                    refused["n"] += 1
                    return False
            return bool(emit(view))
        return wrapped

    with LoopbackReceiver() as r, loop.SignalWakeup() as wake:
        sender, sock = loopback_sender(r.addr, 100 * MSS, flaky)
        ticks = run_guarded(sender, sock, wake)
    assert sender.state is SenderState.DONE, sender.summary(loop.now_us())
    assert bytes(r.sinks[0].data) == pattern_bytes(0, 100 * MSS)
    assert refused["n"] >= 10          # (no count of timeouts: a loaded machine may make one)
    assert len(ticks) <= sender.acks_received + 2 * refused["n"] + 50, len(ticks)


def test_an_unanswered_syn_is_resent_with_backoff_until_the_connect_timeout() -> None:
    silent = loop.open_udp_socket(bind=("127.0.0.1", 0))     # bound, never answers
    try:
        with loop.SignalWakeup() as wake:
            sender, sock = loopback_sender(silent.getsockname(), 10 * MSS,
                                           initial_rto_us=50_000, min_rto_us=10_000,
                                           connect_timeout_us=1_000_000)
            ticks = run_guarded(sender, sock, wake)
        syns = 0
        while True:
            try:
                silent.recv(2048)
            except BlockingIOError:
                break
            syns += 1
    finally:
        silent.close()
    assert sender.state is SenderState.FAILED and "no answer to SYN" in (sender.fail_reason or "")
    assert syns >= 3                     # SYN at 0, 50, 150, 350, 750 ms: at least 3 on a loaded machine
    assert len(ticks) <= 50              # the loop slept between the timers


def _signalled_flow(signals: List[int]) -> Tuple[Sender, LoopbackReceiver, loop.SignalWakeup]:
    main = _threading.main_thread().ident
    sent = {"done": False}
    with LoopbackReceiver() as r, loop.SignalWakeup() as wake:
        assert wake.count == 0 and wake.last_signal is None
        assert not _os.get_blocking(wake.fd)       # the loop must never block draining it
        sender, sock = loopback_sender(r.addr, None)           # an endless stream

        def tick(t: int) -> None:
            if not sent["done"] and sender.snd_una >= 50 * MSS:
                sent["done"] = True
                for sig in signals:
                    _signal.pthread_kill(main, sig)        # type: ignore[arg-type]

        run_guarded(sender, sock, wake, tick)
        # the receiver takes the FIN or the RST before it stops
        deadline = _time.monotonic() + GUARD_S
        while (r.rx.stats.flows_completed + r.rx.stats.flows_reset == 0
               and _time.monotonic() < deadline):
            _time.sleep(0.01)
    return sender, r, wake


def test_a_signal_ends_the_stream_after_the_bytes_sent_so_far() -> None:
    sender, r, wake = _signalled_flow([_signal.SIGINT])
    assert (wake.count, wake.last_signal) == (1, _signal.SIGINT)
    s = sender.summary(loop.now_us())
    assert s["status"] == "interrupted", s
    assert sender.stream_end is not None and sender.stream_end >= 50 * MSS
    assert bytes(r.sinks[0].data) == pattern_bytes(0, sender.stream_end)


def test_a_second_signal_aborts_the_flow_with_a_reset() -> None:
    sender, r, wake = _signalled_flow([_signal.SIGINT, _signal.SIGTERM])
    assert (wake.count, wake.last_signal) == (2, _signal.SIGTERM)
    s = sender.summary(loop.now_us())
    assert s["status"] == "failed: aborted by a second signal", s
    assert (r.rx.stats.flows_completed, r.rx.stats.flows_reset) == (0, 1)


def test_signal_wakeup_restores_the_previous_wakeup_fd_and_handlers() -> None:
    outer_r, outer_w = _os.pipe()
    _os.set_blocking(outer_w, False)
    previous = _signal.set_wakeup_fd(outer_w)
    old_int, old_term = _signal.getsignal(_signal.SIGINT), _signal.getsignal(_signal.SIGTERM)
    try:
        with loop.SignalWakeup() as wake:
            assert _signal.getsignal(_signal.SIGINT) != old_int
            _signal.raise_signal(_signal.SIGTERM)
            _signal.raise_signal(_signal.SIGINT)
            assert (wake.count, wake.last_signal) == (2, _signal.SIGINT)
            assert not _os.get_blocking(wake.fd)
            assert len(_os.read(wake.fd, 64)) == 2        # one byte per signal, in its pipe
            wake.drain()                                    # empty: returns at once
        assert _signal.set_wakeup_fd(outer_w) == outer_w   # the outer one is back
        assert _signal.getsignal(_signal.SIGINT) == old_int
        assert _signal.getsignal(_signal.SIGTERM) == old_term
    finally:
        _signal.set_wakeup_fd(previous)
        _os.close(outer_r)
        _os.close(outer_w)


def test_signal_wakeup_drain_empties_its_pipe() -> None:
    with loop.SignalWakeup() as wake:
        for _ in range(600):                                 # more than one read of 512
            _signal.raise_signal(_signal.SIGTERM)
        assert wake.count == 600
        wake.drain()
        with pytest.raises(BlockingIOError):
            _os.read(wake.fd, 1)


def test_a_flood_of_signals_is_not_reported_as_an_error(monkeypatch: Any) -> None:
    """More signals than its pipe holds: counted, and no 'cannot write to the wakeup fd'
    report on stderr."""
    import fcntl
    reports: List[Any] = []
    monkeypatch.setattr(_sys, "unraisablehook", reports.append)
    with loop.SignalWakeup() as wake:
        size = fcntl.fcntl(wake.fd, 1031, 4096)             # F_SETPIPE_SZ: a small pipe
        for _ in range(size + 100):
            _signal.raise_signal(_signal.SIGTERM)
        assert wake.count == size + 100
        wake.drain()
    assert reports == []


def test_a_wakeup_never_entered_closes_without_installing_a_wakeup_fd() -> None:
    previous = _signal.set_wakeup_fd(-1)
    try:
        wake = loop.SignalWakeup()
        wake.__exit__(None, None, None)
        assert _signal.set_wakeup_fd(-1) == -1
    finally:
        _signal.set_wakeup_fd(previous)


class FakeSocket:
    def __init__(self, error: Optional[BaseException]) -> None:
        self.error = error
        self.sent: List[bytes] = []

    def send(self, data: Any) -> int:
        return self.sendto(data, None)

    def sendto(self, data: Any, addr: Any) -> int:
        if self.error is not None:
            raise self.error
        self.sent.append(bytes(data))
        return len(data)


@pytest.mark.parametrize("error,result", [
    (None, True),                                               # sent
    (BlockingIOError(_errno.EAGAIN, "full"), False),            # try again when writable
    (InterruptedError(_errno.EINTR, "signal"), True),
    (OSError(_errno.ENOBUFS, "no buffers"), True),              # local losses: the packet is lost
    (OSError(_errno.EHOSTUNREACH, "no route"), True),
    (OSError(_errno.ENETUNREACH, "no network"), True),
])
def test_socket_emitter_reports_only_a_full_buffer_as_not_sent(error: Optional[BaseException],
                                                               result: bool) -> None:
    emit = loop.socket_emitter(FakeSocket(error))  # type: ignore[arg-type]
    assert emit(memoryview(b"abc")) is result


def test_socket_emitter_raises_other_errors_and_reports_refusal() -> None:
    with pytest.raises(PermissionError):
        loop.socket_emitter(FakeSocket(PermissionError(_errno.EPERM, "no")))(  # type: ignore[arg-type]
            memoryview(b"x"))
    calls: List[int] = []
    emit = loop.socket_emitter(FakeSocket(ConnectionRefusedError(_errno.ECONNREFUSED, "x")),  # type: ignore[arg-type]
                               lambda: calls.append(1))
    assert emit(memoryview(b"x")) is True and calls == [1]     # lost, and reported
    quiet = loop.socket_emitter(FakeSocket(ConnectionRefusedError(_errno.ECONNREFUSED, "x")))  # type: ignore[arg-type]
    assert quiet(memoryview(b"x")) is True


def test_socket_emitter_on_a_port_nobody_listens_on_calls_on_refused() -> None:
    nobody = _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM)
    nobody.bind(("127.0.0.1", 0))
    port = nobody.getsockname()[1]
    nobody.close()
    sock = loop.open_udp_socket(connect=("127.0.0.1", port))
    try:
        calls: List[int] = []
        emit = loop.socket_emitter(sock, lambda: calls.append(1))
        results = [emit(memoryview(b"x" * 10)) for _ in range(3)]
        assert results == [True] * 3 and calls                    # the ICMP reached it
    finally:
        sock.close()


@pytest.mark.parametrize("error,result", [
    (None, True),
    (BlockingIOError(_errno.EAGAIN, "full"), False),            # the next ACK covers it
    (OSError(_errno.ENOBUFS, "no buffers"), False),
    (OSError(_errno.EHOSTUNREACH, "no route"), False),
    (OSError(_errno.ENETUNREACH, "no network"), False),
    (ConnectionRefusedError(_errno.ECONNREFUSED, "gone"), False),
])
def test_receiver_emitter_says_whether_the_ack_left(error: Optional[BaseException],
                                                    result: bool) -> None:
    fake = FakeSocket(error)
    emit = loop.receiver_emitter(fake)  # type: ignore[arg-type]
    assert emit(memoryview(b"ack"), ("127.0.0.1", 9)) is result
    assert fake.sent == ([b"ack"] if result else [])


def test_receiver_emitter_raises_other_errors() -> None:
    with pytest.raises(PermissionError):
        loop.receiver_emitter(FakeSocket(PermissionError(_errno.EPERM, "no")))(  # type: ignore[arg-type]
            memoryview(b"x"), ("127.0.0.1", 9))


def test_open_udp_socket_sets_both_buffers_non_blocking() -> None:
    size = 50_000                        # below rmem_max/wmem_max: Linux keeps twice it
    sock = loop.open_udp_socket(bind=("127.0.0.1", 0), buffer_bytes=size)
    try:
        assert sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_RCVBUF) == 2 * size
        assert sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_SNDBUF) == 2 * size
        assert not sock.getblocking()
    finally:
        sock.close()


def test_set_buffer_falls_back_when_the_forcing_option_is_refused() -> None:
    """Without CAP_NET_ADMIN SO_RCVBUFFORCE fails: the ordinary option is used instead
    (an option the kernel does not know stands in for the refusal)."""
    sock = _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM)
    try:
        loop._set_buffer(sock, 0x7FFF, _socket.SO_RCVBUF, 40_000)
        assert sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_RCVBUF) == 80_000
        loop._set_buffer(sock, 0x7FFF, 0x7FFE, 40_000)         # both refused: no error
    finally:
        sock.close()


def test_an_idle_flow_is_closed_by_the_receiver_loop_timer() -> None:
    from hosts.transport.wire import F_SYN as _SYN, pack_data_headers
    with LoopbackReceiver(idle_timeout_us=50_000) as r:
        peer = loop.open_udp_socket(connect=r.addr)
        try:
            buf = bytearray(HEADERS_LEN + 10)
            pack_data_headers(buf, _SYN, 9, 0, 0)
            peer.send(bytes(buf[:HEADERS_LEN]))
            pack_data_headers(buf, F_DATA, 9, 0, 0)
            peer.send(bytes(buf))
            deadline = _time.monotonic() + GUARD_S
            while r.rx.stats.flows_idle_closed == 0 and _time.monotonic() < deadline:
                _time.sleep(0.02)
        finally:
            peer.close()
    assert r.rx.stats.flows_idle_closed == 1
    assert bytes(r.sinks[0].data) == b"\0" * 10


def test_the_receivers_loop_sleeps_between_datagrams_and_runs_its_delayed_ack_timer() -> None:
    """run_receiver waits for datagrams (no more turns than datagrams plus a few
    timers: a socket polled for writing would spin) and serves the receiver's timers:
    with delayed ACKs, the ACK of an odd last segment leaves on the 40 ms timer, so
    the sender never has to time out (its RTO is at least 200 ms)."""
    with LoopbackReceiver(delayed_ack=True) as r, loop.SignalWakeup() as wake:
        sender, sock = loopback_sender(r.addr, 41 * MSS)
        run_guarded(sender, sock, wake)
    assert sender.state is SenderState.DONE, sender.summary(loop.now_us())
    assert bytes(r.sinks[0].data) == pattern_bytes(0, 41 * MSS)
    assert sender.timeouts == 0 and sender.retransmits == 0
    assert r.iterations <= r.rx.stats_dict()["datagrams"] + 50, (r.iterations, r.rx.stats_dict())


def test_sack_recovery_starts_when_the_scoreboard_says_lost_before_three_duplicate_acks() -> None:
    """RFC 6675 sec. 5: recovery starts on DupThresh duplicate ACKs *or* when
    IsLost(HighACK + 1). Segment 10 is lost and the first three duplicate ACKs after
    it are lost too: the first one to arrive already SACKs four segments above the
    hole, so the sender retransmits at once instead of waiting for two more."""
    from hosts.transport.wire import F_FIN, F_SYN

    class Spy(NewReno):
        def __init__(self) -> None:
            self.dupacks: List[int] = []
            self.entered_after: List[int] = []

        def on_dupack(self, st: Any, ack: Any) -> None:
            self.dupacks.append(ack.dupacks)
            super().on_dupack(st, ack)

        def on_enter_recovery(self, st: Any) -> None:
            self.entered_after.append(len(self.dupacks))
            super().on_enter_recovery(st)

    acks_for_10 = {"n": 0}

    def drop_ack(t: int, pkt: bytes) -> bool:
        h = TransportHeader.unpack(pkt)
        if h.flags & (F_SYN | F_FIN) or h.ack != 10 * MSS:
            return False
        acks_for_10["n"] += 1             # the 1st is segment 9's own ACK; then the duplicates
        return 2 <= acks_for_10["n"] <= 4

    fwd = LinkModel(delay_us=10_000, drop_indices={fwd_index(10 * MSS)})
    sim = Simulation(fwd, LinkModel(delay_us=10_000, drop_if=drop_ack), seed=1)
    cc = Spy()
    s = sim.add_flow(cc, PatternSource(40 * MSS, MSS), config=cfg())
    sim.run(until_us=30_000_000)
    assert s.state is SenderState.DONE and s.timeouts == 0 and s.fast_recoveries == 1
    assert cc.entered_after == [1] and s.retransmits == 1
    assert bytes(sim.sink_of(s).data) == pattern_bytes(0, 40 * MSS)
