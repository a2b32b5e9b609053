"""What a run's seed (``[experiment] seed``) changes, derived in one place.

A seed makes repetitions of one scenario differ the way repeated NS-2 runs with
different seeds do, and makes each repetition replayable where the emulator
allows it:

* **flow ids** (``bwn-send --flow-id``): the switches hash them into their flow
  tables (EBN's flow count), so collisions differ per seed;
* **bwn-link's random draws** (``--seed``: jitter, its own loss, reordering);
* **start times**: ``bwn reproduce`` offsets each flow's ``start_s`` by a
  seed-derived amount (:func:`start_offset_s`) when it writes a scenario.

Not replayable: the switches' random loss. BMv2's ``random()`` draws from a
per-thread generator seeded from the thread id (behavioral-model,
``targets/simple_switch/primitives.cpp``), so its loss draws differ from run to
run whatever the seed, but cannot be repeated (docs/reproduce.md).

Without a seed, flows get ids 1, 2, ... and bwn-link draws its own seed (as before).
"""
from __future__ import annotations

import hashlib
from typing import Optional


def _hash32(*parts: object) -> int:
    digest = hashlib.blake2b(":".join(str(p) for p in parts).encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big")


def flow_id(seed: Optional[int], index: int) -> int:
    """The flow id of the ``index``-th flow (0-based): ``index + 1`` without a seed,
    else a seed-derived nonzero 32-bit value (distinct within a run)."""
    if seed is None:
        return index + 1
    return (_hash32(seed, "flow", index) & 0xFFFFFF00) | ((index + 1) & 0xFF) or index + 1


def linkem_seed(seed: Optional[int], name: str) -> Optional[int]:
    """bwn-link's --seed for the emulator node ``name`` (None: let it draw one)."""
    return None if seed is None else _hash32(seed, "linkem", name)


def start_offset_s(seed: int, flow_index: int, spread_s: float) -> float:
    """A flow's start offset in [0, spread_s), uniform in the seed and flow index
    (millisecond resolution)."""
    if spread_s <= 0:
        return 0.0
    steps = max(int(spread_s * 1000), 1)
    return (_hash32(seed, "start", flow_index) % steps) / 1000.0
