"""A paper's results page, in the order a reviewer reads it.

``OUT/PAPER.md``: the verdicts first (the paper's every claim, figure and trend,
its value beside ours, judged or not and why), then the figures, then the
method (the rule, the seeds, the scaling, the notes), then the evidence (each
claim case by case, the attempts, the runs, the cases). ``OUT/PAPER-claims.csv``
holds every claim's per-case numbers.
"""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Optional, Sequence

from bwn.reproduce import claims as cl
from bwn.analysis import stats
from bwn.reproduce import grid as gr
from bwn.reproduce import ledger as lg
from bwn.reproduce.quantity import claim_quantity, metric_quantity, trend_quantity

RULE = ("The decision rule (docs/reproduce.md, fixed before the runs): per case, a 95 % interval over the valid "
        "seeds (Student-t; counts: quasi-Poisson, never below 0; fractions: within [0, 1]). *yes* when the whole "
        "interval lies on the claim's side (a comparison: above +margin; near the paper's value: within its "
        "tolerance band), *no* when wholly on the other (a gain within the margin is no gain), *unclear* when it "
        "straddles. A claim is **reproduced** when every case is *yes*, **not reproduced** when none is and "
        "some is *no*, **inconclusive** when every case is *unclear*, **partly** otherwise. A trend is judged "
        "once per group of cases, on each seed's change over the sweep (the least-squares line's, from the "
        "lowest x to the highest) against its margin.")
WAITING = stats.WAITING


def rule_text(c: gr.Claim) -> str:
    """How the claim is judged, and why its tolerance, bound or margin is what it is."""
    return _rule(c) + (f" Why: {c.why}" if c.why else "")


def _rule(c: gr.Claim) -> str:
    q = claim_quantity(c)
    if c.kind == "better":
        return f"{q.name} above +{c.margin * 100:g} % (the margin)."
    if c.kind == "equal":
        return f"{q.name} within ± {c.margin * 100:g} % (the margin)."
    if c.kind == "not_worse":
        return f"{q.name} above -{c.margin * 100:g} % (comparable or better: the margin)."
    if c.kind == "at_least":
        return f"{q.name} at least {q.number(c.threshold)}."
    if c.kind == "at_most":
        return f"{q.name} at most {q.number(c.threshold)}."
    if c.kind == "near":
        low, high = c.band()
        return f"{q.name} within [{q.number(low)}, {q.number(high)}] (the paper's {q.number(c.target)} ± tolerance)."
    t = trend_quantity(c)
    margin = t.number(c.margin).lstrip("+")
    groups = "" if len(c.trend_groups()) < 2 else \
        " In each group of cases: " + "; ".join(", ".join(g) for g in c.trend_groups()) + "."
    if c.measure == "range":
        return f"{t.name} at most {margin}, per seed (flat).{groups}"
    side = {"increasing": f"above +{margin}", "decreasing": f"below -{margin}",
            "flat": f"within ± {margin}", "not_increasing": f"at most +{margin}"}[c.direction or ""]
    return f"{c.direction}: {t.name} {side}, per seed.{groups}"


def _case_line(c: gr.Claim, j: cl.CaseJudgement) -> str:
    return f"{j.case.id}: {claim_quantity(c).estimate(j.estimate)}" + ("" if c.kind == "trend" else f" {j.outcome}")


def ours_text(jc: cl.ClaimJudgement) -> str:
    if jc.claim.waiting:
        return f"waiting for {', '.join(jc.claim.waiting)}"
    if not jc.cases:
        return "no case of this claim in the selection"
    text = "; ".join(_case_line(jc.claim, j) for j in jc.cases)
    if jc.claim.kind == "trend" and jc.groups:
        t = trend_quantity(jc.claim)
        shown = "; ".join(f"{'(' + ', '.join(g.cases) + ') ' if len(jc.groups) > 1 else ''}"
                          f"{t.estimate(g.estimate)} {g.outcome}" for g in jc.groups)
        text = f"change {shown} ({text})" if jc.claim.measure == "change" else f"range {shown} ({text})"
    return text


def _num(v: Optional[float]) -> str:
    return "" if v is None else f"{v:.6g}"


