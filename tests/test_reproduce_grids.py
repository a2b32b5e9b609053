"""Grids as data (bwn/reproduce/grid.py, docs/reproduce.md "Grids as data"): claims
expanded from lists, second verdicts, named schemes, entries waiting for machinery,
evidence cases, quick parameters; and what every committed grid must hold."""
from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from bwn.reproduce import claims as cl
from bwn.analysis import metrics as mt
from bwn.analysis import stats
from bwn.cli import reproduce
from bwn.reproduce import grid as gr
from bwn.reproduce import gridmodel
from bwn.reproduce.render import render
from bwn.reproduce import ledger as lg
from bwn.reproduce import page, plots
from bwn.reproduce import plan as pl

FLOWS = 'flows = [{ count = 2, src = "h1", dst = "h2", prefix = "f" }]\n'


def load(tmp_path: Path, text: str) -> gr.Grid:
    path = tmp_path / "g.toml"
    path.write_text('[paper]\ntitle = "t"\n\n' + text)
    return gr.load_grid("t", path)


def case(cid: str, schemes: str, extra: str = "", delay_ms: int = 10) -> str:
    params = f"params = {{ rate_mbit = 10, delay_ms = {delay_ms}, queue_packets = 50, loss = 0 }}\n"
    return f'[[cases]]\nid = "{cid}"\ntemplate = "dumbbell"\nschemes = {schemes}\n{params}{FLOWS}{extra}\n'


def claim(cid: str, body: str) -> str:
    return f'[[claims]]\nid = "{cid}"\nstatement = "s"\nmetric = "goodput_bps:all"\n{body}\n'


def rec(case_id: str, seed: int, scheme: str, value: float, metric: str = "goodput_bps:all") -> cl.RunRecord:
    return cl.RunRecord(case_id, seed, scheme, Path("/nowhere"), True, True, "valid", {metric: value})


# -- lists of schemes, second verdicts, inventory ------------------------------------------

def test_a_list_of_versus_is_one_claim_each_and_also_adds_a_second_verdict(tmp_path):
    grid = load(tmp_path, case("a", '["x", "y", "z"]') + case("w", '["x", "y", "z"]') + claim(
        "x wins", 'kind = "better"\nscheme = "x"\nversus = ["y", "z"]\ncases = ["a"]\n'
                  'also = { label = "where loss occurs", cases = ["w"] }') +
        '[[inventory]]\nid = "i"\nquote = "q"\nwhere = "Fig. 1"\nkind = "direction"\nclaims = ["x wins"]\n')
    assert [(c.id, c.versus, c.cases, c.family) for c in grid.claims] == [
        ("x wins vs y", "y", ("a",), "x wins"), ("x wins vs y, where loss occurs", "y", ("w",), "x wins"),
        ("x wins vs z", "z", ("a",), "x wins"), ("x wins vs z, where loss occurs", "z", ("w",), "x wins")]
    # the inventory names the family: every claim of it judges the item
    assert grid.inventory[0].claims == tuple(c.id for c in grid.claims)
    records = [rec(cid, s, scheme, {"x": 1.2, "y": 1.0, "z": 1.3}[scheme] * (1 if cid == "a" else 0.5) + 0.001 * s)
               for cid in ("a", "w") for s in range(1, 6) for scheme in "xyz"]
    verdicts = {c.id: cl.judge(grid, c, list(grid.cases), records).verdict for c in grid.claims}
    assert verdicts["x wins vs y"] == stats.REPRODUCED and verdicts["x wins vs z"] == stats.NOT_REPRODUCED
    assert cl.judge(grid, grid.claims[1], list(grid.cases), records).cases[0].case.id == "w"


def test_a_list_of_schemes_is_one_claim_each(tmp_path):
    grid = load(tmp_path, case("a", '["x", "y"]') + claim(
        "high", 'kind = "at_least"\nscheme = ["x", "y"]\nthreshold = 0.9\nwhy = "w"'))
    assert [(c.id, c.scheme) for c in grid.claims] == [("high [x]", "x"), ("high [y]", "y")]


# -- named schemes ------------------------------------------------------------------------

NAMED = '''[schemes."reno+red"]
algorithm = "reno"
params = { queue_packets = 80 }
experiment = { sack = true }
links = { bottleneck = { loss = 0.001 }, b1 = { loss = 0.001 } }
'''


