"""Per-flow time series (CSV or JSON lines) and end-of-flow summaries.

A :class:`TimeSeriesLog` is offered one row per ACK; it keeps at most one row per
``interval_us`` (10 ms by default) so that logging never dominates the cost of a
flow (callers ask :meth:`TimeSeriesLog.due` before building a row), and writes a
final row per flow when it ends (``force``).
The format follows the file name: ``.csv`` or ``.jsonl``/``.ndjson``.
"""
from __future__ import annotations

import csv
import json
import math
from array import array
from typing import IO, Any, Dict, Iterable, List, Optional, Sequence

DEFAULT_LOG_INTERVAL_US = 10_000

SENDER_FIELDS: Sequence[str] = (
    "time_s", "flow_id", "algo", "cwnd", "ssthresh", "pacing_rate_bps", "rtt_sample_us",
    "srtt_us", "min_rtt_us", "rto_us", "bytes_in_flight", "delivered_bytes", "retransmits",
    "timeouts", "in_recovery", "estimate_bps", "echo_hop_count", "echo_ebn_code",
    "echo_ebn_kbps", "echo_narrow_kbps", "echo_tight_kbps", "extra", "pipe_bytes",
    "sacked_bytes",
)

RECEIVER_FIELDS: Sequence[str] = (
    "time_s", "flow_id", "peer", "delivered_bytes", "ooo_bytes", "segments",
    "duplicate_segments", "out_of_order_segments", "acks_sent", "hop_count", "ebn_code",
    "narrow_kbps", "tight_kbps", "spurious_retransmissions", "sack_blocks_sent",
)


def log_format_for(path: str) -> str:
    """``"csv"`` or ``"jsonl"`` from a file name; raises ValueError otherwise."""
    lower = path.lower()
    if lower.endswith(".csv"):
        return "csv"
    if lower.endswith(".jsonl") or lower.endswith(".ndjson"):
        return "jsonl"
    raise ValueError(f"log file {path!r} must end in .csv or .jsonl")


class TimeSeriesLog:
    """Rate-limited rows to a CSV or JSON-lines file (one file, many flows)."""

    def __init__(self, path: str, fields: Sequence[str],
                 interval_us: int = DEFAULT_LOG_INTERVAL_US) -> None:
        self.format = log_format_for(path)
        self.fields = list(fields)
        self.interval_us = max(int(interval_us), 0)
        self._fh: IO[str] = open(path, "w", newline="" if self.format == "csv" else None)
        self._csv = None
        if self.format == "csv":
            self._csv = csv.writer(self._fh)
            self._csv.writerow(self.fields)
        self._last_written_us: Dict[Any, int] = {}
        self.rows_written = 0

    def due(self, key: Any, now_us: int) -> bool:
        """Whether a row for ``key`` (a flow) at ``now_us`` would be written."""
        last = self._last_written_us.get(key)
        return last is None or now_us - last >= self.interval_us

    def offer(self, key: Any, now_us: int, row: Dict[str, Any], force: bool = False) -> None:
        """Write ``row`` if ``interval_us`` has passed since ``key``'s last row (or ``force``)."""
        if force or self.due(key, now_us):
            self._write(row)
            self._last_written_us[key] = now_us

    def _write(self, row: Dict[str, Any]) -> None:
        self.rows_written += 1
        if self._csv is not None:
            out: List[Any] = []
            for name in self.fields:
                value = row.get(name)
                if value is None:
                    out.append("")
                elif isinstance(value, dict):       # as standard JSON: no NaN or Infinity tokens
                    out.append(json.dumps(_json_value(value), separators=(",", ":")) if value else "")
                elif isinstance(value, float):
                    out.append(_fmt_float(value))
                else:
                    out.append(value)
            self._csv.writerow(out)
        else:
            clean = {k: _json_value(row.get(k)) for k in self.fields}
            self._fh.write(json.dumps(clean, separators=(",", ":")) + "\n")

    def close(self) -> None:
        self._fh.close()


def _fmt_float(value: float) -> str:
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.6g}"


def _json_value(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    return value


def percentile(sorted_values: Sequence[float], q: float) -> Optional[float]:
    """Nearest-rank-interpolated percentile ``q`` (0..100) of sorted values."""
    n = len(sorted_values)
    if n == 0:
        return None
    if n == 1:
        return float(sorted_values[0])
    pos = (n - 1) * q / 100.0
    lo = int(math.floor(pos))
    hi = min(lo + 1, n - 1)
    frac = pos - lo
    return float(sorted_values[lo]) * (1.0 - frac) + float(sorted_values[hi]) * frac


def rtt_stats_ms(samples_us: Iterable[int]) -> Dict[str, Optional[float]]:
    """p50/p95/p99/mean/min/max of RTT samples, in milliseconds."""
    values = sorted(samples_us)
    if not values:
        return {"rtt_p50_ms": None, "rtt_p95_ms": None, "rtt_p99_ms": None,
                "rtt_mean_ms": None, "rtt_min_ms": None, "rtt_max_ms": None, "rtt_samples": 0}

    def ms(v: Optional[float]) -> Optional[float]:
        return None if v is None else round(v / 1000.0, 3)

    return {
        "rtt_p50_ms": ms(percentile(values, 50)),
        "rtt_p95_ms": ms(percentile(values, 95)),
        "rtt_p99_ms": ms(percentile(values, 99)),
        "rtt_mean_ms": ms(sum(values) / len(values)),
        "rtt_min_ms": ms(values[0]),
        "rtt_max_ms": ms(values[-1]),
        "rtt_samples": len(values),
    }


class RttSamples:
    """All RTT samples of a flow (8 bytes each: array 'l' on 64-bit Linux), thinned
    2:1 (and then kept at half the rate) each time ``max_samples`` is reached:
    at most 16 MiB per flow with the default."""

    def __init__(self, max_samples: int = 2_000_000) -> None:
        self.values = array("l")
        self.max_samples = max_samples
        self._stride = 1
        self._count = 0

    def add(self, rtt_us: int) -> None:
        self._count += 1
        if self._count % self._stride:
            return
        self.values.append(rtt_us)
        if len(self.values) >= self.max_samples:
            self.values = self.values[::2]
            self._stride *= 2


def format_summary(summary: Dict[str, Any]) -> str:
    """One human-readable line of a flow summary."""
    def f(key: str, scale: float = 1.0, fmt: str = "{:.2f}") -> str:
        value = summary.get(key)
        return "-" if value is None else fmt.format(value * scale)

    spurious = summary.get("spurious_retransmits")
    return (
        f"flow {summary.get('flow_id')} {summary.get('algo', '')}: "
        f"{summary.get('bytes')} bytes in {f('duration_s', fmt='{:.3f}')} s, "
        f"goodput {f('goodput_bps', 1e-6, '{:.3f}')} Mb/s, "
        f"retransmits {summary.get('retransmits')}"
        f"{'' if spurious is None else f' ({spurious} spurious)'}, "
        f"timeouts {summary.get('timeouts')}, {'SACK' if summary.get('sack') else 'no SACK'}, "
        f"RTT p50/p95/p99/mean {f('rtt_p50_ms')}/{f('rtt_p95_ms')}/{f('rtt_p99_ms')}/"
        f"{f('rtt_mean_ms')} ms ({summary.get('status', '')})"
    )
