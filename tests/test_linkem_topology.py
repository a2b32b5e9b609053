"""bwn.linkem.netns.Topology, the three-namespace rig the emulator's tests and
benchmarks are built on: what it creates, the helpers that run things inside it,
and that it leaves nothing behind. Needs root, `ip` and `ethtool`; fast enough
(about a second per test) for the mutation loop (scripts/mutants.py, linkem)."""
from __future__ import annotations

import errno
import gc
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from pathlib import Path

import pytest

from needs import missing

from bwn.linkem import Impairment
from bwn.linkem.config import LinkConfig
from bwn.linkem.netns import (
    EmulatorProcess,
    Topology,
    cleanup_stale,
    linkem_command,
    new_tag,
)
from bwn import requirements
from bwn.requirements import linkem_netns_missing


@pytest.fixture(autouse=True)
def _needs_namespaces():
    missing(linkem_netns_missing(), "namespace topology test")


@pytest.fixture
def sweep():
    """`sweep(topo)`: whatever of `topo` is left when the test ends (a failed assertion, a
    broken destroy) is removed: processes in its namespaces, the namespaces, its workdir.
    Keeps names only, so the topology itself can still be garbage-collected."""
    made: list[tuple[str, list[str]]] = []
    yield lambda topo: made.append((topo.tag, topo.namespaces))
    for tag, namespaces in made:
        for ns in namespaces:
            for pid in _pids(ns):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        for path in glob.glob(os.path.join(tempfile.gettempdir(), f"{tag}-*")):
            shutil.rmtree(path, ignore_errors=True)


def _pids(ns: str) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout
    return [int(pid) for pid in out.split()]


def _netns_list() -> list[str]:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()


