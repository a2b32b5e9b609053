"""AF_PACKET helpers: the raw sockets the emulator bridges with.

Design choices:

* **Separate receive and transmit sockets.**  The receive socket of an
  interface is bound with ``ETH_P_ALL`` and read by exactly one direction's
  worker; the transmit socket is bound with protocol 0, so the kernel never
  queues received frames on it.  No socket is shared between threads.
* **No loops.**  ``PACKET_IGNORE_OUTGOING`` (Linux >= 4.20) makes the kernel
  skip frames transmitted on the interface (ours, the other direction's) before
  they reach the receive socket.  On older kernels we fall back to filtering
  ``pkttype == PACKET_OUTGOING`` from ``recvfrom``'s address (slower: one
  tuple per frame).
* **Promiscuous mode via ``PACKET_MR_PROMISC`` membership**, not via the
  interface flag: the kernel reference-counts it and drops it when the socket
  is closed, even if the process is killed, so the interface's original state
  is always restored and nothing else's promiscuous setting is disturbed.
* **Offload metadata**: ``PACKET_VNET_HDR`` makes the kernel put a
  ``virtio_net_hdr`` before every received frame, saying whether its checksum
  is still to be completed and whether it is a GSO super-frame (see
  :mod:`bwn.linkem.offload`).  Transmit sockets do not use it: what they send
  is complete.
* A large ``SO_RCVBUF`` (``SO_RCVBUFFORCE`` as root) absorbs bursts while a
  worker sleeps; kernel-side drops are read from ``PACKET_STATISTICS``.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import fcntl
import os
import socket
import struct
from typing import Iterator, Optional, Tuple

__all__ = [
    "ETH_P_ALL",
    "open_rx_socket",
    "open_tx_socket",
    "interface_index",
    "interface_mtu",
    "kernel_drops",
    "set_timer_slack_ns",
    "in_netns",
]

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_ADD_MEMBERSHIP = 1
PACKET_MR_PROMISC = 1
PACKET_STATISTICS = 6
PACKET_VNET_HDR = 15
PACKET_IGNORE_OUTGOING = 23
PACKET_OUTGOING = 4
SO_RCVBUFFORCE = 33
SO_SNDBUFFORCE = 32
SIOCGIFMTU = 0x8921
PR_SET_TIMERSLACK = 29
CLONE_NEWNET = 0x40000000

#: Receive buffer asked for each receive socket (bytes).
RX_BUFFER_BYTES = 8 * 1024 * 1024
TX_BUFFER_BYTES = 4 * 1024 * 1024


def interface_index(name: str) -> int:
    """ifindex of ``name`` in the current network namespace (OSError if absent)."""
    return socket.if_nametoindex(name)


def interface_mtu(name: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifreq = struct.pack("16si12x", name.encode(), 0)
        out = fcntl.ioctl(s.fileno(), SIOCGIFMTU, ifreq)
        return struct.unpack("16si12x", out)[1]


def _set_buffer(sock: socket.socket, force_opt: int, opt: int, size: int) -> None:
    try:
        sock.setsockopt(socket.SOL_SOCKET, force_opt, size)
    except OSError:  # not CAP_NET_ADMIN: capped by net.core.[rw]mem_max
        sock.setsockopt(socket.SOL_SOCKET, opt, size)


def open_rx_socket(name: str, promiscuous: bool = True) -> Tuple[socket.socket, bool]:
    """Non-blocking ETH_P_ALL socket bound to ``name``.

    Returns ``(socket, ignores_outgoing)``; if the second item is False the
    caller must drop frames whose ``recvfrom`` pkttype is ``PACKET_OUTGOING``.
    Every frame read from it starts with a 10-byte ``virtio_net_hdr``
    (``PACKET_VNET_HDR``).
    """
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    try:
        try:
            sock.setsockopt(SOL_PACKET, PACKET_VNET_HDR, 1)
        except OSError as exc:
            raise OSError(exc.errno, f"packet socket option PACKET_VNET_HDR refused ({exc.strerror}): "
                          "bwn-link needs it to see checksum and segmentation offloads") from None
        ignores_outgoing = True
        try:
            sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        except OSError:
            ignores_outgoing = False
        _set_buffer(sock, SO_RCVBUFFORCE, socket.SO_RCVBUF, RX_BUFFER_BYTES)
        sock.bind((name, ETH_P_ALL))
        if promiscuous:
            mreq = struct.pack("iHH8s", interface_index(name), PACKET_MR_PROMISC, 0, b"")
            sock.setsockopt(SOL_PACKET, PACKET_ADD_MEMBERSHIP, mreq)
        # Frames queued between socket() and bind() may come from any
        # interface: drain them.
        sock.setblocking(False)
        while True:
            try:
                sock.recv(65536)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno != errno.EINVAL:  # EINVAL: a frame the kernel could not
                    break                      # describe in a vnet header; consumed
        kernel_drops(sock)  # reset the kernel's counters
        return sock, ignores_outgoing
    except BaseException:
        sock.close()
        raise


def open_tx_socket(name: str) -> socket.socket:
    """Socket that only transmits on ``name`` (protocol 0: receives nothing)."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    try:
        _set_buffer(sock, SO_SNDBUFFORCE, socket.SO_SNDBUF, TX_BUFFER_BYTES)
        sock.bind((name, 0))
        return sock
    except BaseException:
        sock.close()
        raise


def kernel_drops(sock: socket.socket) -> int:
    """Frames the kernel dropped on ``sock`` since the last call (buffer full)."""
    try:
        raw = sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8)
    except OSError:
        return 0
    _packets, drops = struct.unpack("II", raw)
    return drops


_libc: Optional[ctypes.CDLL] = None


def set_timer_slack_ns(slack_ns: int) -> bool:
    """Set the calling thread's timer slack (default 50 us) so select() wakes on time."""
    global _libc
    try:
        if _libc is None:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return _libc.prctl(PR_SET_TIMERSLACK, ctypes.c_ulong(slack_ns), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False



def _setns(fd: int) -> None:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


@contextlib.contextmanager
def in_netns(path: Optional[str]) -> Iterator[None]:
    """Run the body with the calling thread in the network namespace ``path``
    (``/proc/PID/ns/net``, ``/run/netns/NAME``; None: stay where it is), then
    come back. Sockets opened inside stay in that namespace: this is how one
    process serves links of several namespaces (:class:`bwn.linkem.LinkGroup`).
    Needs CAP_SYS_ADMIN."""
    if path is None:
        yield
        return
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        try:
            target = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            raise OSError(exc.errno, f"network namespace {path}: {exc.strerror}") from None
        try:
            _setns(target)
        except OSError as exc:
            raise OSError(exc.errno, f"cannot enter the network namespace {path}: {exc.strerror}") from None
        finally:
            os.close(target)
        try:
            yield
        finally:
            _setns(home)
    finally:
        os.close(home)
