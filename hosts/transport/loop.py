"""Sockets and the event loop: one non-blocking UDP socket, epoll, timers, signals.

No threads: the loop waits in ``epoll`` until a datagram arrives, the socket can
take more (after ``EAGAIN``), a timer of the transport falls due, or a signal
arrives (``signal.set_wakeup_fd``). Received datagrams are read in batches (until
``EAGAIN`` or :data:`RECV_BATCH` datagrams, whichever comes first) into one
preallocated buffer; ``now`` is read once per datagram so RTT samples are exact.
"""
from __future__ import annotations

import errno
import os
import select
import signal
import socket
import time
from typing import Any, Callable, List, Optional, Tuple

from hosts.transport.receiver import Receiver
from hosts.transport.sender import Sender

SOCKET_BUFFER_BYTES = 8 * 1024 * 1024
MAX_DATAGRAM_BYTES = 65535
IDLE_POLL_S = 1.0
#: Datagrams read per wake-up before timers and signals are looked at again. Reading
#: until EAGAIN without a bound can starve them: each ACK releases new data, whose
#: ACKs keep the socket readable for as long as the flow runs.
RECV_BATCH = 64

Addr = Tuple[str, int]


def now_us() -> int:
    return time.monotonic_ns() // 1000


def parse_addr(text: str, default_port: Optional[int] = None) -> Addr:
    """``"HOST:PORT"`` (or ``"HOST"`` with a default port) -> an IPv4 ``(ip, port)``.

    Raises ValueError with a one-line message.
    """
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = text, ""
    if not host:
        raise ValueError(f"address {text!r} has no host (use HOST:PORT, e.g. 10.0.0.2:16983)")
    if port_text == "":
        if default_port is None:
            raise ValueError(f"address {text!r} needs a port (HOST:PORT)")
        port = default_port
    else:
        try:
            port = int(port_text)
        except ValueError:
            raise ValueError(f"bad port in {text!r}") from None
        if not 0 <= port <= 65535:
            raise ValueError(f"port out of range in {text!r}")
    try:
        infos = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_DGRAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise ValueError(f"cannot resolve {host!r}: {exc}") from None
    return str(infos[0][4][0]), port


def _set_buffer(sock: socket.socket, force_opt: int, opt: int, size: int) -> None:
    try:
        sock.setsockopt(socket.SOL_SOCKET, force_opt, size)  # root: beyond rmem_max
    except OSError:
        try:
            sock.setsockopt(socket.SOL_SOCKET, opt, size)
        except OSError:
            pass


def open_udp_socket(bind: Optional[Addr] = None, connect: Optional[Addr] = None,
                    buffer_bytes: int = SOCKET_BUFFER_BYTES) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        _set_buffer(sock, getattr(socket, "SO_RCVBUFFORCE", 33), socket.SO_RCVBUF, buffer_bytes)
        _set_buffer(sock, getattr(socket, "SO_SNDBUFFORCE", 32), socket.SO_SNDBUF, buffer_bytes)
        if bind is not None:
            sock.bind(bind)
        if connect is not None:
            sock.connect(connect)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


class SignalWakeup:
    """Counts SIGINT/SIGTERM and wakes the event loop through a self-pipe."""

    def __init__(self) -> None:
        self.count = 0
        self.last_signal: Optional[int] = None
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)
        os.set_blocking(self._w, False)
        self._old_fd: Optional[int] = None
        self._old_handlers: List[Tuple[int, Any]] = []

    @property
    def fd(self) -> int:
        return self._r

    def _handler(self, signum: int, _frame: Any) -> None:
        self.count += 1
        self.last_signal = signum

    def __enter__(self) -> "SignalWakeup":
        self._old_fd = signal.set_wakeup_fd(self._w, warn_on_full_buffer=False)
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old_handlers.append((sig, signal.signal(sig, self._handler)))
        return self

    def drain(self) -> None:
        try:
            while os.read(self._r, 512):
                pass
        except BlockingIOError:
            pass

    def __exit__(self, *exc: Any) -> None:
        for sig, old in self._old_handlers:
            signal.signal(sig, old)
        signal.set_wakeup_fd(self._old_fd if self._old_fd is not None else -1)
        os.close(self._r)
        os.close(self._w)


def socket_emitter(sock: socket.socket,
                   on_refused: Optional[Callable[[], None]] = None) -> Callable[[memoryview], bool]:
    """``emit`` for a connected socket: False on EAGAIN; local errors count as losses.

    ``on_refused`` is called when the kernel reports an ICMP port unreachable (no
    receiver on the port any more)."""
    send = sock.send

    def emit(view: memoryview) -> bool:
        try:
            send(view)
        except BlockingIOError:
            return False
        except InterruptedError:
            return True
        except ConnectionRefusedError:
            if on_refused is not None:
                on_refused()
            return True  # reported on this send; this packet is lost
        except OSError as exc:
            if exc.errno in (errno.ENOBUFS, errno.EHOSTUNREACH, errno.ENETUNREACH):
                return True
            raise
        return True

    return emit


#: ECN codepoints of the IP header's two low TOS bits (RFC 3168 sec. 5).
ECN_MASK = 0x03
ECT0 = 0x02
ECN_CE = 0x03
IP_RECVTOS = getattr(socket, "IP_RECVTOS", 13)
TOS_CMSG_SPACE = socket.CMSG_SPACE(4)


