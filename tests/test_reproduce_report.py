"""Claims judged over runs, the results page and its figures, and the grids
(bwn/reproduce/claims.py, bwn/reproduce/{grid,page,plots}.py). The rule itself:
tests/test_reproduce_rule.py; attempts and code: tests/test_reproduce_ledger.py."""
from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
import tomli_w

from bwn.reproduce import claims as cl
from bwn.analysis import stats
from bwn.analysis.report.load import CapacitySample, FlowLog, SchemeRun
from bwn.cli import reproduce
from bwn.reproduce import calibrate as cal
from bwn.reproduce import grid as gr
from bwn.reproduce.render import render
from bwn.reproduce import ledger as lg
from bwn.reproduce import page, plots
from bwn.reproduce import plan as pl
from bwn.rundir import RunDir, RunMeta

REPO = Path(__file__).resolve().parents[1]


# -- judging claims over runs -------------------------------------------------------------

def make_grid(claims: list[gr.Claim]) -> gr.Grid:
    cases = (gr.Case("a", "case a", "dumbbell", {}, ("x", "y"), 10, 5),
             gr.Case("b", "case b", "dumbbell", {}, ("x", "y"), 10, 5))
    return gr.Grid("test", "Test paper", "A. Author, Title.", "none", cases, tuple(claims))


def rec(tmp: Path, case: str, seed: int, scheme: str, value: float, valid: bool = True,
        metric: str = "goodput_bps:all") -> cl.RunRecord:
    path = tmp / "test" / case / f"seed{seed}" / scheme
    return cl.RunRecord(case, seed, scheme, path, True, valid,
                        "valid" if valid else "INVALID: cpu: BROKEN: 3.0 s without idle CPU",
                        {"retransmissions:all": 5.0, metric: value})


BETTER = gr.Claim("x>y", "x beats y", "Fig. 1", "better", "goodput_bps:all", "x", "y")


def write_page(grid: gr.Grid, out_root: Path, cases: list[gr.Case], records: list[cl.RunRecord],
               figures: dict[str, Path] | None = None) -> Path:
    """The page of hand-made records (no attempts: the ledger's tests cover those)."""
    judgements = [cl.judge(grid, c, cases, records) for c in grid.claims]
    counts = {"planned": len(records), "attempts": len(records), "valid": sum(r.usable for r in records),
              "INVALID": sum(r.valid is False for r in records), "incomplete": sum(not r.complete for r in records),
              "remade": 0, "other code": 0}
    page.write_claims_csv(out_root, grid, judgements)
    if figures is None:
        figures = plots.write_claim_figures(grid, out_root, judgements)
    return page.write_page(grid, out_root, cases, records, judgements, lg.Pool([], {}), counts,
                           {"command": "bwn reproduce test"}, figures, {})


def test_better_claim_uses_paired_relative_gains(tmp_path):
    records = []
    for seed, (x, y) in enumerate([(1.10, 1.0), (2.24, 2.0), (3.33, 3.0)], start=1):
        records += [rec(tmp_path, "a", seed, "x", x), rec(tmp_path, "a", seed, "y", y)]
    grid = make_grid([BETTER])
    j = cl.judge(grid, BETTER, [grid.case("a")], records)
    gains = [0.10, 0.12, 0.11]
    expected = stats.mean_interval(gains)
    case = j.cases[0]
    assert case.estimate.mean == pytest.approx(0.11)
    assert (case.estimate.low, case.estimate.high) == (pytest.approx(expected.low), pytest.approx(expected.high))
    assert case.outcome == stats.YES and j.verdict == stats.REPRODUCED
    assert case.scheme_estimate.mean == pytest.approx((1.10 + 2.24 + 3.33) / 3)


def test_invalid_runs_never_enter_the_mean(tmp_path):
    records = []
    for seed in (1, 2, 3):
        records += [rec(tmp_path, "a", seed, "x", 1.1 + 0.01 * seed), rec(tmp_path, "a", seed, "y", 1.0)]
    # Seed 4: x's run broke an invariant (its low goodput is the emulator's, not x's).
    records += [rec(tmp_path, "a", 4, "x", 0.1, valid=False), rec(tmp_path, "a", 4, "y", 1.0)]
    grid = make_grid([BETTER])
    case = cl.judge(grid, BETTER, [grid.case("a")], records).cases[0]
    assert case.estimate.n == 3
    assert case.estimate.mean == pytest.approx(0.12)
    assert case.outcome == stats.YES
    assert [r.seed for r in case.invalid_runs] == [4]
    assert case.versus_estimate.n == 4                 # y's seed-4 run was valid: it counts alone


def test_lower_is_better_and_mixed_cases_give_partly(tmp_path):
    claim = gr.Claim("x<y drops", "x drops less", "Fig. 2", "better", "retransmissions:all", "x", "y",
                     lower_is_better=True)
    records = []
    for seed in (1, 2, 3):
        records += [rec(tmp_path, "a", seed, "x", 50.0 + seed, metric=claim.metric),
                    rec(tmp_path, "a", seed, "y", 100.0, metric=claim.metric),
                    rec(tmp_path, "b", seed, "x", 200.0 + seed, metric=claim.metric),
                    rec(tmp_path, "b", seed, "y", 100.0, metric=claim.metric)]
    grid = make_grid([claim])
    j = cl.judge(grid, claim, list(grid.cases), records)
    a, b = j.cases
    assert a.estimate.mean == pytest.approx(1 - 52.0 / 100.0) and a.outcome == stats.YES
    assert b.estimate.mean == pytest.approx(1 - 202.0 / 100.0) and b.outcome == stats.NO
    assert j.verdict == stats.PARTLY


