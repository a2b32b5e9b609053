"""The report's figures drawn from a run's captures (`bwn run --pcap`).

``seq-<scheme>.png``: the time-sequence graph of the papers (and of tcptrace):
for each captured link one panel, for each flow seen on it the sequence number
(stream offset, MB) of every DATA segment as it crossed the link, retransmissions
marked with a cross, and the cumulative ACK number the receiver returned as a
line. Slopes are throughputs, horizontal gaps are stalls, crosses below the line
of new data are recoveries.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from bwn.analysis.pcaptrace import PcapError, Trace, read_trace
from bwn.analysis.report.load import SchemeRun

MB = 1e6


def traces(run: SchemeRun) -> dict[str, Trace]:
    """link -> its capture, read (files that are missing or unreadable are left out)."""
    out = {}
    for link, path in run.captures.items():
        try:
            out[link] = read_trace(Path(path), run.clock_offset_s or 0.0)
        except PcapError:
            continue
    return out


def plot_time_sequence(path: Path, run: SchemeRun) -> Optional[Path]:
    """Write ``path`` for ``run``; None when the run has no readable capture."""
    read = {link: trace for link, trace in traces(run).items() if trace.flows}
    if not read:
        return None
    # imported here: matplotlib is the plots extra's, and slow to import
    import matplotlib.pyplot as plt

    names = {flow_id: name for name, flow_id in run.flow_ids.items()}
    order = sorted({fid for trace in read.values() for fid in trace.flows},
                   key=lambda fid: (fid not in names, fid))
    colors = {fid: f"C{i % 10}" for i, fid in enumerate(order)}
    fig, axes = plt.subplots(len(read), 1, figsize=(12, 3.4 * len(read)), squeeze=False,
                             sharex=True)
    for ax, (link, trace) in zip(axes[:, 0], read.items()):
        for fid in order:
            flow = trace.flows.get(fid)
            if flow is None:
                continue
            color, label = colors[fid], names.get(fid, f"flow id {fid}")
            new = [(t, s / MB) for t, s, r in zip(flow.data_t_s, flow.data_seq, flow.data_retx)
                   if not r]
            retx = [(t, s / MB) for t, s, r in zip(flow.data_t_s, flow.data_seq, flow.data_retx)
                    if r]
            if new:
                ax.plot(*zip(*new), linestyle="none", marker=".", markersize=2, color=color,
                        label=f"{label} data")
            if retx:
                ax.plot(*zip(*retx), linestyle="none", marker="x", markersize=4, color=color,
                        label=f"{label} retransmissions ({len(retx)})")
            if flow.ack_t_s:
                ax.step(flow.ack_t_s, [a / MB for a in flow.ack_no], where="post", color=color,
                        linewidth=0.8, alpha=0.6, label=f"{label} ACK")
        ax.set_title(f"{run.scheme}: time-sequence at link {link} "
                     f"({trace.packets} packets captured)")
        ax.set_ylabel("sequence number (MB)")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small",
                  borderaxespad=0.0)
    axes[-1, 0].set_xlabel("time since experiment start (s)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
