"""Generate docs/wire-format-vectors.json: the BWN and XR test vectors.

    python -m bwn.protocol.vectors > docs/wire-format-vectors.json

The vectors are written once and committed; tests hold the codec, the Scapy
layer and the P4 program to them (they never regenerate them).
"""
from __future__ import annotations

import json
import sys
from dataclasses import asdict

from bwn.protocol.wire import (
    FLAG_ECHO_VALID,
    FLAG_XR,
    KIND_ACK,
    XR_FEEDBACK_MIN,
    BwnHeader,
    XrHeader,
    ebn_encode_kbps,
)


def header_vectors() -> list[dict]:
    cases: list[tuple[str, BwnHeader]] = [
        ("fresh DATA packet from a sender: every forward field unset", BwnHeader()),
        ("DATA after one switch: 10 Mb/s link, 3.2 Mb/s available, share 5 Mb/s",
         BwnHeader(hop_count=1, ebn_code=ebn_encode_kbps(5000), narrow_kbps=10_000, tight_kbps=3_200)),
        ("DATA under overload: tight link negative",
         BwnHeader(hop_count=2, ebn_code=ebn_encode_kbps(100), narrow_kbps=200, tight_kbps=-4_500)),
        ("ACK echoing the previous forward section",
         BwnHeader(kind=KIND_ACK, echo_ebn_code=ebn_encode_kbps(150), echo_narrow_kbps=200,
                   echo_tight_kbps=12, echo_hop_count=3, flags=FLAG_ECHO_VALID)),
        ("extremes: 1 Tb/s narrow, most negative tight, max hop count",
         BwnHeader(hop_count=255, ebn_code=0, narrow_kbps=1_000_000_000, tight_kbps=-(2**31),
                   echo_ebn_code=254, echo_narrow_kbps=1, echo_tight_kbps=2**31 - 1, echo_hop_count=255,
                   flags=FLAG_ECHO_VALID)),
    ]
    return [{"name": name, "hex": h.pack().hex(), "fields": asdict(h)} for name, h in cases]


def xr_vectors() -> list[dict]:
    """XR headers (docs/wire-format.md, "The XR header"), each after the BWN header
    that announces it (flag XR): ``bwn_hex`` + ``hex`` is what a packet carries."""
    cases: list[tuple[str, BwnHeader, XrHeader]] = [
        ("XCP sender, first packet: no RTT yet, forward feedback unset",
         BwnHeader(flags=FLAG_XR), XrHeader(cwnd_bytes=2 * 1514)),
        ("XCP DATA after a switch: 100 ms RTT, 40 kB window, feedback -350 bytes",
         BwnHeader(hop_count=1, ebn_code=ebn_encode_kbps(2500), narrow_kbps=10_000, tight_kbps=-120,
                   flags=FLAG_XR),
         XrHeader(rtt_us=100_000, cwnd_bytes=40_000, feedback_bytes=-350)),
        ("RCP DATA after two switches: 48 ms RTT, rate 2.5 Mb/s",
         BwnHeader(hop_count=2, narrow_kbps=10_000, tight_kbps=300, flags=FLAG_XR),
         XrHeader(rtt_us=48_000, rate_kbps=2_500)),
        ("ACK echoing XCP feedback +1200 bytes and an RCP rate",
         BwnHeader(kind=KIND_ACK, echo_hop_count=1, echo_narrow_kbps=10_000, echo_tight_kbps=10,
                   flags=FLAG_ECHO_VALID | FLAG_XR),
         XrHeader(echo_feedback_bytes=1_200, echo_rate_kbps=9_000)),
        ("extremes: largest RTT and window, most negative feedback, rate 1 kb/s",
         BwnHeader(flags=FLAG_XR),
         XrHeader(rtt_us=2**32 - 1, cwnd_bytes=2**32 - 1, feedback_bytes=XR_FEEDBACK_MIN, rate_kbps=1,
                  echo_feedback_bytes=XR_FEEDBACK_MIN, echo_rate_kbps=0)),
    ]
    return [{"name": name, "bwn_hex": b.pack().hex(), "bwn_fields": asdict(b), "hex": x.pack().hex(),
             "fields": asdict(x)} for name, b, x in cases]


def ebn_vectors() -> list[dict]:
    rates = [0, 0.5, 1, 1.05, 20, 100, 133.3, 200, 1_000, 10_000, 1_000_000, 1_000_000_000, 10**10]
    return [{"rate_kbps": r, "code": ebn_encode_kbps(r)} for r in rates]


def main() -> None:
    json.dump({"header": header_vectors(), "xr": xr_vectors(), "ebn_code": ebn_vectors(),
               "invalid": [
                   {"name": "truncated: 23 bytes", "hex": BwnHeader().pack()[:23].hex(), "error": "too short"},
                   {"name": "version 2", "hex": "2" + BwnHeader().pack().hex()[1:], "error": "version"},
               ],
               "xr_invalid": [
                   {"name": "truncated XR header: 23 bytes", "hex": XrHeader().pack()[:23].hex(),
                    "error": "too short"},
               ]}, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
