"""One experiment's outputs -> its results: summary.md, summary.csv and plots.

Inputs, per scheme run (docs/config.md, "The run directory and the report"):

* the sender logs (``bwn-send --log``, CSV or JSON lines, hosts/flowlog.py) and
  summaries (``bwn-send --summary-json``), one pair per flow;
* the switches' telemetry (``telemetry.csv``: t_s, switch, port, capacity_kbps,
  rate_kbps, avail_kbps, queue_pkts, flows);
* the capacity the controller applied (``capacity.csv``: t_s, link, rate_bps).

``write_report(run_dir, runs)`` writes ``summary.md``, ``summary.csv`` and PNGs;
``python -m bwn.analysis.report RUN_DIR`` rebuilds them from the files in RUN_DIR.

Definitions (also in summary.md):

* **utilization** of a flow: its goodput / the mean capacity the bottleneck link
  offered during the flow's lifetime (the integral of the *applied* rate); of the
  row ``all``: every flow's bytes / the integral over the union of lifetimes.
* **jain**: Jain's index ``(sum x)^2 / (n sum x^2)`` of the flows' goodputs in one
  scheme run; blank for a single flow.
* **estimate_error_share** and **estimate_error_rate**: how far the bandwidth
  estimate the scheme acted on (:data:`ESTIMATE_SOURCES`) is, on average over the
  flow's log rows, from two references, as ``|estimate - reference| / reference``:
  the flow's **max-min fair share** of the links it crosses at the row's time
  (:func:`fair_share_bps`: only the flows active then on the same link *in the same
  direction* share a link, run.json's ``flow_links``), and the flow's **own rate**
  (its acknowledged payload over the last ``bin_s``). All in **payload** bit/s: the
  switch-stamped values (EBN code, OBP tight link) and the capacities count whole
  frames and are scaled by ``mss / frame`` (1000 / 1102 bytes for the runner's
  agents); the sender-side estimates (Westwood, DFT, SARBE) count acknowledged
  payload already. OBP's estimate is ``tight + own`` (the tight link counts the
  flow's own traffic as used).
"""
from __future__ import annotations

import argparse
import bisect
import csv
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

from bwn.analysis.fairshare import max_min_shares
from bwn.protocol.wire import ebn_decode_kbps
from bwn.rundir import SUMMARY_SUFFIX, ExperimentDir, RunDir, RunMeta, RunMetaError

# ---------------------------------------------------------------------------------------
# The ONE place that names the sender's columns (hosts/flowlog.py SENDER_FIELDS) and
# summary keys (hosts/transport/sender.py Sender.summary, hosts/send.py). The report's
# own name is on the left. A file that uses the report's own names also reads.

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


# ---------------------------------------------------------------------------------------
# Data


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

    @property
    def label(self) -> str:
        """The scheme's name, marked when the run broke a fidelity invariant."""
        return f"{self.scheme} [INVALID]" if self.validity[0] is False else self.scheme

    @property
    def payload_per_frame(self) -> float:
        return self.mss_bytes / self.frame_bytes


class RateCurve:
    """A piecewise-constant rate (bit/s) from (t_s, rate) points; the first rate also
    holds before the first point."""

    def __init__(self, points: Iterable[tuple[float, float]]) -> None:
        merged: dict[float, float] = {}
        for t_s, rate in sorted(points, key=lambda p: p[0]):
            merged[t_s] = rate                       # the last of equal times wins
        if not merged:
            raise ReportError("a capacity curve needs at least one point")
        self.times_s = list(merged)
        self.rates_bps = list(merged.values())

    def rate_bps(self, t_s: float) -> float:
        index = bisect.bisect_right(self.times_s, t_s) - 1
        return self.rates_bps[max(index, 0)]

    def integral_bits(self, t0_s: float, t1_s: float) -> float:
        if t1_s <= t0_s:
            return 0.0
        bounds = self.times_s[1:] + [math.inf]
        starts = [-math.inf] + self.times_s[1:]
        total = 0.0
        for start_s, end_s, rate in zip(starts, bounds, self.rates_bps):
            overlap_s = min(end_s, t1_s) - max(start_s, t0_s)
            if overlap_s > 0:
                total += rate * overlap_s
        return total

    def mean_rate_bps(self, t0_s: float, t1_s: float) -> float:
        if t1_s <= t0_s:
            return self.rate_bps(t0_s)
        return self.integral_bits(t0_s, t1_s) / (t1_s - t0_s)

    def steps(self, t_end_s: float) -> tuple[list[float], list[float]]:
        """x, y for a step plot up to ``t_end_s``."""
        xs = [min(self.times_s[0], 0.0)] + self.times_s[1:] + [t_end_s]
        ys = self.rates_bps + [self.rates_bps[-1]]
        return xs, ys


