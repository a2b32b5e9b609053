#!/usr/bin/env python3
"""The switch fuzzing corpus: hostile and broken frames, made by a seeded generator.

    .venv/bin/python ptf-tests/fuzz_corpus.py [--seed 16983] [--fuzzed 10000] [--out ptf-tests/fuzz_corpus.pcap]

Frames (all sent into PTF port 1 of sw1 by `fuzz_tests.py`):
  - `--fuzzed` frames from Scapy's fuzz() over every header the parser knows
    (Ethernet, IPv4, TCP, UDP, BWN), in several stacks; half of them are aimed
    at a routed host (so that they reach the deeper parts of the pipeline), a
    quarter carry a random IPv4 header checksum;
  - a BWN header truncated at every length (0..23 bytes after UDP);
  - IPv4 with options (valid, and options cut short), IHL 0..4, fragments,
    TTL 0, 1 and 2;
  - UDP length fields that lie (shorter and longer than the datagram);
  - every unknown BWN version and kind;
  - non-IPv4 frames (ARP, IPv6, a runt Ethernet header).

The same seed gives the same bytes (with the same Scapy version, which
`fuzz_corpus.json` records with the seed, the count and the pcap's SHA-256).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

DEFAULT_SEED = 16983
DEFAULT_FUZZED = 10_000
SWITCH_MAC = "00:00:00:00:01:01"
SRC_MAC = "00:00:00:00:00:01"
SRC_IP = "10.0.1.1"
ROUTED_IPS = ("10.0.2.2", "10.0.3.3", "10.0.4.4")


def fuzzed_frames(rng: random.Random, count: int) -> list[bytes]:
    from scapy.layers.inet import IP, TCP, UDP
    from scapy.layers.l2 import Ether
    from scapy.packet import fuzz

    from bwn.protocol.scapy_layer import BWN
    from bwn.protocol.wire import BWN_UDP_PORT

    stacks = [
        lambda: Ether(dst=SWITCH_MAC, src=SRC_MAC) / fuzz(IP()) / fuzz(UDP(dport=BWN_UDP_PORT)) / fuzz(BWN()),
        lambda: Ether(dst=SWITCH_MAC, src=SRC_MAC) / IP(src=SRC_IP) / UDP(dport=BWN_UDP_PORT) / fuzz(BWN()),
        lambda: Ether(dst=SWITCH_MAC, src=SRC_MAC) / fuzz(IP(proto=17)) / fuzz(UDP()),
        lambda: Ether(dst=SWITCH_MAC, src=SRC_MAC) / fuzz(IP(proto=6)) / fuzz(TCP()),
        lambda: Ether(dst=SWITCH_MAC, src=SRC_MAC) / fuzz(IP()),
        lambda: fuzz(Ether()) / fuzz(IP()) / fuzz(UDP(dport=BWN_UDP_PORT)) / BWN(),
    ]
    out = []
    for i in range(count):
        pkt = stacks[i % len(stacks)]()
        if IP in pkt and rng.random() < 0.5:
            pkt[IP].dst = rng.choice(ROUTED_IPS)
        if IP in pkt and rng.random() < 0.25:
            pkt[IP].chksum = rng.randrange(1 << 16)   # (almost always) a wrong header checksum
        out.append(bytes(pkt))
    return out


def crafted_frames() -> list[bytes]:
    """Every malformed case the issue names, deterministically."""
    from scapy.layers.inet import IP, TCP, UDP, IPOption_NOP, IPOption_EOL
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import ARP, Ether

    from bwn.protocol.scapy_layer import BWN
    from bwn.protocol.wire import BWN_HEADER_LEN, BWN_UDP_PORT

    eth = Ether(dst=SWITCH_MAC, src=SRC_MAC)
    dst = ROUTED_IPS[0]
    good_bwn = bytes(BWN(kind=0))
    out: list[bytes] = []
    # BWN truncated at every length after the UDP header (0..23 bytes).
    for n in range(BWN_HEADER_LEN):
        out.append(bytes(eth / IP(src=SRC_IP, dst=dst) / UDP(sport=40000, dport=BWN_UDP_PORT) / good_bwn[:n]))
    # Unknown BWN versions and kinds (well formed otherwise).
    for version in range(16):
        for kind in (0, 1, 2, 15):
            out.append(bytes(eth / IP(src=SRC_IP, dst=dst) / UDP(sport=40001, dport=BWN_UDP_PORT)
                             / BWN(version=version, kind=kind)))
    # IPv4 options (valid, 1..10 words), options cut short by the frame's end.
    for words in range(1, 11):
        opts = [IPOption_NOP()] * (4 * words - 1) + [IPOption_EOL()]
        out.append(bytes(eth / IP(src=SRC_IP, dst=dst, options=opts) / UDP(sport=40002, dport=5000) / (b"x" * 8)))
        full = bytes(eth / IP(src=SRC_IP, dst=dst, options=opts))
        out.append(full[:14 + 20 + 2 * words])
    # IHL 0..4, with a checksum computed over what the header claims.
    for ihl in range(5):
        raw = bytearray(bytes(eth / IP(src=SRC_IP, dst=dst) / UDP(sport=40003, dport=5000) / (b"y" * 8)))
        raw[14] = 0x40 | ihl
        out.append(bytes(raw))
    # Fragments (first with MF, middle, last) of a BWN datagram.
    for flags, frag in (("MF", 0), ("MF", 3), (0, 6)):
        out.append(bytes(eth / IP(src=SRC_IP, dst=dst, flags=flags, frag=frag)
                         / UDP(sport=40004, dport=BWN_UDP_PORT) / BWN()))
    # TTL 0, 1 (dropped) and 2 (forwarded with 1).
    for ttl in (0, 1, 2):
        out.append(bytes(eth / IP(src=SRC_IP, dst=dst, ttl=ttl) / UDP(sport=40005, dport=BWN_UDP_PORT) / BWN()))
    # UDP length lies: 0, 1..7 (below the header), shorter and longer than the datagram.
    for ulen in (0, 1, 7, 8, 20, 31, 33, 200, 65535):
        out.append(bytes(eth / IP(src=SRC_IP, dst=dst) / UDP(sport=40006, dport=BWN_UDP_PORT, len=ulen) / BWN()))
    # A bad IPv4 header checksum, on an otherwise good BWN packet.
    out.append(bytes(eth / IP(src=SRC_IP, dst=dst, chksum=0x1234) / UDP(sport=40007, dport=BWN_UDP_PORT) / BWN()))
    # Not IPv4: ARP, IPv6, a runt Ethernet header, TCP with a truncated port field.
    out.append(bytes(eth / ARP(pdst=dst)))
    out.append(bytes(Ether(dst=SWITCH_MAC, src=SRC_MAC, type=0x86DD) / IPv6() / UDP()))
    out.append(bytes(eth)[:13])
    out.append(bytes(eth / IP(src=SRC_IP, dst=dst) / TCP())[:14 + 20 + 3])
    return out


def corpus(seed: int = DEFAULT_SEED, fuzzed: int = DEFAULT_FUZZED) -> list[bytes]:
    random.seed(seed)          # Scapy's volatile values draw from the random module
    rng = random.Random(seed)
    return crafted_frames() + fuzzed_frames(rng, fuzzed)


def write_pcap(frames: list[bytes], path: Path) -> str:
    from scapy.utils import RawPcapWriter
    writer = RawPcapWriter(str(path), linktype=1, sync=True)
    writer.write_header(None)
    for i, frame in enumerate(frames):
        writer.write_packet(frame, sec=i // 1000, usec=(i % 1000) * 1000)
    writer.close()
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_pcap(path: Path) -> list[bytes]:
    from scapy.utils import RawPcapReader
    return [bytes(data) for data, _meta in RawPcapReader(str(path))]


def main(argv: list[str] | None = None) -> int:
    import scapy
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--fuzzed", type=int, default=DEFAULT_FUZZED, help="frames from Scapy's fuzz()")
    ap.add_argument("--out", type=Path, default=HERE / "fuzz_corpus.pcap")
    args = ap.parse_args(argv)
    if args.fuzzed < 0:
        ap.error("--fuzzed must be >= 0")
    frames = corpus(args.seed, args.fuzzed)
    digest = write_pcap(frames, args.out)
    meta = {"seed": args.seed, "fuzzed": args.fuzzed, "frames": len(frames),
            "crafted": len(frames) - args.fuzzed, "scapy": scapy.VERSION, "sha256": digest}
    args.out.with_suffix(".json").write_text(json.dumps(meta, indent=2) + "\n")
    print(f"wrote {args.out}: {len(frames)} frames ({args.fuzzed} fuzzed), sha256 {digest[:16]}...")
    return 0


if __name__ == "__main__":
    sys.exit(main())
