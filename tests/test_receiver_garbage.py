"""Receivers under garbage, in process: random datagrams, wrong flow ids,
duplicated and replayed segments, a SYN flood of 10 000 flow ids. The stream of a
real flow stays intact, memory stays bounded (flows time out), and every kind of
garbage is counted (Receiver.stats_dict). The same over a real socket between
network namespaces: tests/test_hosts_e2e_netns.py."""
from __future__ import annotations

import os
import random
import tracemalloc
from typing import List, Tuple

import pytest

from hosts.cc.newreno import NewReno
from hosts.transport.reassembly import MemorySink
from hosts.transport.receiver import DEFAULT_HALF_OPEN_TIMEOUT_US, HOUSEKEEPING_US, Receiver
from hosts.transport.sender import SenderConfig, SenderState
from hosts.sim.channel import RECEIVER_ADDR, LinkModel, Simulation
from hosts.transport.source import PatternSource, pattern_bytes
from hosts.transport.wire import (
    F_ACK,
    F_DATA,
    F_FIN,
    F_RST,
    F_SYN,
    HEADERS_LEN,
    TransportHeader,
    encode_options,
    pack_data_headers,
)

MSS = 1000
N = 400 * MSS


def syn(flow_id: int, ts: int = 0) -> bytes:
    buf = bytearray(HEADERS_LEN + 4)
    n = pack_data_headers(buf, F_SYN, flow_id, 0, ts, encode_options(sack_permitted=True))
    return bytes(buf[:n])


def data(flow_id: int, seq: int, payload: bytes, flags: int = F_DATA) -> bytes:
    buf = bytearray(HEADERS_LEN)
    pack_data_headers(buf, flags, flow_id, seq, 0)
    return bytes(buf) + payload


def real_flow(**receiver_kw: object) -> Tuple[Simulation, object]:
    sim = Simulation(LinkModel(delay_us=5_000, rate_bps=20e6, queue_packets=100),
                     LinkModel(delay_us=5_000), seed=1, receiver_kw=receiver_kw)
    sim.keep_log = True
    s = sim.add_flow(NewReno(), PatternSource(N, MSS), flow_id=77, config=SenderConfig(mss_bytes=MSS))
    return sim, s


def done_intact(sim: Simulation, s: object) -> None:
    assert s.state is SenderState.DONE, s.summary(sim.now_us)  # type: ignore[attr-defined]
    assert bytes(sim.sink_of(s).data) == pattern_bytes(0, N)  # type: ignore[arg-type]


def test_random_datagrams_are_counted_and_harmless() -> None:
    sim, s = real_flow()
    rng = random.Random(4)
    for i in range(3000):
        size = rng.choice([0, 1, 23, 59, 60, 61, 200, 1500])
        pkt = bytes(rng.getrandbits(8) for _ in range(size))
        sim.inject(pkt, ("10.9.9.9", 1000 + i % 7), at_us=i * 30)
    sim.run(until_us=30_000_000)
    done_intact(sim, s)
    st = sim.receiver.stats_dict()
    assert st["malformed"] >= 2900 and st["malformed_short"] > 0 and st["malformed_header"] > 0
    assert st["datagrams"] == st["malformed"] + sum(              # every datagram accounted for
        st[k] for k in ("syn_received", "unknown_flow", "unknown_rst")) + sim.receiver.flows[
        (("10.0.0.1", 40000), 77)].segments


def test_wrong_flow_ids_get_rst_and_do_not_touch_the_real_flow() -> None:
    sim, s = real_flow()
    for i in range(500):
        # the real sender's address, other flow ids; and the real flow id from elsewhere
        sim.inject(data(1000 + i, i * MSS, b"\xff" * MSS), ("10.0.0.1", 40000), at_us=i * 100)
        sim.inject(data(77, i * MSS, b"\xee" * MSS), ("10.0.0.66", 40000), at_us=i * 100 + 50)
    sim.run(until_us=30_000_000)
    done_intact(sim, s)
    st = sim.receiver.stats_dict()
    assert st["unknown_flow"] == 1000 and st["resets_sent"] == 1000
    assert s.bad_packets >= 500            # the RSTs for other flow ids reached our sender: ignored


