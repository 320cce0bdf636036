"""What each part's task chose of its part: per split, the part's rows it keeps there, each
weighted copy once (DESIGN §7). The task decides; it writes no shard. It records
the part's choice in the work directory (`selected/{part}.arrow`, a record batch per split
in config order: columns `row`, the row's index in the part's threads file, `copy`, its
weighted copy number, `key`, its place in a shuffled split, and `start`, whether it starts
a group: shards are never cut inside one) and the totals each split needs to be cut into
shards; the shard tasks (pipeline/jobs/run/shard_tasks.py) read them.

In a split kept in plan order, a part's entries are in the order the task chose them. In the
shuffled split, each entry's key is a seeded 64-bit hash of its group (a preference pair's
or a group's rows share it, and stay together) or, for a row alone, of its id, with the copy
number for a weighted copy: sorting by key shuffles the split the same way whatever the
engine, the workers or the parts' arrival order, and a key range is a random sample of it."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from pipeline.task_files import replaced

SELECTED_DIR = "selected"
"""In the work directory: one file per part, what its task kept of it."""
SELECTION_SCHEMA = pa.schema(
    [
        pa.field("row", pa.int64(), nullable=False),
        pa.field("copy", pa.int32(), nullable=False),
        pa.field("key", pa.uint64(), nullable=False),
        pa.field("start", pa.bool_(), nullable=False),
    ]
)


@dataclass
class SplitTotals:
    """What a split got over every part: entries (rows, each weighted copy one), tokens,
    the rows' size in memory (for `bytes_per_shard`), and each part's entry count."""

    entries: int = 0
    tokens: int = 0
    nbytes: int = 0
    per_part: list[int] = field(default_factory=list)
    media: list[str] = field(default_factory=list)
    """The media kinds its rows hold (sorted): the run's shards then carry their columns."""


def shuffle_key(seed: int, group: str | None, thread_id: str, copy: int) -> int:
    """The key of a row of the shuffled split: a hash of its group (its id when alone) and
    its copy number, keyed by the seed.

    >>> shuffle_key(0, "pair-1", "a", 0) == shuffle_key(0, "pair-1", "b", 0)
    True
    >>> shuffle_key(0, None, "a", 0) != shuffle_key(0, None, "a", 1)
    True
    """
    name = group if group is not None else thread_id
    text = f"{name}#{copy}" if copy else name
    digest = hashlib.blake2b(
        text.encode("utf-8"), digest_size=8, key=seed.to_bytes(8, "big", signed=True)
    )
    return int.from_bytes(digest.digest(), "big")


class Selections:
    """The record of what a run keeps, part by part (see the module docstring):
    `add` while a part is taken, `finish_part` at its end writes the part's file."""

    def __init__(self, folder: Path, splits: list[str], shuffled: str | None, seed: int):
        self.folder = folder
        self.splits = splits
        self.shuffled = shuffled
        self.seed = seed
        self.totals = {name: SplitTotals() for name in splits}
        self.parts: list[str] = []
        self._rows: dict[str, list[np.ndarray]] = {}
        self._copies: dict[str, list[np.ndarray]] = {}
        self._keys: dict[str, list[np.ndarray]] = {}
        self._starts: dict[str, list[np.ndarray]] = {}
        folder.mkdir(parents=True, exist_ok=True)

    def add(
        self,
        split: str,
        rows: np.ndarray,
        weight: int,
        keys: tuple[list[str | None], list[str]],
        sizes: tuple[int, int],
        media: frozenset[str] = frozenset(),
    ) -> None:
        """Rows of the part (indices into its threads file) kept for `split`, `weight`
        copies of each (copy after copy, as the split is written); `keys`: their groups and
        ids; `sizes`: their tokens and bytes in memory (once each)."""
        groups, ids = keys
        previous = [None, *groups[:-1]]
        starts = np.array(
            [g is None or g != before for g, before in zip(groups, previous, strict=True)], bool
        )
        totals = self.totals[split]
        totals.entries += len(rows) * weight
        totals.tokens += sizes[0] * weight
        totals.nbytes += sizes[1] * weight
        totals.media = sorted(set(totals.media) | media)
        for copy in range(weight):
            self._rows.setdefault(split, []).append(rows)
            self._copies.setdefault(split, []).append(np.full(len(rows), copy, np.int32))
            self._starts.setdefault(split, []).append(starts)
            if split == self.shuffled:
                hashed: list[int] = [
                    shuffle_key(self.seed, group, thread_id, copy)
                    for group, thread_id in zip(groups, ids, strict=True)
                ]
                self._keys.setdefault(split, []).append(np.array(hashed, np.uint64))
            else:
                self._keys.setdefault(split, []).append(np.zeros(len(rows), np.uint64))

    def finish_part(self, part_id: str) -> None:
        """Write the part's file (atomically; a run started again writes it again)."""
        batches = []
        for name in self.splits:
            rows = _joined(self._rows.pop(name, []), np.int64)
            copies = _joined(self._copies.pop(name, []), np.int32)
            keys = _joined(self._keys.pop(name, []), np.uint64)
            starts = _joined(self._starts.pop(name, []), np.bool_)
            if name == self.shuffled:
                order = np.argsort(keys, kind="stable")
                rows, copies, keys, starts = rows[order], copies[order], keys[order], starts[order]
            self.totals[name].per_part.append(len(rows))
            batches.append(
                pa.RecordBatch.from_arrays(
                    [pa.array(rows), pa.array(copies), pa.array(keys), pa.array(starts)],
                    schema=SELECTION_SCHEMA,
                )
            )
        target = self.path(part_id)
        with (
            replaced(target) as temp,
            pa.OSFile(str(temp), "wb") as sink,
            pa.ipc.new_file(sink, SELECTION_SCHEMA) as out,
        ):
            for batch in batches:
                out.write_batch(batch)
        self.parts.append(part_id)

    def merge_part(self, part_id: str, totals: dict[str, SplitTotals]) -> None:
        """Take a part's selection, recorded by another `Selections` (a part's task)."""
        for name, got in totals.items():
            mine = self.totals[name]
            mine.entries += got.entries
            mine.tokens += got.tokens
            mine.nbytes += got.nbytes
            mine.per_part += got.per_part
            mine.media = sorted(set(mine.media) | set(getattr(got, "media", ())))
        self.parts.append(part_id)

    @property
    def media(self) -> tuple[str, ...]:
        """The media kinds the run's kept rows hold, in MEDIA_TOKENS order (none: text
        only): its shards get their columns, its tokenizer the placeholders."""
        found = {kind for totals in self.totals.values() for kind in totals.media}
        return tuple(kind for kind in ("image", "audio", "video") if kind in found)

    def path(self, part_id: str) -> Path:
        """The file of a part's selection."""
        return self.folder / f"{part_id}.arrow"


def _joined(arrays: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(arrays).astype(dtype, copy=False) if arrays else np.zeros(0, dtype)


def shard_count(entries: int, per_shard: int) -> int:
    """Shards of at most `per_shard` entries (at least one for a split with entries).

    >>> shard_count(10, 4), shard_count(0, 4)
    (3, 0)
    """
    return math.ceil(entries / per_shard) if entries else 0
