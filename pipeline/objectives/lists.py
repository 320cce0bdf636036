"""Cutting Arrow list columns row by row at per-row positions, in numpy (no Python loop
over rows): the prompt of a row and its completion are two slices of its token lists."""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def _flat(column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, pa.Array]:
    """A list column's offsets (from 0) and its values."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    offsets = column.offsets.to_numpy().astype(np.int64)
    values = column.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    return offsets - offsets[0], values


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The indices start[i], ..., start[i] + length[i] - 1 of every row, concatenated."""
    total = int(lengths.sum())
    row_starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
    indices: np.ndarray = np.repeat(starts, lengths) + np.arange(total, dtype=np.int64) - row_starts
    return indices


def _lists(lengths: np.ndarray, values: pa.Array) -> pa.ListArray:
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), values)


def take_rows(column: pa.Array | pa.ChunkedArray, rows: np.ndarray) -> pa.Array:
    """`column` at `rows` (a flat Array, whatever the chunks)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    return column.take(pa.array(rows, pa.int64()))


def head(column: pa.Array | pa.ChunkedArray, cut: np.ndarray) -> pa.ListArray:
    """Each row's first `cut[row]` items (cut at most the row's length)."""
    offsets, values = _flat(column)
    lengths = np.minimum(cut.astype(np.int64), np.diff(offsets))
    return _lists(lengths, values.take(pa.array(_ranges(offsets[:-1], lengths))))


def tail(column: pa.Array | pa.ChunkedArray, cut: np.ndarray) -> pa.ListArray:
    """Each row's items from `cut[row]` on (none when cut is past its end)."""
    offsets, values = _flat(column)
    sizes = np.diff(offsets)
    start = np.minimum(cut.astype(np.int64), sizes)
    lengths = sizes - start
    return _lists(lengths, values.take(pa.array(_ranges(offsets[:-1] + start, lengths))))


def head_extended(
    column: pa.Array | pa.ChunkedArray, cut: np.ndarray, extra: list[int]
) -> pa.ListArray:
    """Each row's first `cut[row]` items, where a row shorter than that is continued with
    the first items of `extra` up to `cut[row]` (a prompt-only thread and the generation
    prompt after it)."""
    offsets, values = _flat(column)
    sizes = np.diff(offsets)
    lengths = cut.astype(np.int64)
    position = _ranges(np.zeros(len(lengths), np.int64), lengths)  # j within each row
    row_size = np.repeat(sizes, lengths)
    inside = position < row_size
    pool = pa.concat_arrays([values, pa.array(extra, values.type)])
    source = np.where(
        inside,
        np.repeat(offsets[:-1], lengths) + position,
        len(values) + position - row_size,
    )
    return _lists(lengths, pool.take(pa.array(source)))


def joined(first: pa.Array | pa.ChunkedArray, second: pa.Array | pa.ChunkedArray) -> pa.ListArray:
    """Each row's items of `first`, then its items of `second` (two list columns of one
    type and as many rows)."""
    first_offsets, first_values = _flat(first)
    second_offsets, second_values = _flat(second)
    first_lengths, second_lengths = np.diff(first_offsets), np.diff(second_offsets)
    starts = np.stack([first_offsets[:-1], second_offsets[:-1] + len(first_values)], axis=1)
    pieces = np.stack([first_lengths, second_lengths], axis=1)
    pool = pa.concat_arrays([first_values, second_values])
    taken = pool.take(pa.array(_ranges(starts.ravel(), pieces.ravel())))
    return _lists(first_lengths + second_lengths, taken)
