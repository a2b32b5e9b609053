"""The reproduction report's arithmetic: intervals, outcomes, verdicts, and that
INVALID runs never enter a mean (bwn/analysis/stats.py, bwn/analysis/claims.py, bwn/reproduce/core.py)."""
from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
import tomli_w

from bwn.analysis import claims as cl
from bwn.reproduce import grid as gr
from bwn.reproduce import core as reproduce
from bwn.analysis import stats
from bwn.rundir import RunDir, RunMeta

REPO = Path(__file__).resolve().parents[1]


# -- intervals ------------------------------------------------------------------------

def test_student_t_interval_of_three_values():
    est = stats.mean_interval([1.0, 2.0, 3.0])
    # mean 2, s = 1, t(0.975, 2) = 4.302653: half-width 4.302653 / sqrt(3) = 2.48414
    assert est.n == 3 and est.mean == pytest.approx(2.0)
    assert est.low == pytest.approx(2.0 - 2.48414, abs=1e-4)
    assert est.high == pytest.approx(2.0 + 2.48414, abs=1e-4)


def test_interval_of_five_values_uses_n_minus_1():
    values = [10.0, 12.0, 9.0, 11.0, 13.0]
    est = stats.mean_interval(values)
    s = math.sqrt(sum((v - 11.0) ** 2 for v in values) / 4)      # sample sd, 1.5811
    half = 2.776445 * s / math.sqrt(5)                            # t(0.975, 4)
    assert (est.low, est.high) == (pytest.approx(11.0 - half), pytest.approx(11.0 + half))


def test_interval_edge_cases():
    assert stats.mean_interval([]).mean is None
    one = stats.mean_interval([4.0])
    assert (one.n, one.mean, one.low, one.high) == (1, 4.0, None, None)
    same = stats.mean_interval([2.0, 2.0, 2.0])
    assert (same.low, same.high) == (2.0, 2.0)
    assert stats.mean_interval([1.0, float("nan"), 3.0]).n == 2     # non-finite values are not data


# -- outcomes and verdicts ---------------------------------------------------------------

E = stats.Estimate


def test_outcome_above_by_the_whole_interval():
    assert stats.outcome_above(E(3, 0.1, 0.02, 0.2), 0.0) == stats.YES
    assert stats.outcome_above(E(3, 0.1, -0.02, 0.2), 0.0) == stats.UNCLEAR
    assert stats.outcome_above(E(3, -0.1, -0.2, -0.01), 0.0) == stats.NO
    assert stats.outcome_above(E(1, 0.1, None, None), 0.0) == stats.YES       # n=1: the point decides
    assert stats.outcome_above(E(0, None, None, None), 0.0) == stats.NONE
    assert stats.outcome_above(E(3, 0.9, 0.9, 0.95), 0.9, strict=False) == stats.YES
    assert stats.outcome_above(E(3, 0.9, 0.9, 0.95), 0.9, strict=True) == stats.UNCLEAR


def test_outcome_below_and_within():
    assert stats.outcome_below(E(3, 0.1, 0.05, 0.15), 0.2, strict=False) == stats.YES
    assert stats.outcome_below(E(3, 0.3, 0.25, 0.35), 0.2, strict=False) == stats.NO
    assert stats.outcome_below(E(3, 0.0, 0.0, 0.0), 0.0, strict=False) == stats.YES
    assert stats.outcome_within(E(3, 1.0, 0.95, 1.05), 0.9, 1.1) == stats.YES
    assert stats.outcome_within(E(3, 1.0, 0.85, 1.05), 0.9, 1.1) == stats.UNCLEAR
    assert stats.outcome_within(E(3, 1.5, 1.3, 1.7), 0.9, 1.1) == stats.NO


