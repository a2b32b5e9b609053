"""Experiment report (bwn/analysis/report/) from synthetic run directories."""
from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, Optional

import pytest

from bwn.analysis import report
from bwn.analysis.report import __main__ as report_cli
from bwn.analysis.report import write_report
from bwn.analysis.report.load import (
    AGGREGATE_FLOW,
    CAPACITY_COLUMNS,
    CapacitySample,
    DEFAULT_BIN_S,
    DEFAULT_FRAME_BYTES,
    DEFAULT_MSS_BYTES,
    FlowLog,
    LOG_COLUMNS,
    ReportError,
    SchemeRun,
    TELEMETRY_COLUMNS,
    TIGHT_UNSET_KBPS,
    TelemetrySample,
    _apply_meta,
    _load_flow,
    _text,
    load_run_dir,
    load_scheme_run,
    read_capacity,
    read_flow_log,
    read_summary,
    read_telemetry,
)
from bwn.analysis.report.plots import _have_dpkt, _telemetry_of, write_plots
from bwn.analysis.report.rates import (
    EstimateError,
    FairShares,
    RateCurve,
    _Delivered,
    _interp,
    active_flows,
    bottleneck,
    capacity_curves,
    estimate_bps,
    estimate_error,
    jain_index,
    throughput_series,
)
from bwn.analysis.report.tables import DEFINITIONS, _cell, _last, _sum, summarize, write_markdown
from bwn.rundir import RunDir, RunMeta
from hosts.flowlog import SENDER_FIELDS, TimeSeriesLog

TIMES_S = [i * 0.5 for i in range(20)]         # log rows at 0, 0.5, ..., 9.5 s
K = 1000 / 1102      # payload bits per frame bit of the runner's agents (DEFAULT_MSS_BYTES / DEFAULT_FRAME_BYTES)


def write_sender_log(path: Path, flow_id: int, algo: str, rate_bps: float,
                     extra: dict | None = None) -> None:
    """A log in the sender's real format (hosts/flowlog.py), one row every 0.5 s."""
    log = TimeSeriesLog(str(path), SENDER_FIELDS, interval_us=0)
    for t_s in TIMES_S:
        row = {"time_s": t_s, "flow_id": flow_id, "algo": algo, "cwnd": 10 + t_s,
               "ssthresh": float("inf"), "delivered_bytes": int(rate_bps * t_s / 8),
               "retransmits": 0, "srtt_us": 20_000.0, **(extra or {})}
        log.offer(flow_id, int(t_s * 1e6), row)
    log.close()


def write_summary(path: Path, flow_id: int, algo: str, goodput_bps: float, retransmits: int,
                  duration_s: float = 10.0) -> None:
    path.write_text(json.dumps({
        "flow_id": flow_id, "algo": algo, "status": "complete",
        "bytes": int(goodput_bps * duration_s / 8), "duration_s": duration_s,
        "goodput_bps": goodput_bps, "retransmits": retransmits, "timeouts": 0,
        "rtt_p50_ms": 20.0, "rtt_p95_ms": 30.0, "rtt_p99_ms": 35.0, "rtt_mean_ms": 21.5}))


def write_csv(path: Path, header: list[str], rows: list[list]) -> None:
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)


@pytest.fixture()
def run_dir(tmp_path: Path) -> Path:
    # ebn: two flows at 5 Mb/s on a constant 10 Mb/s bottleneck (and a 100 Mb/s access link).
    ebn = RunDir(tmp_path / "ebn")
    ebn.flows_dir.mkdir(parents=True)
    for name, flow_id in (("f1", 1), ("f2", 2)):
        write_sender_log(ebn.flow_log(name), flow_id, "ebn", 5e6,
                         {"echo_ebn_code": 98, "echo_hop_count": 2})
        write_summary(ebn.flow_summary(name), flow_id, "ebn", 5e6, retransmits=flow_id)
    write_csv(ebn.capacity_csv, ["t_s", "link", "rate_bps"],
              [[0, "access", 100e6], [0, "bottleneck", 10e6]])
    write_csv(ebn.telemetry_csv, list(TELEMETRY_COLUMNS),
              [[t / 10, "s1", 3, 10000, 9800, 200, t % 7, 2] for t in range(100)])
    ebn.write_meta(RunMeta(bottleneck_port="s1:3"))

    # westwood: 2.5 and 7.5 Mb/s (1:3) while the capacity steps from 10 to 20 Mb/s at 5 s.
    ww = RunDir(tmp_path / "westwood")
    ww.flows_dir.mkdir(parents=True)
    for name, flow_id, rate in (("f1", 11, 2.5e6), ("f2", 12, 7.5e6)):
        write_sender_log(ww.flow_log(name, ".csv"), flow_id, "westwood", rate, {"estimate_bps": 6e6})
        write_summary(ww.flow_summary(name), flow_id, "westwood", rate, retransmits=0)
    write_csv(ww.capacity_csv, ["t_s", "link", "rate_bps"],
              [[0, "bottleneck", 10e6], [5, "bottleneck", 20e6]])

    # obp: one flow starting at 2 s (run.json), logged with the report's own column names and
    # no summary, 8 Mb/s for 5 s; capacity 20 Mb/s until 2 s, then 10 Mb/s.
    obp = RunDir(tmp_path / "obp")
    obp.flows_dir.mkdir(parents=True)
    with obp.flow_log("solo").open("w") as fh:
        for i in range(51):
            t_s = i / 10
            fh.write(json.dumps({"t_s": t_s, "cwnd": 20, "delivered_bytes": 1e6 * t_s,
                                 "pacing_rate_bps": 8e6, "fb_hop_count": 1,
                                 "fb_tight_kbps": 2000 if t_s >= 0.5 else None}) + "\n")
    write_csv(obp.capacity_csv, ["t_s", "link", "rate_bps"],
              [[0, "bottleneck", 20e6], [2, "bottleneck", 10e6]])
    obp.write_meta(RunMeta(bottleneck_link="bottleneck", flow_starts_s={"solo": 2.0}))
    return tmp_path


def rows_by_key(path: Path) -> dict[tuple[str, str], dict[str, str]]:
    with path.open() as fh:
        return {(r["scheme"], r["flow"]): r for r in csv.DictReader(fh)}


def test_jain_index():
    assert jain_index([1, 1]) == pytest.approx(1.0)
    assert jain_index([1, 3]) == pytest.approx(0.8)     # 16 / (2 * 10)
    assert jain_index([5]) is None