# ---------------------------------------------------------------------------------------
# Reading files


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
    return run


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


# ---------------------------------------------------------------------------------------
# Metrics


def jain_index(values: Sequence[float]) -> Optional[float]:
    """Jain's fairness index (sum x)^2 / (n * sum x^2); None for fewer than 2 values."""
    if len(values) < 2:
        return None
    squares = sum(v * v for v in values)
    if squares == 0:
        return None
    return sum(values) ** 2 / (len(values) * squares)


def capacity_curves(run: SchemeRun) -> dict[str, RateCurve]:
    """Link -> applied capacity: capacity.csv, else the telemetry's capacity per
    ``switch:port``."""
    points: dict[str, list[tuple[float, float]]] = {}
    if run.capacity:
        for c in run.capacity:
            points.setdefault(c.link, []).append((c.t_s, c.rate_bps))
    else:
        for s in run.telemetry:
            if s.capacity_kbps is not None and s.capacity_kbps > 0:
                points.setdefault(s.key, []).append((s.t_s, s.capacity_kbps * 1000))
    return {link: RateCurve(p) for link, p in points.items()}


def run_span_s(run: SchemeRun) -> tuple[float, float]:
    starts = [f.start_s for f in run.flows]
    ends = [f.end_s for f in run.flows]
    return (min(starts), max(ends)) if starts else (0.0, 0.0)


def bottleneck(run: SchemeRun) -> tuple[Optional[str], Optional[RateCurve]]:
    """The bottleneck's name and capacity: ``run.bottleneck_link`` if set, else the
    link with the smallest mean applied capacity over the run."""
    curves = capacity_curves(run)
    if not curves:
        return None, None
    if run.bottleneck_link is not None:
        if run.bottleneck_link not in curves:
            raise ReportError(f"{run.scheme}: bottleneck link {run.bottleneck_link!r} has no "
                              f"capacity samples (links: {', '.join(sorted(curves))})")
        return run.bottleneck_link, curves[run.bottleneck_link]
    t0_s, t1_s = run_span_s(run)
    if t1_s <= t0_s:
        t1_s = t0_s + 1.0
    name = min(curves, key=lambda link: curves[link].mean_rate_bps(t0_s, t1_s))
    return name, curves[name]


def _interp(times: Sequence[float], values: Sequence[float], t_s: float) -> float:
    if not times or t_s <= times[0]:
        return 0.0 if not times or t_s < times[0] else values[0]
    if t_s >= times[-1]:
        return values[-1]
    i = bisect.bisect_right(times, t_s)
    t0, t1 = times[i - 1], times[i]
    return values[i - 1] + (values[i] - values[i - 1]) * (t_s - t0) / (t1 - t0)


class _Delivered:
    """delivered_at() with the lists built once."""

    def __init__(self, flow: FlowLog) -> None:
        rows = [s for s in flow.samples if s.get("delivered_bytes") is not None]
        self.times = [flow.start_s + s["t_s"] for s in rows]
        self.values = [s["delivered_bytes"] for s in rows]

    def rate_bps(self, t_s: float, window_s: float) -> float:
        """Mean throughput over ``(t_s - window_s, t_s]``."""
        delta = _interp(self.times, self.values, t_s) - _interp(self.times, self.values,
                                                                t_s - window_s)
        return max(delta, 0.0) * 8 / window_s


