"""The media columns of an objective's rows (DESIGN §7): a row holds, per kind, the media
whose placeholders stand in its ids, in the order of its id columns (`prompt_ids`, then
`chosen_ids` and `rejected_ids`, or `completion_ids`), as TRL's DPO, KTO and GRPO VLM
datasets hold an `images` column per row. The media lists are cut from the SFT rows'
(pipeline/mms/media_columns.py `with_media_columns` made them, one per placeholder a
row kept), never made here: a prompt's media are those of the messages before its
answer (`prompt_messages`)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.mms import MEDIA_COLUMN
from pipeline.mms.media_columns import COLUMN_KINDS, kind_columns
from pipeline.objectives.lists import head, joined, tail, take_rows
from pipeline.tokenize.tables import PROMPT_MESSAGES


def with_row_media(table: pa.Table, columns: dict[str, pa.Array]) -> pa.Table:
    """`table` with the media `columns` after its own (none: `table` as it is)."""
    for name, column in columns.items():
        table = table.append_column(name, column)
    return table


def thread_media(rows: pa.Table) -> dict[str, pa.Array]:
    """Each SFT row's media columns as they are (a row with the thread's whole ids)."""
    return {name: rows[name].combine_chunks() for name in kind_columns(rows.column_names)}


def prompt_media(rows: pa.Table) -> dict[str, pa.Array]:
    """Each SFT row's media of its prompt, per media column."""
    return {
        name: head(rows[name], prompt_counts(rows, name))
        for name in kind_columns(rows.column_names)
    }


def pair_media(rows: pa.Table, chosen: np.ndarray, rejected: np.ndarray) -> dict[str, pa.Array]:
    """Per media column, each pair's media: its chosen row's (the prompt's and the chosen
    answer's), then those of its rejected row's answer."""
    columns: dict[str, pa.Array] = {}
    for name in kind_columns(rows.column_names):
        counts = prompt_counts(rows, name)
        answers = tail(take_rows(rows[name], rejected), counts[rejected])
        columns[name] = joined(take_rows(rows[name], chosen), answers)
    return columns


def prompt_counts(rows: pa.Table, column: str) -> np.ndarray:
    """How many of each SFT row's media of `column` stand in its prompt: those of the
    messages before `prompt_messages`, at most the row's media in `column` (a row keeps
    one per placeholder)."""
    media = rows[MEDIA_COLUMN].combine_chunks()
    flat = pc.list_flatten(media)
    parents = pc.list_parent_indices(media).to_numpy()
    turns = pc.fill_null(rows[PROMPT_MESSAGES], 0).to_numpy().astype(np.int64)
    kinds = pc.equal(pc.struct_field(flat, "kind"), COLUMN_KINDS[column])
    messages = pc.struct_field(flat, "message").to_numpy(zero_copy_only=False)
    inside = kinds.to_numpy(zero_copy_only=False) & (messages < turns[parents])
    counts = np.bincount(parents[inside], minlength=rows.num_rows)
    held = pc.list_value_length(rows[column]).to_numpy().astype(np.int64)
    fewest: np.ndarray = np.minimum(counts, held)
    return fewest