def test_threshold_and_target_claims(tmp_path):
    at_least = gr.Claim("util", "high utilization", "Fig. 4", "at_least", "goodput_bps:all", "x", threshold=0.9)
    near = gr.Claim("g4", "4.5 Mb/s", "Fig. 4", "near", "goodput_bps:all", "x", target=4.5, tolerance=0.1)
    records = [rec(tmp_path, "a", s, "x", v) for s, v in ((1, 0.95), (2, 0.96), (3, 0.97))]
    grid = make_grid([at_least, near])
    assert cl.judge(grid, at_least, [grid.case("a")], records).verdict == stats.REPRODUCED
    assert cl.judge(grid, near, [grid.case("a")], records).verdict == stats.NOT_REPRODUCED
    # All runs INVALID: nothing to judge.
    for r in records:
        r.valid = False
    assert cl.judge(grid, at_least, [grid.case("a")], records).verdict == stats.NO_VALID_RUN


def test_outputs_mark_invalid_runs_and_carry_the_numbers(tmp_path):
    records = []
    for seed in (1, 2, 3):
        records += [rec(tmp_path, "a", seed, "x", 1.1 + 0.01 * seed), rec(tmp_path, "a", seed, "y", 1.0)]
    records += [rec(tmp_path, "a", 4, "x", 0.1, valid=False), rec(tmp_path, "a", 4, "y", 1.0)]
    grid = make_grid([BETTER])
    text = write_page(grid, tmp_path, [grid.case("a")], records).read_text()
    assert "| x>y | x beats y | Fig. 1 |" in text and "**reproduced**" in text
    assert "+12.0 %" in text                                           # the mean gain, seeds 1-3
    assert "| a | 4 | x | **INVALID** |" in text
    assert "Runs: 8 planned, 7 counted" in text and "1 INVALID" in text
    assert text.index("## Verdicts") < text.index("## Figures") < text.index("## Method") < text.index("## Evidence")
    rows = list(csv.DictReader(open(tmp_path / "test-claims.csv")))
    assert rows[0]["n"] == "3" and float(rows[0]["mean"]) == pytest.approx(0.12)
    assert rows[0]["invalid_runs"] == "1" and rows[0]["verdict"] == "reproduced" and rows[0]["unit"] == "%"


def test_a_page_written_without_the_run_folders_keeps_its_throughput_figure(tmp_path):
    """Runs carried from the ledger have no folder here, so nothing can be drawn; the
    figure drawn where they were stays, and the page says so."""
    from dataclasses import replace
    grid = replace(make_grid([BETTER]), timeseries_flow="f1")
    cases = [grid.case("a")]
    records = [rec(tmp_path, "a", seed, x, 1.0) for seed in (1, 2) for x in ("x", "y")]
    for r in records:
        r.carried = True
    assert plots.timeseries_figure(grid, tmp_path, cases, records) == (None, False)     # nothing anywhere
    figure = tmp_path / "test-throughput-over-time.png"
    figure.write_bytes(b"drawn elsewhere")
    assert plots.timeseries_figure(grid, tmp_path, cases, records) == (figure, False)
    text = write_page(grid, tmp_path, cases, records, {"timeseries": figure, "timeseries kept": figure}).read_text()
    assert "![throughput over time](test-throughput-over-time.png)" in text and "drawn where the runs' folders were" in text
    assert figure.read_bytes() == b"drawn elsewhere"
    # Case a's runs made here (with the flow's log, so drawable) and case b's carried:
    # a figure of case a alone would replace the whole; the whole is kept.
    from hosts.flowlog import SENDER_FIELDS, TimeSeriesLog
    for r in records:
        r.carried = False
        run = RunDir(r.path)
        run.flows_dir.mkdir(parents=True)
        run.write_meta(RunMeta())
        log = TimeSeriesLog(str(run.flow_log("f1")), SENDER_FIELDS, interval_us=0)
        for t_s in range(10):
            log.offer(1, t_s * 1_000_000, {"time_s": float(t_s), "flow_id": 1, "algo": r.scheme,
                                           "delivered_bytes": 125_000 * t_s})
        log.close()
    cases = [grid.case("a"), grid.case("b")]
    records += [rec(tmp_path, "b", 1, x, 1.0) for x in ("x", "y")]
    for r in records[4:]:
        r.carried = True
    assert plots.timeseries_figure(grid, tmp_path, cases, records) == (figure, False)
    assert figure.read_bytes() == b"drawn elsewhere"
    # With case b's runs gone from the page, case a's folders draw it anew: a grid of panels.
    assert plots.timeseries_figure(grid, tmp_path, cases[:1], records[:4]) == (figure, True)
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_claim_plots_name_each_case_by_its_id_not_its_label(tmp_path, monkeypatch):
    """A case's label is a sentence; under each point of a claim's plot the short id
    goes (the page's tables give each id's label), or a few labels squeeze the axes."""
    import matplotlib.axes
    ticks: list[list[str]] = []
    set_xticks = matplotlib.axes.Axes.set_xticks

    def spy(self, positions, labels=None, **kw):
        ticks.append([str(t) for t in (labels or [])])
        return set_xticks(self, positions, labels, **kw)

    monkeypatch.setattr(matplotlib.axes.Axes, "set_xticks", spy)
    records = [rec(tmp_path, case, seed, scheme, value) for case in ("a", "b") for seed in (1, 2)
               for scheme, value in (("x", 1.1), ("y", 1.0))]
    grid = make_grid([BETTER])
    cases = [grid.case("a"), grid.case("b")]
    paths = plots.write_claim_figures(grid, tmp_path, [cl.judge(grid, BETTER, cases, records)])
    assert ticks == [["a", "b"]]
    assert paths["x>y"].exists()