def test_summary_numbers(run_dir):
    runs = load_run_dir(run_dir)
    assert [r.scheme for r in runs] == ["ebn", "obp", "westwood"]
    summary_md = write_report(run_dir, runs)
    assert summary_md == run_dir / "summary.md"
    rows = rows_by_key(run_dir / "summary.csv")
    assert set(rows) == {("ebn", "f1"), ("ebn", "f2"), ("ebn", "all"), ("obp", "solo"),
                         ("westwood", "f1"), ("westwood", "f2"), ("westwood", "all")}

    # ebn: 5 Mb/s each on the 10 Mb/s bottleneck (the slower of the two links).
    f1 = rows[("ebn", "f1")]
    assert float(f1["goodput_bps"]) == pytest.approx(5e6)
    assert float(f1["capacity_bps"]) == pytest.approx(10e6)
    assert float(f1["utilization"]) == pytest.approx(0.5)
    assert float(f1["jain"]) == pytest.approx(1.0)
    assert float(f1["retransmissions"]) == 1
    assert float(f1["rtt_mean_ms"]) == 21.5 and float(f1["rtt_p95_ms"]) == 30
    # Code 98 = 2^(98/8) kb/s of frames against the fair share 10 Mb/s / 2 flows (also
    # frames: the payload scaling cancels), then against the flow's own 5 Mb/s of payload
    # (from the second row on: the first has no delivery yet).
    ebn_error = abs(2 ** (98 / 8) * 1e3 - 5e6) / 5e6
    assert float(f1["estimate_error_share"]) == pytest.approx(ebn_error, rel=1e-4)
    own_error = abs(2 ** (98 / 8) * 1e3 * K - 5e6) / 5e6
    assert float(f1["estimate_error_rate"]) == pytest.approx(own_error, rel=1e-4)
    assert int(f1["estimate_samples"]) == 20
    total = rows[("ebn", "all")]
    assert float(total["goodput_bps"]) == pytest.approx(10e6)
    assert float(total["utilization"]) == pytest.approx(1.0)
    assert float(total["retransmissions"]) == 3

    # westwood: 2.5 + 7.5 Mb/s; capacity 10 Mb/s for 5 s then 20: mean 15 Mb/s.
    w1, w2, wall = rows[("westwood", "f1")], rows[("westwood", "f2")], rows[("westwood", "all")]
    assert float(w1["goodput_bps"]) == pytest.approx(2.5e6)
    assert float(w1["capacity_bps"]) == pytest.approx(15e6)
    assert float(w1["utilization"]) == pytest.approx(2.5 / 15)
    assert float(w2["utilization"]) == pytest.approx(7.5 / 15)
    assert float(wall["utilization"]) == pytest.approx(10 / 15)
    assert float(w1["jain"]) == float(wall["jain"]) == pytest.approx(0.8)
    # estimate 6 Mb/s of payload against the fair share in payload, 10 Mb/s * K / 2
    # (t < 5 s) then 20 Mb/s * K / 2, half of the rows each; and against 2.5 Mb/s.
    share_errors = [abs(6e6 - c * K / 2) / (c * K / 2) for c in (10e6, 20e6)]
    assert float(w1["estimate_error_share"]) == pytest.approx(sum(share_errors) / 2)
    assert float(w1["estimate_error_rate"]) == pytest.approx((6e6 - 2.5e6) / 2.5e6)

    # obp: 8 Mb/s over [2 s, 7 s] on 10 Mb/s; tight 2 Mb/s of frames + own 8 Mb/s of
    # payload against the whole link (no other flow), 10 Mb/s * K of payload.
    solo = rows[("obp", "solo")]
    assert float(solo["start_s"]) == 2
    assert float(solo["goodput_bps"]) == pytest.approx(8e6)
    assert float(solo["utilization"]) == pytest.approx(0.8)
    assert solo["jain"] == ""
    estimate = 2e6 * K + 8e6
    assert float(solo["estimate_error_share"]) == pytest.approx(abs(estimate - 10e6 * K) / (10e6 * K))
    assert int(solo["estimate_samples"]) == 46

    text = summary_md.read_text()
    assert "| ebn | f1 | ebn | 5.000 | 10.000 | 0.500 |" in text
    assert "![throughput](throughput.png)" in text


def test_plots_created(run_dir):
    write_report(run_dir, load_run_dir(run_dir))
    for name in ("throughput.png", "goodput.png", "cc-ebn.png", "cc-obp.png", "cc-westwood.png"):
        data = (run_dir / name).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 10_000, name


def test_cli_regenerates_from_files(run_dir, capsys):
    assert report_cli.main([str(run_dir), "--bin-s", "0.25"]) == 0
    assert capsys.readouterr().out.strip() == str(run_dir / "summary.md")
    assert (run_dir / "summary.csv").stat().st_size > 0


def test_cli_reports_bad_input(tmp_path, capsys):
    (tmp_path / "ebn" / "flows").mkdir(parents=True)
    (tmp_path / "ebn" / "flows" / "f1.jsonl").write_text('{"time_s": 0}\nnot json\n')
    assert report_cli.main([str(tmp_path)]) == 1
    assert "f1.jsonl:2: not JSON" in capsys.readouterr().err


def test_column_mapping_is_the_senders():
    # Every log column the report reads exists in the sender's log format.
    assert set(LOG_COLUMNS.values()) <= set(SENDER_FIELDS)


def test_a_flows_start_is_run_json_s_else_its_summarys_else_zero(run_dir):
    """run.json's flow_starts_s, else the summary's start_s, else 0 (a config.toml, which
    no writer makes, is not read)."""
    (run_dir / "config.toml").write_text('[[flows]]\nname = "f2"\nsrc = "h1"\ndst = "h2"\n'
                                         'start_s = 3.0\n')
    ebn = RunDir(run_dir / "ebn")
    summary = json.loads(ebn.flow_summary("f1").read_text())
    ebn.flow_summary("f1").write_text(json.dumps({**summary, "start_s": 1.5}))
    runs = {r.scheme: r for r in load_run_dir(run_dir)}
    assert {f.name: f.start_s for f in runs["ebn"].flows} == {"f1": 1.5, "f2": 0.0}
    ebn.write_meta(RunMeta(bottleneck_port="s1:3", flow_starts_s={"f1": 4.0}))
    runs = {r.scheme: r for r in load_run_dir(run_dir)}
    assert {f.name: f.start_s for f in runs["ebn"].flows} == {"f1": 4.0, "f2": 0.0}
    assert runs["obp"].flows[0].start_s == 2.0


def test_invalid_run_is_marked_in_every_table_and_plot(run_dir: Path, monkeypatch):
    """A run whose fidelity check failed (run.json) says INVALID in summary.csv,
    summary.md and the plots; a run without the check says nothing."""
    RunDir(run_dir / "ebn").write_meta(RunMeta(bottleneck_port="s1:3", fidelity={
        "valid": False, "summary": "INVALID: cpu: BROKEN: 2.4 s without idle CPU"}))
    titles: list[str] = []
    import matplotlib.axes
    original = matplotlib.axes.Axes.set_title
    monkeypatch.setattr(matplotlib.axes.Axes, "set_title",
                        lambda self, text, *a, **k: (titles.append(text), original(self, text, *a, **k))[1])
    write_report(run_dir, load_run_dir(run_dir))
    rows = list(csv.DictReader(open(run_dir / "summary.csv")))
    ebn_rows = [r for r in rows if r["scheme"] == "ebn"]
    assert ebn_rows and all(r["valid"] == "0" and r["fidelity"].startswith("INVALID") for r in ebn_rows)
    assert all(r["valid"] == "" for r in rows if r["scheme"] != "ebn")
    md = (run_dir / "summary.md").read_text()
    assert "| ebn **INVALID** |" in md
    assert "* ebn: INVALID: cpu: BROKEN: 2.4 s without idle CPU" in md
    assert any(t.startswith("ebn [INVALID]") for t in titles)
    assert not any(t.startswith("westwood [INVALID]") for t in titles)


def _obp_with_cross_traffic(root: Path) -> Path:
    """OBP's long flow crosses b1 (10 Mb/s) and b2 (20 Mb/s); a NewReno cross flow,
    application-limited to 3 Mb/s of payload, shares b1 from 2 s to 6 s only."""
    run = RunDir(root / "obp")
    run.flows_dir.mkdir(parents=True)
    with run.flow_log("long").open("w") as fh:
        for i in range(21):
            t_s = i / 2
            fh.write(json.dumps({"t_s": t_s, "algo": "obp", "cwnd": 20, "delivered_bytes": 4e6 / 8 * t_s,
                                 "fb_hop_count": 2, "fb_tight_kbps": 1000}) + "\n")
    with run.flow_log("cross").open("w") as fh:
        for i in range(9):
            fh.write(json.dumps({"t_s": i / 2, "algo": "newreno", "delivered_bytes": 3e6 / 8 * i / 2}) + "\n")
    write_csv(run.capacity_csv, ["t_s", "link", "rate_bps"], [[0, "b1", 10e6], [0, "b2", 20e6]])
    run.write_meta(RunMeta(
        flow_starts_s={"long": 0.0, "cross": 2.0},
        flow_links={"long": [{"link": "b1", "from": "s1", "to": "s2"}, {"link": "b2", "from": "s2", "to": "s3"}],
                    "cross": [{"link": "b1", "from": "s1", "to": "s2"}]},
        flow_demand_bps={"cross": 3e6}))
    return run.path


