"""Namespace topology with the emulator as a small node in the middle of a link::

    ns A                 ns E (emulator)                      ns B
    [<tag>a] ==veth== [<tag>ea]  bwn-link  [<tag>eb] ==veth== [<tag>b]
    10.77.0.1/24            (no addresses)                    10.77.0.2/24

A and B share one IPv4 subnet: the emulator is a "bump in the wire" at layer 2,
so ARP, IPv4 and anything else cross it and see the same impaired link.

Design choices:

* **Unique names**: every object carries a random tag (``lk`` + 6 hex digits);
  namespace names also carry the creating pid, ``<tag>-<pid>-{a,e,b}``, so
  :func:`cleanup_stale` can tell leftovers of dead processes from parallel
  runs.  Interface names are ``<tag>`` + 1-2 characters (<= 15, IFNAMSIZ).
* **Guaranteed cleanup**: :class:`Topology` is a context manager; ``destroy``
  stops the processes it started, kills whatever is still inside its own
  namespaces (by pid, from ``ip netns pids``), then deletes the namespaces,
  which deletes the veths.  It also runs from ``atexit``, and while the
  context is active in the main thread SIGTERM raises ``SystemExit`` (if no
  other handler was installed) so ``kill`` cleans up as Ctrl-C does.
* **Quiet, honest link**: IPv6 is disabled in all three namespaces before the
  veths exist (no router solicitations / DAD / MLD in the counts), the
  emulator's veths have no address (its kernel neither answers nor forwards;
  ``ip_forward`` is 0 in a new namespace), and every veth has GRO/GSO/TSO and
  checksum offloads off, so frames are at most MTU-sized with real checksums.
  ``Topology(default_offloads=True)`` leaves them as ``ip link add`` makes them
  (checksum offload, TSO, GSO on), as a user's own topology would have them;
  bwn-link completes such frames itself (see :mod:`bwn.linkem.offload`).
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

from .cli import READY_MARKER
from bwn.scenario.schedule import table_of

from .config import DIRECTIONS, Impairment, LinkConfig

__all__ = [
    "Topology",
    "EmulatorProcess",
    "linkem_command",
    "cleanup_stale",
    "new_tag",
    "TAG_PREFIX",
]

TAG_PREFIX = "lk"
_TAG_RE = re.compile(rf"^({TAG_PREFIX}[0-9a-f]{{6}})-(\d+)-[aeb]$")
_PROJECT_ROOT = str(Path(__file__).resolve().parents[2])
_OFFLOADS = ["gro", "off", "gso", "off", "tso", "off", "tx", "off", "rx", "off"]


def new_tag() -> str:
    """``lk`` + 6 random hex digits: unique enough for parallel runs."""
    return TAG_PREFIX + os.urandom(3).hex()


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def _ms_text(us: int) -> str:
    """Exact decimal milliseconds of an integer number of microseconds."""
    return f"{us // 1000}.{us % 1000:03d}"


def linkem_command(
    iface_a: str,
    iface_b: str,
    config: LinkConfig,
    *,
    stats_json: Optional[str] = None,
    rt_priority: int = 0,
    python: Optional[str] = None,
    extra_args: Sequence[str] = (),
) -> List[str]:
    """argv that runs ``bwn-link`` with ``config`` (for Popen, Mininet ``node.popen``)."""
    argv = [python or sys.executable, "-m", "bwn.linkem", iface_a, iface_b]
    for direction in DIRECTIONS:
        imp: Impairment = config.direction(direction).validate()
        p = "--" + direction.replace("_", "-") + "-"
        argv += [p + "delay-ms", _ms_text(imp.delay_us)]
        if imp.jitter_us:
            argv += [p + "jitter-ms", _ms_text(imp.jitter_us)]
        for name in ("loss", "reorder", "duplicate"):
            value = getattr(imp, name)
            if value:
                argv += [p + name, repr(float(value))]
        if imp.reorder_hold_us is not None:
            argv += [p + "reorder-hold-ms", _ms_text(imp.reorder_hold_us)]
        if imp.jitter_reorders:
            argv.append(p + "jitter-reorders")
        if imp.rate_bps is not None:
            argv += [p + "rate-mbit", repr(imp.rate_bps / 1e6), p + "queue-packets", str(imp.queue_packets)]
        if imp.rate_schedule is not None:
            argv += [p + "rate-schedule", json.dumps(table_of(imp.rate_schedule), separators=(",", ":")),
                     p + "queue-packets", str(imp.queue_packets)]
        if imp.limit_packets != Impairment().limit_packets:
            argv += [p + "limit-packets", str(imp.limit_packets)]
    if config.seed is not None:
        argv += ["--seed", str(config.seed)]
    if stats_json:
        argv += ["--stats-json", stats_json]
    if rt_priority:
        argv += ["--rt-priority", str(rt_priority)]
    argv += list(extra_args)
    return argv


def _python_env() -> Dict[str, str]:
    env = dict(os.environ)
    path = env.get("PYTHONPATH")
    env["PYTHONPATH"] = _PROJECT_ROOT + (os.pathsep + path if path else "")
    return env


class EmulatorProcess:
    """A ``bwn-link`` process running in the named namespace ``netns``.

    Usable on its own for any namespace made with ``ip netns add``::

        emu = EmulatorProcess("myns", "veth1", "veth2", LinkConfig.symmetric(Impairment(delay_us=5000)))
        emu.wait_ready()
        ...
        stats = emu.stop()      # SIGTERM, wait, parsed --stats-json

    Its output goes to a log file in ``workdir`` (default: the temp dir),
    removed by ``stop()`` after being read into ``output``.
    """

    def __init__(self, netns: str, iface_a: str, iface_b: str, config: LinkConfig,
                 workdir: Optional[str] = None, rt_priority: int = 0,
                 extra_args: Sequence[str] = ()) -> None:
        self.netns = netns
        self.config = config
        fd, self.stats_path = tempfile.mkstemp(prefix="linkem-", suffix=".json", dir=workdir)
        os.close(fd)
        os.unlink(self.stats_path)
        self.log_path = self.stats_path[:-5] + ".log"
        self.argv = ["ip", "netns", "exec", netns] + linkem_command(
            iface_a, iface_b, config, stats_json=self.stats_path,
            rt_priority=rt_priority, extra_args=extra_args,
        )
        self._log = open(self.log_path, "w+")
        # cwd: ``python -m`` puts the working directory first on sys.path, so
        # started from another checkout it would run that checkout's bwn-link.
        self.proc = subprocess.Popen(
            self.argv, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            env=_python_env(), cwd=_PROJECT_ROOT,
        )
        self.returncode: Optional[int] = None
        self.output = ""
        self.stats: Optional[Dict[str, Any]] = None
        self.stop_seconds: Optional[float] = None

    def wait_ready(self, timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            text = Path(self.log_path).read_text()
            if READY_MARKER in text:
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"bwn-link exited with {self.proc.returncode}: {text.strip()}")
            time.sleep(0.02)
        raise TimeoutError(f"bwn-link not ready after {timeout_s} s: {Path(self.log_path).read_text()}")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 5.0) -> Dict[str, Any]:
        """Signal the emulator, wait for it, return its JSON stats (``{}`` if none)."""
        if self.returncode is None:
            t0 = time.monotonic()
            if self.proc.poll() is None:
                self.proc.send_signal(sig)
            try:
                self.returncode = self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.returncode = self.proc.wait()
            self.stop_seconds = time.monotonic() - t0
            self._log.close()
            self.output = Path(self.log_path).read_text()
            try:
                with open(self.stats_path) as fh:
                    self.stats = json.load(fh)
            except (OSError, ValueError):
                self.stats = {}
            for path in (self.stats_path, self.log_path):
                try:
                    os.unlink(path)
                except OSError:
                    pass
        return self.stats or {}


class Topology:
    """hostA --veth-- [emulator namespace] --veth-- hostB, cleaned up on exit.

    >>> with Topology() as topo:
    ...     emu = topo.start_emulator(Impairment(delay_us=10_000))
    ...     topo.run(topo.ns_a, ["ping", "-c", "3", topo.ip_b])
    ...     stats = emu.stop()

    Attributes: ``ns_a``, ``ns_emu``, ``ns_b`` (namespace names), ``if_a`` /
    ``if_b`` (the hosts' interfaces), ``emu_if_a`` / ``emu_if_b`` (the
    emulator's interfaces: ``emu_if_a`` faces host A, so "A->B" in the
    emulator's stats is traffic from host A to host B), ``ip_a`` / ``ip_b``.
    ``default_offloads=True`` keeps the kernel's offload settings on all four
    veths instead of turning them off.
    """

    def __init__(self, tag: Optional[str] = None, ip_a: str = "10.77.0.1", ip_b: str = "10.77.0.2",
                 prefix_len: int = 24, mtu: int = 1500, default_offloads: bool = False) -> None:
        self.tag = tag or new_tag()
        if not re.fullmatch(r"[a-z0-9]{1,11}", self.tag):
            raise ValueError("tag must be 1-11 lowercase letters/digits (interface names <= 15)")
        pid = os.getpid()
        self.ns_a, self.ns_emu, self.ns_b = (f"{self.tag}-{pid}-{x}" for x in "aeb")
        self.if_a, self.emu_if_a = f"{self.tag}a", f"{self.tag}ea"
        self.if_b, self.emu_if_b = f"{self.tag}b", f"{self.tag}eb"
        self.ip_a, self.ip_b, self.prefix_len, self.mtu = ip_a, ip_b, prefix_len, mtu
        self.default_offloads = default_offloads
        self.workdir = ""  # temporary directory (logs, stats), made by create()
        self._procs: List[subprocess.Popen] = []
        self._emulators: List[EmulatorProcess] = []
        self._created = False
        self._old_sigterm: Any = None
        self._lock = threading.Lock()

    # -- lifecycle -------------------------------------------------------------

    @property
    def namespaces(self) -> List[str]:
        return [self.ns_a, self.ns_emu, self.ns_b]

    @property
    def interfaces(self) -> List[str]:
        return [self.if_a, self.emu_if_a, self.emu_if_b, self.if_b]

    def create(self) -> "Topology":
        self._created = True
        atexit.register(self.destroy)
        try:
            self.workdir = tempfile.mkdtemp(prefix=f"{self.tag}-")
            for ns in self.namespaces:
                _ip("netns", "add", ns)
                # Before any interface exists: new devices inherit "default".
                self.run(ns, ["sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1",
                              "net.ipv6.conf.default.disable_ipv6=1"])
                _ip("-n", ns, "link", "set", "lo", "up")
            _ip("link", "add", self.if_a, "netns", self.ns_a, "mtu", str(self.mtu), "type", "veth",
                "peer", "name", self.emu_if_a, "netns", self.ns_emu, "mtu", str(self.mtu))
            _ip("link", "add", self.if_b, "netns", self.ns_b, "mtu", str(self.mtu), "type", "veth",
                "peer", "name", self.emu_if_b, "netns", self.ns_emu, "mtu", str(self.mtu))
            for ns, ifs in ((self.ns_a, [self.if_a]), (self.ns_emu, [self.emu_if_a, self.emu_if_b]),
                            (self.ns_b, [self.if_b])):
                if not self.default_offloads:
                    script = "; ".join(f"ethtool -K {i} {' '.join(_OFFLOADS)} >/dev/null 2>&1" for i in ifs)
                    self.run(ns, ["sh", "-c", script + "; true"])
                for i in ifs:
                    _ip("-n", ns, "link", "set", i, "up")
            _ip("-n", self.ns_a, "addr", "add", f"{self.ip_a}/{self.prefix_len}", "dev", self.if_a)
            _ip("-n", self.ns_b, "addr", "add", f"{self.ip_b}/{self.prefix_len}", "dev", self.if_b)
        except BaseException:
            self.destroy()
            raise
        return self

    def destroy(self) -> None:
        """Remove everything this topology created; idempotent, never raises."""
        with self._lock:
            if not self._created:
                return
            self._created = False
        for emu in self._emulators:
            try:
                emu.stop(timeout_s=2.0)
            except Exception:
                pass
        for proc in self._procs:
            if proc.poll() is None:
                try:
                    proc.terminate()
                    proc.wait(1.0)
                except Exception:
                    try:
                        proc.kill()
                        proc.wait(1.0)
                    except Exception:
                        pass
        for ns in self.namespaces:
            # Anything still inside our own namespaces was started for us.
            res = _ip("netns", "pids", ns, check=False)
            for pid in res.stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (OSError, ValueError):
                    pass
            _ip("netns", "del", ns, check=False)
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
        try:
            atexit.unregister(self.destroy)
        except Exception:
            pass

    def __enter__(self) -> "Topology":
        if threading.current_thread() is threading.main_thread():
            if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
                self._old_sigterm = signal.SIG_DFL
                signal.signal(signal.SIGTERM, _raise_system_exit)
        try:
            return self.create()
        except BaseException:
            self._restore_sigterm()
            raise

    def __exit__(self, *exc: Any) -> None:
        # A second Ctrl-C/SIGTERM must not cut the cleanup short: ignore both
        # for the fraction of a second it takes (main thread only).
        saved = []
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                saved.append((sig, signal.signal(sig, signal.SIG_IGN)))
        try:
            self.destroy()
        finally:
            for sig, handler in saved:
                signal.signal(sig, handler)
            self._restore_sigterm()

    def _restore_sigterm(self) -> None:
        if self._old_sigterm is not None:
            signal.signal(signal.SIGTERM, self._old_sigterm)
            self._old_sigterm = None

    # -- running things --------------------------------------------------------

    def command(self, ns: str, argv: Sequence[str]) -> List[str]:
        return ["ip", "netns", "exec", ns, *argv]

    def run(self, ns: str, argv: Sequence[str], check: bool = True, timeout: Optional[float] = 60,
            **kwargs: Any) -> subprocess.CompletedProcess:
        """Run ``argv`` in namespace ``ns`` to completion (text output captured)."""
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        return subprocess.run(self.command(ns, argv), check=check, timeout=timeout, **kwargs)

    def popen(self, ns: str, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen:
        """Start ``argv`` in namespace ``ns``; it is killed on destroy if still running."""
        proc = subprocess.Popen(self.command(ns, argv), **kwargs)
        self._procs.append(proc)
        return proc

    def python(self, ns: str, code: str, *args: str, **kwargs: Any) -> subprocess.CompletedProcess:
        """Run a Python snippet in ``ns`` with this interpreter and the project importable."""
        kwargs.setdefault("env", _python_env())
        kwargs.setdefault("cwd", _PROJECT_ROOT)  # "-c" puts the cwd first on sys.path
        return self.run(ns, [sys.executable, "-c", code, *args], **kwargs)

    def start_emulator(
        self,
        a_to_b: Union[Impairment, LinkConfig, None] = None,
        b_to_a: Optional[Impairment] = None,
        *,
        seed: Optional[int] = None,
        rt_priority: int = 0,
        extra_args: Sequence[str] = (),
        ready_timeout_s: float = 10.0,
    ) -> EmulatorProcess:
        """Run ``bwn-link`` in the emulator namespace; returns once frames flow."""
        if isinstance(a_to_b, LinkConfig):
            config = a_to_b
        else:
            a = a_to_b or Impairment()
            config = LinkConfig(a_to_b=a, b_to_a=b_to_a or a, seed=seed)
        emu = EmulatorProcess(self.ns_emu, self.emu_if_a, self.emu_if_b, config.validate(),
                              self.workdir, rt_priority, extra_args)
        self._emulators.append(emu)
        try:
            emu.wait_ready(ready_timeout_s)
        except BaseException:
            emu.stop(signal.SIGKILL)
            raise
        return emu

    def mac(self, ns: str, ifname: str) -> str:
        out = _ip("-n", ns, "-j", "link", "show", "dev", ifname).stdout
        return json.loads(out)[0]["address"]

    def set_static_arp(self) -> None:
        """Permanent neighbour entries on both hosts: no ARP frames in the counts."""
        mac_a, mac_b = self.mac(self.ns_a, self.if_a), self.mac(self.ns_b, self.if_b)
        _ip("-n", self.ns_a, "neigh", "replace", self.ip_b, "lladdr", mac_b, "nud", "permanent",
            "dev", self.if_a)
        _ip("-n", self.ns_b, "neigh", "replace", self.ip_a, "lladdr", mac_a, "nud", "permanent",
            "dev", self.if_b)

    def leftovers(self) -> List[str]:
        """Names of this topology's namespaces/interfaces that still exist."""
        found = [ns for ns in _ip("netns", "list", check=False).stdout.split() if ns.startswith(self.tag)]
        links = _ip("-o", "link", "show", check=False).stdout
        found += [m for m in re.findall(r"^\d+: ([^:@]+)", links, re.M) if m.startswith(self.tag)]
        return found


def _raise_system_exit(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)


def cleanup_stale(dry_run: bool = False) -> List[str]:
    """Delete namespaces named like ours whose creating process is gone."""
    removed = []
    for ns in _ip("netns", "list", check=False).stdout.split():
        m = _TAG_RE.match(ns)
        if not m:
            continue
        pid = int(m.group(2))
        try:
            os.kill(pid, 0)
            continue  # creator alive: not stale
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        removed.append(ns)
        if not dry_run:
            _ip("netns", "del", ns, check=False)
    return removed
