"""Experiment and topology configuration: TOML -> typed, validated dataclasses.

``load_config(path)`` reads a TOML file, ``validate(data)`` checks a dict of the
same shape. Every problem is collected with its location (``links[2].schedule.kind:
unknown kind 'sin' (expected one of: constant, steps, sine, trace)``) and all of
them are raised together in one :class:`ConfigError`. docs/config.md documents
every key.
"""
from __future__ import annotations

import ipaddress
import math
import re
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]

from bwn.controller import dataplane_math as dm
from bwn.controller.schedule import (
    DEFAULT_TRACE_WINDOW_MS, DEFAULT_UPDATE_INTERVAL_S, DEFAULT_UPDATE_THRESHOLD,
    EBN_DEFAULT_ALPHA, ConstantSchedule, RatePoint, Schedule, ScheduleError, SineSchedule,
    StepSchedule, TraceSchedule)

try:
    from bwn.hosts.cc.registry import ALGORITHMS as _ALGORITHMS
except Exception:  # the registry is optional here: config validation must not depend on it
    _ALGORITHMS = ("newreno", "reno", "vegas", "westwood", "ebn", "obp", "dft", "gtcp", "sarbe")

ALGORITHMS: tuple[str, ...] = tuple(_ALGORITHMS)
UNDER_TEST = "under-test"
RESERVED_RATE_ALGORITHMS = ("gtcp",)
SCHEDULE_KINDS = ("constant", "steps", "sine", "trace")
APPLY_BOTH = "both"
MIN_RATE_BPS = 1000.0            # the dataplane's smallest capacity: 1 kb/s
MAX_NODE_NAME = 10               # Mininet names interfaces "<node>-eth<N>" (IFNAMSIZ 16)
NODE_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
DEFAULT_QUEUE_PACKETS = 64       # BMv2's default egress queue depth
DEFAULT_DURATION_S = 60.0
DEFAULT_TELEMETRY_INTERVAL_S = 0.1


class ConfigError(ValueError):
    """Everything wrong with a configuration; ``errors`` lists one problem per entry."""

    def __init__(self, errors: list[str], source: str = "config") -> None:
        self.errors = list(errors)
        self.source = source
        count = f"{len(errors)} error{'s' if len(errors) != 1 else ''}"
        super().__init__(f"{source}: {count}:\n" + "\n".join(f"  {e}" for e in errors))


# ---------------------------------------------------------------------------------------
# The typed configuration


@dataclass(frozen=True)
class SwitchConfig:
    name: str
    device_id: int
    grpc_port: Optional[int] = None      # None: the runner picks one
    thrift_port: Optional[int] = None


@dataclass(frozen=True)
class HostConfig:
    name: str
    ip: ipaddress.IPv4Interface          # address and prefix, e.g. 10.0.1.1/24

    @property
    def address(self) -> str:
        return str(self.ip.ip)


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

    def other_end(self, node: str) -> str:
        return self.b if node == self.a else self.a


@dataclass(frozen=True)
class ReservationConfig:
    src: str
    dst: str
    rate_mbit: float
    src_port: Optional[int] = None
    dst_port: Optional[int] = None

    @property
    def rate_bps(self) -> float:
        return self.rate_mbit * 1e6


@dataclass(frozen=True)
class DataplaneConfig:
    window_us: int = 16_384
    flow_window_us: int = 131_072
    queue_unit_bytes: Optional[int] = None  # None: the runner uses its agents' frame size


@dataclass(frozen=True)
class TelemetryConfig:
    interval_s: float = DEFAULT_TELEMETRY_INTERVAL_S


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
        hops = _shortest_path(edges, src, dst, {h.name for h in self.hosts})
        return [self.links[i] for i in hops or []]