def test_a_named_scheme_runs_its_algorithm_with_its_own_parameters_links_and_experiment(tmp_path):
    grid = load(tmp_path, NAMED + case("a", '["newreno", "reno+red"]'))
    a = grid.case("a")
    plain = render(grid, a, 1, "newreno", quick=False)
    named = render(grid, a, 1, "reno+red", quick=False)
    bottleneck = [link for link in named["links"] if link.get("name") == "bottleneck"][0]
    assert bottleneck["queue_packets"] == 80 and bottleneck["loss"] == 0.001       # params, then links
    assert [link for link in plain["links"] if link.get("name") == "bottleneck"][0]["queue_packets"] == 50
    assert named["experiment"]["sack"] is True and plain["experiment"]["sack"] is False
    assert named["experiment"]["schemes"] == ["newreno", "reno"]                   # what bwn run runs
    assert grid.algorithm("reno+red") == "reno" and grid.algorithm("newreno") == "newreno"
    pl.config_for(grid, a, 1, "reno+red", quick=False)                             # a valid scenario
    # the runs of one key are the named scheme's, its folder named after it
    assert pl.run_dir(tmp_path, pl.RunKey("t", "a", 1, "reno+red")).name == "reno_red"


def test_a_run_of_a_named_scheme_runs_its_algorithm(tmp_path, monkeypatch):
    from bwn.emulation import runner
    from bwn.reproduce import execute, fingerprint as fp
    grid = load(tmp_path, NAMED + case("a", '["reno+red"]'))
    seen = []
    monkeypatch.setattr(runner, "run_scheme", lambda cfg, scheme, path, duration_s, progress, target: seen.append((scheme, target)))
    run = pl.find_run(grid, pl.RunKey("t", "a", 1, "reno+red"), quick=True)
    execute.make_run(grid, tmp_path / "out", run, True, "test", fp.CodeState("f" * 16, "c", ()),
                     progress=lambda m: None)
    assert seen == [("reno", "bmv2")]


def test_a_named_schemes_link_must_exist(tmp_path):
    grid = load(tmp_path, '[schemes.q]\nalgorithm = "reno"\nlinks = { nowhere = { loss = 0.1 } }\n\n'
                + case("a", '["q"]'))
    with pytest.raises(gr.GridError, match="none of the links nowhere is in template .dumbbell."):
        render(grid, grid.case("a"), 1, "q", quick=False)


# -- machinery not built yet ------------------------------------------------------------

WAITING_GRID = ('[schemes.xcp]\nalgorithm = "xcp"\nneeds = ["xcp"]\n\n'
                + case("a", '["obp", "xcp"]')
                + case("g", '["obp"]',
                       'needs = ["cbr-flows"]\n')
                + claim("obp high", 'kind = "at_least"\nscheme = "obp"\nthreshold = 0.9\ncases = ["a"]')
                + claim("obp like xcp", 'kind = "equal"\nscheme = "obp"\nversus = "xcp"\ncases = ["a"]')
                + claim("obp high on g", 'kind = "at_least"\nscheme = "obp"\nthreshold = 0.9\ncases = ["g"]')
                + '[[claims]]\nid = "no drops"\nstatement = "s"\nkind = "at_most"\nmetric = "compliant_bps:f1"\n'
                  'scheme = "obp"\nthreshold = 0\ncases = ["a"]\n')


