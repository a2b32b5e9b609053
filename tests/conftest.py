"""Test-session rules shared by every test module."""
from __future__ import annotations

import os

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
