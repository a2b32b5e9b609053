"""Test-session rules shared by every test module."""
from __future__ import annotations

import os
import signal

import pytest


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
