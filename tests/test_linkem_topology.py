"""bwn.linkem.netns.Topology, the three-namespace rig the emulator's tests and
benchmarks are built on: what it creates, the helpers that run things inside it,
and that it leaves nothing behind. Needs root, `ip` and `ethtool`; fast enough
(about a second per test) for the mutation loop (scripts/mutants.py, linkem)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from needs import missing

from bwn.linkem import Impairment
from bwn.linkem.netns import Topology, cleanup_stale, linkem_command, missing_requirements


@pytest.fixture(autouse=True)
def _needs_namespaces():
    missing(missing_requirements(), "namespace topology test")


def _link(topo: Topology, ns: str, ifname: str) -> dict:
    out = topo.run(ns, ["ip", "-j", "-d", "link", "show", "dev", ifname]).stdout
    return json.loads(out)[0]


def _addrs(topo: Topology, ns: str, ifname: str) -> list[str]:
    out = topo.run(ns, ["ip", "-j", "addr", "show", "dev", ifname]).stdout
    return [f"{a['local']}/{a['prefixlen']}" for a in json.loads(out)[0]["addr_info"]]


def test_a_topology_is_three_namespaces_and_two_veth_pairs_and_leaves_nothing():
    with Topology(ip_a="10.78.0.1", ip_b="10.78.0.2", prefix_len=30, mtu=1400) as topo:
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        for ns in topo.namespaces:
            assert ns in listed
        assert topo.namespaces == [f"{topo.tag}-{os.getpid()}-{x}" for x in "aeb"]
        assert topo.interfaces == [f"{topo.tag}a", f"{topo.tag}ea", f"{topo.tag}eb", f"{topo.tag}b"]
        for ns, ifname in ((topo.ns_a, topo.if_a), (topo.ns_emu, topo.emu_if_a),
                           (topo.ns_emu, topo.emu_if_b), (topo.ns_b, topo.if_b)):
            link = _link(topo, ns, ifname)
            assert link["mtu"] == 1400 and "UP" in link["flags"], (ns, ifname)
            features = topo.run(ns, ["ethtool", "-k", ifname]).stdout
            assert "tcp-segmentation-offload: off" in features and "generic-receive-offload: off" in features
        assert _addrs(topo, topo.ns_a, topo.if_a) == ["10.78.0.1/30"]
        assert _addrs(topo, topo.ns_b, topo.if_b) == ["10.78.0.2/30"]
        assert _addrs(topo, topo.ns_emu, topo.emu_if_a) == []       # the emulator's side has none
        for ns in topo.namespaces:
            assert topo.run(ns, ["sysctl", "-n", "net.ipv6.conf.default.disable_ipv6"]).stdout.strip() == "1"
            assert "UP" in _link(topo, ns, "lo")["flags"]
        assert os.path.isdir(topo.workdir) and os.path.basename(topo.workdir).startswith(f"{topo.tag}-")
        # nothing crosses without an emulator
        assert topo.run(topo.ns_a, ["ping", "-c", "1", "-W", "0.3", topo.ip_b], check=False).returncode != 0
        workdir = topo.workdir
    assert topo.leftovers() == [] and not os.path.exists(workdir)


def test_leftovers_name_the_namespaces_and_any_root_interface_of_the_tag():
    topo = Topology().create()
    stray = f"{topo.tag}x"
    try:
        subprocess.run(["ip", "link", "add", stray, "type", "veth", "peer", "name", f"{topo.tag}y"], check=True)
        assert sorted(topo.leftovers()) == sorted(topo.namespaces + [stray, f"{topo.tag}y"])
    finally:
        subprocess.run(["ip", "link", "del", stray], capture_output=True)
        topo.destroy()
    assert topo.leftovers() == []


def test_default_offloads_are_left_as_the_kernel_made_them():
    with Topology(default_offloads=True) as topo:
        features = topo.run(topo.ns_a, ["ethtool", "-k", topo.if_a]).stdout
        assert "tx-checksumming: on" in features


def test_the_helpers_run_in_the_namespace_and_destroy_ends_what_was_started():
    with Topology() as topo:
        assert topo.command(topo.ns_b, ["true"]) == ["ip", "netns", "exec", topo.ns_b, "true"]
        assert topo.run(topo.ns_a, ["ip", "-o", "link", "show", topo.if_a]).returncode == 0
        with pytest.raises(subprocess.CalledProcessError):
            topo.run(topo.ns_a, ["ip", "link", "show", topo.if_b])    # not in A's namespace
        out = topo.python(topo.ns_b, "import bwn.linkem, sys; print(sys.argv[1])", "arg").stdout
        assert out == "arg\n"
        sleeper = topo.popen(topo.ns_emu, [sys.executable, "-c", "import time; time.sleep(60)"])
        topo.set_static_arp()
        neigh = topo.run(topo.ns_a, ["ip", "-j", "neigh", "show", "dev", topo.if_a]).stdout
        (entry,) = json.loads(neigh)
        assert entry["dst"] == topo.ip_b and entry["lladdr"] == topo.mac(topo.ns_b, topo.if_b)
        assert "PERMANENT" in entry["state"]
        assert topo.mac(topo.ns_a, topo.if_a) == _link(topo, topo.ns_a, topo.if_a)["address"]
    assert sleeper.poll() is not None and topo.leftovers() == []
    topo.destroy()                                  # again: nothing to do, nothing raised


def test_an_emulator_in_the_middle_carries_traffic_and_reports_its_stats(tmp_path, monkeypatch):
    # started from another directory holding a `bwn` of its own: this checkout's runs
    (tmp_path / "bwn" / "linkem").mkdir(parents=True)
    for init in ("bwn/__init__.py", "bwn/linkem/__init__.py"):
        (tmp_path / init).write_text("")
    (tmp_path / "bwn" / "linkem" / "__main__.py").write_text("import sys; print('wrong bwn-link'); sys.exit(3)\n")
    monkeypatch.chdir(tmp_path)
    with Topology() as topo:
        topo.set_static_arp()
        emu = topo.start_emulator(Impairment(delay_us=2_000), seed=4)
        assert emu.argv[:4] == ["ip", "netns", "exec", topo.ns_emu] and "--rt-priority" not in emu.argv
        assert emu.netns == topo.ns_emu and emu.config.seed == 4
        stats_path, log_path = emu.stats_path, emu.log_path
        assert os.path.dirname(stats_path) == topo.workdir
        assert os.path.basename(stats_path).startswith("linkem-") and stats_path.endswith(".json")
        assert log_path == stats_path[:-len(".json")] + ".log"
        assert emu.output == "" and emu.stats is None and emu.stop_seconds is None   # until it stops
        ping = topo.run(topo.ns_a, ["ping", "-c", "3", "-i", "0.05", "-W", "2", topo.ip_b])
        assert " 0% packet loss" in ping.stdout
        stats = emu.stop()
        assert stats["seed"] == 4 and stats["exit"] == "stopped"
        assert (stats["iface_a"], stats["iface_b"]) == (topo.emu_if_a, topo.emu_if_b)
        assert stats["a_to_b"]["forwarded_frames"] == 3 and stats["b_to_a"]["forwarded_frames"] == 3
        assert stats["a_to_b"]["config"]["delay_us"] == 2000 == stats["b_to_a"]["config"]["delay_us"]
        assert "bwn-link: ready" in emu.output and emu.stop_seconds >= 0
        assert not os.path.exists(stats_path) and not os.path.exists(log_path)
        assert emu.stop() is emu.stats                  # stopping again gives the same stats
    assert topo.leftovers() == []


def test_bad_tags_are_refused_and_stale_namespaces_of_dead_creators_are_found():
    for tag in ("UPPER", "x" * 12, "a-b"):
        with pytest.raises(ValueError, match="^tag must be 1-11 lowercase letters/digits"):
            Topology(tag=tag)
    dead = subprocess.Popen(["true"])
    dead.wait()
    name = f"lk0a0b0c-{dead.pid}-e"            # the name a topology of that process would have had
    alive = f"lk0a0b0d-{os.getpid()}-e"        # this process's: not stale
    other = f"bwe-other-{os.getpid()}"         # not named like ours (listed first: newest)
    for ns in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split():
        if ns.startswith("bwe-other-") and not os.path.exists(f"/proc/{ns.rsplit('-', 1)[1]}"):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)   # of a test process killed
    made = [name, alive, other]
    for ns in made:
        subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        stale = cleanup_stale(dry_run=True)
        assert name in stale and alive not in stale
        assert name in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert name in cleanup_stale()
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert name not in listed and alive in listed and other in listed
    finally:
        for ns in made:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def test_the_command_line_gives_every_impairment_in_exact_units():
    from bwn.linkem.config import LinkConfig
    config = LinkConfig(a_to_b=Impairment(delay_us=1_234, jitter_us=5, loss=0.25, reorder=0.5, duplicate=0.125,
                                          reorder_hold_us=7, jitter_reorders=True, rate_bps=2_000_000,
                                          queue_packets=40, limit_packets=9),
                        b_to_a=Impairment(), seed=3)
    argv = linkem_command("x", "y", config, stats_json="s.json", rt_priority=5, python="py",
                          extra_args=["--quiet"])
    assert argv == ["py", "-m", "bwn.linkem", "x", "y",
                    "--a-to-b-delay-ms", "1.234", "--a-to-b-jitter-ms", "0.005",
                    "--a-to-b-loss", "0.25", "--a-to-b-reorder", "0.5", "--a-to-b-duplicate", "0.125",
                    "--a-to-b-reorder-hold-ms", "0.007", "--a-to-b-jitter-reorders",
                    "--a-to-b-rate-mbit", "2.0", "--a-to-b-queue-packets", "40", "--a-to-b-limit-packets", "9",
                    "--b-to-a-delay-ms", "0.000",
                    "--seed", "3", "--stats-json", "s.json", "--rt-priority", "5", "--quiet"]


def test_the_emulators_options_and_a_failed_start_reach_the_caller(monkeypatch):
    from bwn.linkem import netns
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    assert netns._python_env()["PYTHONPATH"] == netns._PROJECT_ROOT + os.pathsep + "/elsewhere"
    monkeypatch.delenv("PYTHONPATH")
    assert netns._python_env()["PYTHONPATH"] == netns._PROJECT_ROOT
    with Topology() as topo:
        emu = topo.start_emulator(Impairment(), rt_priority=5, extra_args=["--a-to-b-loss", "0"])
        assert emu.argv[-4:] == ["--rt-priority", "5", "--a-to-b-loss", "0"]
        emu.stop()
        assert emu.returncode == 0 and 0 <= emu.stop_seconds < 10
        with pytest.raises(RuntimeError) as err:
            topo.start_emulator(Impairment(), extra_args=["--rt-priority", "100"])
        assert str(err.value).startswith("bwn-link exited with 2: ")
        assert str(err.value).endswith("--rt-priority must be between 0 and 99")
    assert topo.leftovers() == []


def test_missing_requirements_names_each_thing_missing(monkeypatch):
    from bwn.linkem import netns
    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(netns.shutil, "which", lambda tool: None if tool == "ethtool" else "/usr/bin/" + tool)
    assert netns.missing_requirements() == \
        "bwn.linkem namespace tests need root (euid 0) and the 'ethtool' command"
    monkeypatch.setattr(netns.os, "geteuid", lambda: 0)
    monkeypatch.setattr(netns.shutil, "which", lambda tool: "/usr/bin/" + tool)
    assert netns.missing_requirements() is None
