"""End-to-end tests of bwn-link in network namespaces (root, ``ip``, ``ethtool``).

Topology (bwn.linkem.netns.Topology, one per module, unique ``lkXXXXXX`` tag):
host A --veth-- [emulator namespace: bwn-link] --veth-- host B, static ARP.
All traffic stays inside the namespaces and veths created here.

Stated tolerances: ping RTT through the emulator at one-way delays D1, D2 is
never below D1 + D2, and its median is at most 1.5 (D1 + D2) + 2 ms plus twice
the emulator's own median lateness in each direction (its stats JSON; see
test_ping_rtt_is_sum_of_delays; the precise figure is the benchmark's); random
loss and duplication counts are within 4 binomial standard deviations.
"""

from __future__ import annotations

import json
import math
import shutil
import signal
import statistics
import subprocess
import sys
import time
from typing import Any, Dict, List

import pytest

from needs import missing, no_tool

from bwn.linkem.netns import Topology
from bwn.requirements import linkem_netns_missing

missing(linkem_netns_missing(), "bwn-link namespace tests", module_level=True)

from bwn.linkem import Impairment, netem_available  # noqa: E402

UDP_PORT = 6000
RTT_SLACK_MS = 2.0

RECV_CODE = r"""
import json, socket, sys
port, first_timeout, idle = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
s.bind(("0.0.0.0", port))
s.settimeout(first_timeout)
print("ready", flush=True)
seqs = []
try:
    while True:
        seqs.append(int.from_bytes(s.recv(2048)[:4], "big"))
        s.settimeout(idle)
except socket.timeout:
    pass
seen, dup, ooo, top = set(), 0, 0, -1
for q in seqs:
    if q in seen:
        dup += 1
        continue
    seen.add(q)
    ooo += q < top
    top = max(top, q)
print(json.dumps({"received": len(seqs), "unique": len(seen), "duplicates": dup, "out_of_order": ooo}))
"""

SEND_CODE = r"""
import socket, sys, time
dst, port, n, pps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect((dst, port))
pad, i, t0 = bytes(60), 0, time.monotonic()
while i < n:
    target = min(n, int((time.monotonic() - t0) * pps) + 1)
    while i < target:
        s.send(i.to_bytes(4, "big") + pad)
        i += 1
    time.sleep(0.0002)
print(i)
"""


def within_binomial(count: int, n: int, p: float, sigmas: float = 4.0) -> bool:
    return abs(count - n * p) <= sigmas * math.sqrt(n * p * (1 - p))


@pytest.fixture(scope="module")
def topo():
    t = Topology()
    with t:
        t.set_static_arp()
        yield t
    assert t.leftovers() == [], f"namespaces/veths left behind: {t.leftovers()}"


def ping_rtts(topo: Topology, count: int, interval: float = 0.02) -> List[float]:
    res = topo.run(topo.ns_a, ["ping", "-n", "-c", str(count), "-i", str(interval), "-W", "2",
                               topo.ip_b], check=False)
    return [float(x.split("=")[1]) for x in res.stdout.split() if x.startswith("time=")]


def udp_exchange(topo: Topology, n: int, pps: float) -> Dict[str, Any]:
    """Send n numbered datagrams A->B; return the receiver's counts."""
    rx = topo.popen(topo.ns_b, [sys.executable, "-c", RECV_CODE, str(UDP_PORT), "10", "1.0"],
                    stdout=subprocess.PIPE, text=True)
    assert rx.stdout.readline().strip() == "ready"
    topo.python(topo.ns_a, SEND_CODE, topo.ip_b, str(UDP_PORT), str(n), str(pps))
    out, _ = rx.communicate(timeout=30)
    return json.loads(out)


# -- the link itself ----------------------------------------------------------------


def test_no_emulator_no_connectivity(topo):
    """The emulator namespace's kernel neither answers nor forwards the frames."""
    assert ping_rtts(topo, 2, 0.1) == []


