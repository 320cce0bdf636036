"""Best-fit-decreasing packing over a bounded window: which rows share a packed sequence.

Rows arrive as lengths, in order. Each window of rows is placed longest first into the
open sequence with the least room that still fits it (a new one when none does). Sequences
stay open across windows, so the tail of one window fills the gaps of the last; memory is
bounded by closing the fullest sequences once more than `max_open` are open. The same
lengths and settings always give the same sequences, in the same order."""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

WINDOW = 8192
"""Rows sorted and placed together; larger packs tighter and holds more in memory."""
STRATEGIES = ("bfd",)


class OverlongRowError(ValueError):
    """A row longer than the sequence length reached the packer (the caller's policy must
    drop, truncate or refuse it first)."""


@dataclass(slots=True)
class _Sequence:
    number: int
    rows: list[int] = field(default_factory=list)


class BestFitPacker:
    """Places rows a window at a time (`place`), closing sequences as it goes, and hands out
    the rest at the end (`finish`). Rows are numbered in the order they are placed.

    >>> packer = BestFitPacker(8, max_open=1)
    >>> packer.place([6, 5, 2])  # 6 and 2 fill a sequence; 5 stays open
    [[0, 2]]
    >>> packer.open_rows(), packer.placed
    ([1], 3)
    >>> packer.finish()
    [[1]]
    """

    def __init__(self, seq_len: int, *, max_open: int = WINDOW):
        if seq_len < 1 or max_open < 0:
            raise ValueError(f"seq_len must be at least 1 and max_open at least 0, not {seq_len}")
        self.seq_len = seq_len
        self.max_open = max_open
        self._rooms: list[tuple[int, int]] = []  # (room left, number) of the open ones, sorted
        self._open: dict[int, _Sequence] = {}
        self._numbers = itertools.count()
        self._placed = 0

    def place(self, lengths: Iterable[int]) -> list[list[int]]:
        """Place the next rows, longest first, each in the open sequence with the least room
        that fits it; return the sequences this closes (full ones, then the fullest beyond
        `max_open`). Raises OverlongRowError for a row over `seq_len`."""
        first = self._placed
        window = list(enumerate(lengths, start=first))
        self._placed += len(window)
        for row, length in sorted(window, key=lambda item: (-item[1], item[0])):
            if length > self.seq_len:
                raise OverlongRowError(f"row {row} has {length} tokens, over {self.seq_len}")
            at = bisect.bisect_left(self._rooms, (length, -1))
            if at < len(self._rooms):
                room, number = self._rooms.pop(at)
                sequence = self._open[number]
            else:
                sequence = _Sequence(next(self._numbers))
                self._open[sequence.number] = sequence
                room = self.seq_len
            sequence.rows.append(row)
            bisect.insort(self._rooms, (room - length, sequence.number))
        return self._close(keep=self.max_open)

    @property
    def placed(self) -> int:
        """How many rows were placed so far (the number the next row gets)."""
        return self._placed

    def finish(self) -> list[list[int]]:
        """Every sequence still open, in the order they were opened."""
        return self._close(keep=0)

    def open_rows(self) -> list[int]:
        """The rows held by open sequences (ascending): what a caller must keep."""
        return sorted(row for sequence in self._open.values() for row in sequence.rows)

    def _close(self, *, keep: int) -> list[list[int]]:
        closing = [number for room, number in self._rooms if room == 0]
        others = [number for room, number in self._rooms if room > 0]
        closing += others[: max(len(others) - keep, 0)]
        if not closing:
            return []
        closed = set(closing)
        self._rooms = [entry for entry in self._rooms if entry[1] not in closed]
        return [sorted(self._open.pop(number).rows) for number in sorted(closing)]


def pack_rows(
    lengths: Iterable[int], seq_len: int, *, window: int = WINDOW, max_open: int | None = None
) -> Iterator[list[int]]:
    """Yield packed sequences as lists of row indices (ascending: rows keep their input
    order inside a sequence), each holding at most `seq_len` tokens. Every row appears in
    exactly one sequence. Raises OverlongRowError for a row over `seq_len`.

    >>> list(pack_rows([5, 3, 4, 2, 6], seq_len=8))  # 6 + 2 and 5 + 3 fill two; 4 is left
    [[3, 4], [0, 1], [2]]
    >>> list(pack_rows([9], seq_len=8))
    Traceback (most recent call last):
    ...
    pipeline.packing.best_fit.OverlongRowError: row 0 has 9 tokens, over 8
    """
    if window < 1:
        raise ValueError(f"window must be at least 1, not {window}")
    packer = BestFitPacker(seq_len, max_open=window if max_open is None else max_open)
    iterator = iter(lengths)
    while chunk := list(itertools.islice(iterator, window)):
        yield from packer.place(chunk)
    yield from packer.finish()


@dataclass(frozen=True, slots=True)
class PackingStats:
    """How well sequences were filled: fill = tokens / (sequences x seq_len).

    >>> stats = PackingStats(sequences=3, rows=5, tokens=18, seq_len=8)
    >>> stats.fill, stats.padding, stats.rows_per_sequence
    (0.75, 6, 1.6666666666666667)
    """

    sequences: int
    rows: int
    tokens: int
    seq_len: int

    @property
    def fill(self) -> float:
        return self.tokens / (self.sequences * self.seq_len) if self.sequences else 0.0

    @property
    def padding(self) -> int:
        """The tokens a batch of full-length sequences would pad."""
        return self.sequences * self.seq_len - self.tokens

    @property
    def rows_per_sequence(self) -> float:
        return self.rows / self.sequences if self.sequences else 0.0

    def to_dict(self) -> dict[str, float | int]:
        return {
            "seq_len": self.seq_len,
            "sequences": self.sequences,
            "threads": self.rows,
            "tokens": self.tokens,
            "padding": self.padding,
            "fill": round(self.fill, 6),
            "threads_per_sequence": round(self.rows_per_sequence, 4),
        }
