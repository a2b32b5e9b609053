"""The run folder, typed: every file a run leaves, where it is, and ``run.json``.

One definition for the writers (the runner, the controller, the agents it
starts, ``bwn run``, ``bwn reproduce``) and the readers (the report, the claims,
``bwn reproduce``, the fidelity checks, the benchmarks). Two levels
(docs/config.md, "The run directory"):

:class:`ExperimentDir` -- the folder of one ``bwn run`` (the report's RUN_DIR),
or of one seed of a ``bwn reproduce`` case::

    scenario.toml                  the scenario as run (bwn run, bwn net)
    summary.md, summary.csv, *.png the report's
    <scheme>/                      one RunDir per scheme

:class:`RunDir` -- one scheme's run (``bwn.emulation.runner.run_scheme``)::

    run.json                       RunMeta
    scenario.toml                  bwn reproduce: the scenario of this run alone
    flows/<flow>.jsonl             bwn-send --log (hosts/flowlog.py SENDER_FIELDS)
    flows/<flow>.summary.json      bwn-send --summary-json
    recv-<host>.summary.json       bwn-recv --summary-json (every flow the host received)
    send-<flow>.log, recv-<host>.log   the agents' output
    telemetry.csv, capacity.csv    the controller's (controller/switchctl.py)
    <node>-linkem.json, <node>-linkem.log  each bwn-link's statistics and output
    linkem-links.json, linkem.log  the one bwn-links's (``[experiment] linkem_shared``)
    capture/<link>.pcap            bwn run --pcap
    switch-logs/                   the switches' logs, kept when a run fails
    ready/                         the agents' ready files while they start

:class:`RunMeta` is ``run.json`` as a dataclass: :meth:`RunMeta.load` accepts a
file that lacks keys (older runs; a key added later gets its default), keeps the
keys it does not know (:attr:`RunMeta.extra`, written back as they were) and
raises :class:`RunMetaError`, naming the file and the key, for one it cannot
read (not JSON, not an object, a key of the wrong type).

This module imports nothing of bwn: every layer that reads or writes a run uses it.
"""
from __future__ import annotations

import json
import typing
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Iterator, Optional, Union

RUN_JSON = "run.json"
SCENARIO_TOML = "scenario.toml"
FLOWS_DIR = "flows"
TELEMETRY_CSV = "telemetry.csv"
CAPACITY_CSV = "capacity.csv"
SUMMARY_SUFFIX = ".summary.json"
FLOW_LOG_SUFFIX = ".jsonl"
LINKEM_STATS_SUFFIX = "-linkem.json"
SUMMARY_MD = "summary.md"
SUMMARY_CSV = "summary.csv"


class RunMetaError(ValueError):
    """A ``run.json`` that cannot be read: the message names the file and what is wrong."""


# ---------------------------------------------------------------------------------------
# run.json