def test_duplicated_and_replayed_segments() -> None:
    sim, s = real_flow()
    sim.run(until_us=100_000)                       # part of the stream has arrived
    recorded = [p for t, d, p in sim.sent_log if d == "fwd"]
    assert len(recorded) > 20
    delivered = sim.receiver.flows[(("10.0.0.1", 40000), 77)].rcv_nxt
    k = 0
    for pkt in recorded * 3:                        # every packet so far, three more times
        sim.inject(pkt, ("10.0.0.1", 40000), at_us=100_000 + k * 20)
        k += 1
        h = TransportHeader.unpack(pkt)
        if h.flags & F_DATA and h.seq + len(pkt) - HEADERS_LEN <= delivered:
            # A copy of delivered data with other bytes: it cannot rewrite the stream.
            # (Altering data still in flight is spoofing, which this transport does
            # not claim to resist: docs/transport.md "Not done / limits".)
            bad = bytearray(pkt)
            bad[HEADERS_LEN] ^= 0xFF
            sim.inject(bytes(bad), ("10.0.0.1", 40000), at_us=100_000 + k * 20)
            k += 1
    sim.run(until_us=30_000_000)
    done_intact(sim, s)
    flow = sim.receiver.flows[(("10.0.0.1", 40000), 77)]
    summary = flow.summary(sim.now_us)
    assert summary["duplicate_segments"] >= 3 * (len(recorded) - 1)
    # Replays carry old timestamps: the ACKs they trigger echo the newest one, so the
    # sender saw no RTT sample far above the path's 10 ms.
    assert max(s.rtt_samples.values) < 100_000  # type: ignore[attr-defined]


def test_syn_flood_of_10000_flow_ids_memory_bounded_flows_expire() -> None:
    sim, s = real_flow(max_half_open=1024)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    peak_half_open = 0
    rng = random.Random(1)
    for i in range(10_000):
        src = (f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}",
               rng.randrange(1024, 65536))
        sim.inject(syn(rng.getrandbits(32)), src, at_us=i * 20)   # 10 000 in 0.2 s
    t = 0
    while t < 250_000:
        t += 10_000
        sim.run(until_us=t)
        peak_half_open = max(peak_half_open, sim.receiver.half_open_count)
    grown = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    sim.run(until_us=30_000_000)
    done_intact(sim, s)
    st = sim.receiver.stats_dict()
    assert st["syn_received"] >= 10_000 and st["half_open_evicted"] >= 10_000 - 1024
    assert peak_half_open <= 1024
    assert grown < 8 * 1024 * 1024                   # bounded, whatever the flood's size
    # (the simulation stops with its last sender; the receiver's timer runs on)
    sim.receiver.on_timer(250_000 + DEFAULT_HALF_OPEN_TIMEOUT_US + HOUSEKEEPING_US)
    assert sim.receiver.half_open_count == 0          # the flood has timed out
    assert sim.receiver.stats_dict()["half_open_expired"] > 0


def test_half_open_flows_open_no_file_and_a_full_table_refuses_new_flows() -> None:
    opened: List[Tuple[object, int]] = []
    out: List[bytes] = []

    def sink(addr: object, fid: int) -> MemorySink:
        opened.append((addr, fid))
        return MemorySink()

    rx = Receiver(lambda v, a: out.append(bytes(v)) or True, sink, max_flows=2)
    for i in range(5):
        rx.on_datagram(syn(i), ("h", i), 0)
    assert opened == [] and rx.half_open_count == 5      # SYNs alone open no file
    for i in range(3):
        rx.on_datagram(data(i, 0, b"x" * 10), ("h", i), 1000)
    assert len(opened) == 2 and rx.open_count == 2
    assert rx.stats.flows_refused == 1
    assert TransportHeader.unpack(out[-1]).flags & F_RST  # the third was refused by RST
    rx.on_datagram(data(0, 10, b"", F_FIN), ("h", 0), 2000)
    assert rx.stats.flows_completed == 1


def test_out_of_order_memory_is_bounded_across_flows() -> None:
    rx = Receiver(lambda v, a: True, lambda a, f: MemorySink(), max_ooo_bytes=50_000)
    for fid in range(20):
        rx.on_datagram(syn(fid), ("h", fid), 0)
        for k in range(1, 11):                            # 10 KB each beyond a hole
            rx.on_datagram(data(fid, k * MSS, os.urandom(MSS)), ("h", fid), 10)
    assert rx.budget.used <= 50_000
    assert rx.stats_dict()["ooo_dropped_budget"] == 20 * 10 - 50
    flow = rx.flows[(("h", 0), 0)]
    rx.on_datagram(data(0, 0, b"y" * MSS), ("h", 0), 20)   # fills the hole: memory released
    assert flow.rcv_nxt == 11 * MSS and rx.budget.used == 40_000