def write_claims_csv(out_root: Path, grid: gr.Grid, judgements: Sequence[cl.ClaimJudgement]) -> Path:
    path = out_root / f"{grid.paper}-claims.csv"
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["paper", "claim", "kind", "verdict", "case", "label", "quantity", "unit", "n", "mean", "ci_low",
                    "ci_high", "interval", "outcome", "invalid_runs"])
        for jc in judgements:
            q = claim_quantity(jc.claim)
            if not jc.cases and not jc.groups:
                w.writerow([grid.paper, jc.claim.id, jc.claim.kind, jc.verdict, "", "", q.name, q.unit, 0, "", "",
                            "", "", "", ""])
            for j in jc.cases:
                e = j.estimate
                w.writerow([grid.paper, jc.claim.id, jc.claim.kind, jc.verdict, j.case.id, j.case.label, q.name,
                            q.unit, e.n, _num(e.mean), _num(e.low), _num(e.high), e.method, j.outcome,
                            len(j.invalid_runs)])
            for g in jc.groups:
                e = g.estimate
                t = trend_quantity(jc.claim)
                w.writerow([grid.paper, jc.claim.id, jc.claim.kind, jc.verdict, f"({', '.join(g.cases)})", "",
                            t.name, t.unit, e.n, _num(e.mean), _num(e.low), _num(e.high), e.method, g.outcome, ""])
    return path


def inventory_rows(grid: gr.Grid, judgements: Sequence[cl.ClaimJudgement]) -> list[str]:
    """The verdict table: every inventory item with the paper's value and ours."""
    by_id = {jc.claim.id: jc for jc in judgements}
    lines = ["| item | the paper | where | the paper's value | ours | verdict |", "|---|---|---|---|---|---|"]
    for item in grid.inventory:
        if not item.judged:
            lines.append(f"| {item.id} | {item.quote} | {item.where} | {item.paper_value or '-'} | not judged: "
                         f"{item.not_judged} | - |")
            continue
        for cid in item.claims:
            jc = by_id.get(cid)
            ours = ours_text(jc) if jc else "-"
            verdict = f"**{jc.verdict}**" if jc else "-"
            lines.append(f"| {item.id} | {item.quote} | {item.where} | {item.paper_value or '-'} | "
                         f"{cid}: {ours} | {verdict} |")
    return lines


def tally(grid: gr.Grid, judgements: Sequence[cl.ClaimJudgement]) -> dict[str, int]:
    """Per verdict, how many of the paper's items (an item judged by several claims
    takes its weakest verdict: not reproduced < inconclusive < partly < reproduced,
    over its claims that are judged; an item all of whose claims wait is waiting)."""
    order = [stats.NOT_RUN_YET, stats.NO_VALID_RUN, stats.NOT_REPRODUCED, stats.INCONCLUSIVE, stats.PARTLY,
             stats.REPRODUCED]
    by_id = {jc.claim.id: jc.verdict for jc in judgements}
    out = {"items": len(grid.inventory), "not judged": 0, WAITING: 0, "part waiting": 0, **{v: 0 for v in order}}
    for item in grid.inventory:
        if not item.judged:
            out["not judged"] += 1
            continue
        verdicts = [by_id[c] for c in item.claims if c in by_id]
        judged = [v for v in verdicts if v != WAITING]
        if judged:
            out[min(judged, key=order.index)] += 1
            out["part waiting"] += len(judged) < len(verdicts)
        elif verdicts:
            out[WAITING] += 1
    return out


def tally_text(t: dict[str, int]) -> str:
    judged = t["items"] - t["not judged"]
    parts = [f"{t[v]} {v}" for v in (stats.REPRODUCED, stats.PARTLY, stats.NOT_REPRODUCED, stats.INCONCLUSIVE,
                                     stats.NO_VALID_RUN, stats.NOT_RUN_YET) if t[v]]
    waiting = ""
    if t.get(WAITING) or t.get("part waiting"):
        waiting = (f"; {t[WAITING]} wait for machinery not built yet (their rules fixed here)"
                   + (f", {t['part waiting']} more in part" if t["part waiting"] else ""))
    return (f"{t['items']} claims, figures and trends in the paper's evaluation: {judged} judged "
            f"({', '.join(parts) or 'none yet'}{waiting}), {t['not judged']} not judged (each with its reason).")


