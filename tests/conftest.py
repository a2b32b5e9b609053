"""Test-session rules shared by every test module."""
from __future__ import annotations

import csv
import json
import os
import signal
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, Union

import pytest

from bwn.rundir import RunDir, RunMeta

CAPACITY_HEADER = ("t_s", "link", "rate_bps")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In mutation testing's inner loop (scripts/mutants.py sets BWN_MUTATION_INNER_LOOP),
    skip the tests marked `scenario`: each runs a whole simulated scenario for 15-50 s,
    and every surviving mutant of the code they reach would run all of them. They run
    in every ordinary pytest run, CI's included."""
    if not os.environ.get("BWN_MUTATION_INNER_LOOP"):
        return
    skip = pytest.mark.skip(reason="scenario test: not in the mutation inner loop (scripts/mutants.py)")
    for item in items:
        if item.get_closest_marker("scenario"):
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _mutation_test_cpu_limit():
    """In mutation testing's inner loop, a test that uses more than
    BWN_MUTATION_TEST_CPU_S seconds of CPU ends the run as mutmut's own CPU limit
    does (SIGXCPU: counted as a timeout). A mutant that makes the transport's event
    loop spin otherwise runs until mutmut's limit for the whole set of tests, which for
    the sender's and receiver's main paths is 4-7 minutes each; the slowest fast test
    takes under 10 s. Off (0) in every ordinary run."""
    limit_s = float(os.environ.get("BWN_MUTATION_TEST_CPU_S") or 0)
    if not (limit_s > 0 and os.environ.get("BWN_MUTATION_INNER_LOOP")):
        yield
        return

    def hung(signum, frame):  # noqa: ARG001 (signal handler signature)
        os.kill(os.getpid(), signal.SIGXCPU)

    previous = signal.signal(signal.SIGPROF, hung)
    signal.setitimer(signal.ITIMER_PROF, limit_s)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


MakeRunDir = Callable[..., RunDir]


@pytest.fixture
def make_run_dir(tmp_path: Path) -> MakeRunDir:
    """Build a scheme's run folder through bwn.rundir, as the runner leaves it:

        run = make_run_dir("ebn", meta=RunMeta(ok=True, ...), summaries={"f1": {...}},
                           logs={"f1": [row, ...]}, capacity=[(t_s, link, rate_bps), ...],
                           telemetry=(header, rows), receivers={"h2": [...]})

    ``where`` is relative to the test's tmp_path (or absolute); ``meta`` None writes
    no run.json. Flow logs are JSON lines (``flows/<flow>.jsonl``)."""

    def make(where: Union[str, Path] = "run", *, meta: Optional[RunMeta] = None,
             summaries: Optional[Mapping[str, Any]] = None,
             logs: Optional[Mapping[str, Iterable[Mapping[str, Any]]]] = None,
             capacity: Optional[Sequence[Sequence[Any]]] = None,
             telemetry: Optional[tuple[Sequence[str], Sequence[Sequence[Any]]]] = None,
             receivers: Optional[Mapping[str, Any]] = None) -> RunDir:
        run = RunDir(tmp_path / where)
        run.path.mkdir(parents=True, exist_ok=True)
        if meta is not None:
            run.write_meta(meta)
        if summaries or logs:
            run.flows_dir.mkdir(exist_ok=True)
        for flow, summary in (summaries or {}).items():
            run.flow_summary(flow).write_text(json.dumps(summary))
        for flow, rows in (logs or {}).items():
            run.flow_log(flow).write_text("".join(json.dumps(dict(r)) + "\n" for r in rows))
        if capacity is not None:
            _write_csv(run.capacity_csv, CAPACITY_HEADER, capacity)
        if telemetry is not None:
            _write_csv(run.telemetry_csv, *telemetry)
        for host, flows in (receivers or {}).items():
            run.receiver_summary(host).write_text(json.dumps(flows))
        return run

    return make


def _write_csv(path: Path, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