@pytest.mark.parametrize("claim, ylabel, legend", [
    (BETTER, "gain of x over y in goodput (%)",
     ["mean and 95 % interval", "one seed", "± 5 % margin (a tie)"]),
    (gr.Claim("g4", "4.5 Mb/s", "Fig. 4", "near", "goodput_bps:g4", "x", target=4.5e6, tolerance=0.1),
     "goodput of g4 (Mb/s)", ["mean and 95 % interval", "one seed", "the paper's value ± tolerance",
                              "the paper's value"]),
    (gr.Claim("util", "> 90 %", "Fig. 4", "at_least", "utilization:all", "x", threshold=0.9),
     "utilization (%)", ["mean and 95 % interval", "one seed", "the claim: at least this"]),
])
def test_claim_plots_show_the_claims_unit_axis_titles_a_legend_and_the_reference(tmp_path, monkeypatch, claim,
                                                                                 ylabel, legend):
    import matplotlib.figure
    seen: dict[str, object] = {}
    savefig = matplotlib.figure.Figure.savefig

    def spy(self, *a, **kw):
        ax = self.axes[0]
        seen.update(ylabel=ax.get_ylabel(), xlabel=ax.get_xlabel(),
                    legend=[t.get_text() for t in ax.get_legend().get_texts()],
                    ys=[y for line in ax.get_lines() for y in line.get_ydata()])
        return savefig(self, *a, **kw)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", spy)
    value = {"goodput_bps:all": 1.0, "goodput_bps:g4": 4.4e6, "utilization:all": 0.85}[claim.metric]
    records = [rec(tmp_path, "a", seed, scheme, value * (1.1 if scheme == "x" else 1.0) + seed * 1e-3 * value,
                   metric=claim.metric) for seed in (1, 2, 3) for scheme in ("x", "y")]
    grid = make_grid([claim])
    plots.write_claim_figures(grid, tmp_path, [cl.judge(grid, claim, [grid.case("a")], records)])
    assert seen["ylabel"] == ylabel and seen["xlabel"].startswith("case")
    assert sorted(seen["legend"]) == sorted(legend)
    if claim.metric == "goodput_bps:g4":
        assert 4.0 < max(seen["ys"]) < 6.0             # in Mb/s, not b/s
    if claim.metric == "utilization:all":
        assert 90 < max(seen["ys"]) <= 100             # in %, not a fraction


# -- grids, seeds and resumption -------------------------------------------------------------

@pytest.mark.parametrize("paper", gr.GRIDS)
def test_every_grid_renders_valid_scenarios(paper):
    """Every case that runs renders a valid scenario for every scheme, full and quick;
    every claim not waiting for machinery is judged on some case."""
    grid = gr.load_grid(paper)
    assert grid.claims and grid.selected(quick=True)
    for case in grid.cases:
        if not case.runnable:
            continue
        for scheme in case.schemes:
            for quick in (True, False):
                data, cfg = reproduce.config_for(grid, case, 2, scheme, quick=quick)
                assert cfg.seed == 2 and cfg.duration_s == (case.quick_duration_s if quick else case.duration_s)
    for claim in grid.judged_claims:
        assert grid.claim_cases(claim, list(grid.cases)), f"{paper}: claim {claim.id!r} has no case"


def test_quick_sets_stay_under_15_minutes():
    for paper in gr.GRIDS:
        grid = gr.load_grid(paper)
        plan = pl.planned_runs(grid, quick=True)
        assert {r.key.seed for r in plan} == {1}
        assert pl.estimate_s(plan) < 15 * 60, paper