def _shortest_path(edges: list[tuple[str, str]], src: str, dst: str,
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


# ---------------------------------------------------------------------------------------
# Loading


def load_config(path: str | Path) -> ExperimentConfig:
    """Read and validate a TOML experiment config; trace paths are relative to it."""
    path = Path(path)
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except OSError as exc:
        raise ConfigError([f"cannot read the file: {exc.strerror or exc}"], str(path)) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([f"not valid TOML: {exc}"], str(path)) from None
    return validate(data, base_dir=path.parent, source=path)


def validate(data: Mapping[str, Any], base_dir: str | Path | None = None,
             source: str | Path | None = None) -> ExperimentConfig:
    """Check ``data`` (the TOML's dict) and build the config; raise one ConfigError
    listing every problem. ``base_dir`` resolves relative trace paths (default: cwd)."""
    checker = _Checker(Path(base_dir) if base_dir is not None else Path.cwd())
    config = checker.experiment(data, Path(source) if source is not None else None)
    if checker.errors:
        raise ConfigError(checker.errors, str(source) if source is not None else "config")
    assert config is not None
    return config


_MISSING = object()


class _Checker:
    """Validates one config, appending ``location: message`` strings to ``errors``."""

    def __init__(self, base_dir: Path) -> None:
        self.base_dir = base_dir
        self.errors: list[str] = []
        self.nodes = _NodeIndex()
        self.edges: list[tuple[str, str]] = []   # valid endpoints of every link, valid or not

    def error(self, loc: str, message: str) -> None:
        self.errors.append(f"{loc}: {message}" if loc else message)

    # -- primitive checks; each returns None (and records an error) when invalid ------

    def keys(self, loc: str, table: Mapping[str, Any], allowed: tuple[str, ...],
             required: tuple[str, ...] = (), what: str = "") -> None:
        for key in table:
            if key not in allowed:
                self.error(_join(loc, key), f"unknown key{what} (expected one of: "
                                            f"{', '.join(allowed)})")
        for key in required:
            if key not in table:
                self.error(_join(loc, key), "missing (required)")

    def table(self, loc: str, value: Any) -> Optional[Mapping[str, Any]]:
        if not isinstance(value, Mapping):
            self.error(loc, f"expected a table, got {_describe(value)}")
            return None
        return value

    def array_of_tables(self, loc: str, value: Any) -> list[Mapping[str, Any] | None]:
        if value is _MISSING:
            return []
        if not isinstance(value, list):
            self.error(loc, f"expected an array of tables ([[{loc}]]), got {_describe(value)}")
            return []
        return [self.table(f"{loc}[{i}]", item) for i, item in enumerate(value)]

    def number(self, loc: str, value: Any, *, minimum: float | None = None,
               maximum: float | None = None, above: float | None = None,
               integer: bool = False) -> Optional[float]:
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or (integer and not isinstance(value, int)):
            kind = "an integer" if integer else "a number"
            self.error(loc, f"expected {kind}, got {_describe(value)}")
            return None
        if not math.isfinite(value):
            self.error(loc, f"must be finite, got {value}")
            return None
        if minimum is not None and value < minimum:
            self.error(loc, f"must be at least {minimum:g}, got {value:g}")
            return None
        if above is not None and value <= above:
            self.error(loc, f"must be greater than {above:g}, got {value:g}")
            return None
        if maximum is not None and value > maximum:
            self.error(loc, f"must be at most {maximum:g}, got {value:g}")
            return None
        return value

    def integer(self, loc: str, value: Any, minimum: int | None = None,
                maximum: int | None = None) -> Optional[int]:
        checked = self.number(loc, value, minimum=minimum, maximum=maximum, integer=True)
        return None if checked is None else int(checked)

    def string(self, loc: str, value: Any) -> Optional[str]:
        if not isinstance(value, str) or not value:
            self.error(loc, f"expected a non-empty string, got {_describe(value)}")
            return None
        return value

    def choice(self, loc: str, value: Any, choices: tuple[str, ...], what: str) -> Optional[str]:
        text = self.string(loc, value)
        if text is None:
            return None
        if text not in choices:
            self.error(loc, f"unknown {what} {text!r} (expected one of: {', '.join(choices)})")
            return None
        return text

    def optional(self, table: Mapping[str, Any], key: str, loc: str,
                 check: Callable[[str, Any], Any], default: Any = None) -> Any:
        if key not in table:
            return default
        return check(_join(loc, key), table[key])

    # -- sections ------------------------------------------------------------------

    def experiment(self, data: Any, source: Optional[Path]) -> Optional[ExperimentConfig]:
        root = self.table("", data) if not isinstance(data, Mapping) else data
        if root is None:
            return None
        self.keys("", root, ("experiment", "dataplane", "telemetry", "switches", "hosts",
                             "links", "reservations", "flows"),
                  required=("switches", "hosts", "links"))
        meta = self.table("experiment", root.get("experiment", {})) or {}
        self.keys("experiment", meta, ("name", "duration_s", "schemes", "seed", "receive_window_bytes"))
        name = self.optional(meta, "name", "experiment", self.string,
                             source.stem if source is not None else "experiment")
        duration_s = self.optional(meta, "duration_s", "experiment",
                                   lambda loc, v: self.number(loc, v, above=0),
                                   DEFAULT_DURATION_S)
        schemes = self.optional(meta, "schemes", "experiment", self.scheme_list, ())
        seed = self.optional(meta, "seed", "experiment", lambda loc, v: self.integer(loc, v, 0))
        rwnd = self.optional(meta, "receive_window_bytes", "experiment",
                             lambda loc, v: self.integer(loc, v, 2000))

        dataplane = self.dataplane(root.get("dataplane", {}))
        telemetry = self.telemetry(root.get("telemetry", {}))
        switches = self.switches(root.get("switches", _MISSING))
        hosts = self.hosts(root.get("hosts", _MISSING))
        nodes = self.nodes
        links = self.links(root.get("links", _MISSING), nodes)
        for host_name, index in nodes.host_index.items():
            if not any(host_name in edge for edge in self.edges):
                self.error(f"hosts[{index}]", f"host {host_name!r} is not connected by any link")
        reservations = self.reservations(root.get("reservations", _MISSING), nodes)
        flows = self.flows(root.get("flows", _MISSING), nodes, reservations,
                           duration_s if isinstance(duration_s, (int, float)) else None)
        if self.errors or name is None or duration_s is None:
            return None
        return ExperimentConfig(
            name=name, duration_s=float(duration_s), switches=tuple(switches),
            hosts=tuple(hosts), links=tuple(links), flows=tuple(flows),
            reservations=tuple(reservations), dataplane=dataplane or DataplaneConfig(),
            telemetry=telemetry or TelemetryConfig(), schemes=tuple(schemes or ()),
            seed=seed, source=source, receive_window_bytes=rwnd)

    def scheme_list(self, loc: str, value: Any) -> Optional[tuple[str, ...]]:
        if not isinstance(value, list):
            self.error(loc, f"expected an array of algorithm names, got {_describe(value)}")
            return None
        names = [self.choice(f"{loc}[{i}]", v, ALGORITHMS, "algorithm")
                 for i, v in enumerate(value)]
        return tuple(n for n in names if n is not None)

    def dataplane(self, value: Any) -> Optional[DataplaneConfig]:
        table = self.table("dataplane", value)
        if table is None:
            return None
        self.keys("dataplane", table, ("window_us", "flow_window_us", "queue_unit_bytes"))
        default = DataplaneConfig()
        values: dict[str, int] = {}
        for key in ("window_us", "flow_window_us"):
            window_us = table.get(key, getattr(default, key))
            try:
                dm.check_power_of_two_us("the window", window_us)
                values[key] = window_us
            except dm.ConfigError as exc:
                self.error(f"dataplane.{key}", str(exc))
        unit = self.optional(table, "queue_unit_bytes", "dataplane",
                             lambda loc, v: self.integer(loc, v, 1, 65535),
                             default.queue_unit_bytes)
        if len(values) < 2 or ("queue_unit_bytes" in table and unit is None):
            return None
        return DataplaneConfig(values["window_us"], values["flow_window_us"], unit)

    def telemetry(self, value: Any) -> Optional[TelemetryConfig]:
        table = self.table("telemetry", value)
        if table is None:
            return None
        self.keys("telemetry", table, ("interval_s",))
        interval_s = self.optional(table, "interval_s", "telemetry",
                                   lambda loc, v: self.number(loc, v, above=0),
                                   DEFAULT_TELEMETRY_INTERVAL_S)
        return None if interval_s is None else TelemetryConfig(float(interval_s))

    def node_name(self, loc: str, value: Any, taken: dict[str, str]) -> Optional[str]:
        """A valid, new node name (recorded in ``taken``)."""
        name = self.string(loc, value)
        if name is None:
            return None
        if not NODE_NAME_RE.match(name) or len(name) > MAX_NODE_NAME:
            self.error(loc, f"{name!r} is not a valid node name (a letter, then letters, "
                            f"digits or '_', at most {MAX_NODE_NAME} characters: Mininet "
                            f"derives interface names from it)")
            return None
        if name in taken:
            self.error(loc, f"name {name!r} is already used by {taken[name]}")
            return None
        taken[name] = loc
        return name

    def switches(self, value: Any) -> list[SwitchConfig]:
        if value is _MISSING:
            return []
        out: list[SwitchConfig] = []
        names = self.nodes.taken
        device_ids: dict[int, str] = {}
        tcp_ports: dict[int, str] = {}
        tables = self.array_of_tables("switches", value)
        if isinstance(value, list) and not value:
            self.error("switches", "at least one switch is needed")
        for i, table in enumerate(tables):
            loc = f"switches[{i}]"
            if table is None:
                continue
            self.keys(loc, table, ("name", "device_id", "grpc_port", "thrift_port"),
                      required=("name",))
            name = self.node_name(f"{loc}.name", table.get("name"), names) \
                if "name" in table else None
            if name is not None:
                self.nodes.switch_names.append(name)
            device_id = self.optional(table, "device_id", loc,
                                      lambda lc, v: self.integer(lc, v, 0, 2**64 - 1), i)
            if device_id is not None:
                if device_id in device_ids:
                    self.error(f"{loc}.device_id", f"device id {device_id} is already used "
                                                   f"by {device_ids[device_id]}")
                device_ids.setdefault(device_id, loc)
            ports: dict[str, Optional[int]] = {}
            for key in ("grpc_port", "thrift_port"):
                port = self.optional(table, key, loc, lambda lc, v: self.integer(lc, v, 1, 65535))
                if port is not None:
                    if port in tcp_ports:
                        self.error(f"{loc}.{key}", f"TCP port {port} is already used by "
                                                   f"{tcp_ports[port]}")
                    tcp_ports.setdefault(port, f"{loc}.{key}")
                ports[key] = port
            if name is not None and device_id is not None:
                out.append(SwitchConfig(name, device_id, ports["grpc_port"], ports["thrift_port"]))
        return out

    def hosts(self, value: Any) -> list[HostConfig]:
        out: list[HostConfig] = []
        names = self.nodes.taken
        ips: dict[ipaddress.IPv4Address, str] = {}
        for i, table in enumerate(self.array_of_tables("hosts", value)):
            loc = f"hosts[{i}]"
            if table is None:
                continue
            self.keys(loc, table, ("name", "ip"), required=("name", "ip"))
            name = self.node_name(f"{loc}.name", table.get("name"), names) \
                if "name" in table else None
            if name is not None:
                self.nodes.host_index[name] = i
            ip = self.interface(f"{loc}.ip", table["ip"]) if "ip" in table else None
            if ip is not None:
                if ip.ip in ips:
                    self.error(f"{loc}.ip", f"address {ip.ip} is already used by {ips[ip.ip]}")
                ips.setdefault(ip.ip, loc)
            if name is not None and ip is not None:
                out.append(HostConfig(name, ip))
        return out

    def interface(self, loc: str, value: Any) -> Optional[ipaddress.IPv4Interface]:
        text = self.string(loc, value)
        if text is None:
            return None
        if "/" not in text:
            self.error(loc, f"expected an IPv4 address with its prefix length, like "
                            f"10.0.1.1/24, got {text!r}")
            return None
        try:
            ip = ipaddress.IPv4Interface(text)
        except ValueError as exc:
            self.error(loc, f"not an IPv4 address/prefix: {exc}")
            return None
        if ip.network.prefixlen < 31 and ip.ip in (ip.network.network_address,
                                                   ip.network.broadcast_address):
            self.error(loc, f"{ip.ip} is the network or broadcast address of {ip.network}")
            return None
        return ip

    def links(self, value: Any, nodes: "_NodeIndex") -> list[LinkConfig]:
        out: list[LinkConfig] = []
        names: dict[str, str] = {}
        switch_ports: dict[tuple[str, int], str] = {}
        for i, table in enumerate(self.array_of_tables("links", value)):
            loc = f"links[{i}]"
            if table is None:
                continue
            self.keys(loc, table, ("name", "a", "b", "a_port", "b_port", "schedule", "delay_ms",
                                   "loss", "queue_packets", "apply_at"),
                      required=("a", "b", "schedule"))
            ends = {key: nodes.check(self, f"{loc}.{key}", table[key])
                    for key in ("a", "b") if key in table}
            a, b = ends.get("a"), ends.get("b")
            if a is not None and b is not None:
                self.edges.append((a, b))
                if a == b:
                    self.error(loc, f"both ends are {a!r}")
                elif not nodes.is_switch(a) and not nodes.is_switch(b):
                    self.error(loc, f"a link between two hosts ({a}, {b}) has no switch")
            name = self.optional(table, "name", loc, self.string,
                                 f"{a}-{b}" if a and b else None)
            if name is not None:
                if name in names:
                    self.error(f"{loc}.name" if "name" in table else loc,
                               f"link name {name!r} is already used by {names[name]} "
                               f"(set a distinct name = ...)")
                names.setdefault(name, loc)
            ports = {}
            for end_key, node in (("a", a), ("b", b)):
                port_key = f"{end_key}_port"
                ports[port_key] = self.link_port(loc, table, port_key, node, nodes, switch_ports)
            capacity = self.capacity(f"{loc}.schedule", table["schedule"]) \
                if "schedule" in table else None
            delay_ms = self.optional(table, "delay_ms", loc,
                                     lambda lc, v: self.number(lc, v, minimum=0), 0.0)
            loss = self.optional(table, "loss", loc,
                                 lambda lc, v: self.number(lc, v, minimum=0, maximum=1), 0.0)
            queue_packets = self.optional(table, "queue_packets", loc,
                                          lambda lc, v: self.integer(lc, v, 1),
                                          DEFAULT_QUEUE_PACKETS)
            apply_at = self.apply_at(f"{loc}.apply_at", table.get("apply_at", APPLY_BOTH),
                                     a, b, nodes) if a and b and a != b else None
            if None in (a, b, name, capacity, delay_ms, loss, queue_packets, apply_at):
                continue
            out.append(LinkConfig(name, a, b, capacity, float(delay_ms), float(loss),
                                  queue_packets, apply_at, ports["a_port"], ports["b_port"]))
        return out

    def link_port(self, loc: str, table: Mapping[str, Any], key: str, node: Optional[str],
                  nodes: "_NodeIndex", used: dict[tuple[str, int], str]) -> Optional[int]:
        if key not in table:
            return None
        port = self.integer(f"{loc}.{key}", table[key], 0, dm.MAX_PORTS - 1)
        if port is None or node is None:
            return None
        if not nodes.is_switch(node):
            self.error(f"{loc}.{key}", f"{node!r} is a host; ports are numbered on switches only")
            return None
        if (node, port) in used:
            self.error(f"{loc}.{key}", f"port {port} of {node} is already used by "
                                       f"{used[(node, port)]}")
            return None
        used[(node, port)] = loc
        return port

    def apply_at(self, loc: str, value: Any, a: str, b: str,
                 nodes: "_NodeIndex") -> Optional[tuple[str, ...]]:
        text = self.string(loc, value)
        if text is None:
            return None
        if text == APPLY_BOTH:
            return tuple(n for n in (a, b) if nodes.is_switch(n))
        if text not in (a, b):
            self.error(loc, f"expected 'both' or one end of the link ({a}, {b}), got {text!r}")
            return None
        if not nodes.is_switch(text):
            self.error(loc, f"{text!r} is a host: only a switch's egress port can apply "
                            f"the schedule")
            return None
        return (text,)

    def capacity(self, loc: str, value: Any) -> Optional[CapacityConfig]:
        table = self.table(loc, value)
        if table is None:
            return None
        if "kind" not in table:
            self.error(f"{loc}.kind", f"missing (required; one of: {', '.join(SCHEDULE_KINDS)})")
            return None
        kind = self.choice(f"{loc}.kind", table["kind"], SCHEDULE_KINDS, "kind")
        if kind is None:
            return None
        common = ("kind", "update_interval_s", "update_threshold")
        own = {"constant": ("rate_mbit",), "steps": ("steps",),
               "sine": ("b_mbit", "alpha", "w_rad_s", "phi_rad"),
               "trace": ("path", "window_ms")}[kind]
        required = {"constant": ("rate_mbit",), "steps": ("steps",),
                    "sine": ("b_mbit", "w_rad_s"), "trace": ("path",)}[kind]
        self.keys(loc, table, common + own, required, what=f" for kind {kind!r}")
        interval_s = self.optional(table, "update_interval_s", loc,
                                   lambda lc, v: self.number(lc, v, above=0),
                                   DEFAULT_UPDATE_INTERVAL_S)
        threshold = self.optional(table, "update_threshold", loc,
                                  lambda lc, v: self.number(lc, v, minimum=0),
                                  DEFAULT_UPDATE_THRESHOLD)
        built = {"constant": self.constant, "steps": self.steps, "sine": self.sine,
                 "trace": self.trace}[kind](loc, table)
        if built is None or interval_s is None or threshold is None:
            return None
        schedule, trace_path = built
        return CapacityConfig(kind, schedule, float(interval_s), float(threshold), trace_path)

    def rate_mbit(self, loc: str, value: Any) -> Optional[float]:
        rate = self.number(loc, value, above=0)
        if rate is None:
            return None
        try:
            dm.PortCapacity.from_bps(rate * 1e6)
        except dm.ConfigError as exc:
            self.error(loc, str(exc))
            return None
        return float(rate)

    def constant(self, loc: str, table: Mapping[str, Any]) -> Optional[tuple[Schedule, None]]:
        rate = self.optional(table, "rate_mbit", loc, self.rate_mbit)
        return None if rate is None else (ConstantSchedule(rate * 1e6), None)

    def steps(self, loc: str, table: Mapping[str, Any]) -> Optional[tuple[Schedule, None]]:
        if "steps" not in table:
            return None
        loc = f"{loc}.steps"
        value = table["steps"]
        if not isinstance(value, list) or not value:
            self.error(loc, f"expected a non-empty array of {{t_s = ..., rate_mbit = ...}}, "
                            f"got {_describe(value)}")
            return None
        points: list[tuple[float, float]] = []
        ok = True
        for i, item in enumerate(value):
            step_loc = f"{loc}[{i}]"
            step = self.table(step_loc, item)
            if step is None:
                ok = False
                continue
            self.keys(step_loc, step, ("t_s", "rate_mbit"), required=("t_s", "rate_mbit"))
            t_s = self.number(f"{step_loc}.t_s", step["t_s"], minimum=0) if "t_s" in step else None
            rate = self.rate_mbit(f"{step_loc}.rate_mbit", step["rate_mbit"]) \
                if "rate_mbit" in step else None
            if t_s is None or rate is None:
                ok = False
                continue
            if i == 0 and t_s != 0:
                self.error(f"{step_loc}.t_s", f"the first step must be at t_s = 0, got {t_s:g}")
                ok = False
            if points and t_s <= points[-1][0]:
                self.error(f"{step_loc}.t_s", f"{t_s:g} is not after the previous step's "
                                              f"{points[-1][0]:g}")
                ok = False
            points.append((float(t_s), rate * 1e6))
        return (StepSchedule(points), None) if ok else None

    def sine(self, loc: str, table: Mapping[str, Any]) -> Optional[tuple[Schedule, None]]:
        b = self.optional(table, "b_mbit", loc, self.rate_mbit)
        alpha = self.optional(table, "alpha", loc, lambda lc, v: self.number(lc, v, minimum=1),
                              EBN_DEFAULT_ALPHA)
        w = self.optional(table, "w_rad_s", loc, lambda lc, v: self.number(lc, v, minimum=0))
        phi = self.optional(table, "phi_rad", loc, self.number, 0.0)
        if None in (b, alpha, w, phi):
            return None
        return SineSchedule(b * 1e6, float(alpha), float(w), float(phi)), None

    def trace(self, loc: str, table: Mapping[str, Any]) -> Optional[tuple[Schedule, Path]]:
        text = self.optional(table, "path", loc, self.string)
        window_ms = self.optional(table, "window_ms", loc,
                                  lambda lc, v: self.integer(lc, v, 1), DEFAULT_TRACE_WINDOW_MS)
        if text is None or window_ms is None:
            return None
        path = Path(text)
        if not path.is_absolute():
            path = self.base_dir / path
        try:
            schedule = TraceSchedule.from_file(path, window_ms)
        except ScheduleError as exc:
            self.error(f"{loc}.path", str(exc))
            return None
        if schedule.mean_bps < MIN_RATE_BPS:
            self.error(f"{loc}.path", f"{path.name}: mean rate {schedule.mean_bps:g} bit/s is "
                                      f"below the dataplane's 1 kb/s")
            return None
        return schedule, path

    def reservations(self, value: Any, nodes: "_NodeIndex") -> list[ReservationConfig]:
        out: list[ReservationConfig] = []
        for i, table in enumerate(self.array_of_tables("reservations", value)):
            loc = f"reservations[{i}]"
            if table is None:
                continue
            self.keys(loc, table, ("src", "dst", "rate_mbit", "src_port", "dst_port"),
                      required=("src", "dst", "rate_mbit"))
            src = nodes.check_host(self, f"{loc}.src", table["src"]) if "src" in table else None
            dst = nodes.check_host(self, f"{loc}.dst", table["dst"]) if "dst" in table else None
            if src is not None and src == dst:
                self.error(loc, f"src and dst are both {src!r}")
            rate = self.rate_mbit(f"{loc}.rate_mbit", table["rate_mbit"]) \
                if "rate_mbit" in table else None
            ports = {key: self.optional(table, key, loc,
                                        lambda lc, v: self.integer(lc, v, 0, 65535))
                     for key in ("src_port", "dst_port")}
            if None in (src, dst, rate) or src == dst:
                continue
            out.append(ReservationConfig(src, dst, rate, ports["src_port"], ports["dst_port"]))
        return out

    def flows(self, value: Any, nodes: "_NodeIndex", reservations: list[ReservationConfig],
              duration_s: Optional[float]) -> list[FlowConfig]:
        out: list[FlowConfig] = []
        names: dict[str, str] = {}
        for i, table in enumerate(self.array_of_tables("flows", value)):
            loc = f"flows[{i}]"
            if table is None:
                continue
            self.keys(loc, table, ("name", "src", "dst", "scheme", "start_s", "bytes",
                                   "duration_s", "reserved_rate_mbit", "params", "app_rate_mbit",
                                   "src_port"),
                      required=("src", "dst"))
            name = self.optional(table, "name", loc, self.string, f"flow{i}")
            if name is not None:
                if name in names:
                    self.error(f"{loc}.name", f"flow name {name!r} is already used by {names[name]}")
                names.setdefault(name, loc)
            src = nodes.check_host(self, f"{loc}.src", table["src"]) if "src" in table else None
            dst = nodes.check_host(self, f"{loc}.dst", table["dst"]) if "dst" in table else None
            if src is not None and src == dst:
                self.error(loc, f"src and dst are both {src!r}")
            elif src is not None and dst is not None and self.edges \
                    and _shortest_path(self.edges, src, dst, set(nodes.host_index)) is None:
                self.error(loc, f"no path from {src} to {dst} over the links")
            scheme = self.optional(table, "scheme", loc,
                                   lambda lc, v: self.choice(lc, v, (UNDER_TEST,) + ALGORITHMS,
                                                             "scheme"), UNDER_TEST)
            start_s = self.optional(table, "start_s", loc,
                                    lambda lc, v: self.number(lc, v, minimum=0), 0.0)
            if start_s is not None and duration_s is not None and start_s >= duration_s:
                self.error(f"{loc}.start_s", f"{start_s:g} s is not before the end of the "
                                             f"experiment ({duration_s:g} s)")
            if "bytes" in table and "duration_s" in table:
                self.error(loc, "give bytes or duration_s, not both")
            size = self.optional(table, "bytes", loc, lambda lc, v: self.integer(lc, v, 1))
            flow_s = self.optional(table, "duration_s", loc, lambda lc, v: self.number(lc, v, above=0))
            if flow_s is not None and start_s is not None and duration_s is not None \
                    and start_s + flow_s > duration_s + 1e-9:
                self.error(f"{loc}.duration_s", f"the flow would end at {start_s + flow_s:g} s, "
                                                f"after the experiment ({duration_s:g} s)")
            reserved = self.flow_reservation(loc, table, src, dst, scheme, reservations)
            params = self.optional(table, "params", loc, self.params, {})
            app_rate = self.optional(table, "app_rate_mbit", loc, lambda lc, v: self.number(lc, v, above=0))
            src_port = self.optional(table, "src_port", loc, lambda lc, v: self.integer(lc, v, 1, 65535))
            if "src" not in table or "dst" not in table:
                continue
            if None in (name, src, dst, scheme, start_s, params) or src == dst \
                    or ("bytes" in table and size is None) \
                    or ("duration_s" in table and flow_s is None) \
                    or ("reserved_rate_mbit" in table and reserved is None) \
                    or ("app_rate_mbit" in table and app_rate is None) \
                    or ("src_port" in table and src_port is None):
                continue
            out.append(FlowConfig(name, src, dst, scheme, float(start_s), size,
                                  None if flow_s is None else float(flow_s), reserved, params,
                                  None if app_rate is None else float(app_rate), src_port))
        return out

    def flow_reservation(self, loc: str, table: Mapping[str, Any], src: Optional[str],
                         dst: Optional[str], scheme: Optional[str],
                         reservations: list[ReservationConfig]) -> Optional[float]:
        if "reserved_rate_mbit" not in table:
            return None
        rate_loc = f"{loc}.reserved_rate_mbit"
        rate = self.number(rate_loc, table["reserved_rate_mbit"], above=0)
        if rate is None:
            return None
        if scheme is not None and scheme != UNDER_TEST and scheme not in RESERVED_RATE_ALGORITHMS:
            self.error(rate_loc, f"scheme {scheme!r} takes no reserved rate (only: "
                                 f"{', '.join(RESERVED_RATE_ALGORITHMS)}, or {UNDER_TEST!r})")
            return None
        if src is not None and dst is not None and \
                not any(r.src == src and r.dst == dst for r in reservations):
            self.error(rate_loc, f"no reservation from {src} to {dst} (add one under "
                                 f"[[reservations]])")
            return None
        return float(rate)

    def params(self, loc: str, value: Any) -> Optional[dict[str, Any]]:
        table = self.table(loc, value)
        if table is None:
            return None
        ok = True
        for key, item in table.items():
            if isinstance(item, (Mapping, list)):
                self.error(_join(loc, key), f"expected a string, number or boolean, "
                                            f"got {_describe(item)}")
                ok = False
        return dict(table) if ok else None


class _NodeIndex:
    """Every validly named node, even one whose other fields are wrong (so that one
    bad field does not turn each reference to the node into a second error)."""

    def __init__(self) -> None:
        self.switch_names: list[str] = []
        self.host_index: dict[str, int] = {}    # name -> index in [[hosts]]
        self.taken: dict[str, str] = {}         # name -> where it was defined

    def known(self) -> str:
        return ", ".join(sorted(self.switch_names + list(self.host_index)))

    def is_switch(self, name: str) -> bool:
        return name in self.switch_names

    def check(self, checker: _Checker, loc: str, value: Any) -> Optional[str]:
        name = checker.string(loc, value)
        if name is None:
            return None
        if name not in self.switch_names and name not in self.host_index:
            checker.error(loc, f"unknown node {name!r} (known: {self.known()})")
            return None
        return name

    def check_host(self, checker: _Checker, loc: str, value: Any) -> Optional[str]:
        name = self.check(checker, loc, value)
        if name is not None and name not in self.host_index:
            checker.error(loc, f"{name!r} is a switch, expected a host "
                               f"(hosts: {', '.join(sorted(self.host_index)) or 'none'})")
            return None
        return name


def _join(loc: str, key: str) -> str:
    return f"{loc}.{key}" if loc else key


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"string {value!r}"
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return f"{type(value).__name__} {value!r}"
