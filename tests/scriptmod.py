"""Load one of the project's scripts (scripts/*.py, not a package) as a module for a test."""
from __future__ import annotations

import importlib.util
import sys
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Iterator

REPO = Path(__file__).resolve().parents[1]


@contextmanager
def loaded_script(filename: str, module_name: str) -> Iterator[ModuleType]:
    """scripts/FILENAME imported as MODULE_NAME, registered in sys.modules while in use
    (its dataclasses look their module up there) and removed after."""
    spec = importlib.util.spec_from_file_location(module_name, REPO / "scripts" / filename)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = mod
    try:
        spec.loader.exec_module(mod)
        yield mod
    finally:
        sys.modules.pop(module_name, None)
