"""The emulator's life: :class:`LinkEmulator` (one link, two directions) and
:class:`LinkGroup` (several links served by one thread).

Design choices (the packet path itself, the event loop, batched receive and
offloads, is :mod:`bwn.linkem.worker`):

* **One thread per direction**, each owning its receive socket (ingress
  interface) and transmit socket (egress interface), so no locks are needed
  on the packet path.  Both threads share the GIL, but every ``recv``/``send``
  /``select`` releases it, and the switch interval is lowered (see
  :data:`SWITCH_INTERVAL_S`) so a thread whose timer fired waits at most that
  long for the other one.  A :class:`LinkGroup` serves every direction of its
  links from one thread instead (one process for many links).
* **Stopping**: a self-pipe in every ``select`` wakes the workers at once; no
  polling.  Frames still in the delay line at stop are discarded and counted
  (``pending_at_exit``).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

from . import rawsock
from .config import DIRECTIONS, Impairment, LinkConfig
from .offload import ETH_HLEN, VNET_HDR_LEN, IngressOffload
from .scheduler import DirectionScheduler
from .worker import DEFAULT_BATCH, L2_HEADROOM, DirectionWorker, serve, setup_thread, thread_cpu_s

__all__ = ["LinkEmulator", "LinkGroup", "SWITCH_INTERVAL_S"]

#: GIL switch interval used while an emulator runs (CPython default: 5 ms,
#: which would show up as delay error when both directions are busy).
SWITCH_INTERVAL_S = 0.0002


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _parse_config(
    config: Optional[LinkConfig],
    a_to_b: Optional[Impairment],
    b_to_a: Optional[Impairment],
    seed: Optional[int],
) -> LinkConfig:
    if config is not None:
        if a_to_b is not None or b_to_a is not None or seed is not None:
            raise ValueError("give either config or a_to_b/b_to_a/seed, not both")
        return config.validate()
    a = a_to_b if a_to_b is not None else Impairment()
    b = b_to_a if b_to_a is not None else a
    return LinkConfig(a_to_b=a, b_to_a=b, seed=seed).validate()


class LinkEmulator:
    """Bridge two interfaces of the current network namespace with impairments.

    >>> with LinkEmulator("veth0", "veth1", a_to_b=Impairment(delay_us=10_000)) as emu:
    ...     ...                    # traffic flows with 10 ms each way
    ... stats = emu.final_stats    # counters, as also returned by stop()

    ``b_to_a`` defaults to ``a_to_b`` (a symmetric link).  If ``seed`` is None a
    random one is drawn and reported in the stats, so any run can be replayed.
    ``rt_priority`` > 0 runs the workers with SCHED_FIFO (needs CAP_SYS_NICE):
    useful on a loaded machine; off by default.  ``warn`` receives one-line
    warnings (MTU mismatch, the first frame of each kind dropped for its
    offload state or size); default: standard error.

    The emulator runs in the caller's process.  To put it in a network
    namespace, run the ``bwn-link`` command there (see :mod:`bwn.linkem.netns`).
    """

    def __init__(
        self,
        iface_a: str,
        iface_b: str,
        a_to_b: Optional[Impairment] = None,
        b_to_a: Optional[Impairment] = None,
        *,
        seed: Optional[int] = None,
        config: Optional[LinkConfig] = None,
        promiscuous: bool = True,
        rt_priority: int = 0,
        batch: int = DEFAULT_BATCH,
        warn: Optional[Callable[[str], None]] = None,
        netns: Optional[str] = None,
    ) -> None:
        if iface_a == iface_b:
            raise ValueError(f"interface {iface_a!r} given twice: the two ends must differ")
        self.config = _parse_config(config, a_to_b, b_to_a, seed)
        if self.config.seed is None:
            self.config = LinkConfig(
                a_to_b=self.config.a_to_b,
                b_to_a=self.config.b_to_a,
                seed=int.from_bytes(os.urandom(4), "big"),
            )
        self.iface_a = iface_a
        self.iface_b = iface_b
        self.netns = netns
        self.promiscuous = promiscuous
        self.rt_priority = rt_priority
        self.batch = batch
        self.warn: Callable[[str], None] = warn if warn is not None else _stderr
        self.workers: Dict[str, DirectionWorker] = {}
        self._threads: List[threading.Thread] = []
        self._sockets: List[Any] = []
        self._pipe: Optional[tuple] = None
        self._started_ns = 0
        self._stopped_ns = 0
        self._old_switch_interval: Optional[float] = None
        self.final_stats: Optional[Dict[str, Any]] = None
        self._schedule_origin_ns: Optional[int] = None   # start_schedule's time 0

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> "LinkEmulator":
        if self._threads:
            raise RuntimeError("emulator already started")
        self.open()
        try:
            self._old_switch_interval = sys.getswitchinterval()
            sys.setswitchinterval(min(self._old_switch_interval, SWITCH_INTERVAL_S))
            self._started_ns = time.monotonic_ns()
            for name, worker in self.workers.items():
                t = threading.Thread(target=worker.run, name=f"linkem-{name}", daemon=True)
                t.start()
                self._threads.append(t)
        except BaseException:
            self._abort_start()
            raise
        return self

    def _abort_start(self) -> None:
        # A worker already started must not be left in select() on closed
        # descriptors: stop it before closing them.
        self.request_stop()
        for t in self._threads:
            t.join(2.0)
        self._threads = []
        self._close()

    def open(self) -> None:
        """Open the sockets (in ``netns`` if given) and build the two directions'
        workers; nothing runs yet. :meth:`start` does it and starts their threads;
        :class:`LinkGroup` serves the workers of several emulators in one thread."""
        if self.workers:
            raise RuntimeError("emulator already opened")
        try:
            with rawsock.in_netns(self.netns):
                self._open_sockets()
        except BaseException:
            self.workers = {}
            self._close()
            raise

    def _open_sockets(self) -> None:
        for name in (self.iface_a, self.iface_b):
            try:
                rawsock.interface_index(name)
            except OSError:
                raise ValueError(f"no such network interface: {name!r}") from None
        rx_a, out_a = rawsock.open_rx_socket(self.iface_a, self.promiscuous)
        self._sockets.append(rx_a)
        rx_b, out_b = rawsock.open_rx_socket(self.iface_b, self.promiscuous)
        self._sockets.append(rx_b)
        tx_a = rawsock.open_tx_socket(self.iface_a)
        self._sockets.append(tx_a)
        tx_b = rawsock.open_tx_socket(self.iface_b)
        self._sockets.append(tx_b)
        self._pipe = os.pipe()
        # Room for any frame, even a GSO/GRO super-frame of 64 KiB (cut
        # into segments by IngressOffload): recv cost does not depend on
        # the buffer size, and a truncated frame would be corrupt.
        mtu_a = rawsock.interface_mtu(self.iface_a)
        mtu_b = rawsock.interface_mtu(self.iface_b)
        # One byte more than the largest read (vnet header + a VLAN-tagged frame
        # of the larger MTU): a read that fills the buffer was truncated.
        bufsize = max(mtu_a, mtu_b, 65535) + L2_HEADROOM + VNET_HDR_LEN + 1
        if mtu_a != mtu_b:
            big, small = (self.iface_a, self.iface_b) if mtu_a > mtu_b else (self.iface_b, self.iface_a)
            self.warn(
                f"bwn-link: warning: MTU {max(mtu_a, mtu_b)} on {big} but {min(mtu_a, mtu_b)} on "
                f"{small}: frames from {big} longer than {small} allows are dropped and counted "
                f"as oversize (ip link set {small} mtu {max(mtu_a, mtu_b)} if the far end takes it)"
            )
        ends = {
            "a_to_b": (rx_a, tx_b, out_a, self.iface_a, self.iface_b, mtu_b),
            "b_to_a": (rx_b, tx_a, out_b, self.iface_b, self.iface_a, mtu_a),
        }
        for name in DIRECTIONS:
            rx, tx, ignores, ingress, egress, egress_mtu = ends[name]
            sched = DirectionScheduler(self.config.direction(name), self.config.direction_seed(name))
            if self._schedule_origin_ns is not None:
                sched.start_schedule(self._schedule_origin_ns)
            offload = IngressOffload(sched.counters, egress_mtu + ETH_HLEN, ingress, egress,
                                     self.warn, bufsize)
            self.workers[name] = DirectionWorker(
                name, rx, tx, sched, self._pipe[0], bufsize, ignores, self.batch,
                self.rt_priority, offload,
            )

    def start_schedule(self, origin_ns: Optional[int] = None) -> None:
        """Start the rate schedules (``Impairment.rate_schedule``): their time 0 is
        ``origin_ns`` on :func:`time.monotonic_ns`'s clock, default now. Safe from a
        signal handler; calling it again moves time 0."""
        origin = time.monotonic_ns() if origin_ns is None else origin_ns
        self._schedule_origin_ns = origin
        for worker in self.workers.values():
            worker.scheduler.start_schedule(origin)

    def request_stop(self) -> None:
        """Ask the workers to stop; safe from a signal handler.  See :meth:`stop`."""
        for worker in self.workers.values():
            worker.stopping = True
        if self._pipe is not None:
            try:
                os.write(self._pipe[1], b"x")
            except OSError:
                pass

    def stop(self, timeout_s: float = 2.0) -> Dict[str, Any]:
        """Stop, discard frames still delayed, close sockets; return the stats."""
        if self.final_stats is not None:
            return self.final_stats
        self.request_stop()
        deadline = time.monotonic() + timeout_s
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        self._stopped_ns = time.monotonic_ns()
        for worker in self.workers.values():
            if not any(t.is_alive() for t in self._threads):
                worker.scheduler.discard_pending()
            worker.scheduler.counters.kernel_drops += rawsock.kernel_drops(worker.rx)
        self.final_stats = self.stats()
        self._close()
        return self.final_stats

    def _close(self) -> None:
        for s in self._sockets:
            try:
                s.close()
            except OSError:
                pass
        self._sockets = []
        if self._pipe is not None:
            for fd in self._pipe:
                try:
                    os.close(fd)
                except OSError:
                    pass
            self._pipe = None
        if self._old_switch_interval is not None:
            sys.setswitchinterval(self._old_switch_interval)
            self._old_switch_interval = None

    def __enter__(self) -> "LinkEmulator":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- status ----------------------------------------------------------------

    @property
    def running(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    @property
    def failed(self) -> Optional[BaseException]:
        """The exception that ended a worker, if any."""
        for worker in self.workers.values():
            if worker.error is not None:
                return worker.error
        return None

    def stats(self) -> Dict[str, Any]:
        """Counters per direction (live while running), config and duration."""
        end = self._stopped_ns or time.monotonic_ns()
        out: Dict[str, Any] = {
            "iface_a": self.iface_a,
            "iface_b": self.iface_b,
            "seed": self.config.seed,
            "duration_s": round((end - self._started_ns) / 1e9, 6) if self._started_ns else 0.0,
            "realtime": any(w.rt_active for w in self.workers.values()),
            # When the rate schedules got their time 0, s after the start (None: never).
            "schedule_started_s": (None if self._schedule_origin_ns is None or not self._started_ns
                                   else round((self._schedule_origin_ns - self._started_ns) / 1e9, 6)),
        }
        for name in DIRECTIONS:
            entry: Dict[str, Any] = {"config": self.config.direction(name).to_dict()}
            worker = self.workers.get(name)
            if worker is not None:
                entry.update(worker.scheduler.counters.as_dict())
                entry["lateness"] = worker.scheduler.lateness()
                if worker.cpu_s is not None:
                    entry["cpu_s"] = round(worker.cpu_s, 4)
                    entry["wakeups"] = worker.wakeups
                if worker.error is not None:
                    entry["error"] = repr(worker.error)
            out[name] = entry
        return out


class _GroupLoop:
    """The one thread of a :class:`LinkGroup`: :func:`serve` over every lane."""

    def __init__(self, lanes: Sequence[DirectionWorker], rt_priority: int) -> None:
        self.lanes = list(lanes)
        self.rt_priority = rt_priority
        self.stopping = False
        self.error: Optional[BaseException] = None
        self.rt_active = False
        self.cpu_s: Optional[float] = None
        self.wakeups = 0

    def run(self) -> None:
        try:
            setup_thread(self)
            serve(self, self.lanes)
        except BaseException as exc:  # reported by LinkGroup.failed
            self.error = exc
        finally:
            self.cpu_s = thread_cpu_s()


class LinkGroup:
    """Several links, each a :class:`LinkEmulator` (possibly in its own network
    namespace, ``netns``), served by **one** thread: one ``select`` over every
    direction's socket and the earliest release of them all.

    Why: frames of different links that fall due or arrive close together share
    one wake-up here, where separate processes each pay their own, and one process
    replaces many. Measured in the 3 x 10 Mb/s parking lot (9 links): 10 % less CPU
    per frame than a bwn-link per link (docs/linkem.md, "One process for many
    links"). Each link keeps its own configuration, seed, counters and lateness
    histogram (:meth:`LinkEmulator.stats`).

    >>> group = LinkGroup({"em0": LinkEmulator("em0-eth0", "em0-eth1", netns="/proc/123/ns/net"), ...})
    >>> group.start(); ...; stats = group.stop()   # name -> that link's stats
    """

    def __init__(self, emulators: Dict[str, LinkEmulator], rt_priority: int = 0) -> None:
        if not emulators:
            raise ValueError("a link group needs at least one link")
        self.emulators = dict(emulators)
        self.rt_priority = rt_priority
        self.loop: Optional[_GroupLoop] = None
        self._thread: Optional[threading.Thread] = None
        self._old_switch_interval: Optional[float] = None
        self.final_stats: Optional[Dict[str, Dict[str, Any]]] = None

    def start(self) -> "LinkGroup":
        if self._thread is not None:
            raise RuntimeError("link group already started")
        opened: List[LinkEmulator] = []
        try:
            for emu in self.emulators.values():
                emu.open()
                opened.append(emu)
            lanes = [w for emu in opened for w in emu.workers.values()]
            # One wake-up pipe for the loop (request_stop writes every link's): select()
            # polls each descriptor on every call, and the sockets are many already.
            for lane in lanes:
                lane.wake_fd = lanes[0].wake_fd
            self.loop = _GroupLoop(lanes, self.rt_priority)
            self._old_switch_interval = sys.getswitchinterval()
            sys.setswitchinterval(min(self._old_switch_interval, SWITCH_INTERVAL_S))
            now = time.monotonic_ns()
            thread = threading.Thread(target=self.loop.run, name="linkem-group", daemon=True)
            thread.start()
            self._thread = thread
            for emu in opened:
                emu._started_ns = now
                emu._threads = [thread]
        except BaseException:
            if self.loop is not None:
                self.loop.stopping = True
            for emu in opened:
                emu._abort_start()
            self._restore_switch_interval()
            raise
        return self

    def start_schedule(self, origin_ns: Optional[int] = None) -> None:
        """Every link's rate schedules get time 0 at ``origin_ns`` (default now);
        safe from a signal handler."""
        origin = time.monotonic_ns() if origin_ns is None else origin_ns
        for emu in self.emulators.values():
            emu.start_schedule(origin)

    def request_stop(self) -> None:
        """Ask the loop to stop; safe from a signal handler."""
        if self.loop is not None:
            self.loop.stopping = True
        for emu in self.emulators.values():
            emu.request_stop()   # writes its wake-up pipe, which the loop selects on

    def stop(self, timeout_s: float = 2.0) -> Dict[str, Dict[str, Any]]:
        """Stop, then each link's :meth:`LinkEmulator.stop` (pending frames
        discarded and counted, sockets closed); link name -> its stats, each with
        the group's thread CPU and wake-ups under ``group``."""
        if self.final_stats is not None:
            return self.final_stats
        self.request_stop()
        if self._thread is not None:
            self._thread.join(timeout_s)
        out = {name: emu.stop(timeout_s) for name, emu in self.emulators.items()}
        if self.loop is not None:
            shared = {"links": len(self.emulators), "cpu_s": None if self.loop.cpu_s is None
                      else round(self.loop.cpu_s, 4), "wakeups": self.loop.wakeups,
                      "realtime": self.loop.rt_active}
            for stats in out.values():
                stats["group"] = shared
                stats["realtime"] = self.loop.rt_active
        self._restore_switch_interval()
        self.final_stats = out
        return out

    def _restore_switch_interval(self) -> None:
        if self._old_switch_interval is not None:
            sys.setswitchinterval(self._old_switch_interval)
            self._old_switch_interval = None

    def __enter__(self) -> "LinkGroup":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def failed(self) -> Optional[BaseException]:
        """The exception that ended the loop, if any."""
        return None if self.loop is None else self.loop.error
