"""One port of the multi-hop simulator (hosts.sim.netsim.Port), packet by
packet: what it counts, when a packet leaves, and what it stamps. The scenarios
built on it are in tests/test_netsim.py."""
from __future__ import annotations

import struct
from typing import Any

import pytest

from hosts.sim.netsim import L2_L4_OVERHEAD_BYTES, NetFlow, NetworkSim, TokenBucket
from hosts.transport.wire import DATA_VK
from bwn.protocol.wire import ebn_encode_kbps

FRAME = 1000
FWD = struct.Struct("!BBBBIi")          # vk, hop, ebn, echo_ebn, narrow, tight (docs/wire-format.md)


def data_pkt(hop: int = 0, ebn: int = 0xFE, narrow: int = 0xFFFFFFFE, tight: int = 2**31 - 2) -> bytearray:
    """A DATA packet whose frame is 1000 bytes, carrying the given fields."""
    pkt = bytearray(FRAME - L2_L4_OVERHEAD_BYTES)
    FWD.pack_into(pkt, 0, DATA_VK, hop, ebn, 0, narrow, tight)
    return pkt


def flow(index: int, name: str = "", reserved_bps: float = 0.0) -> Any:
    return NetFlow(index, None, ("x", index), "d", [], [],  # type: ignore[arg-type]
                   TokenBucket(reserved_bps, 10 * FRAME) if reserved_bps else None, name or f"f{index}")


def test_a_port_counts_packets_and_frame_bytes_per_flow_and_delivers_after_the_delay():
    net = NetworkSim()
    port = net.port("p", rate_bps=8e6, delay_us=5_000)        # 1 ms per 1000-byte frame
    a, b = flow(0), flow(1)
    arrivals = [port.arrive(data_pkt(), a, 0), port.arrive(data_pkt(), b, 0), port.arrive(data_pkt(), a, 0)]
    assert arrivals == [6_000.0, 7_000.0, 8_000.0]            # serialised one after another, + delay
    assert port.stats.packets == 3
    assert port.stats.bytes_by_flow == {0: 2 * FRAME, 1: FRAME}
    assert port.arrive(data_pkt(), a, 10_000) == 16_000.0     # an idle port sends at once


def test_random_loss_drops_and_counts_each_packet_it_draws():
    net = NetworkSim(seed=3)
    lossy = net.port("l", rate_bps=8e6, delay_us=0, loss=1.0)
    assert [lossy.arrive(data_pkt(), flow(0), t) for t in range(4)] == [None] * 4
    assert (lossy.stats.packets, lossy.stats.dropped_loss, lossy.stats.bytes_by_flow) == (4, 4, {})
    clean = net.port("c", rate_bps=8e6, delay_us=0, loss=0.0)
    assert all(clean.arrive(data_pkt(), flow(0), t * 1_000) is not None for t in range(4))
    assert clean.stats.dropped_loss == 0


def test_in_profile_bytes_are_counted_per_reserved_flow():
    net = NetworkSim()
    port = net.port("e", rate_bps=80e6, delay_us=0, queue_packets=100, af_threshold_packets=50)
    r0, r1, be = flow(0, reserved_bps=8e6), flow(1, reserved_bps=8e6), flow(2)
    for t in range(3):
        for f in (r0, r1, be):
            port.arrive(data_pkt(), f, t * 1_000)             # 1 frame per ms each: the reserved rate
    assert port.stats.in_profile_bytes_by_flow == {0: 3 * FRAME, 1: 3 * FRAME}
    assert port.stats.in_profile == 6


def test_the_stamp_is_the_minimum_of_the_packet_and_the_port_and_the_hop_count_stops_at_255():
    """EBN code of the fair share (capacity / flows that sent DATA in the last
    period), narrow = capacity, tight = AB (OBP eq. 6), each the minimum with what
    the packet carries; hop count + 1, saturating at 255."""
    net = NetworkSim()
    port = net.port("p", rate_bps=8e6, delay_us=0, queue_packets=1000, ab_period_us=10_000)
    for i in range(4):                                        # 4 flows in the first period
        port.arrive(data_pkt(), flow(i), 0)
    late = data_pkt(hop=3)
    port.arrive(late, flow(0), 10_000)                        # closes it: share 2 Mb/s
    assert port.fair_share_bps == 2e6
    ab_kbps = int(port.ab_bps / 1000)                         # 8 Mb/s - 4 frames in 10 ms - queue
    assert ab_kbps == (8_000_000 - 4 * FRAME * 8 / 0.01) / 1000
    vk, hop, ebn, _, narrow, tight = FWD.unpack_from(late)
    assert (hop, ebn, narrow, tight) == (4, ebn_encode_kbps(2_000), 8_000, ab_kbps)
    low = data_pkt(hop=254, ebn=1, narrow=5, tight=-7)
    port.arrive(low, flow(0), 10_001)
    assert FWD.unpack_from(low)[1:] == (255, 1, 0, 5, -7)     # the packet's smaller values stay
    top = data_pkt(hop=255)
    port.arrive(top, flow(0), 10_002)
    assert FWD.unpack_from(top)[1] == 255
    port.arrive(data_pkt(), flow(0), 20_000)                  # the period of flow 0 alone
    assert port.fair_share_bps == 8e6


def test_stamp_only_stamps_the_named_flows_and_a_port_without_bwn_stamps_nothing():
    net = NetworkSim()
    port = net.port("p", rate_bps=8e6, delay_us=0, stamp_only={"long"})
    named, other = data_pkt(), data_pkt()
    port.arrive(named, flow(0, "long"), 0)
    port.arrive(other, flow(1, "cross"), 0)
    assert FWD.unpack_from(named)[1] == 1 and other == data_pkt()
    plain = net.port("q", rate_bps=8e6, delay_us=0, bwn=False)
    pkt = data_pkt()
    plain.arrive(pkt, flow(0), 0)
    assert pkt == data_pkt()


@pytest.mark.parametrize("threshold", [0, 10])
def test_an_af_threshold_from_0_to_the_queue_size_is_taken(threshold):
    assert NetworkSim().port("p", rate_bps=1e6, delay_us=0, queue_packets=10,
                             af_threshold_packets=threshold).af_threshold_packets == threshold


@pytest.mark.parametrize("threshold", [-1, 11])
def test_an_af_threshold_outside_the_queue_is_refused_with_the_rule(threshold):
    with pytest.raises(ValueError, match=r"^port p: need 0 <= af_threshold_packets <= queue_packets$"):
        NetworkSim().port("p", rate_bps=1e6, delay_us=0, queue_packets=10, af_threshold_packets=threshold)
