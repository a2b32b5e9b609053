"""Experiment and topology configuration: TOML -> typed, validated dataclasses.

``load_config(path)`` reads a TOML file, ``validate(data)`` checks a dict of the
same shape; both give the resolved :class:`bwn.scenario.resolved.ExperimentConfig`. Checking has two steps:

1. the declared format (``bwn/scenario/model.py``, pydantic v2; the same
   declarations give ``docs/scenario.schema.json``): keys, types, ranges,
   defaults;
2. what a schema cannot say, done here: names that refer to other tables, names,
   addresses and ports unique across tables, a path for each flow, step times,
   trace files, and the defaults that depend on other tables.

Every problem is reported with its location (``links[2].schedule.kind: unknown
kind 'sin' (expected one of: constant, steps, sine, trace)``), all of one step
together in one :class:`ConfigError`; the second step runs once the first passes.
docs/config.md documents every key.
"""
from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated, Any, Mapping, Optional, Union

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser, as a package
    import tomli as tomllib  # type: ignore[no-redef]

from pydantic import Field, TypeAdapter, ValidationError

from bwn.protocol import dataplane_math as dm
from bwn.scenario import model as sc
from bwn.scenario.messages import messages
from bwn.scenario.model import (
    APPLY_BOTH,
    AQM_DROP_TAIL,
    MIN_RATE_BPS,
    SERVICE_ASSURED,
    SERVICE_GUARANTEED,
    SHAPER_LINK,
    UNDER_TEST,
)
from bwn.scenario.resolved import (
    CBR_ALGORITHM,
    CapacityConfig,
    ExperimentConfig,
    FlowConfig,
    LinkConfig,
    SwitchConfig,
    shortest_path,
)
from bwn.scenario.schedule import (
    ConstantSchedule,
    Schedule,
    ScheduleError,
    SineSchedule,
    StepSchedule,
    TraceSchedule,
)

RESERVED_RATE_ALGORITHMS = ("gtcp",)   # schemes that take a flow's reserved_rate_mbit


class ConfigError(ValueError):
    """Everything wrong with a configuration; ``errors`` lists one problem per entry."""

    def __init__(self, errors: list[str], source: str = "config") -> None:
        self.errors = list(errors)
        self.source = source
        count = f"{len(errors)} error{'s' if len(errors) != 1 else ''}"
        super().__init__(f"{source}: {count}:\n" + "\n".join(f"  {e}" for e in errors))


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
    where = str(source) if source is not None else "config"
    try:
        table = sc.ScenarioFile.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(messages(exc), where) from None
    resolver = _Resolver(table, Path(base_dir) if base_dir is not None else Path.cwd())
    config = resolver.config(Path(source) if source is not None else None)
    if resolver.errors:
        raise ConfigError(resolver.errors, where)
    return config


_LINK_SCHEDULE_TYPE = Annotated[Union[sc.ConstantTable, sc.StepsTable, sc.SineTable],
                                Field(discriminator="kind")]
_LINK_SCHEDULE = TypeAdapter(_LINK_SCHEDULE_TYPE)
_LINK_SCHEDULE_KINDS = ", ".join(k for k in sc.SCHEDULE_KINDS if k != "trace")   # bwn-link's


def schedule_from_json(text: str) -> Schedule:
    """A schedule from the JSON of a ``[links.schedule]`` table of kind constant,
    steps or sine (``bwn-link --rate-schedule``; :func:`bwn.scenario.schedule.
    table_of` writes it). ScheduleError says what is wrong, in one line."""
    try:
        table = _LINK_SCHEDULE.validate_json(text)
    except ValidationError as exc:
        lines = messages(exc, root=_LINK_SCHEDULE_TYPE)   # keys of the table given
        for error in exc.errors(include_url=False):
            if error["type"] == "union_tag_invalid":   # an unknown kind, or a trace
                given = error.get("input")
                kind = given.get("kind") if isinstance(given, dict) else given
                lines = [f"kind: expected one of: {_LINK_SCHEDULE_KINDS} (a trace is a file of "
                         f"delivery opportunities, not a rate bwn-link serves), got "
                         f"{sc.describe(kind)}"]
            elif error["type"] == "union_tag_not_found":
                lines = [f"kind: missing (required; one of: {_LINK_SCHEDULE_KINDS})"]
        raise ScheduleError("; ".join(lines)) from None
    return rate_schedule_of(table)