def test_entries_waiting_for_machinery_are_declared_but_neither_planned_nor_judged(tmp_path, capsys,
                                                                                   monkeypatch):
    # xcp, cbr-flows and dscp-counts stand for machines not built yet (they have landed;
    # here they wait)
    monkeypatch.setattr(gridmodel, "WAITING", gridmodel.WAITING | {"xcp", "cbr-flows", "dscp-counts"})
    grid = load(tmp_path, WAITING_GRID)
    a, g = grid.case("a"), grid.case("g")
    assert a.schemes == ("obp",) and a.waiting_schemes == (("xcp", ("xcp",)),) and a.runnable
    assert g.waiting == ("cbr-flows",) and not g.runnable
    assert grid.selected(quick=False) == [a]
    assert {r.key for r in pl.planned_runs(grid, False)} == {pl.RunKey("t", "a", s, "obp") for s in range(1, 6)}
    waits = {c.id: c.waiting for c in grid.claims}
    assert waits == {"obp high": (), "obp like xcp": ("xcp",), "obp high on g": ("cbr-flows",),
                     "no drops": ("dscp-counts",)}
    assert [c.id for c in grid.judged_claims] == ["obp high"]
    judged = cl.judge(grid, grid.claims[1], list(grid.cases), [rec("a", 1, "obp", 1.0)])
    assert judged.verdict == stats.WAITING and judged.cases == []
    waiting = pl.waiting_runs(grid)
    assert {m: len(r) for m, r in waiting.items()} == {"xcp": 5, "cbr-flows": 5}
    with pytest.raises(ValueError, match="waits for xcp"):
        pl.find_run(grid, pl.RunKey("t", "a", 1, "xcp"), quick=False)
    with pytest.raises(ValueError, match="case g waits for cbr-flows"):
        pl.find_run(grid, pl.RunKey("t", "g", 1, "obp"), quick=False)
    assert "compliant_bps:f1" not in reproduce.metric_names(grid)
    # the page lists them as waiting, with the machinery, and the tally says so
    text = page.ours_text(judged)
    assert text == "waiting for xcp"
    tally = page.tally(grid, [judged])
    assert tally["items"] == 0


def test_removing_a_machine_from_waiting_puts_its_entries_in_the_grid(tmp_path, monkeypatch):
    monkeypatch.setattr(gridmodel, "WAITING", gridmodel.WAITING - {"xcp", "cbr-flows"})
    grid = load(tmp_path, WAITING_GRID)
    assert grid.case("a").schemes == ("obp", "xcp") and grid.case("g").runnable
    assert {c.id: c.waiting for c in grid.claims}["obp like xcp"] == ()
    assert {c.id for c in grid.selected(quick=False)} == {"a", "g"}


def test_every_machine_still_waiting_is_really_missing():
    """When a machine lands, its name must leave WAITING (the one edit that puts its
    grid entries to work); this fails as soon as the code has it and the name stays."""
    from bwn.scenario import model
    from hosts.cc.dft import Dft
    present = {
        "xcp": "xcp" in model.ALGORITHMS,
        "red-ecn": "aqm" in model.LinkTable.model_fields,
        "guaranteed-service": "service" in model.LinkTable.model_fields,
        "cbr-flows": "kind" in model.FlowTable.model_fields,
        "drop-counters": "drops" in mt.KINDS,
        "dscp-counts": "compliant_bps" in mt.KINDS,
        "dft-ssthresh-update": "ssthresh_update" in inspect.signature(Dft.__init__).parameters,
    }
    assert set(present) == set(gridmodel.MACHINERY)
    for name in gridmodel.WAITING:
        assert not present[name], f"{name} exists now: remove it from bwn/reproduce/gridmodel.py WAITING"


# -- evidence cases, quick parameters, generated reservations ------------------------------

def test_an_evidence_case_is_kept_out_of_the_grid_and_of_claims(tmp_path):
    grid = load(tmp_path, case("a", '["x", "y"]') + case("e", '["x", "y"]', "evidence = true\nquick = true\n")
                + claim("x wins", 'kind = "better"\nscheme = "x"\nversus = "y"'))
    assert [c.id for c in grid.selected(False)] == ["a"] and [c.id for c in grid.selected(True)] == []
    assert [c.id for c in grid.claim_cases(grid.claims[0], list(grid.cases))] == ["a"]
    with pytest.raises(gr.GridError, match="case e is evidence"):
        load(tmp_path, case("e", '["x", "y"]', "evidence = true\n")
             + claim("x wins", 'kind = "better"\nscheme = "x"\nversus = "y"\ncases = ["e"]'))
    # named on the command line, it runs
    import argparse
    args = argparse.Namespace(quick=False, cases="e")
    assert [c.id for c in reproduce._cases(grid, args)] == ["e"]


