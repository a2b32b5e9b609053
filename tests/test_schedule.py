"""Time-varying link rates (bwn/scenario/schedule.py)."""
from __future__ import annotations

import math

import pytest

from bwn.scenario import schedule as sch


def test_constant_applies_once():
    s = sch.ConstantSchedule(10e6)
    assert s.rate_bps(0) == s.rate_bps(123.4) == 10e6
    assert s.updates(60) == [(0.0, 10e6)]
    assert s.mean_rate_bps(3, 7) == 10e6


def test_sine_values_at_known_times():
    # F(t) = b (1 + sin(w t + phi) / alpha), b = 150 kb/s, alpha = 3, w = 0.5 rad/s.
    s = sch.SineSchedule(b_bps=150e3, alpha=3, w_rad_s=0.5, phi_rad=0)
    assert s.rate_bps(0) == pytest.approx(150e3)
    assert s.rate_bps(math.pi) == pytest.approx(200e3)          # sin(pi/2) = 1: b (1 + 1/3)
    assert s.rate_bps(3 * math.pi) == pytest.approx(100e3)      # sin(3 pi/2) = -1: b (1 - 1/3)
    assert s.rate_bps(2 * math.pi) == pytest.approx(150e3, abs=1e-6)
    shifted = sch.SineSchedule(b_bps=150e3, alpha=3, w_rad_s=0.5, phi_rad=math.pi / 2)
    assert shifted.rate_bps(0) == pytest.approx(200e3)
    assert sch.SineSchedule(1e6).alpha == 3                      # the EBN paper's default


def test_sine_mean_is_exact_and_matches_numerical_integral():
    s = sch.SineSchedule(b_bps=1e6, alpha=3, w_rad_s=0.5)
    period_s = 2 * math.pi / 0.5
    assert s.mean_rate_bps(0, period_s) == pytest.approx(1e6)
    # First half period: mean of sin over [0, pi] is 2/pi.
    assert s.mean_rate_bps(0, period_s / 2) == pytest.approx(1e6 * (1 + 2 / math.pi / 3))
    numeric = sch.Schedule.mean_rate_bps(s, 1.0, 7.5)
    assert s.mean_rate_bps(1.0, 7.5) == pytest.approx(numeric, rel=1e-6)


def test_sine_updates_every_interval_only_on_change():
    s = sch.SineSchedule(b_bps=1e6, alpha=3, w_rad_s=1.0)
    points = s.updates(10, interval_s=0.1, threshold=0.01)
    assert points[0] == (0.0, pytest.approx(1e6))
    times = [t for t, _ in points]
    assert all(abs(t / 0.1 - round(t / 0.1)) < 1e-6 for t in times)
    assert all(t < 10 for t in times)
    for (_, prev), (_, rate) in zip(points, points[1:]):
        assert abs(rate - prev) > 0.01 * prev
    # Around the peak (t = pi/2) the rate changes slowly, so samples are skipped.
    assert len(points) < 100
    # A threshold of 0 keeps every sample whose rate differs.
    assert len(s.updates(10, 0.1, 0.0)) == 100
    # A flat sine (w = 0) applies once.
    assert sch.SineSchedule(1e6, 3, 0.0).updates(10) == [(0.0, pytest.approx(1e6))]


def test_sine_rejects_alpha_below_one():
    with pytest.raises(sch.ScheduleError, match="alpha"):
        sch.SineSchedule(1e6, alpha=0.5)


def test_steps_boundaries():
    s = sch.StepSchedule([(0, 10e6), (5, 2e6), (8.5, 4e6)])
    assert s.rate_bps(0) == 10e6
    assert s.rate_bps(4.999) == 10e6
    assert s.rate_bps(5) == 2e6            # a step applies from its time on
    assert s.rate_bps(8.4999) == 2e6
    assert s.rate_bps(8.5) == 4e6
    assert s.rate_bps(1000) == 4e6
    assert s.updates(60) == [(0.0, 10e6), (5.0, 2e6), (8.5, 4e6)]
    assert s.updates(8.5) == [(0.0, 10e6), (5.0, 2e6)]     # [0, duration)
    # (5 s * 10 + 3.5 s * 2 + 1.5 s * 4) Mb / 10 s = 6.3 Mb/s
    assert s.mean_rate_bps(0, 10) == pytest.approx(6.3e6)
    assert s.mean_rate_bps(4, 6) == pytest.approx(6e6)


