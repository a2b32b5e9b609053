"""A run folder's outputs, loaded: each scheme run's flows, telemetry and capacity.

Per scheme run (docs/config.md, "The run directory and the report"): the sender
logs (``bwn-send --log``, CSV or JSON lines, hosts/flowlog.py) and summaries
(``bwn-send --summary-json``), one pair per flow; the switches' telemetry
(``telemetry.csv``: t_s, switch, port, capacity_kbps, rate_kbps, avail_kbps,
queue_pkts, flows); the capacity the controller applied (``capacity.csv``: t_s,
link, rate_bps); and run.json's facts (bwn/rundir.py). This module is the one
place that names the sender's columns and summary keys.
"""
from __future__ import annotations

import csv
import json
try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser, as a package
    import tomli as tomllib  # type: ignore[no-redef]
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

from bwn.rundir import SUMMARY_SUFFIX, ExperimentDir, RunDir, RunMeta, RunMetaError


LOG_COLUMNS: dict[str, str] = {
    "t_s": "time_s",                       # seconds since the flow started
    "flow_id": "flow_id",
    "algo": "algo",
    "cwnd": "cwnd",                        # segments
    "ssthresh": "ssthresh",
    "pacing_rate_bps": "pacing_rate_bps",
    "rtt_us": "rtt_sample_us",
    "srtt_us": "srtt_us",
    "bytes_in_flight": "bytes_in_flight",
    "delivered_bytes": "delivered_bytes",
    "retransmissions": "retransmits",
    "estimate_bps": "estimate_bps",        # the sender's own estimate (westwood, dft, sarbe, ...)
    "fb_ebn_code": "echo_ebn_code",
    "fb_narrow_kbps": "echo_narrow_kbps",
    "fb_tight_kbps": "echo_tight_kbps",
    "fb_hop_count": "echo_hop_count",
}


SUMMARY_KEYS: dict[str, str] = {
    "flow_id": "flow_id",
    "algo": "algo",
    "goodput_bps": "goodput_bps",
    "bytes": "bytes",
    "duration_s": "duration_s",
    "retransmissions": "retransmits",
    "timeouts": "timeouts",
    "rtt_p50_ms": "rtt_p50_ms",
    "rtt_p95_ms": "rtt_p95_ms",
    "rtt_p99_ms": "rtt_p99_ms",
    "rtt_mean_ms": "rtt_mean_ms",
    "start_s": "start_s",                  # experiment time the flow started (if the runner adds it)
    "status": "status",                    # complete, interrupted, failed: <why>, incomplete
}


#: Algorithm -> which logged value is the bandwidth estimate it acts on.
ESTIMATE_SOURCES: dict[str, str] = {
    "ebn": "fb_ebn_code",      # switch-stamped per-flow share, decoded with ebn_decode_kbps
    "obp": "fb_tight_kbps",    # switch-stamped tight link (available bandwidth)
    "westwood": "estimate_bps",
    "dft": "estimate_bps",
    "sarbe": "estimate_bps",
}


SUMMARY_COLUMNS: tuple[str, ...] = (
    "scheme", "flow", "algo", "start_s", "duration_s", "bytes", "goodput_bps",
    "capacity_bps", "utilization", "retransmissions", "timeouts", "rtt_mean_ms",
    "rtt_p50_ms", "rtt_p95_ms", "rtt_p99_ms", "jain", "estimate_error_share",
    "estimate_error_rate", "estimate_samples", "valid", "fidelity",
)


TELEMETRY_COLUMNS = ("t_s", "switch", "port", "capacity_kbps", "rate_kbps", "avail_kbps",
                     "queue_pkts", "flows")


CAPACITY_COLUMNS = ("t_s", "link", "rate_bps")


LOG_SUFFIXES = (".jsonl", ".ndjson", ".csv")


AGGREGATE_FLOW = "all"


DEFAULT_BIN_S = 0.5


TIGHT_UNSET_KBPS = 0x7FFFFFFF


NARROW_UNSET_KBPS = 0xFFFFFFFF


# The runner's agents (bwn/emulation/runner.py AGENT_MSS_BYTES, and 102 bytes of Ethernet,
# IPv4, UDP, BWN and transport headers); run.json states them for each run.
DEFAULT_MSS_BYTES = 1000


DEFAULT_FRAME_BYTES = 1102


class ReportError(ValueError):
    """Input files the report cannot use; the message names the file."""