def test_verdict_rules():
    Y, N, U, X = stats.YES, stats.NO, stats.UNCLEAR, stats.NONE
    assert stats.verdict([Y, Y, Y]) == stats.REPRODUCED
    assert stats.verdict([N, U, N]) == stats.NOT_REPRODUCED
    assert stats.verdict([N]) == stats.NOT_REPRODUCED
    assert stats.verdict([U, U]) == stats.INCONCLUSIVE      # neither side: not "not reproduced"
    assert stats.verdict([U, X]) == stats.INCONCLUSIVE
    assert stats.verdict([Y, N]) == stats.PARTLY
    assert stats.verdict([Y, U]) == stats.PARTLY
    assert stats.verdict([Y, X]) == stats.PARTLY            # a case without a valid run is not a yes
    assert stats.verdict([X, X]) == stats.NO_VALID_RUN
    assert stats.verdict([]) == stats.NO_VALID_RUN


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
    cases = [grid.case("a")]
    judgements = reproduce.judge_all(grid, cases, records)
    md = reproduce.write_outputs(grid, tmp_path, cases, records, judgements, {"command": "bwn reproduce test"})
    text = md.read_text()
    assert "| x>y | x beats y | Fig. 1 |" in text and "**reproduced**" in text
    assert "+12.0 %" in text                                           # the mean gain, seeds 1-3
    assert "| a | 4 | x | **INVALID** |" in text
    assert "4 planned" not in text and "8 planned, 7 valid, 1 INVALID" in text
    rows = list(csv.DictReader(open(tmp_path / "test-claims.csv")))
    assert rows[0]["n"] == "3" and float(rows[0]["mean"]) == pytest.approx(0.12)
    assert rows[0]["invalid_runs"] == "1" and rows[0]["verdict"] == "reproduced"
    runs = list(csv.DictReader(open(tmp_path / "test-runs.csv")))
    assert [r["valid"] for r in runs if r["seed"] == "4"] == ["0", "1"]


def test_a_page_written_without_the_run_folders_keeps_its_throughput_figure(tmp_path):
    """Runs carried from the committed table have no folder here, so nothing can be
    drawn; the figure drawn where they were stays on the page, and says so."""
    from dataclasses import replace
    grid = replace(make_grid([BETTER]), timeseries_flow="f1")
    cases = [grid.case("a")]
    records = [rec(tmp_path, "a", seed, x, 1.0) for seed in (1, 2) for x in ("x", "y")]
    for r in records:
        r.carried = True
    judgements = reproduce.judge_all(grid, cases, records)
    text = reproduce.write_outputs(grid, tmp_path, cases, records, judgements, {}).read_text()
    assert "## Throughput over time" not in text                      # no figure anywhere: none
    figure = tmp_path / "test-throughput-over-time.png"
    figure.write_bytes(b"drawn elsewhere")
    text = reproduce.write_outputs(grid, tmp_path, cases, records, judgements, {}).read_text()
    assert "## Throughput over time" in text and "![throughput over time](test-throughput-over-time.png)" in text
    assert "the figure is kept as it was" in text
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
    text = reproduce.write_outputs(grid, tmp_path, cases, records,
                                   reproduce.judge_all(grid, cases, records), {}).read_text()
    assert "the figure is kept as it was" in text and figure.read_bytes() == b"drawn elsewhere"
    # With case b's runs gone from the page, case a's folders draw it anew.
    text = reproduce.write_outputs(grid, tmp_path, cases[:1], records[:4],
                                   reproduce.judge_all(grid, cases[:1], records[:4]), {}).read_text()
    assert "## Throughput over time" in text and "kept as it was" not in text
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
    paths = reproduce.write_plots(grid, tmp_path, cases, records, reproduce.judge_all(grid, cases, records))
    assert ticks == [["a", "b"]]
    assert paths["x>y"].exists()


# -- grids, seeds and resumption -------------------------------------------------------------

@pytest.mark.parametrize("paper", gr.PAPERS)
def test_every_grid_renders_valid_scenarios(paper):
    grid = gr.load_grid(paper)
    assert grid.claims and grid.selected(quick=True)
    for case in grid.cases:
        for scheme in case.schemes:
            data, cfg = reproduce.config_for(grid, case, 2, scheme, quick=True)
            assert cfg.seed == 2 and cfg.duration_s == case.quick_duration_s
    for claim in grid.claims:
        assert grid.claim_cases(claim, list(grid.cases)), f"{paper}: claim {claim.id!r} has no case"


def test_quick_sets_stay_under_15_minutes():
    for paper in gr.PAPERS:
        grid = gr.load_grid(paper)
        plan = reproduce.planned_runs(grid, quick=True, seeds=3)
        assert {seed for _, seed, _ in plan} == {1}
        assert reproduce.estimate_s(plan, quick=True) < 15 * 60, paper


@pytest.mark.parametrize("paper", gr.PAPERS)
def test_quick_sets_pick_cases_that_ran_faithfully_here(paper):
    """A quick run is a check a user makes first: each of its cases must be one whose
    full runs held every invariant on this kind of machine (docs/results), not one
    known to give only INVALID runs (the parking lot at 3 x 10 Mb/s)."""
    rows = list(csv.DictReader(open(REPO / "docs" / "results" / f"{paper}-runs.csv")))
    valid_cases = {r["case"] for r in rows if r["valid"] == "1"}
    grid = gr.load_grid(paper)
    for case in grid.selected(quick=True):
        assert case.id in valid_cases, f"{paper}: quick case {case.id!r} has no valid run in docs/results"


