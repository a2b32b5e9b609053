#!/usr/bin/env python3
"""OBP in simulation: the parking lot of the OBP paper, and the cases behind it.

Runs the scenarios of :mod:`hosts.sim.scenarios` (the real transport and
algorithms; every port stamps OBP's narrow link and AB = IC - BR - BI, eq. 6, with
BR the bytes it *received* in the last 10 ms) for several seeds and prints means.
The parking lot: a long flow over 3 bottlenecks of 10 Mb/s, one cross flow each.

Cases (``--case``, several allowed; default: all):

* ``limited``: cross flows application limited at 3 Mb/s of payload, so the long
  flow's max-min share is 10 - 3.31 = 6.69 Mb/s of frames;
* ``limited-loss``: the same with 1 % random loss on every bottleneck, OBP with the
  project's loss rule and as the paper's sender (``unexplained_loss_factor=1``; also
  with the old floor ``min_segments_per_rtt=1``);
* ``greedy``: greedy cross flows (the scenario's), max-min share 5 Mb/s;
* ``greedy-loss``: the same with 0.5 % random loss on every bottleneck;
* ``single``: one bottleneck, two greedy flows (OBP's fairness on one link);
* ``one-link-ab``: greedy, but only the middle bottleneck stamps the long flow
  (an experiment: it sees one link's AB instead of the path's minimum);
* ``share-floor``: greedy, OBP with the EBN share floor (a named deviation:
  TR never below share_floor x the path's EBN share) at 0.5, 0.8 and 0.9;
* ``ab-window``: greedy with AB measured over 16.4 ms (the switch's default), 50
  and 200 ms;
* ``hidden``: one flow through a 10 Mb/s BWN port and a 5 Mb/s port without BWN,
  for unexplained_loss_factor 1, 0.85, 0.7, 0.5.

    .venv/bin/python benchmarks/obp_parking_lot_sim.py --seeds 5
    .venv/bin/python benchmarks/obp_parking_lot_sim.py --seeds 3 --case greedy --case single
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any, Dict, List, Optional, Sequence

from hosts.sim.scenarios import hidden_bottleneck, max_min_long_share_mbps, parking_lot

PAPER_LOSS = ("unexplained_loss_factor=1",)
OLD_FLOOR = ("unexplained_loss_factor=1", "min_segments_per_rtt=1")
# case -> [(label, parking_lot keyword arguments)]
CASES: Dict[str, List[tuple]] = {
    "limited": [("OBP", dict(cross_app_rate_bps=3e6)),
                ("NewReno", dict(cross_app_rate_bps=3e6, algo="newreno"))],
    "limited-loss": [("OBP", dict(cross_app_rate_bps=3e6, loss=0.01)),
                     ("OBP, paper's loss handling", dict(cross_app_rate_bps=3e6, loss=0.01,
                                                         params=PAPER_LOSS)),
                     ("OBP, paper's, old floor", dict(cross_app_rate_bps=3e6, loss=0.01,
                                                      params=OLD_FLOOR)),
                     ("NewReno", dict(cross_app_rate_bps=3e6, loss=0.01, algo="newreno"))],
    "greedy": [("OBP", dict()), ("NewReno", dict(algo="newreno"))],
    "greedy-loss": [("OBP", dict(loss=0.005)),
                    ("OBP, paper's loss handling", dict(loss=0.005, params=PAPER_LOSS)),
                    ("OBP, paper's, old floor", dict(loss=0.005, params=OLD_FLOOR)),
                    ("NewReno", dict(loss=0.005, algo="newreno"))],
    "single": [("OBP, one bottleneck", dict(bottlenecks=1))],
    "one-link-ab": [("OBP, long flow sees b2's AB only", dict(long_sees_only_link=2))],
    "share-floor": [(f"OBP, share_floor={f:g}", dict(params=(f"share_floor={f}",)))
                    for f in (0.5, 0.8, 0.9)],
    "ab-window": [(f"OBP, AB over {ms:g} ms", dict(ab_period_us=int(ms * 1000)))
                  for ms in (16.384, 50, 200)],
}
HIDDEN_FACTORS = (1.0, 0.85, 0.7, 0.5)


def run_parking(args: argparse.Namespace, case: str) -> None:
    print(f"\ncase {case} ({args.seeds} seeds x {args.duration - args.warmup:g} s measured, "
          f"{'no SACK' if args.no_sack else 'SACK'}); Mb/s of frames")
    print(f"{'sender':36} {'share':>6} {'long':>6} {'(sd)':>5} {'%share':>7} {'cross':>6} "
          f"{'retx long':>9} {'retx all':>8} {'RTOs long':>9}")
    for label, kw in CASES[case]:
        t0 = time.process_time()
        longs: List[Any] = []
        crosses: List[float] = []
        retx_all: List[int] = []
        for seed in range(1, args.seeds + 1):
            res = parking_lot(seed=seed, duration_s=args.duration, warmup_s=args.warmup,
                              sack=not args.no_sack, **kw)
            longs.append(res.by_name()["long"])
            crosses += [f.frame_mbps for f in res.flows if f.name != "long"]
            retx_all.append(sum(f.retransmits for f in res.flows))
        share = max_min_long_share_mbps(kw.get("cross_app_rate_bps"))
        lm = [f.frame_mbps for f in longs]
        print(f"{label:36} {share:6.2f} {statistics.mean(lm):6.2f} "
              f"{(statistics.stdev(lm) if len(lm) > 1 else 0):5.2f} "
              f"{100 * statistics.mean(lm) / share:6.0f}% {statistics.mean(crosses):6.2f} "
              f"{statistics.mean(f.retransmits for f in longs):9.0f} "
              f"{statistics.mean(retx_all):8.0f} "
              f"{statistics.mean(f.timeouts for f in longs):9.1f}   "
              f"({time.process_time() - t0:.0f} s CPU)", flush=True)


def run_hidden(args: argparse.Namespace) -> None:
    print(f"\ncase hidden ({args.seeds} seeds x 30 s measured): one OBP flow, BWN 10 Mb/s "
          f"then a 5 Mb/s port without BWN")
    print(f"{'unexplained_loss_factor':24} {'Mb/s':>6} {'retx/sent':>10} {'RTOs':>6}")
    for factor in HIDDEN_FACTORS:
        rs = [hidden_bottleneck(seed=seed, params=[f"unexplained_loss_factor={factor}"],
                                sack=not args.no_sack).flows[0]
              for seed in range(1, args.seeds + 1)]
        print(f"{factor:<24g} {statistics.mean(f.frame_mbps for f in rs):6.2f} "
              f"{statistics.mean(f.retransmits / max(f.packets_sent, 1) for f in rs):10.3f} "
              f"{statistics.mean(f.timeouts for f in rs):6.1f}", flush=True)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.splitlines()[2:]))
    p.add_argument("--seeds", type=int, default=5, help="seeds 1..N (default 5)")
    p.add_argument("--duration", type=float, default=60.0, help="simulated seconds (default 60)")
    p.add_argument("--warmup", type=float, default=20.0, help="seconds not measured (default 20)")
    p.add_argument("--case", action="append", choices=tuple(CASES) + ("hidden",),
                   help="which case(s); default all")
    p.add_argument("--no-sack", action="store_true", help="NewReno recovery (bwn-send --no-sack)")
    args = p.parse_args(argv)
    if args.seeds < 1 or args.duration <= args.warmup:
        p.error("need --seeds >= 1 and --duration > --warmup")
    for case in args.case or list(CASES) + ["hidden"]:
        if case == "hidden":
            run_hidden(args)
        else:
            run_parking(args, case)
    return 0


if __name__ == "__main__":
    sys.exit(main())
