"""``bwn reproduce PAPER --calibrate``: the largest rate scale each case runs at faithfully.

Per case, a short run of its first scheme at each rate scale (rates times the
scale, delays divided by it: the same bandwidth-delay product and buffer in
packets at a lower packet rate), largest first, until every fidelity invariant
holds (docs/reproduce.md, "Calibration").
"""
from __future__ import annotations

import csv
import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Callable, Sequence

import tomli_w

from bwn.emulation import runner
from bwn.reproduce import grid as gr
from bwn.reproduce.plan import config_for, safe
from bwn.rundir import RunDir


def scaled_case(case: gr.Case, scale: float) -> gr.Case:
    """The case with every ``*_mbit`` parameter times ``scale`` and every ``*_ms``
    parameter divided by it: the same bandwidth-delay product and buffer in packets
    at a lower packet rate."""
    params = {}
    for key, value in case.params.items():
        if key.endswith("_mbit") and isinstance(value, (int, float)):
            params[key] = round(value * scale, 6)
        elif key.endswith("_ms") and isinstance(value, (int, float)):
            params[key] = round(value / scale, 3)
        else:
            params[key] = value
    return replace(case, params=params, id=f"{case.id}@x{scale:g}")


def calibrate(grid: gr.Grid, out_root: Path, cases: list[gr.Case], scales: Sequence[float],
              duration_s: float, progress: Callable[[str], None] = print) -> Path:
    """Per case, a short run of its first scheme at each scale (largest first) until
    every invariant holds; writes OUT/PAPER-calibration.csv and .md."""
    out = out_root / grid.paper / "calibration"
    rows = []
    for case in cases:
        scheme = case.schemes[0]
        chosen = None
        for scale in sorted(scales, reverse=True):
            trial = replace(scaled_case(case, scale), duration_s=duration_s, quick_duration_s=duration_s)
            path = out / trial.id / safe(scheme)
            if path.exists():
                shutil.rmtree(path)
            data, cfg = config_for(grid, trial, 1, scheme, quick=True)
            path.mkdir(parents=True, exist_ok=True)
            RunDir(path).scenario_toml.write_text(tomli_w.dumps(data))
            progress(f"calibrate {grid.paper} {case.id} x{scale:g} ({scheme}, {duration_s:.0f} s)")
            meta = runner.run_scheme(cfg, grid.algorithm(scheme), path, duration_s,
                                     progress=lambda m: progress(f"  {m}"), target=case.target)
            fid = meta.fidelity or {}
            valid = meta.ok and fid.get("valid") is True
            rows.append({"case": case.id, "scale": scale, "scheme": scheme, "valid": int(valid),
                         "summary": fid.get("summary", "no fidelity verdict"),
                         "params": json.dumps(trial.params)})
            if valid:
                chosen = scale
                break
        rows.append({"case": case.id, "scale": chosen if chosen is not None else "", "scheme": scheme,
                     "valid": "", "summary": "chosen" if chosen is not None else "no scale held",
                     "params": ""})
    csv_path = out_root / f"{grid.paper}-calibration.csv"
    with csv_path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["case", "scale", "scheme", "valid", "summary", "params"])
        w.writeheader()
        w.writerows(rows)
    md = out_root / f"{grid.paper}-calibration.md"
    lines = [f"# Calibration: {grid.paper}", "",
             f"Per case, a {duration_s:g} s run of its first scheme at each rate scale (rates x scale, "
             "delays / scale: same BDP and buffer in packets), largest first, until every fidelity "
             "invariant held (docs/reproduce.md).", "",
             "| case | scale | valid | fidelity |", "|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['case']} | {r['scale']} | {r['valid']} | {r['summary'][:200]} |")
    md.write_text("\n".join(lines) + "\n")
    return md
