"""Max-min fair shares of flows over the links they cross (progressive filling).

A *resource* is one link in one direction (``"bottleneck:s1>s2"``): flows in the
other direction, and flows on other links, do not share it. Every flow's rate
rises at the same pace from 0; a resource whose capacity is used up freezes the
flows that cross it, a flow that reaches its demand (an application-limited
source) freezes at its demand, and the others keep rising (Bertsekas & Gallager,
*Data Networks*, sec. 6.5.2). The result is the max-min fair allocation: no flow
can get more without taking from a flow that has no more than it.

Units are the caller's (the report uses payload bit/s throughout).
"""
from __future__ import annotations

import math
from typing import Hashable, Mapping, Optional, Sequence

_EPS = 1e-9


def max_min_shares(capacity: Mapping[Hashable, float],
                   flows: Mapping[Hashable, Sequence[Hashable]],
                   demand: Optional[Mapping[Hashable, float]] = None) -> dict[Hashable, float]:
    """Each flow's max-min fair rate.

    ``capacity``: resource -> capacity; ``flows``: flow -> the resources it crosses
    (resources missing from ``capacity`` do not limit it); ``demand``: flow -> the
    most it would send (absent: unlimited). A flow limited by nothing gets its
    demand, or ``math.inf``.
    """
    demand = demand or {}
    for name, value in capacity.items():
        if value < 0 or math.isnan(value):
            raise ValueError(f"capacity of {name!r} must be >= 0, got {value}")
    paths = {f: [r for r in dict.fromkeys(rs) if r in capacity] for f, rs in flows.items()}
    rate = {f: 0.0 for f in flows}
    active = {f for f in flows if paths[f] or f in demand}
    for f in flows:
        if f not in active:
            rate[f] = math.inf
    users: dict[Hashable, list[Hashable]] = {}
    for f, rs in paths.items():
        for r in rs:
            users.setdefault(r, []).append(f)
    while active:
        steps = []
        for r, fs in users.items():
            rising = [f for f in fs if f in active]
            if rising:
                used = sum(rate[f] for f in fs)
                steps.append((capacity[r] - used) / len(rising))
        steps += [demand[f] - rate[f] for f in active if f in demand]
        step = max(min(steps), 0.0)
        for f in active:
            rate[f] += step
        frozen = {f for f in active if f in demand and rate[f] >= demand[f] - _EPS * max(demand[f], 1)}
        for r, fs in users.items():
            if capacity[r] - sum(rate[f] for f in fs) <= _EPS * max(capacity[r], 1):
                frozen.update(f for f in fs if f in active)
        if not frozen:            # cannot happen: the smallest step freezes something
            raise AssertionError("progressive filling made no progress")
        active -= frozen
    return rate
