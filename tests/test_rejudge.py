"""A run judged again from its run.json alone (bwn/analysis/rejudge.py): the fidelity
monitor records every sample the checks read, and the same checks give the same verdict."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from bwn.analysis import fidelity, rejudge
from bwn.analysis.fidelity import FidelityRecordError, Recording
from bwn.analysis.rejudge import linkem_record
from bwn.emulation.monitor import Monitor, PortSpec, SwitchProbe
from bwn.rundir import RunDir, RunMeta
from bwn.linkem.scheduler import LATE_BINS, lateness_summary

T0 = 5000.0      # the controller's t0 on the monotonic clock


def bwn_link_stats() -> dict:
    """A bwn-link's --stats-json as it writes it: a histogram per direction, its
    config, counters, and a sine whose schedule started."""
    late_bins = [0] * LATE_BINS
    late_bins[3], late_bins[100] = 4800, 200         # p99 1.65 ms: lateness broken
    direction = {"rx_frames": 5000, "forwarded_frames": 4990, "dropped_offload": 1, "dropped_oversize": 0,
                 "dropped_queue": 9, "lateness": lateness_summary(late_bins, 2_000_000),
                 "config": {"delay_us": 10_000, "rate_schedule": {"kind": "sine", "b_mbit": 1.0, "alpha": 3.0,
                                                                  "w_rad_s": 1.0, "phi_rad": 0.0}},
                 "cpu_s": 1.5, "wakeups": 1000}
    return {"iface_a": "em0-eth0", "iface_b": "em0-eth1", "seed": 7, "duration_s": 30.0, "realtime": True,
            "schedule_started_s": 0.25, "a_to_b": direction,
            "b_to_a": {**direction, "lateness": lateness_summary([0, 5000] + [0] * (LATE_BINS - 2), 10_000)}}


def recorded_monitor(tmp_path) -> Monitor:
    """A monitor that sampled a 20 s run: every invariant measured, some broken."""
    run = RunDir(tmp_path)
    run.linkem_stats("em0").write_text(json.dumps(bwn_link_stats()))
    run.capacity_csv.write_text("t_s,link,switch,port,rate_bps,queue_pps,schedule_pps\n"
                                "0.000,b,s1,2,8816000,1000.00,1000.00\n10.000,b,s1,2,4408000,520.00,500.00\n")
    rows = ["t_s,switch,port,capacity_kbps,rate_kbps,avail_kbps,queue_pkts,flows,ebn_code,window_start_us"]
    rows += [f"{i / 4:.3f},s1,2,8816,8000,816,{20 if i % 9 else 1},2,90,0" for i in range(80)]
    run.telemetry_csv.write_text("\n".join(rows) + "\n")
    monitor = Monitor(tmp_path, [SwitchProbe("s1", None, 9190, ["s1-eth1", "s1-eth2"])],
                      [PortSpec("s1", 2, "s1-eth2", True, 50, "b"), PortSpec("s1", 1, "s1-eth1", False, 50, "a")],
                      linkem_stats=[run.linkem_stats("em0")], telemetry_interval_s=0.25)
    monitor.time_origin_s = T0
    monitor._started_s, monitor._stopped_s = T0 + 0.05, T0 + 20.0
    # CPU: idle but for 1.5 s without any idle tick from t = 8 s
    total = idle = 0.0
    for i in range(201):
        monitor.cpu.append((T0 + i / 10, total, idle))
        total += 20.0
        idle += 0.0 if 80 <= i < 95 else 6.0
    # The port: 1000 pps, then 5 % slow after the change to 500 pps, backlogged but for one tick
    sent = 0.0
    for i in range(201):
        t = i / 10
        monitor.tx["s1:2"].append((T0 + t, int(sent)))
        monitor.emptied["s1:2"].append((T0 + t, 3 if i < 150 else 4))
        sent += 100.0 if t < 10 else 47.0
    monitor.net = [(T0, {"s1-eth1": (10, 0, 20, 0), "s1-eth2": (5, 0, 7, 0)}),
                   (T0 + 20, {"s1-eth1": (20_010, 0, 9_000, 0), "s1-eth2": (9_105, 0, 20_007, 0)})]
    monitor._p4_start = {"s1": {"no_route": 1, "af": 0}}
    monitor._p4_end = {"s1": {"no_route": 4, "af": 30}}
    monitor._ring = {"s1": (29_000, 12)}
    monitor._proc_cpu = {"runner": 3.14159, "s1": 9.0}
    monitor._wait = {"s1": 0.5}
    return monitor


def as_json(value: object) -> object:
    return json.loads(json.dumps(value))


def test_a_run_is_judged_again_from_run_json_alone_to_the_same_verdict(tmp_path):
    """The verdict the runner wrote, and the one rejudge() gives from the run.json it
    wrote, agree field by field: every check, item and measurement. Every invariant
    was measured, so no input the checks read is missing from the record."""
    result = recorded_monitor(tmp_path).result()
    assert [(c.name, c.held) for c in result.checks] == [
        ("cpu", False), ("linkem_lateness", False), ("switch_rx_drops", False), ("departure_rate", False),
        ("linkem_offload_drops", False), ("linkem_schedule", True)]
    assert result.checks[3].items[0]["backlog_from"] == "queue_emptied"
    run = RunDir(tmp_path)
    run.write_meta(RunMeta(ok=True, fidelity=result.to_json()))
    text = run.run_json.read_text()
    assert '"cpu": [[' in text                          # the series on one line each
    saved = run.meta().fidelity
    assert saved["checks_version"] == fidelity.CHECKS_VERSION
    assert "bins" not in json.dumps(saved["recorded"]["linkem"])     # the histograms are not needed
    again = rejudge.rejudge(run.meta())
    assert as_json(again.to_json()) == as_json(result.to_json()) == saved
    assert again.summary() == result.summary() and run.meta().validity == (False, result.summary())


def test_the_record_is_what_the_checks_read(tmp_path):
    """Judging the record gives what judging the monitor's full inputs gives: the
    bwn-link statistics cut to what the checks read, the ports as departure_rate_check
    takes them."""
    monitor = recorded_monitor(tmp_path)
    stats = {"em0": bwn_link_stats()}
    cut = {name: linkem_record(s) for name, s in stats.items()}
    for check in (fidelity.lateness_check, fidelity.linkem_offload_check):
        assert check(cut, fidelity.DEFAULT_THRESHOLDS) == check(stats, fidelity.DEFAULT_THRESHOLDS)
    assert fidelity.linkem_schedule_check(cut) == fidelity.linkem_schedule_check(stats)
    assert fidelity.linkem_offload_drops(cut) == fidelity.linkem_offload_drops(stats)
    rec = monitor.recording()
    assert rec.linkem == cut
    assert set(rec.ports) == {"s1:2"}                     # rate-limited ports only
    assert rec.ports["s1:2"]["tx"][0] == (0.0, 0) and rec.cpu[0] == (0.0, 0.0, 0.0)   # the controller's clock
    assert Recording.from_json(as_json(rec.to_json())) == replace(
        rec, ports={k: {f: ([tuple(p) for p in v] if isinstance(v, list) else v) for f, v in p.items()}
                    for k, p in rec.ports.items()})


def test_a_changed_check_gives_a_new_verdict_and_the_command_stores_it(tmp_path, capsys):
    """What a fix of a checker does to recorded runs: the verdict of today's checks,
    printed beside the old one, stored with --write."""
    run = RunDir(tmp_path / "ebn")
    run.path.mkdir()
    result = recorded_monitor(run.path).result()
    run.write_meta(RunMeta(ok=True, fidelity=result.to_json()))
    lenient = fidelity.Thresholds(cpu_saturated_max_s=2.0, lateness_p99_us=1e9, switch_ring_drop_max_frac=0.01,
                                  rate_tolerance=0.1, linkem_offload_drops_max=5)
    assert rejudge.rejudge(run.meta(), lenient).valid
    # the command, on the run and on a folder of runs, with today's (unchanged) checks
    assert rejudge.main([str(run.path)]) == 0
    out = capsys.readouterr().out
    assert out == f"{run.path}: {result.summary()} [checks v{fidelity.CHECKS_VERSION}]\n"
    fid = run.meta().fidelity
    fid["summary"] = "valid"                        # as a checker with a flaw had judged it
    fid.pop("checks_version")
    run.write_meta(RunMeta(ok=True, fidelity=fid))
    assert rejudge.main([str(tmp_path), "--write"]) == 0
    assert capsys.readouterr().out == (f"{run.path}: {result.summary()} [checks v{fidelity.CHECKS_VERSION}]"
                                       f"; was: valid [checks vNone]\n")
    stored = run.meta()
    assert stored.validity == (False, result.summary()) and stored.ok
    assert stored.fidelity["checks_version"] == fidelity.CHECKS_VERSION


@pytest.mark.parametrize("fid, message", [
    (None, "no fidelity verdict in run.json (not checked)"),
    ({"valid": True, "summary": "valid"}, "run.json has a verdict but not what it was judged from "
                                          "(made before runs recorded their measurements)"),
    ({"valid": True, "recorded": {"cpu": []}}, "the recording lacks telemetry_interval_s, linkem, switches, ports"),
    ({"valid": True, "recorded": {"cpu": [[1, 2]], "linkem": {}, "switches": {}, "ports": {},
                                  "telemetry_interval_s": 0.25}}, "the recording is malformed: "),
])
def test_a_run_without_a_recording_cannot_be_judged_again(tmp_path, capsys, fid, message):
    with pytest.raises(FidelityRecordError) as err:
        rejudge.rejudge(RunMeta(fidelity=fid))
    assert str(err.value).startswith(message)
    RunDir(tmp_path).write_meta(RunMeta(fidelity=fid))
    assert rejudge.main([str(tmp_path)]) == 1
    assert capsys.readouterr().err.startswith(f"{tmp_path}: cannot judge again: {message}")


def test_bwn_reproduce_counts_a_run_by_todays_checks_where_it_recorded_their_inputs(tmp_path):
    """The ledger's attempts (bwn/reproduce/claims.py load_record) take the verdict of
    today's checks from the recording, not the one stored when the run ended; a run
    without a recording keeps its stored verdict."""
    from bwn.reproduce import claims
    result = recorded_monitor(tmp_path).result()
    fid = result.to_json()
    fid.update(valid=True, summary="valid")             # judged by a checker that missed it
    RunDir(tmp_path).write_meta(RunMeta(ok=False, fidelity=fid))
    record = claims.load_record("a", 1, "ebn", tmp_path, [])
    assert (record.valid, record.fidelity) == (False, result.summary())
    del fid["recorded"]
    RunDir(tmp_path).write_meta(RunMeta(ok=False, fidelity=fid))
    record = claims.load_record("a", 1, "ebn", tmp_path, [])
    assert (record.valid, record.fidelity) == (True, "valid")
