"""Practical equivalence: a comparison whose whole interval lies within the claim's
margin is a tie ("equal"), which no seed count would turn into a gain
(bwn/analysis/stats.py, bwn/analysis/claims.py, docs/reproduce.md)."""
from __future__ import annotations

from pathlib import Path

import pytest

from bwn.analysis import claims as cl
from bwn.reproduce import grid as gr
from bwn.reproduce import core as reproduce
from bwn.analysis import stats

E = stats.Estimate


def test_gain_within_the_margin_is_equal_whatever_its_sign():
    assert stats.outcome_gain(E(3, 0.003, 0.001, 0.005), 0.01) == stats.EQUAL     # significant, but tiny
    assert stats.outcome_gain(E(3, -0.004, -0.009, -0.001), 0.01) == stats.EQUAL
    assert stats.outcome_gain(E(3, 0.0, -0.01, 0.01), 0.01) == stats.EQUAL       # the margin's edges count
    assert stats.outcome_gain(E(1, 0.005, None, None), 0.01) == stats.EQUAL      # n=1: the point decides


def test_gain_reaching_past_the_margin_is_judged_against_zero():
    assert stats.outcome_gain(E(3, 0.006, 0.001, 0.0101), 0.01) == stats.YES
    assert stats.outcome_gain(E(3, -0.006, -0.0101, -0.001), 0.01) == stats.NO
    assert stats.outcome_gain(E(3, 0.0, -0.02, 0.005), 0.01) == stats.UNCLEAR
    assert stats.outcome_gain(E(1, 0.02, None, None), 0.01) == stats.YES
    assert stats.outcome_gain(E(0, None, None, None), 0.01) == stats.NONE


def test_a_zero_margin_has_no_tie():
    assert stats.outcome_gain(E(3, 0.003, 0.001, 0.005), 0.0) == stats.YES
    assert stats.outcome_gain(E(3, 0.0, 0.0, 0.0), 0.0) == stats.NO          # no gain at all


def test_a_tie_is_not_a_reproduction_and_not_inconclusive():
    Y, N, U, Q = stats.YES, stats.NO, stats.UNCLEAR, stats.EQUAL
    assert stats.verdict([Q, Q]) == stats.NOT_REPRODUCED
    assert stats.verdict([Q, U]) == stats.NOT_REPRODUCED
    assert stats.verdict([Y, Q]) == stats.PARTLY
    assert stats.verdict([U, U]) == stats.INCONCLUSIVE
    assert stats.verdict([N, Q, U]) == stats.NOT_REPRODUCED


def _records(tmp: Path, pairs: list[tuple[float, float]]) -> list[cl.RunRecord]:
    out = []
    for seed, values in enumerate(pairs, start=1):
        for scheme, value in zip(("x", "y"), values):
            out.append(cl.RunRecord("a", seed, scheme, tmp / f"seed{seed}" / scheme, True, True, "valid",
                                    {"goodput_bps:all": value}))
    return out


def _grid(claim: gr.Claim) -> gr.Grid:
    case = gr.Case("a", "case a", "dumbbell", {}, ("x", "y"), 10, 5)
    return gr.Grid("test", "Test", "A. Author, Title.", "none", (case,), (claim,))


def test_judge_calls_schemes_that_carry_the_same_a_tie(tmp_path):
    claim = gr.Claim("x>y", "x beats y", "Fig. 1", "better", "goodput_bps:all", "x", "y")
    assert claim.margin == gr.DEFAULT_MARGIN == 0.01
    records = _records(tmp_path, [(1.002, 1.0), (0.999, 1.0), (1.003, 1.0)])
    j = cl.judge(_grid(claim), claim, [gr.Case("a", "case a", "dumbbell", {}, ("x", "y"), 10, 5)], records)
    assert j.cases[0].outcome == stats.EQUAL and j.verdict == stats.NOT_REPRODUCED
    strict = gr.Claim("x>y", "x beats y", "Fig. 1", "better", "goodput_bps:all", "x", "y", margin=0.0)
    j = cl.judge(_grid(strict), strict, list(_grid(strict).cases), records)
    assert j.cases[0].outcome == stats.UNCLEAR and j.verdict == stats.INCONCLUSIVE


def test_lower_is_better_ties_too(tmp_path):
    claim = gr.Claim("x<y", "x loses less", "Fig. 1", "better", "goodput_bps:all", "x", "y",
                     lower_is_better=True, margin=0.1)
    records = _records(tmp_path, [(0.97, 1.0), (0.98, 1.0), (0.96, 1.0)])      # 3 % [0.5, 5.5] lower
    j = cl.judge(_grid(claim), claim, list(_grid(claim).cases), records)
    assert j.cases[0].outcome == stats.EQUAL
    assert j.cases[0].estimate.mean == pytest.approx(0.03)                 # 1 - ours/theirs


def _grid_file(tmp: Path, extra: str) -> Path:
    path = tmp / "g.toml"
    path.write_text('[paper]\ntitle = "t"\n\n[[cases]]\nid = "a"\ntemplate = "dumbbell"\n'
                    'schemes = ["x", "y"]\n\n[[claims]]\nid = "x>y"\nstatement = "s"\nkind = "better"\n'
                    f'metric = "goodput_bps:all"\nscheme = "x"\nversus = "y"\n{extra}')
    return path


def test_grid_reads_a_claims_margin_and_defaults_to_one_percent(tmp_path):
    assert gr.load_grid("t", _grid_file(tmp_path, "")).claims[0].margin == 0.01
    assert gr.load_grid("t", _grid_file(tmp_path, "margin = 0.03\n")).claims[0].margin == 0.03
    assert gr.load_grid("t", _grid_file(tmp_path, "margin = 0\n")).claims[0].margin == 0.0


@pytest.mark.parametrize("bad", ["1", "1.5", "-0.01", "true", '"1 %"'])
def test_grid_refuses_a_margin_that_is_not_a_fraction(tmp_path, bad):
    with pytest.raises(gr.GridError) as err:
        gr.load_grid("t", _grid_file(tmp_path, f"margin = {bad}\n"))
    assert str(err.value) == (f"{tmp_path / 'g.toml'}: claims[0]: margin must be a fraction in [0, 1) "
                              f"(0.01 = 1 %), not {gr.tomllib.loads(f'v = {bad}')['v']!r}")


def test_the_page_states_each_comparisons_margin():
    claim = gr.Claim("x>y", "x beats y", "Fig. 1", "better", "goodput_bps:all", "x", "y", margin=0.025)
    assert reproduce._rule_text(claim).endswith("above 0; *equal* within ± 2.5 %.")