def archived_cases(paper: str) -> dict[str, tuple[str, dict[str, str]]]:
    """case -> (template, parameters) from an archived page's table of cases."""
    text = (REPO / "docs" / "results" / "archive" / f"{paper}.md").read_text()
    table = text[text.index("## Cases"):]
    out = {}
    for line in table.splitlines()[3:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4:
            break
        params = dict(p.split("=", 1) for p in cells[3].split(", ") if "=" in p)
        out[cells[0]] = (cells[2], params)
    return out


@pytest.mark.parametrize("paper", gr.PAPERS)
def test_quick_sets_pick_cases_that_ran_faithfully_here(paper):
    """A quick run is a check a user makes first: each of its cases must be one whose
    runs can hold every invariant on this kind of machine: a case with a valid run in
    docs/results, or one whose template ran validly in the archived pages at rates
    (every ``*_mbit`` parameter) at least as high; not one known to give only INVALID
    runs (the parking lot at 3 x 10 Mb/s)."""
    results = REPO / "docs" / "results"
    valid_cases = set()
    if (results / f"{paper}-runs.csv").exists():
        valid_cases |= {r["case"] for r in csv.DictReader(open(results / f"{paper}-runs.csv")) if r["status"] == "valid"}
    archived = archived_cases(paper)
    ran = {r["case"] for r in csv.DictReader(open(results / "archive" / f"{paper}-runs.csv")) if r["valid"] == "1"}
    grid = gr.load_grid(paper)
    # a template that differs from an archived one only in its flows' timing is its topology
    same_topology = {"two-way-window": "two-way"}
    for case in grid.selected(quick=True):
        if case.id in valid_cases:
            continue
        rates = {k: float(v) for k, v in case.params.items() if k.endswith("_mbit")}
        assert any(template == same_topology.get(case.template, case.template) and all(float(params.get(k, -1)) >= v for k, v in rates.items())
                   for cid, (template, params) in archived.items() if cid in ran), \
            f"{paper}: quick case {case.id!r} has no valid run at its rates"


def test_seed_changes_start_times_and_flow_ids_and_is_recorded():
    from bwn.scenario import seeding
    grid = gr.load_grid("ebn")
    case = grid.case("c")
    one = render(grid, case, 1, "ebn", quick=True)
    two = render(grid, case, 2, "ebn", quick=True)
    assert one["experiment"]["seed"] == 1 and two["experiment"]["seed"] == 2
    assert [f["start_s"] for f in one["flows"]] != [f["start_s"] for f in two["flows"]]
    assert all(0 <= f["start_s"] < grid.start_spread_s for f in one["flows"])
    assert render(grid, case, 1, "ebn", quick=True) == one                     # replayable
    assert seeding.flow_id(1, 0) != seeding.flow_id(2, 0)
    assert len({seeding.flow_id(7, i) for i in range(200)}) == 200
    assert seeding.flow_id(None, 0) == 1
    assert seeding.linkem_seed(3, "em0") == seeding.linkem_seed(3, "em0") != seeding.linkem_seed(4, "em0")


def test_default_tcp_drops_the_reservation_it_cannot_take():
    grid = gr.load_grid("gtcp")
    case = grid.case("basic")
    gtcp = render(grid, case, 1, "gtcp", quick=True)
    tcp = render(grid, case, 1, "newreno", quick=True)
    assert [f.get("reserved_rate_mbit") for f in gtcp["flows"][:3]] == [4.408, 2.204, 1.102]
    assert all("reserved_rate_mbit" not in f for f in tcp["flows"])
    assert len(tcp["reservations"]) == 3                       # the edge still meters it


def test_calibration_scales_rates_and_keeps_the_bdp():
    case = gr.load_grid("obp").case("f5-rtt100")
    half = cal.scaled_case(case, 0.5)
    assert half.params["rate_mbit"] == pytest.approx(5.51)
    assert half.params["delay_ms"] == pytest.approx(96)
    assert half.params["queue_packets"] == case.params["queue_packets"]


def test_cli_rejects_bad_arguments(capsys):
    from bwn.cli.main import main
    assert main(["reproduce", "nosuchpaper", "--plan"]) == 2
    assert "unknown paper" in capsys.readouterr().err
    assert main(["reproduce", "ebn", "--plan", "--cases", "zz"]) == 2
    assert "no case(s) zz" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["reproduce", "ebn", "--seeds", "0"])
    assert main(["reproduce", "ebn", "--plan", "--quick"]) == 0


def test_link_utilization_metric_takes_each_links_busier_port():
    fidelity = {"measurements": {"ports": {
        "s1:2": {"link": "b1", "utilization": 0.97}, "s2:1": {"link": "b1", "utilization": 0.05},
        "s2:2": {"link": "b2", "utilization": 0.91}}}}
    run = SchemeRun("obp", [])
    assert cl.metric_value("link_utilization:b1", run, [], fidelity) == pytest.approx(0.97)
    assert cl.metric_value("link_utilization:b1,b2", run, [], fidelity) == pytest.approx(0.94)
    assert cl.metric_value("link_utilization:b3", run, [], fidelity) is None


def test_reordered_metric_sums_the_receivers_counts_of_the_runs_flows(tmp_path):
    run = SchemeRun("gtcp", [])
    run.flow_ids = {"g4": 11, "g2": 12}
    receiver = RunDir(tmp_path).receiver_summary("h2")
    receiver.write_text(json.dumps([
        {"flow_id": 11, "reordered_segments": 3}, {"flow_id": 12, "reordered_segments": 0},
        {"flow_id": 99, "reordered_segments": 50}]))          # another run's flow: not counted
    assert cl.metric_value("reordered:all", run, [], {}, tmp_path) == 3.0
    assert cl.metric_value("reordered:g2", run, [], {}, tmp_path) == 0.0
    receiver.write_text(json.dumps([{"flow_id": 11}]))                     # an older receiver
    assert cl.metric_value("reordered:all", run, [], {}, tmp_path) is None


def test_compliant_and_best_effort_components_split_goodput_by_the_in_profile_payload(tmp_path):
    """GTCP's Figs. 5-6: a reserved flow's goodput split by the share of its payload
    that arrived marked in profile (AF11), and its best-effort part over the mean
    goodput of the flows none of whose payload was in profile."""
    run = SchemeRun("gtcp", [FlowLog(n, [], {}) for n in ("g4", "b1", "b2")])
    run.flow_ids = {"g4": 11, "b1": 21, "b2": 22}
    RunDir(tmp_path).receiver_summary("h2").write_text(json.dumps([
        {"flow_id": 11, "payload_bytes_by_dscp": {"10": 800, "14": 200}},
        {"flow_id": 21, "payload_bytes_by_dscp": {"0": 500}},
        {"flow_id": 22, "payload_bytes_by_dscp": {"0": 700}},
        {"flow_id": 99, "payload_bytes_by_dscp": {"10": 5}}]))        # another run's flow
    rows = [{"flow": "g4", "goodput_bps": 5e6}, {"flow": "b1", "goodput_bps": 0.8e6},
            {"flow": "b2", "goodput_bps": 1.2e6}]
    assert cl.metric_value("compliant_bps:g4", run, rows, {}, tmp_path) == pytest.approx(4e6)
    assert cl.metric_value("besteffort_bps:g4", run, rows, {}, tmp_path) == pytest.approx(1e6)
    assert cl.metric_value("compliant_bps:b1", run, rows, {}, tmp_path) == 0.0
    assert cl.metric_value("besteffort_share:g4", run, rows, {}, tmp_path) == pytest.approx(1.0)
    from controller.entries import DSCP_AF11
    from bwn.analysis.metrics import IN_PROFILE_DSCP
    assert IN_PROFILE_DSCP == DSCP_AF11                                 # what the edge marks
    RunDir(tmp_path).receiver_summary("h2").write_text(json.dumps([{"flow_id": 11}]))  # an older receiver
    assert cl.metric_value("compliant_bps:g4", run, rows, {}, tmp_path) is None
    assert cl.metric_value("besteffort_share:g4", run, rows, {}, tmp_path) is None


