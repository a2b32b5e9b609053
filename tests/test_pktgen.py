"""The C traffic generator of benchmarks/switch_pps.py (benchmarks/pktgen/bwn_pktgen.c):
it compiles without warnings, refuses bad input with a clear message, and over a veth
pair it sends exactly the frames asked for, the template's frames in order, and
counts exactly what arrived.

The veth pair lives in a network namespace this test creates (unique name, removed
in `finally`, also on failure); no traffic leaves it. An independent AF_PACKET
socket (this process) captures what arrives, and the interfaces' own counters are
read, so a generator that sent a wrong frame, the frames in a wrong order, or a
wrong number of them, or that counted wrongly, fails. No timing is asserted.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from needs import missing, no_tool, not_root

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import switch_pps  # noqa: E402

ETH_P_ALL = 0x0003


@pytest.fixture(scope="module")
def pktgen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`make pktgen` into a private build directory (not the shared build/)."""
    missing(no_tool("gcc", "make"), "C traffic generator")
    build = tmp_path_factory.mktemp("pktgen-build")
    res = subprocess.run(["make", "--no-print-directory", "-C", str(REPO), "pktgen", f"BUILD={build}"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "warning:" not in res.stderr, res.stderr
    return build / "bwn_pktgen"


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[bytes]]:
    """The benchmark's own stamped-DATA frames (8 flows), as switch_pps.py writes them."""
    pkts = switch_pps.frames("data")
    return switch_pps.write_template(tmp_path_factory.mktemp("tpl") / "data.tpl", pkts), pkts


def test_help_and_errors(pktgen: Path, tmp_path: Path) -> None:
    res = subprocess.run([str(pktgen), "--help"], capture_output=True, text=True)
    assert res.returncode == 0 and "--template" in res.stdout and "--inflight" in res.stdout
    bad = tmp_path / "bad.tpl"
    bad.write_text("# a comment\n" + "00" * 20 + "\n" + "zz" * 20 + "\n")
    res = subprocess.run([str(pktgen), "--template", str(bad), "--tx", "lo", "--rx-count", "none",
                          "--mode", "open"], capture_output=True, text=True)
    assert res.returncode == 2 and "line 3" in res.stderr and "not a hex byte" in res.stderr
    res = subprocess.run([str(pktgen), "--template", str(bad), "--tx", "lo", "--rx-count", "counter"],
                         capture_output=True, text=True)
    assert res.returncode == 2 and "needs --rx-count socket" in res.stderr


@pytest.fixture
def veth_ns() -> tuple[str, str, str]:
    """(namespace, sending end, receiving end): a veth pair inside a fresh namespace,
    IPv6 off so that nothing but the generator's frames crosses it."""
    missing(not_root() or no_tool("ip"), "C traffic generator over veth")
    tag = uuid.uuid4().hex[:8]
    ns, a, b = f"pgt{tag}", f"pga{tag}", f"pgb{tag}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        for key in ("all", "default"):
            subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw", f"net.ipv6.conf.{key}.disable_ipv6=1"],
                           check=True)
        subprocess.run(["ip", "-n", ns, "link", "add", a, "type", "veth", "peer", "name", b], check=True)
        for name in (a, b):
            subprocess.run(["ip", "-n", ns, "link", "set", name, "up"], check=True)
        yield ns, a, b
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)   # its veths go with it
        assert ns not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


def net_dev(ns: str) -> dict[str, tuple[int, int]]:
    """Interface -> (rx_packets, tx_packets) in namespace `ns`."""
    out = subprocess.run(["ip", "netns", "exec", ns, "cat", "/proc/net/dev"], capture_output=True, text=True,
                         check=True).stdout
    rows = {}
    for line in out.splitlines()[2:]:
        name, _, rest = line.partition(":")
        f = rest.split()
        rows[name.strip()] = (int(f[1]), int(f[9]))
    return rows


def run_and_capture(pktgen: Path, tpl: Path, ns: str, a: str, b: str, *args: str) -> tuple[dict, list[bytes], dict]:
    """Run the generator from `a` to `b`; return its result, the frames an independent
    socket on `b` captured, and each interface's counters' growth."""
    with switch_pps.InNetns(ns):
        cap = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    try:
        cap.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)          # SO_RCVBUFFORCE: keep every frame
        cap.bind((b, 0))
        before = net_dev(ns)
        res = subprocess.run([str(pktgen), "--template", str(tpl), "--netns", ns, "--tx", a, "--rx", b, *args],
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        after = net_dev(ns)
        got = []
        cap.setblocking(False)
        while True:
            try:
                frame, addr = cap.recvfrom(65536)
            except BlockingIOError:
                break
            if addr[2] != socket.PACKET_OUTGOING:
                got.append(frame)
    finally:
        cap.close()
    grew = {k: (after[k][0] - before[k][0], after[k][1] - before[k][1]) for k in (a, b)}
    return json.loads(res.stdout.strip().splitlines()[-1]), got, grew


@pytest.mark.parametrize("args", [
    ("--mode", "open", "--rate", "20000", "--rx-count", "socket"),
    ("--mode", "open", "--rate", "20000", "--rx-count", "counter", "--batch", "5"),
    ("--mode", "closed", "--inflight", "16"),
], ids=["open-socket", "open-counter", "closed"])
def test_sends_exactly_n_template_frames(pktgen: Path, template: tuple[Path, list[bytes]],
                                         veth_ns: tuple[str, str, str], args: tuple[str, ...]) -> None:
    tpl, pkts = template
    ns, a, b = veth_ns
    n = 2003                                   # not a multiple of the 8 frames, nor of the batch
    result, got, grew = run_and_capture(pktgen, tpl, ns, a, b, "--count", str(n), *args)
    assert (result["sent"], result["received"], result["lost"]) == (n, n, 0)
    assert grew[a][1] == n and grew[b][0] == n      # the interfaces' own counters
    assert len(got) == n
    expected = [pkts[i % len(pkts)] for i in range(n)]
    wrong = [i for i, (g, e) in enumerate(zip(got, expected)) if g != e]
    assert not wrong, f"{len(wrong)} frames differ from the template's, the first at {wrong[0]}"
