"""Flow completion time (bwn/analysis/fct.py, docs/compare.md) on hand-made sender
records whose answers are known: FCT from the SYN to the last byte's ACK, processor
sharing's ideal, flows that did not complete, groups, the metrics and the report."""
from __future__ import annotations

import csv
import json

import pytest

from bwn.analysis import fct
from bwn.analysis import metrics as mt
from bwn.analysis.report import write_report
from bwn.analysis.report.load import CapacitySample, FlowLog, SchemeRun, load_run_dir, scenario_facts

PAYLOAD = 1000 / 1102            # the report's payload per frame
C_BPS = 11.02e6                  # frames: 10 Mb/s of payload


def sized(name: str, start_s: float, handshake_s: float, duration_s: float, size: int,
          status: str = "complete", delivered: int | None = None) -> FlowLog:
    """A flow whose first log row (the SYN-ACK) is ``handshake_s`` after its SYN and whose
    summary says ``duration_s`` from the SYN-ACK to the last byte's ACK."""
    samples = [{"t_s": handshake_s, "delivered_bytes": 0.0},
               {"t_s": handshake_s + duration_s, "delivered_bytes": float(size)}]
    summary = {"status": status, "bytes": float(size if delivered is None else delivered),
               "duration_s": duration_s}
    return FlowLog(name, samples, summary, start_s, "rcp")


def long_flow(name: str, start_s: float = 0.0, end_s: float = 30.0) -> FlowLog:
    samples = [{"t_s": t, "delivered_bytes": t * 1e6} for t in range(int(end_s - start_s) + 1)]
    return FlowLog(name, samples, {"status": "complete", "duration_s": end_s - start_s,
                                   "bytes": (end_s - start_s) * 1e6}, start_s, "rcp")


def run_of(flows, sizes, rtts) -> SchemeRun:
    run = SchemeRun("rcp", list(flows), [], [CapacitySample(0.0, "bottleneck", C_BPS)])
    run.flow_sizes = dict(sizes)
    run.flow_base_rtt_s = dict(rtts)
    return run


def test_fct_is_the_handshake_row_plus_the_summary_duration():
    status, value = fct.flow_fct(sized("short1", 8.0, 0.05, 0.40, 100_000), 100_000)
    assert status == "complete"
    assert value == pytest.approx(0.45)


def test_ideal_is_two_rtts_plus_the_size_at_the_fair_share():
    # RCP's 1.5 RTT + L / r to the last byte's arrival, + half an RTT for its ACK
    assert fct.ideal_fct_s(100_000, 2e6, 0.05) == pytest.approx(0.1 + 0.4)


def test_slowdown_against_the_fair_share_at_the_flow_start():
    # three long flows and the short one share 10 Mb/s of payload at 8 s: 2.5 Mb/s each
    # (a fourth long flow ended at 5 s: not counted)
    flows = [long_flow(f"long{i}") for i in (1, 2, 3)] + [long_flow("long4", 0.0, 5.0),
                                                          sized("short1", 8.0, 0.05, 0.50, 100_000)]
    run = run_of(flows, {"short1": 100_000}, {"short1": 0.05, "long1": 0.05})
    (one,) = fct.fcts(run)
    assert one.ideal_s == pytest.approx(2 * 0.05 + 100_000 * 8 / 2.5e6)
    assert one.fct_s == pytest.approx(0.55)
    assert one.slowdown == pytest.approx(0.55 / 0.42)


def test_a_flow_that_did_not_complete_is_counted_not_dropped():
    flows = [sized("short1", 8.0, 0.05, 0.40, 100_000),
             sized("short2", 10.0, 0.05, 3.0, 300_000, status="interrupted", delivered=120_000),
             sized("short3", 12.0, 0.05, 1.0, 300_000, delivered=200_000)]       # "complete" but short
    run = run_of(flows, {"short1": 100_000, "short2": 300_000, "short3": 300_000, "short4": 30_000}, {})
    got = {f.flow: f for f in fct.fcts(run)}
    assert got["short1"].completed and not got["short2"].completed and not got["short3"].completed
    assert got["short2"].status == "interrupted"
    assert got["short4"].status == fct.NO_RECORD                # in the scenario, no sender record
    (group,) = fct.by_group(list(got.values()))
    assert (group.group, group.flows, group.completed, group.incomplete) == ("short", 4, 1, 3)
    assert group.not_completed == ("short2", "short3", "short4")
    assert group.mean_s == pytest.approx(0.45)
    # a mean over the flows that happened to finish is not a value
    assert fct.fct_value(list(got.values()), "fct_s") is None
    assert fct.fct_value(list(got.values()), "fct_incomplete") == 3


