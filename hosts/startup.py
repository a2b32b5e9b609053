"""Start-up handshake between an experiment runner and the agents it launches.

Starting a Python agent (interpreter, imports, socket) costs ~0.1-0.3 s of CPU. When an
experiment starts 20 senders at once, that start-up alone kept both cores busy for
over a second, inside the measured window (the fidelity monitor's CPU invariant broke,
docs/fidelity.md). So the runner launches every agent first and waits until each says
it is ready (``--ready-file``: written once the agent has opened its socket), then starts
the measurement and releases the senders (``--wait-go``: a line on stdin), each after its
own ``--start-delay-s``.
"""
from __future__ import annotations

import os
import signal
import sys
import time
from typing import IO, Optional


class NotStarted(Exception):
    """The agent was told to stop (or its runner went away) before its flow started."""


def write_ready_file(path: Optional[str]) -> None:
    """Announce readiness: `path` appears whole (written beside it, then renamed), holding
    this process's pid. Nothing when `path` is None."""
    if path is None:
        return
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as fh:
        fh.write(f"{os.getpid()}\n")
    os.replace(tmp, path)


def wait_for_start(wait_go: bool, delay_s: float, stdin: Optional[IO[str]] = None) -> None:
    """Block until released: a line on `stdin` when `wait_go` (end of file, i.e. the runner
    closed the pipe without a word, means "do not start"), then `delay_s` seconds. A
    signal (SIGINT) while waiting raises NotStarted: SIGINT is handled here whatever
    the agent inherited (a runner started by `nohup ... &` passes it on ignored)."""
    old_handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        if wait_go:
            line = (stdin or sys.stdin).readline()
            if not line:
                raise NotStarted("the runner closed stdin before saying go")
        if delay_s > 0:
            time.sleep(delay_s)
    except KeyboardInterrupt:
        raise NotStarted("interrupted") from None
    finally:
        signal.signal(signal.SIGINT, old_handler)
