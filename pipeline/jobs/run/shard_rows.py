"""The rows of one shard task, read a batch at a time (DESIGN §7): the task's entries of
the parts' selections, in the shard's order (by key in the shuffled split), cut into
batches of about ROW_GROUP_ROWS rows, never inside a group (a preference pair's rows stay
in one batch); each batch gathered from the parts' memory-mapped threads files, one
record batch of a file at a time, and the files' pages handed back after it. So a shard
task holds a batch of rows and the shard's entries (a few bytes each), never its whole
shard nor a part's whole columns, whatever the shard's or the input's size."""

from __future__ import annotations

import itertools
import mmap
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import pyarrow as pa

from pipeline.jobs.run.part import PART_THREADS
from pipeline.output.shards import ROW_GROUP_ROWS

BATCH_ROWS = ROW_GROUP_ROWS
"""A shard task's rows read, reshaped and written at a time (about: a group is never cut);
the shard's bytes do not depend on it (its writer cuts row groups of its own)."""
SPILL_BYTES = 16 << 20
"""A shuffled shard's rows a task holds at most before writing them to its spill files."""
RUN_ROWS = 16
"""A batch's rows are sliced from the parts' threads files (not copied) when they come in
runs of this many consecutive rows on average."""


class Entries(Protocol):
    """Where a shard task's entries are: a part's selection file, its split's batch in
    it, the entries `start .. end` of that batch, and the part's folder."""

    @property
    def part_dir(self) -> str: ...
    @property
    def selection(self) -> str: ...
    @property
    def split(self) -> int: ...
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Chosen:
    """A shard's entries in its order: each one's row over the parts' threads files taken
    one after the other, its weighted copy number, and where a batch may begin."""

    rows: np.ndarray
    copies: np.ndarray
    cuts: np.ndarray
    """The entries a batch may begin at: a group's first, not a key's repeat (ascending)."""


def chosen(sources: Sequence[Entries], shuffled: bool) -> tuple[Chosen, list[str]]:
    """The entries of `sources` (sorted by key when `shuffled`, equal keys kept in order),
    and the threads file of each source's part."""
    rows: list[np.ndarray] = []
    copies: list[np.ndarray] = []
    keys: list[np.ndarray] = []
    starts: list[np.ndarray] = []
    files: list[str] = []
    offset = 0
    for source in sources:
        with pa.memory_map(source.selection) as mapped:
            batch = pa.ipc.open_file(mapped).get_batch(source.split)
            batch = batch.slice(source.start, source.end - source.start)
            rows.append(batch["row"].to_numpy() + offset)
            copies.append(batch["copy"].to_numpy().copy())
            keys.append(batch["key"].to_numpy().copy())
            starts.append(batch["start"].to_numpy(zero_copy_only=False))
        files.append(str(Path(source.part_dir) / PART_THREADS))
        offset += _file_rows(files[-1])
    if not files:
        empty = np.zeros(0, np.int64)
        return Chosen(empty, np.zeros(0, np.int32), empty), files
    taken, marks, key, start = (np.concatenate(each) for each in (rows, copies, keys, starts))
    if shuffled:
        order = np.argsort(key, kind="stable")
        taken, marks, key, start = taken[order], marks[order], key[order], start[order]
    repeats = np.zeros(len(key), bool)
    repeats[1:] = key[1:] == key[:-1]
    if not shuffled:
        repeats[:] = False  # plan order: keys are all 0, groups are marked by `start`
    cuts = np.flatnonzero(start & ~repeats).astype(np.int64)
    return Chosen(taken, marks, cuts), files


def _file_rows(path: str) -> int:
    """The rows of an Arrow IPC file (its batches' lengths, read from the map)."""
    with pa.memory_map(path) as mapped:
        reader = pa.ipc.open_file(mapped)
        return sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))


