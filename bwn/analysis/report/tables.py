"""The report's tables: one row per flow (and ``all``) per scheme run, as
summary.csv and summary.md (with the definitions a reader needs)."""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

from bwn.analysis.report.load import AGGREGATE_FLOW, DEFAULT_BIN_S, FlowLog, SUMMARY_COLUMNS, SchemeRun
from bwn.analysis.report.rates import FairShares, bottleneck, estimate_error, jain_index, run_span_s


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
