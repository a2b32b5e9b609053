#!/usr/bin/env python3
"""OBP's parking lot in simulation: a long flow over 3 bottlenecks of 10 Mb/s.

Runs :func:`bwn.hosts.netsim_scenarios.parking_lot` (the real transport and
algorithms; every port stamps OBP's narrow link and AB = IC - BR - BI, eq. 6,
with BR the bytes it *received* in the last 10 ms) for several seeds and prints
the long flow's throughput against its max-min fair share, and the cross flows'.

Cases (``--case``):

* ``limited``: cross flows application limited at 3 Mb/s of payload, so the long
  flow's max-min share is 10 - 3.31 = 6.69 Mb/s of frames;
* ``limited-loss``: the same with 1 % random loss on every bottleneck (losses the
  feedback does not explain), OBP as issue 10 made it and as the paper's sender
  (``unexplained_loss_factor=1``, and the old floor ``min_segments_per_rtt=1``);
* ``greedy``: greedy cross flows (the scenario's), max-min share 5 Mb/s;
* ``greedy-loss``: the same with 0.5 % random loss on every bottleneck;
* ``all`` (default): all four.

    .venv/bin/python benchmarks/obp_parking_lot_sim.py --seeds 5
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Dict, List, Optional, Sequence, Tuple

from bwn.hosts.netsim_scenarios import FlowResult, max_min_long_share_mbps, parking_lot

CASES: Dict[str, List[Tuple[str, str, Sequence[str], Optional[float], float]]] = {
    # label, algo, params, cross app rate (payload b/s), loss per bottleneck
    "limited": [("OBP", "obp", (), 3e6, 0.0),
                ("NewReno", "newreno", (), 3e6, 0.0)],
    "limited-loss": [("OBP", "obp", (), 3e6, 0.01),
                     ("OBP, paper's loss handling", "obp", ("unexplained_loss_factor=1",), 3e6, 0.01),
                     ("OBP, paper's loss handling, old floor", "obp",
                      ("unexplained_loss_factor=1", "min_segments_per_rtt=1"), 3e6, 0.01),
                     ("NewReno", "newreno", (), 3e6, 0.01)],
    "greedy": [("OBP", "obp", (), None, 0.0),
               ("NewReno", "newreno", (), None, 0.0)],
    "greedy-loss": [("OBP", "obp", (), None, 0.005),
                    ("OBP, paper's loss handling", "obp", ("unexplained_loss_factor=1",), None, 0.005),
                    ("OBP, paper's loss handling, old floor", "obp",
                     ("unexplained_loss_factor=1", "min_segments_per_rtt=1"), None, 0.005),
                    ("NewReno", "newreno", (), None, 0.005)],
}


def main(argv: List[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.splitlines()[2:]))
    p.add_argument("--seeds", type=int, default=5, help="seeds 1..N (default 5)")
    p.add_argument("--duration", type=float, default=60.0, help="simulated seconds (default 60)")
    p.add_argument("--warmup", type=float, default=20.0, help="seconds not measured (default 20)")
    p.add_argument("--case", choices=("all",) + tuple(CASES), default="all")
    p.add_argument("--no-sack", action="store_true", help="NewReno recovery (bwn-send --no-sack)")
    args = p.parse_args(argv)
    if args.seeds < 1 or args.duration <= args.warmup:
        p.error("need --seeds >= 1 and --duration > --warmup")
    cases = list(CASES) if args.case == "all" else [args.case]
    for case in cases:
        print(f"\ncase {case} ({args.seeds} seeds x {args.duration - args.warmup:g} s measured, "
              f"{'no SACK' if args.no_sack else 'SACK'}); Mb/s of frames")
        print(f"{'sender':40} {'share':>6} {'long':>6} {'(sd)':>5} {'% share':>8} {'cross':>6} "
              f"{'retx long':>9} {'retx all':>8} {'RTOs':>5}")
        for label, algo, params, app, loss in CASES[case]:
            t0 = time.process_time()
            longs: List[FlowResult] = []
            crosses: List[float] = []
            retx_all: List[int] = []
            for seed in range(1, args.seeds + 1):
                res = parking_lot(seed=seed, duration_s=args.duration, warmup_s=args.warmup,
                                  algo=algo, params=params, sack=not args.no_sack,
                                  cross_app_rate_bps=app, loss=loss)
                flows = res.by_name()
                longs.append(flows["long"])
                crosses += [f.frame_mbps for f in res.flows if f.name != "long"]
                retx_all.append(sum(f.retransmits for f in res.flows))
            share = max_min_long_share_mbps(app)
            lm = [f.frame_mbps for f in longs]
            print(f"{label:40} {share:6.2f} {statistics.mean(lm):6.2f} "
                  f"{(statistics.stdev(lm) if len(lm) > 1 else 0):5.2f} "
                  f"{100 * statistics.mean(lm) / share:7.0f}% {statistics.mean(crosses):6.2f} "
                  f"{statistics.mean(f.retransmits for f in longs):9.0f} "
                  f"{statistics.mean(retx_all):8.0f} "
                  f"{statistics.mean(f.timeouts for f in longs):5.1f}   "
                  f"({time.process_time() - t0:.0f} s CPU)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
