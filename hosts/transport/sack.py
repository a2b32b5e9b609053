"""The sender's SACK scoreboard (RFC 6675 sec. 3-4) over the transport's byte offsets.

The scoreboard is the set of byte ranges the receiver reported in SACK blocks
(RFC 2018), above the cumulative ACK, merged into disjoint sorted half-open
intervals ``[start, end)``. RFC 6675 counts in octets with inclusive ends; here
every bound is exclusive (``HighACK + 1`` is ``snd_una``, ``HighData + 1`` is
``snd_max``, ``HighRxt + 1`` is :attr:`Scoreboard.high_rxt`), which only moves the
``<=`` of the RFC to ``<``.

What the RFC's routines become (``DupThresh = 3``):

* ``Update()`` -> :meth:`Scoreboard.update` (blocks outside ``(snd_una, snd_max]`` are
  clipped or ignored: a block can only report data that was sent);
* ``IsLost(S)`` -> :meth:`Scoreboard.is_lost`: more than ``(DupThresh - 1) * SMSS``
  bytes SACKed above ``S``, or at least ``DupThresh`` SACKed segments above it
  ("discontiguous SACKed sequences", counted as ``ceil(len / SMSS)`` per merged
  range, so that segments smaller than SMSS count one each);
* ``SetPipe()`` -> :meth:`Scoreboard.pipe`: for each unSACKed byte of
  ``[snd_una, snd_max)``, +1 if it is not lost, +1 if it is below ``high_rxt``;
* ``NextSeg()`` is the sender's (it also knows the stream and the window):
  :meth:`Scoreboard.next_lost_hole` and :meth:`Scoreboard.next_hole` give rules (1)
  and (3), :meth:`Scoreboard.highest_unsacked` rule (4).

Because "SACKed above S" only shrinks as S grows, the lost bytes are exactly the
unSACKed bytes below one boundary (:meth:`Scoreboard.lost_boundary`), so every
routine is a walk over the merged ranges: O(number of holes), no per-segment state.
"""
from __future__ import annotations

import bisect
from typing import List, Optional, Sequence, Tuple

DUP_THRESH = 3  # RFC 6675 DupThresh (= RFC 5681's 3 duplicate ACKs)


class RangeSet:
    """Disjoint, sorted, merged half-open byte ranges (the receiver's out-of-order
    data, the sender's SACKed data)."""

    def __init__(self) -> None:
        self._starts: List[int] = []
        self._ends: List[int] = []
        self.sacked_bytes = 0   # total bytes covered

    @property
    def ranges(self) -> List[Tuple[int, int]]:
        return list(zip(self._starts, self._ends))

    def __bool__(self) -> bool:
        return bool(self._starts)

    def clear(self) -> None:
        self._starts.clear()
        self._ends.clear()
        self.sacked_bytes = 0

    def advance(self, snd_una: int) -> None:
        """Forget everything below the cumulative ACK."""
        starts, ends = self._starts, self._ends
        while starts and ends[0] <= snd_una:
            self.sacked_bytes -= ends[0] - starts[0]
            del starts[0], ends[0]
        if starts and starts[0] < snd_una:
            self.sacked_bytes -= snd_una - starts[0]
            starts[0] = snd_una

    def add(self, left: int, right: int) -> int:
        """Add ``[left, right)``; returns the bytes not covered before."""
        return self._add(left, right) if left < right else 0

    def __len__(self) -> int:
        return len(self._starts)

    def update(self, blocks: Sequence[Tuple[int, int]], snd_una: int, snd_max: int) -> int:
        """RFC 6675 ``Update()``: add the SACK blocks of one ACK; returns the number of
        bytes SACKed for the first time (> 0 makes the ACK a "duplicate
        acknowledgment" in RFC 6675's sense, sec. 2).

        Parts below ``snd_una`` are clipped (already acknowledged, or a D-SACK);
        blocks that reach beyond ``snd_max`` report data never sent and are ignored."""
        new = 0
        for left, right in blocks:
            if right > snd_max or right <= snd_una:
                continue
            new += self._add(max(left, snd_una), right)
        return new

    def _add(self, left: int, right: int) -> int:
        starts, ends = self._starts, self._ends
        i = bisect.bisect_left(ends, left)          # first range that ends at/after left
        j = bisect.bisect_right(starts, right)      # ranges [i, j) touch [left, right)
        if i == j:
            starts.insert(i, left)
            ends.insert(i, right)
            self.sacked_bytes += right - left
            return right - left
        old = sum(ends[k] - starts[k] for k in range(i, j))
        lo, hi = min(left, starts[i]), max(right, ends[j - 1])
        starts[i:j] = [lo]
        ends[i:j] = [hi]
        added = (hi - lo) - old
        self.sacked_bytes += added
        return added

    def is_sacked(self, seq: int) -> bool:
        i = bisect.bisect_right(self._starts, seq) - 1
        return i >= 0 and seq < self._ends[i]

    def sacked_range_at(self, seq: int) -> Optional[Tuple[int, int]]:
        """The SACKed range that contains ``seq``, if any."""
        i = bisect.bisect_right(self._starts, seq) - 1
        if i >= 0 and seq < self._ends[i]:
            return self._starts[i], self._ends[i]
        return None

    def next_sacked_start(self, seq: int) -> Optional[int]:
        """The start of the first SACKed range above ``seq`` (``seq`` not SACKed)."""
        i = bisect.bisect_right(self._starts, seq)
        return self._starts[i] if i < len(self._starts) else None

    @property
    def highest_sacked_end(self) -> Optional[int]:
        return self._ends[-1] if self._ends else None

    def unsacked_between(self, lo: int, hi: int) -> int:
        """Bytes of ``[lo, hi)`` not SACKed."""
        if hi <= lo:
            return 0
        total = hi - lo
        starts, ends = self._starts, self._ends
        i = bisect.bisect_right(ends, lo)
        while i < len(starts) and starts[i] < hi:
            total -= min(ends[i], hi) - max(starts[i], lo)
            i += 1
        return total



