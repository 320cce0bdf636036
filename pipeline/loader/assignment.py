"""Which rows each consumer (a data-parallel rank's DataLoader worker) reads in an epoch,
decided from the shards' metadata alone, the same in every consumer.

An epoch, for `consumers = world_size x num_workers` consumers (consumer
`rank * num_workers + worker`), with `total` rows in the split:

1. The split's Parquet row groups are shuffled from (seed, epoch) (file order without
   `shuffle`).
2. With `even` (the default, what data-parallel training needs), `total % consumers` rows
   (fewer than the consumers) are left out: a run of that many rows starting at a random
   row of the shuffled sequence (from seed and epoch, so different rows every epoch; the
   last rows without `shuffle`), counted in `Share.left_over`. Every consumer then takes
   exactly `total // consumers` rows. Without `even` nothing is left out and the first
   `total % consumers` consumers take one row more (every row exactly once, but consumers
   may differ by a batch: not for data-parallel training).
3. Row groups (those with rows) are dealt to consumers strided (the shuffled groups 0, C,
   2C ... to consumer 0, 1, C+1 ... to consumer 1), so a consumer's rows come from all over the split, not
   from one range of it (a range of a split written in input order is one source).
4. A consumer whose groups hold more rows than its share hands the rest over (the tail of
   its last groups) to the consumers whose groups hold fewer, in consumer order.

So every row is read at most once per epoch (exactly once without `even`), each consumer
reads only whole row groups and the few slices handed over, and all consumers know every
consumer's share (what equal steps of packed batches are computed from)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

_LEFT_OVER_STREAM = 2**31 - 1
"""The random stream (after seed and epoch) that places the rows left out."""


@dataclass(frozen=True, slots=True)
class RowGroup:
    """One Parquet row group: its file, its index in the file and its rows."""

    path: Path
    index: int
    rows: int
    bytes: int = 0
    """Its uncompressed size, for sizing buffers."""


@dataclass(frozen=True, slots=True)
class Share:
    """A consumer's part of an epoch: (row group, first row, stop row) slices in reading
    order, and the rows of the epoch no consumer takes (to even the shares out)."""

    slices: tuple[tuple[RowGroup, int, int], ...]
    left_over: int

    @property
    def rows(self) -> int:
        return sum(stop - start for _, start, stop in self.slices)


def row_groups(paths: list[Path]) -> list[RowGroup]:
    """The row groups of `paths`, in file and group order."""
    groups = []
    for path in paths:
        metadata = pq.ParquetFile(path).metadata
        groups += [
            RowGroup(path, i, metadata.row_group(i).num_rows, metadata.row_group(i).total_byte_size)
            for i in range(metadata.num_row_groups)
        ]
    return groups


def epoch_rng(seed: int, epoch: int, *stream: int) -> np.random.Generator:
    """The random generator of one epoch (and one stream of it, e.g. a consumer)."""
    return np.random.default_rng([seed, epoch, *stream])


def share(
    groups: list[RowGroup],
    *,
    consumer: int,
    consumers: int,
    seed: int,
    epoch: int,
    shuffle: bool = True,
    even: bool = True,
) -> Share:
    """Consumer `consumer`'s share of the epoch (see the module docstring)."""
    if not 0 <= consumer < consumers:
        raise ValueError(f"consumer {consumer} is not one of 0..{consumers - 1}")
    return shares(groups, consumers=consumers, seed=seed, epoch=epoch, shuffle=shuffle, even=even)[
        consumer
    ]


_Slice = tuple[RowGroup, int, int]


def shares(
    groups: list[RowGroup],
    *,
    consumers: int,
    seed: int,
    epoch: int,
    shuffle: bool = True,
    even: bool = True,
) -> list[Share]:
    """Every consumer's share of the epoch, in consumer order (see the module docstring)."""
    if consumers < 1:
        raise ValueError("there must be at least one consumer")
    order = epoch_rng(seed, epoch).permutation(len(groups)) if shuffle else range(len(groups))
    ordered = [groups[index] for index in order]
    total = sum(group.rows for group in ordered)
    base, extra = divmod(total, consumers)
    left_over = extra if even else 0
    targets = [base + (0 if even or consumer >= extra else 1) for consumer in range(consumers)]
    pieces = _without_left_over(ordered, total, left_over, seed, epoch, shuffle)
    owned: list[list[_Slice]] = [[] for _ in range(consumers)]
    dealt = [
        group_pieces for group, group_pieces in zip(ordered, pieces, strict=True) if group.rows
    ]
    for position, group_pieces in enumerate(dealt):
        owned[position % consumers] += group_pieces
    handed: deque[_Slice] = deque()  # the tails handed over, in consumer then row order
    for consumer, slices in enumerate(owned):
        surplus = sum(stop - start for _, start, stop in slices) - targets[consumer]
        given: deque[_Slice] = deque()
        while surplus > 0:
            group, start, stop = slices.pop()
            cut = max(start, stop - surplus)
            if cut > start:
                slices.append((group, start, cut))
            given.appendleft((group, cut, stop))
            surplus -= stop - cut
        handed += given
    for consumer, slices in enumerate(owned):
        missing = targets[consumer] - sum(stop - start for _, start, stop in slices)
        while missing > 0:
            group, start, stop = handed.popleft()
            taken = min(missing, stop - start)
            slices.append((group, start, start + taken))
            if start + taken < stop:
                handed.appendleft((group, start + taken, stop))
            missing -= taken
    assert not handed
    return [Share(tuple(slices), left_over) for slices in owned]


def _without_left_over(
    ordered: list[RowGroup], total: int, count: int, seed: int, epoch: int, shuffle: bool
) -> list[list[_Slice]]:
    """Each group of `ordered` as the slices of it that remain once `count` consecutive
    rows of the sequence (wrapping around its end) are left out: from a random row of it,
    or its last rows without `shuffle`."""
    first = total - count
    if shuffle and count:
        first = int(epoch_rng(seed, epoch, _LEFT_OVER_STREAM).integers(total))
    removed = [(first, min(first + count, total))]
    if first + count > total:
        removed.append((0, first + count - total))
    pieces = []
    offset = 0
    for group in ordered:
        kept = [(group, 0, group.rows)]
        for start, stop in removed:
            kept = [
                part
                for group_, a, b in kept
                for part in (
                    (group_, a, min(b, max(a, start - offset))),
                    (group_, max(a, min(b, stop - offset)), b),
                )
                if part[2] > part[1]
            ]
        pieces.append(kept)
        offset += group.rows
    return pieces
