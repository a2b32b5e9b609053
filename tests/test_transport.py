"""Transport logic, in-process: a fake clock and a simulated lossy channel
(hosts.sim.channel) drive real Sender and Receiver objects, no sockets."""
from __future__ import annotations

import os
import random
from typing import Any, List, Tuple

import pytest

from hosts.cc.base import AckInfo, CcState, Feedback, SentSegment
from hosts.cc.newreno import NewReno
from hosts.cc.reno import Reno
from hosts.transport.reassembly import MemorySink, ReceiverFlow
from hosts.transport.rto import RtoEstimator
from hosts.transport.sender import SenderConfig, SenderState
from hosts.sim.channel import LinkModel, Simulation, stamp_constant
from hosts.transport.source import BytesSource, PatternSource, pattern_bytes
from hosts.transport.wire import F_DATA, F_FIN, F_RETX, HEADERS_LEN, TransportHeader, ts_diff_us

MSS = 1000


def cfg(**kw: Any) -> SenderConfig:
    kw.setdefault("mss_bytes", MSS)
    return SenderConfig(**kw)


class Recorder(NewReno):
    """NewReno that records every callback (name, snapshot)."""

    def __init__(self, style: str = "newreno") -> None:
        self.events: List[Tuple[str, Any]] = []
        self.recovery_style = style  # type: ignore[misc]

    def on_init(self, st: CcState) -> None:
        self.events.append(("init", None))
        super().on_init(st)

    def on_packet_sent(self, st: CcState, seg: SentSegment) -> None:
        self.events.append(("sent", (seg, st.bytes_in_flight)))

    def on_feedback(self, st: CcState, ack: AckInfo) -> None:
        self.events.append(("feedback", ack))

    def on_ack(self, st: CcState, ack: AckInfo) -> None:
        self.events.append(("ack", ack))
        super().on_ack(st, ack)

    def on_dupack(self, st: CcState, ack: AckInfo) -> None:
        self.events.append(("dupack", ack))
        super().on_dupack(st, ack)

    def on_enter_recovery(self, st: CcState) -> None:
        self.events.append(("enter", (st.cwnd, st.bytes_in_flight, st.recovery_point)))
        super().on_enter_recovery(st)

    def on_partial_ack(self, st: CcState, ack: AckInfo) -> None:
        self.events.append(("partial", ack))
        super().on_partial_ack(st, ack)

    def on_exit_recovery(self, st: CcState, ack: AckInfo) -> None:
        self.events.append(("exit", ack))
        super().on_exit_recovery(st, ack)

    def on_timeout(self, st: CcState) -> None:
        self.events.append(("timeout", (st.cwnd, st.bytes_in_flight, st.now_us)))
        super().on_timeout(st)

    def names(self) -> List[str]:
        return [n for n, _ in self.events if n not in ("sent", "feedback")]


def data_packets(sim: Simulation) -> List[Tuple[int, TransportHeader]]:
    out = []
    for t, d, pkt in sim.sent_log:
        if d == "fwd":
            out.append((t, TransportHeader.unpack(pkt)))
    return out


def fwd_index_of_seq(seq: int) -> int:
    """Forward packet number of the first transmission of data segment ``seq`` (SYN is 0)."""
    return 1 + seq // MSS


# -- the stream arrives intact --------------------------------------------------------------
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("cc_cls", [NewReno, Reno])
@pytest.mark.parametrize("sack", [True, False], ids=["sack", "no-sack"])
def test_stream_intact_under_loss_reorder_duplication(seed: int, cc_cls: type, sack: bool) -> None:
    """10 % loss, 5 % reordering and 5 % duplication in both directions."""
    rng = random.Random(seed)
    data = bytes(rng.getrandbits(8) for _ in range(300_000))
    fwd = LinkModel(delay_us=10_000, rate_bps=8e6, queue_packets=30, loss=0.10,
                    duplicate=0.05, reorder=0.05, reorder_extra_us=3_000)
    rev = LinkModel(delay_us=10_000, loss=0.10, duplicate=0.05, reorder=0.05)
    sim = Simulation(fwd, rev, seed=seed, delayed_ack=bool(seed % 2))
    s = sim.add_flow(cc_cls(), BytesSource(data), config=cfg(sack=sack))
    sim.run(until_us=600_000_000)
    assert s.state is SenderState.DONE, s.summary(sim.now_us)
    assert s.sack is sack
    sink = sim.sink_of(s)
    assert sink.closed and bytes(sink.data) == data
    assert s.st.delivered_bytes == len(data)
    assert s.retransmits > 0


def test_empty_stream_and_single_byte() -> None:
    for data in (b"", b"x"):
        sim = Simulation(seed=3)
        s = sim.add_flow(NewReno(), BytesSource(data), config=cfg())
        sim.run(until_us=10_000_000)
        assert s.state is SenderState.DONE
        assert bytes(sim.sink_of(s).data) == data


def test_concurrent_flows_demultiplexed() -> None:
    fwd = LinkModel(delay_us=5_000, rate_bps=20e6, queue_packets=60, loss=0.01)
    sim = Simulation(fwd, LinkModel(delay_us=5_000), seed=7)
    datas = [os.urandom(150_000 + 1000 * i) for i in range(3)]
    senders = [sim.add_flow(NewReno(), BytesSource(d), flow_id=7 if i < 2 else 8, config=cfg())
               for i, d in enumerate(datas)]  # two flows share flow id 7 from different ports
    sim.run(until_us=120_000_000)
    for s, d in zip(senders, datas):
        assert s.state is SenderState.DONE
        assert bytes(sim.sink_of(s).data) == d


# -- loss recovery ---------------------------------------------------------------------------
@pytest.mark.parametrize("sack", [True, False], ids=["sack", "no-sack"])
def test_fast_retransmit_after_three_dupacks(sack: bool) -> None:
    lost_seq = 20 * MSS
    fwd = LinkModel(delay_us=10_000, drop_indices={fwd_index_of_seq(lost_seq)})
    sim = Simulation(fwd, LinkModel(delay_us=10_000), seed=1)
    sim.keep_log = True
    cc = Recorder()
    s = sim.add_flow(cc, PatternSource(100 * MSS, MSS), config=cfg(sack=sack))
    sim.run(until_us=30_000_000)
    assert s.state is SenderState.DONE and s.timeouts == 0
    assert s.fast_recoveries == 1 and s.retransmits == 1
    names = cc.names()
    first_dup = names.index("dupack")
    assert names[first_dup:first_dup + 4] == ["dupack", "dupack", "dupack", "enter"]
    # No partial ACK: one loss; the retransmission's ACK is the full ACK.
    assert "partial" not in names and names.count("exit") == 1
    # The retransmission leaves right after the 3rd duplicate ACK arrived.
    acks = [(t, TransportHeader.unpack(p)) for t, d, p in sim.sent_log if d == "rev"]
    retx = [(t, h) for t, h in data_packets(sim) if h.flags & F_RETX]
    assert len(retx) == 1 and retx[0][1].seq == lost_seq
    dup_arrivals = [a for a in cc.events if a[0] == "dupack"]
    third = dup_arrivals[2][1]
    assert third.dupacks == 3 and third.ack_seq == lost_seq
    assert retx[0][0] == third.now_us
    assert all(h.ack <= 100 * MSS + 1 for _, h in acks)
    # ssthresh halved from the flight at the time of the loss (RFC 5681 eq. 4).
    enter = [v for n, v in cc.events if n == "enter"][0]
    assert s.st.ssthresh == pytest.approx(max(enter[1] / MSS / 2, 2.0))


