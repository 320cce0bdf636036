"""Tokens per role: which message each token renders, read off the `<|role|>` ids that open
every message (DESIGN §4; a `<|role|>` in content is text tokens, never that id), so no
tokenizer is loaded. Computed with numpy over a shard's flat tokens, read from its file (one
shard's tokens in memory at once) or added up a batch at a time as its writer writes them;
what is kept is a row per role."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

BEFORE_FIRST_MESSAGE = "bos"
"""The tokens before the first message's `<|role|>` (the BOS a config asked for)."""


COLUMNS = ["messages", "input_ids", "labels"]
"""What the role counts read of a shard."""
BATCH_ROWS = 1024
"""Rows counted at a time: numpy's arrays over their tokens stay small."""
_SCHEMA = {"role": pl.String, "messages": pl.Int64, "tokens": pl.Int64, "trained": pl.Int64}


def shard_role_tokens(source: str | pl.LazyFrame | pa.Table, role_id: int) -> pl.DataFrame:
    """One shard's messages, tokens and trained tokens per role (`source`: its file, a scan
    of some of its rows, or rows in memory). A message's tokens run from its `<|role|>` to the next message's; the
    last one's to the end of the row. A trained `<|role|>` is the halt of the assistant
    message before it (DESIGN §4), so it counts with that message: the halt after a tool
    call is the assistant's, not the tool result's."""
    counted = RoleTokens(role_id)
    if not isinstance(source, pa.Table):  # only the messages' roles read of their structs
        roles = pl.col("messages").list.eval(pl.element().struct.field("role"))
        scan = source if isinstance(source, pl.LazyFrame) else pl.scan_parquet(source)
        read = scan.select(roles, "input_ids", "labels")
        counted.add(read.collect(engine="streaming").to_arrow())
    else:
        counted.add(source)
    return counted.frame()


class RoleTokens:
    """Tokens per role added up a batch of rows at a time (`shard_role_tokens`), so a
    writer that streams its shard never holds the shard's rows to count them."""

    def __init__(self, role_id: int):
        self.role_id = role_id
        self.totals: dict[str, list[int]] = {}

    def add(self, rows: pa.Table) -> None:
        """Count `rows` (their `messages`, `input_ids` and `labels`)."""
        batches: Iterable[pa.RecordBatch] = rows.select(COLUMNS).to_batches(BATCH_ROWS)
        for batch in batches:
            for role, counted in _batch_role_tokens(batch, self.role_id).items():
                found = self.totals.setdefault(role, [0, 0, 0])
                for index, value in enumerate(counted):
                    found[index] += value

    def frame(self) -> pl.DataFrame:
        """The counts so far: a row per role (the tokens before the first message only
        when there are some)."""
        kept = {
            role: counted
            for role, counted in sorted(self.totals.items())
            if role != BEFORE_FIRST_MESSAGE or counted[1] > 0
        }
        columns = list(zip(*kept.values(), strict=True)) or [(), (), ()]
        return pl.DataFrame(
            {
                "role": list(kept),
                "messages": columns[0],
                "tokens": columns[1],
                "trained": columns[2],
            },
            schema=_SCHEMA,
        )


def _batch_role_tokens(batch: pa.RecordBatch, role_id: int) -> dict[str, list[int]]:
    """Per role, the messages, tokens and trained tokens of a batch of rows (the tokens
    before each row's first message under BEFORE_FIRST_MESSAGE, with no message)."""
    ids, labels = batch.column("input_ids"), batch.column("labels")
    lengths = pc.list_value_length(ids).fill_null(0).to_numpy().astype(np.int64)
    values = pc.list_flatten(ids).to_numpy(zero_copy_only=False)
    trained = pc.list_flatten(labels).to_numpy(zero_copy_only=False) != -100
    if len(trained) != len(values) or len(values) != int(lengths.sum()):
        raise ValueError("a row's labels are not as long as its input_ids")
    row_start = np.concatenate([[0], np.cumsum(lengths)])
    before = np.zeros(len(trained) + 1, np.int64)  # trained tokens before each place
    np.cumsum(trained, out=before[1:])
    flat = pc.list_flatten(batch.column("messages"))
    roles = pc.struct_field(flat, "role") if pa.types.is_struct(flat.type) else flat
    if roles.null_count:
        raise ValueError("a message has no role")
    counts = pc.list_value_length(batch.column("messages")).fill_null(0).to_numpy()
    counts = counts.astype(np.int64)
    # each message opens at its row's next `<|role|>` (one past the row's messages: text)
    opens = np.flatnonzero(values == role_id)
    row_of = np.searchsorted(row_start, opens, side="right") - 1
    per_row = np.bincount(row_of, minlength=len(lengths))
    if (per_row < counts).any():
        raise ValueError("a row has fewer <|role|> ids than messages")
    first_open = np.concatenate([[0], np.cumsum(per_row)])[:-1]
    rank = np.arange(len(opens)) - first_open[row_of]
    chosen = rank < counts[row_of]
    start, row = opens[chosen], row_of[chosen]
    message_start = np.concatenate([[0], np.cumsum(counts)])
    index = np.arange(len(start))
    first = index == message_start[row]
    last = index == message_start[row + 1] - 1
    end = np.empty_like(start)
    end[:-1] = start[1:]
    end[last] = row_start[row[last] + 1]
    opening = trained[start].astype(np.int64)  # trained: the halt of the message before
    halt = np.where(first, 0, opening)
    next_halt = np.zeros_like(opening)
    next_halt[:-1] = opening[1:]
    next_halt[last] = 0
    shift = next_halt - halt
    tokens = end - start + shift
    trained_tokens = before[end] - before[start] + shift
    leading = np.zeros(len(lengths), np.int64)  # each row's tokens before its first message
    has = counts > 0
    leading[has] = start[message_start[:-1][has]] - row_start[:-1][has]
    lead_trained = before[row_start[:-1] + leading] - before[row_start[:-1]]
    found = {BEFORE_FIRST_MESSAGE: [0, int(leading.sum()), int(lead_trained.sum())]}
    encoded = pc.dictionary_encode(roles)
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    for code, role in enumerate(encoded.dictionary.to_pylist()):
        where = codes == code
        counted = found.setdefault(role, [0, 0, 0])  # a role may be named as BEFORE_FIRST...
        counted[0] += int(where.sum())
        counted[1] += int(tokens[where].sum())
        counted[2] += int(trained_tokens[where].sum())
    return found


def merge_role_tokens(counts: pl.DataFrame | None, more: pl.DataFrame) -> pl.DataFrame:
    """`counts` with a further shard's added."""
    if counts is None:
        return more
    return pl.concat([counts, more]).group_by("role").agg(pl.exclude("role").sum())


def role_figures(counts: pl.DataFrame) -> dict[str, dict[str, Any]]:
    """Per role: messages, tokens, trained tokens and the role's share of all tokens."""
    total = int(counts["tokens"].sum())
    return {
        row["role"]: {
            "messages": row["messages"],
            "tokens": row["tokens"],
            "trained_tokens": row["trained"],
            "token_share": round(row["tokens"] / total, 6) if total else 0.0,
        }
        for row in counts.sort("role").iter_rows(named=True)
    }
