"""One Mininet experiment per machine at a time.

Experiments build their network in the root namespace with fixed names (s1-eth1,
...) and loopback ports, and an experiment is only faithful when it has the CPU
to itself. `experiment_lock()` holds an exclusive `flock` on a lock file for the
whole run; a second `bwn run` (or test, or `bwn net`) waits for it and says who
holds it. The kernel drops the lock when the holder exits, however it exits, so
a crashed run never leaves a stale lock.
"""
from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

LOCK_PATH = Path(os.environ.get("BWN_LOCK_FILE", "/run/lock/bwn-experiment.lock"))


@contextmanager
def experiment_lock(progress: Callable[[str], None] = print, timeout_s: float | None = None,
                    path: Path | None = None) -> Iterator[None]:
    """Hold the machine's experiment lock; wait (telling `progress` who holds it)."""
    lock_path = path or LOCK_PATH
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            progress(f"waiting for another bwn experiment to finish (pid {holder}, lock {lock_path})")
            deadline = None if timeout_s is None else time.monotonic() + timeout_s
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if deadline is not None and time.monotonic() > deadline:
                        raise TimeoutError(f"another bwn experiment (pid {holder}) still holds "
                                           f"{lock_path} after {timeout_s:.0f} s") from None
                    time.sleep(0.5)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the flock