@pytest.mark.parametrize("sack", [True, False], ids=["sack", "no-sack"])
def test_two_dupacks_do_not_retransmit(sack: bool) -> None:
    # Reordering by two packets: two duplicate ACKs, no fast retransmit.
    delayed = fwd_index_of_seq(20 * MSS)
    count = {"n": 0}
    rate_bps = 8e6
    pkt_time_us = (MSS + HEADERS_LEN + 42) * 8e6 / rate_bps
    fwd = LinkModel(delay_us=10_000, rate_bps=rate_bps, reorder_extra_us=int(2.5 * pkt_time_us))
    sim = Simulation(fwd, LinkModel(delay_us=10_000), seed=1)
    # Hold that one packet back by 2.5 packet times: two packets overtake it.
    orig_send = sim.forward._one

    def one(pkt: bytes, now_us: int, ce: bool = False) -> None:
        count["n"] += 1
        fwd.reorder = 1.0 if count["n"] - 1 == delayed else 0.0
        orig_send(pkt, now_us, ce)

    sim.forward._one = one  # type: ignore[assignment]
    cc = Recorder()
    s = sim.add_flow(cc, PatternSource(60 * MSS, MSS), config=cfg(sack=sack))
    sim.run(until_us=30_000_000)
    assert s.state is SenderState.DONE
    assert s.fast_recoveries == 0 and s.retransmits == 0
    assert 1 <= cc.names().count("dupack") <= 2


def test_newreno_partial_ack_retransmits_each_hole_without_timeout() -> None:
    lost = [30 * MSS, 33 * MSS, 37 * MSS]
    fwd = LinkModel(delay_us=10_000, drop_indices={fwd_index_of_seq(q) for q in lost})
    sim = Simulation(fwd, LinkModel(delay_us=10_000), seed=1)
    sim.keep_log = True
    cc = Recorder()
    s = sim.add_flow(cc, PatternSource(150 * MSS, MSS), config=cfg(sack=False))
    sim.run(until_us=30_000_000)
    assert s.state is SenderState.DONE
    assert s.timeouts == 0 and s.fast_recoveries == 1
    retx = [h.seq for _, h in data_packets(sim) if h.flags & F_RETX]
    assert retx == lost
    names = cc.names()
    i = names.index("enter")
    after = [n for n in names[i:] if n in ("partial", "exit", "enter")]
    assert after == ["enter", "partial", "partial", "exit"]
    partials = [v for n, v in cc.events if n == "partial"]
    assert [p.ack_seq for p in partials] == lost[1:]
    # The recovery point is snd_max when recovery began (RFC 6582 "recover").
    enter_rp = [v for n, v in cc.events if n == "enter"][0][2]
    exit_ack = [v for n, v in cc.events if n == "exit"][0]
    assert exit_ack.ack_seq >= enter_rp > lost[-1]
    assert bytes(sim.sink_of(s).data) == pattern_bytes(0, 150 * MSS)


def test_reno_style_ends_recovery_at_first_new_ack() -> None:
    lost = [30 * MSS, 33 * MSS]
    fwd = LinkModel(delay_us=10_000, drop_indices={fwd_index_of_seq(q) for q in lost})
    sim = Simulation(fwd, LinkModel(delay_us=10_000), seed=1)
    cc = Recorder(style="reno")
    s = sim.add_flow(cc, PatternSource(150 * MSS, MSS), config=cfg(sack=False))
    sim.run(until_us=30_000_000)
    assert s.state is SenderState.DONE
    names = cc.names()
    assert "partial" not in names
    assert names.count("enter") + names.count("timeout") >= 2  # second hole: re-entry or RTO
    assert names[names.index("enter") + 1:].index("exit") >= 0
    assert bytes(sim.sink_of(s).data) == pattern_bytes(0, 150 * MSS)


def test_reno_module_deflates_to_ssthresh() -> None:
    st = CcState(mss_bytes=MSS, cwnd=20.0, ssthresh=8.0)
    Reno().on_exit_recovery(st, AckInfo(0, 0, 0, None, None, None, 0))
    assert st.cwnd == 8.0 and Reno.recovery_style == "reno" and NewReno.recovery_style == "newreno"


# -- retransmission timer ------------------------------------------------------------------
def test_rto_estimator_rfc6298() -> None:
    est = RtoEstimator(initial_rto_us=1_000_000, min_rto_us=200_000, max_rto_us=60_000_000)
    assert est.rto_us == 1_000_000
    est.on_sample(100_000)  # SRTT = R, RTTVAR = R/2, RTO = SRTT + 4 RTTVAR
    assert est.srtt_us == 100_000 and est.rttvar_us == 50_000 and est.rto_us == 300_000
    est.on_sample(60_000)
    assert est.rttvar_us == pytest.approx(0.75 * 50_000 + 0.25 * 40_000)
    assert est.srtt_us == pytest.approx(0.875 * 100_000 + 0.125 * 60_000)
    est.on_sample(10_000)
    for _ in range(50):
        est.on_sample(10_000)
    assert est.rto_us == 200_000  # clamped to the minimum
    est.on_timeout()
    est.on_timeout()
    assert est.rto_us == 800_000
    for _ in range(20):
        est.on_timeout()
    assert est.rto_us == 60_000_000  # capped
    est.on_sample(10_000)
    assert est.rto_us == 200_000 and est.backoff == 0


