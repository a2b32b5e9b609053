#!/usr/bin/env python3
"""The largest parking lot that keeps every fidelity invariant, per switch target.

    sudo .venv/bin/python benchmarks/parking_lot_scale.py --target ebpf \\
        --sizes 3x10,3x20,5x10 [--schemes obp] [--seeds 1] [--duration 30] [--out build/parking-scale]
    sudo .venv/bin/python benchmarks/parking_lot_scale.py --target ebpf --sizes 3x11.02 \\
        --seeds 1,2,3 --schemes obp,newreno,reno --duration 60
    sudo .venv/bin/python benchmarks/parking_lot_scale.py --target ebpf --grid-case f8-n3 --seeds 1

A parking lot of N bottlenecks (the OBP paper's Fig. 8 topology, as the obp grid's
`parking-lot` template with N instead of 3): switches s1..s(N+1) in a line joined
by bottleneck links of R Mb/s (10 ms, 100 packets each), a long flow h0 -> h9 across
all of them and one cross flow per bottleneck (x_i -> x_(i+1), 5 ms access links);
every link has its bwn-link emulator (one shared `bwn-links` process above three
bottlenecks, `[experiment] linkem_shared`; the cross flows start 0.5 i / N s in).
`--sizes` lists NxR points (3x11.02: the paper's 1250 packets/s of 1000-byte
packets, as the obp grid scales 10 Mb/s); each is run once per seed and scheme
with `bwn run --target T`, and the table says whether every invariant held
(docs/fidelity.md) and, when not, which broke, with the CPU's mean busy share, the
longest stretch without idle CPU, and the bottlenecks' utilization.

`--grid-case ID` instead runs that case of the obp grid (topologies/reproduce/obp.toml,
e.g. `f8-n3`) as `bwn reproduce obp` renders it, per seed and scheme, on the target.

Every run's folder (run.json, flows, telemetry, logs) stays under --out. A second
table gives the obp grid's parking-lot metrics of each run (the bottlenecks'
utilization, the long flow's goodput over its max-min share, retransmissions:
bwn.analysis.metrics). `--report` prints both tables for the runs already made
under OUT/TARGET, running nothing.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bwn import requirements  # noqa: E402


def parking_lot(n: int, rate_mbit: float, delay_ms: float = 10.0, queue_packets: int = 100,
                duration_s: float = 30.0, seed: int = 1) -> dict[str, Any]:
    """The scenario (TOML data) of an n-bottleneck parking lot at rate_mbit."""
    if n < 1:
        raise ValueError("a parking lot has at least one bottleneck")
    switches = [{"name": f"s{i}", "device_id": i} for i in range(1, n + 2)]
    hosts = [{"name": "h0", "ip": "10.0.10.1/24"}, {"name": "h9", "ip": "10.0.19.1/24"}]
    hosts += [{"name": f"x{i}", "ip": f"10.0.{20 + i}.1/24"} for i in range(1, n + 2)]
    access = {"kind": "constant", "rate_mbit": 100}
    links = [{"a": "h0", "b": "s1", "delay_ms": 1, "schedule": access},
             {"a": "h9", "b": f"s{n + 1}", "delay_ms": 1, "schedule": access}]
    links += [{"a": f"x{i}", "b": f"s{i}", "delay_ms": 5, "schedule": access} for i in range(1, n + 2)]
    links += [{"name": f"b{i}", "a": f"s{i}", "b": f"s{i + 1}", "delay_ms": delay_ms, "queue_packets": queue_packets,
               "schedule": {"kind": "constant", "rate_mbit": rate_mbit}} for i in range(1, n + 1)]
    flows = [{"name": "long", "src": "h0", "dst": "h9"}]
    flows += [{"name": f"cross{i}", "src": f"x{i}", "dst": f"x{i + 1}", "start_s": round(0.5 * i / n, 3)}
              for i in range(1, n + 1)]
    return {"experiment": {"name": f"parking-{n}x{rate_mbit:g}", "duration_s": duration_s, "sack": False,
                           "seed": seed, "linkem_shared": n > 3},
            "switches": switches, "hosts": hosts, "links": links, "flows": flows}


def verdict(meta: dict[str, Any]) -> dict[str, Any]:
    """What the table shows of one run."""
    fid = meta.get("fidelity") or {}
    checks = fid.get("checks") or {}
    cpu = checks.get("cpu") or {}
    items = (cpu.get("items") or [{}])[0]
    ports = (fid.get("measurements") or {}).get("ports") or {}
    per_link: dict[str, float] = {}        # a bottleneck's data direction (the other carries ACKs)
    for p in ports.values():
        link = str(p.get("link", ""))
        if link.startswith("b") and p.get("utilization") is not None:
            per_link[link] = max(per_link.get(link, 0.0), p["utilization"])
    util = list(per_link.values())
    return {"valid": fid.get("valid") is True and bool(meta.get("ok")),
            "broken": ",".join(fid.get("broken") or []) or "-",
            "cpu_busy": items.get("mean_busy"), "no_idle_s": cpu.get("value"),
            "utilization": round(sum(util) / len(util), 3) if util else None,
            "lateness_p99_us": (checks.get("linkem_lateness") or {}).get("value")}


# What the obp grid judges of its parking lot (topologies/reproduce/obp.toml's claims):
# the bottlenecks' utilization (b1..bN), the long flow's share, retransmissions.
METRICS = ("link_utilization", "share_fraction:long", "retransmissions:all")


def metrics(path: Path, scheme: str) -> dict[str, Any]:
    """The obp grid's parking-lot metrics of one run folder (bwn.analysis.metrics)."""
    from bwn.analysis import metrics as mt
    from bwn.analysis import report
    meta = json.loads((path / "run.json").read_text())
    ports = ((meta.get("fidelity") or {}).get("measurements") or {}).get("ports") or {}
    links = sorted({str(p.get("link")) for p in ports.values() if str(p.get("link", "")).startswith("b")},
                   key=lambda name: int(name[1:]) if name[1:].isdigit() else 0)
    run = report.load_scheme_run(path, scheme)
    rows = report.summarize(run)
    names = {METRICS[0]: f"link_utilization:{','.join(links) or 'b1'}"}
    return {m: mt.metric_value(names.get(m, m), run, rows, meta.get("fidelity") or {}, path) for m in METRICS}


