"""controller/ebpf.py: what the controller writes to the PSA program, checked
against the program's arithmetic (p4src/psa/include/ingress.p4) and the
v1model entries it mirrors. No root, no NIKSS: these are the numbers."""
from __future__ import annotations

import pytest

from bwn.protocol import dataplane_math as dm
from controller import ebpf as eb
from controller import entries as ent
from controller.nikss import EXACT, LPM, TERNARY, le_bytes
from controller.switchctl import PortPlan, SwitchPlan
from bwn.scenario.schedule import ConstantSchedule

HOST_MAC, SWITCH_MAC = "00:00:00:00:00:02", "00:00:00:00:01:01"


def test_route_carries_the_ifindex_the_port_index_and_both_macs():
    e = eb.route("10.0.2.2/32", 17, 2, HOST_MAC, SWITCH_MAC)
    assert (e.table, e.action) == (eb.T_ROUTES, "BwnIngress_route")
    [key] = e.keys
    assert (key.kind, key.value, key.prefix_len) == (LPM, 0x0A000202, 32)
    assert e.params == (17, 2, 2 * dm.FLOW_SLOTS, 0x000000000002, 0x000000000101)


def test_checked_route_takes_loss_and_the_af_threshold_in_bytes():
    opts = ent.PortOptions(loss=0.25, reservations=True, af_queue_packets=5)
    e = eb.route("10.0.2.2/32", 17, 2, HOST_MAC, SWITCH_MAC, opts, frame_bytes=1066)
    assert e.action == "BwnIngress_route_checked"
    loss, word = e.params[-2:]
    assert loss == dm.loss_threshold(0.25) == 1 << 30
    assert word >> 31 == 1                       # this switch is the reservations' edge
    assert word & 0x7FFFFFFF == 5 * 1066         # 5 frames of the port's size


def test_route_refuses_a_port_without_state():
    with pytest.raises(dm.ConfigError):
        eb.route("10.0.2.2/32", 17, dm.MAX_PORTS, HOST_MAC, SWITCH_MAC)


def test_capacity_shift_converts_bytes_per_window_to_kbps_exactly():
    window = ent.WindowConfig(window_us=16_384)
    e = eb.port_capacity(2, 10e6, window)
    cap_bytes, cap_kbps, cap_log7, shift = e.params
    assert (cap_bytes, cap_kbps) == (20480, 10_000)
    assert shift == window.window_log2 - 6 == 8
    # the program: (x * 125) >> shift, BMv2's set_port_14 is the same
    for x in (0, 1, cap_bytes, 12345, -5000):
        assert (x * 125) >> shift == dm.window_bytes_to_kbps(x, window.window_us)


def test_window_config_is_v1models_in_us():
    w = ent.WindowConfig(window_us=65_536, flow_window_us=1 << 20)
    e = eb.window_config(w)
    assert e.params == (dm.window_mask(65_536), 65_536, dm.window_mask(1 << 20) & dm.U32_MAX, 1 << 20)


def _program_drain(q_fp: int, gap_ns: int, vq: eb.VirtualQueue) -> int:
    """p4src/psa/include/ingress.p4's drain of q_fp over gap_ns."""
    drained = q_fp if gap_ns >= vq.idle_ns else (gap_ns * vq.rate_fp + 0x8000) >> 16
    assert gap_ns >= vq.idle_ns or gap_ns * vq.rate_fp + 0x8000 < 2**64   # no overflow in 64 bits
    return max(0, q_fp - drained)