def test_rto_exponential_backoff_and_karn() -> None:
    # Forward blackout from 0.5 s to 3 s: the first unacknowledged segment is
    # retransmitted at intervals that double; the ACK of a retransmission gives no
    # RTT sample, so the backed-off RTO stays until a fresh segment is acknowledged.
    blackout = (500_000, 3_000_000)
    fwd = LinkModel(delay_us=10_000, rate_bps=10e6, queue_packets=20,
                    drop_if=lambda t, p: blackout[0] <= t < blackout[1])
    sim = Simulation(fwd, LinkModel(delay_us=10_000), seed=1)
    sim.keep_log = True
    cc = Recorder()
    s = sim.add_flow(cc, PatternSource(None, MSS), config=cfg(duration_us=4_000_000, sack=False))
    sim.run(until_us=30_000_000)
    assert s.state is SenderState.DONE
    timeout_times = [v[2] for n, v in cc.events if n == "timeout" and v[2] >= blackout[0]]
    gaps = [b - a for a, b in zip(timeout_times, timeout_times[1:]) if b <= blackout[1]]
    assert len(gaps) >= 2
    assert gaps[0] >= 2 * 200_000  # the first backed-off RTO is at least twice the minimum
    assert all(g2 == pytest.approx(2 * g1, rel=0.02) for g1, g2 in zip(gaps, gaps[1:]))
    # Each timeout retransmits the first unacknowledged segment.
    retx = {t: h.seq for t, h in data_packets(sim) if h.flags & F_RETX}
    assert len({retx[t] for t in timeout_times[:len(gaps) + 1]}) == 1
    assert s.timeouts >= 3
    # Karn: ACKs echoing a retransmission carry no RTT sample.
    fb = [a for n, a in cc.events if n == "feedback"]
    first_after = next(a for a in fb if a.now_us > blackout[1])
    assert first_after.rtt_sample_us is None
    assert all(a.rtt_sample_us is None or a.rtt_sample_us < 100_000 for a in fb)
    # After the timeout: cwnd = 1 and go-back-N from snd_una (on_timeout saw the flight).
    tos = [v for n, v in cc.events if n == "timeout"]
    assert tos[0][1] > 0 and s.st.cwnd >= 1
    assert bytes(sim.sink_of(s).data) == pattern_bytes(0, s.st.delivered_bytes)


def test_karn_backoff_kept_until_fresh_sample() -> None:
    # Drop segment 10 and its first two retransmissions: RTO backs off twice.
    seen = {"n": 0}

    def drop(t: int, pkt: bytes) -> bool:
        h = TransportHeader.unpack(pkt)
        if h.seq == 10 * MSS and h.flags & F_DATA and seen["n"] < 3:
            seen["n"] += 1
            return True
        return False

    fwd = LinkModel(delay_us=10_000, drop_if=drop)
    sim = Simulation(fwd, LinkModel(delay_us=10_000), seed=1)
    states = []
    cc = Recorder()
    s = sim.add_flow(cc, PatternSource(12 * MSS, MSS), config=cfg())
    orig = s.on_datagram

    def spy(data: Any, now: int) -> None:
        orig(data, now)
        states.append((now, s.rto.backoff, s.snd_una))

    s.on_datagram = spy  # type: ignore[assignment]
    sim.run(until_us=30_000_000)
    assert s.state is SenderState.DONE
    assert s.timeouts >= 2
    # The ACK for the retransmitted segment 10 leaves the backoff in place (Karn).
    ack_of_retx = next(b for t, b, una in states if una > 10 * MSS)
    assert ack_of_retx >= 1


# -- windows and pacing ----------------------------------------------------------------------
def test_receive_window_is_honoured() -> None:
    rwnd = 8 * MSS
    sim = Simulation(LinkModel(delay_us=20_000), LinkModel(delay_us=20_000), seed=1,
                     window_bytes=rwnd)
    cc = Recorder()
    s = sim.add_flow(cc, PatternSource(200 * MSS, MSS), config=cfg())
    sim.run(until_us=30_000_000)
    assert s.state is SenderState.DONE
    sent = [v for n, v in cc.events if n == "sent"]
    # on_packet_sent sees the flight before the segment: flight + segment <= rwnd.
    assert max(f + seg.size_bytes for seg, f in sent if not seg.is_retransmit) == rwnd
    assert s.st.max_cwnd == pytest.approx(8.0)


class PacedBigWindow(NewReno):
    name = "paced-test"

    def __init__(self, rate_bps: float) -> None:
        self.rate_bps = rate_bps

    def on_init(self, st: CcState) -> None:
        st.cwnd = 1000.0
        st.pacing_rate_bps = self.rate_bps

    def on_ack(self, st: CcState, ack: AckInfo) -> None:
        pass


def test_pacing_limits_the_rate() -> None:
    rate = 2e6
    nbytes = 250 * MSS
    sim = Simulation(LinkModel(delay_us=5_000), LinkModel(delay_us=5_000), seed=1)
    sim.keep_log = True
    s = sim.add_flow(PacedBigWindow(rate), PatternSource(nbytes, MSS), config=cfg())
    sim.run(until_us=30_000_000)
    assert s.state is SenderState.DONE
    wire_bits = (MSS + HEADERS_LEN + 28 + 14) * 8
    expected_s = (nbytes / MSS) * wire_bits / rate
    summ = s.summary(sim.now_us)
    assert summ["duration_s"] == pytest.approx(expected_s, rel=0.1)
    sends = [t for t, h in data_packets(sim) if h.flags & F_DATA]
    gaps = [b - a for a, b in zip(sends[10:], sends[11:])]
    assert min(gaps) >= wire_bits / rate * 1e6 * 0.95


# -- callbacks, feedback, timestamps ---------------------------------------------------------
def test_feedback_echo_and_callback_order() -> None:
    stamp = stamp_constant(ebn_code=98, narrow_kbps=10_000, tight_kbps=-500)
    sim = Simulation(LinkModel(delay_us=5_000), LinkModel(delay_us=5_000), seed=1, stamp=stamp)
    cc = Recorder()
    s = sim.add_flow(cc, PatternSource(20 * MSS, MSS), config=cfg())
    sim.run(until_us=10_000_000)
    assert s.state is SenderState.DONE
    fbs = [a.feedback for n, a in cc.events if n == "feedback"]
    assert fbs and all(f == Feedback(hop_count=1, ebn_code=98, narrow_kbps=10_000,
                                     tight_kbps=-500) for f in fbs)
    # on_feedback comes right before each on_ack / on_dupack / partial / exit.
    seq = [n for n, _ in cc.events if n != "sent"]
    for i, n in enumerate(seq):
        if n in ("ack", "dupack", "partial", "exit"):
            assert seq[i - 1] == "feedback"
    assert seq[0] == "init"
    acks = [a for n, a in cc.events if n == "ack"]
    assert all(a.ack_send_time_us is not None for a in acks)
    assert all(a.rtt_sample_us is not None and 10_000 <= a.rtt_sample_us < 11_000 for a in acks)


def test_no_switch_gives_hop_count_zero_and_unset_fields() -> None:
    sim = Simulation(seed=1)
    cc = Recorder()
    sim.add_flow(cc, PatternSource(3 * MSS, MSS), config=cfg())
    sim.run(until_us=5_000_000)
    fb = [a.feedback for n, a in cc.events if n == "feedback"]
    assert fb[0] == Feedback(hop_count=0, ebn_code=None, narrow_kbps=None, tight_kbps=None)


def test_timestamp_arithmetic_wraps() -> None:
    assert ts_diff_us(5, 2**32 - 5) == 10
    assert ts_diff_us(2**32 - 5, 5) == -10


def test_ack_send_time_unwraps_across_32_bits() -> None:
    sim = Simulation(LinkModel(delay_us=1_000, rate_bps=10e6), LinkModel(delay_us=1_000), seed=1)
    cc = Recorder()
    start = 2**32 - 20_000  # the 32-bit clock wraps 20 ms into the flow
    sim.now_us = start
    s = sim.add_flow(cc, PatternSource(100 * MSS, MSS), config=cfg())
    sim.run(until_us=start + 10_000_000)
    assert s.state is SenderState.DONE
    times = [a.ack_send_time_us for n, a in cc.events if n == "feedback"]
    assert all(b >= a for a, b in zip(times, times[1:]))
    assert times[-1] - times[0] > 50_000 and times[-1] > 2**32


