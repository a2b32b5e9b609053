"""Captures of bottleneck links (bwn/emulation/capture.py) and reading them (bwn/analysis/pcaptrace.py).

The tcpdump tests run in a network namespace of their own, on a veth pair made
for the test; frames go only from one end of that pair to the other."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from bwn.emulation import capture
from bwn.rundir import RunDir, RunMeta
from bwn.scenario.config import load_config
from hosts.transport.wire import F_ACK, F_DATA, F_RETX, TransportHeader
from bwn.analysis.pcaptrace import read_trace
from bwn.protocol.wire import BWN_UDP_PORT, KIND_ACK, BwnHeader
from needs import missing, no_tool, not_root

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = REPO / "topologies" / "scenarios"
MSS_BYTES = 1000


class Intf(SimpleNamespace):
    pass


def fake_ends(cfg) -> dict:
    """BuiltNetwork.ends without Mininet: link -> (a's interface, b's interface)."""
    return {link.name: (Intf(name=f"{link.a}-eth{i}"), Intf(name=f"{link.b}-eth{i}"))
            for i, link in enumerate(cfg.links)}


# ---------------------------------------------------------------------------------------
# What is captured, where


def test_plan_captures_each_bottleneck_on_its_scheduling_switch(tmp_path):
    cfg = load_config(SCENARIOS / "obp-parking-lot.toml")
    points = capture.plan(cfg, fake_ends(cfg), tmp_path, cfg.duration_s)
    index = {link.name: i for i, link in enumerate(cfg.links)}
    assert [(p.link, p.node, p.interface) for p in points] == [
        ("b1", "s1", f"s1-eth{index['b1']}"), ("b2", "s2", f"s2-eth{index['b2']}"),
        ("b3", "s3", f"s3-eth{index['b3']}")]
    assert points[0].path == tmp_path / "capture" / "b1.pcap"


def test_plan_uses_the_switch_end_of_a_host_link(tmp_path):
    # smoke: the bottleneck is s1 - h2; only s1's interface is in the root namespace.
    cfg = load_config(SCENARIOS / "smoke.toml")
    [point] = capture.plan(cfg, fake_ends(cfg), tmp_path, cfg.duration_s)
    assert (point.link, point.node) == ("bottleneck", "s1")


def test_scenario_capture_table_overrides_the_bottlenecks(tmp_path):
    text = (SCENARIOS / "smoke.toml").read_text() + '\n[capture]\nlinks = ["h1-s1"]\n'
    (tmp_path / "s.toml").write_text(text)
    cfg = load_config(tmp_path / "s.toml")
    assert capture.capture_links(cfg, cfg.duration_s) == ["h1-s1"]
    [point] = capture.plan(cfg, fake_ends(cfg), tmp_path, cfg.duration_s)
    assert (point.node, point.interface) == ("s1", "s1-eth0")


def test_tcpdump_statistics_are_parsed():
    lines = ["tcpdump: listening on s1-eth2, link-type EN10MB", "1204 packets captured",
             "1210 packets received by filter", "6 packets dropped by kernel"]
    assert capture._counts(lines) == {"captured": 1204, "received_by_filter": 1210,
                                      "dropped_by_kernel": 6}


# ---------------------------------------------------------------------------------------
# tcpdump in a namespace of the test's own


@pytest.fixture()
def veth_ns():
    missing(not_root(), "capture test")
    missing(no_tool("tcpdump", "ip"), "capture test")
    ns = f"bwncap{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        # No IPv6 (router solicitations): the only frames on the pair are the test's.
        subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw",
                        "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"],
                       check=True)
        run = ["ip", "-n", ns, "link"]
        subprocess.run(run + ["add", "cap0", "type", "veth", "peer", "name", "cap1"], check=True)
        for name in ("cap0", "cap1", "lo"):
            subprocess.run(run + ["set", name, "up"], check=True)
        yield ns
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)


def frames(n: int) -> list[bytes]:
    """n DATA segments of MSS_BYTES (every 5th a retransmission), then one ACK."""
    from scapy.all import IP, UDP, Ether, Raw
    out = []
    eth_ip = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(src="10.9.0.1",
                                                                          dst="10.9.0.2")
    for i in range(n):
        flags = F_DATA | (F_RETX if i % 5 == 4 else 0)
        tr = TransportHeader(flags=flags, flow_id=3, seq=i * MSS_BYTES)
        out.append(bytes(eth_ip / UDP(sport=40000, dport=BWN_UDP_PORT)
                         / Raw(BwnHeader().pack() + tr.pack() + bytes(MSS_BYTES))))
    ack = TransportHeader(flags=F_ACK, flow_id=3, ack=n * MSS_BYTES)
    out.append(bytes(eth_ip / UDP(sport=BWN_UDP_PORT, dport=40000)
                     / Raw(BwnHeader(kind=KIND_ACK).pack() + ack.pack())))
    return out


def send_in(ns: str, interface: str, data: list[bytes]) -> None:
    code = ("import sys; from scapy.all import sendp, Ether; "
            "frames = [bytes.fromhex(h) for h in sys.argv[2:]]; "
            "sendp([Ether(f) for f in frames], iface=sys.argv[1], verbose=False)")
    subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", code, interface,
                    *[f.hex() for f in data]], check=True, timeout=60)


def wait_for_packets(path: Path, count: int, timeout_s: float = 20.0) -> None:
    """Until tcpdump (-U: a packet is written as it is read) has written `count`
    packets to `path`, or `timeout_s` (then the test's own assertions say what is
    missing): a loaded machine may take a while to schedule it."""
    import dpkt
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with path.open("rb") as fh:
                if sum(1 for _ in dpkt.pcap.Reader(fh)) >= count:
                    return
        except (OSError, ValueError, dpkt.dpkt.NeedData):
            pass
        time.sleep(0.1)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purposes (its parent has not reaped it yet).
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_capture_keeps_headers_only_and_stops(veth_ns, tmp_path):
    import dpkt
    point = capture.CapturePoint("lnk", "s1", "cap0", tmp_path / "capture" / "lnk.pcap")
    with capture.Captures([point], prefix=["ip", "netns", "exec", veth_ns]) as captures:
        pid = captures.running[0].proc.pid
        send_in(veth_ns, "cap1", frames(20))
        wait_for_packets(point.path, 21)
    assert not alive(pid)
    assert captures.stats["lnk"]["captured"] == 21
    with point.path.open("rb") as fh:
        caplens = [len(buf) for _, buf in dpkt.pcap.Reader(fh)]
    assert caplens == [capture.SNAP_BYTES] * 20 + [capture.HEADERS_BYTES]
    trace = read_trace(point.path)
    flow = trace.flows[3]
    assert flow.data_seq == [i * MSS_BYTES for i in range(20)]
    assert flow.data_end[0] == MSS_BYTES          # from the UDP length: payload not kept
    assert flow.retransmissions == 4 and flow.ack_no == [20 * MSS_BYTES]


def test_capture_stops_when_the_run_fails(veth_ns, tmp_path):
    point = capture.CapturePoint("lnk", "s1", "cap0", tmp_path / "c.pcap")
    with pytest.raises(RuntimeError, match="the run failed"):
        with capture.Captures([point], prefix=["ip", "netns", "exec", veth_ns]) as captures:
            pid = captures.running[0].proc.pid
            raise RuntimeError("the run failed")
    assert not alive(pid)
    assert point.path.exists()


def test_missing_interface_is_a_clear_error_and_leaves_nothing(veth_ns, tmp_path):
    points = [capture.CapturePoint("ok", "s1", "cap0", tmp_path / "ok.pcap"),
              capture.CapturePoint("bad", "s1", "nosuch0", tmp_path / "bad.pcap")]
    captures = capture.Captures(points, prefix=["ip", "netns", "exec", veth_ns])
    with pytest.raises(capture.CaptureError, match="nosuch0 .link bad. did not start"):
        with captures:
            pass
    assert captures.running == []
    assert set(captures.stats) == {"ok", "bad"}


def test_capture_dies_with_a_killed_runner(veth_ns, tmp_path):
    # A runner killed with SIGKILL cannot stop its captures: the kernel does (pdeathsig).
    missing(no_tool("setpriv"), "capture test")
    code = (
        "import sys, time; from pathlib import Path; from bwn.emulation import capture; "
        f"p = capture.CapturePoint('lnk', 's1', 'cap0', Path({str(tmp_path / 'k.pcap')!r})); "
        f"c = capture.Captures([p], prefix=['ip', 'netns', 'exec', {veth_ns!r}]); c.start(); "
        "print(c.running[0].proc.pid, flush=True); time.sleep(60)")
    runner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    pid = None
    try:
        pid = int(runner.stdout.readline())
        assert alive(pid)
        runner.send_signal(signal.SIGKILL)
        runner.wait(10)
        deadline = time.monotonic() + 10
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(pid)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait(10)
        if pid is not None and alive(pid):        # the test failed: leave nothing running
            os.kill(pid, signal.SIGKILL)


# ---------------------------------------------------------------------------------------
# The report's figure from a capture


def test_report_draws_the_time_sequence_figure_from_the_capture(tmp_path):
    import json

    from scapy.all import Ether, wrpcap

    from bwn.analysis.report import write_report

    from bwn.analysis.report.load import load_run_dir
    from bwn.analysis.report.timeseq import traces
    scheme_dir = tmp_path / "ebn"
    (scheme_dir / "flows").mkdir(parents=True)
    (scheme_dir / "flows" / "main.jsonl").write_text(
        "".join(json.dumps({"time_s": t / 10, "algo": "ebn", "delivered_bytes": 1000 * t}) + "\n"
                for t in range(11)))
    packets = [Ether(f) for f in frames(20)]
    epoch_s = 1_700_000_000.0
    for i, p in enumerate(packets):
        p.time = epoch_s + 2.0 + i * 0.01           # experiment time 2.0 s on
    run = RunDir(scheme_dir)
    run.capture_dir.mkdir()
    wrpcap(str(run.capture_file("bottleneck")), packets)
    run.write_meta(RunMeta(flow_ids={"main": 3}, clock_offset_s=epoch_s,
                           captures={"bottleneck": {"node": "s1", "interface": "s1-eth1",
                                                    "file": "capture/bottleneck.pcap"}}))
    runs = load_run_dir(tmp_path)
    [trace] = traces(runs[0]).values()
    assert trace.flows[3].data_t_s[0] == pytest.approx(2.0)
    write_report(tmp_path, runs)
    png = tmp_path / "seq-ebn.png"
    assert png.read_bytes().startswith(b"\x89PNG") and png.stat().st_size > 10_000
    assert "![seq-ebn](seq-ebn.png)" in (tmp_path / "summary.md").read_text()
