"""`bwn net`: the scenario's network with the Mininet CLI, driven through standard
input as a user would type, and nothing left afterwards (processes, namespaces,
interfaces) after `exit`, Ctrl-C at the prompt, or SIGTERM mid-command."""
from __future__ import annotations

import csv
import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from needs import missing, stale_build

from bwn.requirements import bmv2_missing
from bwn.emulation.runlock import experiment_lock
from bwn.rundir import RunDir

REPO = Path(__file__).resolve().parents[1]
SMOKE = REPO / "topologies" / "scenarios" / "smoke.toml"
SLEEP_S = "61.4321"   # a command in a host, told apart from anyone else's sleep


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root"
    if bmv2_missing():
        return bmv2_missing()
    try:
        import mininet.net  # noqa: F401
    except ImportError:
        return "Mininet not importable"
    return stale_build()


@pytest.fixture(autouse=True)
def _needs_mininet_and_bmv2():
    missing(_missing(), "bwn net session test")


def _links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines()}


def _boot_ticks_now() -> int:
    return int(float(Path("/proc/uptime").read_text().split()[0]) * os.sysconf("SC_CLK_TCK"))


def _in_namespaces(inodes: set[int], started_by_ticks: int) -> dict[int, str]:
    """Processes in one of these network namespaces that started by then (a namespace
    made later by someone else may get a freed namespace's number)."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            ino = os.stat(f"/proc/{entry.name}/ns/net").st_ino
            stat = Path(f"/proc/{entry.name}/stat").read_text()
            cmdline = Path(f"/proc/{entry.name}/cmdline").read_bytes()
        except OSError:
            continue
        if ino in inodes and int(stat.rsplit(")", 1)[1].split()[19]) <= started_by_ticks:
            found[int(entry.name)] = cmdline.replace(b"\0", b" ").decode(errors="replace")
    return found


def _alive(pid: int, name: str) -> bool:
    """Whether `pid` still runs something called `name` (not a reused pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return name.encode() in cmdline and state != "Z"


def _quiet_links() -> set[str]:
    """Interfaces while no bwn network is up (under the lock)."""
    with experiment_lock(progress=print, timeout_s=600):
        return _links()


def _assert_nothing_left(out: Path, pids: dict[int, str], intfs: set[str], namespaces: set[int],
                         links_before: set[str], ended_by_ticks: int) -> None:
    """Under the experiment lock, so that no other bwn network is up meanwhile (other
    engineers' namespace tests may add their own interfaces and namespaces)."""
    with experiment_lock(progress=print, timeout_s=600):
        assert pids, "the session printed no pids to check"
        alive = {pid: name for pid, name in pids.items() if _alive(pid, name)}
        assert not alive, f"still running after the teardown: {alive}"
        assert intfs & _links() == set(), "the network's interfaces are still there"
        assert {i for i in _links() - links_before if re.fullmatch(r"(s|h|em)\d+-eth\d+", i)} == set()
        assert len(namespaces) == 4, namespaces            # h1, h2, em0, em1
        left = _in_namespaces(namespaces, ended_by_ticks)
        assert not left, f"processes still hold the network's namespaces: {left}"
        ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
        assert str(out) not in ps, "a process of the session is still alive"


def _session_pids(output: str) -> dict[int, str]:
    """The switch and bwn-link pids the session printed, and the node shells' (`dump`)."""
    pids = {int(m.group(1)): "simple_switch_grpc" for m in re.finditer(r"simple_switch_grpc pid (\d+)", output)}
    pids.update({int(m.group(1)): "bwn-link" for m in re.finditer(r"bwn-link pid (\d+)", output)})
    pids.update({int(m.group(1)): "mininet:" for m in re.finditer(r"<\w+ \w+: .* pid=(\d+)>", output)})
    return pids


def _status_rows(output: str) -> dict[tuple[str, int], list[str]]:
    rows = {}
    for line in output.splitlines():
        m = re.match(r"(?:mininet> )?(s\d+)\s+(\d+)\s+(\S+)\s+(schedule|pinned|unlimited)\s+(.*)$", line)
        if m:
            rows[(m.group(1), int(m.group(2)))] = [m.group(3), m.group(4)] + m.group(5).split()
    return rows


def test_stdin_session_ping_status_rate_loss_and_teardown(tmp_path):
    # The smoke scenario with one more step, so that a schedule change falls while
    # the link is pinned by hand: 5 Mb/s, 2 Mb/s from 4 s, 4 Mb/s from 9 s.
    scenario = tmp_path / "smoke-steps.toml"
    scenario.write_text(SMOKE.read_text().replace(
        "{ t_s = 4, rate_mbit = 2 } ]", "{ t_s = 4, rate_mbit = 2 }, { t_s = 9, rate_mbit = 4 } ]"))
    assert "rate_mbit = 4" in scenario.read_text()
    links_before = _quiet_links()
    out = tmp_path / "net"
    commands = "\n".join([
        "pingall",
        *[f"{node} readlink /proc/self/ns/net" for node in ("h1", "h2", "em0", "em1")],
        "h1 which bwn-send bwn-recv iperf3 ping tcpdump",
        "h1 sleep 5",                     # the schedule's step to 2 Mb/s (t = 4 s) is applied
        "bwn rate bottleneck 3",
        "h1 ping -c 3 -i 0.3 h2",         # traffic, so that the switch reports a window at 3 Mb/s
        "bwn status",
        "bwn loss bottleneck 1",
        "h1 ping -c 2 -W 1 h2",
        "bwn loss bottleneck 0",
        "h1 sleep 4",                     # past t = 9 s: the schedule would say 4 Mb/s
        "bwn rate bottleneck schedule",
        "h2 iperf3 -s -D",                # a daemon: out of its shell's reach, not of the teardown's
        "bwn rate nosuch 3",
        "bwn rate bottleneck -1",
        "bwn loss bottleneck 5",
        "intfs",
        "dump",
        "exit",
    ]) + "\n"
    # From a file, as a shell's here-doc may be: Mininet's CLI would feed the rest of
    # it to the first host command as keystrokes.
    script = tmp_path / "commands.txt"
    script.write_text(commands)
    with open(script) as stdin:
        res = subprocess.run([sys.executable, "-m", "bwn.cli.main", "net", str(scenario), "--out", str(out)],
                             stdin=stdin, capture_output=True, text=True, timeout=300, cwd=REPO)
    ended_by_ticks = _boot_ticks_now()
    output = res.stdout + res.stderr
    print(output[-8000:])
    assert res.returncode == 0
    assert "mininet> " in output
    # pingall: both hosts reach each other through the switch (static ARP, routes).
    assert "*** Results: 0% dropped (2/2 received)" in output
    # Every tool on every host's PATH.
    for tool in ("bwn-send", "bwn-recv", "iperf3", "ping", "tcpdump"):
        assert re.search(rf"^(mininet> )?/\S+/{tool}$", output, re.M), tool
    # bwn rate: applied to the dataplane (the switch's own telemetry reports the new
    # capacity) and to the BMv2 queue (capacity.csv has the queue rate it set).
    assert "bottleneck: capacity 3 Mb/s now at s1 port 2 (247.7 packets/s of 1514-byte frames" in output
    rows = _status_rows(output)
    assert set(rows) == {("s1", 1), ("s1", 2)}, output
    link, mode, applied, loss, capacity, ab, share, flows, queue, age = rows[("s1", 2)]
    assert (link, mode, applied, loss) == ("bottleneck", "pinned", "3.000", "0")
    assert float(capacity) == 3.0, "the switch did not report the new capacity"
    # Pings are not counted as flows (only TCP and UDP are: docs/dataplane.md).
    assert float(share) > 0 and int(flows) >= 0 and int(queue) >= 0 and float(age) >= 0
    assert rows[("s1", 1)][:3] == ["h1-s1", "schedule", "20.000"]
    assert float(rows[("s1", 1)][4]) == 20.0
    # bwn loss: 100 % drops the pings, 0 % lets them through again.
    assert "3 packets transmitted, 3 received, 0% packet loss" in output
    assert "2 packets transmitted, 0 received, 100% packet loss" in output
    assert "bottleneck: random loss 100 % now on what s1 port 2 sends onto it" in output
    # The schedule went on while the CLI was open, paused while pinned, resumed after.
    assert "bottleneck: back on its schedule: 4 Mb/s now at s1 port 2" in output
    with open(RunDir(out).capacity_csv) as fh:
        applied_bps = [float(r["rate_bps"]) for r in csv.DictReader(fh) if r["link"] == "bottleneck"]
    assert applied_bps == [5e6, 2e6, 3e6, 4e6]
    # Bad input: clear errors, the session goes on.
    assert "bwn: unknown link 'nosuch'; links: h1-s1, bottleneck" in output
    assert "bwn: MBIT (Mb/s) must be positive, got '-1'" in output
    assert "bwn: P (a probability: 0.01 is 1 %) must be 0..1, got '5'" in output
    assert "bwn net: down" in output
    assert re.search(r"ended pid \d+ left in h2's namespace: iperf3 -s -D", output)
    intfs = set(re.findall(r"\b(?:s|h|em)\d+-eth\d+\b", output))
    assert {"s1-eth1", "s1-eth2", "h1-eth0", "h2-eth0"} <= intfs
    pids = _session_pids(output)
    assert len(pids) == 1 + 2 + 5, pids      # switch, 2 bwn-link, 5 node shells
    namespaces = {int(n) for n in re.findall(r"net:\[(\d+)\]", output)}
    _assert_nothing_left(out, pids, intfs, namespaces, links_before, ended_by_ticks)


def _read_until(proc: subprocess.Popen, text: str, timeout_s: float) -> str:
    """What `proc` printed, up to and including `text`."""
    seen = b""
    deadline = time.monotonic() + timeout_s
    fd = proc.stdout.fileno()
    while text.encode() not in seen:
        left = deadline - time.monotonic()
        assert left > 0 and proc.poll() is None, f"no {text!r} in:\n{seen.decode(errors='replace')}"
        if select.select([fd], [], [], min(left, 1.0))[0]:
            seen += os.read(fd, 65536)
    return seen.decode(errors="replace")


@pytest.mark.parametrize("how, sig, code", [
    ("Ctrl-C at the prompt", signal.SIGINT, 130),
    ("SIGTERM while a host command runs", signal.SIGTERM, 143),
])
def test_interrupted_session_tears_everything_down(tmp_path, how, sig, code):
    links_before = _quiet_links()
    out = tmp_path / "net"
    proc = subprocess.Popen([sys.executable, "-m", "bwn.cli.main", "net", "smoke", "--out", str(out)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=REPO)
    try:
        output = _read_until(proc, "mininet> ", 240)
        proc.stdin.write(b"dump\n")
        proc.stdin.flush()
        output += _read_until(proc, "mininet> ", 30)
        namespaces = {os.stat(f"/proc/{pid}/ns/net").st_ino for pid in _session_pids(output)
                      if "mininet:" in _session_pids(output)[pid]} - {os.stat("/proc/self/ns/net").st_ino}
        if sig == signal.SIGTERM:
            proc.stdin.write(f"h1 sleep {SLEEP_S}\n".encode())
            proc.stdin.flush()
            time.sleep(1.0)
        proc.send_signal(sig)
        rest, _ = proc.communicate(timeout=120)
        ended_by_ticks = _boot_ticks_now()
        output += rest.decode(errors="replace")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    print(output[-5000:])
    assert proc.returncode == code, how
    assert "tearing down" in output and "bwn net: down" in output
    pids = _session_pids(output)
    assert len(pids) == 1 + 2 + 5, pids
    intfs = {"s1-eth1", "s1-eth2"}
    _assert_nothing_left(out, pids, intfs, namespaces, links_before, ended_by_ticks)
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert f"sleep {SLEEP_S}" not in ps, "the command running in h1 survived"