# -- ends of a stream -------------------------------------------------------------------------
def test_duration_mode_and_interrupt() -> None:
    sim = Simulation(LinkModel(delay_us=5_000, rate_bps=5e6, queue_packets=20),
                     LinkModel(delay_us=5_000), seed=2)
    s = sim.add_flow(NewReno(), PatternSource(None, MSS), config=cfg(duration_us=1_000_000))
    sim.run(until_us=20_000_000)
    assert s.state is SenderState.DONE
    got = bytes(sim.sink_of(s).data)
    assert len(got) == s.stream_end and got == pattern_bytes(0, len(got))
    assert 0.5 < s.summary(sim.now_us)["duration_s"] < 1.5

    # A rate, so that 0.3 s is a few hundred segments to deliver and check, not
    # everything an unlimited link would let a sender's cwnd grow to.
    sim = Simulation(LinkModel(delay_us=5_000, rate_bps=20e6), LinkModel(delay_us=5_000), seed=2)
    s = sim.add_flow(NewReno(), PatternSource(10**9, MSS), config=cfg())
    sim.run(until_us=300_000)
    s.finish_now(sim.now_us)
    sim.run(until_us=10_000_000)
    assert s.state is SenderState.DONE and s.summary(sim.now_us)["status"] == "interrupted"
    got = bytes(sim.sink_of(s).data)
    assert 0 < len(got) < 10**9 and got == pattern_bytes(0, len(got))


def test_syn_retransmitted_then_connect_timeout() -> None:
    sim = Simulation(LinkModel(delay_us=1_000, loss=1.0), seed=1)
    s = sim.add_flow(NewReno(), PatternSource(10, MSS), config=cfg(connect_timeout_us=5_000_000))
    sim.run(until_us=60_000_000)
    assert s.state is SenderState.FAILED and "SYN" in (s.fail_reason or "")
    assert s.packets_sent == 3  # t = 0, 1 s, 3 s (RFC 6298 backoff); gives up at 7 s


def test_lost_syn_ack_is_answered_again() -> None:
    rev = LinkModel(delay_us=1_000, drop_indices={0})
    sim = Simulation(LinkModel(delay_us=1_000), rev, seed=1)
    s = sim.add_flow(NewReno(), PatternSource(5000, MSS), config=cfg())
    sim.run(until_us=10_000_000)
    assert s.state is SenderState.DONE and len(sim.sink_of(s).data) == 5000


def test_lost_fin_ack_recovered() -> None:
    def drop_fin_ack(t: int, pkt: bytes) -> bool:
        return bool(TransportHeader.unpack(pkt).flags & F_FIN) and t < 1_000_000

    sim = Simulation(LinkModel(delay_us=1_000), LinkModel(delay_us=1_000, drop_if=drop_fin_ack))
    s = sim.add_flow(NewReno(), PatternSource(5000, MSS), config=cfg())
    sim.run(until_us=10_000_000)
    assert s.state is SenderState.DONE and s.timeouts >= 1


# -- receiver reassembly ---------------------------------------------------------------------
def test_reassembly_with_overlaps_duplicates_and_window() -> None:
    rng = random.Random(5)
    data = os.urandom(20_000)
    sink = MemorySink()
    flow = ReceiverFlow(("x", 1), 1, sink, window_bytes=len(data) + 10, now_us=0)
    pieces = []
    for _ in range(400):
        a = rng.randrange(0, len(data))
        b = min(len(data), a + rng.randrange(1, 1500))
        pieces.append((a, b))
    pos = 0
    while pos < len(data):  # make sure every byte is covered
        b = min(len(data), pos + rng.randrange(1, 1500))
        pieces.append((pos, b))
        pos = b
    rng.shuffle(pieces)
    for a, b in pieces:
        flow.on_segment(a, memoryview(data[a:b]), False)
    flow.on_segment(len(data), memoryview(b""), True)
    assert flow.complete and bytes(sink.data) == data and sink.closed
    assert flow.ack_seq == len(data) + 1


def test_application_limited_source() -> None:
    rate = 0.2e6  # 200 kb/s of payload: one 1000-byte segment every 40 ms
    sim = Simulation(LinkModel(delay_us=5_000), LinkModel(delay_us=5_000), seed=1)
    sim.keep_log = True
    s = sim.add_flow(NewReno(), PatternSource(None, MSS),
                     config=cfg(duration_us=2_000_000, app_rate_bps=rate))
    sim.run(until_us=20_000_000)
    assert s.state is SenderState.DONE
    summ = s.summary(sim.now_us)
    assert summ["goodput_bps"] == pytest.approx(rate, rel=0.05)
    sends = [t for t, h in data_packets(sim) if h.flags & F_DATA]
    gaps = [b - a for a, b in zip(sends, sends[1:])]
    assert min(gaps) >= 39_000 and s.st.cwnd > 2  # cwnd would allow more; the app does not
    assert bytes(sim.sink_of(s).data) == pattern_bytes(0, s.st.delivered_bytes)


def test_duplicated_syn_ack_is_not_a_duplicate_ack() -> None:
    # Every reverse packet duplicated with a long delay: the late SYN-ACK copy
    # arrives while data is outstanding and must not count as a duplicate ACK.
    rev = LinkModel(delay_us=2_000, duplicate=1.0)
    sim = Simulation(LinkModel(delay_us=2_000, rate_bps=1e6), rev, seed=1)
    cc = Recorder()
    s = sim.add_flow(cc, PatternSource(3 * MSS, MSS), config=cfg())
    sim.run(until_us=10_000_000)
    assert s.state is SenderState.DONE and s.fast_recoveries == 0
    assert not [a for n, a in cc.events if n == "dupack" and a.ack_seq == 0]


# -- the end-of-flow summary and its one line (flowlog) --------------------------------------
def test_summary_reports_stream_srtt_and_goodput_in_their_units_and_precision() -> None:
    """stream_bytes is the stream's length; srtt_ms is the smoothed RTT in ms to the
    microsecond, within the measured RTTs; goodput_bps = bytes * 8 / duration_s to
    0.1 b/s (docs/transport.md, "Summary")."""
    sim = Simulation(LinkModel(delay_us=5_000, rate_bps=8e6), LinkModel(delay_us=5_000), seed=1)
    s = sim.add_flow(NewReno(), PatternSource(50 * MSS, MSS), config=cfg())
    sim.run(until_us=10_000_000)
    summ = s.summary(sim.now_us)
    assert summ["status"] == "complete" and summ["bytes"] == summ["stream_bytes"] == 50 * MSS
    assert s.rto.srtt_us is not None and s.rto.srtt_us != int(s.rto.srtt_us)   # sub-us: rounding shows
    assert summ["srtt_ms"] == pytest.approx(s.rto.srtt_us / 1000, abs=5e-4)
    assert isinstance(summ["srtt_ms"], float) and summ["srtt_ms"] == round(summ["srtt_ms"], 3)
    assert summ["rtt_min_ms"] <= summ["srtt_ms"] <= summ["rtt_max_ms"]
    assert summ["goodput_bps"] == round(8 * summ["bytes"] / summ["duration_s"], 1)
    assert summ["goodput_bps"] != round(summ["goodput_bps"])                    # not cut to whole b/s


