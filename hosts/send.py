"""``bwn-send``: send one reliable flow over UDP + BWN with a chosen sender algorithm.

Exit status: 0 when the flow completed (also after SIGINT/SIGTERM, which end the
stream at the bytes already sent), 1 when it failed (no answer, too many timeouts,
reset), 2 on a usage error. See docs/transport.md.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from typing import Any, Dict, Optional, Sequence

from bwn.cliargs import OneLineErrorParser, number
from bwn.protocol.wire import BWN_UDP_PORT

from hosts.cc import registry
from hosts.startup import NotStarted, wait_for_start, write_ready_file
from hosts.flowlog import (
    DEFAULT_LOG_INTERVAL_US,
    SENDER_FIELDS,
    TimeSeriesLog,
    format_summary,
    log_format_for,
)
from hosts.transport.loop import SignalWakeup, now_us, open_udp_socket, parse_addr, run_sender, socket_emitter
from hosts.transport.rto import DEFAULT_INITIAL_RTO_US, DEFAULT_MIN_RTO_US
from hosts.transport.sender import Sender, SenderConfig
from hosts.transport.source import FileSource, PatternSource, StreamSource
from hosts.transport.wire import DEFAULT_MSS_BYTES, MAX_MSS_BYTES

PROG = "bwn-send"

_SUFFIXES = {"k": 1000, "m": 1000**2, "g": 1000**3, "t": 1000**4,
             "ki": 1024, "mi": 1024**2, "gi": 1024**3, "ti": 1024**4}


def parse_size(text: str) -> int:
    """``"1500"``, ``"10M"`` (10**7), ``"4Mi"`` (4 * 2**20) -> bytes (>= 0)."""
    t = text.strip()
    low = t.lower().rstrip("b")
    mult = 1
    for suffix in ("ki", "mi", "gi", "ti", "k", "m", "g", "t"):
        if low.endswith(suffix):
            mult = _SUFFIXES[suffix]
            low = low[: -len(suffix)]
            break
    try:
        value = float(low)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a byte count: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"byte count must be >= 0, got {text!r}")
    total = value * mult
    if total != int(total):
        raise argparse.ArgumentTypeError(f"byte count must be whole bytes, got {text!r}")
    return int(total)


_positive_float = number(float, 0, low_open=True)
nonneg_float = number(float, 0)
_mss = number(int, 1, MAX_MSS_BYTES)
_flow_id = number(int, 0, 0xFFFFFFFF, base=0)


def build_parser() -> argparse.ArgumentParser:
    p = OneLineErrorParser(
        prog=PROG,
        description=(
            "Send one reliable TCP-like byte stream over UDP carrying the BWN header "
            "(docs/transport.md) to a bwn-recv, with the chosen sender algorithm "
            "(congestion control). Prints a summary when the flow ends; SIGINT/SIGTERM "
            "end the stream at the bytes already sent (a second signal aborts)."),
        epilog=(
            "Examples:  bwn-send --algo newreno --dst 10.0.0.2:16983 --bytes 10M  |  "
            "bwn-send --algo ebn --param beta2=1.5 --dst 10.0.0.2 --duration 30 --log ebn.csv  |  "
            "bwn-send --algo gtcp --reserved-rate-mbit 4 --dst 10.0.0.2 --duration 20.  "
            "Exit status: 0 flow complete, 1 flow failed, 2 usage error."),
    )
    p.add_argument("--algo", metavar="NAME",
                   help=f"sender algorithm: {', '.join(registry.ALGORITHMS)} (see --list-algos)")
    p.add_argument("--dst", metavar="ADDR:PORT",
                   help=f"receiver address; the port defaults to {BWN_UDP_PORT}, the port "
                        "BWN switches stamp")
    what = p.add_argument_group("what to send (one of --bytes / --duration, or --input alone)")
    what.add_argument("--bytes", type=parse_size, metavar="N",
                      help="stream length in bytes; suffixes k/M/G (10**3...) and Ki/Mi/Gi "
                           "(2**10...)")
    what.add_argument("--duration", type=_positive_float, metavar="SECONDS",
                      help="send for this long after the handshake, then close the stream")
    what.add_argument("--input", metavar="FILE",
                      help="send this file's bytes (all of it, or its first --bytes); without "
                           "it the stream is the pattern byte[i] = i mod 251")
    p.add_argument("--mss", type=_mss, default=DEFAULT_MSS_BYTES, metavar="BYTES",
                   help=f"payload bytes per segment (default {DEFAULT_MSS_BYTES}: a 1500-byte "
                        "IPv4 packet); xcp and rcp send 24 fewer, the room of their XR header")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="algorithm parameter, repeatable, typed by the algorithm's constructor "
                        "(e.g. --param beta2=1.5 --param variant=gentle); see --list-algos")
    p.add_argument("--reserved-rate-mbit", type=nonneg_float, metavar="R",
                   help="reserved (guaranteed) rate in Mb/s, for gtcp (its rate_g_bps)")
    p.add_argument("--app-rate-mbit", type=_positive_float, metavar="R",
                   help="application-limited source: data becomes available at R Mb/s "
                        "(payload), sent in whole segments as it appears (e.g. a 0.02 Mb/s "
                        "background flow); the algorithm may allow more")
    p.add_argument("--no-sack", action="store_true",
                   help="do not offer SACK: NS-2-like NewReno recovery (one hole per RTT, "
                        "go-back-N after a timeout), the baseline of the papers; by default "
                        "SACK (RFC 2018) and RFC 6675 recovery are used when the receiver "
                        "accepts them")
    p.add_argument("--ecn", action="store_true",
                   help="offer ECN (RFC 3168): if the receiver accepts, data leaves ECN-capable "
                        "(ECT(0)) and an ACK with ECN-Echo halves the window once per window "
                        "of data, as a loss would (the algorithm's on_ecn), with no "
                        "retransmission; for a network whose queues mark (a link's aqm = "
                        "\"red-ecn\")")
    p.add_argument("--flow-id", type=_flow_id, metavar="N",
                   help="32-bit flow id the receiver demultiplexes on (default: random)")
    p.add_argument("--log", metavar="FILE",
                   help="per-flow time series: .csv or .jsonl (cwnd, ssthresh, pacing rate, "
                        "RTT, in flight, delivered, retransmits, estimate, BWN echo)")
    p.add_argument("--log-interval-ms", type=nonneg_float,
                   default=DEFAULT_LOG_INTERVAL_US / 1000, metavar="MS",
                   help="at most one log row per this many ms (default 10; 0: every ACK)")
    p.add_argument("--summary-json", metavar="FILE", help="also write the summary as JSON")
    p.add_argument("--min-rto-ms", type=_positive_float, default=DEFAULT_MIN_RTO_US / 1000,
                   metavar="MS", help="lower bound of the retransmission timeout (default 200; "
                                      "RFC 6298 says 1000, see docs/transport.md)")
    p.add_argument("--initial-rto-ms", type=_positive_float,
                   default=DEFAULT_INITIAL_RTO_US / 1000, metavar="MS",
                   help="RTO before the first RTT sample, also the SYN timer (default 1000)")
    p.add_argument("--connect-timeout", type=_positive_float, default=10.0, metavar="SECONDS",
                   help="give up when no SYN-ACK arrives within this time (default 10)")
    p.add_argument("--bind", metavar="ADDR:PORT", help="local address (default: any)")
    start = p.add_argument_group("start-up (for a runner that launches many agents at once)")
    start.add_argument("--ready-file", metavar="FILE",
                       help="create FILE (holding the pid) once the socket is open and the "
                            "flow is ready to start")
    start.add_argument("--wait-go", action="store_true",
                       help="once ready, wait for a line on stdin before starting (end of "
                            "file or a signal while waiting: exit 1, nothing sent)")
    start.add_argument("--start-delay-s", type=nonneg_float, default=0.0, metavar="SECONDS",
                       help="start the flow this long after being released (default 0)")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")
    p.add_argument("--list-algos", action="store_true",
                   help="list the algorithms with their parameters and exit")
    return p


def _validate(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.algo is None:
        p.error("--algo NAME is required")
    if args.dst is None:
        p.error("--dst ADDR:PORT is required")
    if args.bytes is not None and args.duration is not None:
        p.error("give either --bytes or --duration, not both")
    if args.bytes is None and args.duration is None and args.input is None:
        p.error("say how much to send: --bytes N, --duration SECONDS or --input FILE")
    if args.input is not None and not os.access(args.input, os.R_OK):
        p.error(f"cannot read --input file {args.input!r}")
    if args.input is not None and not os.path.isfile(args.input):
        p.error(f"--input {args.input!r} is not a regular file")
    if args.log is not None:
        try:
            log_format_for(args.log)
        except ValueError as exc:
            p.error(str(exc))


def make_source(args: argparse.Namespace) -> StreamSource:
    if args.input is not None:
        return FileSource(args.input, args.bytes)
    return PatternSource(args.bytes, args.mss)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    if args.list_algos:
        print(registry.describe_all())
        return 0
    _validate(p, args)
    try:
        cc = registry.create(args.algo, args.param, args.reserved_rate_mbit)
    except registry.RegistryError as exc:
        p.error(str(exc))
    try:
        dst = parse_addr(args.dst, BWN_UDP_PORT)
        bind = parse_addr(args.bind, 0) if args.bind else None
    except ValueError as exc:
        p.error(str(exc))
    if dst[1] == 0:
        p.error("--dst port must not be 0")
    try:
        source = make_source(args)
    except (OSError, ValueError) as exc:
        p.error(str(exc))
    flow_id = args.flow_id if args.flow_id is not None else random.getrandbits(32)
    config = SenderConfig(
        mss_bytes=args.mss,
        min_rto_us=int(args.min_rto_ms * 1000),
        initial_rto_us=int(args.initial_rto_ms * 1000),
        connect_timeout_us=int(args.connect_timeout * 1e6),
        duration_us=None if args.duration is None else int(args.duration * 1e6),
        app_rate_bps=None if args.app_rate_mbit is None else args.app_rate_mbit * 1e6,
        sack=not args.no_sack,
        ecn=args.ecn,
    )
    if config.min_rto_us > config.max_rto_us:
        p.error("--min-rto-ms must be at most 60000")
    try:
        log = (TimeSeriesLog(args.log, SENDER_FIELDS, int(args.log_interval_ms * 1000))
               if args.log else None)
    except OSError as exc:
        p.error(f"cannot write --log file: {exc}")
    try:
        sock = open_udp_socket(bind=bind, connect=dst)
    except OSError as exc:
        print(f"{PROG}: error: cannot open a socket to {args.dst}: {exc}", file=sys.stderr)
        return 1
    try:
        write_ready_file(args.ready_file)
        wait_for_start(args.wait_go, args.start_delay_s)
    except NotStarted as exc:
        sock.close()
        if log is not None:
            log.close()
        source.close()
        print(f"{PROG}: {exc} before the flow started: nothing sent", file=sys.stderr)
        return 1
    except OSError as exc:
        sock.close()
        print(f"{PROG}: error: cannot write --ready-file {args.ready_file}: {exc.strerror or exc}",
              file=sys.stderr)
        return 1
    sender: Sender

    def on_refused() -> None:
        sender.on_unreachable(now_us())

    sender = Sender(cc, source, socket_emitter(sock, on_refused), flow_id=flow_id,
                    config=config, log=log)
    try:
        with SignalWakeup() as wake:
            run_sender(sender, sock, wake)
    finally:
        sock.close()
        if log is not None:
            log.close()
        source.close()
    summary = sender.summary(now_us())
    summary["params"] = _jsonable(cc_params(cc, args))
    summary["dst"] = f"{dst[0]}:{dst[1]}"
    summary["cpu_s"] = round(time.process_time(), 3)
    if not args.quiet:
        print(f"{PROG}: {format_summary(summary)}", flush=True)
    if args.summary_json:
        with open(args.summary_json, "w") as fh:
            json.dump(_jsonable(summary), fh, indent=2)
            fh.write("\n")
    if summary["status"].startswith("failed"):
        print(f"{PROG}: error: flow {flow_id} {summary['status']}", file=sys.stderr)
        return 1
    return 0


def cc_params(cc: Any, args: argparse.Namespace) -> Dict[str, Any]:
    try:
        return registry.parse_params(type(cc), args.param, args.reserved_rate_mbit)
    except registry.RegistryError:
        return {}


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else str(value)
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


if __name__ == "__main__":
    sys.exit(main())
