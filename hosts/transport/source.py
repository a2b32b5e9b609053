"""What a sender sends: the byte stream, addressed by offset.

A source gives zero-copy slices (``memoryview``) of the stream at any offset, so
retransmissions (RFC 5681/6582/6298) re-read the same bytes instead of keeping a
copy of every segment in flight.
"""
from __future__ import annotations

import mmap
import os
from typing import Optional, Protocol

PATTERN_PERIOD_BYTES = 251  # prime, so the pattern never lines up with segment sizes


def pattern_bytes(offset: int, length: int) -> bytes:
    """The default stream's bytes ``[offset, offset + length)``: byte i is ``i % 251``."""
    start = offset % PATTERN_PERIOD_BYTES
    reps = (start + length) // PATTERN_PERIOD_BYTES + 1
    return (bytes(range(PATTERN_PERIOD_BYTES)) * reps)[start:start + length]


class StreamSource(Protocol):
    #: Stream length in bytes, or ``None`` while it is open-ended (``--duration``).
    length_bytes: Optional[int]

    def view(self, offset: int, length: int) -> memoryview:
        """Bytes ``[offset, offset + length)`` of the stream."""

    def close(self) -> None:
        ...


class PatternSource:
    """The deterministic default stream (byte i = i mod 251), finite or open-ended."""

    def __init__(self, length_bytes: Optional[int], max_segment_bytes: int) -> None:
        self.length_bytes = length_bytes
        reps = (max_segment_bytes + 2 * PATTERN_PERIOD_BYTES) // PATTERN_PERIOD_BYTES
        self._buf = memoryview(bytes(range(PATTERN_PERIOD_BYTES)) * reps)

    def view(self, offset: int, length: int) -> memoryview:
        start = offset % PATTERN_PERIOD_BYTES
        return self._buf[start:start + length]

    def close(self) -> None:
        pass


class BytesSource:
    """A stream held in memory (tests)."""

    def __init__(self, data: bytes) -> None:
        self._buf = memoryview(data)
        self.length_bytes: Optional[int] = len(data)

    def view(self, offset: int, length: int) -> memoryview:
        return self._buf[offset:offset + length]

    def close(self) -> None:
        pass


class FileSource:
    """A file, memory-mapped; ``limit_bytes`` sends only its first bytes."""

    def __init__(self, path: str, limit_bytes: Optional[int] = None) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            self.file_bytes = size
            if limit_bytes is not None and limit_bytes > size:
                raise ValueError(
                    f"--bytes {limit_bytes} is more than the {size} bytes of {path}")
            self.length_bytes: Optional[int] = size if limit_bytes is None else limit_bytes
            self._map: Optional[mmap.mmap] = (
                mmap.mmap(fd, size, access=mmap.ACCESS_READ) if size else None)
        finally:
            os.close(fd)
        self._buf = memoryview(self._map) if self._map is not None else memoryview(b"")

    def view(self, offset: int, length: int) -> memoryview:
        return self._buf[offset:offset + length]

    def close(self) -> None:
        self._buf.release()
        if self._map is not None:
            self._map.close()