@dataclass
class RunMeta:
    """``run.json``: what a run was, and what it measured besides its files.

    Every key may be absent from a file (older runs; a hand-made run folder): it
    then has the default below."""

    #: the scheme under test (``algo`` or ``algo:key=value;...``)
    scheme: Optional[str] = None
    #: how long the flows ran, s
    duration_s: Optional[float] = None
    #: every flow wrote its summary (a run that is not ok is not a result)
    ok: bool = False
    #: the scenario's ``[experiment] seed`` (docs/reproduce.md)
    seed: Optional[int] = None
    #: what emulated the links' delays: "none", "bwn-link" or "bwn-links"
    delay_emulator: Optional[str] = None
    #: bwn-link's SCHED_FIFO priority (None: no bwn-link)
    linkem_rt_priority: Optional[int] = None
    #: the controller's queue look-ahead (``[experiment] queue_lookahead``)
    queue_lookahead: Optional[bool] = None
    #: whether the kernel had ``netem`` (the runner uses bwn-link either way)
    netem_available: Optional[bool] = None
    #: flow name -> its flow id (the BWN and transport headers')
    flow_ids: dict[str, int] = field(default_factory=dict)
    #: flow name -> the rate-limited hops of its path, ``{"link", "from", "to"}``;
    #: None: not recorded (the report then takes every flow on the bottleneck)
    flow_links: Optional[dict[str, list[dict[str, str]]]] = None
    #: flow name -> the application's rate, payload bit/s (application-limited flows)
    flow_demand_bps: dict[str, float] = field(default_factory=dict)
    #: the agents' segment payload and DATA frame size, bytes (None: the report's defaults)
    mss_bytes: Optional[int] = None
    frame_bytes: Optional[int] = None
    #: wall-clock time minus the controller's clock, s (captures' timestamps)
    clock_offset_s: Optional[float] = None
    #: links whose bwn-link got its time-varying schedule started with the flows
    link_schedules_started: list[str] = field(default_factory=list)
    #: flow name -> its start on the controller's clock (telemetry.csv, capacity.csv), s
    flow_starts_s: dict[str, float] = field(default_factory=dict)
    #: sender -> its exit status (None: still running when recorded)
    sender_exit_codes: dict[str, Optional[int]] = field(default_factory=dict)
    #: flows whose sender wrote no summary
    flows_without_summary: list[str] = field(default_factory=list)
    #: receiving host -> bwn-recv's CPU time over the run, s
    receiver_cpu_s: dict[str, float] = field(default_factory=dict)
    #: link -> ``{"node", "interface", "file"}`` (file relative to the run), bwn run --pcap
    captures: dict[str, dict[str, Any]] = field(default_factory=dict)
    capture_snap_bytes: Optional[int] = None
    #: link -> tcpdump's packet counts
    capture_stats: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the report's bottleneck (a capacity.csv link) and its telemetry port
    #: ("switch:port"); None: the report picks the slowest link
    bottleneck_link: Optional[str] = None
    bottleneck_port: Optional[str] = None
    #: the fidelity verdict and what it was judged from (bwn/analysis/fidelity.py,
    #: docs/fidelity.md); None: not checked (runs from before the checks)
    fidelity: Optional[dict[str, Any]] = None
    #: keys this version does not know, kept as they were
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any, source: Union[str, Path] = RUN_JSON) -> "RunMeta":
        """The meta of a parsed ``run.json``; RunMetaError names ``source`` and the key."""
        if not isinstance(data, dict):
            raise RunMetaError(f"{source}: expected a JSON object, got {_kind(data)}")
        hints = _field_types()
        known: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in data.items():
            if key in hints and key != "extra":
                known[key] = _checked(value, hints[key], f"{source}: {key}")
            else:
                extra[key] = value
        return cls(**known, extra=extra)

    def to_json(self) -> dict[str, Any]:
        """The JSON object of ``run.json``: every field, then the unknown keys."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        out.update(self.extra)
        return out

    @classmethod
    def load(cls, path: Union[str, Path]) -> "RunMeta":
        """Read ``path`` (OSError if it cannot be read, RunMetaError if it is not a run.json)."""
        text = Path(path).read_text()
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise RunMetaError(f"{path}: not JSON: {exc.msg} (line {exc.lineno})") from None
        return cls.from_json(data, path)

    def save(self, path: Union[str, Path]) -> None:
        """Write ``path``: indented objects, each array of numbers on one line."""
        Path(path).write_text(dumps(self.to_json()) + "\n")

    @property
    def validity(self) -> tuple[Optional[bool], str]:
        """(valid, summary) of the fidelity verdict; (None, 'not checked') for runs
        made before the fidelity checks existed."""
        fid = self.fidelity
        if fid is None or "valid" not in fid:
            return None, "not checked"
        return bool(fid["valid"]), str(fid.get("summary", "valid" if fid["valid"] else "INVALID"))


_FIELD_TYPES: dict[str, Any] = {}


def _field_types() -> dict[str, Any]:
    """RunMeta's field name -> its type (the annotations, evaluated once)."""
    if not _FIELD_TYPES:
        _FIELD_TYPES.update(typing.get_type_hints(RunMeta))
    return _FIELD_TYPES


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"number {value!r}"
    if isinstance(value, str):
        return f"string {value!r}"
    if isinstance(value, list):
        return "an array"
    return "an object" if isinstance(value, dict) else type(value).__name__