def evidence(claim: gr.Claim, j: cl.CaseJudgement, out_root: Path) -> str:
    """What the runs of one case show, for a claim that did not hold there."""
    q = claim_quantity(claim)
    schemes = [claim.scheme] + ([claim.versus] if claim.versus else [])
    parts = []
    shown = [f"seed {seed} {q.number(value)}" for seed, value in sorted(j.quantities.items())]
    if shown:
        parts.append("the quantity per valid seed: " + ", ".join(shown))
    for scheme in schemes:
        runs = [r for r in j.runs if r.scheme == scheme]
        usable = [r for r in runs if r.usable]
        figures = []
        for name in (claim.metric, "retransmissions:all", "timeouts:all", "utilization:all"):
            values = [r.metrics.get(name) for r in usable if r.metrics.get(name) is not None]
            est = stats.mean_interval(values, cl.support_of(name))
            if est.mean is not None:
                figures.append(f"{metric_quantity(name).name} {metric_quantity(name).number(est.mean)}")
        invalid = [r for r in runs if r.valid is False]
        line = f"{scheme}: " + ("; ".join(figures) if figures else "no valid run")
        if invalid:
            line += f"; {len(invalid)} INVALID ({invalid[0].fidelity[:160]})"
        parts.append(line)
    return " / ".join(parts)


def attempt_line(a: lg.Attempt) -> str:
    """An attempt the page does not count, with its status and its reason (the
    status once: the fidelity summary starts with it too)."""
    reason = a.not_counted or a.reason
    if reason.upper().startswith(a.status.upper() + ":"):
        reason = reason[len(a.status) + 1:].lstrip()
    return (f"* {a.key.text()} (attempt {a.attempt_id}, {a.finished_utc or 'unfinished'}): {a.status}: "
            f"{reason[:240]}")