def test_quick_parameters_and_the_start_clamp_apply_to_quick_runs_only(tmp_path):
    grid = load(tmp_path, '[[cases]]\nid = "a"\ntemplate = "dumbbell"\nschemes = ["x"]\nduration_s = 600\n'
                'quick_duration_s = 40\nparams = { rate_mbit = 10, delay_ms = 10, queue_packets = 50, loss = 0 }\n'
                'quick_params = { queue_packets = 20 }\n'
                'flows = [{ count = 3, src = "h1", dst = "h2", stagger_s = 200.0 }]\n')
    a = grid.case("a")
    full, quick = render(grid, a, 1, "x", quick=False), render(grid, a, 1, "x", quick=True)
    assert [round(f["start_s"]) for f in full["flows"]] == [0, 200, 400]           # the full timeline
    assert [round(f["start_s"]) for f in quick["flows"]] == [0, 20, 20]            # clamped to the middle
    queues = [[link.get("queue_packets") for link in d["links"] if link.get("name") == "bottleneck"][0]
              for d in (full, quick)]
    assert queues == [50, 20]


def test_a_reserve_group_adds_a_reservation_per_flow(tmp_path):
    grid = load(tmp_path, '[[cases]]\nid = "a"\ntemplate = "gtcp-n"\nschemes = ["gtcp", "newreno"]\n'
                'params = { rate_mbit = 11.02, delay_ms = 20, queue_packets = 60, af_packets = 60, sack = false }\n'
                'flows = [{ count = 3, src = "h1", dst = "h2", prefix = "r", reserved_rate_mbit = 1.5, reserve = true,'
                ' port_base = 40001 }, { count = 2, src = "h1", dst = "h2", prefix = "be", scheme = "newreno" }]\n')
    data = render(grid, grid.case("a"), 1, "gtcp", quick=False)
    assert [(f["name"], f.get("src_port"), f.get("reserved_rate_mbit")) for f in data["flows"]] == [
        ("r1", 40001, 1.5), ("r2", 40002, 1.5), ("r3", 40003, 1.5), ("be1", None, None), ("be2", None, None)]
    assert data["reservations"] == [{"src": "h1", "dst": "h2", "rate_mbit": 1.5, "src_port": p}
                                    for p in (40001, 40002, 40003)]
    tcp = render(grid, grid.case("a"), 1, "newreno", quick=False)
    assert all("reserved_rate_mbit" not in f for f in tcp["flows"]) and len(tcp["reservations"]) == 3
    pl.config_for(grid, grid.case("a"), 1, "gtcp", quick=False)


@pytest.mark.parametrize("body, message", [
    (case("a", '["x"]', 'needs = ["warp-drive"]\n'), "needs unknown machinery ['warp-drive']"),
    (case("a", '["x"]', 'colour = "red"\n'), "unknown key(s) colour"),
    (case("a", '["x", "x"]'), "a scheme is listed twice"),
    (case("a", '["x"]') + claim("c", 'kind = "at_least"\nscheme = "x"\nthreshold = 1\nhue = 2'), "unknown key(s) hue"),
    (case("a", '["x"]') + claim("t", 'kind = "trend"\nscheme = "x"\nx = "delay_ms"\ndirection = "increasing"'),
     "a trend of a metric (not of a gain) needs its 'margin'"),
    (case("a", '["x"]') + claim("t", 'kind = "trend"\nscheme = "x"\nmeasure = "range"\ndirection = "increasing"\n'
                                     'margin = 0.1'), "a range (max - min over the cases) can only be judged 'flat'"),
    (case("a", '["x", "y"]') + claim("t", 'kind = "trend"\nscheme = "x"\nversus = "y"\nx = "delay_ms"\n'
                                          'direction = "flat"\ngroups = [["a"]]'), "groups are lists of at least two"),
    (case("a", '["x", "y"]') + claim("b", 'kind = "better"\nscheme = "x"\nversus = "y"\ndifference = true'),
     "difference = true needs 'versus' and a kind judged on a value"),
    (case("a", '["x"]') + claim("b", 'kind = "better"\nscheme = "x"\nversus = "y"\ncases = ["a"]'),
     "case a does not run y"),
    (case("a", '["x"]') + claim("b", 'kind = "at_least"\nscheme = "z"\nthreshold = 1'), "no case runs z"),
    (case("a", '["x"]') + '[[claims]]\nid = "m"\nstatement = "s"\nkind = "at_least"\nmetric = "goodput_cv:a"\n'
                          'scheme = "x"\nthreshold = 1\n', "give the window(s)"),
    (case("a", '["x"]') + claim("d", 'kind = "at_least"\nscheme = "x"\nthreshold = 1\nalso = { label = "l" }'),
     "also is"),
    ('[schemes."a/b"]\nalgorithm = "reno"\n' + case("a", '["x"]'), "cannot be empty or hold '/'"),
    ('[schemes.q]\nparams = {}\n' + case("a", '["x"]'), "missing 'algorithm'"),
    ('[schemes.q]\nalgorithm = "reno"\nlinks = { bottleneck = { name = "b" } }\n' + case("a", '["x"]'),
     "which name the link"),
])
def test_a_grid_with_an_unusable_entry_is_refused(tmp_path, body, message):
    with pytest.raises(gr.GridError) as err:
        load(tmp_path, body)
    assert message in str(err.value)


