#!/usr/bin/env python3
"""GTCP paper sec. IV-A in simulation: 3 reserved + 3 best-effort flows on 10 Mb/s.

Runs :func:`hosts.sim.scenarios.gtcp_reservations` (the real transport and
algorithms over the simulated network with the RFC 2597 edge model the switch
implements: one FIFO, token-bucket marking at the reserved rate, out-of-profile
and best-effort packets dropped above a threshold, in-profile ones only when the
queue is full) for several seeds and prints the mean per-flow throughputs:

* frames: the frame bit rate that carried the delivered payload (the unit of the
  edge meter and of the paper's 4.5 / 2.5 / 1.5 Mb/s),
* payload: goodput (frames * 1000 / 1102 for full segments),
* in-profile: what the meter marked in profile,

for the paper's cwnd_G (``rtt_base``) and, with ``--variant srtt``, cwnd_G from the
smoothed RTT (docs/algorithms.md, GTCP).

    .venv/bin/python benchmarks/gtcp_sim.py --seeds 5
    .venv/bin/python benchmarks/gtcp_sim.py --seeds 5 --variant srtt --no-sack
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Dict, List

from hosts.sim.scenarios import GTCP_RESERVATIONS_MBIT, FlowResult, gtcp_reservations


def main(argv: List[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.splitlines()[2:]))
    p.add_argument("--seeds", type=int, default=5, help="seeds 1..N (default 5)")
    p.add_argument("--duration", type=float, default=60.0, help="simulated seconds (default 60)")
    p.add_argument("--warmup", type=float, default=10.0, help="seconds not measured (default 10)")
    p.add_argument("--variant", choices=("base", "srtt", "both"), default="both",
                   help="cwnd_G from rtt_base (the paper), from srtt, or both (default)")
    p.add_argument("--no-sack", action="store_true", help="NewReno recovery (bwn-send --no-sack)")
    p.add_argument("--af-threshold", type=int, default=30,
                   help="queue length (packets) above which out-of-profile packets drop (default 30 of 60)")
    p.add_argument("--best-effort", default="newreno", help="algorithm of the 3 best-effort flows")
    args = p.parse_args(argv)
    if args.seeds < 1 or args.duration <= args.warmup:
        p.error("need --seeds >= 1 and --duration > --warmup")
    excess = (10.0 - sum(GTCP_RESERVATIONS_MBIT)) / 6
    targets = {f"g{int(r)}": r + excess for r in GTCP_RESERVATIONS_MBIT}
    targets.update({f"be{i}": excess for i in (1, 2, 3)})
    variants = ["base", "srtt"] if args.variant == "both" else [args.variant]
    for variant in variants:
        t0 = time.process_time()
        rows: Dict[str, List[FlowResult]] = {}
        for seed in range(1, args.seeds + 1):
            res = gtcp_reservations(seed=seed, duration_s=args.duration, warmup_s=args.warmup,
                                    sack=not args.no_sack, best_effort=args.best_effort,
                                    af_threshold_packets=args.af_threshold,
                                    gtcp_params=[f"cwnd_g_rtt={variant}"])
            for f in res.flows:
                rows.setdefault(f.name, []).append(f)
        print(f"\ncwnd_G from {'rtt_base (paper)' if variant == 'base' else 'srtt (variant)'}, "
              f"{'no SACK' if args.no_sack else 'SACK'}, AF threshold {args.af_threshold}/60, "
              f"{args.seeds} seeds x {args.duration - args.warmup:g} s measured "
              f"({time.process_time() - t0:.0f} s CPU)")
        print(f"{'flow':5} {'target':>7} {'frames':>7} {'(sd)':>6} {'payload':>8} {'in-prof':>8} "
              f"{'retx':>6} {'RTOs':>5} {'forced':>7}")
        for name, fs in rows.items():
            fr = [f.frame_mbps for f in fs]
            print(f"{name:5} {targets[name]:7.2f} {statistics.mean(fr):7.2f} "
                  f"{(statistics.stdev(fr) if len(fr) > 1 else 0):6.2f} "
                  f"{statistics.mean(f.goodput_mbps for f in fs):8.2f} "
                  f"{statistics.mean(f.in_profile_mbps for f in fs):8.2f} "
                  f"{statistics.mean(f.retransmits for f in fs):6.0f} "
                  f"{statistics.mean(f.timeouts for f in fs):5.1f} "
                  f"{statistics.mean(f.forced_segments for f in fs):7.0f}")
    print("\nMb/s; target = reservation + (10 - 7) / 6, the paper's 4.5 / 2.5 / 1.5 (frames).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
