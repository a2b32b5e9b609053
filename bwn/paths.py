"""Where the checkout's data lives: build outputs, scenarios, grids, docs.

bwn runs from a checkout (`pip install -e .`): the P4 build, the scenario files
and the reproduction grids are read from the repository's own folders.
"""
from __future__ import annotations

from pathlib import Path

#: the repository root (the folder holding pyproject.toml)
REPO = Path(__file__).resolve().parents[1]
BUILD = REPO / "build"
SCENARIOS = REPO / "topologies" / "scenarios"
TEMPLATES = REPO / "topologies" / "templates"
GRIDS = REPO / "topologies" / "reproduce"