@pytest.mark.parametrize("a_to_b_ms, b_to_a_ms", [(10, 10), (3, 12)])
def test_ping_rtt_is_sum_of_delays(topo, a_to_b_ms, b_to_a_ms):
    """RTT = the two delays, never less; the median within a bound that holds on a
    loaded machine. The precise figure (RTT - D1 - D2) is benchmarks/linkem_bench.py
    rtt's, printed, not asserted.

    What a loaded machine adds is outside the delay rule: the emulator releasing a
    frame late (its lateness histogram, in the stats JSON) and the kernel path
    around it (softirq work deferred to ksoftirqd behind busy processes, which the
    emulator cannot see: it stamps a frame's arrival when it reads it). With 4 busy
    loops on 2 cores the median was up to 5.9 ms above D1 + D2 while the
    emulator's median lateness was sometimes 0.05 ms, so the bound is the measured
    lateness (twice its median per direction) plus half the delay plus 2 ms: loose
    enough for that, tight enough that a doubled delay (both directions, or the
    longer one) fails on an idle machine."""
    emu = topo.start_emulator(Impairment(delay_us=a_to_b_ms * 1000), Impairment(delay_us=b_to_a_ms * 1000))
    rtts = ping_rtts(topo, 30)
    stats = emu.stop()
    expected = a_to_b_ms + b_to_a_ms
    late_ms = {d: stats[d]["lateness"]["p50_us"] / 1000 for d in ("a_to_b", "b_to_a")}
    slack_ms = RTT_SLACK_MS + expected / 2 + 2 * (late_ms["a_to_b"] + late_ms["b_to_a"])
    med = statistics.median(rtts)
    print(f"\nD={a_to_b_ms}+{b_to_a_ms} ms: RTT min {min(rtts):.3f} median {med:.3f} max {max(rtts):.3f} ms "
          f"(expected {expected} ms, +0..+{slack_ms:.3f} ms on the median: emulator lateness p50 "
          f"{late_ms['a_to_b']:.3f} / {late_ms['b_to_a']:.3f} ms)")
    assert len(rtts) == 30
    assert min(rtts) >= expected  # never early
    assert stats["a_to_b"]["lateness"]["frames"] == stats["b_to_a"]["lateness"]["frames"] == 30
    assert med <= expected + slack_ms
    assert emu.returncode == 0
    assert stats["a_to_b"]["forwarded_frames"] == stats["a_to_b"]["rx_frames"] == 30
    assert stats["b_to_a"]["forwarded_frames"] == 30


def test_loss_rate_udp(topo):
    n, p = 3000, 0.1
    emu = topo.start_emulator(Impairment(delay_us=1000, loss=p), Impairment(delay_us=1000), seed=5)
    got = udp_exchange(topo, n, 10_000)
    stats = emu.stop()
    a2b = stats["a_to_b"]
    print(f"\nloss {p}: {got['received']}/{n} received, emulator dropped {a2b['dropped_loss']}")
    assert a2b["rx_frames"] == n
    assert a2b["dropped_loss"] + a2b["forwarded_frames"] == n
    assert got["received"] == a2b["forwarded_frames"]  # everything forwarded arrives
    assert within_binomial(n - got["received"], n, p)
    assert got["duplicates"] == 0 and got["out_of_order"] == 0
    assert stats["b_to_a"]["rx_frames"] == 0


def test_duplicate_and_reorder_udp(topo):
    n, p_dup, p_reo = 3000, 0.05, 0.05
    emu = topo.start_emulator(
        Impairment(delay_us=1000, duplicate=p_dup, reorder=p_reo, reorder_hold_us=3000), seed=8)
    got = udp_exchange(topo, n, 5000)  # a frame every 200 us: ~15 overtake each held one
    a2b = emu.stop()["a_to_b"]
    print(f"\nreceiver: {got}; emulator: duplicated {a2b['duplicated']} held back {a2b['reordered']}")
    assert got["unique"] == n
    assert got["duplicates"] == a2b["duplicated"]
    assert within_binomial(a2b["duplicated"], n, p_dup)
    assert within_binomial(a2b["reordered"], n + a2b["duplicated"], p_reo)
    # A held frame arrives after later ones (unless its duplicate went first).
    assert 0.8 * a2b["reordered"] <= got["out_of_order"] <= a2b["reordered"]


# -- lifecycle ------------------------------------------------------------------------


def promiscuity(topo: Topology, ifname: str) -> int:
    out = topo.run(topo.ns_emu, ["ip", "-d", "link", "show", ifname]).stdout.split()
    return int(out[out.index("promiscuity") + 1])


