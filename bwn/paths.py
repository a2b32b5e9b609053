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


def pipeline_files(build_dir: Path = BUILD, program: str = "bwn") -> tuple[Path, Path]:
    """(p4info, BMv2 JSON) produced by `make build`; a clear error if missing."""
    p4info = build_dir / f"{program}.p4info.txtpb"
    blob = build_dir / f"{program}.json"
    missing = [str(p) for p in (p4info, blob) if not p.exists()]
    if missing:
        raise FileNotFoundError(f"compiled P4 program not found ({', '.join(missing)}): run `make build`")
    return p4info, blob