def test_idle_open_flows_time_out() -> None:
    rx = Receiver(lambda v, a: True, lambda a, f: MemorySink(), idle_timeout_us=1_000_000)
    rx.on_datagram(syn(1), ("h", 1), 0)
    rx.on_datagram(data(1, 0, b"z" * 100), ("h", 1), 0)
    rx.on_datagram(data(1, 500, b"z" * 100), ("h", 1), 0)   # out of order: held
    assert rx.open_count == 1 and rx.budget.used == 100
    rx.on_timer(2_000_000)
    assert rx.open_count == 0 and not rx.flows and rx.budget.used == 0
    assert rx.stats.flows_idle_closed == 1


@pytest.mark.parametrize("addr", [RECEIVER_ADDR])
def test_rst_for_an_unknown_flow_is_not_answered(addr: object) -> None:
    out: List[bytes] = []
    rx = Receiver(lambda v, a: out.append(bytes(v)) or True, lambda a, f: MemorySink())
    rx.on_datagram(data(5, 0, b"", F_RST), addr, 0)
    assert out == [] and rx.stats.unknown_rst == 1


def test_a_completed_flow_in_time_wait_is_not_counted_open() -> None:
    sim, s = real_flow(time_wait_us=1_000_000)
    sim.run(until_us=60_000_000)
    done_intact(sim, s)
    st = sim.receiver.stats_dict()
    assert (st["open_flows"], st["time_wait_flows"], st["flows_completed"]) == (0, 1, 1)
    assert sim.receiver.open_count == 1                     # its state is still held...
    sim.receiver.on_timer(sim.now_us + 2_000_000)
    st = sim.receiver.stats_dict()
    assert (st["open_flows"], st["time_wait_flows"]) == (0, 0) and sim.receiver.open_count == 0


def test_a_flow_still_open_at_shutdown_stays_counted_open() -> None:
    rx = Receiver(lambda v, a: True, lambda a, f: MemorySink())
    rx.on_datagram(syn(1), ("h", 1), 0)
    rx.on_datagram(data(1, 0, b"z" * 100), ("h", 1), 0)
    assert [f.flow_id for f in rx.close_all(1_000)] == [1]
    st = rx.stats_dict()
    assert (st["open_flows"], st["time_wait_flows"]) == (1, 0)


def test_a_flows_end_is_counted_logged_closed_and_reported(tmp_path) -> None:
    """When a flow completes: its duplicate and spurious counts join the receiver's, its
    last log row is written whatever the interval, its sink is closed and the
    application hears of it once."""
    from hosts.flowlog import RECEIVER_FIELDS, TimeSeriesLog
    log = TimeSeriesLog(str(tmp_path / "r.csv"), RECEIVER_FIELDS, interval_us=10**9)
    ended: List[object] = []
    sinks: List[MemorySink] = []

    def sink_for(addr: object, flow_id: int) -> MemorySink:
        sinks.append(MemorySink())
        return sinks[-1]

    rx = Receiver(lambda v, a: True, sink_for, log=log, on_flow_end=ended.append)
    rx.on_datagram(syn(4), ("h", 1), 0)
    rx.on_datagram(data(4, 0, b"a" * 100), ("h", 1), 10)
    rx.on_datagram(data(4, 0, b"a" * 100), ("h", 1), 20)       # the same segment again
    rx.on_datagram(data(4, 100, b"", F_FIN), ("h", 1), 30)
    assert [f.flow_id for f in ended] == [4] and ended[0].closed_us == 30
    st = rx.stats_dict()
    assert st["duplicate_segments"] == 1 and st["flows_completed"] == 1
    assert sinks[0].closed and bytes(sinks[0].data) == b"a" * 100
    log.close()
    rows = (tmp_path / "r.csv").read_text().splitlines()
    assert len(rows) == 3 and rows[-1].split(",")[:5] == ["2e-05", "4", "h:1", "100", "0"]   # 20 us after its first packet


