"""bwn-link on veths with the kernel's DEFAULT offloads (root, ``ip``, ``ethtool``).

Topology (bwn.linkem.netns.Topology(default_offloads=True), unique ``lkXXXXXX``
tag): host A --veth-- [bwn-link] --veth-- host B, static ARP, with checksum
offload, TSO, GSO and UDP segmentation left on as ``ip link add ... type veth``
makes them.  Hosts' TCP and UDP then hand the emulator frames with partial
checksums and 64 KiB super-frames; these tests check that what reaches the far
host is complete (no checksum errors there, streams intact) and that the
emulator says what it did.  Each test first checks that the offloads really
are on, so it cannot pass by not exercising them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Iterator

import pytest

from needs import missing, no_tool

from bwn.linkem.netns import Topology, _python_env
from bwn.requirements import linkem_netns_missing

missing(linkem_netns_missing(), "bwn-link offload tests", module_level=True)

from bwn.linkem import Impairment  # noqa: E402

PORT = 16990


@pytest.fixture(scope="module")
def topo() -> Iterator[Topology]:
    t = Topology(default_offloads=True)
    with t:
        t.set_static_arp()
        yield t
    assert t.leftovers() == [], f"namespaces/veths left behind: {t.leftovers()}"


def offloads(topo: Topology, ns: str, ifname: str) -> Dict[str, str]:
    out = topo.run(ns, ["ethtool", "-k", ifname]).stdout
    return {k.strip(): v.split()[0] for k, v in (ln.split(":", 1) for ln in out.splitlines()[1:] if ":" in ln)
            if v.strip()}


def assert_default_offloads(topo: Topology) -> None:
    for ns, ifname in ((topo.ns_a, topo.if_a), (topo.ns_b, topo.if_b)):
        k = offloads(topo, ns, ifname)
        assert k["tx-checksumming"] == "on" and k["tcp-segmentation-offload"] == "on", (ifname, k)


def csum_errors(topo: Topology, ns: str) -> Dict[str, int]:
    """InCsumErrors of TCP and UDP in ``ns`` (segments dropped for a bad checksum)."""
    lines = topo.run(ns, ["cat", "/proc/net/snmp"]).stdout.splitlines()
    out = {}
    for i in range(0, len(lines) - 1):
        head, vals = lines[i].split(), lines[i + 1].split()
        if head[0] in ("Tcp:", "Udp:") and vals[0] == head[0] and "InCsumErrors" in head:
            out[head[0][:-1]] = int(vals[head.index("InCsumErrors")])
    return out


def invariant_holds(d: Dict[str, int]) -> bool:
    return d["rx_frames"] + d["duplicated"] == (
        d["forwarded_frames"] + d["dropped_loss"] + d["dropped_queue"] + d["dropped_limit"]
        + d["tx_errors"] + d["pending_at_exit"] + d["dropped_offload"] + d["dropped_oversize"])


def test_iperf3_tcp_across_default_offloads(topo: Topology) -> None:
    missing(no_tool("iperf3"), "bwn-link against iperf3")
    assert_default_offloads(topo)
    errors_before = csum_errors(topo, topo.ns_b), csum_errors(topo, topo.ns_a)
    emu = topo.start_emulator(Impairment(delay_us=2000))
    server = topo.popen(topo.ns_b, ["iperf3", "-s", "-1", "-p", str(PORT)], stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL)
    for _ in range(50):  # wait until it listens
        if f":{PORT}" in topo.run(topo.ns_b, ["ss", "-ltn"]).stdout:
            break
        time.sleep(0.05)
    client = topo.run(topo.ns_a, ["iperf3", "-c", topo.ip_b, "-p", str(PORT), "-t", "3",
                                  "--connect-timeout", "3000", "-J"], check=False, timeout=40)
    try:
        server.wait(10)
    except subprocess.TimeoutExpired:
        server.kill()
    time.sleep(0.3)  # the TCP teardown crosses before the emulator stops
    stats = emu.stop()
    a2b, b2a = stats["a_to_b"], stats["b_to_a"]
    print(f"\niperf3 over default offloads: rc {client.returncode}; A->B {a2b['gso_superframes']} "
          f"super-frames -> {a2b['gso_segments']} segments, {a2b['csum_completed']} checksums; "
          f"B->A {b2a['csum_completed']} checksums completed")
    assert client.returncode == 0, client.stdout[-600:] + client.stderr[-300:]
    report = json.loads(client.stdout)
    assert "error" not in report, report["error"]
    mbit = report["end"]["sum_received"]["bits_per_second"] / 1e6
    print(f"goodput {mbit:.1f} Mbit/s")
    assert mbit > 1.0
    # The far hosts saw no bad checksum.
    assert (csum_errors(topo, topo.ns_b), csum_errors(topo, topo.ns_a)) == errors_before
    # TSO super-frames came in and were cut, ACKs had partial checksums.
    assert a2b["gso_superframes"] > 0 and a2b["gso_segments"] > 2 * a2b["gso_superframes"]
    assert b2a["csum_completed"] > 0
    for d in (a2b, b2a):
        assert d["dropped_offload"] == d["dropped_oversize"] == d["tx_errors"] == 0
        assert invariant_holds(d)


def test_bwn_agents_across_default_offloads(topo: Topology, tmp_path: Path) -> None:
    assert_default_offloads(topo)
    env = _python_env()
    errors_before = csum_errors(topo, topo.ns_b)
    emu = topo.start_emulator(Impairment(delay_us=2000), seed=4)
    src = tmp_path / "in.bin"
    src.write_bytes(bytes((i * 131) & 0xFF for i in range(500_000)))
    out, summary_path = tmp_path / "out.bin", tmp_path / "send.json"
    rx = topo.popen(topo.ns_b, [sys.executable, "-m", "hosts.recv", "--once", "--quiet",
                                "--listen", f"0.0.0.0:{PORT}", "--out", str(out)], env=env)
    time.sleep(0.5)  # receiver listening
    tx = topo.run(topo.ns_a, [sys.executable, "-m", "hosts.send", "--algo", "newreno",
                              "--dst", f"{topo.ip_b}:{PORT}", "--input", str(src),
                              "--summary-json", str(summary_path)], check=False, env=env, timeout=60)
    try:
        rx.wait(timeout=30)
    except subprocess.TimeoutExpired:
        rx.kill()
    stats = emu.stop()
    a2b, b2a = stats["a_to_b"], stats["b_to_a"]
    print(f"\nbwn-send over default offloads: rc {tx.returncode} {tx.stderr.strip()[-200:]}; "
          f"checksums completed A->B {a2b['csum_completed']}, B->A {b2a['csum_completed']}")
    assert tx.returncode == 0, tx.stderr
    summary = json.loads(summary_path.read_text())
    assert summary["status"] == "complete"
    assert out.read_bytes() == src.read_bytes()
    assert csum_errors(topo, topo.ns_b) == errors_before
    assert a2b["csum_completed"] > 0 and b2a["csum_completed"] > 0
    for d in (a2b, b2a):
        assert d["dropped_offload"] == d["dropped_oversize"] == d["tx_errors"] == 0
        assert invariant_holds(d)


UDP_GSO_SEND = r"""
import socket, sys
dst, port, seg, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_UDP, 103, seg)  # UDP_SEGMENT: one send, n/seg datagrams
s.sendto(bytes((i * 7) & 0xFF for i in range(n)), (dst, port))
"""

UDP_RECV = r"""
import json, socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", int(sys.argv[1])))
s.settimeout(float(sys.argv[2]))
print("ready", flush=True)
got = []
try:
    while True:
        got.append(s.recv(65536).hex())
        s.settimeout(1.0)