def run_one(cfg: Any, scheme: str, out: Path, target: str, progress) -> dict[str, Any]:
    from bwn.emulation import runner
    meta = runner.run_scheme(cfg, scheme, out, cfg.duration_s, progress=progress, target=target)
    return verdict(meta)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", choices=("bmv2", "ebpf"), default="ebpf")
    ap.add_argument("--sizes", default="3x10", help="NxR points: N bottlenecks of R Mb/s, comma-separated")
    ap.add_argument("--schemes", default="obp", help="comma-separated schemes for every flow")
    ap.add_argument("--duration", type=float, default=30.0, help="seconds per run")
    ap.add_argument("--grid-case", help="run this case of the obp grid instead of --sizes")
    ap.add_argument("--seeds", default="1", help="comma-separated seeds: each size or case runs once per seed")
    ap.add_argument("--out", type=Path, default=REPO / "build" / "parking-scale")
    ap.add_argument("--report", action="store_true", help="print the tables of the runs under --out; run nothing")
    args = ap.parse_args(argv)
    if args.report:
        return report(args.out / args.target, args.target)
    why = requirements.experiment_missing(args.target)
    if why:
        print(f"parking_lot_scale: cannot run here: {why}", file=sys.stderr)
        return 3
    import logging

    import tomli_w
    from mininet.log import setLogLevel

    from bwn.scenario.config import validate
    setLogLevel("warning")
    logging.getLogger("finsy").setLevel(logging.ERROR)
    schemes = [s for s in args.schemes.split(",") if s]
    seeds = [int(s) for s in args.seeds.split(",") if s]
    runs: list[tuple[str, Any, str, Path]] = []
    if args.grid_case:
        from bwn.reproduce import grid as gr
        from bwn.reproduce.plan import config_for
        grid = gr.load_grid("obp")
        case = next((c for c in grid.cases if c.id == args.grid_case), None)
        if case is None:
            ap.error(f"no case {args.grid_case!r} in the obp grid ({', '.join(c.id for c in grid.cases)})")
        for seed in seeds:
            for scheme in schemes:
                data, cfg = config_for(grid, case, seed, scheme, quick=False)
                path = args.out / args.target / case.id / f"seed{seed}" / scheme.replace(":", "_")
                path.mkdir(parents=True, exist_ok=True)
                (path / "scenario.toml").write_text(tomli_w.dumps(data))
                runs.append((f"{case.id} seed {seed}", cfg, scheme, path))
    else:
        for size in args.sizes.split(","):
            n, rate = size.lower().split("x")
            for seed in seeds:
                data = parking_lot(int(n), float(rate), duration_s=args.duration, seed=seed)
                for scheme in schemes:
                    path = args.out / args.target / f"{n}x{rate}" / f"seed{seed}" / scheme.replace(":", "_")
                    path.mkdir(parents=True, exist_ok=True)
                    (path / "scenario.toml").write_text(tomli_w.dumps(data))
                    cfg = validate(data, base_dir=path, source=str(path / "scenario.toml"))
                    runs.append((f"{n} x {rate} Mb/s seed {seed}", cfg, scheme, path))
    rows: list[tuple[str, str, dict[str, Any]]] = []
    for label, cfg, scheme, path in runs:
        print(f"== {label}, {scheme}, {args.target} ({cfg.duration_s:g} s): {path}", flush=True)
        v = run_one(cfg, scheme, path, args.target, lambda m: print(f"   {m}", flush=True))
        v.update(metrics(path, scheme))
        rows.append((label, scheme, v))
        (path / "verdict.json").write_text(json.dumps(v, indent=1) + "\n")
    print_tables(rows, args.target)
    return 0