@pytest.mark.parametrize("rate_bps", [10e3, 1e6, 10e6, 1e9, 10e9])
def test_virtual_queue_rate_is_the_qdiscs_within_its_rounding(rate_bps):
    vq = eb.VirtualQueue.of(rate_bps, 100 * 1514)
    assert abs(vq.rate_bps - rate_bps) / rate_bps <= 0.5 / vq.rate_fp + 1e-12
    # draining for the time a full queue takes at the rate empties it (to a byte)
    full = vq.limit_bytes << 16
    t_ns = round(vq.limit_bytes * 8e9 / rate_bps)
    assert _program_drain(full, t_ns, vq) >> 16 <= 1
    # and half that time leaves half of it (to 0.1 %)
    half = _program_drain(full, t_ns // 2, vq) / 65536
    assert abs(half - vq.limit_bytes / 2) <= 0.001 * vq.limit_bytes + 1


def test_virtual_queue_drift_over_a_busy_period_is_below_a_byte():
    """130 000 arrivals into a never-empty queue: the program's per-packet
    rounding against exact arithmetic (docs/dataplane.md, "PSA on eBPF")."""
    rate = 10e6
    vq = eb.VirtualQueue.of(rate, 10**9)
    q_fp, exact = 1000 << 16, 1000.0
    gap_ns = 850_123                      # a little less than 1066 bytes' time at 10 Mb/s
    per_ns = vq.rate_fp / 2**32           # the rate the program uses (its rounding is the other error)
    for _ in range(130_000):
        q_fp = _program_drain(q_fp, gap_ns, vq) + (1066 << 16)
        exact = max(0.0, exact - gap_ns * per_ns) + 1066
    assert abs(q_fp / 65536 - exact) < 1.0


def test_virtual_queue_dry_time_matches_the_drain():
    vq = eb.VirtualQueue.of(2e6, 60 * 1000)
    for q_bytes in (1, 1000, 60_000):
        q_fp = q_bytes << 16
        dry_ns = ((q_fp >> 8) * vq.drain_fp) >> 24        # the program's queue_dry - now
        exact_ns = q_bytes * 8e9 / 2e6
        assert abs(dry_ns - exact_ns) <= 1e-6 * exact_ns + 1


def test_virtual_queue_refuses_what_it_cannot_hold():
    with pytest.raises(dm.ConfigError):
        eb.VirtualQueue.of(0, 1000)
    with pytest.raises(dm.ConfigError):
        eb.VirtualQueue.of(1e6, 0)
    with pytest.raises(dm.ConfigError):         # 4 GB at 1 kb/s: years to drain
        eb.VirtualQueue.of(1e3, 2**32 - 1)


def test_reservation_keys_are_in_the_tables_order_and_wildcards_are_masked_out():
    res = ent.Reservation(src="10.0.1.1", dst="10.0.2.2", rate_bps=400e3, dst_port=16983, burst_bytes=2000)
    entry, rates = eb.reservation(res, 3)
    assert [k.kind for k in entry.keys] == [TERNARY] * 5
    src, dst, sport, dport, proto = entry.keys
    assert (src.value, src.mask) == (0x0A000101, 0xFFFFFFFF)
    assert (sport.value, sport.mask) == (0, 0)                  # any source port
    assert (dport.value, dport.mask) == (16983, 0xFFFF)
    assert (proto.value, proto.mask) == (17, 0xFF)
    assert entry.params == (3, ent.DSCP_AF11)
    assert entry.priority == res.priority
    assert rates.cir_bytes_per_s == rates.pir_bytes_per_s == 50_000
    with pytest.raises(dm.ConfigError):
        eb.reservation(res, eb.RESERVATION_METERS)


def test_telemetry_digest_decodes_a_negative_ab_and_the_queue_in_frames():
    d = {"port": 17, "pidx": 2, "window_start_us": 123, "capacity_kbps": 2000, "rate_kbps": 3200,
         "avail_kbps": (-1234) & 0xFFFFFFFF, "queue_bytes": 25_600, "flows_current": 3, "flows_last": 5,
         "ebn_code": 77, "cap_log7": 1404}
    t = eb.EbpfTelemetry.from_digest(d)
    assert t.avail_kbps == -1234
    r = t.as_port_telemetry(queue_unit_bytes=1024)
    assert (r.port, r.queue_pkts, r.flows, r.ebn_code) == (2, 25, 5, 77)


def test_route_entries_of_a_plan_follow_its_ports_options(monkeypatch):
    monkeypatch.setattr(eb, "ifindex", lambda name, netns=None: {"s1-eth1": 11, "s1-eth2": 12}[name])
    plan = SwitchPlan(name="s1", target="ebpf", pipe_id=100, ifnames={1: "s1-eth1", 2: "s1-eth2"})
    plan.routes = [("10.0.1.1/32", 1, HOST_MAC, SWITCH_MAC), ("10.0.2.1/32", 2, HOST_MAC, SWITCH_MAC)]
    plan.ports = [PortPlan(port=1, link="a"), PortPlan(port=2, link="b", schedule=ConstantSchedule(5e6),
                                                      loss=0.1, frame_bytes=1066)]
    es = eb.route_entries(plan, {2: 1066})
    assert [e.action for e in es] == ["BwnIngress_route", "BwnIngress_route_checked"]
    assert es[1].params[0] == 12 and es[1].params[-2] == dm.loss_threshold(0.1)
    assert [e.params[0] for e in eb.route_entries(plan, {}, only_port=1)] == [11]


def test_nikss_data_is_little_endian_in_the_fields_bytes():
    assert le_bytes(0x0102, 32) == b"\x02\x01\x00\x00"
    assert le_bytes(0) == b"\x00"
    with pytest.raises(ValueError):
        le_bytes(-1)
    with pytest.raises(ValueError):
        le_bytes(1 << 32, 32)
    assert EXACT == 0