def write_page(grid: gr.Grid, out_root: Path, cases: Sequence[gr.Case], records: Sequence[cl.RunRecord],
               judgements: Sequence[cl.ClaimJudgement], pool: lg.Pool, counts: dict[str, int],
               header: dict[str, Any], figures: dict[str, Path],
               other_code: dict[str, Optional[list[str]]]) -> Path:
    md = out_root / f"{grid.paper}.md"
    paper_claims = [jc for jc in judgements if not jc.claim.deviation]
    deviations = [jc for jc in judgements if jc.claim.deviation]
    lines = [f"# Reproduction: {grid.title}", "", grid.citation, ""]
    # -- verdicts
    lines += ["## Verdicts", ""]
    if grid.inventory:
        lines += [tally_text(tally(grid, judgements)), ""] + inventory_rows(grid, paper_claims) + [""]
    else:
        lines += ["| claim | the paper | where | ours | verdict |", "|---|---|---|---|---|"]
        for jc in paper_claims:
            lines.append(f"| {jc.claim.id} | {jc.claim.statement} | {jc.claim.source} | {ours_text(jc)} | "
                         f"**{jc.verdict}** |")
        lines.append("")
    if deviations:
        lines += ["### Our named deviations (never judged under the paper's name)", "",
                  "| claim | what | deviation | ours | verdict |", "|---|---|---|---|---|"]
        for jc in deviations:
            lines.append(f"| {jc.claim.id} | {jc.claim.statement} | {jc.claim.deviation} | {ours_text(jc)} | "
                         f"**{jc.verdict}** |")
        lines.append("")
    lines += [f"Runs: {counts['planned']} planned, {counts['valid']} counted (valid, made by this code), "
              f"{counts['attempts']} attempts in all: {counts['INVALID']} INVALID and {counts['incomplete']} "
              f"incomplete (never averaged), {counts['remade']} runs made again after such an attempt"
              + (f", {counts['other code']} valid attempts by other code (listed, not counted)"
                 if counts["other code"] else "") + ".", ""]
    # -- figures
    lines += ["## Figures", ""]
    for jc in judgements:
        if jc.claim.id in figures:
            lines += [f"![{jc.claim.id}]({figures[jc.claim.id].name})", ""]
    if "timeseries" in figures:
        lines += ["Throughput over time:", ""]
        if "timeseries kept" in figures:
            lines += ["(drawn where the runs' folders were: some are not on the machine that wrote this page)", ""]
        lines += [f"![throughput over time]({figures['timeseries'].name})", ""]
    # -- method
    lines += ["## Method", "", "| | |", "|---|---|"]
    for key, value in header.items():
        lines.append(f"| {key} | {value} |")
    lines += ["", RULE, "", f"**Scaling.** {grid.scaling}", ""]
    for note in grid.notes:
        lines.append(f"* {note}")
    if other_code:
        lines += ["", "Valid attempts made by other code than this page's (not counted; run again here):", ""]
        for commit, files in other_code.items():
            what = "a commit not in this repository" if files is None else \
                ", ".join(f"`{f}`" for f in files[:12]) + (f" and {len(files) - 12} more" if len(files) > 12 else "")
            lines.append(f"* at {commit}: {what}")
    lines.append("")
    # -- evidence
    lines += ["## Evidence", ""]
    for jc in judgements:
        c = jc.claim
        q = claim_quantity(c)
        lines += [f"### {c.id}: {jc.verdict}", "", f"*{c.statement}* ({c.source})", "", "Judged: " + rule_text(c), ""]
        if c.waiting:
            named = f" on {', '.join(c.cases)}" if c.cases else ""
            lines += [f"Waits for {gr.machinery_text(c.waiting)}: declared{named} with its rule, not run or judged "
                      "until that is built.", ""]
            continue
        if not jc.cases:
            lines += ["No case of this claim was run in this selection.", ""]
            continue
        for g in jc.groups:
            lines += [f"The {trend_quantity(c).name}" + (f" in ({', '.join(g.cases)})" if len(jc.groups) > 1 else "")
                      + f", over the seeds: {trend_quantity(c).estimate(g.estimate)}: {g.outcome}.", ""]
        extra = f" {c.scheme} | {c.versus} |" if c.compares else ""
        lines += [f"| case | label | {q.name} (mean [95 % interval]) | outcome |{extra}",
                  "|---|---|---|---|" + ("---|---|" if c.compares else "")]
        mq = metric_quantity(c.metric)
        for j in jc.cases:
            row = f"| {j.case.id} | {j.case.label} | {q.estimate(j.estimate)} | {j.outcome} |"
            if c.compares:
                row += f" {mq.estimate(j.scheme_estimate)} | {mq.estimate(j.versus_estimate)} |"
            lines.append(row)
        failing = [j for j in jc.cases if j.outcome not in (stats.YES, stats.NONE)]
        if failing:
            lines += ["", "Where it did not hold:", ""]
            lines += [f"* case {j.case.id} ({j.outcome}): {evidence(c, j, out_root)}" for j in failing]
        lines.append("")
    lines += ["### Attempts", "", "Every attempt at every run, INVALID and incomplete ones included, is a row of "
              f"`{grid.paper}-runs.csv` with its reason. Attempts that are not counted:", ""]
    skipped = [a for a in pool.attempts if not a.counted]
    if not skipped:
        lines.append("* none")
    lines += [attempt_line(a) for a in skipped[:200]]
    if len(skipped) > 200:
        lines.append(f"* ... and {len(skipped) - 200} more (the ledger has them all)")
    lines += ["", "### Runs", "", "The run each key counts (or its last attempt). Each folder is a `bwn run` output: "
              "`summary.md`, logs, `run.json` (fidelity figures), `attempt.json` (what made it).", "",
              "| case | seed | scheme | valid | goodput | utilization | retransmissions | fidelity | folder |",
              "|---|---|---|---|---:|---:|---:|---|---|"]
    gq, uq, rq = (metric_quantity(m) for m in ("goodput_bps:all", "utilization:all", "retransmissions:all"))
    for r in records:
        status = "-" if not r.complete else ("yes" if r.valid else ("**INVALID**" if r.valid is False else "not counted"))
        try:
            folder = f"`{r.path.relative_to(out_root)}`" if r.path.parts else "-"
        except ValueError:
            folder = f"`{r.path}`"
        lines.append(f"| {r.case} | {r.seed} | {r.scheme} | {status} | {gq.number(r.metrics.get('goodput_bps:all'))} "
                     f"| {uq.number(r.metrics.get('utilization:all'))} | "
                     f"{rq.number(r.metrics.get('retransmissions:all'))} | {r.fidelity[:200] or '-'} | {folder}"
                     f"{' (carried)' if r.carried else ''} |")
    lines += ["", "### Cases", "", "| case | label | template | parameters | schemes | seeds | duration (s), full / quick "
              "| note |", "|---|---|---|---|---|---|---|---|"]
    for c in cases:
        lines.append(case_row(c))
    waiting = [c for c in grid.cases if c not in cases and not c.runnable]
    if waiting:
        lines += ["", "Cases declared with their claims, waiting for machinery (not run):", "",
                  "| case | label | template | parameters | schemes | seeds | duration (s), full / quick | note |",
                  "|---|---|---|---|---|---|---|---|"]
        lines += [case_row(c) for c in waiting]
    if grid.schemes:
        lines += ["", "Named schemes:", "", "| scheme | runs | template parameters | links | [experiment] | "
                  "waits for | note |", "|---|---|---|---|---|---|---|"]
        for s in grid.schemes.values():
            links = "; ".join(f"{n}: " + ", ".join(f"{k}={v}" for k, v in keys) for n, keys in s.links)
            lines.append(f"| {s.name} | {s.algorithm} | {', '.join(f'{k}={v}' for k, v in s.params.items()) or '-'} | "
                         f"{links or '-'} | {', '.join(f'{k}={v}' for k, v in s.experiment) or '-'} | "
                         f"{', '.join(s.waiting) or '-'} | {s.note} |")
    md.write_text("\n".join(lines) + "\n")
    return md


