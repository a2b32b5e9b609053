"""The switch fuzzing corpus (ptf-tests/fuzz_corpus.pcap) is what its seeded
generator makes, and holds every kind of hostile frame the PTF test relies on."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "ptf-tests"))

import fuzz_corpus as fc  # noqa: E402

PCAP = REPO / "ptf-tests" / "fuzz_corpus.pcap"
META = json.loads(PCAP.with_suffix(".json").read_text())


def test_committed_corpus_is_the_generators_output(tmp_path):
    import scapy
    if scapy.VERSION != META["scapy"]:
        pytest.skip(f"corpus made with Scapy {META['scapy']}, this is {scapy.VERSION}: bytes may differ")
    frames = fc.corpus(META["seed"], META["fuzzed"])
    digest = fc.write_pcap(frames, tmp_path / "c.pcap")
    assert digest == META["sha256"], "regenerate: .venv/bin/python ptf-tests/fuzz_corpus.py"
    assert fc.read_pcap(PCAP) == frames


def test_corpus_holds_every_kind_the_issue_names():
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    from bwn.protocol.wire import BWN_HEADER_LEN, BWN_UDP_PORT
    frames = fc.read_pcap(PCAP)
    assert META["fuzzed"] >= 10_000 and len(frames) == META["frames"] >= 10_000 + 100
    pkts = [Ether(f) for f in frames if len(f) >= 34]
    ip = [p for p in pkts if IP in p]
    bwn_lengths = {len(bytes(p[UDP].payload)) for p in ip if UDP in p and p[UDP].dport == BWN_UDP_PORT}
    assert set(range(BWN_HEADER_LEN)) <= bwn_lengths                       # truncated at every length
    assert {0, 1, 2} <= {p[IP].ttl for p in ip}                             # TTL 0/1/2
    assert {0, 1, 2, 3, 4} <= {f[14] & 0x0F for f in frames if f[12:14] == b"\x08\x00"}  # IHL < 5
    assert any(p[IP].ihl > 5 for p in ip)                                   # options
    assert any(p[IP].flags.MF or p[IP].frag for p in ip)                    # fragments
    assert any(UDP in p and p[UDP].len not in (None, 8 + len(bytes(p[UDP].payload))) for p in ip)
    assert any(f[12:14] != b"\x08\x00" for f in frames)                     # not IPv4
    def checksum_ok(p) -> bool:
        fresh = IP(bytes(p[IP]))
        del fresh.chksum
        return IP(bytes(fresh)).chksum == p[IP].chksum
    assert sum(1 for p in ip if not checksum_ok(p)) > 1000                 # wrong header checksums