def test_sigterm_stops_cleanly_and_restores_promisc(topo):
    before = promiscuity(topo, topo.emu_if_a), promiscuity(topo, topo.emu_if_b)
    emu = topo.start_emulator(Impairment(delay_us=5000))
    during = promiscuity(topo, topo.emu_if_a), promiscuity(topo, topo.emu_if_b)
    assert len(ping_rtts(topo, 5)) == 5
    t0 = time.monotonic()
    emu.proc.send_signal(signal.SIGTERM)
    rc = emu.proc.wait(5)
    elapsed = time.monotonic() - t0
    stats = emu.stop()
    assert rc == 0 and elapsed < 2.0, (rc, elapsed)
    assert "bwn-link: stopped after" in emu.output and "forwarded" in emu.output
    assert stats["a_to_b"]["forwarded_frames"] == 5 and stats["exit"] == "stopped"
    assert during == (before[0] + 1, before[1] + 1)
    assert (promiscuity(topo, topo.emu_if_a), promiscuity(topo, topo.emu_if_b)) == before


def test_sigint_on_a_quiet_link_counts_nothing():
    """A fresh link: no IPv6 chatter or anything else crosses it while idle."""
    with Topology() as t:
        emu = t.start_emulator(Impairment(delay_us=1000))
        time.sleep(1.0)
        stats = emu.stop(signal.SIGINT)
    assert emu.returncode == 0
    assert stats["a_to_b"]["rx_frames"] == 0 and stats["b_to_a"]["rx_frames"] == 0
    assert t.leftovers() == []


def test_cleanup_on_failure_leaves_nothing():
    t = Topology()
    with pytest.raises(RuntimeError):
        with t:
            emu = t.start_emulator(Impairment(delay_us=1000))
            sleeper = t.popen(t.ns_a, ["sleep", "60"])
            assert t.leftovers()
            raise RuntimeError("test failure inside the topology")
    assert t.leftovers() == []
    assert emu.proc.poll() is not None and sleeper.poll() is not None


def test_sigusr1_starts_a_rate_schedule_in_the_running_process(topo):
    """`bwn-link --rate-schedule`: 1 kb/s at the schedule's time 0 (a 106-byte frame
    takes 0.85 s), 8 Mb/s from 1 ms on. After SIGUSR1 all 50 datagrams sent at
    1000/s arrive with gaps far below the receiver's 1 s idle timeout; had the
    signal not started the schedule, the second would come 0.85 s after the first
    and the third after the receiver gave up."""
    from bwn.scenario.schedule import StepSchedule

    steps = StepSchedule([(0, 1000.0), (0.001, 8e6)])
    emu = topo.start_emulator(Impairment(rate_schedule=steps, queue_packets=100), Impairment())
    emu.proc.send_signal(signal.SIGUSR1)
    time.sleep(0.2)
    assert emu.proc.poll() is None, "SIGUSR1 ended bwn-link"
    counts = udp_exchange(topo, 50, 1000.0)
    stats = emu.stop()
    assert counts["unique"] == 50, counts
    assert stats["a_to_b"]["config"]["rate_schedule"]["kind"] == "steps"
    assert 0 < stats["schedule_started_s"] < stats["duration_s"]


def test_python_api_in_namespace(topo):
    code = (
        "import json, sys\n"
        "from bwn.linkem import LinkEmulator, Impairment\n"
        "with LinkEmulator(sys.argv[1], sys.argv[2], Impairment(delay_us=4000), seed=3) as emu:\n"
        "    print('ready', flush=True)\n"
        "    sys.stdin.readline()\n"
        "print(json.dumps(emu.final_stats))\n"
    )
    from bwn.linkem.netns import _python_env

    proc = topo.popen(topo.ns_emu, [sys.executable, "-c", code, topo.emu_if_a, topo.emu_if_b],
                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=_python_env())
    assert proc.stdout.readline().strip() == "ready"
    rtts = ping_rtts(topo, 5)
    out, _ = proc.communicate("\n", timeout=10)
    stats = json.loads(out)
    assert len(rtts) == 5 and min(rtts) >= 8.0
    assert stats["seed"] == 3 and stats["a_to_b"]["forwarded_frames"] == 5