def rate_schedule_of(table: Any) -> Schedule:
    """The schedule of a validated constant, steps or sine table (the scenario's and
    bwn-link's one mapping); StepSchedule raises ScheduleError on misordered steps."""
    if isinstance(table, sc.ConstantTable):
        return ConstantSchedule(table.rate_mbit * 1e6)
    if isinstance(table, sc.SineTable):
        return SineSchedule(table.b_mbit * 1e6, float(table.alpha), float(table.w_rad_s),
                            float(table.phi_rad))
    assert isinstance(table, sc.StepsTable), type(table)
    return StepSchedule([(float(step.t_s), step.rate_mbit * 1e6) for step in table.steps])


class _Resolver:
    """Step 2: the checks across tables, and the resolved :class:`ExperimentConfig`."""

    def __init__(self, table: sc.ScenarioFile, base_dir: Path) -> None:
        self.t = table
        self.base_dir = base_dir
        self.errors: list[str] = []
        self.switch_names = [s.name for s in table.switches]
        self.host_names = [h.name for h in table.hosts]
        self.edges: list[tuple[str, str]] = []    # known endpoints of every link

    def error(self, loc: str, message: str) -> None:
        self.errors.append(f"{loc}: {message}")

    def config(self, source: Optional[Path]) -> ExperimentConfig:
        t = self.t
        switches = self.switches()
        self.hosts()
        links = self.links()
        for index, host in enumerate(t.hosts):
            if not any(host.name in edge for edge in self.edges):
                self.error(f"hosts[{index}]", f"host {host.name!r} is not connected by any link")
        self.capacities_fit_window(links)
        self.reservations()
        flows = self.flows()
        capture = self.capture(links)
        config = ExperimentConfig(
            name=t.experiment.name or (source.stem if source is not None else "experiment"),
            duration_s=float(t.experiment.duration_s), switches=tuple(switches),
            hosts=tuple(t.hosts), links=tuple(links), flows=tuple(flows),
            reservations=tuple(t.reservations), dataplane=t.dataplane, telemetry=t.telemetry,
            schemes=tuple(t.experiment.schemes), seed=t.experiment.seed, source=source,
            receive_window_bytes=t.experiment.receive_window_bytes, sack=t.experiment.sack,
            ecn=t.experiment.ecn,
            linkem_rt_priority=t.experiment.linkem_rt_priority,
            linkem_shared=t.experiment.linkem_shared,
            queue_lookahead=t.experiment.queue_lookahead,
            capture_links=capture)
        for message in config.shaper_conflicts(config.schemes):
            self.error("links", message)
        return config

    # -- nodes -------------------------------------------------------------------------

    def switches(self) -> list[SwitchConfig]:
        self.taken: dict[str, str] = {}
        device_ids: dict[int, str] = {}
        tcp_ports: dict[int, str] = {}
        out = []
        for i, s in enumerate(self.t.switches):
            loc = f"switches[{i}]"
            self.unique_name(f"{loc}.name", s.name)
            device_id = i if s.device_id is None else s.device_id
            if device_id in device_ids:
                self.error(f"{loc}.device_id", f"device id {device_id} is already used by "
                                               f"{device_ids[device_id]}")
            device_ids.setdefault(device_id, loc)
            for key in ("grpc_port", "thrift_port"):
                port = getattr(s, key)
                if port is not None:
                    if port in tcp_ports:
                        self.error(f"{loc}.{key}", f"TCP port {port} is already used by "
                                                   f"{tcp_ports[port]}")
                    tcp_ports.setdefault(port, f"{loc}.{key}")
            out.append(SwitchConfig(s.name, device_id, s.grpc_port, s.thrift_port))
        return out

    def hosts(self) -> None:
        ips: dict[ipaddress.IPv4Address, str] = {}
        for i, h in enumerate(self.t.hosts):
            loc = f"hosts[{i}]"
            self.unique_name(f"{loc}.name", h.name)
            if h.ip.ip in ips:
                self.error(f"{loc}.ip", f"address {h.ip.ip} is already used by {ips[h.ip.ip]}")
            ips.setdefault(h.ip.ip, loc)

    def unique_name(self, loc: str, name: str) -> None:
        if name in self.taken:
            self.error(loc, f"name {name!r} is already used by {self.taken[name]}")
        self.taken.setdefault(name, loc)

    def known(self) -> str:
        return ", ".join(sorted(self.switch_names + self.host_names))

    def node(self, loc: str, name: str) -> Optional[str]:
        if name not in self.switch_names and name not in self.host_names:
            self.error(loc, f"unknown node {name!r} (known: {self.known()})")
            return None
        return name

    def host(self, loc: str, name: str) -> Optional[str]:
        if self.node(loc, name) is None:
            return None
        if name not in self.host_names:
            self.error(loc, f"{name!r} is a switch, expected a host "
                            f"(hosts: {', '.join(sorted(self.host_names)) or 'none'})")
            return None
        return name

    # -- links -------------------------------------------------------------------------

    def links(self) -> list[LinkConfig]:
        out = []
        names: dict[str, str] = {}
        switch_ports: dict[tuple[str, int], str] = {}
        for i, link in enumerate(self.t.links):
            loc = f"links[{i}]"
            a, b = self.node(f"{loc}.a", link.a), self.node(f"{loc}.b", link.b)
            ok = a is not None and b is not None
            if a is not None and b is not None:
                self.edges.append((a, b))
                if a == b:
                    self.error(loc, f"both ends are {a!r}")
                    ok = False
                elif a not in self.switch_names and b not in self.switch_names:
                    self.error(loc, f"a link between two hosts ({a}, {b}) has no switch")
            name = link.name or f"{link.a}-{link.b}"
            if name in names:
                self.error(f"{loc}.name" if link.name else loc,
                           f"link name {name!r} is already used by {names[name]} "
                           f"(set a distinct name = ...)")
            names.setdefault(name, loc)
            for key, node in (("a_port", a), ("b_port", b)):
                self.link_port(f"{loc}.{key}", getattr(link, key), node, switch_ports)
            apply_at = self.apply_at(f"{loc}.apply_at", link.apply_at, link.a, link.b) \
                if ok else ()
            capacity = self.capacity(f"{loc}.schedule", link.schedule)
            if capacity is None or apply_at is None:
                continue
            if link.shaper == SHAPER_LINK and isinstance(link.schedule, sc.TraceTable):
                self.error(f"{loc}.shaper", f"shaper = \"link\" needs a constant, steps or "
                                            f"sine schedule (bwn-link computes the rate of "
                                            f"each frame from it), got kind = \"trace\"")
            if link.af_threshold_packets is not None and link.af_threshold_packets > link.queue_packets:
                self.error(f"{loc}.af_threshold_packets", f"{link.af_threshold_packets} is more than "
                                                          f"the queue's {link.queue_packets} packets "
                                                          f"(queue_packets)")
            for key, value, default in (("aqm", link.aqm, AQM_DROP_TAIL), ("service", link.service, SERVICE_ASSURED)):
                if value != default and link.shaper == SHAPER_LINK:
                    self.error(f"{loc}.{key}", f"{key} = \"{value}\" needs the switch's queue to serve "
                                               f"the link (shaper = \"switch\"): with shaper = \"link\" "
                                               f"that queue stays empty")
            if (link.service == SERVICE_GUARANTEED and link.af_threshold_packets is not None
                    and link.af_threshold_packets != link.queue_packets):
                self.error(f"{loc}.af_threshold_packets", f"service = \"guaranteed\" has no Assured "
                                                          f"Forwarding threshold (out-of-profile and best-"
                                                          f"effort packets share a FIFO with tail drop): "
                                                          f"leave it out or set it to queue_packets "
                                                          f"({link.queue_packets}), got "
                                                          f"{link.af_threshold_packets}")
            out.append(LinkConfig(name, link.a, link.b, capacity, float(link.delay_ms),
                                  float(link.loss), link.queue_packets, apply_at,
                                  link.a_port, link.b_port, link.shaper, link.af_threshold_packets,
                                  link.aqm, link.service))
        return out

    def link_port(self, loc: str, port: Optional[int], node: Optional[str],
                  used: dict[tuple[str, int], str]) -> None:
        if port is None or node is None:
            return
        if node not in self.switch_names:
            self.error(loc, f"{node!r} is a host; ports are numbered on switches only")
            return
        if (node, port) in used:
            self.error(loc, f"port {port} of {node} is already used by {used[(node, port)]}")
            return
        used[(node, port)] = loc.rsplit(".", 1)[0]

    def apply_at(self, loc: str, text: str, a: str, b: str) -> Optional[tuple[str, ...]]:
        if text == APPLY_BOTH:
            return tuple(n for n in (a, b) if n in self.switch_names)
        if text not in (a, b):
            self.error(loc, f"expected 'both' or one end of the link ({a}, {b}), got {text!r}")
            return None
        if text not in self.switch_names:
            self.error(loc, f"{text!r} is a host: only a switch's egress port can apply "
                            f"the schedule")
            return None
        return (text,)

    def capacities_fit_window(self, links: list[LinkConfig]) -> None:
        """Each link's highest scheduled rate must fit the dataplane's measurement
        window (IC is held as bytes per window: docs/dataplane.md)."""
        window_us = self.t.dataplane.window_us
        for i, (link, table) in enumerate(zip(links, self.t.links)):
            sched = table.schedule
            if isinstance(sched, sc.ConstantTable):
                peaks = [sched.rate_mbit]
            elif isinstance(sched, sc.SineTable):
                peaks = [sched.b_mbit * (1 + 1 / sched.alpha)]
            elif isinstance(sched, sc.StepsTable):
                peaks = [step.rate_mbit for step in sched.steps]
            else:
                continue
            try:
                dm.PortCapacity.from_bps(max(peaks) * 1e6, window_us)
            except dm.ConfigError as exc:
                self.error(f"links[{i}].schedule", str(exc))

    def capacity(self, loc: str, table: Any) -> Optional[CapacityConfig]:
        trace_path: Optional[Path] = None
        schedule: Schedule
        if isinstance(table, (sc.ConstantTable, sc.SineTable)):
            schedule = rate_schedule_of(table)
        elif isinstance(table, sc.StepsTable):
            if not self.steps_ordered(f"{loc}.steps", table.steps):
                return None
            schedule = rate_schedule_of(table)
        else:
            assert isinstance(table, sc.TraceTable)
            trace_path = Path(table.path)
            if not trace_path.is_absolute():
                trace_path = self.base_dir / trace_path
            try:
                schedule = TraceSchedule.from_file(trace_path, table.window_ms)
            except ScheduleError as exc:
                self.error(f"{loc}.path", str(exc))
                return None
            if schedule.mean_bps < MIN_RATE_BPS:
                self.error(f"{loc}.path", f"{trace_path.name}: mean rate "
                                          f"{schedule.mean_bps:g} bit/s is below the "
                                          f"dataplane's 1 kb/s")
                return None
        return CapacityConfig(table.kind, schedule, float(table.update_interval_s),
                              float(table.update_threshold), trace_path)

    def steps_ordered(self, loc: str, steps: list[sc.StepTable]) -> bool:
        """Whether the steps start at 0 and strictly increase; each fault reported
        at its location (StepSchedule would stop at the first)."""
        ok = True
        for i, step in enumerate(steps):
            if i == 0 and step.t_s != 0:
                self.error(f"{loc}[{i}].t_s", f"the first step must be at t_s = 0, "
                                              f"got {step.t_s:g}")
                ok = False
            if i and step.t_s <= steps[i - 1].t_s:
                self.error(f"{loc}[{i}].t_s", f"{step.t_s:g} is not after the previous "
                                              f"step's {steps[i - 1].t_s:g}")
                ok = False
        return ok

    # -- traffic -----------------------------------------------------------------------

    def reservations(self) -> None:
        for i, r in enumerate(self.t.reservations):
            loc = f"reservations[{i}]"
            src, dst = self.host(f"{loc}.src", r.src), self.host(f"{loc}.dst", r.dst)
            if src is not None and src == dst:
                self.error(loc, f"src and dst are both {src!r}")

    def flows(self) -> list[FlowConfig]:
        duration_s = self.t.experiment.duration_s
        names: dict[str, str] = {}
        out = []
        for i, f in enumerate(self.t.flows):
            loc = f"flows[{i}]"
            name = f.name or f"flow{i}"
            if name in names:
                self.error(f"{loc}.name", f"flow name {name!r} is already used by {names[name]}")
            names.setdefault(name, loc)
            src, dst = self.host(f"{loc}.src", f.src), self.host(f"{loc}.dst", f.dst)
            if src is not None and src == dst:
                self.error(loc, f"src and dst are both {src!r}")
            elif src is not None and dst is not None and self.edges \
                    and shortest_path(self.edges, src, dst, set(self.host_names)) is None:
                self.error(loc, f"no path from {src} to {dst} over the links")
            if f.start_s >= duration_s:
                self.error(f"{loc}.start_s", f"{f.start_s:g} s is not before the end of the "
                                             f"experiment ({duration_s:g} s)")
            if f.duration_s is not None and f.start_s + f.duration_s > duration_s + 1e-9:
                self.error(f"{loc}.duration_s", f"the flow would end at "
                                                f"{f.start_s + f.duration_s:g} s, after the "
                                                f"experiment ({duration_s:g} s)")
            if f.reserved_rate_mbit is not None and src is not None and dst is not None:
                self.flow_reservation(f"{loc}.reserved_rate_mbit", f)
            # a constant-rate flow is the cbr sender at its rate (docs/algorithms.md, "CBR")
            scheme, params = (CBR_ALGORITHM, {"rate_mbit": float(f.rate_mbit)}) \
                if f.kind == sc.FLOW_CBR and f.rate_mbit is not None else (f.scheme, dict(f.params))
            out.append(FlowConfig(name, f.src, f.dst, scheme, float(f.start_s), f.bytes,
                                  None if f.duration_s is None else float(f.duration_s),
                                  None if f.reserved_rate_mbit is None
                                  else float(f.reserved_rate_mbit),
                                  params,
                                  None if f.app_rate_mbit is None else float(f.app_rate_mbit),
                                  f.src_port))
        return out

    def flow_reservation(self, loc: str, f: sc.FlowTable) -> None:
        if f.scheme != UNDER_TEST and f.scheme not in RESERVED_RATE_ALGORITHMS:
            self.error(loc, f"scheme {f.scheme!r} takes no reserved rate (only: "
                            f"{', '.join(RESERVED_RATE_ALGORITHMS)}, or {UNDER_TEST!r})")
        elif not any(r.src == f.src and r.dst == f.dst for r in self.t.reservations):
            self.error(loc, f"no reservation from {f.src} to {f.dst} (add one under "
                            f"[[reservations]])")

    def capture(self, links: list[LinkConfig]) -> Optional[tuple[str, ...]]:
        names = self.t.capture.links
        if names is None:
            return None
        known = [link.name for link in links]
        for i, name in enumerate(names):
            if name not in known:
                self.error(f"capture.links[{i}]", f"unknown link {name!r} "
                                                  f"(links: {', '.join(known) or 'none'})")
        return tuple(dict.fromkeys(names))