@dataclass
class FlowLog:
    """One flow: its log rows and summary, both keyed by the report's names."""

    name: str
    samples: list[dict[str, Any]] = field(default_factory=list)   # t_s relative to start_s
    summary: dict[str, Any] = field(default_factory=dict)
    start_s: float = 0.0            # experiment time at which the flow's t_s is 0
    algo: Optional[str] = None

    @property
    def duration_s(self) -> float:
        value = self.summary.get("duration_s")
        if value is not None:
            return float(value)
        times = [s["t_s"] for s in self.samples if s.get("t_s") is not None]
        return max(times) if times else 0.0

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s

    @property
    def bytes(self) -> float:
        value = self.summary.get("bytes")
        if value is not None:
            return float(value)
        delivered = [s["delivered_bytes"] for s in self.samples
                     if s.get("delivered_bytes") is not None]
        return max(delivered) if delivered else 0.0

    @property
    def goodput_bps(self) -> Optional[float]:
        value = self.summary.get("goodput_bps")
        if value is not None:
            return float(value)
        return self.bytes * 8 / self.duration_s if self.duration_s > 0 else None

    def active(self, t_s: float) -> bool:
        return self.start_s <= t_s < self.end_s


@dataclass(frozen=True)
class TelemetrySample:
    t_s: float
    switch: str
    port: int
    capacity_kbps: Optional[float]
    rate_kbps: Optional[float]
    avail_kbps: Optional[float]
    queue_pkts: Optional[float]
    flows: Optional[float]

    @property
    def key(self) -> str:
        return f"{self.switch}:{self.port}"


@dataclass(frozen=True)
class CapacitySample:
    t_s: float
    link: str
    rate_bps: float


@dataclass
class SchemeRun:
    """Everything one scheme's run produced."""

    scheme: str
    flows: list[FlowLog]
    telemetry: list[TelemetrySample] = field(default_factory=list)
    capacity: list[CapacitySample] = field(default_factory=list)
    bottleneck_link: Optional[str] = None   # a capacity.csv link; None: the slowest
    bottleneck_port: Optional[str] = None   # "switch:port" of its telemetry, if known
    # run.json: flow -> the rate-limited (link, from, to) hops of its path; None: not
    # recorded (then every flow is taken to cross the bottleneck in one direction).
    flow_links: Optional[dict[str, list[tuple[str, str, str]]]] = None
    flow_demand_bps: dict[str, float] = field(default_factory=dict)   # payload, app-limited flows
    mss_bytes: int = DEFAULT_MSS_BYTES
    frame_bytes: int = DEFAULT_FRAME_BYTES
    captures: dict[str, str] = field(default_factory=dict)   # link -> pcap file (bwn run --pcap)
    flow_ids: dict[str, int] = field(default_factory=dict)   # flow name -> transport flow id
    clock_offset_s: Optional[float] = None   # capture time (epoch) - experiment time
    # run.json's fidelity verdict (bwn/analysis/fidelity.py): (True/False/None, summary)
    validity: tuple[Optional[bool], str] = (None, "not checked")
    # run.json's fidelity record (its "measurements": ports, queues, port_drops); {} if none
    fidelity: dict[str, Any] = field(default_factory=dict)
    # From the scenario as run (scenario.toml, :func:`scenario_facts`): flow -> the bytes it
    # was to send (flows with ``bytes``; the others ran for a time), and flow -> its path's
    # round-trip propagation delay, s. Empty without a scenario file.
    flow_sizes: dict[str, int] = field(default_factory=dict)
    flow_base_rtt_s: dict[str, float] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """The scheme's name, marked when the run broke a fidelity invariant."""
        return f"{self.scheme} [INVALID]" if self.validity[0] is False else self.scheme

    @property
    def payload_per_frame(self) -> float:
        return self.mss_bytes / self.frame_bytes


def _value(text: Any) -> Any:
    """A CSV/JSON cell -> None, float or the text itself."""
    if text is None or text == "":
        return None
    if isinstance(text, bool):
        return float(text)
    if isinstance(text, (int, float)):
        return float(text)
    if isinstance(text, str):
        try:
            return float(text)
        except ValueError:
            return text
    return text