def test_seed_changes_start_times_and_flow_ids_and_is_recorded():
    from bwn.scenario import seeding
    grid = gr.load_grid("ebn")
    case = grid.case("c")
    one = gr.render(grid, case, 1, "ebn", quick=True)
    two = gr.render(grid, case, 2, "ebn", quick=True)
    assert one["experiment"]["seed"] == 1 and two["experiment"]["seed"] == 2
    assert [f["start_s"] for f in one["flows"]] != [f["start_s"] for f in two["flows"]]
    assert all(0 <= f["start_s"] < grid.start_spread_s for f in one["flows"])
    assert gr.render(grid, case, 1, "ebn", quick=True) == one                     # replayable
    assert seeding.flow_id(1, 0) != seeding.flow_id(2, 0)
    assert len({seeding.flow_id(7, i) for i in range(200)}) == 200
    assert seeding.flow_id(None, 0) == 1
    assert seeding.linkem_seed(3, "em0") == seeding.linkem_seed(3, "em0") != seeding.linkem_seed(4, "em0")


def test_default_tcp_drops_the_reservation_it_cannot_take():
    grid = gr.load_grid("gtcp")
    case = grid.case("basic")
    gtcp = gr.render(grid, case, 1, "gtcp", quick=True)
    tcp = gr.render(grid, case, 1, "newreno", quick=True)
    assert [f.get("reserved_rate_mbit") for f in gtcp["flows"][:3]] == [4.408, 2.204, 1.102]
    assert all("reserved_rate_mbit" not in f for f in tcp["flows"])
    assert len(tcp["reservations"]) == 3                       # the edge still meters it


def test_resume_skips_only_complete_valid_runs(tmp_path, make_run_dir):
    done = make_run_dir("a/seed1/x", meta=RunMeta(ok=True, duration_s=60.0, fidelity={"valid": True})).path
    invalid = make_run_dir("a/seed1/y", meta=RunMeta(ok=True, fidelity={"valid": False})).path
    old = make_run_dir("a/seed2/x", meta=RunMeta(ok=True)).path             # from before the checks
    broken = make_run_dir("a/seed2/y").path
    RunDir(broken).run_json.write_text('{"ok": "yes"}')
    assert reproduce.is_done(done) and reproduce.is_done(done, 60.0)
    assert not reproduce.is_done(invalid) and not reproduce.is_done(old)
    assert not reproduce.is_done(broken) and not reproduce.is_done(tmp_path / "none")
    # A --quick run (30 s) in the same folder is not a run of the full grid.
    assert not reproduce.is_done(done, 30.0)
    case = gr.load_grid("dft").case("cluster10")
    assert reproduce.planned_duration_s(case, quick=True) < reproduce.planned_duration_s(case, quick=False)
    moved = reproduce.supersede(tmp_path, invalid)
    assert not invalid.exists() and RunDir(moved).has_meta()
    assert moved.parent == tmp_path / "superseded"


def test_calibration_scales_rates_and_keeps_the_bdp():
    case = gr.load_grid("obp").case("c10-rtt100")
    half = reproduce.scaled_case(case, 0.5)
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
    from bwn.analysis import report
    fidelity = {"measurements": {"ports": {
        "s1:2": {"link": "b1", "utilization": 0.97}, "s2:1": {"link": "b1", "utilization": 0.05},
        "s2:2": {"link": "b2", "utilization": 0.91}}}}
    run = report.SchemeRun("obp", [])
    assert cl.metric_value("link_utilization:b1", run, [], fidelity) == pytest.approx(0.97)
    assert cl.metric_value("link_utilization:b1,b2", run, [], fidelity) == pytest.approx(0.94)
    assert cl.metric_value("link_utilization:b3", run, [], fidelity) is None