def report(root: Path, target: str) -> int:
    """The tables of runs already made under ROOT (OUT/TARGET)."""
    rows = []
    for run_json in sorted(root.glob("**/run.json")):
        path = run_json.parent
        scheme = json.loads(run_json.read_text()).get("scheme", path.name)
        v = verdict(json.loads(run_json.read_text()))
        v.update(metrics(path, scheme))
        rows.append((str(path.parent.relative_to(root)), scheme, v))
    if not rows:
        print(f"no runs under {root}", file=sys.stderr)
        return 1
    print_tables(rows, target)
    return 0


def print_tables(rows: list[tuple[str, str, dict[str, Any]]], target: str) -> None:
    print(f"\n| parking lot | scheme | target | every invariant held | broken | CPU busy (mean) "
          f"| longest stretch without idle CPU, s | bwn-link p99 lateness, us | bottleneck utilization |")
    print("|---|---|---|---|---|---|---|---|---|")
    for label, scheme, v in rows:
        print(f"| {label} | {scheme} | {target} | {'yes' if v['valid'] else 'no'} | {v['broken']} | "
              f"{v['cpu_busy'] if v['cpu_busy'] is not None else '-'} | {v['no_idle_s']} | "
              f"{v['lateness_p99_us']} | {v['utilization']} |")
    print("\n| run | scheme | valid | bottleneck utilization (the grid's) | long flow / its max-min share "
          "| retransmissions |")
    print("|---|---|---|---|---|---|")
    for label, scheme, v in rows:
        print(f"| {label} | {scheme} | {'yes' if v['valid'] else 'no'} | {_fmt(v[METRICS[0]], 3)} | "
              f"{_fmt(v[METRICS[1]], 3)} | {_fmt(v[METRICS[2]], 0)} |")


def _fmt(v: Any, digits: int) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


if __name__ == "__main__":
    sys.exit(main())
