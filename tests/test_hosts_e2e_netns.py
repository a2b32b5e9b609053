"""bwn-send -> bwn-recv between two network namespaces through the user-space link
emulator (bwn.linkem): loss, reordering, duplication, delay and a rate
limit on a real veth path, with and without SACK; a goodput cross-check against
Linux TCP (iperf3); a receiver under garbage over a real socket.

Needs root, ``ip netns`` and bwn.linkem; the whole module is skipped with one
reason line otherwise.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator, List

import pytest

from needs import missing, no_tool

from bwn.linkem import Impairment
from bwn.linkem.netns import Topology
from bwn.requirements import linkem_netns_missing

missing(linkem_netns_missing(), "namespace end-to-end tests", module_level=True)

from hosts.cc.registry import ALGORITHMS  # noqa: E402
from hosts.transport.source import pattern_bytes  # noqa: E402

PY = sys.executable
PORT = 16983


@pytest.fixture
def topo() -> Iterator[Topology]:
    with Topology() as t:
        yield t


def _recv(topo: Topology, *args: str) -> subprocess.Popen:
    proc = topo.popen(topo.ns_b, [PY, "-m", "hosts.recv", "--listen", f"{topo.ip_b}:{PORT}",
                                  *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    line = proc.stderr.readline()
    assert "listening on" in line, line
    return proc


def _send(topo: Topology, *args: str) -> subprocess.Popen:
    return topo.popen(topo.ns_a, [PY, "-m", "hosts.send", "--dst", f"{topo.ip_b}:{PORT}",
                                  *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen, timeout: float = 90) -> Any:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


SACK_MODES = pytest.mark.parametrize("sack_args", [[], ["--no-sack"]], ids=["sack", "no-sack"])


@SACK_MODES
def test_streams_intact_over_impaired_link(topo: Topology, tmp_path: Path,
                                           sack_args: List[str]) -> None:
    """10 % loss, 2 % reordering and 2 % duplication each way, two flows at once."""
    imp = Impairment(delay_us=5_000, loss=0.10, reorder=0.02, duplicate=0.02,
                     rate_bps=20_000_000, queue_packets=50)
    emu = topo.start_emulator(imp, seed=3)
    src = tmp_path / "in.bin"
    src.write_bytes(os.urandom(1_000_000))
    recv = _recv(topo, "--out", str(tmp_path / "out-{flow_id}.bin"), "--delayed-ack")
    try:
        senders: List[subprocess.Popen] = [
            _send(topo, "--algo", "newreno", "--input", str(src), "--flow-id", "1",
                  "--summary-json", str(tmp_path / "s1.json"), *sack_args),
            _send(topo, "--algo", "reno", "--bytes", "1500000", "--flow-id", "2",
                  "--summary-json", str(tmp_path / "s2.json"), *sack_args),
        ]
        for proc in senders:
            rc, out, err = _finish(proc, timeout=240)
            assert rc == 0, err
            print(out.strip())
    finally:
        recv.send_signal(signal.SIGTERM)
        _finish(recv)
        stats = emu.stop()
    assert (tmp_path / "out-1.bin").read_bytes() == src.read_bytes()
    assert (tmp_path / "out-2.bin").read_bytes() == pattern_bytes(0, 1_500_000)
    s1 = json.loads((tmp_path / "s1.json").read_text())
    assert s1["retransmits"] > 0  # 10 % loss: recovery was exercised
    assert s1["sack"] is (not sack_args)
    print("emulator:", json.dumps(stats)[:400])


# The cross-check link of the brief: bwn-link --rate-mbit 10 --delay-ms 10 --queue-packets 50.
XCHECK_SECONDS = 8
# Band for goodput(agent) / goodput(iperf3 -C reno). Both should fill the 10 Mb/s
# bottleneck, so the ratio is ~0.95-1.0 when the agent works. It can be lower
# because Linux starts with IW10, repairs losses with SACK and PRR and measures
# over the same 8 s as our slower (IW2) start, and because a busy 2-core machine
# (a compiler runs in the background) delays the Python sender and the emulator.
# It cannot honestly be much higher: nothing beats the link rate.
XCHECK_BAND = (0.5, 1.2)


def test_newreno_goodput_close_to_linux_tcp_reno(topo: Topology, tmp_path: Path) -> None:
    if shutil.which("iperf3") is None:
        missing(no_tool("iperf3"), "goodput against Linux TCP")
    imp = Impairment(delay_us=10_000, rate_bps=10_000_000, queue_packets=50)
    emu = topo.start_emulator(imp, seed=1)
    try:
        server = topo.popen(topo.ns_b, ["iperf3", "-s", "-1", "-B", topo.ip_b, "-p", "5201"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        res = topo.run(topo.ns_a, ["iperf3", "-c", topo.ip_b, "-p", "5201", "-t",
                                   str(XCHECK_SECONDS), "-C", "reno", "-J"],
                       timeout=XCHECK_SECONDS + 30)
        server.wait(10)
        report = json.loads(res.stdout)
        iperf_bps = report["end"]["sum_received"]["bits_per_second"]

        recv = _recv(topo, "--once", "--linger", "0.2")
        sender = _send(topo, "--algo", "newreno", "--duration", str(XCHECK_SECONDS),
                       "--summary-json", str(tmp_path / "s.json"))
        rc, out, err = _finish(sender)
        assert rc == 0, err
        _finish(recv)
    finally:
        emu.stop()
    agent = json.loads((tmp_path / "s.json").read_text())
    agent_bps = agent["goodput_bps"]
    ratio = agent_bps / iperf_bps
    print(f"\ncross-check over 10 Mb/s, 10 ms, 50-packet queue, {XCHECK_SECONDS} s: "
          f"iperf3 -C reno {iperf_bps / 1e6:.3f} Mb/s, bwn-send newreno {agent_bps / 1e6:.3f} Mb/s "
          f"(ratio {ratio:.3f}; retransmits {agent['retransmits']}, timeouts {agent['timeouts']}, "
          f"RTT p50 {agent['rtt_p50_ms']} ms)")
    assert XCHECK_BAND[0] <= ratio <= XCHECK_BAND[1]


@SACK_MODES
@pytest.mark.parametrize("algo", ALGORITHMS)
def test_every_algorithm_delivers_intact_over_impaired_link(algo: str, topo: Topology, tmp_path: Path,
                                                            sack_args: List[str]) -> None:
    """Each of the nine algorithms, as bwn-send over real sockets between two
    namespaces, across bwn-link with delay, 10 % loss, 2 % reordering, 2 %
    duplication and a 10 Mb/s rate limit, with and without SACK: the received
    stream is byte-identical to the input."""
    imp = Impairment(delay_us=5_000, loss=0.10, reorder=0.02, duplicate=0.02,
                     rate_bps=10_000_000, queue_packets=50)
    emu = topo.start_emulator(imp, seed=11)
    src = tmp_path / "in.bin"
    src.write_bytes(os.urandom(200_000))
    recv = _recv(topo, "--out", str(tmp_path / "out.bin"))
    extra = ["--reserved-rate-mbit", "2"] if algo == "gtcp" else []
    try:
        rc, out, err = _finish(_send(topo, "--algo", algo, "--input", str(src), "--flow-id", "7",
                                     "--summary-json", str(tmp_path / "s.json"), *extra,
                                     *sack_args), timeout=240)
        assert rc == 0, err
    finally:
        recv.send_signal(signal.SIGTERM)
        _finish(recv)
        emu.stop()
    assert (tmp_path / "out.bin").read_bytes() == src.read_bytes()
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["sack"] is (not sack_args)
    print(f"{algo} {'no-sack' if sack_args else 'sack'}: {summary['goodput_bps'] / 1e6:.2f} Mb/s, "
          f"{summary['retransmits']} retransmits ({summary['spurious_retransmits']} spurious), "
          f"{summary['timeouts']} timeouts")


GARBAGE = r"""
import os, random, socket, struct, sys, time
from hosts.transport.wire import F_DATA, F_SYN, HEADERS_LEN, encode_options, pack_data_headers
dst = (sys.argv[1], int(sys.argv[2]))
rng = random.Random(7)
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
buf = bytearray(HEADERS_LEN + 4)
sent = {"random": 0, "syn": 0, "wrong_id": 0}
for i in range(10_000):                       # a SYN flood of 10 000 flow ids
    n = pack_data_headers(buf, F_SYN, rng.getrandbits(32), 0, i, encode_options(sack_permitted=True))
    sock.sendto(buf[:n], dst); sent["syn"] += 1
    if i % 5 == 0:                            # random datagrams
        sock.sendto(os.urandom(rng.choice([1, 30, 59, 60, 100, 1400])), dst); sent["random"] += 1
    if i % 10 == 0:                           # data for flow ids nobody opened
        pack_data_headers(buf, F_DATA, 100_000 + i, 1000 * i, i)
        sock.sendto(bytes(buf[:HEADERS_LEN]) + b"x" * 100, dst); sent["wrong_id"] += 1
    if i % 50 == 49:
        time.sleep(0.005)                     # about 10 000 datagrams/s: what bwn-link keeps up with
