"""The Wireshark dissector (tools/wireshark/bwn.lua) decodes the wire-format vectors
field by field in tshark, as bwn/protocol/wire.py and hosts/transport/wire.py do."""
from __future__ import annotations

import dataclasses
import json
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from hosts.transport import wire as transport_wire
from hosts.transport.wire import F_ACK, F_DATA, F_FIN, F_RETX, F_SYN, TransportHeader
from bwn.protocol.wire import BWN_UDP_PORT, FLAG_ECHO_VALID, FLAG_XR, BwnHeader, XrHeader, ebn_decode_kbps
from needs import missing, no_tool

REPO = Path(__file__).resolve().parents[1]
DISSECTOR = REPO / "tools" / "wireshark" / "bwn.lua"
VECTORS = json.loads((REPO / "docs" / "wire-format-vectors.json").read_text())
BWN_KEYS = [f.name for f in dataclasses.fields(BwnHeader)]
XR_KEYS = [f.name for f in dataclasses.fields(XrHeader)]
# Every field of the codec's header but its option bytes, which are checked option
# by option (test_transport_options).
TRANSPORT_KEYS = [f.name for f in dataclasses.fields(TransportHeader) if f.name != "options_raw"]
PAYLOAD_BYTES = 100
OTHER_PORT = 40123          # "Decode As" test: not the BWN port


@pytest.fixture(scope="module", autouse=True)
def tshark_here():
    missing(no_tool("tshark"), "Wireshark dissector test (apt-get install tshark; make deps does)")


def transport_of(index: int, ack: bool) -> TransportHeader:
    """A transport header with distinct values per packet (and 64-bit sequence numbers)."""
    if ack:
        return TransportHeader(flags=F_ACK | F_RETX, flow_id=0xA0000000 + index, ack=2**40 + index,
                               rwnd_bytes=4_194_304, ts_val_us=4_000_000_000 + index,
                               ts_ecr_us=17 + index)
    return TransportHeader(flags=F_DATA, flow_id=index + 1, seq=2**33 + 1000 * index,
                           ts_val_us=123_456 + index)


def udp_packet(payload: bytes, ack: bool, port: int = BWN_UDP_PORT) -> bytes:
    from scapy.all import IP, UDP, Ether, Raw
    udp = UDP(sport=port, dport=50_000) if ack else UDP(sport=50_000, dport=port)
    return bytes(Ether(src="00:00:00:00:00:01", dst="00:00:00:00:00:fe")
                 / IP(src="10.0.1.1", dst="10.0.2.1") / udp / Raw(payload))


def write_pcap(path: Path, frames: list[bytes]) -> None:
    from scapy.all import Ether, wrpcap
    wrpcap(str(path), [Ether(f) for f in frames])


def tshark(pcap: Path, fields: list[str], *extra: str) -> list[dict[str, str]]:
    cmd = ["tshark", "-n", "-X", f"lua_script:{DISSECTOR}", "-r", str(pcap), *extra,
           "-T", "fields", "-E", "separator=\t", "-E", "occurrence=a", "-E", "aggregator=,"]
    for f in fields:
        cmd += ["-e", f]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    lua_errors = [line for line in res.stderr.splitlines() if "Lua" in line or "lua" in line]
    assert not lua_errors, res.stderr
    return [dict(zip(fields, line.split("\t"))) for line in res.stdout.splitlines()]


@pytest.fixture(scope="module")
def vector_rows(tmp_path_factory) -> list[dict[str, str]]:
    frames = []
    for i, vector in enumerate(VECTORS["header"]):
        ack = vector["fields"]["kind"] == 1
        payload = b"" if ack else bytes(range(PAYLOAD_BYTES))
        frames.append(udp_packet(bytes.fromhex(vector["hex"]) + transport_of(i, ack).pack()
                                 + payload, ack))
    pcap = tmp_path_factory.mktemp("dissector") / "vectors.pcap"
    write_pcap(pcap, frames)
    fields = ([f"bwn.{k}" for k in BWN_KEYS] + ["bwn.ebn_kbps", "bwn.echo_ebn_kbps",
                                               "bwn.flags.echo_valid"]
              + [f"bwnt.{k}" for k in TRANSPORT_KEYS]
              + ["bwnt.payload_len", "bwnt.flags.ack", "bwnt.flags.data", "bwnt.flags.retx",
                 "_ws.col.Protocol"])
    rows = tshark(pcap, fields)
    assert len(rows) == len(VECTORS["header"])
    return rows