def throughput_series(flow: FlowLog, bin_s: float) -> tuple[list[float], list[float]]:
    """(bin centres in experiment time, throughput bit/s) over the flow's log."""
    delivered = _Delivered(flow)
    if len(delivered.times) < 2:
        return [], []
    t_s, end_s = delivered.times[0], delivered.times[-1]
    xs, ys = [], []
    while t_s < end_s - 1e-9:
        t_next = min(t_s + bin_s, end_s)
        xs.append((t_s + t_next) / 2)
        ys.append(delivered.rate_bps(t_next, t_next - t_s))
        t_s = t_next
    return xs, ys


def active_flows(run: SchemeRun, t_s: float) -> int:
    return sum(1 for f in run.flows if f.active(t_s))


def estimate_source(flow: FlowLog, run: SchemeRun) -> Optional[str]:
    return ESTIMATE_SOURCES.get(flow.algo or run.scheme)


def estimate_bps(run: SchemeRun, sample: Mapping[str, Any], source: str,
                 own_bps: float) -> Optional[float]:
    """The estimate the flow acted on at this log row, in payload bit/s (None if none).

    Switch-stamped values count frames: scaled by ``run.payload_per_frame``."""
    if source == "estimate_bps":
        value = sample.get("estimate_bps")
        return None if value is None or value <= 0 else float(value)
    if sample.get("fb_hop_count") is not None and sample["fb_hop_count"] == 0:
        return None                                   # no BWN switch on the path
    if source == "fb_ebn_code":
        code = sample.get("fb_ebn_code")
        kbps = None if code is None else ebn_decode_kbps(int(code))    # None for the unset code
        return None if kbps is None else kbps * 1000 * run.payload_per_frame
    if source == "fb_tight_kbps":
        tight = sample.get("fb_tight_kbps")
        if tight is None or tight >= TIGHT_UNSET_KBPS:
            return None
        return tight * 1000 * run.payload_per_frame + own_bps
    raise ReportError(f"unknown estimate source {source!r}")


BOTTLENECK_RESOURCE = "(bottleneck)"


class FairShares:
    """Each flow's max-min fair share (payload bit/s) of the links it crosses, at a
    time: the flows active then share each link in each direction (bwn.analysis.fairshare).

    The links and directions come from run.json's ``flow_links``; a run without them
    (older runs, hand-made directories) is taken as every flow crossing the
    bottleneck in one direction, i.e. ``C(t) / N(t)``."""

    def __init__(self, run: SchemeRun) -> None:
        self.run = run
        self.curves = capacity_curves(run)
        self.bottleneck_name, self.bottleneck_curve = bottleneck(run)
        self._cache: dict[tuple[float, tuple[str, ...]], dict[Any, float]] = {}

    def resources(self, flow: FlowLog) -> list[str]:
        links = self.run.flow_links
        if links is None:
            return [BOTTLENECK_RESOURCE] if self.bottleneck_curve is not None else []
        hops = links.get(flow.name.split("#")[0], [])
        return [f"{link}:{a}>{b}" for link, a, b in hops if link in self.curves]

    def _capacity_bps(self, resource: str, t_s: float) -> float:
        curve = self.bottleneck_curve if resource == BOTTLENECK_RESOURCE             else self.curves[resource.split(":", 1)[0]]
        assert curve is not None
        return curve.rate_bps(t_s) * self.run.payload_per_frame

    def share_bps(self, flow: FlowLog, t_s: float) -> Optional[float]:
        """``flow``'s fair share at ``t_s``; None when no known link limits it."""
        # A flow's last log row is at its end time: [start, end], both ends included.
        active = tuple(f.name for f in self.run.flows
                       if f is flow or f.start_s <= t_s <= f.end_s)
        key = (t_s, active)
        if key not in self._cache:
            flows = {f.name: self.resources(f) for f in self.run.flows if f.name in active}
            capacity = {r: self._capacity_bps(r, t_s) for rs in flows.values() for r in rs}
            demand = {name: d for name, d in self.run.flow_demand_bps.items() if name in flows}
            self._cache = {key: max_min_shares(capacity, flows, demand)}   # one time at a time
        share = self._cache[key].get(flow.name)
        return share if share is not None and math.isfinite(share) else None


