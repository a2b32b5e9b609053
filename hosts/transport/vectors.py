"""Generate docs/transport-vectors.json: test vectors of the transport header.

    python -m hosts.transport.vectors > docs/transport-vectors.json

Each vector is the 36-byte base header plus its options (docs/transport.md), as
hex, with the fields it encodes. The vectors are written once and committed;
tests/test_transport_wire.py holds the codec and the fast packers to them.
"""
from __future__ import annotations

import json
import sys
from typing import Any, Dict, List

from hosts.transport.wire import (
    F_ACK,
    F_CWR,
    F_DATA,
    F_ECE,
    F_FIN,
    F_RETX,
    F_SYN,
    HDR_WORDS,
    TransportHeader,
    encode_options,
)


def _vector(name: str, header: TransportHeader) -> Dict[str, Any]:
    opts = header.options
    return {
        "name": name,
        "hex": header.pack().hex(),
        "fields": {"version": header.version, "flags": header.flags, "hdr_words": header.hdr_words,
                   "flow_id": header.flow_id, "seq": header.seq, "ack": header.ack,
                   "rwnd_bytes": header.rwnd_bytes, "ts_val_us": header.ts_val_us,
                   "ts_ecr_us": header.ts_ecr_us},
        "options": {"sack_permitted": opts.sack_permitted,
                    "sack_blocks": [list(b) for b in opts.sack_blocks],
                    "rcv_stats": None if opts.rcv_stats is None else list(opts.rcv_stats)},
    }


def header_vectors() -> List[Dict[str, Any]]:
    H = TransportHeader
    return [
        _vector("SYN offering SACK", H.with_options(
            encode_options(sack_permitted=True), flags=F_SYN, flow_id=0x01020304,
            ts_val_us=1_000_000)),
        _vector("SYN without options (bwn-send --no-sack, or a pre-SACK sender)",
                H(flags=F_SYN, flow_id=7, ts_val_us=5)),
        _vector("SYN|ACK accepting SACK", H.with_options(
            encode_options(sack_permitted=True), flags=F_SYN | F_ACK, flow_id=0x01020304,
            rwnd_bytes=4 * 1024 * 1024, ts_val_us=2_000, ts_ecr_us=1_000_000)),
        _vector("DATA, first segment", H(flags=F_DATA, flow_id=9, seq=0, ts_val_us=123_456)),
        _vector("DATA retransmission beyond 2**32", H(flags=F_DATA | F_RETX, flow_id=9,
                                                      seq=2**33 + 1000, ts_val_us=2**32 - 1)),
        _vector("ACK with one SACK block", H.with_options(
            encode_options(sack_blocks=[(3000, 5000)]), flags=F_ACK, flow_id=9, ack=1000,
            rwnd_bytes=65536, ts_val_us=10, ts_ecr_us=20)),
        _vector("ACK with four SACK blocks (the most)", H.with_options(
            encode_options(sack_blocks=[(9000, 10000), (5000, 6000), (3000, 4000),
                                        (2**40, 2**40 + 1412)]),
            flags=F_ACK | F_RETX, flow_id=9, ack=2000, rwnd_bytes=65536, ts_val_us=11,
            ts_ecr_us=21)),
        _vector("SYN offering SACK and ECN (ECE|CWR, RFC 3168 sec. 6.1.1)", H.with_options(
            encode_options(sack_permitted=True), flags=F_SYN | F_ECE | F_CWR, flow_id=11,
            ts_val_us=1_000)),
        _vector("SYN|ACK accepting ECN (ECE)", H(flags=F_SYN | F_ACK | F_ECE, flow_id=11,
                                                rwnd_bytes=65536, ts_val_us=3, ts_ecr_us=1_000)),
        _vector("ACK echoing a CE mark (ECE)", H(flags=F_ACK | F_ECE, flow_id=11, ack=14_120,
                                                 rwnd_bytes=65536, ts_val_us=4, ts_ecr_us=2_000)),
        _vector("DATA after the window was reduced (CWR)", H(flags=F_DATA | F_CWR, flow_id=11,
                                                             seq=28_240, ts_val_us=3_000)),
        _vector("FIN|ACK with the receiver's counters", H.with_options(
            encode_options(rcv_stats=(1000, 12, 40, 3)), flags=F_FIN | F_ACK, flow_id=9,
            ack=1_000_001, rwnd_bytes=65536, ts_val_us=12, ts_ecr_us=22)),
    ]


def invalid_vectors() -> List[Dict[str, str]]:
    """Option areas a reader must reject (hex of the option bytes only)."""
    return [
        {"name": "SACK length runs past the header", "hex": "0101030a00000000",
         "error": "length"},
        {"name": "SACK length not 2 + 16 n", "hex": "0101030600000000", "error": "length"},
        {"name": "five SACK blocks", "hex": "01010352" + "00" * 80, "error": "length"},
        {"name": "empty SACK block (left == right)",
         "hex": "01010312" + (5).to_bytes(8, "big").hex() * 2, "error": "empty"},
        {"name": "option length 1", "hex": "01010201", "error": "length"},
        {"name": "SACK_PERMITTED with a length of 4", "hex": "02040000", "error": "length 2"},
    ]


def main() -> None:
    json.dump({"hdr_words_base": HDR_WORDS, "header": header_vectors(),
               "invalid_options": invalid_vectors()}, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