# -- judging: groups, ranges, ratios to another case, differences ---------------------------

def sweep_grid(tmp_path: Path, claim_body: str) -> gr.Grid:
    cases = "".join(case(f"{p}{d}", '["x", "y"]', delay_ms=d) for p in "dw" for d in (20, 200))
    return load(tmp_path, cases + claim("c", claim_body))


def test_a_trend_of_groups_is_judged_in_each_group(tmp_path):
    grid = sweep_grid(tmp_path, 'kind = "trend"\nscheme = "x"\nversus = "y"\nx = "delay_ms"\ndirection = "decreasing"\n'
                                'groups = [["d20", "d200"], ["w20", "w200"]]\nwhy = "w"')
    gains = {"d20": 0.30, "d200": 0.10, "w20": 0.12, "w200": 0.10}      # the second group falls by 2 points only
    records = [r for c, g in gains.items() for s in range(1, 6)
               for r in (rec(c, s, "x", (1 + g) * (1 + 0.001 * s)), rec(c, s, "y", 1 + 0.001 * s))]
    j = cl.judge(grid, grid.claims[0], list(grid.cases), records)
    assert [(g.cases, g.outcome) for g in j.groups] == [(("d20", "d200"), stats.YES), (("w20", "w200"), stats.NO)]
    assert j.groups[0].estimate.mean == pytest.approx(-0.20, abs=1e-6) and j.verdict == stats.PARTLY
    assert j.trend is None                                              # two groups: no single estimate
    assert "change " in page.ours_text(j) and "(d20, d200)" in page.ours_text(j)
    assert "In each group of cases: d20, d200; w20, w200." in page.rule_text(grid.claims[0])


def test_a_range_judges_how_similar_the_cases_are(tmp_path):
    grid = sweep_grid(tmp_path, 'kind = "trend"\nmeasure = "range"\ndirection = "flat"\nscheme = "x"\n'
                                'margin = 0.05\ncases = ["d20", "d200", "w20"]')
    values = {"d20": 0.95, "d200": 0.93, "w20": 0.97}
    records = [rec(c, s, "x", v + 0.002 * s) for c, v in values.items() for s in range(1, 6)]
    j = cl.judge(grid, grid.claims[0], list(grid.cases), records)
    assert j.trend.mean == pytest.approx(0.04) and j.verdict == stats.REPRODUCED
    assert plots.claim_figure(grid, tmp_path, j).exists()               # no x: the cases side by side
    values["w20"] = 0.99                                                # a spread of 0.06
    records = [rec(c, s, "x", v + 0.002 * s) for c, v in values.items() for s in range(1, 6)]
    assert cl.judge(grid, grid.claims[0], list(grid.cases), records).verdict == stats.NOT_REPRODUCED


def test_a_claim_relative_to_another_case_divides_seed_by_seed(tmp_path):
    grid = load(tmp_path, case("base", '["x"]') + case("two", '["x"]')
                + claim("25x", 'kind = "near"\nscheme = "x"\nrelative_to = "base"\ntarget = 25\ntolerance = 0.5\n'
                               'cases = ["two"]'))
    records = [rec("base", s, "x", 2.0 + 0.01 * s) for s in range(1, 6)] + \
              [rec("two", s, "x", 5.0 * (2.0 + 0.01 * s)) for s in range(1, 6)]
    j = cl.judge(grid, grid.claims[0], list(grid.cases), records)
    assert [c.case.id for c in j.cases] == ["two"]
    assert j.cases[0].estimate.mean == pytest.approx(5.0) and j.cases[0].outcome == stats.NO
    assert j.cases[0].quantities == pytest.approx({s: 5.0 for s in range(1, 6)})