def test_obp_truth_counts_cross_traffic(tmp_path):
    """The fair share OBP's estimate is judged against is what the cross flow leaves of
    b1 while it runs (10 Mb/s of frames in payload, less its 3 Mb/s demand), and the
    whole of b1 before and after: not b1 alone, and not b2."""
    run = load_scheme_run(_obp_with_cross_traffic(tmp_path))
    long, cross = sorted(run.flows, key=lambda f: f.name != "long")
    assert (long.name, cross.name, cross.start_s, cross.end_s) == ("long", "cross", 2.0, 6.0)
    shares = FairShares(run)
    assert shares.resources(long) == ["b1:s1>s2", "b2:s2>s3"]
    for t_s, expected in ((1.0, 10e6 * K), (2.0, 10e6 * K - 3e6), (4.0, 10e6 * K - 3e6),
                          (6.0, 10e6 * K - 3e6), (6.5, 10e6 * K)):
        assert shares.share_bps(long, t_s) == pytest.approx(expected), t_s
    assert shares.share_bps(cross, 4.0) == pytest.approx(3e6)
    # The estimate: tight link 1 Mb/s of frames + the flow's own 4 Mb/s (0 at its first row).
    errors = []
    for i in range(21):
        t_s = i / 2
        estimate = 1e6 * K + (4e6 if t_s > 0 else 0.0)
        share = 10e6 * K - (3e6 if 2.0 <= t_s <= 6.0 else 0.0)
        errors.append(abs(estimate - share) / share)
    err = estimate_error(run, long, shares)
    assert err.samples == 21
    assert err.vs_share == pytest.approx(sum(errors) / 21)
    assert err.vs_rate == pytest.approx(1e6 * K / 4e6)
    row = {r["flow"]: r for r in summarize(run)}["long"]
    assert row["estimate_error_share"] == pytest.approx(sum(errors) / 21)
    assert row["capacity_bps"] == pytest.approx(10e6)      # the slower link is the bottleneck


def test_capacity_falls_back_to_telemetry(tmp_path):
    """Without capacity.csv, each telemetry port's capacity_kbps is its capacity curve
    (empty and zero capacities ignored), and the slowest port is the bottleneck."""
    scheme = tmp_path / "ebn"
    (scheme / "flows").mkdir(parents=True)
    write_sender_log(scheme / "flows" / "f1.jsonl", 1, "ebn", 4e6, {"echo_ebn_code": 98, "echo_hop_count": 1})
    write_summary(scheme / "flows" / "f1.summary.json", 1, "ebn", 4e6, retransmits=0)
    rows = []
    for i in range(20):
        t_s = i / 2
        rows.append([t_s, "s1", 3, 8000 if t_s < 5 else 4000, 3900, 100, 2, 1])
        rows.append([t_s, "s1", 1, 100000, 4000, 96000, 0, 1])
        rows.append([t_s, "s1", 2, 0 if i % 2 else "", 0, 0, 0, 0])   # never rate-limited
    write_csv(scheme / "telemetry.csv", list(TELEMETRY_COLUMNS), rows)
    run = load_scheme_run(scheme)
    curves = capacity_curves(run)
    assert sorted(curves) == ["s1:1", "s1:3"]
    assert curves["s1:3"].rate_bps(4.5) == 8e6 and curves["s1:3"].rate_bps(5.0) == 4e6
    name, curve = bottleneck(run)
    assert name == "s1:3" and (curve.times_s, curve.rates_bps) == (curves["s1:3"].times_s,
                                                                    curves["s1:3"].rates_bps)
    (f1,) = summarize(run)
    assert f1["capacity_bps"] == pytest.approx(6e6)          # 8 Mb/s for 5 s, then 4 Mb/s for 5 s
    assert f1["utilization"] == pytest.approx(4 / 6)
    run.bottleneck_link = "s1:9"
    with pytest.raises(ReportError) as err:
        bottleneck(run)
    assert str(err.value) == "ebn: bottleneck link 's1:9' has no capacity samples (links: s1:1, s1:3)"


def test_report_command_help_and_arguments(run_dir, capsys, monkeypatch):
    """`python -m bwn.analysis.report --help` says what it does and what each option is; bad
    --bin-s is exit 2 with one line; --bottleneck and --bin-s reach the report."""
    with pytest.raises(SystemExit) as exit_:
        report_cli.main(["--help"])
    assert exit_.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert text.startswith("usage: python -m bwn.analysis.report [-h] [--bin-s BIN_S] [--bottleneck LINK] RUN_DIR")
    for phrase in ("Rebuild RUN_DIR/summary.md, summary.csv and plots from "
                   "RUN_DIR/<scheme>/{flows/,telemetry.csv,capacity.csv}.",
                   "throughput averaging window, s (default 0.5)",
                   "capacity.csv link to use (default: run.json's, else the slowest)"):
        assert phrase in text, phrase
    for bad in ("0", "-1"):
        with pytest.raises(SystemExit) as exit_:
            report_cli.main([str(run_dir), "--bin-s", bad])
        assert exit_.value.code == 2
        assert capsys.readouterr().err.strip().endswith("error: --bin-s must be positive")
    seen = {}

    def fake_write(path, runs, bin_s):
        seen.update(path=path, links={r.bottleneck_link for r in runs}, bin_s=bin_s)
        return Path(path) / "summary.md"

    monkeypatch.setattr(report_cli, "write_report", fake_write)
    assert report_cli.main([str(run_dir), "--bin-s", "0.25", "--bottleneck", "bottleneck"]) == 0
    assert seen == {"path": run_dir, "links": {"bottleneck"}, "bin_s": 0.25}
    assert report_cli.main([str(run_dir)]) == 0
    assert seen["bin_s"] == DEFAULT_BIN_S and seen["links"] == {None, "bottleneck"}


def test_throughput_series_bins():
    """Bin centres and mean rates over the flow's delivered bytes; the last bin is cut
    at the flow's end."""
    flow = FlowLog("f", samples=[{"t_s": t, "delivered_bytes": b}
                                        for t, b in ((0, 0), (1, 1000), (2, 3000), (3, 6000), (3.5, 7000))],
                          start_s=10.0)
    xs, ys = throughput_series(flow, 1.0)
    assert xs == [10.5, 11.5, 12.5, 13.25]
    assert ys == [8000.0, 16000.0, 24000.0, 16000.0]
    assert throughput_series(FlowLog("g", samples=[{"t_s": 0, "delivered_bytes": 5}]), 1.0) == ([], [])


def test_active_flows_count_start_inclusive_end_exclusive():
    flows = [FlowLog("a", summary={"duration_s": 2.0}, start_s=1.0),
             FlowLog("b", summary={"duration_s": 1.0}, start_s=2.0)]
    run = SchemeRun("x", flows)
    assert [active_flows(run, t) for t in (0.5, 1.0, 2.0, 2.5, 3.0)] == [0, 1, 2, 2, 0]


def test_have_dpkt_follows_the_import(monkeypatch):
    import builtins
    assert _have_dpkt() is True          # the plots extra installs it
    real_import = builtins.__import__
    monkeypatch.setattr(builtins, "__import__", lambda name, *a, **k: (_ for _ in ()).throw(
        ModuleNotFoundError(name)) if name == "dpkt" else real_import(name, *a, **k))
    assert _have_dpkt() is False


