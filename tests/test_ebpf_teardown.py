"""The eBPF switch leaves nothing loaded or attached: after a run, a failure, or
Ctrl-C, no pipeline's pins stay under /sys/fs/bpf, no interface keeps a TC or
XDP program or a bottleneck qdisc, no namespace or Mininet interface stays.
(A BPF program or map that nothing pins and nothing attaches is freed by the
kernel: pins and attachments are what can keep one alive.)"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from needs import missing, stale_ebpf_build

from bwn.requirements import ebpf_missing, mininet_missing, netns_missing

REPO = Path(__file__).resolve().parents[1]
BPF_FS = Path("/sys/fs/bpf")


@pytest.fixture(autouse=True)
def _needs_ebpf():
    missing(netns_missing() or ebpf_missing() or stale_ebpf_build(), "eBPF switch teardown")


def _pipelines() -> set[str]:
    return {p.name for p in BPF_FS.glob("pipeline*")} if BPF_FS.is_dir() else set()


def _attached(netns: str | None = None) -> list[str]:
    """Interfaces (of `netns`, or this namespace) with a clsact or htb qdisc or an XDP program."""
    enter = ["ip", "netns", "exec", netns] if netns else []
    out = subprocess.run([*enter, "ip", "-o", "link"], capture_output=True, text=True).stdout
    xdp = [line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if " xdp" in line]
    qdiscs = subprocess.run([*enter, "tc", "qdisc", "show"], capture_output=True, text=True).stdout
    tc = [line.split(" dev ")[1].split()[0] for line in qdiscs.splitlines()
          if line.startswith(("qdisc clsact", "qdisc htb")) and " dev " in line]
    return sorted(set(xdp + tc))


def _mininet_links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return {n for n in (line.split(":")[1].strip().split("@")[0] for line in out.splitlines()) if "-eth" in n}


@pytest.fixture
def rig():
    """A namespace with two veth pairs (made and removed by the test)."""
    from bwn.emulation.netns import NetnsSet
    nets = NetnsSet()
    ns = nets.add_netns("bwnebt")
    yield nets, ns
    nets.close()


def test_switch_stop_detaches_unloads_and_removes_its_qdiscs(rig, tmp_path):
    from controller.ebpf import EbpfSwitch, pipeline_id
    nets, ns = rig
    nets.veth("t1a", "t1b", ns, ns)
    nets.veth("t2a", "t2b", ns, ns)
    pipes = _pipelines()
    sw = EbpfSwitch("t", {1: "t1a", 2: "t2a"}, pipeline_id(70), netns=ns, cpu=0, log_dir=tmp_path)
    sw.start()
    sw.add_qdisc(2, 1e6, 50_000)
    assert f"pipeline{sw.pipe_id}" in _pipelines()
    assert set(_attached(ns)) == {"t1a", "t2a"}
    assert sw.leftovers()                  # what the check below would catch
    sw.stop()
    assert sw.leftovers() == []
    assert _attached(ns) == []
    assert _pipelines() == pipes
    sw.stop()                              # again: nothing to do, no error


def test_a_failed_attach_leaves_nothing(rig, tmp_path):
    """NIKSS cannot attach its XDP helper to a veth whose peer's MTU is above a
    page: the start fails, and what it had done is undone."""
    from controller.ebpf import EbpfSwitch, pipeline_id
    nets, ns = rig
    nets.veth("t1a", "t1b", ns, ns)
    nets.veth("t2a", "t2b", ns, ns, mtu=9000)
    pipes = _pipelines()
    sw = EbpfSwitch("t", {1: "t1a", 2: "t2a"}, pipeline_id(71), netns=ns, cpu=0, log_dir=tmp_path)
    with pytest.raises(Exception, match="add-port"):
        sw.start()
    assert sw.leftovers() == []
    assert _attached(ns) == []
    assert _pipelines() == pipes


def test_a_stale_pipeline_of_the_same_id_is_replaced(rig, tmp_path):
    """A run killed without its teardown leaves its pipeline pinned: the next
    switch with that id detaches and unloads it first, and says so."""
    from controller.ebpf import EbpfSwitch, pipeline_id
    nets, ns = rig
    nets.veth("t1a", "t1b", ns, ns)
    first = EbpfSwitch("t", {1: "t1a"}, pipeline_id(72), netns=ns, log_dir=tmp_path).start()
    first.started = False                  # as if its process had been killed
    second = EbpfSwitch("t", {1: "t1a"}, pipeline_id(72), netns=ns, log_dir=tmp_path)
    second.start()
    try:
        assert "was loaded already" in second.log_path.read_text()
    finally:
        second.stop()
    assert second.leftovers() == []


def _experiment_missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root"
    return mininet_missing()


def test_bwn_run_on_ebpf_leaves_nothing(tmp_path):
    missing(_experiment_missing(), "bwn run --target ebpf")
    from bwn.emulation.runlock import experiment_lock
    with experiment_lock(progress=lambda _m: None):
        before_links, before_attached = _mininet_links(), _attached()
    pipes = _pipelines()
    out = tmp_path / "run"
    res = subprocess.run([sys.executable, "-m", "bwn.cli.main", "run", "smoke", "--target", "ebpf",
                          "--schemes", "newreno", "--duration", "3", "--out", str(out)],
                         capture_output=True, text=True, timeout=300, cwd=REPO)
    print(res.stdout[-4000:], res.stderr[-4000:])
    assert res.returncode == 0
    assert (out / "summary.csv").exists()
    run = (out / "newreno" / "run.json").read_text()
    assert '"target": "ebpf"' in run
    with experiment_lock(progress=lambda _m: None):
        assert _mininet_links() == before_links
        assert _attached() == before_attached
    assert _pipelines() == pipes


def test_ctrl_c_during_a_run_on_ebpf_leaves_nothing(tmp_path):
    missing(_experiment_missing(), "bwn run --target ebpf")
    pipes = _pipelines()
    proc = subprocess.Popen([sys.executable, "-m", "bwn.cli.main", "run", "smoke", "--target", "ebpf",
                             "--schemes", "newreno", "--duration", "30", "--out", str(tmp_path / "run")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
    assert proc.stdout is not None
    seen = []
    deadline = time.monotonic() + 120
    for line in proc.stdout:              # until the flows run (the switches are loaded then)
        seen.append(line)
        if "switches configured" in line or time.monotonic() > deadline:
            break
    assert any("switches configured" in line for line in seen), "".join(seen)
    assert any(p not in pipes for p in _pipelines()), "no pipeline was loaded while the run ran"
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=120)
    print("".join(seen) + rest)
    assert proc.returncode == 130
    assert _pipelines() == pipes
    from bwn.emulation.runlock import experiment_lock
    with experiment_lock(progress=lambda _m: None):
        assert not [n for n in _mininet_links() if n.startswith(("s1-", "em0-", "em1-"))]
        assert not [n for n in _attached() if n.startswith("s1-")]