def _rename(row: Mapping[str, Any], mapping: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for ours, theirs in mapping.items():
        if theirs in row:
            out[ours] = row[theirs]
        elif ours in row:
            out[ours] = row[ours]
    return out


def _read_rows(path: Path) -> list[dict[str, Any]]:
    """Rows of a CSV (header line) or JSON-lines file, as dicts of raw values."""
    try:
        if path.suffix == ".csv":
            with path.open(newline="") as fh:
                return list(csv.DictReader(fh))
        rows = []
        with path.open() as fh:
            for line_no, line in enumerate(fh, start=1):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError as exc:
                        raise ReportError(f"{path}:{line_no}: not JSON: {exc.msg}") from None
        return rows
    except OSError as exc:
        raise ReportError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _text(value: Any) -> Optional[str]:
    if value is None or value == "":
        return None
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def read_flow_log(path: Path) -> dict[str, list[dict[str, Any]]]:
    """A sender log -> its rows keyed by the report's names, grouped by flow id."""
    flows: dict[str, list[dict[str, Any]]] = {}
    for raw in _read_rows(path):
        row = {k: (v if k == "algo" else _value(v)) for k, v in _rename(raw, LOG_COLUMNS).items()}
        if row.get("t_s") is None:
            raise ReportError(f"{path}: a row has no {LOG_COLUMNS['t_s']!r} column")
        flow_id = _text(row.get("flow_id")) or ""
        flows.setdefault(flow_id, []).append(row)
    for rows in flows.values():
        rows.sort(key=lambda r: r["t_s"])
    return flows


def read_summary(path: Path) -> list[dict[str, Any]]:
    """A ``--summary-json`` file (one flow, a list of flows, or {"flows": [...]})."""
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise ReportError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise ReportError(f"{path}: not JSON: {exc.msg} (line {exc.lineno})") from None
    items = data.get("flows", [data]) if isinstance(data, dict) else data
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise ReportError(f"{path}: expected a JSON object per flow")
    return [{k: (v if k == "algo" else _value(v)) for k, v in _rename(i, SUMMARY_KEYS).items()}
            for i in items]


def read_telemetry(path: Path) -> list[TelemetrySample]:
    out = []
    for line_no, raw in enumerate(_read_rows(path), start=2):
        missing = [c for c in ("t_s", "switch", "port") if raw.get(c) in (None, "")]
        if missing:
            raise ReportError(f"{path}:{line_no}: no value in column(s) {', '.join(missing)}")
        values = {c: _value(raw.get(c)) for c in TELEMETRY_COLUMNS[3:]}
        out.append(TelemetrySample(float(raw["t_s"]), str(raw["switch"]), int(float(raw["port"])),
                                   **values))
    return out


def read_capacity(path: Path) -> list[CapacitySample]:
    out = []
    for line_no, raw in enumerate(_read_rows(path), start=2):
        try:
            out.append(CapacitySample(float(raw["t_s"]), str(raw["link"]), float(raw["rate_bps"])))
        except (KeyError, TypeError, ValueError):
            raise ReportError(f"{path}:{line_no}: expected columns "
                              f"{', '.join(CAPACITY_COLUMNS)} with numbers, got {raw}") from None
    return out


def _flow_name(stem: str, flow_id: str, n_ids: int) -> str:
    return stem if n_ids <= 1 or not flow_id else f"{stem}#{flow_id}"


def load_scheme_run(scheme_dir: Path, scheme: Optional[str] = None) -> SchemeRun:
    """Read RUN_DIR/<scheme>/ (layout in docs/config.md, bwn/rundir.py). A flow's
    start time is run.json's ``flow_starts_s[name]``, else its summary's
    ``start_s``, else 0."""
    run_dir = RunDir(scheme_dir)
    try:
        meta = run_dir.meta()
    except RunMetaError as exc:
        raise ReportError(str(exc)) from None
    starts = dict(meta.flow_starts_s)
    flows_dir = run_dir.flows_dir
    flows: list[FlowLog] = []
    if flows_dir.is_dir():
        stems = sorted({_stem(p) for p in flows_dir.iterdir() if _stem(p) is not None})
        for stem in stems:
            flows.extend(_load_flow(flows_dir, stem, starts))
    telemetry = read_telemetry(run_dir.telemetry_csv) if run_dir.telemetry_csv.exists() else []
    capacity = read_capacity(run_dir.capacity_csv) if run_dir.capacity_csv.exists() else []
    run = SchemeRun(scheme or run_dir.name, flows, telemetry, capacity,
                    meta.bottleneck_link, meta.bottleneck_port)
    _apply_meta(run, meta, run_dir.run_json)
    run.validity = meta.validity
    run.fidelity = dict(meta.fidelity or {})
    scenario = run_dir.scenario_toml
    if not scenario.exists():                 # bwn run: one copy for every scheme, beside them
        scenario = run_dir.path.parent / scenario.name
    if scenario.exists():
        run.flow_sizes, run.flow_base_rtt_s = scenario_facts(scenario)
    return run


def scenario_facts(path: Path) -> tuple[dict[str, int], dict[str, float]]:
    """From a scenario file: flow -> its ``bytes`` (the flows that have one), and flow ->
    twice the sum of the one-way ``delay_ms`` of the links on its path, s (the
    propagation round trip, without serialization or queueing). A file the scenario
    loader refuses (a trace it cannot find, say) still gives the sizes, read as plain
    TOML, and no round trips."""
    from bwn.scenario.config import ConfigError, load_config    # not needed by reports without one
    from bwn.scenario.flowpaths import hops
    try:
        cfg = load_config(path)
    except (ConfigError, OSError, ValueError):
        try:
            data = tomllib.loads(path.read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ReportError(f"{path}: cannot read the scenario: {exc}") from None
        flows = [f for f in data.get("flows", []) if isinstance(f, dict)]
        return ({str(f.get("name", f"flow{i}")): int(f["bytes"]) for i, f in enumerate(flows)
                 if isinstance(f.get("bytes"), int)}, {})
    delays = {link.name: link.delay_ms for link in cfg.links}
    sizes = {f.name: int(f.bytes) for f in cfg.flows if f.bytes is not None}
    rtts = {f.name: 2 * sum(delays[h.link] for h in hops(cfg, f.src, f.dst)) / 1e3 for f in cfg.flows}
    return sizes, rtts


def _apply_meta(run: SchemeRun, meta: RunMeta, path: Path) -> None:
    """run.json's topology and capture facts (docs/config.md, "The run directory")."""
    try:
        if meta.flow_links is not None:
            run.flow_links = {name: [(h["link"], h["from"], h["to"]) for h in hops]
                              for name, hops in meta.flow_links.items()}
        run.flow_demand_bps = dict(meta.flow_demand_bps)
        run.mss_bytes = meta.mss_bytes if meta.mss_bytes is not None else DEFAULT_MSS_BYTES
        run.frame_bytes = meta.frame_bytes if meta.frame_bytes is not None else DEFAULT_FRAME_BYTES
        run.captures = {str(link): str(path.parent / c["file"])
                        for link, c in meta.captures.items()}
        run.flow_ids = dict(meta.flow_ids)
        if meta.clock_offset_s is not None:
            run.clock_offset_s = meta.clock_offset_s
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ReportError(f"{path}: unexpected flow_links, flow_demand_bps, mss_bytes, "
                          f"frame_bytes, captures, flow_ids or clock_offset_s: {exc!r}") from None
    if not 0 < run.mss_bytes <= run.frame_bytes:
        raise ReportError(f"{path}: mss_bytes {run.mss_bytes} must be in (0, frame_bytes "
                          f"{run.frame_bytes}]")


def _stem(path: Path) -> Optional[str]:
    name = path.name
    for suffix in (SUMMARY_SUFFIX,) + LOG_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return None


def _load_flow(flows_dir: Path, stem: str, starts: Mapping[str, float]) -> list[FlowLog]:
    logs: dict[str, list[dict[str, Any]]] = {}
    for suffix in LOG_SUFFIXES:
        if (flows_dir / f"{stem}{suffix}").exists():
            logs = read_flow_log(flows_dir / f"{stem}{suffix}")
            break
    summaries = read_summary(flows_dir / f"{stem}{SUMMARY_SUFFIX}") \
        if (flows_dir / f"{stem}{SUMMARY_SUFFIX}").exists() else []
    by_id = {(_text(s.get("flow_id")) or ""): s for s in summaries}
    if len(logs) == 1 and len(summaries) == 1:      # one flow per file: pair them whatever the ids
        by_id = {next(iter(logs)): summaries[0]}
    ids = list(logs) + [i for i in by_id if i not in logs]
    out = []
    for flow_id in ids:
        name = _flow_name(stem, flow_id, len(ids))
        samples = logs.get(flow_id, [])
        summary = by_id.get(flow_id, {})
        algo = summary.get("algo") or next((s["algo"] for s in samples if s.get("algo")), None)
        start_s = starts.get(name)
        if start_s is None:
            start_s = summary.get("start_s")
        if start_s is None:
            start_s = 0.0
        out.append(FlowLog(name, samples, summary, float(start_s), algo))
    return out


def load_run_dir(run_dir: Path) -> list[SchemeRun]:
    """Every RUN_DIR/<scheme>/ that holds flows/, telemetry.csv or capacity.csv."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ReportError(f"{run_dir}: not a directory")
    runs = [load_scheme_run(run.path) for run in ExperimentDir(run_dir).runs()]
    if not runs:
        raise ReportError(f"{run_dir}: no scheme directory (expected RUN_DIR/<scheme>/flows/...)")
    return runs