except socket.timeout:
    pass
print(json.dumps(got))
"""


def test_udp_gso_is_cut_into_datagrams(topo: Topology) -> None:
    assert_default_offloads(topo)
    k = offloads(topo, topo.ns_a, topo.if_a)
    if k.get("tx-udp-segmentation") != "on":
        pytest.skip(f"SKIPPED UDP segmentation offload is not on for veths here: {k.get('tx-udp-segmentation')}")
    emu = topo.start_emulator(Impairment(delay_us=1000))
    rx = topo.popen(topo.ns_b, [sys.executable, "-c", UDP_RECV, str(PORT), "5"], stdout=subprocess.PIPE, text=True)
    assert rx.stdout.readline().strip() == "ready"
    topo.python(topo.ns_a, UDP_GSO_SEND, topo.ip_b, str(PORT), "1000", "9500")
    got = json.loads(rx.communicate(timeout=30)[0])
    a2b = emu.stop()["a_to_b"]
    print(f"\nUDP_SEGMENT 9500 bytes / 1000: {len(got)} datagrams, emulator {a2b['gso_superframes']} "
          f"super-frame(s) -> {a2b['gso_segments']} segments")
    data = bytes((i * 7) & 0xFF for i in range(9500))
    assert [bytes.fromhex(g) for g in got] == [data[i:i + 1000] for i in range(0, 9500, 1000)]
    assert a2b["gso_superframes"] == 1 and a2b["gso_segments"] == 10
    assert a2b["dropped_offload"] == 0 and invariant_holds(a2b)


def test_frames_too_big_for_the_egress_mtu_are_counted_and_reported() -> None:
    """Host A's link has MTU 4000, host B's 1500: big frames are dropped, counted, said."""
    with Topology(default_offloads=True) as t:
        t.set_static_arp()
        for ns, ifname in ((t.ns_a, t.if_a), (t.ns_emu, t.emu_if_a)):
            t.run(ns, ["ip", "link", "set", ifname, "mtu", "4000"])
        emu = t.start_emulator(Impairment(delay_us=1000))
        rx = t.popen(t.ns_b, [sys.executable, "-c", UDP_RECV, str(PORT), "3"], stdout=subprocess.PIPE, text=True)
        assert rx.stdout.readline().strip() == "ready"
        t.python(t.ns_a, "import socket, sys\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                         "for n in (3000, 1000, 3000): s.sendto(bytes(n), (sys.argv[1], int(sys.argv[2])))",
                 t.ip_b, str(PORT))
        got = json.loads(rx.communicate(timeout=30)[0])
        stats = emu.stop()
        leftovers_inside = t.leftovers()
    a2b = stats["a_to_b"]
    print(f"\nMTU 4000 -> 1500: received {[len(g) // 2 for g in got]}; emulator oversize "
          f"{a2b['dropped_oversize']}; output:\n{emu.output}")
    assert [len(g) // 2 for g in got] == [1000]
    assert a2b["dropped_oversize"] == 2 and a2b["tx_errors"] == 0 and invariant_holds(a2b)
    assert "MTU 4000" in emu.output and "3042-byte frame" in emu.output
    assert emu.output.count("-byte frame") == 1  # said once
    assert leftovers_inside and t.leftovers() == []