def test_share_fraction_is_goodput_over_the_max_min_fair_share():
    """A parking lot in miniature: 'long' crosses b1 and b2, 'c1' only b1, 'c2'
    only b2, all 10 Mb/s (frames): each flow's fair share is half a link."""
    flows = [FlowLog(name, samples=[{"t_s": float(t)} for t in range(11)],
                            summary={"duration_s": 10.0}) for name in ("long", "c1", "c2")]
    run = SchemeRun("obp", flows, capacity=[CapacitySample(0.0, "b1", 10e6),
                                                   CapacitySample(0.0, "b2", 10e6)])
    run.flow_links = {"long": [("b1", "s1", "s2"), ("b2", "s2", "s3")], "c1": [("b1", "s1", "s2")],
                      "c2": [("b2", "s2", "s3")]}
    share = 5e6 * run.payload_per_frame
    rows = [{"flow": "long", "goodput_bps": 0.8 * share}, {"flow": "c1", "goodput_bps": 1.2 * share}]
    assert cl.metric_value("share_fraction:long", run, rows, {}) == pytest.approx(0.8)
    assert cl.metric_value("share_fraction:c1", run, rows, {}) == pytest.approx(1.2)
    assert cl.metric_value("share_fraction:c2", run, rows, {}) is None      # no goodput row
    run.flow_links["c2"] = [("b1", "s1", "s2")]                             # c2 moved onto b1: a third
    assert cl.metric_value("share_fraction:long", run, rows, {}) == pytest.approx(0.8 * 1.5)


def test_the_command_line_is_the_papers_own_invocation():
    import argparse
    parser = argparse.ArgumentParser()
    reproduce.add_arguments(parser)
    args = parser.parse_args(["all", "--quick", "--cases", "a,b", "--out", "my results"])
    assert reproduce.command_line(args, "dft") == "bwn reproduce dft --quick --cases a,b --out 'my results'"
    args = parser.parse_args(["obp", "--report-only"])
    assert reproduce.command_line(args, "obp") == "bwn reproduce obp --report-only"      # the default --out
    args = parser.parse_args(["ebn", "--no-carry", "--cases", "ss1000", "--out", "r"])
    assert reproduce.command_line(args, "ebn") == "bwn reproduce ebn --cases ss1000 --no-carry --out r"


def test_an_all_unclear_claim_is_inconclusive_and_its_evidence_shows_each_seed(tmp_path):
    metric = "algo_ratio:x/y"
    near = gr.Claim("ratio", "x near 1", "Fig. 6", "near", metric, "x", target=1.0, tolerance=0.2)
    grid = make_grid([near])
    records = [rec(tmp_path, "a", seed, "x", v, metric=metric) for seed, v in ((1, 1.07), (2, 0.856), (3, 0.927))]
    judgement = cl.judge(grid, near, [grid.case("a")], records)
    assert judgement.cases[0].outcome == stats.UNCLEAR and judgement.verdict == stats.INCONCLUSIVE
    text = write_page(grid, tmp_path, [grid.case("a")], records).read_text()
    assert "| ratio | x near 1 | Fig. 6 |" in text and "**inconclusive**" in text
    assert "* case a (unclear): the quantity per valid seed: seed 1 1.07, seed 2 0.856, seed 3 0.927 / x: " in text


def test_the_evidence_of_a_paired_claim_lists_only_seeds_whose_pair_is_valid(tmp_path):
    """A seed whose other run is INVALID is left out of the claim's n, and so out of
    "the quantity per valid seed" (it once showed a gain against the INVALID run)."""
    records = []
    for seed, (x, y) in enumerate([(1.0, 1.1), (2.0, 2.2), (3.0, 3.1)], start=1):
        records += [rec(tmp_path, "a", seed, "x", x), rec(tmp_path, "a", seed, "y", y, valid=seed != 3)]
    grid = make_grid([BETTER])
    assert cl.judge(grid, BETTER, [grid.case("a")], records).cases[0].estimate.n == 2
    text = write_page(grid, tmp_path, [grid.case("a")], records).read_text()
    (line,) = [ln for ln in text.splitlines() if "the quantity per valid seed" in ln]
    assert "seed 1 -9.1 %, seed 2 -9.1 % /" in line and "seed 3" not in line.split(" / ")[0]


