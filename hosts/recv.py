"""``bwn-recv``: receive reliable flows from bwn-send on one UDP port.

Writes each flow's stream to ``--out`` exactly as sent, acknowledges every
segment (or, with ``--delayed-ack``, every second one within 40 ms), and echoes
the BWN forward section it received in every ACK. Exit status: 0, or 1 when
``--once`` ended with an incomplete flow, 2 on a usage error. See docs/transport.md.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

from bwn.protocol.wire import BWN_UDP_PORT

from hosts.flowlog import DEFAULT_LOG_INTERVAL_US, RECEIVER_FIELDS, TimeSeriesLog, log_format_for
from bwn.cliargs import OneLineErrorParser

from hosts.send import nonneg_float, parse_size
from hosts.startup import write_ready_file
from hosts.transport.loop import (
    SignalWakeup,
    now_us,
    open_udp_socket,
    parse_addr,
    receiver_emitter,
    run_receiver,
)
from hosts.transport.reassembly import FileSink, ReceiverFlow, Sink
from hosts.transport.receiver import (
    DEFAULT_DELACK_US,
    DEFAULT_HALF_OPEN_TIMEOUT_US,
    DEFAULT_IDLE_TIMEOUT_US,
    DEFAULT_MAX_FLOWS,
    DEFAULT_MAX_HALF_OPEN,
    DEFAULT_MAX_OOO_BYTES,
    DEFAULT_WINDOW_BYTES,
    Receiver,
)

PROG = "bwn-recv"
MAX_DELACK_MS = 200.0
WARN_INTERVAL_US = 10_000_000   # at most one "unusable datagrams" warning per 10 s
#: Receiver counters that mean someone sent something this receiver cannot use.
GARBAGE_KEYS = ("malformed", "unknown_flow", "unknown_rst", "half_open_evicted",
                "flows_refused", "ooo_dropped_budget")


def _window(text: str) -> int:
    value = parse_size(text)
    if not 1 <= value <= 0xFFFFFFFF:
        raise argparse.ArgumentTypeError(f"must be 1..4294967295 bytes, got {text!r}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"needs a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text!r}")
    return value


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"needs a number of seconds, got {text!r}") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be > 0 seconds, got {text!r}")
    return value


def format_stats(stats: Dict[str, int]) -> str:
    """One line of receiver counters, the non-zero ones."""
    parts = [f"{k} {v}" for k, v in stats.items() if v and k != "datagrams"]
    return f"{stats.get('datagrams', 0)} datagrams" + (", " + ", ".join(parts) if parts else "")


def build_parser() -> argparse.ArgumentParser:
    p = OneLineErrorParser(
        prog=PROG,
        description=(
            "Receive reliable flows sent by bwn-send (UDP + BWN header + transport header, "
            "docs/transport.md): reassemble each stream, acknowledge it, echo the BWN "
            "forward section in every ACK, and write it to --out. Any number of "
            "concurrent flows, told apart by (source address, source port, flow id)."),
        epilog="Exit status: 0; 1 if --once ended with an incomplete flow; 2 usage error.",
    )
    p.add_argument("--listen", metavar="ADDR:PORT", default=f"0.0.0.0:{BWN_UDP_PORT}",
                   help=f"address to listen on (default 0.0.0.0:{BWN_UDP_PORT}, the port BWN "
                        "switches stamp; port 0 picks a free one, printed on stderr)")
    p.add_argument("--out", metavar="FILE",
                   help="write the received stream here; '{flow_id}' in the name is replaced "
                        "by the flow id, otherwise the first flow writes FILE and later flows "
                        "FILE.<flow_id>. Without --out the bytes are only counted")
    p.add_argument("--delayed-ack", action="store_true",
                   help="delayed ACKs (RFC 1122/5681): ACK every 2nd in-order segment or after "
                        "--delack-ms; out-of-order data is still ACKed at once")
    p.add_argument("--delack-ms", type=nonneg_float, default=DEFAULT_DELACK_US / 1000,
                   metavar="MS", help=f"delayed-ACK timeout (default 40, at most {MAX_DELACK_MS:g})")
    p.add_argument("--window-bytes", type=_window, default=DEFAULT_WINDOW_BYTES, metavar="N",
                   help="receive window advertised to senders (default 4Mi)")
    p.add_argument("--log", metavar="FILE",
                   help="per-flow receive time series, .csv or .jsonl")
    p.add_argument("--log-interval-ms", type=nonneg_float,
                   default=DEFAULT_LOG_INTERVAL_US / 1000, metavar="MS",
                   help="at most one log row per flow per this many ms (default 10)")
    p.add_argument("--once", action="store_true",
                   help="exit after the first flow has ended (after --linger)")
    p.add_argument("--linger", type=nonneg_float, default=1.0, metavar="SECONDS",
                   help="with --once: keep answering retransmitted FINs this long (default 1)")
    p.add_argument("--ready-file", metavar="FILE",
                   help="create FILE (holding the pid) once listening (for a runner "
                        "that waits until its agents are up)")
    p.add_argument("--summary-json", metavar="FILE",
                   help="write the summaries of all flows as a JSON list on exit")
    p.add_argument("--stats-json", metavar="FILE",
                   help="write the receiver-wide counters on exit (datagrams by kind: "
                        "malformed, unknown flow, SYNs, half-open flows expired/evicted, "
                        "refused flows, out-of-order data dropped; docs/transport.md)")
    p.add_argument("--max-flows", type=_count, default=DEFAULT_MAX_FLOWS, metavar="N",
                   help=f"open flows at most (default {DEFAULT_MAX_FLOWS}); the first DATA "
                        "of one more is answered by RST. Each open flow may hold an --out file")
    p.add_argument("--max-half-open", type=_count, default=DEFAULT_MAX_HALF_OPEN, metavar="N",
                   help=f"flows that sent a SYN but no data yet, at most (default "
                        f"{DEFAULT_MAX_HALF_OPEN}); a new SYN evicts the oldest. They time out "
                        f"after {DEFAULT_HALF_OPEN_TIMEOUT_US // 1_000_000} s")
    p.add_argument("--max-ooo-bytes", type=parse_size, default=DEFAULT_MAX_OOO_BYTES,
                   metavar="N", help="out-of-order data held for all flows together, at most "
                                     "(default 64Mi); beyond it segments are not stored")
    p.add_argument("--idle-timeout", type=_positive_seconds,
                   default=DEFAULT_IDLE_TIMEOUT_US / 1e6, metavar="SECONDS",
                   help=f"close a flow that sent nothing for this long (default "
                        f"{DEFAULT_IDLE_TIMEOUT_US // 1_000_000})")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")
    return p


class OutputFiles:
    """Chooses each flow's output file from --out."""

    def __init__(self, pattern: Optional[str]) -> None:
        self.pattern = pattern
        self.used: set = set()

    def __call__(self, addr: Tuple[str, int], flow_id: int) -> Sink:
        if self.pattern is None:
            return Sink()
        if "{flow_id}" in self.pattern:
            path = self.pattern.replace("{flow_id}", str(flow_id))
        elif not self.used:
            path = self.pattern
        else:
            path = f"{self.pattern}.{flow_id}"
        base, k = path, 1
        while path in self.used:
            path = f"{base}.{k}"
            k += 1
        self.used.add(path)
        return FileSink(path)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    try:
        listen = parse_addr(args.listen, BWN_UDP_PORT)
    except ValueError as exc:
        p.error(str(exc))
    if args.delack_ms > MAX_DELACK_MS:
        p.error(f"--delack-ms must be at most {MAX_DELACK_MS:g} (RFC 1122 / RFC 5681)")
    if args.out is not None:
        out_dir = os.path.dirname(os.path.abspath(args.out))
        if not os.path.isdir(out_dir) or not os.access(out_dir, os.W_OK):
            p.error(f"cannot write --out {args.out!r}: no writable directory {out_dir!r}")
    if args.log is not None:
        try:
            log_format_for(args.log)
        except ValueError as exc:
            p.error(str(exc))
    try:
        log = (TimeSeriesLog(args.log, RECEIVER_FIELDS, int(args.log_interval_ms * 1000))
               if args.log else None)
    except OSError as exc:
        p.error(f"cannot write --log file: {exc}")
    try:
        sock = open_udp_socket(bind=listen)
    except OSError as exc:
        print(f"{PROG}: error: cannot listen on {args.listen}: {exc}", file=sys.stderr)
        return 1
    try:
        write_ready_file(args.ready_file)
    except OSError as exc:
        sock.close()
        print(f"{PROG}: error: cannot write --ready-file {args.ready_file}: {exc.strerror or exc}",
              file=sys.stderr)
        return 1

    summaries: List[Dict[str, Any]] = []
    ended: List[Tuple[ReceiverFlow, int]] = []

    def on_flow_end(flow: ReceiverFlow) -> None:
        t = now_us()
        summary = flow.summary(t)
        summaries.append(summary)
        ended.append((flow, t))
        if not args.quiet:
            gp = summary["goodput_bps"]
            print(f"{PROG}: flow {summary['flow_id']} from {summary['peer']} {summary['status']}: "
                  f"{summary['bytes']} bytes in {summary['duration_s']:.3f} s"
                  + (f", {gp / 1e6:.3f} Mb/s" if gp else "")
                  + (f" -> {summary['out']}" if summary["out"] else ""), flush=True)

    receiver = Receiver(
        receiver_emitter(sock), OutputFiles(args.out),
        window_bytes=args.window_bytes, delayed_ack=args.delayed_ack,
        delack_us=int(args.delack_ms * 1000), log=log, on_flow_end=on_flow_end,
        max_flows=args.max_flows, max_half_open=args.max_half_open,
        max_ooo_bytes=args.max_ooo_bytes, idle_timeout_us=int(args.idle_timeout * 1e6))
    linger_us = int(args.linger * 1e6)
    warned = {"at_us": 0, "garbage": 0}

    def garbage_count() -> int:
        stats = receiver.stats_dict()
        return sum(stats[k] for k in GARBAGE_KEYS)

    def should_stop(t: int) -> bool:
        if not args.quiet and t - warned["at_us"] >= WARN_INTERVAL_US:
            g = garbage_count()
            if g > warned["garbage"]:
                print(f"{PROG}: warning: {g - warned['garbage']} datagrams this receiver could "
                      f"not use since the last report ({format_stats(receiver.stats_dict())})",
                      file=sys.stderr, flush=True)
                warned["garbage"] = g
            warned["at_us"] = t
        return bool(args.once and ended and t - ended[0][1] >= linger_us)

    bound = sock.getsockname()
    if not args.quiet:
        print(f"{PROG}: listening on {bound[0]}:{bound[1]}", file=sys.stderr, flush=True)
    try:
        with SignalWakeup() as wake:
            run_receiver(receiver, sock, wake, should_stop)
    finally:
        receiver.close_all(now_us())
        sock.close()
        if log is not None:
            log.close()
    stats = receiver.stats_dict()
    if not args.quiet:
        print(f"{PROG}: receiver: {format_stats(stats)}", flush=True)
    if args.summary_json:
        with open(args.summary_json, "w") as fh:
            json.dump(summaries, fh, indent=2)
            fh.write("\n")
    if args.stats_json:
        with open(args.stats_json, "w") as fh:
            json.dump(stats, fh, indent=2)
            fh.write("\n")
    if args.once and ended and ended[0][0].summary(now_us())["status"] != "complete":
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
