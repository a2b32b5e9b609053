"""A results page's figures: one per claim, and the throughput over time.

A claim's figure shows, per case, the mean and 95 % interval of the claim's
quantity and each valid seed, in the claim's unit (bwn.reproduce.quantity), with
what the claim is judged against drawn: the paper's value and its tolerance
band, a bound, or the margin of a comparison. A legend says what each mark is.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

from bwn.reproduce import claims as cl
from bwn.analysis.report.load import ReportError, load_scheme_run
from bwn.analysis.report.rates import bottleneck, throughput_series
from bwn.reproduce import grid as gr
from bwn.reproduce.plan import safe
from bwn.reproduce.quantity import claim_quantity, trend_quantity

#: Columns of the throughput-over-time grid of small panels.
TIMESERIES_COLUMNS = 4


def _pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend, or None when matplotlib is not
    installed (figures are optional: `pip install -e .[plots]`)."""
    try:
        # imported here: matplotlib is the plots extra's, and slow to import
        import matplotlib
    except ModuleNotFoundError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def seed_quantity(c: gr.Claim, r: cl.RunRecord, runs: Sequence[cl.RunRecord]) -> Optional[float]:
    """One seed's value of a claim's quantity, from this run: its metric, or for a
    comparison the paired gain (or difference), only when the other scheme's run of
    that seed counts too (a claim relative to another case: None, the case's
    judgement holds those)."""
    value = r.metrics.get(c.metric)
    if value is None or c.relative_to:
        return None
    if not c.compares:
        return value
    other = next((o for o in runs if o.scheme == c.versus and o.seed == r.seed and o.usable), None)
    theirs = None if other is None else other.metrics.get(c.metric)
    if theirs is None:
        return None
    return cl.paired(c, value, theirs)


def claim_figure(grid: gr.Grid, out_root: Path, jc: cl.ClaimJudgement) -> Optional[Path]:
    plt = _pyplot()
    if plt is None or not jc.cases or jc.claim.waiting:
        return None
    c = jc.claim
    q = claim_quantity(c)
    k = q.factor
    trend = c.kind == "trend" and c.x is not None        # a range may have no x: cases side by side
    xs = [float(j.case.params[c.x]) for j in jc.cases] if trend and c.x else list(range(len(jc.cases)))
    fig, ax = plt.subplots(figsize=(max(5.0, 1.0 * len(jc.cases) + 3), 3.8))
    offset = (max(xs) - min(xs)) * 0.015 if trend and len(xs) > 1 else 0.15
    drew_seed = drew_invalid = drew_mean = False
    for x, j in zip(xs, jc.cases):
        e = j.estimate
        if e.mean is not None:
            err = None if e.low is None else [[(e.mean - e.low) * k], [(e.high - e.mean) * k]]
            ax.errorbar([x], [e.mean * k], yerr=err, fmt="o", color="black", capsize=5,
                        label=None if drew_mean else "mean and 95 % interval")
            drew_mean = True
        for seed, value in sorted(j.quantities.items()):
            ax.plot([x + offset], [value * k], ".", color="C0", label=None if drew_seed else "one seed")
            drew_seed = True
        for r in j.runs:
            if r.scheme != c.scheme or r.valid is not False:
                continue
            value = seed_quantity(c, r, j.runs)
            if value is not None:
                ax.plot([x + offset], [value * k], "x", color="red",
                        label=None if drew_invalid else "INVALID seed (not counted)")
                drew_invalid = True
    _draw_reference(ax, c, k)
    if trend:
        ax.set_xlabel(c.x + (" (log scale)" if c.log_x else ""))
        if c.log_x:
            ax.set_xscale("log")
    else:
        ax.set_xticks(xs, [j.case.id for j in jc.cases], rotation=20, ha="right", fontsize="small")
        ax.set_xlabel("case (labels in the page's tables)")
    ax.set_ylabel(q.axis, fontsize="small")
    title = f"{c.id}: {jc.verdict}"
    if c.kind == "trend" and jc.groups:
        shown = ", ".join(trend_quantity(c).number(g.estimate.mean) for g in jc.groups)
        title += f" ({'range' if c.measure == 'range' else 'change'} {shown})"
    ax.set_title(title, fontsize="small")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="x-small", loc="best")
    fig.tight_layout()
    path = out_root / f"{grid.paper}-{safe(c.id)}.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _draw_reference(ax: Any, c: gr.Claim, k: float) -> None:
    """What the claim is judged against, in the plot's unit."""
    if c.kind == "near" and c.target is not None:
        low, high = c.band()
        ax.axhspan(low * k, high * k, color="C2", alpha=0.15, label="the paper's value ± tolerance")
        ax.axhline(c.target * k, color="C2", linestyle="--", linewidth=1, label="the paper's value")
    elif c.kind in ("at_least", "at_most") and c.threshold is not None:
        word = "at least" if c.kind == "at_least" else "at most"
        ax.axhline(c.threshold * k, color="C2", linestyle="--", linewidth=1, label=f"the claim: {word} this")
    elif c.kind in ("better", "equal", "not_worse"):
        ax.axhspan(-c.margin * k, c.margin * k, color="grey", alpha=0.15,
                   label=f"± {c.margin * 100:g} % margin (a tie)")
        ax.axhline(0.0, color="grey", linestyle="--", linewidth=1)