def test_an_empty_stream_acknowledged_at_once_lasts_zero_seconds_and_has_no_goodput() -> None:
    sim = Simulation(LinkModel(delay_us=0), LinkModel(delay_us=0), seed=1)
    s = sim.add_flow(NewReno(), PatternSource(0, MSS), config=cfg())
    sim.run(until_us=10_000_000)
    summ = s.summary(sim.now_us)
    assert (summ["status"], summ["bytes"], summ["stream_bytes"]) == ("complete", 0, 0)
    assert summ["duration_s"] == 0.0 and summ["goodput_bps"] is None
    assert summ["srtt_ms"] == 0.0


def test_percentile_interpolates_between_two_samples() -> None:
    from hosts.flowlog import percentile, rtt_stats_ms
    assert percentile([10, 20], 50) == 15.0 and percentile([10, 20], 95) == pytest.approx(19.5)
    assert percentile([7], 99) == 7.0 and percentile([], 50) is None
    stats = rtt_stats_ms([10_000, 20_000])
    assert (stats["rtt_p50_ms"], stats["rtt_mean_ms"], stats["rtt_min_ms"], stats["rtt_max_ms"]) == (
        15.0, 15.0, 10.0, 20.0)


def test_summary_line_without_a_status_ends_in_empty_parentheses() -> None:
    from hosts.flowlog import format_summary
    line = format_summary({"flow_id": 3, "algo": "newreno", "bytes": 10, "duration_s": 1.0,
                           "goodput_bps": 80.0, "retransmits": 0, "timeouts": 0, "sack": True})
    assert line == ("flow 3 newreno: 10 bytes in 1.000 s, goodput 0.000 Mb/s, retransmits 0, "
                    "timeouts 0, SACK, RTT p50/p95/p99/mean -/-/-/- ms ()")


def test_summary_line_writes_non_finite_figures_in_lower_case_like_the_csv_log() -> None:
    """inf and nan as the CSV log writes them (lower case), never 'INF' / 'NAN'."""
    from hosts.flowlog import format_summary
    inf, nan = float("inf"), float("nan")
    line = format_summary({"flow_id": 1, "algo": "x", "bytes": 0, "duration_s": inf,
                           "goodput_bps": nan, "retransmits": 0, "timeouts": 0, "sack": False,
                           "rtt_p50_ms": inf, "rtt_p95_ms": -inf, "rtt_p99_ms": nan,
                           "rtt_mean_ms": 1.0, "status": "complete"})
    assert line == ("flow 1 x: 0 bytes in inf s, goodput nan Mb/s, retransmits 0, timeouts 0, "
                    "no SACK, RTT p50/p95/p99/mean inf/-inf/nan/1.00 ms (complete)")


def test_jsonl_log_rows_are_compact_json_one_per_line(tmp_path: Any) -> None:
    """A .jsonl row: every field, in order, without spaces, non-finite floats as
    standard JSON (null, "inf")."""
    from hosts.flowlog import TimeSeriesLog
    path = tmp_path / "flow.jsonl"
    log = TimeSeriesLog(str(path), ["time_s", "flow_id", "cwnd", "extra"], interval_us=0)
    log.offer(1, 0, {"time_s": 0.5, "flow_id": 1, "cwnd": float("inf"), "extra": {"a": float("nan")}})
    log.offer(1, 1, {"time_s": 1.5, "flow_id": 1})
    log.close()
    assert path.read_text() == ('{"time_s":0.5,"flow_id":1,"cwnd":"inf","extra":{"a":null}}\n'
                                '{"time_s":1.5,"flow_id":1,"cwnd":null,"extra":null}\n')


# -- the simulated link itself (hosts.sim.channel.Direction) --------------------

class _Draws:
    """A random source that hands out the given draws, and fails if asked for more."""

    def __init__(self, *draws: float) -> None:
        self.draws = list(draws)

    def random(self) -> float:
        assert self.draws, "the link drew a random number it should not have"
        return self.draws.pop(0)


def _direction(model, rng):
    from hosts.sim.channel import Direction
    out: list = []
    return Direction(model, rng, lambda t, pkt, ce: out.append((t, pkt))), out


def test_the_simulated_link_serializes_frames_at_its_rate_behind_a_drop_tail_queue():
    """8 Mb/s is one byte per us: a 958-byte packet plus the 42-byte frame overhead
    leaves 1000 us after the one before it; `queue_packets` = 2 keeps one frame in
    service and two waiting, and a frame that has left frees its place at its very
    departure time."""
    from hosts.sim.channel import LinkModel
    link, out = _direction(LinkModel(delay_us=500, rate_bps=8e6, queue_packets=2), _Draws())
    for i in range(5):
        link.send(bytes([i]) * 958, 0)
    assert [t for t, _ in out] == [1500, 2500, 3500]
    assert link.stats.dropped_queue == 2 and link.stats.packets == 5
    link.send(b"\x05" * 958, 1000)                    # the first frame left at 1000: room
    assert out[-1] == (4500, b"\x05" * 958) and link.stats.dropped_queue == 2
    link.send(b"\x06" * 958, 1000)                    # full again
    assert link.stats.dropped_queue == 3 and len(out) == 4


def test_the_simulated_link_holds_back_the_packets_its_draw_reorders_and_counts_them():
    from hosts.sim.channel import LinkModel
    model = LinkModel(delay_us=1_000, reorder=0.5, reorder_extra_us=7_000)
    link, out = _direction(model, _Draws(0.5, 0.49, 0.9, 0.1))
    for i in range(4):
        link.send(bytes([i]), 100 * i)
    assert out == [(1_000, b"\x00"), (8_100, b"\x01"), (1_200, b"\x02"), (8_300, b"\x03")]
    assert link.stats.reordered == 2
    plain, out = _direction(LinkModel(delay_us=1_000), _Draws())   # no reordering: no draw
    plain.send(b"x", 5)
    assert out == [(1_005, b"x")] and plain.stats.reordered == 0


