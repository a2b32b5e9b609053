"""The report's figures: throughput, the congestion state, goodput per flow, and
the time-sequence graph of a run's captures (`bwn run --pcap`)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

from bwn.analysis.report.load import SchemeRun, TelemetrySample
from bwn.analysis.report.rates import (
    FairShares,
    _Delivered,
    bottleneck,
    estimate_bps,
    estimate_source,
    run_span_s,
    throughput_series,
)


def _telemetry_of(run: SchemeRun, name: Optional[str]) -> list[TelemetrySample]:
    key = run.bottleneck_port or (name if not run.capacity else None)
    return [s for s in run.telemetry if s.key == key] if key else []


_LEGEND = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "fontsize": "small",
           "borderaxespad": 0.0}


def plot_throughput(path: Path, runs: Sequence[SchemeRun], bin_s: float) -> None:
    # imported here: matplotlib is the plots extra's, and slow to import
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
    # imported here: matplotlib is the plots extra's, and slow to import
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
    # imported here: matplotlib is the plots extra's, and slow to import
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
        # imported here: matplotlib is the plots extra's, and slow to import
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
            # imported here: reading captures needs dpkt, which only the plots extra installs
            from bwn.analysis.report.timeseq import plot_time_sequence
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