def test_execute_resumes_skipping_complete_valid_runs(tmp_path, monkeypatch):
    """A second invocation runs only what is missing, incomplete or INVALID, and
    keeps the superseded attempt."""
    from bwn.emulation import runner as experiment
    calls: list[tuple[str, int]] = []
    invalid = {"newreno"}

    def fake_run_scheme(cfg, scheme, out_dir, duration_s, progress=print):
        calls.append((scheme, cfg.seed))
        out_dir.mkdir(parents=True, exist_ok=True)
        valid = scheme not in invalid
        meta = RunMeta(ok=True, seed=cfg.seed, duration_s=duration_s,
                       fidelity={"valid": valid, "summary": "valid" if valid else "INVALID: cpu"})
        RunDir(out_dir).write_meta(meta)
        return meta

    monkeypatch.setattr(experiment, "run_scheme", fake_run_scheme)
    monkeypatch.setattr(reproduce, "LOCK_YIELD_S", 0.0)
    from dataclasses import replace
    grid = gr.load_grid("gtcp")
    # 2 seeds per case here, whatever number the real grid asks of a case
    grid = replace(grid, cases=tuple(replace(c, seeds=None) for c in grid.cases))
    plan = [run for run in reproduce.planned_runs(grid, quick=False, seeds=2) if run[0].id == "basic"]
    out = tmp_path / "gtcp"
    schemes = ["gtcp", "gtcp:cwnd_g_rtt=srtt", "newreno"]
    assert list(grid.cases[0].schemes) == schemes
    monkeypatch.setattr(reproduce, "commit_text", lambda out=None: "abc1234")
    monkeypatch.setattr(reproduce, "machine_text", lambda: "box: 2 CPUs")
    reproduce.execute(grid, out, plan, quick=False, progress=lambda m: None, command="bwn reproduce gtcp --out r")
    assert sorted(calls) == [(x, s) for x in schemes for s in (1, 2)]
    assert RunDir(out / "basic" / "seed2" / "gtcp").scenario_toml.exists()
    timing = json.loads((out / "timing.json").read_text())
    entry = timing["runs"]["basic/seed1/gtcp"]
    assert entry["command"] == "bwn reproduce gtcp --out r" and entry["commit"] == "abc1234"
    assert entry["machine"] == "box: 2 CPUs"
    # A page says which invocation, commit and machine made each run (not only the
    # commit and machine that write the page, which may be another's).
    made_by = {r.made_by for r in reproduce.collect(grid, out, plan, timing=timing)}
    assert made_by == {"`bwn reproduce gtcp --out r` at abc1234 on box: 2 CPUs"}
    assert entry["duration_s"] == grid.cases[0].duration_s and len(entry["finished_utc"]) == 16
    calls.clear()
    invalid.clear()
    reproduce.execute(grid, out, plan, quick=False, progress=lambda m: None)
    assert sorted(calls) == [("newreno", 1), ("newreno", 2)]          # the INVALID ones, again
    assert len(list((out / "superseded").iterdir())) == 2
    calls.clear()
    reproduce.execute(grid, out, plan, quick=False, progress=lambda m: None)
    assert calls == []
    # The quick subset's shorter runs do not count as done: all run again.
    reproduce.execute(grid, out, plan, quick=True, progress=lambda m: None)
    assert len(calls) == len(plan)
    timing = json.loads((out / "timing.json").read_text())
    assert set(timing["runs"]) == {f"basic/seed{s}/{x}" for s in (1, 2)
                                   for x in ("gtcp", "gtcp_cwnd_g_rtt_srtt", "newreno")}


def test_reordered_metric_sums_the_receivers_counts_of_the_runs_flows(tmp_path):
    from bwn.analysis import report
    run = report.SchemeRun("gtcp", [])
    run.flow_ids = {"g4": 11, "g2": 12}
    receiver = RunDir(tmp_path).receiver_summary("h2")
    receiver.write_text(json.dumps([
        {"flow_id": 11, "reordered_segments": 3}, {"flow_id": 12, "reordered_segments": 0},
        {"flow_id": 99, "reordered_segments": 50}]))          # another run's flow: not counted
    assert cl.metric_value("reordered:all", run, [], {}, tmp_path) == 3.0
    assert cl.metric_value("reordered:g2", run, [], {}, tmp_path) == 0.0
    receiver.write_text(json.dumps([{"flow_id": 11}]))                     # an older receiver
    assert cl.metric_value("reordered:all", run, [], {}, tmp_path) is None