@pytest.mark.parametrize("index", range(len(VECTORS["header"])),
                         ids=[v["name"] for v in VECTORS["header"]])
def test_every_bwn_field_of_every_vector(vector_rows, index):
    vector, row = VECTORS["header"][index], vector_rows[index]
    assert row["_ws.col.Protocol"] == "BWN"
    for key in BWN_KEYS:                       # every field of docs/wire-format.md
        assert int(row[f"bwn.{key}"], 0) == vector["fields"][key], key
    # Decoded values: EBN codes as kb/s (absent for the unset code), ECHO_VALID.
    for code_key, kbps_key in (("ebn_code", "bwn.ebn_kbps"), ("echo_ebn_code", "bwn.echo_ebn_kbps")):
        expected = ebn_decode_kbps(vector["fields"][code_key])
        if expected is None:
            assert row[kbps_key] == "", code_key
        else:
            assert float(row[kbps_key]) == pytest.approx(expected, rel=1e-9), code_key
    assert row["bwn.flags.echo_valid"] == str(int(bool(vector["fields"]["flags"] & FLAG_ECHO_VALID)))


@pytest.mark.parametrize("index", range(len(VECTORS["header"])),
                         ids=[v["name"] for v in VECTORS["header"]])
def test_every_transport_field(vector_rows, index):
    ack = VECTORS["header"][index]["fields"]["kind"] == 1
    expected = transport_of(index, ack)
    row = vector_rows[index]
    for key in TRANSPORT_KEYS:
        assert int(row[f"bwnt.{key}"], 0) == getattr(expected, key), key
    assert row["bwnt.flags.ack"] == str(int(ack)) and row["bwnt.flags.data"] == str(int(not ack))
    assert row["bwnt.flags.retx"] == str(int(ack))
    assert row["bwnt.payload_len"] == str(0 if ack else PAYLOAD_BYTES)


def test_decode_as_on_another_port(tmp_path):
    vector = VECTORS["header"][1]
    pcap = tmp_path / "other-port.pcap"
    write_pcap(pcap, [udp_packet(bytes.fromhex(vector["hex"]) + transport_of(1, False).pack(),
                                 ack=False, port=OTHER_PORT)])
    fields = ["bwn.narrow_kbps", "bwnt.seq"]
    assert tshark(pcap, fields) == [{"bwn.narrow_kbps": "", "bwnt.seq": ""}]
    decoded = tshark(pcap, fields, "-d", f"udp.port=={OTHER_PORT},bwn")
    assert decoded == [{"bwn.narrow_kbps": str(vector["fields"]["narrow_kbps"]),
                        "bwnt.seq": str(transport_of(1, False).seq)}]


def test_malformed_and_other_versions_are_flagged(tmp_path):
    short, version2 = (bytes.fromhex(v["hex"]) for v in VECTORS["invalid"])
    pcap = tmp_path / "invalid.pcap"
    write_pcap(pcap, [udp_packet(short, ack=False), udp_packet(version2, ack=False)])
    rows = tshark(pcap, ["bwn.version", "bwn.hop_count", "_ws.expert.message", "bwnt.version"])
    assert rows[0]["bwn.hop_count"] == ""
    assert "shorter than 24 bytes" in rows[0]["_ws.expert.message"]
    assert rows[1]["bwn.version"] == "2"
    assert "version is not 1" in rows[1]["_ws.expert.message"]
    assert rows[1]["bwnt.version"] == ""       # nothing after an unknown version is parsed


@pytest.fixture(scope="module")
def xr_rows(tmp_path_factory) -> list[dict[str, str]]:
    frames = []
    for i, vector in enumerate(VECTORS["xr"]):
        ack = vector["bwn_fields"]["kind"] == 1
        payload = b"" if ack else bytes(range(PAYLOAD_BYTES))
        frames.append(udp_packet(bytes.fromhex(vector["bwn_hex"] + vector["hex"])
                                 + transport_of(i, ack).pack() + payload, ack))
    pcap = tmp_path_factory.mktemp("dissector-xr") / "xr.pcap"
    write_pcap(pcap, frames)
    fields = ([f"bwn.{k}" for k in BWN_KEYS] + [f"bwn.xr.{k}" for k in XR_KEYS]
              + ["bwn.flags.xr", "bwnt.flow_id", "bwnt.payload_len", "_ws.expert.message"])
    rows = tshark(pcap, fields)
    assert len(rows) == len(VECTORS["xr"])
    return rows