def test_a_difference_and_not_worse_are_judged_on_pairs(tmp_path):
    grid = load(tmp_path, case("a", '["x", "y"]')
                + claim("by 2", 'kind = "at_least"\nscheme = "x"\nversus = "y"\ndifference = true\nthreshold = 2e6')
                + claim("comparable", 'kind = "not_worse"\nscheme = "x"\nversus = "y"'))
    records = [r for s in range(1, 6) for r in (rec("a", s, "x", 7e6 + 1e4 * s), rec("a", s, "y", 4.8e6))]
    by2, comparable = (cl.judge(grid, c, list(grid.cases), records) for c in grid.claims)
    assert by2.cases[0].estimate.mean == pytest.approx(2.23e6) and by2.verdict == stats.REPRODUCED
    assert comparable.verdict == stats.REPRODUCED
    records = [r for s in range(1, 6) for r in (rec("a", s, "x", 4.0e6 + 1e4 * s), rec("a", s, "y", 4.8e6))]
    assert cl.judge(grid, grid.claims[1], list(grid.cases), records).verdict == stats.NOT_REPRODUCED


def test_the_page_says_why_each_claim_is_judged_as_it_is(tmp_path):
    grid = load(tmp_path, case("a", '["x"]') + '[[claims]]\nid = "high"\nstatement = "s"\nkind = "at_least"\n'
                'metric = "utilization:all"\nscheme = "x"\nthreshold = 0.9\nwhy = "the paper\'s own level for high"\n')
    assert page.rule_text(grid.claims[0]).endswith("Why: the paper's own level for high")
    j = cl.judge(grid, grid.claims[0], list(grid.cases),
                 [rec("a", s, "x", 0.95, "utilization:all") for s in range(1, 6)])
    text = page.write_page(grid, tmp_path, list(grid.cases), [], [j], lg.Pool([], {}),
                           {"planned": 0, "attempts": 0, "valid": 0, "INVALID": 0, "incomplete": 0, "remade": 0,
                            "other code": 0}, {}, {}, {}).read_text()
    assert "Judged: utilization at least 90.0 %. Why: the paper's own level for high" in text


# -- the committed grids --------------------------------------------------------------------

def test_the_comparison_grid_runs_every_scheme_in_every_network_and_judges_xcp_and_rcp():
    """docs/compare.md: the three networks with EBN, OBP, XCP, RCP and NewReno; the XCP and
    RCP papers' claims on the single bottleneck, fixed in the grid, with at least 5 seeds;
    its name is a grid `bwn reproduce` takes, not one of the papers `all` runs."""
    assert "compare" in gr.GRIDS and "compare" not in gr.PAPERS
    grid = gr.load_grid("compare")
    assert [c.id for c in grid.cases] == ["single", "parking", "sine"]
    assert all(set(c.schemes) == {"ebn", "obp", "xcp", "rcp", "newreno"} and c.seeds >= 5 for c in grid.cases)
    claims = {c.id: c for c in grid.claims}
    assert (claims["xcp utilization"].kind, claims["xcp utilization"].threshold) == ("at_least", 0.90)
    assert claims["xcp drops"].kind == "at_most" and claims["xcp small queue"].kind == "at_most"
    assert claims["rcp equal rates"].metric == "jain:long*"
    fct = claims["rcp fct < newreno"]
    assert (fct.kind, fct.metric, fct.versus, fct.lower_is_better) == ("better", "fct_s:short*", "newreno", True)
    assert claims["rcp fct < newreno, in the parking lot and on the sine"].cases == ("parking", "sine")
    assert grid.selected(quick=True) and all(c.waiting == () for c in grid.judged_claims)


@pytest.mark.parametrize("paper", gr.GRIDS)
def test_every_committed_claim_with_a_number_of_ours_says_why(paper):
    grid = gr.load_grid(paper)
    for c in grid.claims:
        chosen = c.kind in ("near", "at_least", "at_most", "trend") or c.margin != gr.DEFAULT_MARGIN
        assert c.why or not chosen, f"{paper}: claim {c.id!r} fixes a number without saying why"


