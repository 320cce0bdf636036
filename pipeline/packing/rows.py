"""Packed rows as Arrow: several token rows concatenated into one, with what attention
needs to keep them apart (`position_ids` restarting at 0 for every thread, `seq_lens`) and
whose they are (`ids`); rows with media columns (`images` ...) give each sequence its
threads' media in order, as LLaMA-Factory packs them, so a processor finds one media per
placeholder of the sequence. Built with Arrow and numpy, without a Python loop over
tokens."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.mms.media_columns import kind_columns

PACKED_SCHEMA = pa.schema(
    [
        ("input_ids", pa.list_(pa.int32())),
        ("labels", pa.list_(pa.int32())),
        ("position_ids", pa.list_(pa.int32())),
        ("seq_lens", pa.list_(pa.int32())),
        ("ids", pa.list_(pa.string())),
        ("num_tokens", pa.int32()),
        ("num_trained", pa.int32()),
    ]
)
"""The columns of a packed shard: one row per packed sequence."""
SEQUENCES_PER_SHARD = 10_000
"""Packed rows per shard (a packed row holds many threads)."""
TOKEN_COLUMNS = ("id", "input_ids", "labels", "num_tokens", "num_trained")
"""What packing reads of a tokenized row (and its media columns, when it has them)."""


def packed_columns(names: Sequence[str]) -> list[str]:
    """The columns packing reads of rows with the column `names`: TOKEN_COLUMNS, then
    the media columns among them."""
    return [*TOKEN_COLUMNS, *kind_columns(names)]


def packed_table(rows: pa.Table, sequences: Sequence[Sequence[int]]) -> pa.Table:
    """One PACKED_SCHEMA row per sequence of `sequences` (indices into `rows`, which has
    TOKEN_COLUMNS), its rows' tokens concatenated in the order given; with the rows'
    media columns after PACKED_SCHEMA's, each sequence's media its rows' in that order."""
    order = pa.array([row for sequence in sequences for row in sequence], type=pa.int64())
    taken = rows.select(packed_columns(rows.column_names)).take(order)
    counts = np.fromiter((len(sequence) for sequence in sequences), np.int64, len(sequences))
    row_offsets = np.concatenate([[0], np.cumsum(counts)])
    lengths = taken["num_tokens"].to_numpy().astype(np.int64)
    token_ends = np.concatenate([[0], np.cumsum(lengths)])
    sequence_offsets = pa.array(token_ends[row_offsets].astype(np.int32))
    starts = np.repeat(token_ends[:-1], lengths)
    positions = (np.arange(token_ends[-1], dtype=np.int64) - starts).astype(np.int32)
    trained = taken["num_trained"].to_numpy().astype(np.int64)
    trained_ends = np.concatenate([[0], np.cumsum(trained)])
    per_row = pa.array(row_offsets.astype(np.int32))
    table = pa.Table.from_arrays(
        [
            pa.ListArray.from_arrays(sequence_offsets, _flat(taken["input_ids"])),
            pa.ListArray.from_arrays(sequence_offsets, _flat(taken["labels"])),
            pa.ListArray.from_arrays(sequence_offsets, pa.array(positions)),
            pa.ListArray.from_arrays(per_row, pa.array(lengths.astype(np.int32))),
            pa.ListArray.from_arrays(per_row, taken["id"].combine_chunks()),
            pa.array(np.diff(token_ends[row_offsets]).astype(np.int32)),
            pa.array(np.diff(trained_ends[row_offsets]).astype(np.int32)),
        ],
        schema=PACKED_SCHEMA,
    )
    for name in kind_columns(taken.column_names):
        media = taken[name].combine_chunks()
        held = pc.list_value_length(media).to_numpy().astype(np.int64)
        media_ends = np.concatenate([[0], np.cumsum(held)])[row_offsets].astype(np.int32)
        joined = pa.ListArray.from_arrays(pa.array(media_ends), pc.list_flatten(media))
        table = table.append_column(pa.field(name, media.type), joined)
    return table


def _flat(column: pa.ChunkedArray) -> pa.Array:
    return pc.list_flatten(column).combine_chunks().cast(pa.int32())