def test_share_fraction_is_goodput_over_the_max_min_fair_share():
    """A parking lot in miniature: 'long' crosses b1 and b2, 'c1' only b1, 'c2'
    only b2, all 10 Mb/s (frames): each flow's fair share is half a link."""
    from bwn.analysis import report
    flows = [report.FlowLog(name, samples=[{"t_s": float(t)} for t in range(11)],
                            summary={"duration_s": 10.0}) for name in ("long", "c1", "c2")]
    run = report.SchemeRun("obp", flows, capacity=[report.CapacitySample(0.0, "b1", 10e6),
                                                   report.CapacitySample(0.0, "b2", 10e6)])
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
    args = parser.parse_args(["all", "--quick", "--seeds", "2", "--cases", "a,b", "--out", "my results"])
    assert reproduce.command_line(args, "dft") == "bwn reproduce dft --quick --seeds 2 --cases a,b --out 'my results'"
    args = parser.parse_args(["obp", "--report-only"])
    assert reproduce.command_line(args, "obp") == "bwn reproduce obp --report-only --out results"
    # --no-carry changes which runs are made (none is carried from PAPER-runs.csv)
    args = parser.parse_args(["ebn", "--no-carry", "--cases", "ss1000"])
    assert reproduce.command_line(args, "ebn") == "bwn reproduce ebn --cases ss1000 --no-carry --out results"


def test_the_header_names_every_command_and_commit_that_made_the_runs(tmp_path):
    records = [rec(tmp_path, "a", 1, "x", 1.0), rec(tmp_path, "a", 1, "y", 1.0),
               rec(tmp_path, "a", 2, "x", 1.0), rec(tmp_path, "a", 2, "y", 1.0), rec(tmp_path, "b", 1, "x", 1.0)]
    for r, finished in zip(records[:2], ("2026-11-25 13:05", "2026-11-25 13:01")):
        r.made_by, r.finished_utc = "`bwn reproduce test --out r` at aaa", finished
    records[2].made_by, records[2].finished_utc = "`bwn reproduce test --cases a --out r` at bbb", "2026-11-25 14:00"
    records[4].complete = False                                  # not run: not counted
    assert reproduce.runs_made_by(records) == (
        "`bwn reproduce test --out r` at aaa (2 runs, finished 2026-11-25 13:01 - 13:05 UTC); "
        "`bwn reproduce test --cases a --out r` at bbb (1 runs, finished 2026-11-25 14:00 - 14:00 UTC); "
        "1 runs without a record of their command (made before it was kept)")
    assert reproduce.runs_made_by(records[4:]) == "no run recorded"