def test_udp_sockets_ask_for_big_buffers_forced_as_root_and_plain_otherwise(monkeypatch):
    """Both buffers get `buffer_bytes`: beyond rmem_max with SO_*BUFFORCE when allowed,
    else the plain option (the kernel then caps it). Python's socket module has no
    name for the forcing options: Linux's numbers, 33 and 32 (asm-generic/socket.h)."""
    import socket
    from hosts.transport import loop as transport_loop
    SO_RCVBUFFORCE, SO_SNDBUFFORCE = 33, 32

    class Refusing:
        def __init__(self, forced: bool) -> None:
            self.forced, self.set = forced, []

        def setsockopt(self, level, opt, value):
            if opt in (SO_RCVBUFFORCE, SO_SNDBUFFORCE) and not self.forced:
                raise PermissionError(1, "Operation not permitted")
            self.set.append((level, opt, value))

    for forced, expected in ((True, [SO_RCVBUFFORCE, SO_SNDBUFFORCE]),
                             (False, [socket.SO_RCVBUF, socket.SO_SNDBUF])):
        sock = Refusing(forced)
        monkeypatch.setattr(transport_loop.socket, "socket", lambda *a, s=sock: s)
        sock.bind = sock.connect = sock.setblocking = lambda *a: None
        assert transport_loop.open_udp_socket(buffer_bytes=123_456) is sock
        assert sock.set == [(socket.SOL_SOCKET, opt, 123_456) for opt in expected]


def test_the_simulation_runs_the_receivers_delayed_ack_timer():
    """delayed_ack reaches the receiver: one ACK per two segments, and the ACK held
    back for an odd last segment leaves when the receiver's 40 ms timer fires (the
    run loop serves the receiver's deadline), not at the sender's 200 ms RTO."""
    for delayed in (False, True):
        sim = Simulation(LinkModel(delay_us=5_000), LinkModel(delay_us=5_000), delayed_ack=delayed)
        s = sim.add_flow(NewReno(), PatternSource(11 * 1000, 1000), config=SenderConfig(mss_bytes=1000))
        sim.run(until_us=5_000_000)
        assert s.state is SenderState.DONE and s.retransmits == 0
        flow = next(iter(sim.receiver.flows.values()))
        if delayed:
            assert flow.acks_sent < 11 and sim.now_us < 200_000
        else:
            assert flow.acks_sent >= 11 + 2                  # SYN, every segment, FIN


def test_a_flows_clock_and_an_injected_packet_follow_the_times_given():
    """add_flow(start_us=T): the sender's SYN is sent at once, its retransmission timer
    counted from T (the initial RTO, 1 s, after it); inject(at_us=T): the receiver
    gets the datagram at T, not before (the flow, 100 kB at 1 Mb/s, runs past both)."""
    sim = Simulation(LinkModel(delay_us=1_000, rate_bps=1e6), LinkModel(delay_us=1_000))
    s = sim.add_flow(NewReno(), PatternSource(100_000, 1000), start_us=300_000,
                     config=SenderConfig(mss_bytes=1000))
    assert s.next_deadline_us() == 300_000 + 1_000_000
    sim.inject(b"\x00" * 7, ("10.9.9.9", 9), at_us=50_000)   # garbage, later
    sim.run(until_us=40_000)
    assert sim.receiver.stats_dict()["malformed_short"] == 0
    sim.run(until_us=60_000)
    assert sim.receiver.stats_dict()["malformed_short"] == 1


def test_a_finished_senders_last_log_row_is_written_whatever_the_interval(tmp_path):
    """However long the log interval, a sender writes a row when it is done: the
    flow log's last row is the flow's final state, at its end."""
    from hosts.flowlog import SENDER_FIELDS, TimeSeriesLog
    log = TimeSeriesLog(str(tmp_path / "s.jsonl"), SENDER_FIELDS, interval_us=10**9)
    sim = Simulation(LinkModel(delay_us=5_000), LinkModel(delay_us=5_000))
    s = sim.add_flow(NewReno(), PatternSource(20_000, 1000), config=SenderConfig(mss_bytes=1000), log=log)
    sim.run(until_us=5_000_000)
    log.close()
    assert s.state is SenderState.DONE and s.next_deadline_us() is None
    import json
    rows = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    assert len(rows) == 2                                   # the first ACK's, and the end's
    assert rows[-1]["time_s"] == pytest.approx((s.end_us - s.start_us) / 1e6)
    assert rows[-1]["delivered_bytes"] == 20_000


def test_the_simulation_keeps_no_packet_log_unless_asked():
    """sent_log holds every packet (memory grows with the run): off by default."""
    for keep in (False, True):
        sim = Simulation(LinkModel(delay_us=1_000), LinkModel(delay_us=1_000))
        if keep:
            sim.keep_log = True
        sim.add_flow(NewReno(), PatternSource(5_000, 1000), config=SenderConfig(mss_bytes=1000))
        sim.run(until_us=1_000_000)
        directions = {d for _, d, _ in sim.sent_log}
        assert directions == ({"fwd", "rev"} if keep else set())


class _ForcesOnce(NewReno):
    """NewReno that, at the `at`-th duplicate ACK, asks the transport for `n` forced
    segments (as GTCP does in its recoveries)."""

    def __init__(self, n: int, at: int = 4) -> None:
        super().__init__()
        self.n, self.at, self.asked_at_snd_max = n, at, None

    def on_dupack(self, st, ack):
        super().on_dupack(st, ack)
        if ack.dupacks == self.at:
            st.force_segments = self.n


def _forced_run(sack: bool, n: int, length: int, lost: set, window_bytes: int = 4 * 1024 * 1024,
                cc_cls: type = _ForcesOnce, **config: Any):
    """A flow whose CC forces `n` segments at the 4th duplicate ACK, over a link that
    drops the first transmission of the segments at `lost`. Returns (sender, the
    forward packets sent at that duplicate ACK, marks: snd_una and snd_max then and
    forced_segments at the next duplicate ACK, simulation)."""
    from hosts.transport.wire import F_DATA, F_RETX, TransportHeader

    def drop(t, pkt):
        h = TransportHeader.unpack(pkt)
        return bool(h.flags & F_DATA) and h.seq in lost and not h.flags & F_RETX

    sim = Simulation(LinkModel(delay_us=10_000, drop_if=drop), LinkModel(delay_us=10_000),
                     window_bytes=window_bytes)
    sim.keep_log = True
    cc = cc_cls(n)
    s = sim.add_flow(cc, PatternSource(length, MSS), config=SenderConfig(mss_bytes=MSS, sack=sack, **config))
    marks = {}
    real = cc.on_dupack

    def spy(st, ack):
        real(st, ack)
        if ack.dupacks == cc.at:
            marks.update(t=ack.now_us, sent=len(sim.sent_log), una=s.snd_una, snd_max=s.snd_max)
        elif ack.dupacks == cc.at + 1:
            marks.update(forced_next=s.forced_segments)    # all of them at once, not later

    cc.on_dupack = spy
    sim.run(until_us=30_000_000)
    assert s.state is SenderState.DONE and bytes(sim.sink_of(s).data) == pattern_bytes(0, length)
    at = [TransportHeader.unpack(p) for t, d, p in sim.sent_log[marks["sent"]:]
          if d == "fwd" and t == marks["t"]]
    return s, at, marks, sim