@pytest.mark.parametrize("steps, match", [
    ([], "at least one"),
    ([(1, 1e6)], "first step must be at t_s = 0"),
    ([(0, 1e6), (5, 2e6), (5, 3e6)], r"steps\[2\]: t_s 5.0 is not after"),
    ([(0, 1e6), (1, -2)], r"steps\[1\] rate"),
])
def test_steps_rejects(steps, match):
    with pytest.raises(sch.ScheduleError, match=match):
        sch.StepSchedule(steps)


def test_trace_one_opportunity_per_ms_is_12_mbit(tmp_path):
    path = tmp_path / "12mbit.trace"
    path.write_text("1\n")
    s = sch.TraceSchedule.from_file(path)
    # 1500 bytes * 8 bits every millisecond = 12 Mb/s, from t = 0 on (the loop extends back).
    for t_s in (0.0, 0.05, 0.1, 1.2345, 100.0):
        assert s.rate_bps(t_s) == pytest.approx(12e6)
    assert s.mean_bps == pytest.approx(12e6)
    assert s.updates(5) == [(0.0, pytest.approx(12e6))]
    assert s.mean_rate_bps(0, 3) == pytest.approx(12e6)


def test_trace_loops_and_counts_repeated_lines(tmp_path):
    # Period 100 ms: 3 opportunities at 10 ms (one line per opportunity), then nothing
    # until 50 ms, 1 at 50 ms, 1 at 100 ms (the period).
    path = tmp_path / "bursty.trace"
    path.write_text("10\n10\n10\n50\n100\n")
    s = sch.TraceSchedule.from_file(path, window_ms=100)
    assert s.period_ms == 100
    # Any 100 ms window holds one whole loop: 5 opportunities = 5 * 1500 * 8 / 0.1 s.
    for t_s in (0.0, 0.037, 0.1, 0.25, 7.0):
        assert s.rate_bps(t_s) == pytest.approx(600e3)
    # A 10 ms window sees the burst: (0.001, 0.011] holds the 3 opportunities at 10 ms.
    short = sch.TraceSchedule.from_file(path, window_ms=10)
    assert short.rate_bps(0.011) == pytest.approx(3 * 1500 * 8 / 0.010)
    assert short.rate_bps(0.030) == 0.0
    # It repeats: the same burst one period (100 ms) and ten periods later.
    assert short.rate_bps(0.111) == short.rate_bps(1.011) == short.rate_bps(0.011)
    # 100 ms + 0 = 200 ms - 100: the opportunity at 100 ms of loop 0 is at 100 ms.
    assert short.rate_bps(0.1) == pytest.approx(1500 * 8 / 0.010)


def test_trace_update_points_follow_rate_changes(tmp_path):
    # 1 opportunity/ms for the first 500 ms, then 1 every 2 ms: 12 then 6 Mb/s, period 1 s.
    lines = list(range(1, 501)) + list(range(502, 1001, 2))
    path = tmp_path / "two-rates.trace"
    path.write_text("\n".join(map(str, lines)) + "\n")
    s = sch.TraceSchedule.from_file(path, window_ms=100)
    assert s.rate_bps(0.45) == pytest.approx(12e6)
    assert s.rate_bps(0.95) == pytest.approx(6e6)
    # At 0 the window (-100 ms, 0] holds the end of the previous loop: 6 Mb/s.
    assert s.rate_bps(0.0) == pytest.approx(6e6)
    assert s.rate_bps(0.55) == pytest.approx(9e6)   # (450, 550] ms straddles the change
    points = s.updates(1.0, interval_s=0.1)
    assert points == [(0.0, pytest.approx(6e6)), (0.1, pytest.approx(12e6)),
                      (0.6, pytest.approx(6e6))]
    assert s.mean_rate_bps(0, 1) == pytest.approx(s.mean_bps, rel=0.01)