@pytest.mark.parametrize("paper", gr.GRIDS)
def test_every_committed_grid_states_its_method_not_its_history(paper):
    grid = gr.load_grid(paper)
    notes = " ".join(grid.notes)
    if paper in gr.PAPERS:
        assert "fixed after the archived verdicts (docs/results/archive) had been read, and before any run" in notes
    else:                                   # no archived page: fixed before any run, full stop
        assert "fixed before any run they judge" in notes
    for text in (notes, grid.scaling):
        assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text), f"{paper}: a dated note"
        assert "Evidence" not in text and "session" not in text
    assert grid.seeds == 5 and all(c.seeds >= 5 for c in grid.cases)


@pytest.mark.parametrize("paper", gr.GRIDS)
def test_every_committed_waiting_entry_renders_once_its_machinery_exists(paper, monkeypatch):
    """A waiting case or scheme is one edit from the grid: its template, parameters and
    link names already render (the scenario is not validated: it has the new keys)."""
    grid = gr.load_grid(paper)
    for case_ in grid.cases:
        for scheme in list(case_.schemes) + [s for s, _ in case_.waiting_schemes]:
            if case_.runnable and scheme in case_.schemes:
                continue
            data = render(grid, case_, 1, scheme, quick=False)
            assert data["experiment"]["duration_s"] == case_.duration_s
    for name, s in grid.schemes.items():
        used = [c for c in grid.cases if name in c.schemes or name in dict(c.waiting_schemes)]
        assert used, f"{paper}: named scheme {name} runs in no case"
        for link, _ in s.links:
            assert any(link in {l_.get("name") for l_ in render(grid, c, 1, name, False)["links"]} for c in used), \
                f"{paper}: scheme {name} sets link {link}, which no case of it has"


def test_full_runs_keep_every_flows_start():
    """OBP's Fig. 6 starts a flow every 200 s of a 600 s run: none is moved."""
    grid = gr.load_grid("obp")
    starts = [f["start_s"] for f in render(grid, grid.case("f6-c10"), 1, "obp", quick=False)["flows"]]
    assert [round(s, -1) for s in starts] == [0, 200, 400]


