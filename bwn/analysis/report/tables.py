"""The report's tables: one row per flow (and ``all``) per scheme run, as
summary.csv and summary.md (with the definitions a reader needs)."""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

from bwn.analysis.report.load import AGGREGATE_FLOW, DEFAULT_BIN_S, FlowLog, SUMMARY_COLUMNS, SchemeRun
from bwn.analysis.report.rates import FairShares, bottleneck, capacity_curves, estimate_error, jain_index, run_span_s


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


def write_csv(path: Path, rows: Sequence[Mapping[str, Any]], columns: Sequence[str] = SUMMARY_COLUMNS) -> None:
    """``rows`` as a CSV of ``columns`` (summary.csv's by default; a missing value is empty)."""
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(columns)
        for row in rows:
            writer.writerow([_cell(row.get(c)) for c in columns])


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


FCT_COLUMNS = ("scheme", "flow", "group", "size_bytes", "start_s", "status", "fct_s", "ideal_s", "slowdown",
               "valid")


def fct_rows(runs: Sequence[SchemeRun]) -> list[dict[str, Any]]:
    """fct.csv: one row per scheme and flow with a byte count (bwn/analysis/fct.py),
    completed or not."""
    from bwn.analysis import fct        # fct imports this package's modules
    out = []
    for run in runs:
        valid = run.validity[0]
        for f in fct.fcts(run):
            out.append({"scheme": run.scheme, "flow": f.flow, "group": f.group, "size_bytes": f.size_bytes,
                        "start_s": f.start_s, "status": f.status, "fct_s": f.fct_s, "ideal_s": f.ideal_s,
                        "slowdown": f.slowdown, "valid": None if valid is None else int(valid)})
    return out