def _checked(value: Any, hint: Any, where: str) -> Any:
    """``value`` if it has the declared type (ints stand for floats), else RunMetaError."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is Any:
        return value
    if origin is Union:
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _checked(value, inner, where)
    if origin is dict:
        if not isinstance(value, dict):
            raise RunMetaError(f"{where}: expected an object, got {_kind(value)}")
        return {k: _checked(v, args[1], f"{where}.{k}") for k, v in value.items()}
    if origin is list:
        if not isinstance(value, list):
            raise RunMetaError(f"{where}: expected an array, got {_kind(value)}")
        return [_checked(v, args[0], f"{where}[{i}]") for i, v in enumerate(value)]
    if hint is bool:
        if not isinstance(value, bool):
            raise RunMetaError(f"{where}: expected true or false, got {_kind(value)}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise RunMetaError(f"{where}: expected an integer, got {_kind(value)}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise RunMetaError(f"{where}: expected a number, got {_kind(value)}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise RunMetaError(f"{where}: expected a string, got {_kind(value)}")
        return value
    raise TypeError(f"RunMeta: no check for the type {hint!r} of {where}")   # a field added without one


def dumps(value: Any, level: int = 0) -> str:
    """JSON with objects and arrays of objects indented by two spaces, and every
    other array (of numbers, of pairs of numbers) on one line: run.json's
    fidelity record holds series of thousands of samples."""
    pad = "  " * (level + 1)
    if isinstance(value, dict) and value:
        items = [f"{pad}{json.dumps(_key(k))}: {dumps(v, level + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + "  " * level + "}"
    if isinstance(value, (list, tuple)) and any(isinstance(v, dict) and v for v in value):
        items = [f"{pad}{dumps(v, level + 1)}" for v in value]
        return "[\n" + ",\n".join(items) + "\n" + "  " * level + "]"
    return json.dumps(value)


def _key(key: Any) -> str:
    """An object key as ``json.dumps`` writes it (numbers, booleans and null as text)."""
    return key if isinstance(key, str) else json.dumps(key)


# ---------------------------------------------------------------------------------------
# The folders


@dataclass(frozen=True)
class RunDir:
    """One scheme's run folder; every path of the contract (see the module's
    docstring). Nothing is created or read until asked."""

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    def __fspath__(self) -> str:
        return str(self.path)

    @property
    def name(self) -> str:
        """The folder's name: the scheme, in a ``bwn run`` folder."""
        return self.path.name

    # -- files -------------------------------------------------------------------------
    @property
    def run_json(self) -> Path:
        return self.path / RUN_JSON

    @property
    def scenario_toml(self) -> Path:
        return self.path / SCENARIO_TOML

    @property
    def flows_dir(self) -> Path:
        return self.path / FLOWS_DIR

    @property
    def telemetry_csv(self) -> Path:
        return self.path / TELEMETRY_CSV

    @property
    def capacity_csv(self) -> Path:
        return self.path / CAPACITY_CSV

    @property
    def switch_logs(self) -> Path:
        return self.path / "switch-logs"

    @property
    def ready_dir(self) -> Path:
        return self.path / "ready"

    @property
    def capture_dir(self) -> Path:
        return self.path / "capture"

    @property
    def linkem_group_stats(self) -> Path:
        """The shared bwn-links's per-link statistics."""
        return self.path / "linkem-links.json"

    @property
    def linkem_group_log(self) -> Path:
        return self.path / "linkem.log"

    def flow_log(self, flow: str, suffix: str = FLOW_LOG_SUFFIX) -> Path:
        return self.flows_dir / f"{flow}{suffix}"

    def flow_summary(self, flow: str) -> Path:
        return self.flows_dir / f"{flow}{SUMMARY_SUFFIX}"

    def sender_log(self, flow: str) -> Path:
        return self.path / f"send-{flow}.log"

    def receiver_log(self, host: str) -> Path:
        return self.path / f"recv-{host}.log"

    def receiver_summary(self, host: str) -> Path:
        return self.path / f"recv-{host}{SUMMARY_SUFFIX}"

    def linkem_stats(self, node: str) -> Path:
        return self.path / f"{node}{LINKEM_STATS_SUFFIX}"

    def linkem_log(self, node: str) -> Path:
        return self.path / f"{node}-linkem.log"

    def capture_file(self, link: str) -> Path:
        """``capture/<link>.pcap``, the link's name made a safe file name."""
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in link)
        return self.capture_dir / f"{safe}.pcap"

    # -- what is there -----------------------------------------------------------------
    def flow_summaries(self) -> list[Path]:
        return sorted(self.flows_dir.glob(f"*{SUMMARY_SUFFIX}"))

    def receiver_summaries(self) -> list[Path]:
        return sorted(self.path.glob(f"recv-*{SUMMARY_SUFFIX}"))

    def linkem_stats_files(self) -> dict[str, Path]:
        """bwn-link node -> its statistics file, for every one here."""
        return {p.name.removesuffix(LINKEM_STATS_SUFFIX): p
                for p in sorted(self.path.glob(f"*{LINKEM_STATS_SUFFIX}"))}

    def holds_run(self) -> bool:
        """Whether this is a run's folder (flows/, telemetry.csv or capacity.csv is here)."""
        return any(p.exists() for p in (self.flows_dir, self.telemetry_csv, self.capacity_csv))

    # -- run.json ----------------------------------------------------------------------
    def has_meta(self) -> bool:
        return self.run_json.exists()

    def meta(self) -> RunMeta:
        """``run.json`` (every default when there is none); RunMetaError if malformed."""
        if not self.run_json.exists():
            return RunMeta()
        return RunMeta.load(self.run_json)

    def write_meta(self, meta: RunMeta) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        meta.save(self.run_json)


@dataclass(frozen=True)
class ExperimentDir:
    """The folder of one ``bwn run`` (one scenario, a RunDir per scheme) or of one
    seed of a ``bwn reproduce`` case; the report writes its summary here."""

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    def __fspath__(self) -> str:
        return str(self.path)

    @property
    def scenario_toml(self) -> Path:
        return self.path / SCENARIO_TOML

    @property
    def summary_md(self) -> Path:
        return self.path / SUMMARY_MD

    @property
    def summary_csv(self) -> Path:
        return self.path / SUMMARY_CSV

    def run(self, scheme: str) -> RunDir:
        return RunDir(self.path / scheme)

    def runs(self) -> Iterator[RunDir]:
        """Every scheme's run folder here, by name."""
        for sub in sorted(p for p in self.path.iterdir() if p.is_dir()):
            run = RunDir(sub)
            if run.holds_run():
                yield run