print(sent)
"""


def test_receiver_under_garbage_over_a_real_socket(topo: Topology, tmp_path: Path) -> None:
    """A real flow across bwn-link while another process in the sender's namespace
    floods the receiver with 10 000 SYNs, random datagrams and data for unknown flow
    ids: the file is intact, bwn-recv reports each kind, and the half-open flows
    stay within --max-half-open."""
    emu = topo.start_emulator(Impairment(delay_us=2_000), seed=5)
    src = tmp_path / "in.bin"
    src.write_bytes(os.urandom(3_000_000))
    stats_path = tmp_path / "stats.json"
    recv = _recv(topo, "--out", str(tmp_path / "out.bin"), "--stats-json", str(stats_path),
                 "--max-half-open", "1000")
    try:
        sender = _send(topo, "--algo", "newreno", "--input", str(src), "--flow-id", "3",
                       "--summary-json", str(tmp_path / "s.json"))
        time.sleep(0.3)
        flood = topo.run(topo.ns_a, [PY, "-c", GARBAGE, topo.ip_b, str(PORT)], timeout=120)
        print("garbage sent:", flood.stdout.strip())
        rc, out, err = _finish(sender, timeout=120)
        assert rc == 0, err
    finally:
        recv.send_signal(signal.SIGTERM)
        rrc, rout, rerr = _finish(recv)
        emu_stats = emu.stop()
    assert (tmp_path / "out.bin").read_bytes() == src.read_bytes()
    stats = json.loads(stats_path.read_text())
    print("bwn-recv:", rout.strip().splitlines()[-1])
    print("emulator a->b:", json.dumps(emu_stats.get("a_to_b"))[:300])
    assert "receiver:" in rout and "malformed" in rout
    segments = json.loads((tmp_path / "s.json").read_text())["receiver_segments"]
    # Every datagram the receiver read is the real flow's or counted by kind.
    assert stats["datagrams"] == (segments + stats["malformed"] + stats["syn_received"]
                                  + stats["unknown_flow"] + stats["unknown_rst"])
    assert stats["syn_received"] >= 9_000 and stats["half_open_evicted"] >= 8_000
    assert stats["half_open_flows"] <= 1000
    assert stats["malformed"] >= 1_500 and stats["unknown_flow"] >= 900
    assert stats["flows_completed"] == 1 and stats["open_flows"] <= 1