@pytest.mark.parametrize("index", range(len(VECTORS["xr"])), ids=[v["name"] for v in VECTORS["xr"]])
def test_every_xr_field_of_every_vector(xr_rows, index):
    """After a BWN header with flag XR the dissector reads the XR header's fields, and
    the transport header after it (24 bytes later than without XR)."""
    vector, row = VECTORS["xr"][index], xr_rows[index]
    assert row["bwn.flags.xr"] == "1"
    for key in BWN_KEYS:
        assert int(row[f"bwn.{key}"], 0) == vector["bwn_fields"][key], key
    for key in XR_KEYS:
        assert int(row[f"bwn.xr.{key}"], 0) == vector["fields"][key], key
    ack = vector["bwn_fields"]["kind"] == 1
    assert int(row["bwnt.flow_id"]) == transport_of(index, ack).flow_id
    assert row["bwnt.payload_len"] == str(0 if ack else PAYLOAD_BYTES)
    assert row["_ws.expert.message"] == ""


def test_xr_header_cut_short_is_flagged(tmp_path):
    """A BWN header whose flag says XR with fewer than 24 bytes after it is malformed
    (a switch drops it), and no transport header is read from it."""
    pcap = tmp_path / "xr-short.pcap"
    write_pcap(pcap, [udp_packet(BwnHeader(flags=FLAG_XR).pack() + XrHeader().pack()[:20], ack=False)])
    [row] = tshark(pcap, ["bwn.xr.rtt_us", "bwnt.version", "_ws.expert.message"])
    assert row["bwn.xr.rtt_us"] == "" and row["bwnt.version"] == ""
    assert "fewer than 24 bytes" in row["_ws.expert.message"]


def options_bytes(sack_permitted: bool = False, blocks: tuple = (), stats: tuple | None = None
                  ) -> bytes:
    """Transport options as the codec writes them (hosts/transport/wire.py
    encode_options where this tree has it; else the same layout: NOP, NOP, kind,
    length, data; SACK_PERMITTED 2, SACK 3 with [left, right) uint64 pairs,
    RCV_STATS 4 with four uint32)."""
    encode = getattr(transport_wire, "encode_options", None)
    if encode is not None:
        return encode(sack_permitted=sack_permitted, sack_blocks=blocks, rcv_stats=stats)
    out = b""
    if sack_permitted:
        out += bytes((1, 1, 2, 2))
    if blocks:
        out += bytes((1, 1, 3, 2 + 16 * len(blocks))) + b"".join(
            struct.pack("!QQ", a, b) for a, b in blocks)
    if stats is not None:
        out += bytes((1, 1, 4, 18)) + struct.pack("!IIII", *stats)
    return out