def write_fct_csv(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    write_csv(path, rows, FCT_COLUMNS)


def bottleneck_links(run: SchemeRun) -> list[str]:
    """The links of the flows' paths (run.json's flow_links) with the least mean applied
    capacity over the run, ties all (a parking lot's b1, b2, b3); else the report's
    bottleneck."""
    curves = capacity_curves(run)
    named = sorted({hop[0] for hops in (run.flow_links or {}).values() for hop in hops} & set(curves))
    if not named:
        name, _ = bottleneck(run)
        return [name] if name else []
    t0, t1 = run_span_s(run)
    means = {n: curves[n].mean_rate_bps(t0, t1) for n in named}
    low = min(means.values())
    return [n for n in named if means[n] <= low * (1 + 1e-9)]


def comparison_rows(runs: Sequence[SchemeRun], rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per scheme run: its bottlenecks' utilization, queue and drops (the fidelity
    sampler's counts), fairness of the flows without a byte count, and per group of sized
    flows its FCT (docs/compare.md)."""
    from bwn.analysis import fct, metrics
    out = []
    for run in runs:
        mine = [r for r in rows if r["scheme"] == run.scheme]
        links = ",".join(bottleneck_links(run))

        def value(name: str) -> Optional[float]:
            try:
                return metrics.metric_value(name, run, mine, run.fidelity)
            except (metrics.MetricError, KeyError, TypeError, ValueError):
                return None
        unsized = [f for f in run.flows if f.name not in run.flow_sizes]
        goodputs = [f.goodput_bps for f in unsized if f.goodput_bps is not None]
        shares = [metrics._share_fraction(run, f, f.goodput_bps) for f in unsized]
        out.append({
            "scheme": run.scheme, "valid": run.validity[0], "links": links,
            "link_utilization": value(f"link_utilization:{links}") if links else None,
            "queue_fraction": value(f"queue_fraction:{links}") if links else None,
            "drops": value(f"drops:{links}") if links else None,
            "jain": jain_index(goodputs),
            "jain_share": None if any(v is None for v in shares) else jain_index([v for v in shares if v is not None]),
            "groups": fct.by_group(fct.fcts(run)),
        })
    return out


def _comparison_lines(runs: Sequence[SchemeRun], rows: Sequence[Mapping[str, Any]]) -> list[str]:
    from bwn.analysis import fct
    comp = comparison_rows(runs, rows)
    lines = ["## Comparison", "",
             "Per scheme: the bottleneck links' utilization (packets sent / packets the rate allowed, "
             "the busier direction, averaged over the links), mean queue / buffer and drops (summed), "
             "from the switches' counters; Jain's index of the goodputs of the flows without a byte "
             "count, and of their goodput / max-min fair share; per group of flows with a byte count, "
             "the flow completion time (FCT, s) and FCT / processor sharing's (slowdown), mean and "
             "median over the completed flows, and how many did not complete (Definitions).", "",
             "| scheme | links | utilization | queue / buffer | drops | Jain (long) | Jain of goodput / share (long) "
             "| group | completed | FCT mean (s) | FCT median (s) | slowdown mean | slowdown median | not completed |",
             "|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|"]
    for c in comp:
        scheme = f"{c['scheme']} **INVALID**" if c["valid"] is False else c["scheme"]
        head = (f"| {scheme} | {c['links'] or '-'} | {_md_number(c['link_utilization'])} | "
                f"{_md_number(c['queue_fraction'])} | {_cell(c['drops']) or '-'} | {_md_number(c['jain'])} | "
                f"{_md_number(c['jain_share'])} |")
        groups = c["groups"] or [None]
        for g in groups:
            if g is None:
                lines.append(head + " - | - | - | - | - | - | - |")
                continue
            missing = f"**{', '.join(g.not_completed)}**" if g.not_completed else "-"
            lines.append(f"{head} {g.group} | {g.completed}/{g.flows} | {_md_number(g.mean_s)} | "
                         f"{_md_number(g.median_s)} | {_md_number(g.mean_slowdown, digits=2)} | "
                         f"{_md_number(g.median_slowdown, digits=2)} | {missing} |")
    lines += ["", "Flows with a byte count (also `fct.csv`):", "",
              "| scheme | flow | size (kB) | start (s) | status | FCT (s) | ideal (s) | slowdown |",
              "|---|---|---:|---:|---|---:|---:|---:|"]
    for r in fct_rows(runs):
        lines.append(f"| {r['scheme']} | {r['flow']} | {r['size_bytes'] / 1e3:g} | {_md_number(r['start_s'], digits=2)} | "
                     f"{r['status'] if r['status'] == fct.COMPLETE else '**' + r['status'] + '**'} | "
                     f"{_md_number(r['fct_s'])} | {_md_number(r['ideal_s'])} | {_md_number(r['slowdown'], digits=2)} |")
    return lines + [""]


FCT_DEFINITIONS = (
    "* **FCT** (flows with a byte count): from the flow's SYN to the ACK of its last byte, at "
    "the sender (the log's handshake row + the summary's duration). **ideal**: processor "
    "sharing's FCT as RCP's papers give it (Dukkipati and McKeown, CCR 2006), 1.5 RTT + size / "
    "rate to the last byte's arrival, plus the half RTT of its ACK: 2 RTT + size / fair share, "
    "the RTT the path's propagation round trip, the share the flow's max-min fair share at its "
    "start. **slowdown** = FCT / ideal. A flow that did not complete (interrupted at the run's "
    "end, failed, no record) has no FCT and is named in `not completed`; means are over the "
    "completed flows of the group.",
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
    if any(run.flow_sizes for run in runs):
        lines += ["", *_comparison_lines(runs, rows)]
    lines += ["", "Bottleneck (capacity used for utilization):", ""]
    for run in runs:
        name, _ = bottleneck(run)
        lines.append(f"* {run.scheme}: {name or 'no capacity log'}")
    lines += ["", "## Fidelity", "",
              "Each run's invariants (docs/fidelity.md); an INVALID run's figures describe the "
              "emulator falling behind, not the scheme.", ""]
    for run in runs:
        lines.append(f"* {run.scheme}: {run.validity[1]}")
    definitions = list(DEFINITIONS) + (list(FCT_DEFINITIONS) if any(run.flow_sizes for run in runs) else [])
    lines += ["", "## Definitions", "", *definitions, ""]
    if plots:
        lines += ["## Plots", ""]
        lines += [f"![{p.stem}]({p.name})" for p in plots]
    else:
        lines += ["(no plots: matplotlib is not installed)"]
    path.write_text("\n".join(lines) + "\n")