def test_markdown_table_cells_sections_and_plots(tmp_path: Path):
    """summary.md: one row per flow with each figure in its unit and precision
    (Mb/s and ratios to 3 decimals, ms to 1), '-' for a figure a flow lacks, an
    INVALID run marked in its row, then each run's bottleneck and fidelity
    verdict, and the plots (or why there are none)."""
    valid = SchemeRun(scheme="obp", flows=[], validity=(True, "valid"))
    broken = SchemeRun(scheme="ebn", flows=[], validity=(False, "INVALID: cpu: BROKEN"))
    full = {"scheme": "obp", "flow": "f1", "algo": "obp", "goodput_bps": 4_321_000.0,
            "capacity_bps": 10e6, "utilization": 0.43219, "retransmissions": 7.0,
            "rtt_mean_ms": 41.26, "rtt_p95_ms": 55.04, "jain": 0.98765,
            "estimate_error_share": 0.1234, "estimate_error_rate": 0.5, "valid": 1}
    sparse = {"scheme": "ebn", "flow": "f2", "algo": "", "goodput_bps": 0.0, "capacity_bps": None,
              "utilization": None, "retransmissions": None, "rtt_mean_ms": None, "rtt_p95_ms": None,
              "jain": None, "estimate_error_share": None, "estimate_error_rate": None, "valid": 0}
    path = tmp_path / "summary.md"
    write_markdown(path, [valid, broken], [full, sparse], [tmp_path / "throughput.png"])
    lines = path.read_text().splitlines()
    assert lines[0] == "# Experiment results"
    header, rule, row1, row2 = lines[2:6]
    assert header.count("|") == rule.count("|") == row1.count("|") == row2.count("|") == 13
    assert row1 == "| obp | f1 | obp | 4.321 | 10.000 | 0.432 | 7 | 41.3 | 55.0 | 0.988 | 0.123 | 0.500 |"
    assert row2 == "| ebn **INVALID** | f2 | - | 0.000 | - | - | - | - | - | - | - | - |"
    text = "\n".join(lines)
    assert "* obp: no capacity log\n* ebn: no capacity log" in text
    assert "## Fidelity" in text and "* obp: valid\n* ebn: INVALID: cpu: BROKEN" in text
    assert lines[-3:] == ["## Plots", "", "![throughput](throughput.png)"] and "(no plots" not in text
    write_markdown(path, [valid], [full], [])
    assert path.read_text().splitlines()[-1] == "(no plots: matplotlib is not installed)"
    assert "## Plots" not in path.read_text()


@pytest.mark.parametrize("shape", ["object", "list", "flows"])
def test_summary_json_in_each_shape_renamed_and_typed(tmp_path: Path, shape: str):
    """A --summary-json file is one flow, a list of flows or {"flows": [...]}; the
    sender's names map to the report's (retransmits -> retransmissions), numbers
    and numeric strings become floats, empty values None, and algo stays text."""
    flow = {"flow_id": 3, "algo": "dft", "goodput_bps": "2.5e6", "retransmits": 4, "timeouts": "",
            "rtt_p50_ms": True, "unknown": 1}
    data = {"object": flow, "list": [flow, flow], "flows": {"flows": [flow]}}[shape]
    path = tmp_path / "f.summary.json"
    path.write_text(json.dumps(data))
    rows = read_summary(path)
    assert len(rows) == (2 if shape == "list" else 1)
    assert rows[0] == {"flow_id": 3.0, "algo": "dft", "goodput_bps": 2.5e6, "retransmissions": 4.0,
                       "timeouts": None, "rtt_p50_ms": 1.0}


@pytest.mark.parametrize("text, message", [
    ("{", "not JSON: Expecting property name enclosed in double quotes (line 1)"),
    ("[1, 2]", "expected a JSON object per flow"),
    ('{"flows": 3}', "expected a JSON object per flow"),
    ('"text"', "expected a JSON object per flow"),
])
def test_summary_json_that_is_not_flows_says_so(tmp_path: Path, text: str, message: str):
    path = tmp_path / "bad.summary.json"
    path.write_text(text)
    with pytest.raises(ReportError) as err:
        read_summary(path)
    assert str(err.value) == f"{path}: {message}"
    with pytest.raises(ReportError, match="cannot read: No such file or directory"):
        read_summary(tmp_path / "missing.json")


# -- plots: what each figure shows, read back from the figure -------------------------

