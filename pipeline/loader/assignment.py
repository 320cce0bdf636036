"""Which rows each consumer (a data-parallel rank's DataLoader worker) reads in an epoch:
every row exactly once across all consumers, decided from the shards' metadata alone.

The split's Parquet row groups are shuffled per epoch from the seed and laid end to end;
the `world_size x num_workers` consumers take consecutive, equal ranges of that sequence
(the first `rows % consumers` take one row more), so each reads only the groups its range
touches. With `even` (the default, what data-parallel training needs: every rank takes the
same number of steps) each takes `rows // consumers` rows and the `rows % consumers` left
over (fewer than the consumers) are counted in `left_over`, different rows each epoch;
without it every row is read exactly once."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq


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
    order = epoch_rng(seed, epoch).permutation(len(groups)) if shuffle else range(len(groups))
    ordered = [groups[index] for index in order]
    total = sum(group.rows for group in ordered)
    base, extra = divmod(total, consumers)
    start = consumer * base + (0 if even else min(consumer, extra))
    stop = start + base + (0 if even or consumer >= extra else 1)
    slices = []
    offset = 0
    for group in ordered:
        first, last = max(start, offset), min(stop, offset + group.rows)
        if first < last:
            slices.append((group, first - offset, last - offset))
        offset += group.rows
    return Share(tuple(slices), extra if even else 0)