def test_emulator_runs_this_checkout_whatever_the_working_directory(topo, tmp_path, monkeypatch):
    """``python -m bwn.linkem`` started from another checkout must not run that one."""
    fake = tmp_path / "bwn" / "linkem"
    fake.mkdir(parents=True)
    (tmp_path / "bwn" / "__init__.py").write_text("")
    (fake / "__init__.py").write_text("")
    (fake / "__main__.py").write_text("import sys\nprint('wrong bwn-link')\nsys.exit(3)\n")
    monkeypatch.chdir(tmp_path)
    emu = topo.start_emulator(Impairment(delay_us=1000))
    emu.stop()
    assert emu.returncode == 0 and "wrong bwn-link" not in emu.output
    out = topo.python(topo.ns_a, "import bwn.linkem, sys; print(bwn.linkem.__file__)").stdout
    assert not out.startswith(str(tmp_path)), out


def test_netem_available_is_a_bool():
    value = netem_available()
    print(f"\nnetem_available() = {value}")
    assert isinstance(value, bool)


# -- kernel TCP (last: TCP teardown must not leak frames into other tests) -----------


@pytest.mark.parametrize("rate_mbit", [None, 20])
def test_iperf3_tcp(topo, rate_mbit):
    missing(no_tool("iperf3"), "bwn-link against iperf3")
    imp = Impairment(delay_us=5000)
    if rate_mbit:
        imp = imp.replace(rate_bps=rate_mbit * 1_000_000, queue_packets=100)
    emu = topo.start_emulator(imp)
    server = topo.popen(topo.ns_b, ["iperf3", "-s", "-1", "-J"], stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True)
    for _ in range(50):  # wait until it listens
        if ":5201" in topo.run(topo.ns_b, ["ss", "-ltn"]).stdout:
            break
        time.sleep(0.05)
    client = topo.run(topo.ns_a, ["iperf3", "-c", topo.ip_b, "-t", "3", "-J"], check=False, timeout=30)
    server.communicate(timeout=10)
    time.sleep(0.3)  # let the TCP teardown cross before the emulator stops
    stats = emu.stop()
    assert client.returncode == 0, client.stdout[-500:] + client.stderr
    report = json.loads(client.stdout)
    mbit = report["end"]["sum_received"]["bits_per_second"] / 1e6
    print(f"\niperf3 TCP, 5 ms each way, rate limit {rate_mbit} Mbit/s: {mbit:.2f} Mbit/s goodput; "
          f"queue drops {stats['a_to_b']['dropped_queue']}")
    assert mbit > 0
    if rate_mbit:
        assert mbit <= rate_mbit * 1.03
        assert mbit >= rate_mbit * 0.5  # near the rate, loosely (loaded 2-core machine)


# -- the project's own agents -------------------------------------------------------
# Runs bwn-recv/bwn-send across the emulator when hosts.send exists; the
# assertions stay on the agents' stable surface (exit status, summary JSON).


def test_bwn_agents_across_emulator(topo):
    from bwn.linkem.netns import _python_env

    env = _python_env()
    emu = topo.start_emulator(
        Impairment(delay_us=5000, loss=0.01, rate_bps=20_000_000, queue_packets=100), seed=2)
    recv_json, send_json = f"{topo.workdir}/recv.json", f"{topo.workdir}/send.json"
    rx = topo.popen(topo.ns_b, [sys.executable, "-m", "hosts.recv", "--once", "--quiet",
                                "--listen", "0.0.0.0:16983", "--summary-json", recv_json], env=env)
    time.sleep(0.5)  # receiver listening
    tx = topo.run(topo.ns_a, [sys.executable, "-m", "hosts.send", "--algo", "newreno",
                              "--dst", f"{topo.ip_b}:16983", "--bytes", "1M",
                              "--summary-json", send_json], check=False, env=env, timeout=60)
    rx.wait(timeout=30)
    time.sleep(0.2)
    stats = emu.stop()
    assert tx.returncode == 0, tx.stderr
    with open(send_json) as fh:
        summary = json.load(fh)
    print(f"\nbwn-send across bwn-link (5 ms, 1% loss, 20 Mbit/s): {tx.stdout.strip()}")
    assert summary["status"] == "complete" and summary["bytes"] == 1_000_000
    assert summary["min_rtt_ms"] >= 10.0  # 2 x 5 ms, never early
    if "packets_sent" in summary:  # every segment the sender sent crossed the emulator
        assert summary["packets_sent"] == stats["a_to_b"]["rx_frames"]
    assert rx.returncode == 0