def set_ect(sock: socket.socket) -> None:
    """Send the socket's datagrams ECN-capable, ECT(0) (RFC 3168 sec. 5)."""
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, ECT0)


def tos_of(cmsgs: list) -> int:
    """The IP header's TOS byte (DSCP << 2 | ECN) from a datagram's ancillary data
    (IP_RECVTOS); 0 when it has none."""
    for level, kind, data in cmsgs:
        if level == socket.IPPROTO_IP and kind == socket.IP_TOS and data:
            return data[0]
    return 0


def is_ce(cmsgs: list) -> bool:
    """Whether a datagram's ancillary data (IP_RECVTOS) says it arrived CE-marked."""
    return tos_of(cmsgs) & ECN_MASK == ECN_CE


def run_sender(sender: Sender, sock: socket.socket, wake: SignalWakeup,
               on_tick: Optional[Callable[[int], None]] = None) -> None:
    """Run one flow until it is done or failed (SIGINT/SIGTERM: FIN after the bytes
    sent so far; a second signal aborts with a RST)."""
    ep = select.epoll()
    fd = sock.fileno()
    ep.register(fd, select.EPOLLIN)
    ep.register(wake.fd, select.EPOLLIN)
    want_out = False
    buf = bytearray(MAX_DATAGRAM_BYTES)
    view = memoryview(buf)
    recv_into = sock.recv_into
    on_datagram = sender.on_datagram
    if sender.on_ecn_ok is None:
        sender.on_ecn_ok = lambda: set_ect(sock)
    handled_signals = 0
    try:
        sender.start(now_us())
        while not sender.finished:
            if wake.count != handled_signals:
                handled_signals = wake.count
                if handled_signals == 1:
                    sender.finish_now(now_us())
                else:
                    sender.abort(now_us(), "aborted by a second signal")
                    break
            if sender.blocked != want_out:
                want_out = sender.blocked
                ep.modify(fd, select.EPOLLIN | (select.EPOLLOUT if want_out else 0))
            deadline = sender.next_deadline_us()
            if deadline is None:
                timeout = IDLE_POLL_S
            else:
                timeout = max(deadline - now_us(), 0) / 1e6
            events = ep.poll(timeout)
            for efd, ev in events:
                if efd == fd:
                    if ev & (select.EPOLLIN | select.EPOLLERR):
                        for _ in range(RECV_BATCH):
                            try:
                                n = recv_into(buf)
                            except BlockingIOError:
                                break
                            except InterruptedError:
                                continue
                            except ConnectionRefusedError:  # ICMP port unreachable
                                sender.on_unreachable(now_us())
                                continue
                            on_datagram(view[:n], time.monotonic_ns() // 1000)
                    if ev & select.EPOLLOUT:
                        sender.pump(now_us())
                elif efd == wake.fd:
                    wake.drain()
            t = now_us()
            deadline = sender.next_deadline_us()
            if deadline is not None and deadline <= t:
                sender.on_timer(t)
            if on_tick is not None:
                on_tick(t)
    finally:
        ep.close()


def run_receiver(receiver: Receiver, sock: socket.socket, wake: SignalWakeup,
                 should_stop: Callable[[int], bool]) -> None:
    """Serve until a signal arrives or ``should_stop(now_us)`` is true."""
    ep = select.epoll()
    fd = sock.fileno()
    ep.register(fd, select.EPOLLIN)
    ep.register(wake.fd, select.EPOLLIN)
    buf = bytearray(MAX_DATAGRAM_BYTES)
    view = memoryview(buf)
    bufs = [buf]
    recvmsg_into = sock.recvmsg_into
    sock.setsockopt(socket.IPPROTO_IP, IP_RECVTOS, 1)
    on_datagram = receiver.on_datagram
    try:
        while wake.count == 0:
            t = now_us()
            if should_stop(t):
                return
            deadline = receiver.next_deadline_us()
            timeout = IDLE_POLL_S if deadline is None else min(max(deadline - t, 0) / 1e6,
                                                                 IDLE_POLL_S)
            for efd, _ev in ep.poll(timeout):
                if efd == fd:
                    for _ in range(RECV_BATCH):
                        try:
                            n, cmsgs, _flags, addr = recvmsg_into(bufs, TOS_CMSG_SPACE)
                        except BlockingIOError:
                            break
                        except (ConnectionRefusedError, InterruptedError):
                            continue
                        tos = tos_of(cmsgs)
                        on_datagram(view[:n], addr, time.monotonic_ns() // 1000,
                                    tos & ECN_MASK == ECN_CE, tos >> 2)
                else:
                    wake.drain()
            t = now_us()
            deadline = receiver.next_deadline_us()
            if deadline is not None and deadline <= t:
                receiver.on_timer(t)
    finally:
        ep.close()


def receiver_emitter(sock: socket.socket) -> Callable[[memoryview, Addr], bool]:
    sendto = sock.sendto

    def emit(view: memoryview, addr: Addr) -> bool:
        try:
            sendto(view, addr)
        except BlockingIOError:
            return False  # ACKs are cumulative: the next one covers this one
        except OSError as exc:
            if exc.errno in (errno.ENOBUFS, errno.EHOSTUNREACH, errno.ENETUNREACH,
                             errno.ECONNREFUSED):
                return False
            raise
        return True

    return emit
