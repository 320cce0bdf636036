"""The tokenize stage: threads in, Arrow batches out with the thread, its `input_ids`,
`labels` (DESIGN §4), token counts and `meta`; overlong threads are handled by policy and
every thread is counted as written or dropped with a reason.

Threads with no trained token (no assistant message) are written, with `num_trained` 0:
the labels policy, not this stage, decides what is trained, and a trainer filters on
`num_trained` in one expression. Dropping them here would hide part of the input behind
a count, and `mms lint` already reports threads without an assistant message (MMS1xx)."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.mms import MESSAGE_ARROW_TYPE, Thread, threads_to_arrow
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
_TOKEN_COLUMNS = ("input_ids", "labels", "num_tokens", "num_trained")


@dataclass(slots=True)
class TokenizeStats:
    """Counts kept by the stage. Invariant: threads_in = threads_written + dropped."""

    threads_in: int = 0
    threads_written: int = 0
    truncated: int = 0
    untrained: int = 0
    """Threads written with no trained token (num_trained 0)."""
    zero_weight_messages: int = 0
    """Assistant messages written that their source weighted 0: rendered, never trained."""
    tokens: int = 0
    trained_tokens: int = 0
    longest: int = 0
    """The most tokens of a written thread."""
    dropped: Counter[str] = field(default_factory=Counter)
    """Dropped threads per code (pipeline.tokenize.overlong.DROP_CODES)."""

    @property
    def dropped_total(self) -> int:
        return sum(self.dropped.values())

    @property
    def balanced(self) -> bool:
        return self.threads_in == self.threads_written + self.dropped_total


def tokenize_threads(
    threads: Iterable[Thread],
    renderer: Renderer,
    *,
    max_tokens: int | None = None,
    overlong: OverlongPolicy = "drop",
    batch_size: int = BATCH_SIZE,
    stats: TokenizeStats | None = None,
    on_drop: Callable[[Drop], None] | None = None,
) -> Iterator[pa.Table]:
    """Yield one TOKENIZED_SCHEMA table per `batch_size` threads, in input order.

    With `max_tokens`, longer threads are dropped, truncated at a message boundary or
    raise OverlongThreadError (`overlong`); each drop goes to `on_drop` and is counted in
    `stats.dropped`. A batch whose threads were all dropped yields nothing."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, not {batch_size}")
    stats = stats if stats is not None else TokenizeStats()
    iterator = iter(threads)
    while batch := list(itertools.islice(iterator, batch_size)):
        stats.threads_in += len(batch)
        encoded = renderer.encode_batch(batch)
        if max_tokens is None:
            table = _table(batch, _token_columns(encoded))
        else:
            fit = fit_batch(batch, encoded, renderer, max_tokens=max_tokens, policy=overlong)
            table = _fitted_table(batch, encoded, fit)
            _count_fit(fit, stats, on_drop)
        _count_written(table, stats)
        if table.num_rows:
            yield table


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


def _count_fit(fit: Fit, stats: TokenizeStats, on_drop: Callable[[Drop], None] | None) -> None:
    stats.truncated += len(fit.truncated)
    for drop in fit.drops:
        stats.dropped[drop.code] += 1
        if on_drop is not None:
            on_drop(drop)


def _count_written(table: pa.Table, stats: TokenizeStats) -> None:
    stats.threads_written += table.num_rows
    if not table.num_rows:
        return
    num_tokens, num_trained = table["num_tokens"], table["num_trained"]
    stats.tokens += pc.sum(num_tokens).as_py()
    stats.longest = max(stats.longest, pc.max(num_tokens).as_py())
    stats.trained_tokens += pc.sum(num_trained).as_py()
    stats.untrained += pc.sum(pc.equal(num_trained, 0)).as_py()
    stats.zero_weight_messages += zero_weight_messages(table["messages"])


def zero_weight_messages(messages: pa.ChunkedArray | pa.Array) -> int:
    """How many messages of a `messages` column have weight 0 (their source said: do not
    train them), counted in Arrow."""
    weights = pc.struct_field(pc.list_flatten(messages), "weight")
    return pc.sum(pc.equal(weights, 0)).as_py() or 0