def case_row(c: gr.Case) -> str:
    params = ", ".join(f"{k}={v}" for k, v in c.params.items())
    if c.links:
        params += "; links: " + "; ".join(f"{n}: " + ", ".join(f"{k}={v}" for k, v in keys) for n, keys in c.links)
    if c.quick_params:
        params += "; quick: " + ", ".join(f"{k}={v}" for k, v in c.quick_params.items())
    schemes = ", ".join(c.schemes)
    if c.waiting_schemes:
        schemes += (", " if schemes else "") + ", ".join(f"{s} (waits for {', '.join(ms)})"
                                                         for s, ms in c.waiting_schemes)
    note = c.note
    if c.evidence:
        note = "evidence (run only when named; never judged). " + note
    if c.waiting:
        note = f"waits for {', '.join(c.waiting)}. " + note
    return (f"| {c.id} | {c.label} | {c.template} | {params} | {schemes} | {c.seeds} | "
            f"{c.duration_s:g} / {c.quick_duration_s:g} | {note.strip()} |")


def write_index(out_root: Path) -> Path:
    """``OUT/README.md``: per paper, its claims' tally and one line per claim with its
    verdict, from each grid and the claims CSV its page wrote (a paper whose page is
    not written yet says so)."""
    lines = ["# Results: the five papers, claim by claim", "",
             "Each page judges a paper's evaluation under one decision rule, fixed before its runs "
             "(`docs/reproduce.md`). Earlier pages, made before that rule: `archive/`.", "",
             "| paper | claims in its evaluation | judged | reproduced | partly | not reproduced | inconclusive | "
             "waiting for machinery | not judged |", "|---|---|---|---|---|---|---|---|---|"]
    details: list[str] = []
    for paper in gr.PAPERS:
        grid = gr.load_grid(paper)
        verdicts: dict[str, str] = {}
        claims_csv = out_root / f"{paper}-claims.csv"
        if claims_csv.exists():
            for row in csv.DictReader(open(claims_csv, newline="")):
                verdicts[row["claim"]] = row["verdict"]
        judged_items = [i for i in grid.inventory if i.judged]
        if not claims_csv.exists():
            t = tally(grid, [_stub(c, WAITING if c.waiting else stats.NO_VALID_RUN) for c in grid.claims])
            lines.append(f"| [{paper}]({paper}.md) | {len(grid.inventory)} | {len(judged_items)} | page not made "
                         f"yet | | | | {t[WAITING]} | {len(grid.inventory) - len(judged_items)} |")
        else:
            t = tally(grid, [_stub(c, WAITING if c.waiting else verdicts.get(c.id, stats.NO_VALID_RUN))
                             for c in grid.claims])
            lines.append(f"| [{paper}]({paper}.md) | {t['items']} | {t['items'] - t['not judged']} | "
                         f"{t[stats.REPRODUCED]} | {t[stats.PARTLY]} | {t[stats.NOT_REPRODUCED]} | "
                         f"{t[stats.INCONCLUSIVE]} | {t[WAITING]} | {t['not judged']} |")
        details += ["", f"## {grid.title}", ""]
        for item in grid.inventory:
            if not item.judged:
                details.append(f"* {item.id}: not judged ({item.not_judged})")
                continue
            waits = {c.id for c in grid.claims if c.waiting}
            shown = ", ".join(f"{c}: **{WAITING if c in waits else verdicts.get(c, 'not run yet')}**"
                              for c in item.claims)
            details.append(f"* {item.id} ({item.where}): {shown}")
    path = out_root / "README.md"
    path.write_text("\n".join(lines + details) + "\n")
    return path


def _stub(claim: gr.Claim, verdict: str) -> cl.ClaimJudgement:
    return cl.ClaimJudgement(claim, [], verdict)