def batch_bounds(entries: Chosen) -> list[tuple[int, int]]:
    """The entries of each batch: about BATCH_ROWS each, each begun at an allowed cut (a
    group longer than that is one batch)."""
    rows, total = BATCH_ROWS, len(entries.rows)
    bounds = [0]
    for target in range(rows, total, rows):
        if target <= bounds[-1]:
            continue
        at = int(np.searchsorted(entries.cuts, target, "left"))
        if at < len(entries.cuts):
            bounds.append(int(entries.cuts[at]))
    bounds.append(total)
    return [(first, last) for first, last in itertools.pairwise(bounds) if first < last]


class Threads:
    """The parts' threads files, taken one after the other, read a batch of rows at a
    time. Each file is memory-mapped once, and its pages handed back (`release`) after
    each batch, and after each record batch rows are taken from: a task's resident memory
    holds a record batch's pages, not those of every row it read (a batch of a shuffled
    shard reads from every record batch of every part)."""

    def __init__(self, files: Sequence[str], schema: pa.Schema):
        self.schema = schema
        self.maps: list[mmap.mmap] = []
        self.readers: list[pa.ipc.RecordBatchFileReader] = []
        firsts: list[int] = []
        self.places: list[tuple[int, int]] = []
        """Each record batch over the files: its file and its index in that file."""
        offset = 0
        for number, path in enumerate(files):
            with open(path, "rb") as file:
                self.maps.append(mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ))
            reader = pa.ipc.open_file(pa.BufferReader(pa.py_buffer(self.maps[-1])))
            self.readers.append(reader)
            for index in range(reader.num_record_batches):
                firsts.append(offset)
                self.places.append((number, index))
                offset += reader.get_batch(index).num_rows
        self.firsts = np.array([*firsts, offset], np.int64)
        self.release()

    def release(self, file: int | None = None) -> None:
        """Drop the pages of a file (None: of every file) from this process: they stay in
        the page cache, and what a table still points at is read again from there when
        used. (A read maps a page's neighbours too, so a few rows of a record batch bring
        in most of it.)"""
        if not hasattr(mmap, "MADV_DONTNEED"):
            return
        for mapped in self.maps if file is None else [self.maps[file]]:
            mapped.madvise(mmap.MADV_DONTNEED)

    def _record_batch(self, number: int) -> pa.RecordBatch:
        path, index = self.places[number]
        return self.readers[path].get_batch(index).select(self.schema.names)

    def gather(self, rows: np.ndarray) -> pa.Table:
        """The rows `rows` (over every file), in that order, of the schema's columns:
        runs of consecutive rows as slices of the files, others taken record batch by
        record batch (a take over a whole file would join its batches first)."""
        if not len(rows):
            return self.schema.empty_table()
        chunk = np.searchsorted(self.firsts, rows, "right") - 1
        breaks = np.flatnonzero((np.diff(rows) != 1) | (np.diff(chunk) != 0)) + 1
        if len(breaks) + 1 <= len(rows) // RUN_ROWS:
            bounds = [0, *breaks.tolist(), len(rows)]
            return pa.Table.from_batches(
                [
                    self._record_batch(int(chunk[first])).slice(
                        int(rows[first] - self.firsts[chunk[first]]), last - first
                    )
                    for first, last in itertools.pairwise(bounds)
                ]
            )
        order = np.argsort(chunk, kind="stable")
        ordered = chunk[order]
        starts = np.flatnonzero(np.diff(ordered)) + 1
        pieces = []
        for first, last in itertools.pairwise([0, *starts.tolist(), len(rows)]):
            number = int(ordered[first])
            local = rows[order[first:last]] - self.firsts[number]
            pieces.append(self._record_batch(number).take(pa.array(local)))
            self.release(self.places[number][0])  # the next record batch's rows are elsewhere
        inverse = np.empty(len(rows), np.int64)
        inverse[order] = np.arange(len(rows))
        return _in_order(pieces, inverse)

    def batches(self, entries: Chosen, bounds: list[tuple[int, int]]) -> Iterator[pa.Table]:
        """Each batch's rows, in order (read from the files batch by batch: rows in runs)."""
        for first, last in bounds:
            yield self.gather(entries.rows[first:last])
            self.release()

    def spilled_batches(
        self, entries: Chosen, bounds: list[tuple[int, int]], folder: str
    ) -> Iterator[pa.Table]:
        """Each batch's rows, in order, for rows scattered over the files (a shuffled
        shard's): every record batch of the files is read once, its rows of the shard
        taken and, every SPILL_BYTES, written under `folder` sorted by their place in the
        shard, a record batch per batch; then each batch is read back from those files.
        (Gathering batch by batch would read every record batch of every part for each
        batch of the shard.)"""
        bucket = np.repeat(np.arange(len(bounds)), [last - first for first, last in bounds])
        chunk = np.searchsorted(self.firsts, entries.rows, "right") - 1
        order = np.argsort(chunk, kind="stable")
        spills: list[tuple[str, np.ndarray, np.ndarray]] = []
        pending: list[pa.RecordBatch] = []
        places: list[np.ndarray] = []
        held = 0
        ordered = chunk[order]
        starts = np.flatnonzero(np.diff(ordered)) + 1
        for first, last in itertools.pairwise([0, *starts.tolist(), len(order)]):
            number = int(ordered[first])
            chosen = order[first:last]
            local = entries.rows[chosen] - self.firsts[number]
            pending.append(self._record_batch(number).take(pa.array(local)))
            self.release(self.places[number][0])
            places.append(chosen)
            held += pending[-1].nbytes
            if held >= SPILL_BYTES or last == len(order):
                spills.append(_spill(pending, places, bucket, folder, len(spills)))
                pending, places, held = [], [], 0
        for number in range(len(bounds)):
            pieces: list[pa.RecordBatch] = []
            where: list[np.ndarray] = []
            with ExitStack() as stack:
                for path, index, place in spills:
                    if index[number] < 0:
                        continue
                    mapped = stack.enter_context(pa.memory_map(path))
                    pieces.append(pa.ipc.open_file(mapped).get_batch(int(index[number])))
                    where.append(place[number])
            if not pieces:
                continue
            yield _in_order(pieces, np.argsort(np.concatenate(where), kind="stable"))


