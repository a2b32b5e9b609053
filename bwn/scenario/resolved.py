"""The resolved experiment: what the runner, the controller and the report use.

:func:`bwn.scenario.config.load_config` checks a scenario file and builds an
:class:`ExperimentConfig` from these frozen dataclasses: every name resolved,
every default that depends on another table filled in, each link's schedule
built. The leaf tables that need no resolution (hosts, reservations, dataplane,
telemetry) are the declared models of :mod:`bwn.scenario.model` themselves.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from bwn.scenario import model as sc
from bwn.scenario.model import (
    AQM_DROP_TAIL,
    AQM_RED_ECN,
    DEFAULT_QUEUE_PACKETS,
    MIN_RATE_BPS,
    SERVICE_ASSURED,
    SERVICE_GUARANTEED,
    SHAPER_LINK,
    SHAPER_SWITCH,
    UNDER_TEST,
    DataplaneConfig,
    HostConfig,
    ReservationConfig,
    TelemetryConfig,
)
from bwn.scenario.schedule import DEFAULT_UPDATE_INTERVAL_S, DEFAULT_UPDATE_THRESHOLD, RatePoint, Schedule

# Schemes that read the switch's own egress queue: OBP's AB has the queued bytes BI
# (eq. 6) and GTCP's reserved flows are protected by the queue's Assured Forwarding
# threshold. A link whose rate bwn-link applies (shaper = "link") leaves that
# queue empty, so these cannot run on it.
SWITCH_QUEUE_ALGORITHMS = ("obp", "gtcp")
#: The sender a [[flows]] entry of kind = "cbr" runs (hosts/cc/cbr.py), its rate in
#: params["rate_mbit"].
CBR_ALGORITHM = "cbr"


@dataclass(frozen=True)
class SwitchConfig:
    name: str
    device_id: int
    grpc_port: Optional[int] = None      # None: the runner picks one
    thrift_port: Optional[int] = None


@dataclass(frozen=True)
class CapacityConfig:
    """A link's capacity over time and how often the controller re-applies it."""

    kind: str
    schedule: Schedule
    update_interval_s: float = DEFAULT_UPDATE_INTERVAL_S
    update_threshold: float = DEFAULT_UPDATE_THRESHOLD
    trace_path: Optional[Path] = None

    def updates(self, duration_s: float) -> list[RatePoint]:
        """The (t_s, rate_bps) points to apply, never below the dataplane's 1 kb/s."""
        points = self.schedule.updates(duration_s, self.update_interval_s, self.update_threshold)
        return [(t_s, max(rate_bps, MIN_RATE_BPS)) for t_s, rate_bps in points]