def test_the_receivers_totals_add_up_every_ended_flows_duplicates_and_spurious_retransmissions() -> None:
    """Two flows over a link that duplicates a tenth of their packets: the receiver-wide
    counters (bwn-recv --stats-json) are the sums of the two flows' own counts,
    copies that came after a flow's end included; and a flow's summary rounds its duration to the microsecond and
    its goodput to 0.1 b/s."""
    sim = Simulation(LinkModel(delay_us=5_000, rate_bps=20e6, queue_packets=100, duplicate=0.1),
                     LinkModel(delay_us=5_000), seed=3)
    senders = [sim.add_flow(NewReno(), PatternSource(N // 4, MSS), flow_id=fid,
                            config=SenderConfig(mss_bytes=MSS)) for fid in (5, 6)]
    sim.run(until_us=30_000_000)
    flows = list(sim.receiver.flows.values())
    assert len(flows) == 2 and all(s.state is SenderState.DONE for s in senders)
    dups = [f.duplicate_segments for f in flows]
    assert all(d > 0 for d in dups)
    totals = sim.receiver.stats_dict()
    assert totals["duplicate_segments"] == sum(dups)
    assert totals["spurious_retransmissions"] == sum(f.spurious_retransmissions for f in flows)
    assert totals["half_open_flows"] == 0 and totals["ooo_bytes_held"] == 0
    flow = flows[0]
    summary = flow.summary(sim.now_us)
    duration_s = (flow.closed_us - flow.first_us) / 1e6
    assert summary["duration_s"] == round(duration_s, 6)
    assert summary["goodput_bps"] == round(flow.rcv_nxt * 8 / duration_s, 1)


def test_half_open_flows_and_held_out_of_order_bytes_are_in_the_receivers_totals() -> None:
    rx = Receiver(lambda pkt, addr: None, lambda addr, fid: MemorySink())
    for fid in (1, 2, 3):
        rx.on_datagram(syn(fid), ("10.0.0.9", 4000 + fid), 0)
    assert rx.stats_dict()["half_open_flows"] == 3


def test_a_reset_acknowledges_nothing_and_offers_no_window() -> None:
    """The RST|ACK that answers a DATA segment of no flow: ack 0 and window 0, so the
    sender takes nothing from it but the reset; it echoes the segment's timestamp."""
    sent: List[Tuple[bytes, object]] = []
    rx = Receiver(lambda view, addr: sent.append((bytes(view), addr)) or True, lambda a, f: MemorySink())
    rx.on_datagram(data(9, 5000, b"x" * 10), ("h", 1), 70)
    (pkt, addr), = sent
    h = TransportHeader.unpack(pkt)
    assert addr == ("h", 1) and h.flags == F_RST | F_ACK and h.flow_id == 9
    assert (h.ack, h.rwnd_bytes, h.ts_val_us) == (0, 0, 70)
    assert rx.stats_dict()["resets_sent"] == 1 and rx.stats_dict()["unknown_flow"] == 1


def test_shutdown_ends_only_the_flows_still_open_at_its_time() -> None:
    """close_all(now): the established flows that have not completed end at `now`
    (their sink closed, the application told); complete and half-open ones are left."""
    ended: List[object] = []
    rx = Receiver(lambda v, a: True, lambda a, f: MemorySink(), on_flow_end=ended.append)
    for fid, port in ((1, 1), (2, 2)):
        rx.on_datagram(syn(fid), ("h", port), 0)
        rx.on_datagram(data(fid, 0, b"a" * 10), ("h", port), 10)
    rx.on_datagram(data(2, 10, b"", F_FIN), ("h", 2), 20)        # flow 2 completes
    rx.on_datagram(syn(3), ("h", 3), 30)                         # flow 3 stays half-open
    assert [f.flow_id for f in ended] == [2]
    still = rx.close_all(500)
    assert [f.flow_id for f in still] == [1] and [f.flow_id for f in ended] == [2, 1]
    assert still[0].closed_us == 500 and still[0].sink.closed


def test_time_wait_ends_exactly_its_length_after_the_close() -> None:
    sim, s = real_flow(time_wait_us=1_000_000)
    sim.run(until_us=60_000_000)
    done_intact(sim, s)
    rx = sim.receiver
    (flow,) = rx.flows.values()
    assert flow.in_time_wait and flow.closed_us is not None
    rx.expire(flow.closed_us + 999_999)
    assert rx.open_count == 1                                 # 1 us short: still held
    rx.expire(flow.closed_us + 1_000_000)
    assert rx.open_count == 0 and rx.stats_dict()["time_wait_flows"] == 0


def test_half_open_flows_time_out_oldest_first() -> None:
    """A SYN at 0 and another at 600 us, a 1 ms half-open timeout: at 1 ms only the
    first has waited that long; the second is kept until its own 1 ms."""
    rx = Receiver(lambda v, a: True, lambda a, f: MemorySink(), half_open_timeout_us=1_000)
    rx.on_datagram(syn(1), ("h", 1), 0)
    rx.on_datagram(syn(2), ("h", 2), 600)
    rx.expire(1_000)
    assert [f.flow_id for f in rx.flows.values()] == [2] and rx.stats.half_open_expired == 1
    rx.expire(1_600)
    assert not rx.flows and rx.stats.half_open_expired == 2
