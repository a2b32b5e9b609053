"""The packet path of the link emulator: a direction's worker and the event loop that serves it.

* **Event loop** (:func:`serve`): release every frame that is due, then sleep in
  ``select`` until either a frame arrives or the next release time. ``select``
  takes a microsecond timeout (``poll``/``epoll`` and socket timeouts round to
  milliseconds), and the thread's timer slack is lowered to 1 us
  (:func:`setup_thread`) so the kernel does not postpone the wake-up by its
  default 50 us. One loop serves one direction (a :class:`DirectionWorker` of a
  :class:`bwn.linkem.engine.LinkEmulator`) or every direction of several links
  (a :class:`bwn.linkem.engine.LinkGroup`).
* **Batched receive**: when the socket is readable, up to ``batch`` frames are
  read with non-blocking ``recv`` calls, stopping early if a release falls due.
* **Offloads**: the receive sockets prepend a ``virtio_net_hdr`` to each
  frame (``PACKET_VNET_HDR``). A frame whose first two header bytes have no
  NEEDS_CSUM flag and no GSO type, and that fits the egress MTU, is forwarded
  as is (one slice drops the header); anything else goes to
  :class:`bwn.linkem.offload.IngressOffload`, which completes checksums,
  segments super-frames and counts what it must drop.
"""

from __future__ import annotations

import errno
import os
import resource
import select
import threading
import time
from typing import Any, Callable, List, Optional, Sequence

from . import rawsock
from .offload import VNET_HDR_LEN, IngressOffload
from .scheduler import DirectionScheduler

__all__ = ["DirectionWorker", "DEFAULT_BATCH", "L2_HEADROOM", "serve", "setup_thread", "thread_cpu_s"]

#: Frames read per wake-up before the worker looks at its timers again.
DEFAULT_BATCH = 64

#: Extra room beyond the MTU for the Ethernet header and one VLAN tag.
L2_HEADROOM = 14 + 4