def test_every_case_runs_the_seeds_its_grid_declares_and_quick_runs_one():
    base = gr.Case("a", "case a", "dumbbell", {}, ("x", "y"), 10, 5)
    more = gr.Case("b", "case b", "dumbbell", {}, ("x",), 10, 5, seeds=8)
    grid = gr.Grid("test", "Test", "A. Author, Title.", "none", (base, more), ())
    plan = pl.planned_runs(grid, quick=False)
    assert [r.key for r in plan if r.key.case == "b"] == [pl.RunKey("test", "b", s, "x") for s in range(1, 9)]
    assert {r.key.seed for r in plan if r.key.case == "a"} == set(range(1, gr.MIN_SEEDS + 1))
    assert {r.key.seed for r in pl.planned_runs(grid, True, [base, more])} == {1}


@pytest.mark.parametrize("paper", gr.GRIDS)
def test_every_committed_grid_declares_at_least_five_seeds_per_case(paper):
    assert all(c.seeds >= 5 for c in gr.load_grid(paper).cases)


@pytest.mark.parametrize("bad", ["0", "4", "2.5", "true", '"8"'])
def test_seeds_must_be_a_whole_number_of_at_least_five(tmp_path, bad):
    path = tmp_path / "g.toml"
    path.write_text(f'[paper]\ntitle = "t"\n\n[[cases]]\nid = "a"\ntemplate = "dumbbell"\nschemes = ["x"]\n'
                    f'seeds = {bad}\n')
    with pytest.raises(gr.GridError) as err:
        gr.load_grid("t", path)
    assert str(err.value) == (f"{path}: cases[0]: seeds must be a whole number >= 5 (fixed before the runs), not "
                              f"{gr.tomllib.loads(f'v = {bad}')['v']!r}")
    path.write_text(f'[paper]\ntitle = "t"\nseeds = {bad}\n\n[[cases]]\nid = "a"\ntemplate = "dumbbell"\n'
                    'schemes = ["x"]\n')
    with pytest.raises(gr.GridError, match=r"\[paper\]: seeds must be a whole number >= 5"):
        gr.load_grid("t", path)
    path.write_text('[paper]\ntitle = "t"\nseeds = 6\n\n[[cases]]\nid = "a"\ntemplate = "dumbbell"\n'
                    'schemes = ["x"]\n\n[[cases]]\nid = "b"\ntemplate = "dumbbell"\nschemes = ["x"]\nseeds = 8\n')
    assert [c.seeds for c in gr.load_grid("t", path).cases] == [6, 8]


def test_a_grid_renders_from_its_templates_as_they_were_when_it_was_loaded(tmp_path, monkeypatch):
    """A grid runs for hours: an edit of its template meanwhile (a new placeholder the
    loaded cases do not give) must not break the runs still to come."""
    templates = tmp_path / "templates"
    templates.mkdir()
    (templates / "t1.toml").write_text('[experiment]\nduration_s = ${d}\n')
    monkeypatch.setattr(gr, "TEMPLATE_DIRS", (templates,))
    path = tmp_path / "g.toml"
    path.write_text('[paper]\ntitle = "t"\n\n[[cases]]\nid = "a"\ntemplate = "t1"\nschemes = ["x"]\n'
                    'params = { d = 7 }\n')
    grid = gr.load_grid("t", path)
    (templates / "t1.toml").write_text('[experiment]\nduration_s = ${d}\n\n[telemetry]\ninterval_s = ${new}\n')
    assert "telemetry" not in render(grid, grid.case("a"), 1, "x", quick=False)     # the text as loaded
    with pytest.raises(gr.GridError, match=r"case 'a' gives no value for \$\{new\}"):
        render(gr.load_grid("t", path), grid.case("a"), 1, "x", quick=False)    # loaded anew: the edit


def test_a_grid_whose_template_is_missing_is_refused_when_loaded(tmp_path, monkeypatch):
    monkeypatch.setattr(gr, "TEMPLATE_DIRS", (tmp_path,))
    path = tmp_path / "g.toml"
    path.write_text('[paper]\ntitle = "t"\n\n[[cases]]\nid = "a"\ntemplate = "nowhere"\nschemes = ["x"]\n')
    with pytest.raises(gr.GridError, match=r"^no scenario template 'nowhere' in "):
        gr.load_grid("t", path)


def test_a_case_sets_how_it_is_emulated_but_not_what_the_grid_sets(tmp_path):
    path = tmp_path / "g.toml"
    head = '[paper]\ntitle = "t"\n\n[[cases]]\nid = "a"\ntemplate = "dumbbell"\nschemes = ["newreno"]\n'
    path.write_text(head + "params = { rate_mbit = 10, delay_ms = 10, queue_packets = 50, loss = 0 }\n"
                    "experiment = { linkem_shared = true, linkem_rt_priority = 0 }\n")
    grid = gr.load_grid("t", path)
    (case,) = grid.cases
    assert case.experiment == (("linkem_rt_priority", 0), ("linkem_shared", True))
    exp = render(grid, case, 2, "newreno", quick=False)["experiment"]
    assert exp["linkem_shared"] is True and exp["linkem_rt_priority"] == 0
    assert exp["seed"] == 2 and exp["name"] == "t-a"
    path.write_text(head + 'experiment = { seed = 4, name = "x" }\n')
    with pytest.raises(gr.GridError) as err:
        gr.load_grid("t", path)
    assert str(err.value) == f"{path}: cases[0]: experiment sets name, seed, which the grid sets for every run"
    path.write_text(head + 'experiment = "shared"\n')
    with pytest.raises(gr.GridError) as err:
        gr.load_grid("t", path)
    assert str(err.value) == f"{path}: cases[0]: experiment must be a table of [experiment] keys, not 'shared'"



# -- the new kinds of claim and the inventory --------------------------------------------------