@dataclass(frozen=True)
class LinkConfig:
    name: str
    a: str
    b: str
    capacity: CapacityConfig
    delay_ms: float = 0.0                # one way
    loss: float = 0.0                    # probability in [0, 1], per packet, each direction
    queue_packets: int = DEFAULT_QUEUE_PACKETS
    apply_at: tuple[str, ...] = ()       # switch ends whose egress applies the schedule
    a_port: Optional[int] = None         # switch port numbers; None: the runner numbers them
    b_port: Optional[int] = None
    # What serves the link at its rate: the switch's egress queue (BMv2: packets/s at an
    # assumed frame size) or the link's bwn-link (bytes; constant, steps or sine).
    shaper: str = SHAPER_SWITCH
    af_threshold_packets: Optional[int] = None   # GTCP's AF drop threshold; None: half the queue
    aqm: str = AQM_DROP_TAIL                     # the switch queues' discipline ("red-ecn": RED, ECN)
    service: str = SERVICE_ASSURED               # reservations as AF or the guaranteed service

    def other_end(self, node: str) -> str:
        return self.b if node == self.a else self.a

    @property
    def shaped_by_link(self) -> bool:
        return self.shaper == SHAPER_LINK

    @property
    def served_schedule(self) -> Optional[Schedule]:
        """The schedule bwn-link serves the link at (shaper = "link": constant, steps
        or sine, checked when loaded); None when the switch serves it."""
        return self.capacity.schedule if self.shaped_by_link else None

    @property
    def af_queue_packets(self) -> int:
        """The Assured Forwarding threshold of a port reserved flows leave by: out-of-
        profile and best-effort packets are dropped while the queue holds this many
        (docs/dataplane.md, "Reservations"); half the queue unless the scenario says."""
        if self.af_threshold_packets is not None:
            return self.af_threshold_packets
        return max(1, self.queue_packets // 2)

    @property
    def red_ecn(self) -> bool:
        return self.aqm == AQM_RED_ECN

    @property
    def guaranteed(self) -> bool:
        return self.service == SERVICE_GUARANTEED

    def needs_emulator(self) -> bool:
        """Whether the link runs through a bwn-link node (a delay, or its rate)."""
        return self.delay_ms > 0 or self.shaped_by_link


@dataclass(frozen=True)
class FlowConfig:
    name: str
    src: str
    dst: str
    scheme: str = UNDER_TEST             # "under-test" or an algorithm name
    start_s: float = 0.0
    bytes: Optional[int] = None          # at most one of bytes / duration_s;
    duration_s: Optional[float] = None   # neither: until the experiment ends
    reserved_rate_mbit: Optional[float] = None
    params: Mapping[str, Any] = field(default_factory=dict)
    app_rate_mbit: Optional[float] = None  # application-limited source (bwn-send --app-rate-mbit)
    src_port: Optional[int] = None         # UDP source port the sender binds (matches a reservation)

    def algorithm(self, scheme_under_test: str) -> str:
        return scheme_under_test if self.scheme == UNDER_TEST else self.scheme

    @property
    def constant_rate_mbit(self) -> Optional[float]:
        """A constant-rate flow's rate (Mb/s of frames); None for any other flow."""
        if self.scheme != CBR_ALGORITHM or "rate_mbit" not in self.params:
            return None
        return float(self.params["rate_mbit"])


@dataclass(frozen=True)
class ExperimentConfig:
    name: str
    duration_s: float
    switches: tuple[SwitchConfig, ...]
    hosts: tuple[HostConfig, ...]
    links: tuple[LinkConfig, ...]
    flows: tuple[FlowConfig, ...] = ()
    reservations: tuple[ReservationConfig, ...] = ()
    dataplane: DataplaneConfig = DataplaneConfig()
    telemetry: TelemetryConfig = TelemetryConfig()
    schemes: tuple[str, ...] = ()
    seed: Optional[int] = None
    source: Optional[Path] = None
    receive_window_bytes: Optional[int] = None  # every receiver's advertised window (bwn-recv --window-bytes)
    sack: bool = True                          # senders use SACK (False: bwn-send --no-sack)
    ecn: bool = False                          # senders offer ECN (bwn-send --ecn)
    linkem_rt_priority: int = sc.DEFAULT_LINKEM_RT_PRIORITY   # bwn-link --rt-priority (0: off)
    linkem_shared: bool = False                # one bwn-links process for every delayed link
    # BMv2 queues get the schedule's rate when their packets will leave (BwnController
    # queue_lookahead); False keeps the rate of the moment, as every run before it
    queue_lookahead: bool = False
    capture_links: Optional[tuple[str, ...]] = None  # [capture] links; None: the bottlenecks

    def node_names(self) -> list[str]:
        return [s.name for s in self.switches] + [h.name for h in self.hosts]

    def is_switch(self, name: str) -> bool:
        return any(s.name == name for s in self.switches)

    def host(self, name: str) -> HostConfig:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)

    def link(self, name: str) -> LinkConfig:
        for link in self.links:
            if link.name == name:
                return link
        raise KeyError(name)

    def path_links(self, src: str, dst: str) -> list[LinkConfig]:
        """Links of a shortest path (fewest hops) from ``src`` to ``dst``; [] if none."""
        edges = [(link.a, link.b) for link in self.links]
        hops = shortest_path(edges, src, dst, {h.name for h in self.hosts})
        return [self.links[i] for i in hops or []]

    def shaper_conflicts(self, schemes: Sequence[str]) -> list[str]:
        """Why the flows cannot run with ``schemes`` under test on this scenario's
        links whose rate bwn-link applies ([] when they can): the switch's queue
        there stays empty, and OBP and GTCP read it (SWITCH_QUEUE_ALGORITHMS)."""
        shaped = [link.name for link in self.links if link.shaped_by_link]
        if not shaped:
            return []
        where = f"link{'s' if len(shaped) > 1 else ''} {', '.join(shaped)} (shaper = \"link\")"
        algos = {s.partition(":")[0] for s in schemes}
        algos |= {f.scheme.partition(":")[0] for f in self.flows if f.scheme != UNDER_TEST}
        out = []
        bad = sorted(a for a in algos if a in SWITCH_QUEUE_ALGORITHMS)
        if bad:
            out.append(f"{where}: the switch's egress queue stays empty there, and "
                       f"{', '.join(bad)} read{'s' if len(bad) == 1 else ''} it (OBP's queued "
                       f"bytes BI, GTCP's Assured Forwarding): use shaper = \"switch\" "
                       f"for {'this scheme' if len(bad) == 1 else 'these schemes'}")
        if self.reservations:
            out.append(f"{where}: reservations are protected by the switch's queue (Assured "
                       f"Forwarding), which stays empty there: use shaper = \"switch\"")
        return out


def shortest_path(edges: list[tuple[str, str]], src: str, dst: str,
                   hosts: set[str]) -> Optional[list[int]]:
    """Indices of the edges of a fewest-hop path (BFS); hosts do not forward."""
    previous: dict[str, tuple[str, int]] = {}
    seen = {src}
    queue = deque([src])
    while queue:
        node = queue.popleft()
        if node == dst:
            path: list[int] = []
            while node != src:
                node, index = previous[node]
                path.append(index)
            return path[::-1]
        if node in hosts and node != src:
            continue
        for index, (a, b) in enumerate(edges):
            if node in (a, b):
                nxt = b if node == a else a
                if nxt not in seen:
                    seen.add(nxt)
                    previous[nxt] = (node, index)
                    queue.append(nxt)
    return None
