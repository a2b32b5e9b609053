"""Which links, in which direction, each flow of a scenario crosses.

A flow's path is the scenario's fewest-hop path (``ExperimentConfig.path_links``,
the routes the runner installs). A hop is *rate-limited* when the node it leaves
is a switch whose egress applies the link's schedule (``apply_at``): a host sends
into its access link at the speed of a veth, not at the link's schedule.

Used by the runner to record the flows' links in ``run.json`` (the report's fair
shares, :mod:`bwn.analysis.fairshare`) and to choose the links it captures (:mod:`bwn.emulation.capture`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

from bwn.scenario.resolved import ExperimentConfig, FlowConfig, LinkConfig

#: Two mean capacities closer than this (relative) are equal: ties are all bottlenecks.
TIE_RELATIVE = 1e-9


@dataclass(frozen=True)
class Hop:
    """One link crossed in one direction."""

    link: str
    src: str          # the node the packets leave
    dst: str          # the node they reach
    limited: bool     # src is a switch that applies the link's schedule

    @property
    def direction(self) -> str:
        return f"{self.src}>{self.dst}"

    def as_json(self) -> dict[str, str]:
        return {"link": self.link, "from": self.src, "to": self.dst}


def hops(cfg: ExperimentConfig, src: str, dst: str) -> list[Hop]:
    """The hops of the path from host ``src`` to host ``dst``, in order."""
    out = []
    node = src
    for link in cfg.path_links(src, dst):
        nxt = link.other_end(node)
        out.append(Hop(link.name, node, nxt, _applies(cfg, link, node)))
        node = nxt
    return out


def _applies(cfg: ExperimentConfig, link: LinkConfig, node: str) -> bool:
    # The same rule as the runner's port plans (bwn/emulation/runner.py _switch_plans).
    return cfg.is_switch(node) and (not link.apply_at or node in link.apply_at)


def limited_hops(cfg: ExperimentConfig, flow: FlowConfig) -> list[Hop]:
    """The rate-limited hops of ``flow``'s path (what its fair share depends on)."""
    return [h for h in hops(cfg, flow.src, flow.dst) if h.limited]


def mean_capacity_bps(cfg: ExperimentConfig, link_name: str, duration_s: float) -> float:
    """The link's mean scheduled capacity over the run (what the controller applies,
    with its 1 kb/s floor)."""
    link = cfg.link(link_name)
    return max(link.capacity.schedule.mean_rate_bps(0.0, duration_s), 1000.0)


def flow_bottlenecks(cfg: ExperimentConfig, flow: FlowConfig, duration_s: float) -> list[Hop]:
    """The rate-limited hops of ``flow``'s path with the lowest mean capacity (all of
    them when several tie, as the three links of a parking lot's long flow)."""
    limited = limited_hops(cfg, flow)
    if not limited:
        return []
    capacity = {h: mean_capacity_bps(cfg, h.link, duration_s) for h in limited}
    lowest = min(capacity.values())
    return [h for h in limited if capacity[h] <= lowest * (1 + TIE_RELATIVE)]


def bottleneck_links(cfg: ExperimentConfig, duration_s: float,
                     flows: Optional[Iterable[FlowConfig]] = None) -> list[str]:
    """Names of the links that are the bottleneck of some flow, in the scenario's
    link order."""
    names = {h.link for f in (cfg.flows if flows is None else flows)
             for h in flow_bottlenecks(cfg, f, duration_s)}
    return [link.name for link in cfg.links if link.name in names]


def flow_links_json(cfg: ExperimentConfig) -> dict[str, list[dict[str, str]]]:
    """``run.json``'s ``flow_links``: each flow's rate-limited hops."""
    return {f.name: [h.as_json() for h in limited_hops(cfg, f)] for f in cfg.flows}


def run_meta(cfg: ExperimentConfig, mss_bytes: int, frame_bytes: int) -> dict[str, object]:
    """What the report needs in ``run.json`` to compute fair shares in payload bits:
    each flow's links, the most an application-limited flow (its application rate)
    or a constant-rate flow (its rate of frames, as payload) can take (payload
    bit/s), and the agents' MSS and DATA frame size."""
    demand_bps = {f.name: f.app_rate_mbit * 1e6 for f in cfg.flows if f.app_rate_mbit is not None}
    demand_bps.update({f.name: f.constant_rate_mbit * 1e6 * mss_bytes / frame_bytes for f in cfg.flows
                       if f.constant_rate_mbit is not None})
    return {"flow_links": flow_links_json(cfg), "flow_demand_bps": demand_bps,
            "mss_bytes": mss_bytes, "frame_bytes": frame_bytes}