def test_valid_runs_of_the_committed_table_are_carried_to_a_new_machine(tmp_path, monkeypatch):
    """The raw folders are gone (a new machine); the committed PAPER-runs.csv says which
    runs were complete, valid and how long: those count again with their metrics and
    are not run again; INVALID ones are shown again (never averaged) and made again;
    older rows without a duration and runs of another duration are not carried."""
    grid = make_grid([BETTER])
    case = grid.case("a")
    records = [rec(tmp_path, "a", seed, x, 1.0 + seed + (x == "x")) for seed in (1, 2) for x in ("x", "y")]
    records[3].valid = False                                       # seed 2, y: INVALID
    for r in records:
        r.duration_s, r.made_by, r.finished_utc = 10.0, "`bwn reproduce test --out r` at aaa", "2026-11-25 13:00"
    judgements = reproduce.judge_all(grid, [case], records)
    reproduce.write_outputs(grid, tmp_path, [case], records, judgements, {})
    names = reproduce.metric_names(grid)
    carried = reproduce.carried_records(tmp_path, "test", names)
    assert sorted(carried) == [("a", 1, "x"), ("a", 1, "y"), ("a", 2, "x"), ("a", 2, "y")]
    assert [r.usable for _, r in sorted(carried.items())] == [True, True, True, False]
    assert carried[("a", 2, "y")].fidelity == records[3].fidelity
    back = carried[("a", 2, "x")]
    assert back.carried and back.usable and back.duration_s == 10.0 and back.made_by == records[2].made_by
    assert back.metrics["goodput_bps:all"] == pytest.approx(4.0) and back.metrics["jain"] is None
    assert back.path == records[2].path

    # Resumption: only what the table cannot vouch for is run.
    from bwn.emulation import runner as experiment
    calls: list[tuple[str, int]] = []

    def fake_run_scheme(cfg, scheme, out_dir, duration_s, progress=print):
        calls.append((scheme, cfg.seed))
        out_dir.mkdir(parents=True, exist_ok=True)
        RunDir(out_dir).write_meta(RunMeta(ok=True, duration_s=duration_s, fidelity={"valid": True}))
    monkeypatch.setattr(experiment, "run_scheme", fake_run_scheme)
    monkeypatch.setattr(reproduce, "LOCK_YIELD_S", 0.0)
    monkeypatch.setattr(reproduce, "config_for", lambda g, c, seed, scheme, quick: (
        {}, type("Cfg", (), {"seed": seed, "duration_s": reproduce.planned_duration_s(c, quick)})()))
    plan = [(case, seed, x) for seed in (1, 2) for x in ("x", "y")]
    reproduce.execute(grid, tmp_path / "test", plan, quick=False, progress=lambda m: None, carried=carried)
    assert calls == [("y", 2)]
    calls.clear()
    reproduce.execute(grid, tmp_path / "test", plan, quick=True, progress=lambda m: None, carried=carried)
    assert len(calls) == 4                                 # 5 s quick runs are not the table's 10 s runs

    # The report counts the carried runs and says so; a folder here beats the table.
    collected = reproduce.collect(grid, tmp_path / "test", plan[:3], quick=False, carried=carried)
    assert [r.carried for r in collected] == [False, False, False]      # all three have folders now
    import shutil
    shutil.rmtree(tmp_path / "test")
    collected = reproduce.collect(grid, tmp_path / "test", plan, quick=False, carried=carried)
    assert [(r.carried, r.usable) for r in collected] == [(True, True)] * 3 + [(True, False)]
    md = reproduce.write_outputs(grid, tmp_path, [case], collected,
                                 reproduce.judge_all(grid, [case], collected), {})
    text = md.read_text()
    assert "4 of them carried from an earlier session's test-runs.csv" in text
    assert "`test/a/seed1/x` (earlier session)" in text
    assert "| a | 2 | y | **INVALID** |" in text                     # shown again, never averaged
    # ... and writes them back, so the next machine carries them too.
    assert sorted(reproduce.carried_records(tmp_path, "test", names)) == sorted(carried)
    # An older table (no duration column) carries nothing.
    table = tmp_path / "test-runs.csv"
    rows = list(csv.DictReader(table.open()))
    with table.open("w", newline="") as fh:
        w = csv.DictWriter(fh, [k for k in rows[0] if k != "duration_s"], extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    assert reproduce.carried_records(tmp_path, "test", names) == {}


def test_an_all_unclear_claim_is_inconclusive_and_its_evidence_shows_each_seed(tmp_path):
    metric = "algo_ratio:x/y"
    near = gr.Claim("ratio", "x near 1", "Fig. 6", "near", metric, "x", target=1.0, tolerance=0.2)
    grid = make_grid([near])
    records = [rec(tmp_path, "a", seed, "x", v, metric=metric) for seed, v in ((1, 1.07), (2, 0.856), (3, 0.927))]
    judgements = reproduce.judge_all(grid, [grid.case("a")], records)
    assert judgements[0].cases[0].outcome == stats.UNCLEAR and judgements[0].verdict == stats.INCONCLUSIVE
    text = reproduce.write_outputs(grid, tmp_path, [grid.case("a")], records, judgements, {}).read_text()
    assert "| ratio | x near 1 | Fig. 6 |" in text and "**inconclusive**" in text
    assert "* case a (unclear): the quantity per valid seed: seed 1 1.07, seed 2 0.856, seed 3 0.927 / x: " in text


def test_the_evidence_of_a_paired_claim_lists_only_seeds_whose_pair_is_valid(tmp_path):
    """A seed whose other run is INVALID is left out of the claim's n, and so out of
    "the quantity per valid seed" (it once showed a gain against the INVALID run)."""
    records = []
    for seed, (x, y) in enumerate([(1.0, 1.1), (2.0, 2.2), (3.0, 3.1)], start=1):
        records += [rec(tmp_path, "a", seed, "x", x), rec(tmp_path, "a", seed, "y", y, valid=seed != 3)]
    grid = make_grid([BETTER])
    judgements = reproduce.judge_all(grid, [grid.case("a")], records)
    assert judgements[0].cases[0].estimate.n == 2
    text = reproduce.write_outputs(grid, tmp_path, [grid.case("a")], records, judgements, {}).read_text()
    (line,) = [ln for ln in text.splitlines() if "the quantity per valid seed" in ln]
    assert "seed 1 -9.1 %, seed 2 -9.1 % /" in line and "seed 3" not in line.split(" / ")[0]


def test_an_invocation_for_some_cases_keeps_the_rest_of_the_grid(tmp_path):
    """`--cases X` runs only X's runs, but the page and PAPER-runs.csv still cover the
    whole grid (carried rows of the other cases are kept, not dropped)."""
    import argparse
    grid = gr.load_grid("dft")
    plan = reproduce.planned_runs(grid, quick=False, seeds=3)
    names = reproduce.metric_names(grid)
    records = []
    for case, seed, scheme in plan:
        r = cl.RunRecord(case.id, seed, scheme, reproduce.run_dir(tmp_path / "dft", case, seed, scheme), True, True,
                         "valid", {n: 1.0 for n in names}, duration_s=case.duration_s,
                         made_by="`bwn reproduce dft --out r` at aaa", finished_utc="2026-11-24 01:44")
        records.append(r)
    reproduce.write_outputs(grid, tmp_path, list(grid.cases), records,
                            reproduce.judge_all(grid, list(grid.cases), records), {})
    parser = argparse.ArgumentParser()
    reproduce.add_arguments(parser)
    args = parser.parse_args(["dft", "--report-only", "--cases", "friendly", "--out", str(tmp_path)])
    assert reproduce.main(args) == 0
    rows = list(csv.DictReader(open(tmp_path / "dft-runs.csv")))
    assert len(plan) > 30 and len(rows) == len(plan)
    assert {r["case"] for r in rows} == {c.id for c in grid.cases}
    text = (tmp_path / "dft.md").read_text()
    assert f"Runs: {len(plan)} planned, {len(plan)} valid" in text and "this invocation: cases friendly" in text
    assert "| cluster20 | 20 flows" in text


def test_execute_runs_again_what_an_edited_case_made(tmp_path, monkeypatch):
    """A complete, valid run is kept only while its case renders to the scenario
    it was made with: after a case's parameters change (or the stored scenario is
    not the case's), its runs are made again and the old ones superseded."""
    import dataclasses
    from bwn.emulation import runner as experiment
    calls: list[tuple[str, int]] = []

    def fake_run_scheme(cfg, scheme, out_dir, duration_s, progress=print):
        calls.append((scheme, cfg.seed))
        meta = RunMeta(ok=True, seed=cfg.seed, duration_s=duration_s, fidelity={"valid": True})
        RunDir(out_dir).write_meta(meta)
        return meta

    monkeypatch.setattr(experiment, "run_scheme", fake_run_scheme)
    monkeypatch.setattr(reproduce, "LOCK_YIELD_S", 0.0)
    grid = gr.load_grid("gtcp")
    case = grid.case("basic")
    plan = [(case, 1, "newreno")]
    out = tmp_path / "gtcp"
    reproduce.execute(grid, out, plan, quick=False, progress=lambda m: None)
    run = out / "basic" / "seed1" / "newreno"
    _, cfg = reproduce.config_for(grid, case, 1, "newreno", False)
    assert reproduce.made_with(run, case, cfg)
    reproduce.execute(grid, out, plan, quick=False, progress=lambda m: None)
    assert calls == [("newreno", 1)]                                   # kept: same scenario
    # A scheme added to the case is new runs; this one's scenario is unchanged.
    widened = dataclasses.replace(case, schemes=(*case.schemes, "vegas"))
    _, widened_cfg = reproduce.config_for(grid, widened, 1, "newreno", False)
    assert reproduce.made_with(run, widened, widened_cfg)
    assert reproduce.scenario_fingerprint(widened_cfg) == reproduce.scenario_fingerprint(cfg)
    edited = dataclasses.replace(case, params={**case.params, "af_packets": 20})
    _, edited_cfg = reproduce.config_for(grid, edited, 1, "newreno", False)
    assert not reproduce.made_with(run, edited, edited_cfg)
    messages: list[str] = []
    reproduce.execute(grid, out, [(edited, 1, "newreno")], quick=False, progress=messages.append)
    assert calls == [("newreno", 1)] * 2
    assert any("another scenario" in m for m in messages)
    assert len(list((out / "superseded").iterdir())) == 1
    assert reproduce.made_with(run, edited, edited_cfg)
    # A missing or unreadable scenario is not the case's either.
    RunDir(run).scenario_toml.write_text("not [toml")
    assert not reproduce.made_with(run, edited, edited_cfg)
    RunDir(run).scenario_toml.unlink()
    assert not reproduce.made_with(run, edited, edited_cfg)


def test_a_carried_run_counts_only_for_the_scenario_it_was_made_with(tmp_path):
    """PAPER-runs.csv keeps each run's scenario fingerprint: on a new machine a row
    vouches for a run only while its case renders to the same scenario; a folder
    made with another scenario is reported incomplete, never averaged."""
    import dataclasses
    grid = gr.load_grid("gtcp")
    case = grid.case("basic")
    edited = dataclasses.replace(case, params={**case.params, "af_packets": 20})
    _, cfg = reproduce.config_for(grid, case, 1, "newreno", False)
    _, edited_cfg = reproduce.config_for(grid, edited, 1, "newreno", False)
    assert reproduce.scenario_fingerprint(cfg) == reproduce.scenario_fingerprint(
        reproduce.config_for(grid, case, 1, "newreno", False)[1])
    assert reproduce.scenario_fingerprint(cfg) != reproduce.scenario_fingerprint(edited_cfg)
    assert reproduce.scenario_fingerprint(cfg) != reproduce.scenario_fingerprint(
        reproduce.config_for(grid, case, 2, "newreno", False)[1])             # the seed is part of it
    out = tmp_path / "gtcp"
    record = cl.RunRecord("basic", 1, "newreno", out / "basic" / "seed1" / "newreno", True, True, "valid",
                          {}, duration_s=case.duration_s, scenario=reproduce.scenario_fingerprint(cfg))
    reproduce.write_outputs(grid, tmp_path, [case], [record], reproduce.judge_all(grid, [case], [record]), {})
    carried = reproduce.carried_records(tmp_path, "gtcp", reproduce.metric_names(grid))
    assert carried[("basic", 1, "newreno")].scenario == record.scenario
    assert reproduce.done_where(out, case, 1, "newreno", False, cfg, carried) == "in an earlier session (gtcp-runs.csv)"
    assert reproduce.done_where(out, edited, 1, "newreno", False, edited_cfg, carried) == ""
    # The report: a folder made with the edited case is not the case's run.
    run = RunDir(reproduce.run_dir(out, case, 1, "newreno"))
    run.write_meta(RunMeta(ok=True, duration_s=case.duration_s, fidelity={"valid": True}))
    run.scenario_toml.write_text(tomli_w.dumps(reproduce.config_for(grid, edited, 1, "newreno", False)[0]))
    [shown] = reproduce.collect(grid, out, [(case, 1, "newreno")], quick=False, carried=carried)
    assert not shown.carried and not shown.usable and "another scenario" in shown.fidelity


def test_a_case_may_ask_for_more_seeds_than_the_grid_and_quick_runs_one():
    base = gr.Case("a", "case a", "dumbbell", {}, ("x", "y"), 10, 5)
    more = gr.Case("b", "case b", "dumbbell", {}, ("x",), 10, 5, seeds=5)
    grid = gr.Grid("test", "Test", "A. Author, Title.", "none", (base, more), ())
    plan = reproduce.planned_runs(grid, quick=False, seeds=3, cases=[base, more])
    assert [(c.id, s, x) for c, s, x in plan if c.id == "b"] == [("b", s, "x") for s in range(1, 6)]
    assert {s for c, s, _ in plan if c.id == "a"} == {1, 2, 3}
    assert {s for c, s, _ in reproduce.planned_runs(grid, False, 7, [base, more]) if c.id == "b"} == set(range(1, 8))
    assert {s for _, s, _ in reproduce.planned_runs(grid, True, 3, [base, more])} == {1}


@pytest.mark.parametrize("bad", ["0", "-2", "2.5", "true", '"8"'])
def test_a_cases_seeds_must_be_a_whole_number_of_at_least_one(tmp_path, bad):
    path = tmp_path / "g.toml"
    path.write_text(f'[paper]\ntitle = "t"\n\n[[cases]]\nid = "a"\ntemplate = "dumbbell"\nschemes = ["x"]\n'
                    f'seeds = {bad}\n')
    with pytest.raises(gr.GridError) as err:
        gr.load_grid("t", path)
    assert str(err.value) == (f"{path}: cases[0]: seeds must be a whole number >= 1, not "
                              f"{gr.tomllib.loads(f'v = {bad}')['v']!r}")
    path.write_text('[paper]\ntitle = "t"\n\n[[cases]]\nid = "a"\ntemplate = "dumbbell"\nschemes = ["x"]\nseeds = 8\n')
    assert gr.load_grid("t", path).cases[0].seeds == 8


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
    assert "telemetry" not in gr.render(grid, grid.case("a"), 1, "x", quick=False)     # the text as loaded
    with pytest.raises(gr.GridError, match=r"case 'a' gives no value for \$\{new\}"):
        gr.render(gr.load_grid("t", path), grid.case("a"), 1, "x", quick=False)    # loaded anew: the edit


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
    exp = gr.render(grid, case, 2, "newreno", quick=False)["experiment"]
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

