"""Threads to token tables: Arrow batches with the thread, its `input_ids`, `labels`
(DESIGN §4), token counts and `meta`; overlong threads are handled by policy, every one left
out handed on with its reason (the tokenize stage, pipeline/stages/tokenize.py, runs this).

Threads with no trained token (no assistant message) are written, with `num_trained` 0:
the labels policy, not this stage, decides what is trained, and a trainer filters on
`num_trained` in one expression. Dropping them here would hide part of the input behind
a count, and `mms lint` already reports threads without an assistant message (MMS1xx)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa

from pipeline.mms import MESSAGE_ARROW_TYPE, Thread, answer_start, threads_to_arrow
from pipeline.tokenize.overlong import Drop, Fit, OverlongPolicy, fit_batch
from pipeline.tokenize.renderer import EncodedBatch, Renderer

BATCH_SIZE = 1024
"""Threads per renderer call (one tokenizer `encode_batch` each)."""
TOKENIZED_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("messages", pa.list_(MESSAGE_ARROW_TYPE)),
        ("input_ids", pa.list_(pa.int32())),
        ("labels", pa.list_(pa.int32())),
        ("num_tokens", pa.int32()),
        ("num_trained", pa.int32()),
        ("meta", pa.string()),
    ]
)
"""The columns of a tokenized batch, and of the Parquet shards written from them."""
PROMPT_TOKENS, PROMPT_MESSAGES = "prompt_tokens", "prompt_messages"
"""The columns `tokenize_threads(prompt_lengths=True)` adds (pipeline/objectives): the
tokens of each row's prompt, and its messages (those before its final assistant turn)."""
_TOKEN_COLUMNS = ("input_ids", "labels", "num_tokens", "num_trained")


def tokenize_threads(
    threads: Iterable[Thread],
    renderer: Renderer,
    *,
    max_tokens: int | None = None,
    overlong: OverlongPolicy = "drop",
    batch_size: int = BATCH_SIZE,
    on_drop: Callable[[Drop], None] | None = None,
    on_truncate: Callable[[Thread, int], None] | None = None,
    prompt_lengths: bool = False,
) -> Iterator[pa.Table]:
    """Yield one TOKENIZED_SCHEMA table per `batch_size` threads, in input order.

    With `prompt_lengths`, each table has two more columns, PROMPT_TOKENS and
    PROMPT_MESSAGES: where the objectives cut the row (`Renderer.prompt_lengths`).

    With `max_tokens`, longer threads are dropped, truncated at a message boundary or
    raise OverlongThreadError (`overlong`); each drop goes to `on_drop`, each thread as
    read that was truncated to `on_truncate` with the tokens its cut left out. A batch whose
    threads were all dropped yields nothing."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, not {batch_size}")
    iterator = iter(threads)
    while batch := list(itertools.islice(iterator, batch_size)):
        encoded = renderer.encode_batch(batch)
        if max_tokens is None:
            table, kept, kept_encoded = _table(batch, _token_columns(encoded)), batch, [encoded]
            rows = np.arange(len(batch))
        else:
            fit = fit_batch(batch, encoded, renderer, max_tokens=max_tokens, policy=overlong)
            table = _fitted_table(batch, encoded, fit)
            kept, kept_encoded, rows = batch + fit.truncated, [encoded], fit.rows
            if fit.truncated_encoded is not None:
                kept_encoded.append(fit.truncated_encoded)
            if on_drop is not None:
                for drop in fit.drops:
                    on_drop(drop)
            if on_truncate is not None:
                for index, cut in fit.cut_tokens.items():
                    on_truncate(batch[index], cut)
        if prompt_lengths:
            table = _with_prompts(table, renderer, kept, kept_encoded, rows)
        if table.num_rows:
            yield table


def _with_prompts(
    table: pa.Table,
    renderer: Renderer,
    threads: list[Thread],
    encoded: list[EncodedBatch],
    rows: np.ndarray,
) -> pa.Table:
    """`table` with PROMPT_TOKENS and PROMPT_MESSAGES; its row j is `threads[rows[j]]`,
    encoded in `encoded` (the batch, then its truncations)."""
    lengths, start = [], 0
    for part in encoded:
        lengths.append(renderer.prompt_lengths(threads[start : start + len(part)], part))
        start += len(part)
    tokens = np.concatenate(lengths)[rows]
    turns = [answer_start(threads[row].messages) for row in rows.tolist()]
    table = table.append_column(PROMPT_TOKENS, pa.array(tokens, pa.int32()))
    return table.append_column(PROMPT_MESSAGES, pa.array(turns, pa.int32()))


def _token_columns(encoded: EncodedBatch) -> pa.Table:
    return pa.table([getattr(encoded, name) for name in _TOKEN_COLUMNS], names=_TOKEN_COLUMNS)


def _table(threads: list[Thread], tokens: pa.Table) -> pa.Table:
    arrow = threads_to_arrow(threads)
    columns = [
        (tokens if name in _TOKEN_COLUMNS else arrow)[name] for name in TOKENIZED_SCHEMA.names
    ]
    return pa.Table.from_arrays(columns, schema=TOKENIZED_SCHEMA)


def _fitted_table(batch: list[Thread], encoded: EncodedBatch, fit: Fit) -> pa.Table:
    """The batch's rows as `fit` says: kept, replaced by their truncation, or left out."""
    if len(fit.rows) == len(batch) and not fit.truncated:
        return _table(batch, _token_columns(encoded))
    candidates = batch + fit.truncated
    tokens = _token_columns(encoded)
    if fit.truncated_encoded is not None:
        tokens = pa.concat_tables([tokens, _token_columns(fit.truncated_encoded)])
    return _table([candidates[row] for row in fit.rows.tolist()], tokens.take(fit.rows))