def test_the_plan_tells_the_hours_of_the_grid_and_of_what_waits(tmp_path, capsys, monkeypatch):
    from bwn.cli.main import main
    assert main(["reproduce", "obp", "--plan", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"the grid: \d+ runs at the declared seeds, [\d.]+ h; --quick: \d+ runs, \d+ min", out)
    # RED/ECN and XCP have landed: OBP's runs are all planned, nothing of it waits
    assert "waiting for machinery" not in out and "red-ecn" not in out
    assert re.search(r"f4-c10 .* obp, xcp, reno\+red, sack\+red", out)
    # DFT's constant-rate flows and Fig. 5's controls have landed too: f4-udp is planned
    assert main(["reproduce", "dft", "--plan", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "waiting for machinery" not in out
    assert re.search(r"f4-udp .* dft, dft:t0_us=1, dft-continuous, dft-periodic", out)
    # with a machine missing, the plan says what waits, and its hours
    monkeypatch.setattr(gridmodel, "WAITING", gridmodel.WAITING | {"cbr-flows"})
    assert main(["reproduce", "dft", "--plan", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"waiting for machinery \(declared, not planned\): \d+ runs, [\d.]+ h more", out)
    assert re.search(r"    cbr-flows: \d+ runs", out)


@pytest.mark.parametrize("paper, scheme, case_id", [("obp", "reno+red", "f4-c10"), ("obp", "sack+red", "f8-n3"),
                                                     ("gtcp", "gtcp", "gs-basic"), ("gtcp", "newreno", "gs-k5")])
def test_the_red_ecn_and_guaranteed_service_runs_are_planned_and_their_scenarios_valid(paper, scheme, case_id):
    """The OBP baselines run with RED and ECN on every bottleneck and ECN-capable
    senders; GTCP's gs-* cases with the guaranteed service on the bottleneck: their
    rendered scenarios load as the runner loads them."""
    from bwn.scenario.config import validate
    grid = gr.load_grid(paper)
    case_ = grid.case(case_id)
    assert case_.runnable and scheme in case_.schemes
    assert case_ in grid.selected(quick=False)
    data = render(grid, case_, 1, scheme, quick=False)
    cfg = validate(data, base_dir=gr.template_path(case_.template).parent)
    if paper == "obp":
        assert cfg.ecn
        red = {link.name for link in cfg.links if link.red_ecn}
        assert red and red <= {"bottleneck", "b1", "b2", "b3"}
        assert all(not link.guaranteed for link in cfg.links)
    else:
        assert [link.name for link in cfg.links if link.guaranteed] == ["bottleneck"]
        assert not cfg.ecn and not any(link.red_ecn for link in cfg.links)


@pytest.mark.parametrize("paper, case_id, scheme, cbr", [
    ("dft", "f4-udp", "dft-continuous", {"udp4-1": (4.408, 200.0, 100.0), "udp2-1": (2.204, 300.0, 100.0)}),
    ("dft", "cbr-cluster10", "dft", {f"cbr{k}": (0.551, 0.0, None) for k in range(1, 5)}),
    ("sarbe", "f1-steps", "westwood", {"cbr2-1": (2.204, 20.0, 20.0), "cbr3-1": (3.306, 40.0, 20.0),
                                       "cbr1-1": (1.102, 60.0, 20.0)}),
])
def test_the_constant_rate_cases_are_planned_and_their_flows_are_cbr_at_the_grids_rates(paper, case_id, scheme,
                                                                                        cbr):
    """DFT's Figs. 4-5 and 'constant rate flows' and SARBE's Fig. 1(b): each case's
    constant-rate flows run the cbr sender at the grid's rate, from its start for its
    duration (plus the seed's small start offset); the flows under test run the
    scheme, with DFT's Fig. 5 control as its parameter."""
    from bwn.scenario.config import validate
    grid = gr.load_grid(paper)
    case_ = grid.case(case_id)
    assert case_.runnable and case_ in grid.selected(quick=False)
    data = render(grid, case_, 1, scheme, quick=False)
    cfg = validate(data, base_dir=gr.template_path(case_.template).parent)
    got = {f.name: (f.constant_rate_mbit, f.start_s, f.duration_s) for f in cfg.flows if f.constant_rate_mbit}
    assert set(got) == set(cbr)
    for name, (rate, start, duration) in cbr.items():
        assert got[name][0] == rate and got[name][2] == duration
        assert start <= got[name][1] < start + 1.0
    others = [f for f in cfg.flows if f.constant_rate_mbit is None]
    assert others and all(f.algorithm(grid.algorithm(scheme)) == grid.algorithm(scheme) for f in others)
    if scheme == "dft-continuous":
        assert grid.algorithm(scheme) == "dft:ssthresh_update=continuous"


def test_a_case_names_the_switches_it_runs_on(tmp_path):
    grid = load(tmp_path, case("a", '["x"]') + case("e", '["x"]', 'target = "ebpf"\nevidence = true\n'))
    assert (grid.case("a").target, grid.case("e").target) == ("bmv2", "ebpf")
    with pytest.raises(gr.GridError, match="target 'tofino' is not one of bmv2, ebpf"):
        load(tmp_path, case("t", '["x"]', 'target = "tofino"\n'))
    # OBP's parking lot at the paper's rate is on the eBPF switch, as evidence
    obp = gr.load_grid("obp")
    ebpf = obp.case("f8-n3-ebpf")
    assert ebpf.target == "ebpf" and ebpf.evidence and ebpf.params["rate_mbit"] == 11.02
    assert {c.target for c in obp.cases if c is not ebpf} == {"bmv2"}


def test_a_claim_nothing_of_which_was_attempted_is_not_run_yet_not_a_failure(tmp_path):
    grid = load(tmp_path, case("a", '["x", "y"]') + claim("x wins", 'kind = "better"\nscheme = "x"\nversus = "y"'))
    (c,) = grid.claims
    never = [cl.RunRecord("a", s, x, Path(), False, None, cl.NOT_RUN) for s in range(1, 6) for x in "xy"]
    assert cl.judge(grid, c, list(grid.cases), never).verdict == stats.NOT_RUN_YET
    tried = never[:-1] + [cl.RunRecord("a", 5, "y", Path("/r"), True, False, "INVALID: cpu")]
    assert cl.judge(grid, c, list(grid.cases), tried).verdict == stats.NO_VALID_RUN