def _spill(
    pending: list[pa.RecordBatch],
    places: list[np.ndarray],
    bucket: np.ndarray,
    folder: str,
    number: int,
) -> tuple[str, np.ndarray, np.ndarray]:
    """Rows taken (`pending`, each entry's place in the shard in `places`) written to a
    file under `folder` sorted by place, a record batch per batch; its path, each batch's
    record batch (-1: none) and the places of each batch's rows."""
    at = np.concatenate(places)
    order = np.argsort(at, kind="stable")
    table = _in_order(pending, order)
    at = at[order]
    path = str(Path(folder) / f"{number:05d}.arrow")
    index = np.full(int(bucket[-1]) + 1 if len(bucket) else 0, -1, np.int64)
    where = np.empty(len(index), object)
    cuts = np.flatnonzero(np.diff(bucket[at])) + 1
    with pa.ipc.new_file(path, table.schema) as writer:
        for written, (first, last) in enumerate(itertools.pairwise([0, *cuts.tolist(), len(at)])):
            batch = int(bucket[at[first]])
            writer.write_batch(table.slice(first, last - first).combine_chunks().to_batches()[0])
            index[batch], where[batch] = written, at[first:last]
    return path, index, where


def _in_order(pieces: Sequence[pa.RecordBatch], indices: np.ndarray) -> pa.Table:
    """The rows of `pieces` (taken one after the other) at `indices`, in that order: a
    column at a time, each column's pieces let go once it is taken (the rows are held
    about 1.5 times, not 3)."""
    schema = pieces[0].schema
    chunks = [[piece.column(index) for piece in pieces] for index in range(len(schema))]
    del pieces
    taken = pa.array(indices)
    columns = []
    for index in range(len(chunks)):
        column = pa.chunked_array(chunks[index], schema.field(index).type)
        chunks[index] = []
        columns.append(column.combine_chunks().take(taken))
        del column
    return pa.Table.from_arrays(columns, schema=schema)