class Scoreboard(RangeSet):
    """SACKed ranges above ``snd_una``, and the recovery pointers of RFC 6675."""

    def __init__(self, mss_bytes: int) -> None:
        super().__init__()
        self.mss_bytes = mss_bytes
        # RFC 6675 sec. 2, as exclusive bounds (see the module docstring).
        self.high_rxt = 0                  # HighRxt + 1
        self.rescue_rxt: Optional[int] = None  # RescueRxt + 1, None = undefined

    # -- RFC 6675 sec. 4 -------------------------------------------------------------
    def lost_boundary(self, snd_una: int) -> int:
        """The unSACKed bytes below the returned offset are lost (``IsLost`` true); those
        above it are not. ``snd_una`` when nothing is lost."""
        mss = self.mss_bytes
        sacked = 0
        segments = 0
        for k in range(len(self._starts) - 1, -1, -1):
            length = self._ends[k] - self._starts[k]
            sacked += length
            segments += -(-length // mss)
            if sacked > (DUP_THRESH - 1) * mss or segments >= DUP_THRESH:
                return self._starts[k]
        return snd_una

    def is_lost(self, seq: int, snd_una: int) -> bool:
        """RFC 6675 ``IsLost(seq)`` for an unSACKed byte ``seq``."""
        return seq < self.lost_boundary(snd_una)

    def pipe(self, snd_una: int, snd_max: int, high_rxt: Optional[int] = None,
             lost_below: Optional[int] = None) -> int:
        """RFC 6675 ``SetPipe()``: bytes presumed in the network.

        ``high_rxt`` defaults to :attr:`high_rxt`; ``lost_below`` (default
        :meth:`lost_boundary`) lets the sender mark more as lost (after an RTO)."""
        if high_rxt is None:
            high_rxt = self.high_rxt
        boundary = self.lost_boundary(snd_una)
        if lost_below is not None:
            boundary = max(boundary, lost_below)
        boundary = min(max(boundary, snd_una), snd_max)
        not_lost = self.unsacked_between(boundary, snd_max)
        retransmitted = self.unsacked_between(snd_una, min(max(high_rxt, snd_una), snd_max))
        return not_lost + retransmitted

    def next_hole(self, after: int, below: int) -> Optional[Tuple[int, int]]:
        """The first unSACKed range ``[s, e)`` with ``s >= after`` and ``s < below``,
        ``e`` clipped to the next SACKed range (or ``below``)."""
        seq = after
        r = self.sacked_range_at(seq)
        if r is not None:
            seq = r[1]
        if seq >= below:
            return None
        nxt = self.next_sacked_start(seq)
        end = below if nxt is None else min(nxt, below)
        return (seq, end) if seq < end else None

    def next_lost_hole(self, snd_una: int, after: int) -> Optional[Tuple[int, int]]:
        """NextSeg rule (1): the first unSACKed ``S2 >= after`` (``> HighRxt``) that is
        below the highest SACKed byte (1.b) and lost (1.c)."""
        top = self.highest_sacked_end
        if top is None:
            return None
        below = min(self.lost_boundary(snd_una), top)
        return self.next_hole(max(after, snd_una), below)

    def hole_start(self, seq: int, snd_una: int) -> int:
        """The first byte of the unSACKed run that contains the unSACKed byte ``seq``."""
        i = bisect.bisect_right(self._ends, seq) - 1
        return max(self._ends[i], snd_una) if i >= 0 else snd_una

    def highest_unsacked(self, snd_una: int, snd_max: int) -> Optional[int]:
        """NextSeg rule (4): the highest unSACKed byte below ``snd_max``, if any."""
        if snd_max <= snd_una:
            return None
        seq = snd_max - 1
        r = self.sacked_range_at(seq)
        if r is not None:
            seq = r[0] - 1
        return seq if seq >= snd_una else None