def test_groups_mean_and_median():
    flows = [sized(f"short{i}", 8.0 + 2 * i, 0.05, d, 30_000) for i, d in enumerate((0.15, 0.25, 0.95), 1)]
    run = run_of(flows, {f.name: 30_000 for f in flows}, {})
    (group,) = fct.by_group(fct.fcts(run))
    assert group.mean_s == pytest.approx((0.2 + 0.3 + 1.0) / 3)
    assert group.median_s == pytest.approx(0.3)
    assert fct.group_of("short12") == "short" and fct.group_of("cross3#7") == "cross"


def test_metrics_select_the_sized_flows():
    flows = [long_flow("long1")] + [sized(f"short{i}", 8.0 + 2 * i, 0.05, 0.45, 100_000) for i in (1, 2)]
    run = run_of(flows, {"short1": 100_000, "short2": 100_000}, {"short1": 0.05, "short2": 0.05})
    assert mt.metric_value("fct_s:short*", run, [], {}) == pytest.approx(0.5)
    assert mt.metric_value("fct_s:short2", run, [], {}) == pytest.approx(0.5)
    # share 10 Mb/s / 2 (the long flow and the short one): ideal 0.1 + 0.16 s
    assert mt.metric_value("fct_slowdown:short*", run, [], {}) == pytest.approx(0.5 / 0.26)
    assert mt.metric_value("fct_incomplete:short*", run, [], {}) == 0
    assert mt.support_of("fct_incomplete:short*").name == "COUNT"
    mt.check("fct_s:short*")


def write_run(root, status_short2="complete"):
    """A bwn run folder: scenario.toml beside one scheme's flows/ and run.json."""
    (root / "scenario.toml").write_text("""
[experiment]
duration_s = 30
[[switches]]
name = "s1"
[[switches]]
name = "s2"
[[hosts]]
name = "h1"
ip = "10.0.1.1/24"
[[hosts]]
name = "h2"
ip = "10.0.2.1/24"
[[links]]
a = "h1"
b = "s1"
delay_ms = 1
schedule = { kind = "constant", rate_mbit = 100 }
[[links]]
name = "bottleneck"
a = "s1"
b = "s2"
delay_ms = 23
schedule = { kind = "constant", rate_mbit = 11.02 }
[[links]]
a = "s2"
b = "h2"
delay_ms = 1
schedule = { kind = "constant", rate_mbit = 100 }
[[flows]]
name = "long1"
src = "h1"
dst = "h2"
[[flows]]
name = "short1"
src = "h1"
dst = "h2"
start_s = 8
bytes = 100000
[[flows]]
name = "short2"
src = "h1"
dst = "h2"
start_s = 12
bytes = 100000
""")
    run = root / "rcp"
    (run / "flows").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({
        "flow_starts_s": {"long1": 0.0, "short1": 8.0, "short2": 12.0},
        "flow_links": {n: [{"link": "bottleneck", "from": "s1", "to": "s2"}] for n in ("long1", "short1", "short2")}}))
    (run / "capacity.csv").write_text("t_s,link,rate_bps\n0,bottleneck,11020000\n")
    flows = {"long1": ([(0.05, 0), (30.0, 3.0e7)], "complete", 29.95, 3.0e7),
             "short1": ([(0.05, 0), (0.5, 100000)], "complete", 0.45, 100000),
             "short2": ([(0.05, 0), (2.0, 40000)], status_short2, 1.95, 40000 if status_short2 != "complete" else 100000)}
    for name, (rows, status, duration, delivered) in flows.items():
        with open(run / "flows" / f"{name}.jsonl", "w") as fh:
            for t, d in rows:
                fh.write(json.dumps({"time_s": t, "flow_id": 1, "delivered_bytes": d}) + "\n")
        (run / "flows" / f"{name}.summary.json").write_text(json.dumps(
            {"flow_id": 1, "algo": "rcp", "status": status, "bytes": delivered, "duration_s": duration}))
    return root


def test_the_scenario_gives_sizes_and_propagation_round_trips(tmp_path):
    sizes, rtts = scenario_facts(write_run(tmp_path) / "scenario.toml")
    assert sizes == {"short1": 100000, "short2": 100000}
    assert rtts["short1"] == pytest.approx(2 * (1 + 23 + 1) / 1e3)


def test_report_names_the_flow_that_did_not_complete(tmp_path):
    root = write_run(tmp_path, status_short2="interrupted")
    write_report(root, load_run_dir(root))
    rows = list(csv.DictReader(open(root / "fct.csv")))
    assert [(r["flow"], r["status"]) for r in rows] == [("short1", "complete"), ("short2", "interrupted")]
    assert float(rows[0]["fct_s"]) == pytest.approx(0.5)
    # 10 Mb/s of payload shared by long1 and short1: ideal 2 x 50 ms + 0.8 Mbit / 5 Mb/s
    assert float(rows[0]["ideal_s"]) == pytest.approx(0.1 + 0.16)
    assert rows[1]["fct_s"] == ""
    md = (root / "summary.md").read_text()
    assert "## Comparison" in md and "**short2**" in md and "**interrupted**" in md
    assert "| short | 1/2 |" in md
