"""scripts/mutants.py's own arithmetic: the random sample of unchecked mutants and the
estimate it reports (docs/testing.md, "Why a sample"). No mutmut run: a stage made of
the .meta files mutmut would have written."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from scriptmod import loaded_script


@pytest.fixture(scope="module")
def mm():
    with loaded_script("mutants.py", "mutants_script") as mod:
        yield mod


def stage_with(tmp_path: Path, codes: dict) -> Path:
    meta = tmp_path / "mutants" / "bwn" / "m.py.meta"
    meta.parent.mkdir(parents=True)
    meta.write_text(json.dumps({"exit_code_by_key": codes}))
    return tmp_path


def test_a_sample_is_drawn_from_unchecked_non_equivalent_mutants_and_kept_per_seed(mm, tmp_path):
    codes = {f"bwn.m.x_f__mutmut_{i}": (None if i < 40 else 1) for i in range(60)}
    stage = stage_with(tmp_path, codes)
    eq = mm.Equivalents({"bwn.m.x_f__mutmut_0": "same value"}, {})
    first = mm.draw_sample(stage, eq, 10, seed=3)
    assert len(first) == len(set(first)) == 10
    assert all(codes[n] is None and n != "bwn.m.x_f__mutmut_0" for n in first)
    assert mm.draw_sample(stage, eq, 10, seed=3) == first               # kept, so a run resumes
    assert mm.draw_sample(stage, eq, 10, seed=4) != first               # another seed, another draw
    kept = json.loads((stage / "sample-seed3.json").read_text())
    assert kept["population"] == 39 and kept["mutants"] == first
    assert len(mm.draw_sample(stage, eq, 100, seed=5)) == 39            # at most the population


def test_the_estimate_is_the_samples_kill_rate_with_a_wilson_interval(mm, tmp_path):
    names = [f"bwn.m.x_f__mutmut_{i}" for i in range(20)]
    stage = stage_with(tmp_path, {n: None for n in names})
    eq = mm.Equivalents({}, {})
    chosen = mm.draw_sample(stage, eq, 20, seed=1)
    assert mm.sample_estimates(stage, eq) == ["sample of 20 (seed 1): none checked yet"]
    # 15 killed, 1 timeout, 3 survived, 1 not yet checked
    codes = dict(zip(chosen, [1] * 15 + [-24] + [0] * 3 + [None]))
    (stage / "mutants" / "bwn" / "m.py.meta").write_text(json.dumps({"exit_code_by_key": codes}))
    (line,) = mm.sample_estimates(stage, eq)
    assert line == ("sample of 20 of the 20 unchecked when drawn (seed 1): 19 checked, 16 killed or "
                    "timed out = 84.2 % [95 % Wilson 62.4, 94.5]")