@pytest.mark.parametrize("length", [200_000, 11_500, 11_001], ids=["new-data", "stream-end", "one-byte-end"])
def test_forced_segments_are_new_data_outside_the_window_counted_once_each(length):
    """Without SACK, force_segments = 3 sends the next new segments at once, beyond
    cwnd, from snd_max on, each counted once in forced_segments; at the stream's end
    the last one is the rest of the stream and the unused credits are dropped."""
    from hosts.transport.wire import F_DATA, F_RETX, TransportHeader
    s, _, marks, sim = _forced_run(False, 3, length, {4000})
    rest, expected_lengths = length - marks["snd_max"], []
    while rest > 0 and len(expected_lengths) < 3:
        expected_lengths.append(min(1000, rest))
        rest -= expected_lengths[-1]
    if length in (11_500, 11_001):                # the cases are there for their short last one
        assert expected_lengths[-1] == length - 11_000 and len(expected_lengths) < 3, marks
    after = [(TransportHeader.unpack(p), len(p) - HEADERS_LEN) for _, d, p in sim.sent_log[marks["sent"]:]
             if d == "fwd"]
    forced = [(h.seq, n) for h, n in after if h.flags & F_DATA and not h.flags & F_RETX][:len(expected_lengths)]
    assert forced == [(marks["snd_max"] + 1000 * i, n) for i, n in enumerate(expected_lengths)]
    assert s.forced_segments == len(expected_lengths)
    # The forced segments moved snd_nxt with them: none of them is sent again.
    assert [h.seq for h, _ in after if h.flags & F_RETX] in ([], [4000])
    assert s.summary(sim.now_us)["spurious_retransmits"] == 0


def test_forced_segments_in_sack_recovery_take_the_lost_data_first_then_new_data():
    """With SACK, forced segments are what NextSeg() picks (RFC 6675 sec. 4): the
    lost, unSACKed segment first (rule 1), then new data (rule 2), at once, each
    counted once; nothing is resent that was not lost."""
    from hosts.transport.wire import F_RETX
    s, at, marks, sim = _forced_run(True, 2, 200_000, {4000, 6000})
    assert (marks["una"], marks["snd_max"]) == (4000, 12_000)
    assert [(h.seq, bool(h.flags & F_RETX)) for h in at] == [(6000, True), (12_000, False)]
    assert s.forced_segments == 2 and s.st.force_segments == 0
    assert marks["forced_next"] == 2                     # both at once, none left for later
    assert s.summary(sim.now_us)["spurious_retransmits"] == 0


def test_forced_credits_beyond_what_can_be_sent_are_dropped():
    """Asked for 30 segments with only one lost segment to resend and the stream all
    sent (its FIN too), a SACK recovery forces that one segment and drops the other
    credits: none is left to fire later, and the flow ends normally."""
    from hosts.transport.wire import F_RETX
    s, at, _, _ = _forced_run(True, 30, 12_000, {4000, 6000})
    assert [(h.seq, bool(h.flags & F_RETX)) for h in at] == [(6000, True)]
    assert s.forced_segments == 1 and s.st.force_segments == 0


@pytest.mark.parametrize("window_bytes,sent", [(8000, 2), (9000, 3)])
def test_forced_new_data_stays_within_the_receive_window(window_bytes, sent):
    """Forced segments are sent outside cwnd but never beyond the receiver's window:
    with 6 segments outstanding from snd_una 4000, an 8000-byte window leaves room
    for exactly two of the three asked (the last one ending at its edge), a
    9000-byte one for all three; the rest of the credits are dropped."""
    s, at, marks, _ = _forced_run(False, 3, 200_000, {4000}, window_bytes)
    assert (marks["una"], marks["snd_max"]) == (4000, 10_000)
    assert [h.seq for h in at] == [10_000 + MSS * i for i in range(sent)]
    assert s.forced_segments == sent and s.st.force_segments == 0


class _ForcesPaced(_ForcesOnce):
    """Forces its segments and sets a pacing rate (2 Mb/s) at the same duplicate ACK."""

    def on_dupack(self, st, ack):
        super().on_dupack(st, ack)
        if ack.dupacks == self.at:
            st.pacing_rate_bps = 2e6


@pytest.mark.parametrize("sack,first_new", [(False, 10_000), (True, 12_000)])
def test_forced_segments_wait_for_the_pacing_rate(sack, first_new):
    """Pacing delays forced segments and does not drop them: the first leaves at
    once, the next ones at the pacing rate (a 1000-byte segment is 1102 bytes of
    frame, 4 408 us at 2 Mb/s, after the 3 ms of lateness pacing may catch up),
    each still counted as forced, before the next ACK arrives."""
    from hosts.transport.wire import F_RETX, TransportHeader
    s, _, marks, sim = _forced_run(sack, 3, 200_000, {4000}, cc_cls=_ForcesPaced)
    t = marks["t"]
    sent = {TransportHeader.unpack(p).seq: when for when, d, p in sim.sent_log
            if d == "fwd" and when >= t and not TransportHeader.unpack(p).flags & F_RETX}
    assert [sent[first_new + MSS * i] for i in range(3)] == [t, t + 4408 - 3000, t + 2 * 4408 - 3000]
    assert s.forced_segments == 3 and marks["forced_next"] == 1


def test_forced_credits_are_dropped_when_the_application_has_no_new_data():
    """An application-limited source (1 Mb/s): at the duplicate ACK the application
    has written one more segment than was sent, so one forced segment leaves and the
    other two credits are dropped rather than kept to fire later; the stream is still
    delivered whole."""
    s, at, marks, _ = _forced_run(False, 3, 40_000, {4000}, app_rate_bps=1e6)
    assert [h.seq for h in at] == [marks["snd_max"]] == [10_000]
    assert s.forced_segments == 1 and s.st.force_segments == 0


def test_forced_credits_left_at_the_stream_end_let_the_fin_go_at_once():
    """Forced segments that reach the stream's end (the last one a single byte) are
    followed at the same instant by the FIN, and the credits left over are dropped.
    (Whether the FIN leaves in the same pump call as the forced segments or in the
    next one at that instant, this test cannot tell: _send_forced's return value on
    that path is not pinned by it.)"""
    from hosts.transport.wire import F_FIN
    s, at, _, _ = _forced_run(False, 3, 11_001, {4000})
    assert [(h.seq, bool(h.flags & F_FIN)) for h in at] == [(10_000, False), (11_000, False), (11_001, True)]
    assert s.forced_segments == 2 and s.st.force_segments == 0


def test_the_simulated_link_counts_what_it_drops_and_duplicates():
    """Direction.send: each packet draws once for loss (dropped and counted) and, if
    kept, once for duplication (two copies, counted once); the counts and the copies
    scheduled are what the same random sequence gives, packet by packet."""
    from hosts.sim.channel import Direction
    arrivals: list = []
    d = Direction(LinkModel(delay_us=1_000, loss=0.3, duplicate=0.2), random.Random(7),
                  lambda t, pkt, ce: arrivals.append((t, pkt)))
    replay = random.Random(7)
    expected_lost = expected_dup = expected_copies = 0
    for i in range(400):
        d.send(i.to_bytes(2, "big"), i * 10)
        if replay.random() < 0.3:
            expected_lost += 1
            continue
        dup = replay.random() < 0.2
        expected_dup += dup
        expected_copies += 2 if dup else 1
    assert (d.stats.packets, d.stats.dropped_loss, d.stats.duplicated) == (400, expected_lost, expected_dup)
    assert len(arrivals) == expected_copies and 80 < expected_lost < 160 and 30 < expected_dup < 90
    assert all(t == int.from_bytes(p, "big") * 10 + 1_000 for t, p in arrivals)