def write_claim_figures(grid: gr.Grid, out_root: Path, judgements: Sequence[cl.ClaimJudgement]) -> dict[str, Path]:
    paths = {}
    for jc in judgements:
        path = claim_figure(grid, out_root, jc)
        if path is not None:
            paths[jc.claim.id] = path
    return paths


def timeseries_figure(grid: gr.Grid, out_root: Path, cases: Sequence[gr.Case],
                      records: Sequence[cl.RunRecord]) -> tuple[Optional[Path], bool]:
    """The flow ``grid.timeseries_flow``'s throughput over time, a small panel per
    case (the first valid seed, every scheme), drawn from the run folders here;
    returns (its path, True). When some case's runs are not here (carried), the
    figure drawn where they were is kept whole: (its path, False); (None, False)
    when there is nothing to draw."""
    plt = _pyplot()
    path = out_root / f"{grid.paper}-throughput-over-time.png"
    if plt is None or not grid.timeseries_flow:
        return None, False
    here = [c for c in cases if any(r.case == c.id and r.complete and not r.carried for r in records)]
    if len(here) < len(cases) and path.exists():
        return path, False
    if not here:
        return None, False
    cols = min(TIMESERIES_COLUMNS, len(here))
    rows = (len(here) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.5 * rows + 0.6), squeeze=False, sharey=False)
    handles: dict[str, Any] = {}
    drawn = False
    for ax, case in zip(axes.flat, here):
        runs = [r for r in records if r.case == case.id and r.complete and not r.carried]
        seed = min((r.seed for r in runs), default=None)
        capacity_drawn = False
        for r in runs:
            if r.seed != seed:
                continue
            try:
                run = load_scheme_run(r.path, r.scheme)
            except ReportError:
                continue
            flow = next((f for f in run.flows if f.name == grid.timeseries_flow), None)
            if flow is None:
                continue
            xs, ys = throughput_series(flow, 1.0)
            label = r.scheme + (" [INVALID]" if r.valid is False else "")
            (line,) = ax.plot(xs, [y / 1e3 for y in ys], linewidth=0.9,
                              linestyle=":" if r.valid is False else "-")
            handles.setdefault(label, line)
            drawn = True
            _, curve = bottleneck(run)
            if curve is not None and not capacity_drawn and xs:
                cx, cy = curve.steps(max(xs))
                (cap,) = ax.step(cx, [y / 1e3 for y in cy], where="post", color="black", linewidth=0.8)
                handles.setdefault("capacity", cap)
                capacity_drawn = True
        ax.set_title(f"{case.id} (seed {seed})", fontsize="small")
        ax.tick_params(labelsize="x-small")
        ax.grid(True, alpha=0.3)
    for ax in axes.flat[len(here):]:
        ax.set_visible(False)
    for ax in axes[-1, :]:
        ax.set_xlabel("time (s)", fontsize="small")
    for ax in axes[:, 0]:
        ax.set_ylabel("kb/s", fontsize="small")
    if not drawn:
        plt.close(fig)
        return (path if path.exists() else None), False
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=min(len(handles), 6),
               fontsize="small", frameon=False)
    fig.suptitle(f"{grid.timeseries_flow}'s throughput, 1 s bins", fontsize="small")
    fig.tight_layout(rect=(0, 0.06, 1, 0.97))
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path, True