@pytest.mark.parametrize("text, message", [
    ("10\n20\n130\n120\n", "bad.trace:4: timestamp 120 is smaller than the previous 130"),
    ("10\nabc\n", "bad.trace:2: expected a non-negative integer millisecond timestamp, got 'abc'"),
    ("10\n-5\n", "bad.trace:2: expected a non-negative integer millisecond timestamp, got '-5'"),
    ("1.5\n", "bad.trace:1: expected a non-negative integer millisecond timestamp, got '1.5'"),
    ("", "bad.trace: trace holds no delivery opportunity"),
    ("0\n0\n", "bad.trace:2: the last timestamp must be positive"),
])
def test_malformed_traces(tmp_path, text, message):
    path = tmp_path / "bad.trace"
    path.write_text(text)
    with pytest.raises(sch.ScheduleError) as err:
        sch.TraceSchedule.from_file(path)
    assert str(err.value).startswith(message)


def test_missing_trace_names_the_file(tmp_path):
    with pytest.raises(sch.ScheduleError, match="missing.trace: cannot read"):
        sch.TraceSchedule.from_file(tmp_path / "missing.trace")


def test_bmv2_queue_rate_in_packets_per_second():
    # 12 Mb/s of 1500-byte frames = 1000 frames/s; default frame 1514 bytes.
    assert sch.bmv2_queue_rate_pps(12e6, 1500) == pytest.approx(1000)
    assert sch.bmv2_queue_rate_pps(10e6) == pytest.approx(10e6 / (8 * 1514))
    with pytest.raises(sch.ScheduleError):
        sch.bmv2_queue_rate_pps(1e6, 0)


def test_update_arguments_checked():
    with pytest.raises(sch.ScheduleError, match="interval_s"):
        sch.SineSchedule(1e6).updates(10, interval_s=0)
    with pytest.raises(sch.ScheduleError, match="duration_s"):
        sch.ConstantSchedule(1e6).updates(0)


def test_step_mean_rate_before_zero_and_at_a_point():
    """The first rate also holds before t = 0 (the report's flows may start earlier
    than the controller's clock); an empty interval is the rate at that time."""
    s = sch.StepSchedule([(0, 10e6), (2, 4e6)])
    assert s.mean_rate_bps(-2, 0) == pytest.approx(10e6)
    assert s.mean_rate_bps(-1, 3) == pytest.approx((3 * 10e6 + 4e6) / 4)
    assert s.mean_rate_bps(-3, -1) == pytest.approx(10e6)
    assert s.mean_rate_bps(2, 2) == 4e6 and s.mean_rate_bps(1.5, 1.5) == 10e6
    with pytest.raises(sch.ScheduleError) as err:
        s.mean_rate_bps(3, 2)
    assert str(err.value) == "mean_rate_bps: t1_s 2 is before t0_s 3"


@pytest.mark.parametrize("steps, message", [
    ([], "steps: at least one step is needed"),
    ([(1, 5e6)], "steps[0]: the first step must be at t_s = 0, got 1.0"),
    ([(0, 5e6), (3, 1e6), (2, 1e6)], "steps[2]: t_s 2.0 is not after the previous step's 3.0"),
])
def test_step_schedule_messages(steps, message):
    with pytest.raises(sch.ScheduleError) as err:
        sch.StepSchedule(steps)
    assert str(err.value) == message


def test_updates_keep_changes_above_the_threshold_only():
    class Ramp(sch.Schedule):
        def rate_bps(self, t_s: float) -> float:
            return [0.0, 0.0, 1e6, 1.01e6, 1.02e6, 1.03e6][int(round(t_s * 10))]

    # From 0 any rate is a change; then changes of exactly the threshold are not.
    assert Ramp().updates(0.6, 0.1, 0.02) == [(0.0, 0.0), (0.2, 1e6), (0.5, 1.03e6)]
    # A duration shorter than one interval still applies the rate at 0.
    assert sch.ConstantSchedule(5e6).updates(0.05, 0.1) == [(0.0, 5e6)]
    assert [t for t, _ in Ramp().updates(0.3, 0.1, 0.0)] == [0.0, 0.2]


def test_sine_mean_with_a_phase_and_its_edge_cases():
    """mean_rate_bps gives the report its capacity integral: with a phase, over an
    empty interval, on a sine that does not move (w = 0), and backwards (refused)."""
    s = sch.SineSchedule(b_bps=1e6, alpha=3, w_rad_s=0.5, phi_rad=0.7)
    assert s.mean_rate_bps(1.0, 7.5) == pytest.approx(sch.Schedule.mean_rate_bps(s, 1.0, 7.5), rel=1e-6)
    assert s.mean_rate_bps(2.0, 2.0) == pytest.approx(s.rate_bps(2.0))
    still = sch.SineSchedule(b_bps=1e6, alpha=3, w_rad_s=0, phi_rad=0.5)
    assert still.mean_rate_bps(0, 10) == pytest.approx(1e6 * (1 + math.sin(0.5) / 3))
    with pytest.raises(sch.ScheduleError) as err:
        s.mean_rate_bps(3, 2)
    assert str(err.value) == "mean_rate_bps: t1_s 2 is before t0_s 3"