@pytest.fixture()
def figures(monkeypatch) -> dict:
    """Each figure the report saves, by file name (the PNG is not written)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.figure
    saved: dict = {}
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig",
                        lambda self, path, *args, **kwargs: saved.__setitem__(Path(path).name, self))
    return saved


def _lines(ax) -> dict:
    return {line.get_label(): line for line in ax.get_lines()}


def _ys(line) -> list[float]:
    return [float(y) for y in line.get_ydata()]


def test_throughput_plot_shows_each_flow_the_capacity_and_the_switch_rate(run_dir, figures):
    """One panel per run, one line per flow in Mb/s, the bottleneck capacity as a black
    step, the switch's measured link rate (telemetry) where there is one; titled with
    the run and the bin, labelled, the axis from 0, time only under the last panel."""
    runs = load_run_dir(run_dir)
    write_plots(run_dir, runs, 1.0)
    fig = figures["throughput.png"]
    assert list(fig.get_size_inches()) == [12, 3 * 3.2]
    ebn, obp, westwood = fig.axes
    assert [ax.get_title() for ax in fig.axes] == [
        f"{s}: throughput per flow (1 s bins)" for s in ("ebn", "obp", "westwood")]
    assert [ax.get_ylabel() for ax in fig.axes] == ["Mb/s"] * 3
    assert [ax.get_xlabel() for ax in fig.axes] == ["", "", "time since experiment start (s)"]
    assert all(ax.get_ylim()[0] == 0 for ax in fig.axes)
    expected = {ebn: {"f1": 5.0, "f2": 5.0}, obp: {"solo": 8.0}, westwood: {"f1": 2.5, "f2": 7.5}}
    capacity_mbps = {ebn: [10, 10], obp: [20, 10, 10], westwood: [10, 20, 20]}
    for ax, run in zip(fig.axes, runs):
        lines = _lines(ax)
        rate_line = ["link rate (switch)"] if ax is ebn else []
        assert list(lines) == [*expected[ax], "capacity (bottleneck)", *rate_line]
        assert [t.get_text() for t in ax.get_legend().get_texts()] == list(lines)
        for flow in run.flows:
            xs, _ = throughput_series(flow, 1.0)
            assert [float(x) for x in lines[flow.name].get_xdata()] == xs
            assert _ys(lines[flow.name]) == pytest.approx([expected[ax][flow.name]] * len(xs))
        capacity = lines["capacity (bottleneck)"]
        assert (capacity.get_color(), capacity.get_drawstyle()) == ("black", "steps-post")
        assert _ys(capacity) == capacity_mbps[ax]
    switch = _lines(ebn)["link rate (switch)"]
    assert [float(x) for x in switch.get_xdata()] == pytest.approx([t / 10 for t in range(100)])
    assert _ys(switch) == [9.8] * 100 and switch.get_linestyle() == ":"
    assert [float(x) for x in _lines(westwood)["capacity (bottleneck)"].get_xdata()][:2] == [0, 5]


def test_goodput_plot_stacks_flows_with_their_names_totals_and_invalid_hatch(run_dir, figures):
    RunDir(run_dir / "ebn").write_meta(RunMeta(bottleneck_port="s1:3", fidelity={
        "valid": False, "summary": "INVALID: cpu"}))
    runs = load_run_dir(run_dir)
    write_plots(run_dir, runs, 1.0)
    (ax,) = figures["goodput.png"].axes
    bars = [(round(p.get_x() + p.get_width() / 2, 6), round(p.get_y(), 6), round(p.get_height(), 6),
             p.get_hatch()) for p in ax.patches]
    assert bars == [(0, 0, 5, "//"), (0, 5, 5, "//"), (1, 0, 8, None),
                    (2, 0, 2.5, None), (2, 2.5, 7.5, None)]
    texts = [(t.get_text(), *map(float, t.get_position())) for t in ax.texts]
    assert texts == [("f1", 0, 2.5), ("f2", 0, 7.5), ("10.00", 0, 10),     # a lone flow's
                     ("8.00", 1, 8),                                        # name is not drawn
                     ("f1", 2, 1.25), ("f2", 2, 6.25), ("10.00", 2, 10)]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["ebn [INVALID]", "obp", "westwood"]
    assert ax.get_ylim()[0] == 0 and ax.get_ylim()[1] >= 10 * 1.08   # room for the totals
    assert (ax.get_title(), ax.get_ylabel()) == ("goodput per scheme (flows stacked)", "goodput (Mb/s)")


def test_congestion_plot_shows_cwnd_rates_estimates_shares_and_queue(run_dir, figures):
    """Per run: cwnd per flow; pacing rate, estimate (solid) and fair share (dashed) in
    the flow's own colour, and the capacity; the bottleneck queue when the switch
    reported one. Times are since the experiment start (a flow's start added)."""
    runs = {r.scheme: r for r in load_run_dir(run_dir)}
    write_plots(run_dir, list(runs.values()), 1.0)
    cwnd, rates, queue = figures["cc-ebn.png"].axes
    assert cwnd.get_title() == "ebn: congestion window, rates and estimates"
    assert (cwnd.get_ylabel(), rates.get_ylabel(), queue.get_ylabel()) == (
        "cwnd (segments)", "rate, estimate (Mb/s)\npayload; capacity: frames", "queue (packets)")
    assert queue.get_xlabel() == "time since experiment start (s)" and rates.get_ylim()[0] == 0
    for name, color in (("f1", "C0"), ("f2", "C1")):
        line = _lines(cwnd)[name]
        assert [float(x) for x in line.get_xdata()] == TIMES_S and _ys(line) == [10 + t for t in TIMES_S]
        estimate, share = _lines(rates)[f"{name} estimate"], _lines(rates)[f"{name} fair share"]
        assert {line.get_color(), estimate.get_color(), share.get_color()} == {color}
        assert (estimate.get_linestyle(), share.get_linestyle()) == ("-", "--")
        assert _ys(share) == pytest.approx([10 * K / 2] * len(TIMES_S))     # half the payload rate
    assert list(_lines(rates))[-1] == "capacity (bottleneck)"
    assert [float(x) for x in queue.get_lines()[0].get_xdata()] == pytest.approx([t / 10 for t in range(100)])
    assert _ys(queue.get_lines()[0]) == [t % 7 for t in range(100)]

    assert len(figures["cc-westwood.png"].axes) == 2                       # no telemetry, no queue
    rates = figures["cc-westwood.png"].axes[1]
    assert _ys(_lines(rates)["f2 estimate"]) == [6.0] * len(TIMES_S)
    assert _ys(_lines(rates)["f2 fair share"]) == pytest.approx(
        [(10 if t < 5 else 20) * K / 2 for t in TIMES_S])
    assert _ys(_lines(rates)["capacity (bottleneck)"]) == [10, 20, 20]

    cwnd, rates = figures["cc-obp.png"].axes
    assert [float(x) for x in _lines(cwnd)["solo"].get_xdata()][:2] == [2.0, 2.1]   # starts at 2 s
    assert list(_lines(rates)) == ["solo pacing", "solo estimate", "solo fair share",
                                   "capacity (bottleneck)"]
    assert _ys(_lines(rates)["solo pacing"]) == [8.0] * 51
    assert len(_lines(rates)["solo estimate"].get_xdata()) == 46            # from 0.5 s on
    legend = [t.get_text() for t in rates.get_legend().get_texts()]
    assert legend == list(_lines(rates))


def test_run_json_facts_reach_the_run_and_bad_ones_are_named(tmp_path: Path):
    """run.json's segment and frame sizes, captures (relative to the run), flow ids,
    clock offset, demands and paths are what the report then computes with; a
    malformed one is one error naming the file, never a traceback."""
    meta = RunMeta(mss_bytes=1400, frame_bytes=1502, captures={"b1": {"file": "b1.pcap"}},
                   flow_ids={"f1": 7}, clock_offset_s=1.5e9, flow_demand_bps={"f1": 2e6},
                   flow_links={"f1": [{"link": "b1", "from": "s1", "to": "s2"}]})
    run = SchemeRun(scheme="x", flows=[])
    _apply_meta(run, meta, tmp_path / "x" / "run.json")
    assert (run.mss_bytes, run.frame_bytes, run.flow_ids, run.clock_offset_s) == (1400, 1502, {"f1": 7}, 1.5e9)
    assert run.captures == {"b1": str(tmp_path / "x" / "b1.pcap")}
    assert run.flow_demand_bps == {"f1": 2e6} and run.flow_links == {"f1": [("b1", "s1", "s2")]}
    assert run.payload_per_frame == pytest.approx(1400 / 1502)
    defaults = SchemeRun(scheme="y", flows=[])
    _apply_meta(defaults, RunMeta(), tmp_path / "run.json")
    assert (defaults.mss_bytes, defaults.frame_bytes, defaults.clock_offset_s, defaults.flow_links) == (
        DEFAULT_MSS_BYTES, DEFAULT_FRAME_BYTES, None, None)
    for bad in (RunMeta(flow_links={"f1": [{"link": "b1"}]}), RunMeta(captures={"b1": {"path": "b1.pcap"}})):
        with pytest.raises(ReportError) as err:
            _apply_meta(SchemeRun(scheme="z", flows=[]), bad, tmp_path / "run.json")
        assert str(err.value).startswith(f"{tmp_path / 'run.json'}: unexpected flow_links, "
                                         "flow_demand_bps, mss_bytes, frame_bytes, captures, "
                                         "flow_ids or clock_offset_s: "), bad
    for mss, frame in ((0, 1102), (1200, 1102)):
        with pytest.raises(ReportError) as err:
            _apply_meta(SchemeRun(scheme="z", flows=[]),
                               RunMeta(mss_bytes=mss, frame_bytes=frame), tmp_path / "run.json")
        assert str(err.value) == f"{tmp_path / 'run.json'}: mss_bytes {mss} must be in (0, frame_bytes {frame}]"
    _apply_meta(SchemeRun(scheme="z", flows=[]), RunMeta(mss_bytes=1102, frame_bytes=1102),
                       tmp_path / "run.json")                                  # the bound is inclusive
    # A run.json of the wrong types is the report's error, naming the file and the key.
    for text, message in (('{"mss_bytes": "many"}', "mss_bytes: expected an integer, got string 'many'"),
                          ('{"flow_ids": {"f1": "x"}}', "flow_ids.f1: expected an integer, got string 'x'"),
                          ("[]", "expected a JSON object, got an array")):
        (tmp_path / "run.json").write_text(text)
        with pytest.raises(ReportError) as err:
            load_scheme_run(tmp_path)
        assert str(err.value) == f"{tmp_path / 'run.json'}: {message}"


def test_summary_rows_of_a_two_flow_run_field_by_field(run_dir: Path):
    """Every column of a flow's row and of the run's ``all`` row, worked out by hand:
    westwood's flows carry 2.5 and 7.5 Mb/s for 10 s while the bottleneck gives
    10 Mb/s for 5 s then 20 Mb/s (mean 15), both estimate 6 Mb/s against a fair share
    of half the payload rate; the summaries give the RTTs and timeouts."""
    path = run_dir / "westwood" / "flows" / "f2.summary.json"
    summary = json.loads(path.read_text())
    summary.update(timeouts=3, retransmits=5, rtt_mean_ms=40.5, rtt_p50_ms=41.0, rtt_p95_ms=42.0,
                   rtt_p99_ms=43.0)
    path.write_text(json.dumps(summary))
    runs = {r.scheme: r for r in load_run_dir(run_dir)}
    f1, f2, total = summarize(runs["westwood"])
    share_error = (abs(6 - 5 * K) / (5 * K) + abs(6 - 10 * K) / (10 * K)) / 2   # 10 samples each
    common = {"scheme": "westwood", "start_s": 0.0, "duration_s": 10.0, "capacity_bps": 15e6,
              "jain": 0.8, "valid": None, "fidelity": "not checked"}
    assert f1 == pytest.approx({**common, "flow": "f1", "algo": "westwood", "bytes": 2.5e6 * 10 / 8,
                                "goodput_bps": 2.5e6, "utilization": 2.5 / 15, "retransmissions": 0,
                                "timeouts": 0, "rtt_mean_ms": 21.5, "rtt_p50_ms": 20.0,
                                "rtt_p95_ms": 30.0, "rtt_p99_ms": 35.0,
                                "estimate_error_share": share_error, "estimate_error_rate": 3.5 / 2.5,
                                "estimate_samples": 20})
    assert f2 == pytest.approx({**common, "flow": "f2", "algo": "westwood", "bytes": 7.5e6 * 10 / 8,
                                "goodput_bps": 7.5e6, "utilization": 0.5, "retransmissions": 5,
                                "timeouts": 3, "rtt_mean_ms": 40.5, "rtt_p50_ms": 41.0,
                                "rtt_p95_ms": 42.0, "rtt_p99_ms": 43.0,
                                "estimate_error_share": share_error, "estimate_error_rate": 1.5 / 7.5,
                                "estimate_samples": 20})
    assert total == pytest.approx({**common, "flow": "all", "algo": None, "bytes": 10e6 * 10 / 8,
                                   "goodput_bps": 10e6, "utilization": 10 / 15, "retransmissions": 5,
                                   "timeouts": 3, "rtt_mean_ms": None, "rtt_p50_ms": None,
                                   "rtt_p95_ms": None, "rtt_p99_ms": None,
                                   "estimate_error_share": None, "estimate_error_rate": None,
                                   "estimate_samples": 0})
    (solo,) = summarize(runs["obp"])                  # one flow: no "all" row
    assert solo["flow"] == "solo" and solo["start_s"] == 2.0
    runs["westwood"].capacity = []                           # no capacity known: no ratios
    f1, _, total = summarize(runs["westwood"])
    assert (f1["capacity_bps"], f1["utilization"], total["capacity_bps"], total["utilization"]) == (
        None, None, None, None)


def _markdown_blocks(text: str) -> dict[str, Any]:
    """summary.md as a CommonMark renderer with GFM tables reads it: its headings
    (level, text), its tables' header cells, and each section's bullet items and
    paragraphs (those outside lists)."""
    from markdown_it import MarkdownIt
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    out: dict[str, Any] = {"headings": [], "tables": [], "items": {}, "paragraphs": {}}
    section, header_cells, in_head, list_depth = "", [], False, 0
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open":
            section = tokens[i + 1].content
            out["headings"].append((int(tok.tag[1]), section))
        elif tok.type == "thead_open":
            header_cells, in_head = [], True
        elif tok.type == "thead_close":
            out["tables"].append(header_cells)
            in_head = False
        elif tok.type == "inline" and in_head:
            header_cells.append(tok.content)
        elif tok.type == "bullet_list_open":
            list_depth += 1
        elif tok.type == "bullet_list_close":
            list_depth -= 1
        elif tok.type == "list_item_open":
            out["items"].setdefault(section, []).append(tokens[i + 2].content)
        elif tok.type == "paragraph_open" and not list_depth:
            out["paragraphs"].setdefault(section, []).append(tokens[i + 1].content)
    return out


def test_summary_md_renders_as_its_sections_table_and_definitions(tmp_path: Path):
    """What a reader's Markdown renderer shows: the sections in order, the table's
    columns with their units (Mb/s, not MB/s), each run's verdict as one bullet, and a
    definition for each figure that needs one."""
    runs = [SchemeRun(scheme="obp", flows=[], validity=(True, "valid")),
            SchemeRun(scheme="ebn", flows=[], validity=(False, "INVALID: cpu: BROKEN"))]
    path = tmp_path / "summary.md"
    write_markdown(path, runs, [], [tmp_path / "throughput.png"])
    page = _markdown_blocks(path.read_text())
    headings, tables, items = page["headings"], page["tables"], page["items"]
    assert headings == [(1, "Experiment results"), (2, "Fidelity"), (2, "Definitions"), (2, "Plots")]
    assert tables == [["scheme", "flow", "algo", "goodput (Mb/s)", "capacity (Mb/s)", "utilization",
                       "retransmissions", "RTT mean (ms)", "RTT p95 (ms)", "Jain",
                       "estimate error vs fair share", "estimate error vs own rate"]]
    assert items["Experiment results"] == ["obp: no capacity log", "ebn: no capacity log"]
    assert items["Fidelity"] == ["obp: valid", "ebn: INVALID: cpu: BROKEN"]
    terms = [item.split("**")[1] for item in items["Definitions"]]
    assert terms == ["utilization", "jain", "estimate error"]
    estimate = items["Definitions"][2]
    assert "**payload** bit/s" in estimate and "**max-min fair share**" in estimate and "**own rate**" in estimate
    assert "## Definitions\n\n" + "\n".join(DEFINITIONS) + "\n\n## Plots" in path.read_text()
    assert page["paragraphs"] == {
        "Experiment results": ["Bottleneck (capacity used for utilization):"],
        "Fidelity": ["Each run's invariants (docs/fidelity.md); an INVALID run's figures describe the "
                     "emulator falling behind, not the scheme."],
        "Plots": ["![throughput](throughput.png)"]}


def test_one_log_of_two_flows_is_split_by_flow_id(tmp_path: Path):
    """bwn-send writes one log for all the flows it sends: the report splits the rows
    by flow id, pairs each with its summary, names them STEM#ID, takes a flow's
    algorithm from its log when the summary has none, and its start from the summary."""
    flows = tmp_path / "obp" / "flows"
    flows.mkdir(parents=True)
    log = TimeSeriesLog(str(flows / "h1-h2.csv"), SENDER_FIELDS, interval_us=0)
    for t_s in (0.0, 0.5, 1.0):
        for fid, algo in ((5, "obp"), (6, "newreno")):
            log.offer(fid, int(t_s * 1e6), {"time_s": t_s, "flow_id": fid, "algo": algo, "cwnd": fid + t_s})
    log.close()
    (flows / "h1-h2.summary.json").write_text(json.dumps([
        {"flow_id": 5, "algo": "obp", "status": "complete", "bytes": 1000, "goodput_bps": 8000.0},
        {"flow_id": 6, "status": "complete", "bytes": 500, "goodput_bps": 4000.0, "start_s": 0.25}]))
    run = load_scheme_run(tmp_path / "obp")
    by_name = {f.name: f for f in run.flows}
    assert sorted(by_name) == ["h1-h2#5", "h1-h2#6"]
    five, six = by_name["h1-h2#5"], by_name["h1-h2#6"]
    assert [s["cwnd"] for s in five.samples] == [5.0, 5.5, 6.0] and [s["cwnd"] for s in six.samples] == [6.0, 6.5, 7.0]
    assert (five.algo, six.algo) == ("obp", "newreno")
    assert (five.summary["goodput_bps"], six.summary["goodput_bps"]) == (8000.0, 4000.0)
    assert (five.start_s, six.start_s) == (0.0, 0.25)


def test_a_log_row_without_its_time_is_refused(tmp_path: Path):
    path = tmp_path / "x.csv"
    write_csv(path, ["flow_id", "cwnd"], [[1, 2.0]])
    with pytest.raises(ReportError) as err:
        read_flow_log(path)
    assert str(err.value) == f"{path}: a row has no 'time_s' column"


# -- the estimate of each log row and its error (estimate_bps, _interp, estimate_error) --

EST_PPF = SchemeRun("x", []).payload_per_frame          # 1000 / 1102


def est(source: str, sample: dict, own_bps: float = 0.0) -> Optional[float]:
    return estimate_bps(SchemeRun("x", []), sample, source, own_bps)


def test_a_senders_own_estimate_counts_only_when_positive():
    assert est("estimate_bps", {"estimate_bps": 5e6}) == 5e6
    assert est("estimate_bps", {"estimate_bps": 0.5}) == 0.5            # below 1 bit/s is still one
    assert est("estimate_bps", {"estimate_bps": 0}) is None
    assert est("estimate_bps", {"estimate_bps": -3.0}) is None
    assert est("estimate_bps", {}) is None
    # the sender's own estimate does not need a BWN switch on the path
    assert est("estimate_bps", {"estimate_bps": 5e6, "fb_hop_count": 0}) == 5e6


def test_switch_feedback_counts_only_from_a_bwn_switch_and_in_payload_bits():
    assert est("fb_ebn_code", {"fb_ebn_code": 80, "fb_hop_count": 0}) is None
    assert est("fb_tight_kbps", {"fb_tight_kbps": 500, "fb_hop_count": 0}) is None
    assert est("fb_ebn_code", {"fb_ebn_code": 80, "fb_hop_count": 1}) == pytest.approx(1024e3 * EST_PPF)
    assert est("fb_ebn_code", {"fb_ebn_code": 80}) == pytest.approx(1024e3 * EST_PPF)   # older logs
    assert est("fb_ebn_code", {"fb_ebn_code": 0, "fb_hop_count": 2}) == pytest.approx(1e3 * EST_PPF)
    assert est("fb_ebn_code", {"fb_ebn_code": 255, "fb_hop_count": 1}) is None     # unset
    assert est("fb_ebn_code", {"fb_hop_count": 1}) is None


def test_tight_link_is_the_available_bandwidth_plus_the_flows_own_rate():
    unset = TIGHT_UNSET_KBPS
    assert est("fb_tight_kbps", {"fb_tight_kbps": unset, "fb_hop_count": 1}, 1e6) is None
    assert est("fb_tight_kbps", {"fb_tight_kbps": unset - 1, "fb_hop_count": 1}, 0.0) == pytest.approx(
        (unset - 1) * 1e3 * EST_PPF)
    assert est("fb_tight_kbps", {"fb_tight_kbps": 0, "fb_hop_count": 1}, 2e6) == 2e6
    assert est("fb_tight_kbps", {"fb_tight_kbps": -400, "fb_hop_count": 1}, 2e6) == pytest.approx(
        2e6 - 400e3 * EST_PPF)                                              # overload: AB below 0
    assert est("fb_tight_kbps", {"fb_hop_count": 1}, 2e6) is None


def test_an_unknown_source_is_an_error_that_names_it():
    with pytest.raises(ReportError, match=r"^unknown estimate source 'fb_bogus'$"):
        est("fb_bogus", {"fb_hop_count": 1})


def test_interpolation_of_delivered_bytes_at_and_beyond_its_ends():
    times, values = [10.0, 20.0], [100.0, 300.0]
    assert _interp([], [], 5.0) == 0.0
    assert _interp(times, values, 9.0) == 0.0                     # before the first row
    assert _interp(times, values, 10.0) == 100.0                  # at it
    assert _interp(times, values, 15.0) == 200.0
    assert _interp(times, values, 20.0) == 300.0
    assert _interp(times, values, 99.0) == 300.0
    assert _interp([10.0], [100.0], 10.0) == 100.0
    assert _interp([10.0], [100.0], 9.9) == 0.0


class ConstantShares:
    def __init__(self, bps: Optional[float]) -> None:
        self.bps = bps

    def share_bps(self, flow: FlowLog, t_s: float) -> Optional[float]:
        return self.bps


def westwood_flow(rows: list[tuple[float, float, float]]) -> FlowLog:
    """Rows of (t_s, delivered bytes, estimate bit/s)."""
    return FlowLog("f1", [{"t_s": t, "delivered_bytes": d, "estimate_bps": e} for t, d, e in rows],
                   algo="westwood")


def test_estimate_error_against_a_given_share_and_the_flows_own_rate():
    # 1 s rows: 125 000 bytes a second = 1 Mb/s of own rate from the second row on
    flow = westwood_flow([(0.0, 0, 1.5e6), (1.0, 125_000, 1.5e6), (2.0, 250_000, 0.5e6)])
    run = SchemeRun("westwood", [flow])
    err = estimate_error(run, flow, ConstantShares(2e6), window_s=1.0)
    assert err.samples == 3                                          # every row with an estimate
    assert err.vs_share == pytest.approx((0.25 + 0.25 + 0.75) / 3)   # |est - 2e6| / 2e6
    assert err.vs_rate == pytest.approx((0.5 + 0.5) / 2)             # the first row has no own rate
    assert estimate_error(run, flow, ConstantShares(0.5), window_s=1.0).samples == 3   # > 0 counts
    none = estimate_error(run, flow, ConstantShares(0.0), window_s=1.0)
    assert (none.vs_share, none.samples) == (None, 0)                # a zero share is no share


def test_estimate_error_without_shares_uses_the_runs_fair_shares():
    flow = westwood_flow([(0.0, 0, 1e6), (1.0, 125_000, 1e6)])
    err = estimate_error(SchemeRun("westwood", [flow]), flow, window_s=1.0)
    assert (err.vs_share, err.samples) == (None, 0)                  # no capacity known: no share
    assert err.vs_rate == pytest.approx(0.0)


def test_a_slow_own_rate_still_counts_and_a_lone_first_row_has_none():
    # 1 byte in 16 s: an own rate of 0.5 bit/s
    flow = westwood_flow([(0.0, 0, 1.0), (16.0, 1, 1.0)])
    err = estimate_error(SchemeRun("westwood", [flow]), flow, ConstantShares(None), window_s=16.0)
    assert err.vs_rate == pytest.approx(1.0)                          # |1 - 0.5| / 0.5
    lone = westwood_flow([(0.0, 0, 1e6)])
    err = estimate_error(SchemeRun("westwood", [lone]), lone, ConstantShares(1e6), window_s=1.0)
    assert (err.vs_share, err.vs_rate, err.samples) == (0.0, None, 1)


def test_a_scheme_without_an_estimate_has_no_error():
    flow = FlowLog("f1", [{"t_s": 1.0, "delivered_bytes": 10, "estimate_bps": 1e6}], algo="newreno")
    assert estimate_error(SchemeRun("newreno", [flow]), flow, ConstantShares(1e6)) == \
        EstimateError(None, None, 0)


# -- small readers and helpers at their edges (mutation testing, docs/testing.md) -------------

def test_last_value_of_a_flow_prefers_its_summary_then_its_latest_sample():
    flow = FlowLog("f", samples=[{"cwnd": 1.0}, {"cwnd": 2.0}, {"cwnd": None}, {"srtt_us": 5.0}])
    assert _last(flow, "cwnd") == 2.0
    assert _last(flow, "rto_us") is None
    flow.summary["cwnd"] = 9.0
    assert _last(flow, "cwnd") == 9.0


def test_sum_of_nothing_known_is_unknown_not_zero():
    assert _sum([None, None]) is None
    assert _sum([1.0, None, 2.5]) == 3.5


def test_cells_and_texts_keep_integers_whole_and_the_rest_exact():
    assert _text(None) is None and _text("") is None
    assert _text(3.0) == "3" and _text(3.5) == "3.5" and _text("h2") == "h2"
    assert _text(7) == "7"
    assert _cell(None) == "" and _cell(12.0) == "12" and _cell("x") == "x"
    assert _cell(1e15) == "1e+15" and _cell(999999999999999.0) == "999999999999999"
    assert _cell(0.1 + 0.2) == "0.3"


def test_jain_index_of_one_flow_with_traffic_and_of_idle_flows():
    assert jain_index([3.0, 3.0]) == 1.0
    assert jain_index([0.0, 0.0]) is None
    assert jain_index([1.0, 0.0]) == 0.5


def test_a_log_without_flow_ids_is_one_flow_and_algo_names_stay_text(tmp_path: Path):
    log = tmp_path / "f.csv"
    write_csv(log, ["t_s", "algo", "delivered_bytes"], [[0.0, "1e3", 0], [1.0, "1e3", 1000]])
    flows = read_flow_log(log)
    assert list(flows) == [""]
    assert [r["algo"] for r in flows[""]] == ["1e3", "1e3"]      # a name, never a number
    summary = tmp_path / "f.summary.json"
    summary.write_text(json.dumps({"flow_id": 1, "algo": "1e3", "goodput_bps": "5"}))
    (row,) = read_summary(summary)
    assert row["algo"] == "1e3" and row["goodput_bps"] == 5.0


def test_telemetry_rows_without_their_key_are_named_by_line(tmp_path: Path):
    path = tmp_path / "telemetry.csv"
    write_csv(path, ["t_s", "switch", "port", "capacity_kbps"],
              [[0.1, "s1", 3, 1000], [0.2, "s1", "", 1000]])
    with pytest.raises(ReportError) as err:
        read_telemetry(path)
    assert str(err.value) == f"{path}:3: no value in column(s) port"
    write_csv(path, ["t_s", "switch", "port"], [["", "", 3]])
    with pytest.raises(ReportError) as err:
        read_telemetry(path)
    assert str(err.value) == f"{path}:2: no value in column(s) t_s, switch"


def test_telemetry_of_a_run_is_its_bottleneck_ports_or_else_the_named_ones():
    s = lambda key: TelemetrySample(0.0, key.split(":")[0], int(key.split(":")[1]),
                                           None, None, None, None, None)
    run = SchemeRun("x", [], telemetry=[s("s1:3"), s("s2:1")])
    assert [t.key for t in _telemetry_of(run, "s2:1")] == ["s2:1"]       # no capacity.csv
    run.bottleneck_port = "s1:3"
    assert [t.key for t in _telemetry_of(run, "s2:1")] == ["s1:3"]
    run.bottleneck_port = None
    run.capacity = [CapacitySample(0.0, "b1", 1e6)]
    assert _telemetry_of(run, "s2:1") == []              # a capacity.csv link is not a port


def test_throughput_needs_two_deliveries_and_never_goes_negative():
    flow = FlowLog("f", samples=[{"t_s": 0.0, "delivered_bytes": 0}, {"t_s": 1.0, "delivered_bytes": 1000}])
    xs, ys = throughput_series(flow, 0.5)
    assert xs and ys == [8000.0, 8000.0]
    assert throughput_series(FlowLog("g", samples=flow.samples[:1]), 0.5) == ([], [])
    idle = _Delivered(FlowLog("h", samples=[{"t_s": 0.0, "delivered_bytes": 500},
                                                          {"t_s": 2.0, "delivered_bytes": 500}]))
    assert idle.rate_bps(1.5, 1.0) == 0.0


def test_a_capacity_step_plot_starts_at_time_zero():
    curve = RateCurve([(0.5, 2e6), (3.0, 1e6)])
    assert curve.steps(5.0) == ([0.0, 3.0, 5.0], [2e6, 1e6, 1e6])


def test_each_link_of_a_path_shares_its_own_capacity():
    """Two links of different capacity: a flow crossing both is held by the slower;
    flows named `name#i` (a [[flows]] entry with count) take that entry's path; a flow
    with no recorded path has no share."""
    flows = [FlowLog(n, samples=[{"t_s": 0.0}, {"t_s": 10.0}]) for n in ("long", "c1#1", "c2", "lost")]
    run = SchemeRun("obp", flows, capacity=[CapacitySample(0.0, "b1", 10e6),
                                                   CapacitySample(0.0, "b2", 4e6)])
    run.flow_links = {"long": [("b1", "s1", "s2"), ("b2", "s2", "s3")], "c1": [("b1", "s1", "s2")],
                      "c2": [("b2", "s2", "s3")]}
    shares = FairShares(run)
    assert shares.resources(flows[1]) == ["b1:s1>s2"] and shares.resources(flows[3]) == []
    per_frame = run.payload_per_frame
    assert shares.share_bps(flows[0], 5.0) == pytest.approx(2e6 * per_frame)     # half of b2
    assert shares.share_bps(flows[2], 5.0) == pytest.approx(2e6 * per_frame)
    assert shares.share_bps(flows[1], 5.0) == pytest.approx(8e6 * per_frame)     # b1's rest
    assert shares.share_bps(flows[3], 5.0) is None


def test_an_empty_report_is_refused_and_the_bin_reaches_the_summary(tmp_path: Path, run_dir: Path, monkeypatch):
    with pytest.raises(ReportError, match="^no scheme run to report$"):
        write_report(tmp_path / "a" / "b", [])
    assert (tmp_path / "a" / "b").is_dir()                 # made, parents and all
    runs = load_run_dir(run_dir)
    real_summarize, windows = summarize, []
    monkeypatch.setattr(report, "summarize", lambda run, window_s: windows.append(window_s) or real_summarize(run, window_s))
    write_report(tmp_path / "out", runs, bin_s=2.0)
    assert windows and set(windows) == {2.0}                # the estimate error's window is the bin


def test_the_aggregate_row_spans_first_start_to_last_end():
    f1 = FlowLog("f1", summary={"duration_s": 4.0, "bytes": 1000}, start_s=2.0)
    f2 = FlowLog("f2", summary={"duration_s": 5.0, "bytes": 500}, start_s=3.0)
    run = SchemeRun("x", [f1, f2], capacity=[CapacitySample(0.0, "b", 1e6)])
    all_row = summarize(run)[-1]
    assert (all_row["flow"], all_row["start_s"], all_row["duration_s"]) == (AGGREGATE_FLOW, 2.0, 6.0)
    assert all_row["goodput_bps"] == pytest.approx(1500 * 8 / 6.0)
    assert all_row["capacity_bps"] == pytest.approx(1e6)
    instant = [FlowLog(n, summary={"duration_s": 0.0, "bytes": 0}, start_s=1.0) for n in ("a", "b")]
    row = summarize(SchemeRun("x", instant, capacity=run.capacity))[-1]
    assert row["goodput_bps"] is None and row["capacity_bps"] is None      # no time: no rate


def test_a_flow_file_pairs_its_log_and_summary_by_id_or_as_the_only_ones(tmp_path: Path):
    def log(stem: str, rows: list[dict]) -> None:
        (tmp_path / f"{stem}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    # one flow in each: paired whatever their ids
    log("one", [{"t_s": 0.0, "flow_id": 5, "algo": "newreno"}])
    (tmp_path / "one.summary.json").write_text(json.dumps({"flow_id": 7, "algo": "westwood", "goodput_bps": 1}))
    (flow,) = _load_flow(tmp_path, "one", {})
    assert flow.name == "one" and flow.algo == "westwood" and flow.summary["goodput_bps"] == 1.0  # the summary's algo
    # two flows in the log, one summary for a third id without a log: three flows
    log("two", [{"t_s": 0.0, "flow_id": 1}, {"t_s": 0.0, "flow_id": 2}])
    (tmp_path / "two.summary.json").write_text(json.dumps([{"flow_id": 3, "algo": "ebn"}]))
    flows = _load_flow(tmp_path, "two", {})
    assert [f.name for f in flows] == ["two#1", "two#2", "two#3"]
    assert flows[2].samples == [] and flows[2].algo == "ebn" and flows[0].summary == {}
    # a summary without an id beside a two-flow log
    (tmp_path / "two.summary.json").write_text(json.dumps([{"algo": "ebn"}]))
    assert [f.name for f in _load_flow(tmp_path, "two", {})] == ["two#1", "two#2", "two"]


def test_a_rate_curve_keeps_the_last_of_equal_times_and_integrates_exactly():
    with pytest.raises(ReportError, match="^a capacity curve needs at least one point$"):
        RateCurve([])
    curve = RateCurve([(2.0, 1e6), (0.0, 5.0), (0.0, 3.0)])   # unsorted; t = 0 given twice
    assert curve.times_s == [0.0, 2.0] and curve.rates_bps == [3.0, 1e6]
    assert curve.integral_bits(1.0, 1.0) == 0.0 and curve.integral_bits(1.0, 0.5) == 0.0
    assert curve.integral_bits(0.0, 1.0) == 3.0
    assert curve.integral_bits(1.0, 3.0) == 3.0 + 1e6
    assert curve.mean_rate_bps(2.5, 2.5) == 1e6 and curve.mean_rate_bps(1.0, 3.0) == (3.0 + 1e6) / 2


def test_a_bad_capacity_row_is_named_by_line(tmp_path: Path):
    path = tmp_path / "capacity.csv"
    write_csv(path, ["t_s", "link", "rate_bps"], [[0.0, "b", 1e6], ["x", "b", 1e6]])
    with pytest.raises(ReportError) as err:
        read_capacity(path)
    assert str(err.value).startswith(f"{path}:3: expected columns {', '.join(CAPACITY_COLUMNS)} "
                                     "with numbers, got ")
