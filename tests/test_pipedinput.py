"""bwn/emulation/pipedinput.py: `bwn net`'s prompt reads a pipe without missing Ctrl-C."""
from __future__ import annotations

import os
import signal
import threading
import time
from typing import Iterator

import pytest

from bwn.emulation.pipedinput import PipedInput, has_fd, is_tty


@pytest.fixture
def pipe() -> Iterator[tuple[PipedInput, int]]:
    r, w = os.pipe()
    with os.fdopen(r, "rb", buffering=0) as raw:
        yield PipedInput(raw, slice_s=0.05), w
    try:
        os.close(w)
    except OSError:
        pass


def test_lines_keys_and_end_of_input(pipe):
    stdin, w = pipe
    os.write(w, "bwn status\nh1 ping h2\nxyz\u00e9".encode())
    assert stdin.readline() == "bwn status\n"
    assert stdin.read(2) == "h1"                  # Mininet's key-by-key read of a node command
    assert stdin.readline() == " ping h2\n"
    os.close(w)
    assert stdin.readline() == "xyz\u00e9"             # the last line, without its newline
    assert stdin.readline() == "" and stdin.read(1) == ""   # end of input: Cmd's EOF
    assert stdin.isatty() is False and stdin.fileno() >= 0


def test_it_takes_no_more_than_the_line(pipe):
    """What follows the line stays in the pipe for whoever polls the descriptor next."""
    stdin, w = pipe
    os.write(w, b"first\nsecond\n")
    assert stdin.readline() == "first\n"
    assert os.read(stdin.fileno(), 100) == b"second\n"


def test_a_line_split_across_writes_is_one_line(pipe):
    stdin, w = pipe

    def later() -> None:
        os.write(w, b"bwn ra")
        time.sleep(0.2)
        os.write(w, b"te bottleneck 2\n")
    threading.Thread(target=later).start()
    assert stdin.readline() == "bwn rate bottleneck 2\n"


def test_a_signal_taken_by_another_thread_interrupts_the_read(pipe):
    """The case a plain blocking read misses: SIGINT delivered to a thread other than
    the main one, with no input coming. The prompt must raise KeyboardInterrupt soon,
    not wait for the next line (written after 10 s as a backstop)."""
    stdin, w = pipe
    # Python's own SIGINT handler, as `bwn net` installs it (a test runner started in
    # the background may have inherited SIGINT ignored).
    old_handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    started = threading.Event()

    def other_thread() -> None:
        started.set()
        time.sleep(10)
    helper = threading.Thread(target=other_thread, daemon=True)
    helper.start()
    started.wait()
    backstop = threading.Timer(10.0, lambda: os.write(w, b"too late\n"))
    backstop.start()
    try:
        threading.Timer(0.3, lambda: signal.pthread_kill(helper.ident, signal.SIGINT)).start()
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            stdin.readline()
        assert time.monotonic() - t0 < 8.0
    finally:
        backstop.cancel()
        signal.signal(signal.SIGINT, old_handler)


def test_stream_kinds():
    r, w = os.pipe()
    try:
        with os.fdopen(r, "rb", buffering=0) as raw:
            assert has_fd(raw) and not is_tty(raw)
    finally:
        os.close(w)
    assert not has_fd(object()) and not is_tty(object())
    import io
    assert not has_fd(io.StringIO("x"))
