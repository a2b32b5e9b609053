#!/usr/bin/env python3
"""Memory per flow of the receiver (docs/transport.md "Receiver limits").

Opens ``--flows`` half-open flows (a SYN each), then makes them open (one small
DATA segment each, no output file), and prints the bytes per flow that
``tracemalloc`` sees for each step; the receiver's bound is built from them.

    .venv/bin/python benchmarks/receiver_memory.py --flows 10000
"""
from __future__ import annotations

import argparse
import sys
import tracemalloc
from typing import List, Optional

from hosts.transport.reassembly import Sink
from hosts.transport.receiver import Receiver
from hosts.transport.wire import F_DATA, F_SYN, HEADERS_LEN, encode_options, pack_data_headers


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--flows", type=int, default=10_000, help="flows to open (default 10 000)")
    args = p.parse_args(argv)
    if args.flows < 1:
        p.error("--flows must be >= 1")
    n = args.flows
    rx = Receiver(lambda v, a: True, lambda a, f: Sink(), max_half_open=n, max_flows=n)
    syn = bytearray(HEADERS_LEN + 4)
    k = pack_data_headers(syn, F_SYN, 0, 0, 0, encode_options(sack_permitted=True))
    data = bytearray(HEADERS_LEN)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    for i in range(n):
        syn[28:32] = i.to_bytes(4, "big")                  # the transport's flow_id
        rx.on_datagram(bytes(syn[:k]), (f"10.0.{i // 250}.{i % 250}", 1000 + i), 0)
    half = tracemalloc.get_traced_memory()[0]
    for i in range(n):
        pack_data_headers(data, F_DATA, i, 0, 0)
        rx.on_datagram(bytes(data) + b"x" * 10, (f"10.0.{i // 250}.{i % 250}", 1000 + i), 1)
    opened = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert rx.half_open_count == 0 and rx.open_count == n
    print(f"{n} flows, Python {sys.version.split()[0]}: half-open {(half - base) / n:.0f} bytes "
          f"per flow, open (no output file, no out-of-order data) {(opened - base) / n:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