@pytest.mark.parametrize("limit", [3, 5])
def test_a_sender_gives_up_after_its_consecutive_timeouts(limit):
    """A path that stops carrying data after the 5th segment: the sender times out
    with backoff and fails at the timeout after `max_consecutive_timeouts` of them,
    saying how many, at that moment."""
    from hosts.transport.wire import F_DATA, TransportHeader

    def black_hole(t, pkt):
        h = TransportHeader.unpack(pkt)
        return bool(h.flags & F_DATA) and h.seq >= 5 * MSS

    sim = Simulation(LinkModel(delay_us=5_000, drop_if=black_hole), LinkModel(delay_us=5_000))
    s = sim.add_flow(NewReno(), PatternSource(20 * MSS, MSS), config=cfg(max_consecutive_timeouts=limit))
    sim.run(until_us=3_600_000_000)
    assert s.state is SenderState.FAILED and s.fail_reason == f"{limit} consecutive timeouts"
    assert s.timeouts == limit + 1 and s.snd_una == 5 * MSS
    assert isinstance(s.end_us, int) and s.end_us > 1_000_000
    assert s.summary(sim.now_us)["status"] == f"failed: {limit} consecutive timeouts"


@pytest.mark.parametrize("give_up", [1, 3])
def test_a_sender_whose_fin_is_never_acknowledged_ends_complete(give_up):
    """Every data byte acknowledged but the FIN lost every time: after
    `fin_give_up_timeouts` further timeouts the sender ends, complete (the data
    arrived), not failed."""
    from hosts.transport.wire import F_FIN, TransportHeader
    sim = Simulation(LinkModel(delay_us=5_000, drop_if=lambda t, p: bool(TransportHeader.unpack(p).flags & F_FIN)),
                     LinkModel(delay_us=5_000))
    s = sim.add_flow(NewReno(), PatternSource(20 * MSS, MSS), config=cfg(fin_give_up_timeouts=give_up))
    sim.run(until_us=3_600_000_000)
    assert s.state is SenderState.DONE and s.summary(sim.now_us)["status"] == "complete"
    assert s.timeouts == give_up + 1 and s.snd_una == 20 * MSS
    assert isinstance(s.end_us, int) and s.end_us > 0
    assert bytes(sim.sink_of(s).data) == pattern_bytes(0, 20 * MSS)


def _lost_thrice_then_late(sack: bool, log: Any = None) -> Tuple[Simulation, Any, Recorder]:
    """20 segments; segment 10 is lost three times (its first transmission, the
    fast retransmit and the retransmission at the first timeout) and 13-19 arrive
    300 ms late, after that timeout."""
    held = {fwd_index_of_seq(k * MSS) for k in range(13, 20)}
    losses: List[int] = []

    def drop(t: int, pkt: bytes) -> bool:
        h = TransportHeader.unpack(pkt)
        if h.flags & F_DATA and h.seq == 10 * MSS and len(losses) < 3:
            losses.append(t)
            return True
        return False

    fwd = LinkModel(delay_us=10_000, drop_if=drop, reorder_extra_us=300_000)
    sim = Simulation(fwd, LinkModel(delay_us=10_000), seed=1)
    sent = {"n": 0}
    orig_send = sim.forward._one

    def one(pkt: bytes, now_us: int, ce: bool = False) -> None:
        fwd.reorder = 1.0 if sent["n"] in held else 0.0
        sent["n"] += 1
        orig_send(pkt, now_us, ce)

    sim.forward._one = one  # type: ignore[assignment]
    cc = Recorder()
    s = sim.add_flow(cc, PatternSource(20 * MSS, MSS), config=cfg(sack=sack), log=log)
    sim.run(until_us=30_000_000)
    assert s.state is SenderState.DONE and len(losses) == 3
    assert bytes(sim.sink_of(s).data) == pattern_bytes(0, 20 * MSS)
    return sim, s, cc


@pytest.mark.parametrize("sack", [True, False], ids=["sack", "no-sack"])
def test_a_timeout_starts_the_duplicate_ack_count_afresh_and_old_dupacks_trigger_nothing(sack):
    """The late segments' duplicate ACKs count from 1 again (the count before the
    timeout does not carry over), and although there are seven of them they start no
    fast recovery: they acknowledge nothing beyond the timeout's recovery point
    (RFC 6582 sec. 3.2 step 2; RFC 6675 sec. 5.1)."""
    _, s, cc = _lost_thrice_then_late(sack)
    names = cc.names()
    before = names[:names.index("timeout")]
    assert before.count("dupack") == 3 and before.count("enter") == 1
    first_timeout = [n for n, _ in cc.events].index("timeout")
    after = [v.dupacks for n, v in cc.events[first_timeout:] if n == "dupack"]
    assert after[:7] == [1, 2, 3, 4, 5, 6, 7]
    assert s.fast_recoveries == 1 and s.timeouts == 2


def test_the_flow_log_shows_a_fast_recovery_ended_by_a_timeout(tmp_path):
    """Every row is logged (interval 0): rows in the fast recovery say so, and from
    the first timeout on every row says out of recovery (a timeout ends it, RFC 6582
    sec. 3.2) and counts the timeouts so far."""
    import json
    from hosts.flowlog import SENDER_FIELDS, TimeSeriesLog
    log = TimeSeriesLog(str(tmp_path / "s.jsonl"), SENDER_FIELDS, interval_us=0)
    _, s, _ = _lost_thrice_then_late(False, log)
    log.close()
    rows = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    assert [r["in_recovery"] for r in rows if r["timeouts"] == 0 and r["in_recovery"]]
    after = [r for r in rows if r["timeouts"] >= 1]
    assert after and all(r["in_recovery"] == 0 for r in after)
    assert rows[-1]["timeouts"] == s.timeouts == 2


def test_an_idle_application_limited_flow_has_no_retransmission_timer_running():
    """RFC 6298 sec. 5.2: when all outstanding data is acknowledged the timer stops.
    An application that writes one segment a second over a 20 ms path: between
    writes nothing is outstanding, so no timeout ever fires."""
    sim = Simulation(LinkModel(delay_us=10_000), LinkModel(delay_us=10_000), seed=1)
    s = sim.add_flow(NewReno(), PatternSource(5 * MSS, MSS), config=cfg(app_rate_bps=8 * MSS))
    sim.run(until_us=2_500_000)                    # between the 2nd and the 3rd write
    assert s.snd_una == s.snd_max and s.rto_deadline_us is None
    sim.run(until_us=30_000_000)
    assert s.state is SenderState.DONE and s.timeouts == 0 and s.retransmits == 0