def trend_grid(claim: gr.Claim) -> gr.Grid:
    cases = tuple(gr.Case(f"d{d}", f"delay {d}", "dumbbell", {"delay_ms": d}, ("x", "y"), 10, 5)
                  for d in (20, 200, 1000))
    return gr.Grid("test", "Test paper", "A. Author, Title.", "none", cases, (claim,))


def test_a_trend_is_judged_once_on_each_seeds_slope_over_the_cases(tmp_path):
    """"The gain is larger at smaller delays": per seed, the slope of the gain over
    log(delay) must be below 0 over the seeds' interval."""
    claim = gr.Claim("gain falls with delay", "larger at smaller delays", "Sec. 5", "trend", "goodput_bps:all",
                     "x", "y", x="delay_ms", direction="decreasing", log_x=True)
    grid = trend_grid(claim)
    records = []
    for seed in range(1, 6):
        for d, gain in ((20, 0.30), (200, 0.15), (1000, 0.05)):
            records += [rec(tmp_path, f"d{d}", seed, "x", 1.0 + gain + 0.01 * seed),
                        rec(tmp_path, f"d{d}", seed, "y", 1.0)]
    j = cl.judge(grid, claim, list(grid.cases), records)
    assert j.trend is not None and j.trend.n == 5 and j.trend.high < 0
    assert j.verdict == stats.REPRODUCED
    assert all(c.outcome == stats.NONE for c in j.cases)          # cases are not judged one by one
    rising = gr.Claim("rises", "larger at larger delays", "Sec. 5", "trend", "goodput_bps:all", "x", "y",
                      x="delay_ms", direction="increasing", log_x=True)
    assert cl.judge(grid, rising, list(grid.cases), records).verdict == stats.NOT_REPRODUCED
    # A seed missing a case (its run INVALID) gives no slope: the others still judge.
    records[0].valid = False
    assert cl.judge(grid, claim, list(grid.cases), records).trend.n == 4
    text = write_page(grid, tmp_path, list(grid.cases), records).read_text()
    assert "change of gain of x over y in goodput over the sweep of delay_ms (fitted on ln delay_ms)" in text
    # the change is the least-squares slope times the sweep's span (here over ln x)
    gains = [0.30, 0.15, 0.05]
    xs = [math.log(d) for d in (20, 200, 1000)]
    assert cl.judge(grid, claim, list(grid.cases), records).trend.mean == pytest.approx(
        stats.slope(xs, gains) * (xs[-1] - xs[0]))


def test_near_on_a_gain_judges_the_papers_number_with_its_band(tmp_path):
    """SARBE's +14 % over Westwood, within ± 50 % of the gain: a tight +1 % is a no."""
    claim = gr.Claim("x +14 %", "14 % more", "Fig. 7", "near", "goodput_bps:all", "x", "y",
                     target=0.14, tolerance=0.5)
    grid = make_grid([claim])
    near = [r for s in range(1, 6) for r in (rec(tmp_path, "a", s, "x", 1.13 + 0.005 * s), rec(tmp_path, "a", s, "y", 1.0))]
    far = [r for s in range(1, 6) for r in (rec(tmp_path, "b", s, "x", 1.01 + 0.001 * s), rec(tmp_path, "b", s, "y", 1.0))]
    j = cl.judge(grid, claim, list(grid.cases), near + far)
    assert [c.outcome for c in j.cases] == [stats.YES, stats.NO] and j.verdict == stats.PARTLY
    assert claim.band() == (pytest.approx(0.07), pytest.approx(0.21))
    absolute = gr.Claim("jain", "near 1", "Fig. 7", "near", "jain", "x", target=1.0, tolerance_abs=0.02)
    assert absolute.band() == (pytest.approx(0.98), pytest.approx(1.02))


def test_equal_holds_only_when_the_whole_interval_is_within_the_margin(tmp_path):
    claim = gr.Claim("x = y", "the same below 0.01 % loss", "Fig. 5", "equal", "goodput_bps:all", "x", "y")
    grid = make_grid([claim])
    same = [r for s in range(1, 6) for r in (rec(tmp_path, "a", s, "x", 1.0 + 0.002 * (s - 3)), rec(tmp_path, "a", s, "y", 1.0))]
    apart = [r for s in range(1, 6) for r in (rec(tmp_path, "b", s, "x", 1.2 + 0.01 * s), rec(tmp_path, "b", s, "y", 1.0))]
    j = cl.judge(grid, claim, list(grid.cases), same + apart)
    assert [c.outcome for c in j.cases] == [stats.YES, stats.NO]


def test_counts_and_fractions_get_their_own_intervals(tmp_path):
    drops = gr.Claim("few drops", "no drops", "Fig. 4", "at_most", "retransmissions:all", "x", threshold=1.0)
    grid = make_grid([drops])
    records = [rec(tmp_path, "a", s, "x", v, metric="retransmissions:all") for s, v in enumerate([0, 0, 3, 0, 0], 1)]
    est = cl.judge(grid, drops, [grid.case("a")], records).cases[0].estimate
    assert est.method == "quasi-Poisson" and est.low > 0                   # Student-t would go below 0
    assert cl.support_of("utilization:all") is stats.Support.FRACTION
    assert cl.support_of("jain") is stats.Support.FRACTION
    assert cl.support_of("goodput_bps:g4") is stats.Support.REAL


GRID_HEAD = '[paper]\ntitle = "t"\n\n[[cases]]\nid = "a"\ntemplate = "dumbbell"\nschemes = ["x", "y"]\n' \
            'params = { delay_ms = 10 }\n\n'