def _ended(pid: int, within_s: float = 5.0) -> bool:
    """True once `pid` is gone (or a zombie nobody has reaped yet)."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)


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
    monkeypatch.setattr(requirements.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(requirements.shutil, "which", lambda tool: None if tool == "ethtool" else "/usr/bin/" + tool)
    assert requirements.linkem_netns_missing() == \
        "bwn.linkem namespace tests need root (euid 0) and the 'ethtool' command"
    monkeypatch.setattr(requirements.os, "geteuid", lambda: 0)
    monkeypatch.setattr(requirements.shutil, "which", lambda tool: "/usr/bin/" + tool)
    assert requirements.linkem_netns_missing() is None


def test_the_defaults_a_linkconfig_and_an_emulator_not_ready_in_time(sweep):
    with Topology() as topo:
        sweep(topo)
        assert _addrs(topo, topo.ns_a, topo.if_a) == ["10.77.0.1/24"]
        assert _addrs(topo, topo.ns_b, topo.if_b) == ["10.77.0.2/24"]
        for ns, ifname in ((topo.ns_a, topo.if_a), (topo.ns_emu, topo.emu_if_a), (topo.ns_b, topo.if_b)):
            assert _link(topo, ns, ifname)["mtu"] == 1500
        with pytest.raises(TimeoutError, match=r"^bwn-link not ready after 0\.0 s: "):
            topo.start_emulator(ready_timeout_s=0.0)
        # killed on the spot: nothing left running in the emulator's namespace, no files
        assert _pids(topo.ns_emu) == [] and os.listdir(topo.workdir) == []
        config = LinkConfig(a_to_b=Impairment(delay_us=1_000), b_to_a=Impairment(), seed=7)
        emu = topo.start_emulator(config)     # the default wait: no time bound here (a loaded machine)
        stats = emu.stop()
        assert stats["seed"] == 7 and stats["a_to_b"]["config"]["delay_us"] == 1000
        assert stats["b_to_a"]["config"]["delay_us"] == 0
    assert topo.leftovers() == []


def test_destroy_ends_everything_started_inside_even_what_ignores_sigterm(sweep):
    graceful_code = ("import signal, sys, time\n"
                     "signal.signal(signal.SIGTERM, lambda *_: (print('stopped cleanly'), sys.exit(0)))\n"
                     "print('ready', flush=True)\n"
                     "time.sleep(30)\n")
    orphan = 0
    try:
        with Topology() as topo:
            sweep(topo)
            emu = topo.start_emulator()                             # never stopped by the caller
            graceful = topo.popen(topo.ns_a, [sys.executable, "-c", graceful_code], stdout=subprocess.PIPE,
                                  text=True)
            stubborn = topo.popen(topo.ns_b, ["sh", "-c", "trap '' TERM; echo ready; exec sleep 30"],
                                  stdout=subprocess.PIPE, text=True)
            # started inside, but not by popen (a daemon, a helper's child): only `ip netns pids` knows it
            orphan = int(topo.run(topo.ns_emu, ["sh", "-c", "trap '' TERM; sleep 30 >/dev/null 2>&1 & echo $!"])
                         .stdout)
            assert graceful.stdout.readline() == "ready\n" and stubborn.stdout.readline() == "ready\n"
        # what popen started is asked to stop first, so it can finish its output
        assert graceful.stdout.read() == "stopped cleanly\n" and graceful.returncode == 0
        assert stubborn.returncode == -signal.SIGKILL
        assert _ended(orphan)
        # and the emulator was stopped, not killed: its stats are there
        assert emu.returncode == 0 and emu.stats["exit"] == "stopped"
        assert topo.leftovers() == [] and not os.path.exists(topo.workdir)
    finally:
        if orphan:
            try:
                os.kill(orphan, signal.SIGKILL)
            except OSError:
                pass


def test_a_hung_emulator_does_not_hang_the_teardown(sweep):
    with Topology() as topo:
        sweep(topo)
        emu = topo.start_emulator()
        os.kill(emu.pid, signal.SIGSTOP)                   # stopped: SIGTERM cannot end it
        t0 = time.monotonic()
    assert time.monotonic() - t0 < 10
    assert emu.returncode == -signal.SIGKILL and topo.leftovers() == []


def test_what_someone_else_already_removed_does_not_make_destroy_raise(sweep):
    with Topology() as topo:
        sweep(topo)
        subprocess.run(["ip", "netns", "del", topo.ns_b], check=True)
        shutil.rmtree(topo.workdir)
    assert topo.leftovers() == []


def test_destroy_is_idempotent_touches_nothing_before_create_and_lets_the_topology_go(sweep):
    topo = Topology()
    sweep(topo)
    assert not topo.workdir and topo.leftovers() == []           # nothing exists before create()
    with topo:
        Topology(tag=topo.tag).destroy()          # never created: must not remove its namesake's
        assert set(topo.namespaces) <= set(_netns_list())
    # a second destroy (a second exit, atexit) does nothing, even to namespaces that now bear its names
    subprocess.run(["ip", "netns", "add", topo.ns_a], check=True)
    try:
        topo.destroy()
        assert topo.leftovers() == [topo.ns_a]
    finally:
        subprocess.run(["ip", "netns", "del", topo.ns_a], capture_output=True)
    ref = weakref.ref(topo)
    del topo
    gc.collect()
    assert ref() is None, "a destroyed topology is still referenced (atexit?)"


def test_a_failed_create_raises_ips_error_and_leaves_nothing(sweep):
    before = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        topo = Topology(ip_b="10.77.0.999")
        sweep(topo)
        with pytest.raises(subprocess.CalledProcessError) as err:
            with topo:
                pass
        assert "10.77.0.999/24" in err.value.stderr
        assert topo.leftovers() == [] and topo.workdir and not os.path.exists(topo.workdir)
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, before)


def test_sigterm_in_the_context_exits_with_the_signals_status_after_cleaning_up(sweep):
    before = signal.signal(signal.SIGTERM, signal.SIG_DFL)        # as in a plain script
    try:
        topo = Topology()
        sweep(topo)
        with pytest.raises(SystemExit) as exited:
            with topo:
                handler = signal.getsignal(signal.SIGTERM)
                # (else the kill below would end this test run)
                assert handler not in (signal.SIG_DFL, signal.SIG_IGN, None), "no SIGTERM handler inside"
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(1)
        assert exited.value.code == 128 + signal.SIGTERM
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
        assert topo.leftovers() == [] and not os.path.exists(topo.workdir)
    finally:
        signal.signal(signal.SIGTERM, before)


def test_a_callers_own_sigterm_handler_is_left_alone_and_a_topology_can_be_built_again(sweep):
    def mine(_signum, _frame):
        pass

    before = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        topo = Topology()
        sweep(topo)
        with topo:
            pass
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
        signal.signal(signal.SIGTERM, mine)
        with topo:
            assert signal.getsignal(signal.SIGTERM) is mine
            assert set(topo.namespaces) <= set(_netns_list())
        assert signal.getsignal(signal.SIGTERM) is mine
        assert topo.leftovers() == []
    finally:
        signal.signal(signal.SIGTERM, before)


def test_a_topology_used_from_another_thread_leaves_signals_alone_and_nothing_behind(sweep):
    before = signal.getsignal(signal.SIGTERM)
    made: list[Topology] = []
    errors: list[BaseException] = []

    def work():
        try:
            topo = Topology()
            made.append(topo)
            sweep(topo)
            with topo:
                topo.run(topo.ns_a, ["true"])
        except BaseException as exc:          # reported below, in the test's thread
            errors.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(30)
    assert errors == [] and signal.getsignal(signal.SIGTERM) is before
    assert made[0].leftovers() == []


def test_an_emulator_process_on_its_own_gets_no_terminal_and_is_killed_if_the_signal_does_not_end_it(sweep):
    with Topology() as topo:
        sweep(topo)
        read_end, write_end = os.pipe()
        saved = os.dup(0)
        os.dup2(read_end, 0)                # started from a terminal: a pipe stands in for it
        try:
            emu = EmulatorProcess(topo.ns_emu, topo.emu_if_a, topo.emu_if_b, LinkConfig.symmetric(Impairment()))
        finally:
            os.dup2(saved, 0)
            for fd in (saved, read_end, write_end):
                os.close(fd)
        try:
            assert os.readlink(f"/proc/{emu.pid}/fd/0") == "/dev/null"
            assert "--rt-priority" not in emu.argv              # no real-time priority unless asked for
            assert os.path.dirname(emu.log_path) == tempfile.gettempdir()
            emu.wait_ready()
            stats = emu.stop(signal.SIGCONT, timeout_s=0.3)      # a signal that does not end it
            assert emu.returncode == -signal.SIGKILL and 0.3 <= emu.stop_seconds < 5
            assert stats == {} and emu.stats == {}               # stopped, with nothing to report
            assert not os.path.exists(emu.log_path) and not os.path.exists(emu.stats_path)
        finally:
            emu.stop(signal.SIGKILL)


def test_python_and_the_emulator_run_this_checkout_whatever_the_callers_directory_or_pythonpath(
        tmp_path, monkeypatch, sweep):
    from bwn.linkem import netns
    other = tmp_path / "other-checkout"
    (other / "bwn" / "linkem").mkdir(parents=True)
    for init in ("bwn/__init__.py", "bwn/linkem/__init__.py"):
        (other / init).write_text("")
    (other / "bwn" / "linkem" / "__main__.py").write_text("import sys; print('wrong bwn-link'); sys.exit(3)\n")
    which = "import bwn, os; print(os.path.realpath(bwn.__file__))"
    ours = os.path.realpath(os.path.join(netns._PROJECT_ROOT, "bwn", "__init__.py")) + "\n"
    with Topology() as topo:
        sweep(topo)
        monkeypatch.chdir(other)                  # "-c" puts the working directory first on sys.path
        assert topo.python(topo.ns_a, which).stdout == ours
        assert topo.python(topo.ns_a, "import sys; sys.exit(3)", check=False).returncode == 3
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("PYTHONSAFEPATH", "1")         # no directory first, the other checkout on the path
        monkeypatch.setenv("PYTHONPATH", str(other))
        assert topo.python(topo.ns_b, which).stdout == ours
        emu = topo.start_emulator()
        assert emu.stop()["exit"] == "stopped"


def test_a_process_run_in_a_namespace_can_be_given_a_timeout(sweep):
    with Topology() as topo:
        sweep(topo)
        t0 = time.monotonic()
        with pytest.raises(subprocess.TimeoutExpired):
            topo.run(topo.ns_a, ["sleep", "5"], timeout=0.2)
        assert time.monotonic() - t0 < 4.5 and _pids(topo.ns_a) == []   # sleep 5 would take 5 s


def test_cleanup_stale_removes_all_of_a_dead_topology_and_never_signals_a_live_creator(monkeypatch):
    from bwn.linkem import netns
    dead = subprocess.Popen(["true"])
    dead.wait()
    alive = subprocess.Popen(["sleep", "30"])          # any real signal (SIGHUP, ...) would end it
    foreign = subprocess.Popen(["sleep", "30"])        # a creator we may not probe (another user's)
    gone = [ns.replace(f"-{os.getpid()}-", f"-{dead.pid}-") for ns in Topology().namespaces]
    kept = [f"{new_tag()}-{alive.pid}-e", f"{new_tag()}-{foreign.pid}-e"]
    made = gone[:1] + kept + gone[1:]   # listed in creation order or its reverse: live ones between dead ones

    class _NotPermitted:
        def __getattr__(self, name):
            return getattr(os, name)

        @staticmethod
        def kill(pid, sig):
            if pid == foreign.pid:
                raise PermissionError(errno.EPERM, os.strerror(errno.EPERM))
            return os.kill(pid, sig)

    monkeypatch.setattr(netns, "os", _NotPermitted())
    try:
        for ns in made:
            subprocess.run(["ip", "netns", "add", ns], check=True)
        found = cleanup_stale(dry_run=True)
        assert set(gone) <= set(found) and not set(kept) & set(found)
        assert set(gone) <= set(cleanup_stale())
        listed = _netns_list()
        assert not set(gone) & set(listed) and set(kept) <= set(listed)
        assert alive.poll() is None and foreign.poll() is None
    finally:
        for ns in made:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        for proc in (alive, foreign):
            proc.kill()
            proc.wait()


class TestWithoutTheMachine:
    """Checks that fake what they need (the user, `ip`): they run anywhere."""

    @pytest.fixture(autouse=True)
    def _needs_namespaces(self):      # overrides the module's: these need neither root nor namespaces
        yield

    def test_missing_requirements_is_none_on_a_complete_machine_and_names_everything_missing(self, monkeypatch):
        monkeypatch.setattr(requirements.os, "geteuid", lambda: 0)
        monkeypatch.setattr(requirements.shutil, "which",
                            lambda tool: f"/usr/sbin/{tool}" if tool in ("ip", "ethtool") else None)
        assert requirements.linkem_netns_missing() is None
        monkeypatch.setattr(requirements.os, "geteuid", lambda: 1000)
        monkeypatch.setattr(requirements.shutil, "which", lambda tool: None)
        assert requirements.linkem_netns_missing() == \
            "bwn.linkem namespace tests need root (euid 0) and the 'ip' command and the 'ethtool' command"

    def test_leftovers_and_cleanup_stale_never_raise_when_ip_fails(self, tmp_path, monkeypatch):
        dead = subprocess.Popen(["true"])
        dead.wait()
        stale = f"lk0a0b0c-{dead.pid}-e"
        ip = tmp_path / "ip"
        ip.write_text('#!/bin/sh\n'
                      'case "$*" in "netns list"|netns) if [ -n "$LISTED" ]; then echo "$LISTED"; exit 0; fi;; esac\n'
                      'echo "ip: cannot $*" >&2\n'
                      'exit 1\n')
        ip.chmod(0o755)
        monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
        assert Topology(tag="lk0a0b0c").leftovers() == []
        assert cleanup_stale(dry_run=True) == [] and cleanup_stale() == []
        monkeypatch.setenv("LISTED", stale)            # listed, but it cannot be deleted (gone meanwhile)
        assert cleanup_stale() == [stale]

    def test_the_command_lines_defaults_and_a_schedule_as_one_compact_word(self):
        from bwn.scenario.schedule import StepSchedule, table_of
        assert linkem_command("x", "y", LinkConfig()) == [
            sys.executable, "-m", "bwn.linkem", "x", "y", "--a-to-b-delay-ms", "0.000", "--b-to-a-delay-ms", "0.000"]
        steps = StepSchedule([(0, 1e6), (2.5, 3e6)])
        argv = linkem_command("x", "y", LinkConfig(a_to_b=Impairment(rate_schedule=steps, queue_packets=7)))
        word = argv[argv.index("--a-to-b-rate-schedule") + 1]
        assert json.loads(word) == table_of(steps)
        # printed with spaces between its words, the command pastes back into a shell
        assert not any(" " in w for w in argv)
