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


def _pytest_with_the_projects_conftest(tmp_path: Path, body: str, **env: str):
    import os
    import subprocess
    import sys
    (tmp_path / "test_one.py").write_text(body)
    run_env = dict(os.environ, PYTHONPATH=str(Path(__file__).parent), **env)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "conftest", "-p", "no:cacheprovider",
                           "test_one.py"], cwd=tmp_path, env=run_env, capture_output=True, timeout=60)


def test_in_the_inner_loop_a_spinning_test_ends_the_run_as_mutmuts_cpu_limit_does(tmp_path):
    """tests/conftest.py: past BWN_MUTATION_TEST_CPU_S of CPU the run dies of SIGXCPU,
    which mutmut records as a timeout; a test within the limit passes as usual."""
    spin = "def test_spin():\n    while True:\n        pass\n"
    done = _pytest_with_the_projects_conftest(tmp_path, spin, BWN_MUTATION_INNER_LOOP="1",
                                              BWN_MUTATION_TEST_CPU_S="1")
    assert done.returncode == -24                           # killed by SIGXCPU
    quick = _pytest_with_the_projects_conftest(tmp_path, "def test_ok():\n    assert sum(range(10**5))\n",
                                               BWN_MUTATION_INNER_LOOP="1", BWN_MUTATION_TEST_CPU_S="1")
    assert quick.returncode == 0