CLAIM = '[[claims]]\nid = "c1"\nstatement = "x beats y"\nkind = "better"\nmetric = "jain"\nscheme = "x"\nversus = "y"\n\n'


@pytest.mark.parametrize("body, message", [
    (CLAIM + '[[inventory]]\nid = "i1"\nquote = "q"\nwhere = "Fig. 1"\nkind = "direction"\n',
     "inventory[0]: an item is judged by its 'claims' or says why it is not ('not_judged'), one of the two"),
    (CLAIM + '[[inventory]]\nid = "i1"\nquote = "q"\nwhere = "Fig. 1"\nkind = "direction"\nclaims = ["c9"]\n',
     "inventory[0]: unknown claim(s) ['c9']"),
    (CLAIM + '[[inventory]]\nid = "i1"\nquote = "q"\nwhere = "Fig. 1"\nkind = "direction"\nnot_judged = "no 2.5 Gb/s"\n',
     "claim(s) c1 judge no inventory item"),
    (CLAIM + '[[inventory]]\nid = "i1"\nquote = "q"\nwhere = "Fig. 1"\nkind = "vibe"\nclaims = ["c1"]\n',
     "inventory[0]: kind 'vibe' is not one of"),
    ('[[claims]]\nid = "t"\nstatement = "s"\nkind = "trend"\nmetric = "jain"\nscheme = "x"\nx = "delay_ms"\n',
     "claims[0]: a 'trend' claim needs 'x' (a case parameter) and 'direction'"),
    ('[[claims]]\nid = "t"\nstatement = "s"\nkind = "trend"\nmetric = "jain"\nscheme = "x"\nx = "rate"\n'
     'direction = "increasing"\nmargin = 0.01\n', "claims[0]: case(s) a have no parameter 'rate' to trend over"),
    ('[[claims]]\nid = "n"\nstatement = "s"\nkind = "near"\nmetric = "jain"\nscheme = "x"\ntarget = 1.0\n',
     "claims[0]: a 'near' claim needs 'target' and one of 'tolerance'"),
    ('[[claims]]\nid = "n"\nstatement = "s"\nkind = "near"\nmetric = "jain"\nscheme = "x"\ntarget = 1.0\n'
     'tolerance = 0.1\ntolerance_abs = 0.1\n', "claims[0]: a 'near' claim needs 'target' and one of 'tolerance'"),
    ('[[claims]]\nid = "e"\nstatement = "s"\nkind = "equal"\nmetric = "jain"\nscheme = "x"\n',
     "claims[0]: a 'equal' claim needs 'versus'"),
    (CLAIM + CLAIM, "claim ids are not unique"),
])
def test_a_grid_with_an_unusable_claim_or_inventory_is_refused(tmp_path, body, message):
    path = tmp_path / "g.toml"
    path.write_text(GRID_HEAD + body)
    with pytest.raises(gr.GridError) as err:
        gr.load_grid("t", path)
    assert message in str(err.value)


def test_the_verdict_table_lists_every_inventory_item_judged_or_not(tmp_path):
    path = tmp_path / "g.toml"
    path.write_text(GRID_HEAD + CLAIM + '[[claims]]\nid = "dev"\nstatement = "our floor"\nkind = "at_least"\n'
                    'metric = "jain"\nscheme = "x"\nthreshold = 0.5\ndeviation = "OBP with a floor"\n\n'
                    '[[inventory]]\nid = "i1"\nquote = "x wins"\nwhere = "Fig. 1"\nkind = "direction"\nclaims = ["c1"]\n\n'
                    '[[inventory]]\nid = "i2"\nquote = "at 2.5 Gb/s"\nwhere = "Fig. 2"\nkind = "bound"\n'
                    'paper_value = "> 95 %"\nnot_judged = "needs 2.5 Gb/s links"\n')
    grid = gr.load_grid("t", path)
    records = [rec(tmp_path, "a", s, x, 1.0 + 0.2 * (x == "x"), metric="jain") for s in range(1, 6) for x in "xy"]
    text = write_page(grid, tmp_path, list(grid.cases), records).read_text()
    assert "2 claims, figures and trends in the paper's evaluation: 1 judged (1 reproduced), 1 not judged" in text
    assert "| i1 | x wins | Fig. 1 | - | c1: a: +20.0 % [+20.0 %, +20.0 %] (n=5) yes | **reproduced** |" in text
    assert "| i2 | at 2.5 Gb/s | Fig. 2 | > 95 % | not judged: needs 2.5 Gb/s links | - |" in text
    assert "### Our named deviations (never judged under the paper's name)" in text
    assert "| dev | our floor | OBP with a floor |" in text
    assert page.tally(grid, [cl.judge(grid, c, list(grid.cases), records) for c in grid.claims])["reproduced"] == 1


def test_an_uncounted_attempt_is_listed_with_its_status_once(tmp_path):
    key = pl.RunKey("test", "a", 1, "x")
    invalid = lg.Attempt(key, "a1", tmp_path, "INVALID", "INVALID: cpu: BROKEN: 3.0 s without idle CPU")
    assert page.attempt_line(invalid).endswith("(attempt a1, unfinished): INVALID: cpu: BROKEN: 3.0 s without idle CPU")
    other = lg.Attempt(key, "a2", tmp_path, lg.VALID, "valid", not_counted="made by other code (x, at y)")
    assert page.attempt_line(other).endswith(f"{lg.VALID}: made by other code (x, at y)")
