"""The fidelity invariants' arithmetic on synthetic samples: each one breaks
alone, at its threshold and not before (bwn/analysis/fidelity.py, docs/fidelity.md)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bwn.analysis import fidelity
from bwn.analysis.fidelity import Thresholds
from bwn.emulation.monitor import Monitor, PortSpec
from bwn.rundir import RunDir, RunMeta
from bwn.linkem.scheduler import LATE_BINS, LATE_SHIFT, DirectionScheduler, lateness_summary
from bwn.linkem.config import Impairment

TH = Thresholds()


# -- synthetic inputs that hold every invariant ------------------------------------------

def cpu_samples(idle_shares, dt=0.1, ticks_per_sample=20):
    """Cumulative (t, total, idle) samples whose intervals have these idle shares."""
    t, total, idle = 0.0, 0.0, 0.0
    out = [(t, total, idle)]
    for share in idle_shares:
        t += dt
        total += ticks_per_sample
        idle += share * ticks_per_sample
        out.append((t, total, idle))
    return out


SINE_TABLE = {"kind": "sine", "b_mbit": 0.1102, "alpha": 3.0, "w_rad_s": 1.0, "phi_rad": 0.0}


def linkem(p99_us=200.0, frames=5000, max_us=900.0, dropped_offload=0, dropped_oversize=0,
           schedule_started_s=0.25):
    """One emulator: a_to_b as given, serving a sine whose schedule started at
    ``schedule_started_s`` (None: never); b_to_a on time with 5000 frames; the
    offload drops (bwn-link's counters) in a_to_b."""
    late = {"frames": frames, "p50_us": 16.4, "p99_us": p99_us, "max_us": max_us}
    on_time = {"frames": 5000, "p50_us": 16.4, "p99_us": 50.0, "max_us": 200.0}
    return {"em0": {"schedule_started_s": schedule_started_s,
                    "a_to_b": {"lateness": late, "rx_frames": frames, "dropped_offload": dropped_offload,
                               "dropped_oversize": dropped_oversize,
                               "config": {"rate_schedule": SINE_TABLE}},
                    "b_to_a": {"lateness": on_time, "rx_frames": 5000, "dropped_offload": 0,
                               "dropped_oversize": 0, "config": {"rate_schedule": None}}}}


def switches(ring_drops=0, in_pkts=10_000):
    return {"s1": {"in_pkts": in_pkts, "out_pkts": in_pkts - 100, "ring_drops": ring_drops, "p4_drops": {}}}


def port(ratio=1.0, pps=1000.0, seconds=5.0, queue_pkts=20.0, dt=0.1):
    """A port backlogged for `seconds` whose packets leave at ratio * pps."""
    n = int(seconds / dt)
    tx = [(i * dt, ratio * pps * i * dt) for i in range(n + 1)]
    queue = [(i * 0.25, queue_pkts) for i in range(int(seconds / 0.25) + 1)]
    return {"s1:2": {"tx": tx, "queue": queue, "pps": [(0.0, pps)]}}


def evaluate(**overrides):
    args = {"cpu": cpu_samples([0.3] * 50), "linkem_stats": linkem(), "switches": switches(),
            "ports": port()}
    args.update(overrides)
    return fidelity.evaluate(args["cpu"], args["linkem_stats"], args["switches"], args["ports"], TH)


def test_all_held_is_valid():
    result = evaluate()
    assert result.valid, result.summary()
    assert [c.name for c in result.checks] == list(fidelity.INVARIANTS)
    assert all(c.held for c in result.checks)
    assert result.summary() == "valid"
    assert result.to_json()["valid"] is True


# -- CPU: idle never 0 for more than 1 s -----------------------------------------------

def test_cpu_breaks_alone_when_saturated_longer_than_limit():
    shares = [0.3] * 10 + [0.0] * 12 + [0.3] * 10      # 1.2 s without idle CPU
    result = evaluate(cpu=cpu_samples(shares))
    assert [c.name for c in result.broken] == ["cpu"]
    cpu = result.checks[0]
    assert cpu.value == pytest.approx(1.2)
    assert "1.20 s" in cpu.detail and "t=1.0 s" in cpu.detail
    assert result.summary().startswith("INVALID: cpu: BROKEN")


def test_cpu_holds_at_the_limit_and_resets_between_stretches():
    # 1.0 s saturated, a moment of idle, 1.0 s again: never more than 1 s in a row.
    shares = [0.0] * 10 + [0.05] + [0.0] * 10
    check = fidelity.cpu_check(cpu_samples(shares))
    assert check.held, check.detail
    assert check.value == pytest.approx(1.0)


def test_cpu_idle_floor_is_the_saturation_boundary():
    below = fidelity.cpu_check(cpu_samples([TH.cpu_idle_floor / 2] * 20))
    above = fidelity.cpu_check(cpu_samples([TH.cpu_idle_floor + 0.05] * 20))
    assert below.held is False and above.held is True


def test_cpu_without_samples_is_not_judged():
    assert fidelity.cpu_check([(0.0, 10.0, 5.0)]).held is None


# -- bwn-link lateness: p99 < 1 ms -------------------------------------------------------

def test_lateness_breaks_alone_above_1ms():
    result = evaluate(linkem_stats=linkem(p99_us=1500.0, max_us=8000.0))
    assert [c.name for c in result.broken] == ["linkem_lateness"]
    check = result.broken[0]
    assert check.value == 1500.0
    assert "em0 a_to_b" in check.detail and "1 of 2 directions" in check.detail


def test_lateness_at_1ms_holds_and_few_frames_are_not_judged():
    assert fidelity.lateness_check(linkem(p99_us=1000.0)).held is True
    few = fidelity.lateness_check(linkem(p99_us=5000.0, frames=TH.lateness_min_frames - 1))
    assert few.held is True          # the other direction (p99 50 us) is judged
    assert fidelity.lateness_check({}).held is None


def test_lateness_histogram_quantiles_from_the_scheduler():
    """bwn-link's histogram: p99 is the upper edge of the bin that holds it, so a
    run is never judged better than it was; max is exact."""
    bin_us = (1 << LATE_SHIFT) / 1000
    bins = [0] * LATE_BINS
    bins[0] = 980                       # 980 frames on time
    bins[100] = 20                      # 20 frames ~1.64 ms late
    summary = lateness_summary(bins, max_ns=1_700_000)
    assert summary["frames"] == 1000
    assert summary["p50_us"] == pytest.approx(bin_us)
    assert summary["p99_us"] == pytest.approx(min(101 * bin_us, 1700.0))
    assert summary["max_us"] == 1700.0
    bins[100] = 5                       # now only 0.5 % late: p99 is on time
    assert lateness_summary(bins, 1_700_000)["p99_us"] == pytest.approx(bin_us)
    bins[LATE_BINS - 1] = 20            # 2 % later than the span: p99 is a lower bound
    beyond = lateness_summary(bins, max_ns=90_000_000)
    assert beyond["p99_us"] == pytest.approx((LATE_BINS - 1) * bin_us)
    assert beyond["p99_us_beyond_span"] is True and beyond["max_us"] == 90_000.0
    check = fidelity.lateness_check({"em0": {"a_to_b": {"lateness": beyond}}})
    assert check.held is False and "worst p99 >= 4178 us" in check.detail


def test_scheduler_records_how_late_frames_left():
    sched = DirectionScheduler(Impairment(delay_us=1000), seed=1)
    for i in range(100):
        sched.admit(b"x" * 100, now_ns=i * 1000)
    sent = []
    # Released 3 ms after the last frame was due: every frame is late by 3..3.1 ms.
    sched.release_due(now_ns=99 * 1000 + 1_000_000 + 3_000_000, send=sent.append)
    assert len(sent) == 100
    late = sched.lateness()
    assert late["frames"] == 100
    assert 3000 <= late["p50_us"] <= 3000 + 2 * late["bin_us"] + 100
    # Below the histogram's span (~4.2 ms) the maximum is the last bin's upper edge.
    assert 3099.0 <= late["max_us"] <= 3099.0 + late["bin_us"]
    # Beyond the span it is exact.
    sched.admit(b"x" * 100, now_ns=10_000_000)
    sched.release_due(now_ns=10_000_000 + 1_000_000 + 7_654_321, send=sent.append)
    assert sched.lateness()["max_us"] == pytest.approx(7654.321)
    assert sched.lateness()["frames"] == 101


# -- switch receive rings: nothing dropped before the switch read it ---------------------

def test_switch_ring_drops_break_alone():
    result = evaluate(switches=switches(ring_drops=3))
    assert [c.name for c in result.broken] == ["switch_rx_drops"]
    assert "3 frames" in result.broken[0].detail
    assert result.broken[0].value == pytest.approx(3 / 10_000)


def test_switch_ring_stats_unreadable_is_not_judged():
    check = fidelity.switch_drop_check({"s1": {"in_pkts": 10, "ring_drops": None}})
    assert check.held is None


# -- bwn-link: nothing dropped for its offload state or size -----------------------------

@pytest.mark.parametrize("counter", ["dropped_offload", "dropped_oversize"])
def test_linkem_offload_drops_break_alone(counter):
    result = evaluate(linkem_stats=linkem(**{counter: 3}))
    assert [c.name for c in result.broken] == ["linkem_offload_drops"]
    check = result.broken[0]
    assert check.value == 3.0 and check.limit == 0
    assert f"{counter} 3" in check.detail and "em0 a_to_b" in check.detail
    assert result.summary().startswith("INVALID: linkem_offload_drops: BROKEN: 3 frames")
    one = fidelity.linkem_offload_check(linkem(**{counter: 1}))
    assert one.held is False, "a single dropped frame breaks it"


def test_linkem_offload_drops_are_summed_over_emulators_and_directions():
    stats = {**linkem(dropped_offload=1), "em1": linkem(dropped_oversize=2)["em0"]}
    stats["em1"]["b_to_a"]["dropped_offload"] = 4
    check = fidelity.linkem_offload_check(stats)
    assert check.held is False and check.value == 7.0
    assert "dropped_offload 5, dropped_oversize 2" in check.detail
    assert "most at em1 b_to_a" in check.detail
    assert [(i["emulator"], i["direction"]) for i in check.items] == \
        [("em0", "a_to_b"), ("em0", "b_to_a"), ("em1", "a_to_b"), ("em1", "b_to_a")]


def test_linkem_offload_drops_not_judged_without_counters():
    assert fidelity.linkem_offload_check({}).held is None
    assert "no bwn-link" in fidelity.linkem_offload_check({}).detail
    old = {"em0": {"a_to_b": {"lateness": {"frames": 10}}, "b_to_a": {}}}   # bwn-link before the counters
    check = fidelity.linkem_offload_check(old)
    assert check.held is None and "no offload counters" in check.detail


def test_a_time_varying_bwn_link_rate_never_started_breaks_alone():
    result = evaluate(linkem_stats=linkem(schedule_started_s=None))
    assert [c.name for c in result.broken] == ["linkem_schedule"]
    assert result.broken[0].detail == "0 of 1 time-varying bwn-link rates started; never started: em0 a_to_b"
    held = fidelity.linkem_schedule_check(linkem(schedule_started_s=0.25))
    assert held.held is True and "(at 0.250 s at the latest)" in held.detail


def test_linkem_schedule_not_judged_without_a_time_varying_rate():
    stats = linkem(schedule_started_s=None)
    stats["em0"]["a_to_b"]["config"]["rate_schedule"] = {"kind": "constant", "rate_mbit": 5.0}
    assert fidelity.linkem_schedule_check(stats).held is None
    del stats["em0"]["a_to_b"]["config"]                      # bwn-link from before schedules
    assert fidelity.linkem_schedule_check(stats).held is None
    assert fidelity.linkem_schedule_check({}).held is None


def test_monitor_records_and_judges_the_offload_counters_bwn_link_writes(tmp_path):
    """The counters under the names bwn-link's Counters writes into --stats-json,
    read back by the runner's Monitor: a measurement and a broken invariant."""
    from bwn.linkem.scheduler import Counters

    def stats(**counts):
        c = Counters()
        c.rx_frames = 1000
        for key, value in counts.items():
            setattr(c, key, value)
        return {"iface_a": "em0-eth0", "iface_b": "em0-eth1", "a_to_b": c.as_dict(), "b_to_a": Counters().as_dict()}

    path = tmp_path / "em0-linkem.json"
    path.write_text(json.dumps(stats(dropped_oversize=2)))
    monitor = Monitor(tmp_path, [], [], linkem_stats=[path])
    monitor.start()
    monitor.stop()
    result = monitor.result().to_json()
    assert result["valid"] is False and result["broken"] == ["linkem_offload_drops"]
    recorded = result["measurements"]["linkem_offload_drops"]
    assert recorded[0] == {"emulator": "em0", "direction": "a_to_b", "rx_frames": 1000,
                           "dropped_offload": 0, "dropped_oversize": 2}
    path.write_text(json.dumps(stats()))
    assert monitor.result().to_json()["checks"]["linkem_offload_drops"]["held"] is True


# -- departure rate within 5 % of the configured rate while backlogged -------------------

def test_departure_rate_breaks_alone_when_slow():
    result = evaluate(ports=port(ratio=0.93))
    assert [c.name for c in result.broken] == ["departure_rate"]
    check = result.broken[0]
    assert check.value == pytest.approx(0.07, abs=0.002)
    assert "ratio 0.930" in check.detail


def test_departure_rate_within_tolerance_holds():
    assert fidelity.departure_rate_check(port(ratio=0.96)).held is True
    assert fidelity.departure_rate_check(port(ratio=1.04)).held is True
    assert fidelity.departure_rate_check(port(ratio=1.06)).held is False


def test_departure_rate_only_judged_while_backlogged():
    # Slow departures, but the queue never held 2 packets: nothing to judge.
    ports = port(ratio=0.5, queue_pkts=1.0)
    assert fidelity.departure_rate_check(ports).held is None
    # Too short a stretch (fewer packets due than the minimum): not judged either.
    short = port(ratio=0.5, pps=10.0, seconds=5.0)
    assert fidelity.departure_rate_check(short).held is None


def test_departure_rate_uses_the_configured_schedule():
    """The rate changes mid-stretch: the expected count is the integral of the steps."""
    dt = 0.1
    tx, count = [], 0.0
    for i in range(101):
        t = i * dt
        tx.append((t, count))
        count += (1000.0 if t < 5 else 500.0) * dt
    ports = {"s1:2": {"tx": tx, "queue": [(i * 0.25, 10.0) for i in range(41)],
                      "pps": [(0.0, 1000.0), (5.0, 500.0)]}}
    check = fidelity.departure_rate_check(ports)
    assert check.held is True and check.value < 0.01
    ports["s1:2"]["pps"] = [(0.0, 1000.0)]          # as if the controller never slowed it
    assert fidelity.departure_rate_check(ports).held is False


def test_backlogged_stretches_split_on_low_queue_and_gaps():
    q = [(0.0, 5), (0.25, 5), (0.5, 0), (0.75, 5), (1.0, 5), (3.0, 5), (3.25, 5)]
    assert fidelity.backlogged_stretches(q, 2, max_gap_s=1.0) == [(0.0, 0.25), (0.75, 1.0), (3.0, 3.25)]


def test_integral_of_steps():
    pts = [(0.0, 10.0), (2.0, 20.0)]
    assert fidelity.integral_steps(pts, 1.0, 3.0) == pytest.approx(30.0)
    assert fidelity.integral_steps(pts, -1.0, 0.0) == pytest.approx(10.0)   # first value holds before


def test_run_validity_of_old_and_new_run_json():
    assert RunMeta().validity == (None, "not checked")
    assert RunMeta(fidelity={"valid": False, "summary": "INVALID: cpu"}).validity == (False, "INVALID: cpu")
    verdict = fidelity.FidelityResult([fidelity.Check("cpu", False, detail="2.4 s")]).to_json()
    assert RunMeta(fidelity=verdict).validity == (False, "INVALID: cpu: BROKEN: 2.4 s")


def test_departure_rate_waits_for_packets_queued_before_a_rate_change():
    """BMv2 schedules a packet's departure when it is enqueued: after the rate
    halves, the 500 queued packets still leave at the old rate for 1 s. That
    second is not judged; the rest is, at the new rate."""
    dt, tx, count = 0.05, [], 0.0
    for i in range(201):
        t = i * dt
        tx.append((t, count))
        count += (1000.0 if t < 6 else 500.0) * dt          # old rate until 5 s + 500/500 s
    ports = {"s1:2": {"tx": tx, "queue": [(i * 0.25, 400.0) for i in range(41)],
                      "pps": [(0.0, 1000.0), (5.0, 500.0)], "queue_capacity_pkts": 500}}
    check = fidelity.departure_rate_check(ports)
    assert check.held is True, check.detail
    starts = [s["t0_s"] for s in check.items[0]["detail"]]
    assert starts[0] == 0.0 and starts[1] == pytest.approx(6.0)
    ports["s1:2"]["queue_capacity_pkts"] = 0                 # as if packets switched rate at once
    assert fidelity.departure_rate_check(ports).held is False


def test_steady_windows():
    wins = fidelity.steady_windows([(0.0, 100.0), (2.0, 50.0), (3.0, 200.0)], queue_capacity_pkts=50)
    # 50 pps from 2 s: its queue drains until 2 + 50/50 = 3 s, when the rate changes again.
    assert wins == [(-float("inf"), 2.0, 100.0), (pytest.approx(4.0), float("inf"), 200.0)]


# -- backlog from the switch's queue_emptied counter -------------------------------------

def test_busy_stretches_split_where_a_packet_left_the_queue_empty():
    # ticks (t, tx, emptied): busy from the first tick after a departure while the
    # count holds; the count moving in (0.4, 0.5] ends the span at 0.4.
    ticks = [(0.0, 0, 3), (0.1, 100, 3), (0.2, 200, 3), (0.3, 300, 3), (0.4, 400, 3),
             (0.5, 480, 4), (0.6, 580, 4), (0.7, 680, 4)]
    assert fidelity.busy_stretches(ticks, max_gap_s=1.0) == [(0.1, 0.4), (0.6, 0.7)]


def test_busy_stretches_never_start_on_an_idle_port():
    # The count never moves but nothing leaves until 0.3: whether the queue held
    # anything before the first departure is unknown, so the span starts after it.
    ticks = [(0.0, 0, 0), (0.1, 0, 0), (0.2, 0, 0), (0.3, 50, 0), (0.4, 150, 0), (0.5, 250, 0)]
    assert fidelity.busy_stretches(ticks, max_gap_s=1.0) == [(0.3, 0.5)]
    assert fidelity.busy_stretches([(t, 0, 0) for t, _, _ in ticks], max_gap_s=1.0) == []
    # a gap in the ticks (a stalled sampler) ends a span too
    gap = [(0.0, 0, 0), (0.1, 100, 0), (0.2, 200, 0), (2.0, 1900, 0), (2.1, 2000, 0), (2.2, 2100, 0)]
    assert fidelity.busy_stretches(gap, max_gap_s=1.0) == [(0.1, 0.2), (2.1, 2.2)]


def tcp_like_port(drain_idle: bool) -> dict:
    """1000 pps port whose queue samples every 0.25 s all show >= 2 packets, yet
    in each second it idles for 0.3 s (a sawtooth that drains between samples):
    the telemetry cannot tell; the emptied counter can."""
    tx, emptied, count, empties = [], [], 0, 0
    for i in range(101):
        t = round(i * 0.1, 3)
        tx.append((t, count))
        emptied.append((t, empties))
        idle = drain_idle and (i % 10) in (4, 5, 6)
        count += 0 if idle else 100
        empties += 1 if idle and (i % 10) == 4 else 0
    return {"s1:2": {"tx": tx, "emptied": emptied, "pps": [(0.0, 1000.0)], "queue_capacity_pkts": 60,
                     "queue": [(j * 0.25, 5.0) for j in range(41)]}}


def test_departure_rate_false_alarm_of_queue_samples_is_gone_with_the_counter():
    ports = tcp_like_port(drain_idle=True)
    check = fidelity.departure_rate_check(ports)
    assert check.held is True, check.detail
    assert check.items[0]["backlog_from"] == "queue_emptied"
    # the same run judged from the queue samples alone: the idle 30 % reads as a slow port
    del ports["s1:2"]["emptied"]
    check = fidelity.departure_rate_check(ports)
    assert check.held is False and check.items[0]["backlog_from"] == "queue_samples"


def test_departure_rate_with_the_counter_still_catches_a_slow_switch():
    # backlogged throughout (count never moves), but only 900 of 1000 pps left
    tx = [(round(i * 0.1, 3), 90 * i) for i in range(101)]
    ports = {"s1:2": {"tx": tx, "emptied": [(t, 7) for t, _ in tx], "pps": [(0.0, 1000.0)],
                      "queue_capacity_pkts": 60, "queue": []}}
    check = fidelity.departure_rate_check(ports)
    assert check.held is False and check.value == pytest.approx(0.1, abs=0.01)


def test_one_stray_frame_opens_no_span():
    # the interface sent one frame that never went through the queue (the kernel's
    # own, or a race at teardown), then nothing: not a stalled backlog
    assert fidelity.busy_stretches([(0.0, 0, 5), (0.1, 1, 5), (0.2, 1, 5), (0.3, 1, 5)], 1.0) == []
    ports = {"s1:1": {"tx": [(0.0, 0), (0.1, 1), (0.2, 1)], "emptied": [(0.0, 5), (0.1, 5), (0.2, 5)],
                      "pps": [(0.0, 122_549.0)], "queue_capacity_pkts": 64, "queue": []}}
    assert fidelity.departure_rate_check(ports).held is None


def test_for_network_checks_departures_only_where_the_switch_serves_the_rate(tmp_path):
    """A port with a schedule is rate-limited by its switch unless its link's bwn-link
    serves the rate (shaper = "link"): only the first kind gets a departure-rate check."""
    from bwn.scenario.schedule import ConstantSchedule
    from controller.switchctl import PortPlan, SwitchPlan

    class Intf:
        def __init__(self, name: str) -> None:
            self.name = name

    class Switch:
        proc = None
        intfs = {0: Intf("lo"), 1: Intf("s1-eth1"), 2: Intf("s1-eth2"), 3: Intf("s1-eth3")}

    class Net:
        def get(self, name: str) -> Switch:
            assert name == "s1"
            return Switch()

    plan = SwitchPlan("s1", "127.0.0.1:50100", 9190, ports=[
        PortPlan(1, "access"),
        PortPlan(2, "by-switch", ConstantSchedule(5e6), queue_packets=50),
        PortPlan(3, "by-link", ConstantSchedule(5e6), queue_packets=50, shaped_by_switch=False)])
    built = type("Built", (), {"net": Net(), "plans": [plan], "linkem_nodes": []})()
    monitor = Monitor.for_network(tmp_path, built, telemetry_interval_s=0.25)
    assert [(p.port, p.intf, p.link, p.rate_limited) for p in monitor.ports] == [
        (1, "s1-eth1", "access", False), (2, "s1-eth2", "by-switch", True), (3, "s1-eth3", "by-link", False)]


def test_a_port_served_in_bytes_counts_its_departures_in_frames_of_its_unit(tmp_path):
    """The eBPF switch's htb serves bytes: a port whose frame unit is set counts its
    departures as its interface's tx_bytes over that unit (so ACKs count as the
    fraction of a frame they take of the link); a port served in packets counts
    tx_packets. Read on loopback, whose counters only grow."""
    def counter(name: str) -> int:
        return int(Path(f"/sys/class/net/lo/statistics/{name}").read_text())

    monitor = Monitor(tmp_path, [], [PortSpec("s1", 2, "lo", True, 50, "bytes", frame_unit_bytes=1000),
                                     PortSpec("s1", 3, "lo", True, 50, "packets")])
    bytes0, packets0 = counter("tx_bytes"), counter("tx_packets")
    monitor.start()
    monitor.stop()
    bytes1, packets1 = counter("tx_bytes"), counter("tx_packets")
    frames = monitor.tx["s1:2"][0][1]
    assert bytes0 / 1000 <= frames <= bytes1 / 1000
    assert packets0 <= monitor.tx["s1:3"][0][1] <= packets1
    series = monitor._port_series()
    assert series["s1:2"]["tx_unit_bytes"] == 1000 and series["s1:3"]["tx_unit_bytes"] == 0


def test_port_utilization_counts_against_the_schedule_not_the_rate_written_to_the_queue(tmp_path):
    """measurements.ports: packets sent / packets the schedule allowed. Under the
    controller's queue look-ahead the queue is written the schedule shifted by its drain
    time (capacity.csv queue_pps), which is not what the link owed; files from before
    the schedule_pps column count by the written rate (then the same thing)."""
    key = "s1:2"

    def utilization(rows: list[str]) -> float:
        RunDir(tmp_path).capacity_csv.write_text("\n".join(rows) + "\n")
        monitor = Monitor(tmp_path, [], [PortSpec("s1", 2, "s1-eth2", True, 50, "C-D")])
        monitor.start()
        monitor.stop()
        origin = monitor.time_origin_s
        monitor.tx[key] = [(origin + 1.0, 0), (origin + 11.0, 190)]       # 190 packets in 10 s
        return monitor.result().to_json()["measurements"]["ports"][key]["utilization"]

    head = "t_s,link,switch,port,rate_bps,queue_pps,schedule_pps"
    # the schedule allowed 20 pps (200 packets); the queue was written 25 pps
    assert utilization([head, "0.000,C-D,s1,2,176320,25.00,20.00"]) == 0.95
    assert utilization(["t_s,link,switch,port,rate_bps,queue_pps", "0.000,C-D,s1,2,176320,20.00"]) == 0.95
    assert utilization([head, "0.000,C-D,s1,2,176320,20.00,20.00", "6.000,C-D,s1,2,88160,10.00,10.00"]) \
        == round(190 / (5 * 20 + 5 * 10), 4)


# -- per-port drops ------------------------------------------------------------------------

def test_monitor_counts_each_ports_drops_once_its_queue_has_drained(tmp_path, monkeypatch):
    """port_drops: over the run, a port's packets handed to it less those that left
    its queue (tail drops), RED's and AF's drops, RED's marks; the end counts are read
    once the queue stopped sending (packets still queued are not drops)."""
    from bwn.emulation import monitor as mon
    from controller import entries as ent

    counts = {ent.PORT_ENQUEUED_COUNTER: 100, ent.PORT_DEQUEUED_COUNTER: 100, ent.RED_DROPPED_COUNTER: 2,
              ent.RED_MARKED_COUNTER: 5, ent.PORT_DROPS_COUNTER: 1}
    reads = []

    class FakeReader:
        def __init__(self, thrift_port: int) -> None:
            self.thrift_port = thrift_port

        def open(self) -> bool:
            return True

        def read(self, counter: str, index: int):
            reads.append((counter, index))
            if counter == ent.PORT_DROPS_COUNTER:
                assert index == ent.port_drops_index(2, "af_out_of_profile")
            elif counter == ent.PORT_DEQUEUED_COUNTER and counts[counter] < counts[ent.PORT_ENQUEUED_COUNTER] - 4:
                counts[counter] += 1        # the queue still drains, a packet per read
            return counts[counter]

        def close(self) -> None:
            pass

    monkeypatch.setattr(mon, "CounterReader", FakeReader)
    monkeypatch.setattr(mon, "QUIET_S", 0.05)
    monkeypatch.setattr(mon, "SETTLE_POLL_S", 0.005)
    switch = mon.SwitchProbe("s1", None, 9190, [], {})
    monitor = Monitor(tmp_path, [switch], [PortSpec("s1", 2, "s1-eth2", False, 50, "bottleneck")])
    monitor.start()                                     # an idle port: 100 in, 100 out
    for name, more in ((ent.PORT_ENQUEUED_COUNTER, 400), (ent.RED_DROPPED_COUNTER, 7),
                       (ent.RED_MARKED_COUNTER, 30), (ent.PORT_DROPS_COUNTER, 3)):
        counts[name] += more
    monitor.stop()
    # dequeued drained to enqueued - 4 = 496: tail drops 4 over the run
    assert counts[ent.PORT_DEQUEUED_COUNTER] == 496
    assert monitor.port_drops() == {"s1:2": {"link": "bottleneck", "tail": 4, "red": 7, "af": 3,
                                             "drops": 14, "marked": 30}}
    assert monitor.result().to_json()["measurements"]["port_drops"]["s1:2"]["drops"] == 14


def test_settled_waits_until_no_port_sends_and_gives_up_in_time(monkeypatch):
    from bwn.emulation import monitor as mon
    t = [0.0]
    monkeypatch.setattr(mon, "SETTLE_MAX_S", 1.0)
    moving = iter(range(10_000))
    got = mon.settled(lambda: {"a": {"dequeued": next(moving)}}, sleep=lambda s: t.__setitem__(0, t[0] + s),
                      clock=lambda: t[0])
    assert 1.0 <= t[0] < 1.2 and got["a"]["dequeued"] >= 10          # never still: the cap
    t[0] = 0.0
    assert mon.settled(lambda: {"a": {"dequeued": 7}}, sleep=lambda s: t.__setitem__(0, t[0] + s),
                       clock=lambda: t[0]) == {"a": {"dequeued": 7}}
    assert mon.QUIET_S <= t[0] < mon.QUIET_S + 2 * mon.SETTLE_POLL_S
