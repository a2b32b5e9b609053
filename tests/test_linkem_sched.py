"""Unit tests of the link emulator's scheduling and impairments (no sockets, no root).

The scheduler is driven by a fake clock (integer nanoseconds).  Random
impairments are checked against binomial bounds: |count - N p| <= 4 sigma for
N = 20000 frames, with a fixed seed so the run is deterministic.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from typing import Dict, List, Sequence, Tuple

import pytest

from bwn.linkem import DirectionScheduler, Impairment, LinkConfig

N = 20_000
US = 1_000
MS = 1_000_000


def frame(seq: int, size: int = 100) -> bytes:
    return seq.to_bytes(4, "big") + bytes(size - 4)


def seq_of(f: bytes) -> int:
    return int.from_bytes(f[:4], "big")


def simulate(
    sched: DirectionScheduler, arrivals: Sequence[Tuple[int, bytes]]
) -> List[Tuple[int, bytes]]:
    """Event-driven run: release every frame exactly at its release time."""
    out: List[Tuple[int, bytes]] = []
    now = [0]

    def send(f: bytes) -> None:
        out.append((now[0], f))

    for t, f in arrivals:
        while True:
            due = sched.next_due_ns()
            if due is None or due > t:
                break
            now[0] = due
            sched.release_due(due, send)
        sched.admit(f, t)
    while True:
        due = sched.next_due_ns()
        if due is None:
            break
        now[0] = due
        sched.release_due(due, send)
    return out


def periodic(n: int, gap_ns: int, size: int = 100) -> List[Tuple[int, bytes]]:
    return [(1_000 * MS + i * gap_ns, frame(i, size)) for i in range(n)]


def within_binomial(count: int, n: int, p: float, sigmas: float = 4.0) -> bool:
    sd = math.sqrt(n * p * (1 - p))
    return abs(count - n * p) <= sigmas * sd


def check_invariant(sched: DirectionScheduler) -> None:
    c = sched.counters
    assert c.rx_frames + c.duplicated == (
        c.forwarded_frames + c.dropped_loss + c.dropped_queue + c.dropped_limit
        + c.tx_errors + c.pending_at_exit + sched.pending()
    )


# -- constant delay ---------------------------------------------------------------


def test_plain_delay_is_exact_and_in_order():
    sched = DirectionScheduler(Impairment(delay_us=10_000), seed=1)
    arrivals = periodic(1000, 37 * US)
    out = simulate(sched, arrivals)
    assert [f for _, f in out] == [f for _, f in arrivals]
    assert all(tr - ta == 10 * MS for (ta, _), (tr, _) in zip(arrivals, out))
    assert sched.counters.forwarded_frames == 1000
    assert sched.counters.forwarded_bytes == 100_000
    check_invariant(sched)


def test_zero_delay_releases_immediately():
    sched = DirectionScheduler(Impairment(), seed=1)
    sched.admit(frame(0), 5)
    assert sched.next_due_ns() == 5
    got: List[bytes] = []
    assert sched.release_due(5, got.append) == 1
    assert got == [frame(0)]


# -- random impairments: binomial bounds ------------------------------------------


@pytest.mark.parametrize("p", [0.01, 0.1, 0.5])
def test_loss_rate_within_binomial_bounds(p):
    sched = DirectionScheduler(Impairment(delay_us=1000, loss=p), seed=42)
    out = simulate(sched, periodic(N, 50 * US))
    lost = sched.counters.dropped_loss
    assert within_binomial(lost, N, p), (lost, N * p)
    assert len(out) == N - lost
    seqs = [seq_of(f) for _, f in out]
    assert seqs == sorted(seqs)  # loss alone never reorders
    check_invariant(sched)


@pytest.mark.parametrize("p", [0.02, 0.2])
def test_duplicate_rate_within_binomial_bounds(p):
    sched = DirectionScheduler(Impairment(delay_us=1000, duplicate=p), seed=7)
    out = simulate(sched, periodic(N, 50 * US))
    dup = sched.counters.duplicated
    assert within_binomial(dup, N, p), (dup, N * p)
    assert len(out) == N + dup
    seqs = [seq_of(f) for _, f in out]
    assert sum(1 for a, b in zip(seqs, seqs[1:]) if a == b) == dup  # copy right behind
    check_invariant(sched)


@pytest.mark.parametrize("p", [0.01, 0.1])
def test_reorder_rate_and_definition(p):
    hold_us = 1000
    gap_us = 100  # 10 frames arrive during one hold: all of them overtake
    sched = DirectionScheduler(Impairment(delay_us=5000, reorder=p, reorder_hold_us=hold_us), seed=3)
    arrivals = periodic(N, gap_us * US)
    out = simulate(sched, arrivals)
    held = sched.counters.reordered
    assert within_binomial(held, N, p), (held, N * p)
    assert len(out) == N
    arrival_t = {seq_of(f): t for t, f in arrivals}
    for t, f in out:
        extra = t - arrival_t[seq_of(f)] - 5 * MS
        assert extra in (0, hold_us * US)  # either on time or held exactly hold_us
    # Every held frame is overtaken by the frames arriving in its hold time,
    # i.e. it is released after a frame with a higher sequence number.
    max_seen = -1
    late = 0
    for _, f in out:
        s = seq_of(f)
        if s < max_seen:
            late += 1
        max_seen = max(max_seen, s)
    assert held - 1 <= late <= held  # all overtaken (except the last frame, if held)
    check_invariant(sched)


def test_reorder_hold_defaults_to_delay_at_least_1ms():
    assert Impairment(delay_us=20_000).effective_reorder_hold_us == 20_000
    assert Impairment(delay_us=200).effective_reorder_hold_us == 1000
    assert Impairment(delay_us=200, reorder_hold_us=300).effective_reorder_hold_us == 300


# -- jitter --------------------------------------------------------------------------


def test_jitter_never_reorders_without_reordering():
    d, j = 10_000, 8_000
    sched = DirectionScheduler(Impairment(delay_us=d, jitter_us=j), seed=11)
    arrivals = periodic(N, 100 * US)  # much denser than the jitter: many would overtake
    out = simulate(sched, arrivals)
    assert [seq_of(f) for _, f in out] == list(range(N))
    times = [t for t, _ in out]
    assert times == sorted(times)
    delays = [tr - ta for (ta, _), (tr, _) in zip(arrivals, out)]
    assert min(delays) >= (d - j) * US
    assert max(delays) > (d + j // 2) * US  # jitter does act
    assert len(set(delays)) > N // 2


def test_jitter_reorders_when_asked():
    sched = DirectionScheduler(Impairment(delay_us=10_000, jitter_us=8_000, jitter_reorders=True), seed=11)
    arrivals = periodic(2000, 100 * US)
    out = simulate(sched, arrivals)
    seqs = [seq_of(f) for _, f in out]
    assert sorted(seqs) == list(range(2000)) and seqs != sorted(seqs)
    delays = {seq_of(f): tr for tr, f in out}
    for ta, f in arrivals:  # each frame's own delay stays in [D-J, D+J]
        assert 2 * MS <= delays[seq_of(f)] - ta <= 18 * MS


def test_jitter_larger_than_delay_clamps_at_zero():
    sched = DirectionScheduler(Impairment(delay_us=1000, jitter_us=5000), seed=5)
    arrivals = periodic(5000, 1 * MS)
    out = simulate(sched, arrivals)
    assert all(tr >= ta for (ta, _), (tr, _) in zip(arrivals, out))


# -- rate limit and queue ------------------------------------------------------------


def test_rate_limit_spacing():
    rate_bps = 10_000_000  # 1000-byte frames: 800 us each
    sched = DirectionScheduler(Impairment(delay_us=5000, rate_bps=rate_bps, queue_packets=100), seed=1)
    burst = [(0, frame(i, 1000)) for i in range(50)]  # all at once
    out = simulate(sched, burst)
    assert len(out) == 50
    times = [t for t, _ in out]
    assert times[0] == 800 * US + 5 * MS  # serialization of the first frame + delay
    assert all(b - a == 800 * US for a, b in zip(times, times[1:]))


def test_rate_limit_mixed_sizes_and_idle_link():
    sched = DirectionScheduler(Impairment(rate_bps=8_000_000, queue_packets=10), seed=1)  # 1 us/byte
    out = simulate(sched, [(0, frame(0, 100)), (0, frame(1, 500)), (10 * MS, frame(2, 64))])
    assert [t for t, _ in out] == [100 * US, 600 * US, 10 * MS + 64 * US]


def test_queue_overflow_is_drop_tail():
    q = 10
    sched = DirectionScheduler(Impairment(rate_bps=8_000_000, queue_packets=q), seed=1)
    burst = [(0, frame(i, 1000)) for i in range(30)]
    out = simulate(sched, burst)
    # One frame on the wire plus q waiting are accepted, the rest dropped.
    assert [seq_of(f) for _, f in out] == list(range(q + 1))
    assert sched.counters.dropped_queue == 30 - (q + 1)
    assert sched.counters.dropped_loss == 0
    check_invariant(sched)


def test_queue_drains_at_the_rate():
    # Offered 2x the rate for 2000 frames: about half are dropped, and the
    # accepted ones leave exactly one serialization time apart.
    sched = DirectionScheduler(Impairment(rate_bps=8_000_000, queue_packets=20), seed=1)
    arrivals = [(i * 500 * US, frame(i, 1000)) for i in range(2000)]  # 1000 B / 500 us = 16 Mbit/s
    out = simulate(sched, arrivals)
    assert abs(len(out) - 1000) <= 25
    times = [t for t, _ in out]
    assert min(b - a for a, b in zip(times, times[1:])) == 1 * MS
    assert sched.counters.dropped_queue == 2000 - len(out)


def test_rate_with_loss_dup_reorder_keeps_invariant():
    imp = Impairment(delay_us=2000, jitter_us=500, loss=0.05, duplicate=0.05, reorder=0.05,
                     rate_bps=50_000_000, queue_packets=30)
    sched = DirectionScheduler(imp, seed=9)
    out = simulate(sched, periodic(N, 20 * US, size=200))
    c = sched.counters
    assert c.dropped_queue > 0 and c.dropped_loss > 0 and c.duplicated > 0 and c.reordered > 0
    assert len(out) == c.forwarded_frames
    check_invariant(sched)


# -- determinism, limits, errors -----------------------------------------------------


def test_same_seed_same_result_different_seed_differs():
    imp = Impairment(delay_us=1000, jitter_us=300, loss=0.1, duplicate=0.05, reorder=0.05)
    arrivals = periodic(3000, 50 * US)
    r1 = simulate(DirectionScheduler(imp, seed=123), arrivals)
    r2 = simulate(DirectionScheduler(imp, seed=123), arrivals)
    r3 = simulate(DirectionScheduler(imp, seed=124), arrivals)
    assert r1 == r2
    assert r1 != r3


def test_link_config_seeds_directions_independently():
    cfg = LinkConfig.symmetric(Impairment(loss=0.5), seed=10)
    assert cfg.direction_seed("a_to_b") != cfg.direction_seed("b_to_a")
    assert LinkConfig().direction_seed("a_to_b") is None


def test_limit_packets_bounds_the_delay_line():
    sched = DirectionScheduler(Impairment(delay_us=100_000, limit_packets=100), seed=1)
    for i in range(150):
        sched.admit(frame(i), i)
    assert sched.pending() == 100
    assert sched.counters.dropped_limit == 50
    assert sched.discard_pending() == 100
    assert sched.counters.pending_at_exit == 100
    check_invariant(sched)


def test_send_errors_are_counted_not_raised():
    sched = DirectionScheduler(Impairment(), seed=1)
    for i in range(3):
        sched.admit(frame(i), 0)
    calls = []

    def send(f: bytes) -> int:
        calls.append(f)
        if len(calls) == 2:
            raise OSError(105, "No buffer space available")
        return len(f)

    assert sched.release_due(0, send) == 3
    assert sched.counters.tx_errors == 1 and sched.counters.forwarded_frames == 2
    check_invariant(sched)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"loss": 1.5}, "loss must be a fraction in [0, 1]"),
        ({"loss": -0.1}, "loss must be a fraction in [0, 1]"),
        ({"reorder": float("nan")}, "reorder must be a fraction in [0, 1]"),
        ({"duplicate": float("inf")}, "duplicate must be a fraction in [0, 1]"),
        ({"delay_us": -1}, "delay_us must not be negative"),
        ({"jitter_us": -5}, "jitter_us must not be negative"),
        ({"rate_bps": 1_000_000}, "a rate limit needs a queue size"),
        ({"queue_packets": 10}, "queue_packets only makes sense with a rate limit"),
        ({"rate_bps": 0, "queue_packets": 10}, "rate_bps must be positive"),
        ({"rate_bps": 10, "queue_packets": 0}, "queue_packets must be at least 1"),
        ({"limit_packets": 0}, "limit_packets must be at least 1"),
    ],
)
def test_impairment_validation(kwargs, message):
    with pytest.raises(ValueError) as exc:
        Impairment(**kwargs).validate()
    assert message in str(exc.value)
    assert "\n" not in str(exc.value)


# -- a rate that follows a schedule (bwn-link --rate-schedule) ----------------------

from bwn.scenario.schedule import ConstantSchedule, SineSchedule, StepSchedule, TraceSchedule

S = 1_000_000_000


def test_scheduled_rate_is_read_when_each_frame_starts_not_when_it_arrives():
    # 1 Mb/s, then 2 Mb/s from t = 1 s of the schedule (origin at 10 s): a 1250-byte
    # frame takes 10 ms, then 5 ms. Three frames arrive together at 10.985 s: the
    # first starts at once (10 ms), the second at 10.995 s (10 ms), the third at
    # 11.005 s, after the step, so it takes 5 ms although it arrived before it.
    steps = StepSchedule([(0, 1e6), (1.0, 2e6)])
    sched = DirectionScheduler(Impairment(rate_schedule=steps, queue_packets=10), seed=1)
    sched.start_schedule(10 * S)
    t0 = 10 * S + 985 * MS
    out = simulate(sched, [(t0, frame(i, 1250)) for i in range(3)])
    assert [t - t0 for t, _ in out] == [10 * MS, 20 * MS, 25 * MS]


def test_scheduled_rate_before_the_origin_is_the_rate_at_time_zero():
    steps = StepSchedule([(0, 1e6), (1.0, 2e6)])
    sched = DirectionScheduler(Impairment(rate_schedule=steps, queue_packets=10), seed=1)
    # Not started: the rate at time 0 holds however late it is.
    assert simulate(sched, [(50 * S, frame(0, 1250))])[0][0] == 50 * S + 10 * MS
    sched.start_schedule(60 * S)
    assert simulate(sched, [(60 * S + 500 * MS, frame(1, 1250))])[0][0] == 60 * S + 510 * MS
    assert simulate(sched, [(61 * S, frame(2, 1250))])[0][0] == 61 * S + 5 * MS
    # Restarting moves time 0: 1 Mb/s again.
    sched.start_schedule(62 * S)
    assert simulate(sched, [(62 * S, frame(3, 1250))])[0][0] == 62 * S + 10 * MS


def test_a_backlogged_sine_link_serves_the_integral_of_its_schedule():
    # The EBN paper's F(t) = b (1 + sin(w t) / 3) at b = 110.2 kb/s, w = 1 rad/s, with
    # the queue never empty: the bytes served by time T are the integral of F over
    # [0, T] to within one frame (each frame at the rate of its start).
    sine = SineSchedule(110_200, 3.0, 1.0, 0.0)
    sched = DirectionScheduler(Impairment(rate_schedule=sine, queue_packets=100_000), seed=1)
    sched.start_schedule(0)
    size = 1102
    out = simulate(sched, [(0, frame(i, size)) for i in range(1000)])
    for horizon_s in (3.0, 10.0, 31.0, 60.0):
        served_bits = 8 * size * sum(1 for t, _ in out if t <= horizon_s * S)
        allowed_bits = sine.mean_rate_bps(0, horizon_s) * horizon_s
        assert abs(served_bits - allowed_bits) <= 8 * size, (horizon_s, served_bits, allowed_bits)


def test_a_scheduled_rate_never_falls_below_the_floor():
    # alpha = 1 touches 0 at w t = 3 pi / 2: the frame still leaves, at 1 kb/s.
    from bwn.linkem.scheduler import MIN_SCHEDULED_RATE_BPS
    sine = SineSchedule(100_000, 1.0, 1.0, 0.0)
    sched = DirectionScheduler(Impairment(rate_schedule=sine, queue_packets=5), seed=1)
    sched.start_schedule(0)
    trough_ns = int(1.5 * math.pi * S)
    assert sched.scheduled_rate_bps(trough_ns) == MIN_SCHEDULED_RATE_BPS
    out = simulate(sched, [(trough_ns, frame(0, 125))])
    assert out[0][0] == trough_ns + S   # 1000 bits at 1 kb/s


def test_a_scheduled_rate_is_drop_tail_like_a_fixed_one():
    sched = DirectionScheduler(Impairment(rate_schedule=ConstantSchedule(8e6), queue_packets=10), seed=1)
    out = simulate(sched, [(0, frame(i, 1000)) for i in range(30)])
    assert [seq_of(f) for _, f in out] == list(range(11))
    assert sched.counters.dropped_queue == 19


def test_impairment_with_a_schedule_is_reported_as_its_table():
    imp = Impairment(rate_schedule=SineSchedule(110_200, 3.0, 0.5, 0.0), queue_packets=50).validate()
    assert not imp.is_plain_delay
    assert imp.to_dict()["rate_schedule"] == {"kind": "sine", "b_mbit": 0.1102, "alpha": 3.0,
                                              "w_rad_s": 0.5, "phi_rad": 0.0}
    assert Impairment().to_dict()["rate_schedule"] is None


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"rate_schedule": ConstantSchedule(1e6)}, "a rate schedule needs a queue size"),
        ({"rate_schedule": ConstantSchedule(1e6), "rate_bps": 1_000_000, "queue_packets": 5},
         "either a rate (rate_bps) or a rate schedule (rate_schedule), not both"),
        ({"rate_schedule": TraceSchedule((1, 2, 3)), "queue_packets": 5},
         "rate_schedule: a TraceSchedule has no table bwn-link can take"),
        ({"rate_schedule": "sine", "queue_packets": 5}, "rate_schedule must be a Schedule"),
        ({"rate_schedule": ConstantSchedule(1e6), "queue_packets": 0}, "queue_packets must be at least 1"),
    ],
)
def test_impairment_validation_of_a_rate_schedule(kwargs, message):
    with pytest.raises(ValueError) as exc:
        Impairment(**kwargs).validate()
    assert message in str(exc.value)


# -- every refusal of a link's configuration, word for word (mutation testing) -------------------

@pytest.mark.parametrize("kw, message", [
    ({"reorder_hold_us": -1}, "reorder_hold_us must not be negative, got -1"),
    ({"reorder_hold_us": 1.5}, "reorder_hold_us must be an integer, got 1.5"),
    ({"rate_bps": 10, "queue_packets": -2}, "queue_packets must not be negative, got -2"),
    ({"limit_packets": -1}, "limit_packets must not be negative, got -1"),
    ({"limit_packets": 0}, "limit_packets must be at least 1"),
    ({"rate_bps": 10, "queue_packets": 0}, "queue_packets must be at least 1"),
    ({"rate_bps": True, "queue_packets": 1}, "rate_bps must be an integer, got True"),
    ({"rate_bps": 0, "queue_packets": 1}, "rate_bps must be positive, got 0"),
    ({"rate_bps": 10}, "a rate limit needs a queue size (queue_packets)"),
    ({"queue_packets": 5}, "queue_packets only makes sense with a rate limit (rate_bps or rate_schedule)"),
    ({"reorder": 0.5, "reorder_hold_us": 0}, "reorder_hold_us must be positive when reorder > 0"),
    ({"rate_schedule": ConstantSchedule(1e6), "queue_packets": 0}, "queue_packets must be at least 1"),
    ({"loss": True}, "loss must be a number, got True"),
    ({"duplicate": "0.1"}, "duplicate must be a number, got '0.1'"),
    ({"reorder": None}, "reorder must be a number, got None"),
    ({"loss": 1.0000001}, "loss must be a fraction in [0, 1], got 1.0000001"),
])
def test_each_inconsistent_impairment_is_refused_in_one_line(kw, message):
    with pytest.raises(ValueError) as err:
        Impairment(**kw).validate()
    assert str(err.value) == message


def test_the_smallest_valid_values_are_accepted():
    from bwn.scenario.schedule import ConstantSchedule
    Impairment(limit_packets=1).validate()
    Impairment(rate_bps=1, queue_packets=1).validate()
    Impairment(rate_schedule=ConstantSchedule(1e6), queue_packets=1).validate()
    Impairment(reorder=0.0, reorder_hold_us=0).validate()          # no reordering: a hold of 0 is fine
    with pytest.raises(ValueError, match=r"^a rate schedule needs a queue size \(queue_packets\)$"):
        Impairment(rate_schedule=ConstantSchedule(1e6)).validate()


def test_a_links_refusal_names_the_direction_only_when_they_differ():
    bad = Impairment(limit_packets=0)
    with pytest.raises(ValueError) as err:
        LinkConfig(a_to_b=Impairment(), b_to_a=bad).validate()
    assert str(err.value) == "b-to-a: limit_packets must be at least 1"
    with pytest.raises(ValueError) as err:
        LinkConfig.symmetric(bad).validate()
    assert str(err.value) == "limit_packets must be at least 1"
    with pytest.raises(ValueError) as err:
        LinkConfig(seed=True).validate()
    assert str(err.value) == "seed must be an integer, got True"
    assert LinkConfig(seed=5).direction_seed("a_to_b") == 10 and LinkConfig(seed=5).direction_seed("b_to_a") == 11


def test_replace_changes_only_the_fields_named():
    base = Impairment(delay_us=5_000, loss=0.1)
    changed = base.replace(loss=0.2, jitter_us=100)
    assert changed == Impairment(delay_us=5_000, loss=0.2, jitter_us=100)
    assert base == Impairment(delay_us=5_000, loss=0.1)          # frozen: a new value
    assert base.replace() == base


def test_a_direction_is_looked_up_by_its_name():
    cfg = LinkConfig(a_to_b=Impairment(delay_us=1), b_to_a=Impairment(delay_us=2))
    assert cfg.direction("a_to_b") == Impairment(delay_us=1)
    assert cfg.direction("b_to_a") == Impairment(delay_us=2)
    with pytest.raises(KeyError) as err:
        cfg.direction("seed")                                     # a field, not a direction
    assert err.value.args == ("seed",)


# -- lateness histogram summary (bwn-link's stats, the fidelity check's input) ----------------

from bwn.linkem.scheduler import LATE_BINS, LATE_SHIFT, lateness_summary  # noqa: E402

BIN_NS = 1 << LATE_SHIFT     # 16.384 us


def histogram(counts: Dict[int, int]) -> List[int]:
    """A lateness histogram with ``counts[i]`` frames in bin i."""
    bins = [0] * LATE_BINS
    for i, n in counts.items():
        bins[i] = n
    return bins


def test_lateness_of_no_frames_has_no_quantiles():
    assert lateness_summary([0] * LATE_BINS, 0) == {
        "frames": 0, "bin_us": 16.384, "max_us": 0.0, "p50_us": None, "p99_us": None, "bins": []}


def test_lateness_of_one_frame_is_its_bin_bounded_by_the_maximum():
    assert lateness_summary(histogram({2: 1}), 40_000) == {
        "frames": 1, "bin_us": 16.384, "max_us": 40.0, "p50_us": 40.0, "p99_us": 40.0, "bins": [[2, 1]]}


def test_lateness_quantiles_at_exact_rank_boundaries():
    # Four frames, one in each of bins 0..3: p50 (rank 2) is the 2nd frame's bin, 1, so its
    # upper edge; p99 (rank 3.96) the 4th's, bin 3, whose edge the exact maximum undercuts.
    assert lateness_summary(histogram({0: 1, 1: 1, 2: 1, 3: 1}), 60_123) == {
        "frames": 4, "bin_us": 16.384, "max_us": 60.123, "p50_us": 32.768, "p99_us": 60.123,
        "bins": [[0, 1], [1, 1], [2, 1], [3, 1]]}
    # 100 frames: p99 is rank 99 exactly, the 99th frame, still in bin 0.
    assert lateness_summary(histogram({0: 99, 7: 1}), 130_000)["p99_us"] == 16.384
    assert lateness_summary(histogram({0: 98, 7: 2}), 130_000)["p99_us"] == 130.0


def test_lateness_beyond_the_span_is_a_lower_bound_and_flagged():
    last = LATE_BINS - 1
    assert lateness_summary(histogram({0: 98, last: 2}), 9_000_000) == {
        "frames": 100, "bin_us": 16.384, "max_us": 9000.0, "p50_us": 16.384,
        "p99_us": round(last * BIN_NS / 1000, 3), "p99_us_beyond_span": True,
        "bins": [[0, 98], [last, 2]]}


def test_scheduler_lateness_uses_the_histogram_of_released_frames():
    sched = DirectionScheduler(Impairment(delay_us=1000), seed=1)
    sched.admit(frame(0), 0)
    sched.admit(frame(1), 0)
    assert sched.release_due(1 * MS + 20 * US, [].append) == 2       # both 20 us late: bin 1
    assert sched.lateness() == {"frames": 2, "bin_us": 16.384, "max_us": 32.768, "p50_us": 32.768,
                                "p99_us": 32.768, "bins": [[1, 2]]}


# -- admission: counters, probabilities, limits, the rate limiter's queue ------------------


def test_the_scheduler_validates_and_keeps_its_impairment():
    imp = Impairment(delay_us=3, loss=0.5)
    assert DirectionScheduler(imp, seed=1).impairment is imp
    with pytest.raises(ValueError, match=r"^loss must be a fraction in \[0, 1\], got 2$"):
        DirectionScheduler(Impairment(loss=2), seed=1)


@pytest.mark.parametrize("imp", [Impairment(delay_us=10), Impairment(delay_us=10, loss=0.5),
                                 Impairment(rate_bps=1000, queue_packets=1)],
                         ids=["plain", "general", "rate"])
def test_rx_counts_every_frame_offered_in_bytes(imp):
    sched = DirectionScheduler(imp, seed=4)
    for i, size in enumerate((100, 250, 1500)):
        sched.admit(frame(i, size), i * MS)
    assert sched.counters.rx_frames == 3
    assert sched.counters.rx_bytes == 1850        # also frames then lost or dropped


@pytest.mark.parametrize("field, counter, pending_if_drawn", [
    ("loss", "dropped_loss", 0), ("duplicate", "duplicated", 2)])
def test_loss_and_duplicate_happen_only_when_the_draw_is_below_the_probability(field, counter, pending_if_drawn):
    # random() is uniform on [0, 1): "draw < p" holds with probability exactly p. A
    # probability equal to the direction's first draw leaves that frame alone; just above it acts.
    import random

    first = random.Random(8).random()
    equal = DirectionScheduler(Impairment(**{field: first}), seed=8)
    equal.admit(frame(0), 0)
    assert getattr(equal.counters, counter) == 0 and equal.pending() == 1
    above = DirectionScheduler(Impairment(**{field: math.nextafter(first, 1.0)}), seed=8)
    above.admit(frame(0), 0)
    assert getattr(above.counters, counter) == 1 and above.pending() == pending_if_drawn


def test_without_delay_a_frame_leaves_when_it_arrives_even_at_time_zero():
    sched = DirectionScheduler(Impairment(duplicate=1.0), seed=1)     # not the plain fast path
    sched.admit(frame(0), 0)
    assert sched.next_due_ns() == 0
    sent: List[bytes] = []
    assert sched.release_due(0, sent.append) == 2
    assert sent == [frame(0), frame(0)]


def test_a_frame_due_exactly_now_is_released_later_ones_wait():
    sched = DirectionScheduler(Impairment(delay_us=1000, reorder=1.0, reorder_hold_us=500), seed=1)
    sched.admit(frame(0), 0)                                         # held: due at 1.5 ms
    sent: List[bytes] = []
    assert sched.release_due(1500 * US - 1, sent.append) == 0
    assert sched.release_due(1500 * US, sent.append) == 1 and sent == [frame(0)]


@pytest.mark.parametrize("imp", [
    Impairment(delay_us=1000, jitter_us=500, jitter_reorders=True, limit_packets=3),   # heap only
    Impairment(delay_us=1000, loss=1e-9, limit_packets=3),                             # FIFO only
], ids=["heap", "fifo"])
def test_the_limit_counts_frames_in_flight_exactly(imp):
    sched = DirectionScheduler(imp, seed=2)
    for i in range(5):
        sched.admit(frame(i), 0)
    assert sched.pending() == 3 and sched.counters.dropped_limit == 2
    check_invariant(sched)


def test_the_limit_counts_held_and_in_order_frames_together():
    sched = DirectionScheduler(Impairment(delay_us=1000, reorder=0.5, limit_packets=6), seed=3)
    for i in range(20):
        sched.admit(frame(i), i)
    assert sched.fifo and sched.heap                 # some frames held back, some in order
    assert sched.pending() == 6 and sched.counters.dropped_limit == 14
    check_invariant(sched)


def test_a_frame_arriving_as_the_link_frees_a_place_is_queued():
    # 1 us per byte, room for one frame behind the one on the wire. Frame 2 finds the
    # queue full; frame 3 arrives the instant frame 0 has been serialized (1 ms), so
    # frame 1 is on the wire and the waiting place is free again.
    sched = DirectionScheduler(Impairment(rate_bps=8_000_000, queue_packets=1), seed=1)
    out = simulate(sched, [(0, frame(0, 1000)), (0, frame(1, 1000)), (0, frame(2, 1000)),
                           (1 * MS, frame(3, 1000))])
    assert [(t, seq_of(f)) for t, f in out] == [(1 * MS, 0), (2 * MS, 1), (3 * MS, 3)]
    assert sched.counters.dropped_queue == 1


def test_a_frame_arriving_as_the_link_goes_idle_starts_at_once():
    sched = DirectionScheduler(Impairment(rate_bps=8_000_000, queue_packets=1), seed=1)
    out = simulate(sched, [(0, frame(0, 1000)), (1 * MS, frame(1, 500)), (2 * MS, frame(2, 100))])
    assert [t for t, _ in out] == [1 * MS, 1500 * US, 2100 * US]


# -- release_due's lateness histogram and its counts, on both of its paths -------------

SPAN_NS = (LATE_BINS - 1) << LATE_SHIFT          # later than this: the last bin, and late_max


def _loaded(fifo: Sequence[Tuple[int, bytes]], heap: Sequence[Tuple[int, bytes]] = ()) -> DirectionScheduler:
    """A scheduler holding frames already due at the given times (fifo: in order;
    heap: the reordered ones), as admit() leaves them."""
    sched = DirectionScheduler(Impairment())
    sched.fifo.extend(fifo)
    for i, (due, f) in enumerate(heap):
        heapq.heappush(sched.heap, (due, i, f))
    return sched


@pytest.mark.parametrize("reordered", [False, True], ids=["in-order path", "general path"])
def test_release_due_bins_each_frame_by_its_lateness_and_keeps_the_exact_maximum(reordered):
    now = 10 * SPAN_NS
    lates = [0, 5, (2 << LATE_SHIFT) + 1, SPAN_NS - 1, SPAN_NS, SPAN_NS + 1_000, SPAN_NS + 7]
    frames = [(now - late, frame(i, 100 + i)) for i, late in enumerate(sorted(lates, reverse=True))]
    # The general path: one more frame, due now, waiting in the heap.
    sched = _loaded(frames, [(now, frame(99, 60))] if reordered else [])
    sent: List[bytes] = []
    assert sched.release_due(now, sent.append) == len(frames) + reordered
    expected_bins = {0: 2 + reordered, 2: 1, LATE_BINS - 2: 1, LATE_BINS - 1: 3}
    assert {i: n for i, n in enumerate(sched.late_bins) if n} == expected_bins
    assert sched.late_max_ns == SPAN_NS + 1_000
    c = sched.counters
    assert c.forwarded_frames == len(frames) + reordered
    assert c.forwarded_bytes == sum(len(f) for _, f in frames) + 60 * reordered
    assert [seq_of(f) for f in sent] == list(range(len(frames))) + [99] * reordered
    # A second release adds to the histogram and keeps the larger maximum.
    sched.fifo.append((2 * now - 3 * SPAN_NS, frame(50)))
    sched.fifo.append((2 * now, frame(51)))
    assert sched.release_due(2 * now, sent.append) == 2
    assert sched.late_bins[0] == 3 + reordered and sched.late_bins[LATE_BINS - 1] == 4
    assert sched.late_max_ns == 3 * SPAN_NS
    assert c.forwarded_frames == len(frames) + reordered + 2


@pytest.mark.parametrize("reordered", [False, True], ids=["in-order path", "general path"])
def test_frames_the_nic_refuses_are_counted_as_tx_errors_and_the_rest_still_leave(reordered):
    now = 5 * SPAN_NS
    sched = _loaded([(now - 10, frame(i)) for i in range(5)], [(now + 1, frame(9))] if reordered else [])

    def send(f: bytes) -> None:
        if seq_of(f) in (1, 3):
            raise OSError(105, "No buffer space available")
        sent.append(f)
    sent: List[bytes] = []
    assert sched.release_due(now, send) == 5                 # released: sent or lost
    assert [seq_of(f) for f in sent] == [0, 2, 4]
    assert (sched.counters.tx_errors, sched.counters.forwarded_frames) == (2, 3)
    assert sched.counters.forwarded_bytes == 300
    sched.fifo.append((now + 1, frame(3)))
    assert sched.release_due(now + 1, send) == 1 + reordered
    assert sched.counters.tx_errors == 3                      # added to, not replaced
    assert sched.late_bins[0] == 6 + reordered


def test_a_reordered_frame_due_with_an_in_order_one_leaves_after_it_and_an_earlier_one_before():
    sched = _loaded([(100, frame(1)), (200, frame(2))], [(100, frame(7)), (150, frame(8))])
    sent: List[bytes] = []
    sched.release_due(1_000, sent.append)
    assert [seq_of(f) for f in sent] == [1, 7, 8, 2]
    assert sched.next_due_ns() is None
    late = _loaded([(300, frame(1))], [(100, frame(7))])
    assert late.next_due_ns() == 100
    tie = _loaded([(300, frame(1))], [(300, frame(7))])
    assert tie.next_due_ns() == 300
    assert tie.release_due(299, sent.append) == 0 and (tie.fifo, len(tie.heap)) == (deque([(300, frame(1))]), 1)


@pytest.mark.parametrize("imp", [Impairment(delay_us=1000, reorder=1.0, reorder_hold_us=2000),
                                 Impairment(delay_us=1000, jitter_us=100, jitter_reorders=True)],
                         ids=["held", "jitter-reorders"])
def test_frames_due_at_the_same_time_leave_in_the_order_they_arrived(imp):
    """Held-back frames (and, with jitter_reorders, every frame) wait in a heap by
    due time; frames due at the same nanosecond leave in arrival order, whatever
    their bytes (here each frame's bytes sort before the previous one's)."""
    sched = DirectionScheduler(imp, seed=5)
    sched._random = lambda: 0.5          # no jitter draw moves them; every reorder draw holds
    arrivals = [(0, bytes([255 - i]) * 100) for i in range(6)]
    out = simulate(sched, arrivals)
    assert [f[0] for _, f in out] == [255, 254, 253, 252, 251, 250]
    assert len({t for t, _ in out}) == 1


def test_discarding_on_stop_adds_to_the_count_of_frames_left():
    sched = DirectionScheduler(Impairment(delay_us=1000), seed=1)
    for i in range(3):
        sched.admit(frame(i), 0)
    assert sched.discard_pending() == 3 and sched.pending() == 0
    sched.admit(frame(3), 0)
    assert sched.discard_pending() == 1 and sched.counters.pending_at_exit == 4