@dataclass(frozen=True)
class EstimateError:
    vs_share: Optional[float]      # mean |est - fair share| / fair share
    vs_rate: Optional[float]       # mean |est - own rate| / own rate
    samples: int                   # log rows with an estimate and a fair share


def estimate_error(run: SchemeRun, flow: FlowLog, shares: Optional[FairShares] = None,
                   window_s: float = DEFAULT_BIN_S) -> EstimateError:
    """The flow's estimate error against its fair share and against its own rate."""
    source = estimate_source(flow, run)
    if source is None:
        return EstimateError(None, None, 0)
    shares = shares or FairShares(run)
    own = _Delivered(flow)
    vs_share, vs_rate = [], []
    for sample in flow.samples:
        t_s = flow.start_s + sample["t_s"]
        # The own rate over the last window_s, or since the flow started if shorter.
        own_window_s = min(window_s, sample["t_s"])
        own_bps = own.rate_bps(t_s, own_window_s) if own_window_s > 0 else 0.0
        est = estimate_bps(run, sample, source, own_bps)
        if est is None:
            continue
        share = shares.share_bps(flow, t_s)
        if share is not None and share > 0:
            vs_share.append(abs(est - share) / share)
        if own_bps > 0:
            vs_rate.append(abs(est - own_bps) / own_bps)
    return EstimateError(sum(vs_share) / len(vs_share) if vs_share else None,
                         sum(vs_rate) / len(vs_rate) if vs_rate else None, len(vs_share))


def summarize(run: SchemeRun, window_s: float = DEFAULT_BIN_S) -> list[dict[str, Any]]:
    """Rows of summary.csv for one scheme run: one per flow, then ``all``."""
    _, capacity = bottleneck(run)
    shares = FairShares(run)
    goodputs = [f.goodput_bps for f in run.flows if f.goodput_bps is not None]
    jain = jain_index(goodputs)
    rows = []
    valid, fidelity = run.validity
    for flow in run.flows:
        capacity_bps = capacity.mean_rate_bps(flow.start_s, flow.end_s) if capacity else None
        goodput = flow.goodput_bps
        err = estimate_error(run, flow, shares, window_s)
        rows.append({
            "scheme": run.scheme, "flow": flow.name, "algo": flow.algo,
            "start_s": flow.start_s, "duration_s": flow.duration_s, "bytes": flow.bytes,
            "goodput_bps": goodput, "capacity_bps": capacity_bps,
            "utilization": _ratio(goodput, capacity_bps),
            "retransmissions": _last(flow, "retransmissions"),
            "timeouts": flow.summary.get("timeouts"),
            "rtt_mean_ms": flow.summary.get("rtt_mean_ms"),
            "rtt_p50_ms": flow.summary.get("rtt_p50_ms"),
            "rtt_p95_ms": flow.summary.get("rtt_p95_ms"),
            "rtt_p99_ms": flow.summary.get("rtt_p99_ms"),
            "jain": jain, "estimate_error_share": err.vs_share,
            "estimate_error_rate": err.vs_rate, "estimate_samples": err.samples,
            "valid": None if valid is None else int(valid), "fidelity": fidelity,
        })
    if len(run.flows) > 1:
        t0_s, t1_s = run_span_s(run)
        total_bits = sum(f.bytes for f in run.flows) * 8
        span_s = t1_s - t0_s
        offered_bits = capacity.integral_bits(t0_s, t1_s) if capacity else None
        rows.append({
            "scheme": run.scheme, "flow": AGGREGATE_FLOW, "algo": None, "start_s": t0_s,
            "duration_s": span_s, "bytes": total_bits / 8,
            "goodput_bps": total_bits / span_s if span_s > 0 else None,
            "capacity_bps": offered_bits / span_s if offered_bits and span_s > 0 else None,
            "utilization": _ratio(total_bits, offered_bits),
            "retransmissions": _sum(r["retransmissions"] for r in rows),
            "timeouts": _sum(r["timeouts"] for r in rows),
            "rtt_mean_ms": None, "rtt_p50_ms": None, "rtt_p95_ms": None, "rtt_p99_ms": None,
            "jain": jain, "estimate_error_share": None, "estimate_error_rate": None,
            "estimate_samples": 0,
            "valid": None if valid is None else int(valid), "fidelity": fidelity,
        })
    return rows