class DirectionWorker:
    """Moves frames from ``rx`` to ``tx`` through a :class:`DirectionScheduler`."""

    def __init__(
        self,
        name: str,
        rx: Any,
        tx: Any,
        scheduler: DirectionScheduler,
        wake_fd: int,
        bufsize: int,
        ignores_outgoing: bool = True,
        batch: int = DEFAULT_BATCH,
        rt_priority: int = 0,
        offload: Optional[IngressOffload] = None,
    ) -> None:
        self.name = name
        self.rx = rx
        self.tx = tx
        self.scheduler = scheduler
        self.wake_fd = wake_fd
        self.bufsize = bufsize
        self.ignores_outgoing = ignores_outgoing
        self.batch = batch
        self.rt_priority = rt_priority
        self.offload = offload or IngressOffload(scheduler.counters, 65535 + L2_HEADROOM,
                                                 recv_bufsize=bufsize)
        self.stopping = False
        self.error: Optional[BaseException] = None
        self.rt_active = False
        self.cpu_s: Optional[float] = None  # CPU time of the thread, set when it ends
        self.wakeups = 0  # select() calls, set when it ends

    def run(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # reported by LinkEmulator.failed
            self.error = exc
        finally:
            self.cpu_s = thread_cpu_s()

    def _setup_thread(self) -> None:
        setup_thread(self)

    def _loop(self) -> None:
        self._setup_thread()
        serve(self, [self])


def thread_cpu_s() -> Optional[float]:
    """The calling thread's CPU time, user + system (None where it cannot be read)."""
    try:
        usage = resource.getrusage(resource.RUSAGE_THREAD)
    except (AttributeError, OSError):
        return None
    return usage.ru_utime + usage.ru_stime


def setup_thread(owner: Any) -> None:
    """The calling thread's set-up for ``owner`` (a worker or a group's loop): timer
    slack 1 us, and SCHED_FIFO at ``owner.rt_priority`` if > 0 (``owner.rt_active``
    says whether it took)."""
    rawsock.set_timer_slack_ns(1000)
    if owner.rt_priority > 0:
        try:
            # This thread by its id, not by 0: a one-token slip (0 -> 1) would
            # change the machine's init process, as a mutation run once did.
            os.sched_setscheduler(threading.get_native_id(), os.SCHED_FIFO,
                                  os.sched_param(owner.rt_priority))
            owner.rt_active = True
        except (OSError, AttributeError):
            owner.rt_active = False


def _reader(lane: DirectionWorker) -> Callable[[Optional[int]], None]:
    """The read step of ``lane`` (a :class:`DirectionWorker`): up to ``lane.batch``
    frames from its receive socket into its scheduler, stopping early once ``due``
    (the next release of any lane served by the thread) has passed."""
    admit = lane.scheduler.admit
    rx = lane.rx
    recv = rx.recv
    recvfrom = rx.recvfrom
    filter_outgoing = not lane.ignores_outgoing
    outgoing = rawsock.PACKET_OUTGOING
    mono = time.monotonic_ns
    bufsize = lane.bufsize
    batch = range(lane.batch)
    offload = lane.offload
    fix = offload.frames
    # Longest read (virtio_net_hdr + frame) that needs no look beyond the
    # header's first two bytes; longer ones may be oversize or tagged.
    fast_max = VNET_HDR_LEN + offload.max_frame_bytes

    def read(due: Optional[int]) -> None:
        for _ in batch:
            try:
                if filter_outgoing:
                    data, addr = recvfrom(bufsize)
                    if addr[2] == outgoing:
                        continue
                else:
                    data = recv(bufsize)
            except BlockingIOError:
                break
            except InterruptedError:
                continue
            except OSError as exc:
                if exc.errno == errno.ENETDOWN:  # link set down: wait for it
                    break
                if exc.errno == errno.EINVAL:  # the kernel could not describe the
                    offload.bad_offload(0, "offload state the kernel cannot "  # frame
                                        "describe in a virtio_net_hdr (tunnel GSO?)")
                    continue
                raise
            now = mono()
            # virtio_net_hdr: flags (bit 0 NEEDS_CSUM), gso_type.
            if data[0] & 1 or data[1] or len(data) > fast_max:
                for frame in fix(data):
                    admit(frame, now)
            else:
                admit(data[VNET_HDR_LEN:], now)
            if due is not None and now >= due:
                break

    return read


def serve(owner: Any, lanes: Sequence[DirectionWorker]) -> None:
    """The event loop of one thread serving ``lanes`` (one direction of a link
    each): release every frame that is due on any lane, then sleep in ``select``
    until a frame arrives on any lane's receive socket, the earliest next release,
    or a wake-up on any lane's ``wake_fd``. Runs until ``owner.stopping``; counts
    its ``select`` calls in ``owner.wakeups``. One lane: a
    :class:`DirectionWorker`'s own loop; several: :class:`LinkGroup`'s."""
    mono = time.monotonic_ns
    sel = select.select
    empty: List[int] = []
    timers = [(lane.scheduler.next_due_ns, lane.scheduler.release_due, lane.tx.send) for lane in lanes]
    readers = {lane.rx.fileno(): _reader(lane) for lane in lanes}
    rlist = list(readers) + sorted({lane.wake_fd for lane in lanes})
    wakeups = 0
    try:
        while not owner.stopping:
            now = mono()
            due: Optional[int] = None
            for next_due, release_due, send in timers:
                lane_due = next_due()
                if lane_due is not None and lane_due <= now:
                    release_due(now, send)
                    lane_due = next_due()
                if lane_due is not None and (due is None or lane_due < due):
                    due = lane_due
            if due is None:
                timeout: Optional[float] = None
            else:
                wait_ns = due - mono()
                if wait_ns <= 0:
                    continue
                timeout = wait_ns * 1e-9
            wakeups += 1
            for fd in sel(rlist, empty, empty, timeout)[0]:
                read = readers.get(fd)
                if read is not None:
                    read(due)
    finally:
        owner.wakeups = wakeups