@pytest.mark.parametrize("kw, message", [
    (dict(w_rad_s=-0.1), "w must be a non-negative number of rad/s, got -0.1"),
    (dict(w_rad_s=float("nan")), "w must be a non-negative number of rad/s, got nan"),
    (dict(w_rad_s="1"), "w must be a non-negative number of rad/s, got '1'"),
    (dict(phi_rad=float("inf")), "phi must be a finite number of radians, got inf"),
    (dict(phi_rad="0"), "phi must be a finite number of radians, got '0'"),
    (dict(b_bps=0.0), "b must be a positive number of bit/s, got 0.0"),
    (dict(b_bps=True), "b must be a positive number of bit/s, got True"),
])
def test_sine_parameters_say_what_is_wrong(kw, message):
    args = dict(b_bps=1e6, alpha=3, w_rad_s=0.5, phi_rad=0.0) | kw
    with pytest.raises(sch.ScheduleError) as err:
        sch.SineSchedule(**args)
    assert str(err.value) == message


def test_rates_at_their_bounds():
    assert sch.ConstantSchedule(0.5).rate_bps(0) == 0.5                 # any positive rate
    assert sch.bmv2_queue_rate_pps(0, 1) == 0.0                          # a stopped link: 0 pps
    with pytest.raises(sch.ScheduleError) as err:
        sch.bmv2_queue_rate_pps(-1, 1000)
    assert str(err.value) == "rate must not be negative, got -1 bit/s"
    with pytest.raises(sch.ScheduleError) as err:
        sch.bmv2_queue_rate_pps(1e6, 0)
    assert str(err.value) == "mean frame size must be positive, got 0 bytes"


def test_step_mean_over_several_steps():
    s = sch.StepSchedule([(0, 10e6), (2, 4e6), (5, 1e6)])
    assert s.mean_rate_bps(0, 6) == pytest.approx((2 * 10e6 + 3 * 4e6 + 1e6) / 6)
    assert s.mean_rate_bps(0, 2) == pytest.approx(10e6)                 # ends on a step: no 4 Mb/s
    assert s.mean_rate_bps(2, 5) == pytest.approx(4e6)


@pytest.mark.parametrize("schedule", [
    sch.ConstantSchedule(110_200.0), sch.StepSchedule([(0, 10e6), (2.5, 4e6)]),
    sch.SineSchedule(b_bps=110_200.0, alpha=3, w_rad_s=0.5, phi_rad=0.25)])
def test_a_schedule_goes_to_bwn_link_and_back_unchanged(schedule):
    """The experiment hands a link's schedule to bwn-link --rate-schedule as JSON."""
    import json
    from bwn.scenario.config import schedule_from_json
    assert schedule_from_json(json.dumps(sch.table_of(schedule))) == schedule


@pytest.mark.parametrize("kw, message", [
    (dict(timestamps_ms=()), "x.trace: trace holds no delivery opportunity"),
    (dict(timestamps_ms=(0, 0)), "x.trace: the last timestamp must be positive (the trace's period), got 0"),
    (dict(window_ms=0), "x.trace: averaging window must be a positive number of milliseconds, got 0"),
    (dict(window_ms=True), "x.trace: averaging window must be a positive number of milliseconds, got True"),
    (dict(window_ms=2.5), "x.trace: averaging window must be a positive number of milliseconds, got 2.5"),
])
def test_a_trace_schedule_says_what_is_wrong(kw, message):
    args = dict(timestamps_ms=(1, 2), window_ms=100, source="x.trace") | kw
    with pytest.raises(sch.ScheduleError) as err:
        sch.TraceSchedule(**args)
    assert str(err.value) == message


def test_a_one_millisecond_window_is_a_window():
    s = sch.TraceSchedule((1,), window_ms=1)                # one opportunity per ms: 12 Mb/s
    assert s.rate_bps(5.0) == pytest.approx(12e6)