def _last(flow: FlowLog, key: str) -> Optional[float]:
    if flow.summary.get(key) is not None:
        return flow.summary[key]
    values = [s[key] for s in flow.samples if s.get(key) is not None]
    return values[-1] if values else None


def _ratio(numerator: Optional[float], denominator: Optional[float]) -> Optional[float]:
    if numerator is None or not denominator:
        return None
    return numerator / denominator


def _sum(values: Iterable[Optional[float]]) -> Optional[float]:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


# ---------------------------------------------------------------------------------------
# Output


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return f"{value:.10g}"
    return str(value)


def write_csv(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(SUMMARY_COLUMNS)
        for row in rows:
            writer.writerow([_cell(row.get(c)) for c in SUMMARY_COLUMNS])


def _md_number(value: Any, scale: float = 1.0, digits: int = 3) -> str:
    if value is None:
        return "-"
    return f"{value * scale:.{digits}f}"


# What summary.md's columns mean (its "Definitions" section, one bullet each).
DEFINITIONS = (
    "* **utilization**: goodput / mean capacity the bottleneck actually offered "
    "(integral of the applied rate, capacity.csv) over the flow's lifetime; "
    f"row `{AGGREGATE_FLOW}`: all bytes / that integral over the union of lifetimes.",
    "* **jain**: Jain's index of the flows' goodputs within one scheme run.",
    "* **estimate error** (columns `estimate_error_share`, `estimate_error_rate` of "
    "summary.csv): mean |estimate - reference| / reference over the flow's log rows, "
    "all in **payload** bit/s (switch-stamped values and capacities count frames and "
    "are scaled by MSS / frame size). The estimate: EBN the decoded echoed "
    "`ebn_code`; OBP the echoed tight link + the flow's own rate; westwood, dft, "
    "sarbe the sender's `estimate_bps`. References: the flow's **max-min fair share** "
    "of the links it crosses (flows active at that time on the same link in the same "
    "direction; run.json `flow_links`, else every flow on the bottleneck), and the "
    "flow's **own rate** (acknowledged payload over the last bin).",
)


def write_markdown(path: Path, runs: Sequence[SchemeRun], rows: Sequence[Mapping[str, Any]],
                   plots: Sequence[Path]) -> None:
    lines = ["# Experiment results", ""]
    lines += ["| scheme | flow | algo | goodput (Mb/s) | capacity (Mb/s) | utilization | "
              "retransmissions | RTT mean (ms) | RTT p95 (ms) | Jain | "
              "estimate error vs fair share | estimate error vs own rate |",
              "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        scheme_cell = f"{r['scheme']} **INVALID**" if r.get("valid") == 0 else r["scheme"]
        lines.append(
            f"| {scheme_cell} | {r['flow']} | {r.get('algo') or '-'} | "
            f"{_md_number(r['goodput_bps'], 1e-6)} | {_md_number(r['capacity_bps'], 1e-6)} | "
            f"{_md_number(r['utilization'])} | {_cell(r['retransmissions']) or '-'} | "
            f"{_md_number(r['rtt_mean_ms'], digits=1)} | {_md_number(r['rtt_p95_ms'], digits=1)} | "
            f"{_md_number(r['jain'])} | {_md_number(r['estimate_error_share'])} | "
            f"{_md_number(r['estimate_error_rate'])} |")
    lines += ["", "Bottleneck (capacity used for utilization):", ""]
    for run in runs:
        name, _ = bottleneck(run)
        lines.append(f"* {run.scheme}: {name or 'no capacity log'}")
    lines += ["", "## Fidelity", "",
              "Each run's invariants (docs/fidelity.md); an INVALID run's figures describe the "
              "emulator falling behind, not the scheme.", ""]
    for run in runs:
        lines.append(f"* {run.scheme}: {run.validity[1]}")
    lines += ["", "## Definitions", "", *DEFINITIONS, ""]
    if plots:
        lines += ["## Plots", ""]
        lines += [f"![{p.stem}]({p.name})" for p in plots]
    else:
        lines += ["(no plots: matplotlib is not installed)"]
    path.write_text("\n".join(lines) + "\n")


def _telemetry_of(run: SchemeRun, name: Optional[str]) -> list[TelemetrySample]:
    key = run.bottleneck_port or (name if not run.capacity else None)
    return [s for s in run.telemetry if s.key == key] if key else []


_LEGEND = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "fontsize": "small",
           "borderaxespad": 0.0}


def plot_throughput(path: Path, runs: Sequence[SchemeRun], bin_s: float) -> None:
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(len(runs), 1, figsize=(12, 3.2 * len(runs)), squeeze=False,
                             sharex=True)
    for ax, run in zip(axes[:, 0], runs):
        name, capacity = bottleneck(run)
        _, t_end = run_span_s(run)
        for flow in run.flows:
            xs, ys = throughput_series(flow, bin_s)
            ax.plot(xs, [y / 1e6 for y in ys], label=flow.name, linewidth=1.2)
        if capacity is not None:
            xs, ys = capacity.steps(max(t_end, capacity.times_s[-1]))
            ax.step(xs, [y / 1e6 for y in ys], where="post", color="black", linewidth=1.5,
                    label=f"capacity ({name})")
        telemetry = _telemetry_of(run, name)
        if telemetry:
            ax.plot([s.t_s for s in telemetry], [(s.rate_kbps or 0) / 1e3 for s in telemetry],
                    color="grey", linestyle=":", linewidth=1, label="link rate (switch)")
        ax.set_title(f"{run.label}: throughput per flow ({bin_s:g} s bins)")
        ax.set_ylabel("Mb/s")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(**_LEGEND)
    axes[-1, 0].set_xlabel("time since experiment start (s)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_congestion(path: Path, run: SchemeRun, bin_s: float) -> None:
    """cwnd, then rates (pacing, estimate, fair share), then the bottleneck queue."""
    import matplotlib.pyplot as plt
    name, capacity = bottleneck(run)
    telemetry = _telemetry_of(run, name)
    n_rows = 3 if telemetry else 2
    fig, axes = plt.subplots(n_rows, 1, figsize=(12, 2.8 * n_rows), sharex=True)
    rates = {f.name: _Delivered(f) for f in run.flows}
    shares = FairShares(run)
    for index, flow in enumerate(run.flows):
        color = f"C{index % 10}"
        times = [flow.start_s + s["t_s"] for s in flow.samples]
        axes[0].plot(times, [s.get("cwnd") for s in flow.samples], color=color, linewidth=1,
                     label=flow.name)
        pacing = [(t, s["pacing_rate_bps"] / 1e6) for t, s in zip(times, flow.samples)
                  if s.get("pacing_rate_bps")]
        if pacing:
            axes[1].plot(*zip(*pacing), color=color, linewidth=0.8, alpha=0.6,
                         label=f"{flow.name} pacing")
        source = estimate_source(flow, run)
        if source is None:
            continue
        est, true = [], []
        for t_s, s in zip(times, flow.samples):
            value = estimate_bps(run, s, source, rates[flow.name].rate_bps(t_s, bin_s))
            if value is not None:
                est.append((t_s, value / 1e6))
            share = shares.share_bps(flow, t_s)
            if share is not None:
                true.append((t_s, share / 1e6))
        if est:
            axes[1].plot(*zip(*est), color=color, linewidth=1.2, label=f"{flow.name} estimate")
        if true:
            axes[1].plot(*zip(*true), color=color, linewidth=1, linestyle="--",
                         label=f"{flow.name} fair share")
    if capacity is not None:
        _, t_end = run_span_s(run)
        xs, ys = capacity.steps(max(t_end, capacity.times_s[-1]))
        axes[1].step(xs, [y / 1e6 for y in ys], where="post", color="black", linewidth=1,
                     label=f"capacity ({name})")
    axes[0].set_title(f"{run.label}: congestion window, rates and estimates")
    axes[0].set_ylabel("cwnd (segments)")
    axes[1].set_ylabel("rate, estimate (Mb/s)\npayload; capacity: frames")
    axes[1].set_ylim(bottom=0)
    if telemetry:
        axes[2].plot([s.t_s for s in telemetry], [s.queue_pkts for s in telemetry],
                     color="black", linewidth=1)
        axes[2].set_ylabel("queue (packets)")
    for ax in axes:
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(**_LEGEND)
    axes[-1].set_xlabel("time since experiment start (s)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_goodput(path: Path, runs: Sequence[SchemeRun]) -> None:
    """Goodput per scheme, each flow stacked on the one before."""
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(max(4.0, 1.4 * len(runs) + 2), 4))
    for x, run in enumerate(runs):
        bottom = 0.0
        for index, flow in enumerate(run.flows):
            height = (flow.goodput_bps or 0.0) / 1e6
            ax.bar(x, height, bottom=bottom, color=f"C{index % 10}", edgecolor="white",
                   hatch="//" if run.validity[0] is False else None)
            if height > 0 and len(run.flows) > 1:
                ax.text(x, bottom + height / 2, flow.name, ha="center", va="center",
                        fontsize="x-small")
            bottom += height
        ax.text(x, bottom, f"{bottom:.2f}", ha="center", va="bottom", fontsize="small")
    ax.set_ylim(0, max([ax.get_ylim()[1] * 1.08, 1e-3]))
    ax.set_xticks(range(len(runs)), [r.label for r in runs])
    ax.set_ylabel("goodput (Mb/s)")
    ax.set_title("goodput per scheme (flows stacked)")
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_plots(out_dir: Path, runs: Sequence[SchemeRun], bin_s: float) -> list[Path]:
    """The PNGs; [] when matplotlib is missing. Runs with captures (bwn run --pcap)
    also get their time-sequence figure, ``seq-<scheme>.png`` (needs dpkt)."""
    try:
        import matplotlib
    except ModuleNotFoundError:
        return []
    matplotlib.use("Agg")
    paths = [out_dir / "throughput.png", out_dir / "goodput.png"]
    plot_throughput(paths[0], runs, bin_s)
    plot_goodput(paths[1], runs)
    for run in runs:
        path = out_dir / f"cc-{_safe(run.scheme)}.png"
        plot_congestion(path, run, bin_s)
        paths.append(path)
    for run in runs:
        if run.captures and _have_dpkt():
            from bwn.analysis.report_capture import plot_time_sequence
            written = plot_time_sequence(out_dir / f"seq-{_safe(run.scheme)}.png", run)
            if written is not None:
                paths.append(written)
    return paths


def _have_dpkt() -> bool:
    try:
        import dpkt  # noqa: F401
    except ModuleNotFoundError:
        return False
    return True


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def write_report(run_dir: str | Path, runs: list[SchemeRun], bin_s: float = DEFAULT_BIN_S) -> Path:
    """Write RUN_DIR/summary.md, summary.csv and the PNGs; return summary.md's path."""
    out = ExperimentDir(run_dir)
    out_dir = out.path
    out_dir.mkdir(parents=True, exist_ok=True)
    if not runs:
        raise ReportError("no scheme run to report")
    rows = [row for run in runs for row in summarize(run, bin_s)]
    write_csv(out.summary_csv, rows)
    plots = write_plots(out_dir, runs, bin_s)
    summary_md = out.summary_md
    write_markdown(summary_md, runs, rows, plots)
    return summary_md


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bwn.analysis.report",
        description="Rebuild RUN_DIR/summary.md, summary.csv and plots from "
                    "RUN_DIR/<scheme>/{flows/,telemetry.csv,capacity.csv}.")
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    parser.add_argument("--bin-s", type=float, default=DEFAULT_BIN_S,
                        help=f"throughput averaging window, s (default {DEFAULT_BIN_S})")
    parser.add_argument("--bottleneck", metavar="LINK",
                        help="capacity.csv link to use (default: run.json's, else the slowest)")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.bin_s > 0:
        parser.error("--bin-s must be positive")
    try:
        runs = load_run_dir(args.run_dir)
        if args.bottleneck:
            for run in runs:
                run.bottleneck_link = args.bottleneck
        path = write_report(args.run_dir, runs, args.bin_s)
    except ReportError as exc:
        print(f"bwn.analysis.report: error: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