def with_options(options: bytes, **fields) -> bytes:
    base = TransportHeader(**fields, hdr_words=9 + len(options) // 4)
    return base.pack()[:36] + options


def test_transport_options(tmp_path):
    blocks = ((3000, 5000), (2**40, 2**40 + 1000), (9000, 10000), (12000, 13000))
    packets = [
        (False, with_options(options_bytes(sack_permitted=True), flags=F_SYN, flow_id=5)),
        (True, with_options(options_bytes(blocks=blocks), flags=F_ACK, flow_id=5, ack=1000)),
        (True, with_options(options_bytes(stats=(100, 2, 7, 1)), flags=F_FIN | F_ACK, flow_id=5,
                            ack=20001)),
        (True, with_options(bytes((9, 8, 1, 2, 3, 4, 5, 6)), flags=F_ACK, flow_id=5)),
    ]
    pcap = tmp_path / "options.pcap"
    write_pcap(pcap, [udp_packet(BwnHeader(kind=1 if ack else 0).pack() + tr, ack)
                      for ack, tr in packets])
    fields = ["bwnt.hdr_words", "bwnt.option.kind", "bwnt.sack.left", "bwnt.sack.right",
              "bwnt.rcv_stats.segments", "bwnt.rcv_stats.duplicates",
              "bwnt.rcv_stats.out_of_order", "bwnt.rcv_stats.spurious", "bwnt.option.data",
              "bwnt.payload_len", "_ws.expert.message"]
    syn, sack, stats, unknown = tshark(pcap, fields)
    assert syn["bwnt.option.kind"] == "1,1,2"
    assert sack["bwnt.hdr_words"] == "26"            # 36 + 4 + 4 * 16 bytes: the largest ACK
    assert sack["bwnt.sack.left"] == ",".join(str(a) for a, _ in blocks)
    assert sack["bwnt.sack.right"] == ",".join(str(b) for _, b in blocks)
    assert [stats[f"bwnt.rcv_stats.{k}"] for k in ("segments", "duplicates", "out_of_order",
                                                   "spurious")] == ["100", "2", "7", "1"]
    assert unknown["bwnt.option.kind"] == "9" and unknown["bwnt.option.data"] == "010203040506"
    assert all(p["bwnt.payload_len"] == "0" and p["_ws.expert.message"] == ""
               for p in (syn, sack, stats, unknown))


def test_malformed_option_is_flagged(tmp_path):
    bad = with_options(bytes((1, 1, 3, 30)) + bytes(4), flags=F_ACK, flow_id=5)  # runs past
    pcap = tmp_path / "bad-option.pcap"
    write_pcap(pcap, [udp_packet(BwnHeader(kind=1).pack() + bad, ack=True)])
    [row] = tshark(pcap, ["bwnt.flow_id", "_ws.expert.message"])
    assert row["bwnt.flow_id"] == "5" and "Malformed option" in row["_ws.expert.message"]


def test_headers_only_capture_still_decodes(tmp_path):
    # What `bwn run --pcap` keeps: frames cut after the headers (snap length).
    vector = VECTORS["header"][2]
    frame = udp_packet(bytes.fromhex(vector["hex"]) + transport_of(2, False).pack() + b"x" * 1000,
                       ack=False)
    pcap = tmp_path / "snap.pcap"
    write_pcap(pcap, [frame])
    cut = tmp_path / "cut.pcap"
    subprocess.run(["editcap", "-s", "102", str(pcap), str(cut)], check=True, timeout=60) \
        if shutil.which("editcap") else pytest.skip("SKIPPED editcap not on PATH")
    rows = tshark(cut, ["bwn.tight_kbps", "bwnt.seq", "bwnt.payload_len"])
    assert rows == [{"bwn.tight_kbps": "-4500", "bwnt.seq": str(transport_of(2, False).seq),
                     "bwnt.payload_len": "1000"}]


def test_dissector_declares_every_field():
    res = subprocess.run(["tshark", "-G", "fields", "-X", f"lua_script:{DISSECTOR}"],
                         capture_output=True, text=True, timeout=120)
    declared = {line.split("\t")[2] for line in res.stdout.splitlines()
                if line.startswith("F\t") and line.split("\t")[4] in ("bwn", "bwnt")}
    assert {f"bwn.{k}" for k in BWN_KEYS} <= declared
    assert {f"bwn.xr.{k}" for k in XR_KEYS} <= declared
    assert {f"bwnt.{k}" for k in TRANSPORT_KEYS} <= declared


TRANSPORT_VECTORS = json.loads((REPO / "docs" / "transport-vectors.json").read_text())["header"]
FLAG_NAMES = ("syn", "fin", "data", "ack", "rst", "retx", "ece", "cwr")


def test_every_transport_flag_of_the_transport_vectors(tmp_path):
    """Each flag bit of every transport vector (ECN's ECE and CWR too) as its own field."""
    frames = [udp_packet(BwnHeader(kind=1 if v["fields"]["flags"] & F_ACK else 0).pack()
                         + bytes.fromhex(v["hex"]), bool(v["fields"]["flags"] & F_ACK))
              for v in TRANSPORT_VECTORS]
    pcap = tmp_path / "transport-vectors.pcap"
    write_pcap(pcap, frames)
    fields = [f"bwnt.flags.{n}" for n in FLAG_NAMES] + ["_ws.expert.message"]
    rows = tshark(pcap, fields)
    assert len(rows) == len(TRANSPORT_VECTORS)
    assert any(v["fields"]["flags"] & 0xC0 for v in TRANSPORT_VECTORS)
    for vector, row in zip(TRANSPORT_VECTORS, rows):
        flags = vector["fields"]["flags"]
        assert [row[f"bwnt.flags.{n}"] for n in FLAG_NAMES] == [str((flags >> b) & 1) for b in range(8)], \
            vector["name"]
        assert row["_ws.expert.message"] == "", vector["name"]
