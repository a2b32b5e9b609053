"""Reading a piped (non-terminal) stdin without missing a signal.

`bwn net` runs the controller, gRPC and the fidelity sampler in threads. The kernel may
hand a process-directed SIGINT to any thread that does not block it; Python then runs
its handler in the main thread only when that thread next executes Python code. A main
thread blocked in ``read(0)`` on a pipe therefore did not see Ctrl-C until the next
input arrived (seen on a loaded machine: SIGINT then end of input read as Ctrl-D).

:class:`PipedInput` reads in slices: it waits for input at most ``slice_s`` at a time,
so a pending handler runs within that time, and it reads one byte at a time, so it never
takes more than the line it returns (Mininet polls the same descriptor for a node
command's keys and must see what is left). A terminal is read as before: Ctrl-C there
goes to the whole foreground process group.
"""
from __future__ import annotations

import os
import select
from typing import Protocol

SLICE_S = 0.2


class HasFileno(Protocol):
    def fileno(self) -> int: ...


class PipedInput:
    """A text stream over `raw`'s descriptor: readline(), read(n), fileno(), isatty()."""

    def __init__(self, raw: HasFileno, slice_s: float = SLICE_S) -> None:
        self._fd = raw.fileno()
        self.slice_s = slice_s

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return False

    def _byte(self) -> bytes:
        """One byte, or b"" at end of input."""
        while True:
            ready, _, _ = select.select([self._fd], [], [], self.slice_s)
            if ready:
                return os.read(self._fd, 1)
            # Back in Python after each slice: a signal taken by another thread runs its
            # handler here (a KeyboardInterrupt for SIGINT).

    def readline(self) -> str:
        data = bytearray()
        while not data.endswith(b"\n"):
            byte = self._byte()
            if not byte:
                break
            data += byte
        return data.decode("utf-8", errors="replace")

    def read(self, size: int = -1) -> str:
        """Up to `size` bytes (all until end of input when negative)."""
        data = bytearray()
        while size < 0 or len(data) < size:
            byte = self._byte()
            if not byte:
                break
            data += byte
        return data.decode("utf-8", errors="replace")


def is_tty(stream: object) -> bool:
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError, OSError):
        return False


def has_fd(stream: object) -> bool:
    try:
        stream.fileno()  # type: ignore[attr-defined]
        return True
    except (AttributeError, ValueError, OSError):
        return False
