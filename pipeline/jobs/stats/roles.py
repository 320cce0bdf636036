"""Tokens per role: which message each token renders, read off the `<|role|>` ids that open
every message (DESIGN §4; a `<|role|>` in content is text tokens, never that id), so no
tokenizer is loaded. Computed with list expressions per row: one shard's tokens are in
memory at once, and what is kept is a row per role."""

from __future__ import annotations

from typing import Any

import polars as pl

BEFORE_FIRST_MESSAGE = "bos"
"""The tokens before the first message's `<|role|>` (the BOS a config asked for)."""


def shard_role_tokens(path: str, role_id: int) -> pl.DataFrame:
    """One shard's messages, tokens and trained tokens per role. A message's tokens run
    from its `<|role|>` to the next message's; the last one's to the end of the row. A
    trained `<|role|>` is the halt of the assistant message before it (DESIGN §4), so it
    counts with that message: the halt after a tool call is the assistant's, not the
    tool result's."""
    ids, labels = pl.col("input_ids"), pl.col("labels")
    roles = pl.col("messages").list.eval(pl.element().struct.field("role"))
    count = roles.list.len()
    opens = ids.list.eval(pl.element().eq(role_id).arg_true()).cast(pl.List(pl.Int64))
    trained = labels.list.eval((pl.element() != -100).cast(pl.Int64).cum_sum())
    per_message = pl.scan_parquet(path).select(
        role=roles,
        start=opens.list.head(count),
        end=pl.concat_list(opens.list.slice(1, count - 1), ids.list.len().cast(pl.Int64)),
        trained_before=pl.concat_list(pl.lit(0, pl.Int64), trained),
    )
    before = pl.col("trained_before")
    opening_trained = before.list.gather(pl.col("start") + 1) - before.list.gather(pl.col("start"))
    halt = pl.concat_list(pl.lit(0, pl.Int64), opening_trained.list.slice(1))
    next_halt = pl.concat_list(opening_trained.list.slice(1), pl.lit(0, pl.Int64))
    shift = next_halt - halt
    first = pl.col("start").list.first().fill_null(0)
    spans = per_message.select(
        # the tokens before the first message (a BOS) lead each row's list, under `bos`,
        # with no message to count
        role=pl.concat_list(pl.lit(BEFORE_FIRST_MESSAGE), "role"),
        message=pl.concat_list(pl.lit(0, pl.Int64), pl.col("role").list.eval(pl.lit(1, pl.Int64))),
        tokens=pl.concat_list(first, pl.col("end") - pl.col("start") + shift),
        trained=pl.concat_list(
            before.list.get(first),
            before.list.gather(pl.col("end")) - before.list.gather(pl.col("start")) + shift,
        ),
    )
    return (
        spans.explode("role", "message", "tokens", "trained")
        .group_by("role")
        .agg(
            pl.col("message").sum().alias("messages"),
            pl.col("tokens").sum(),
            pl.col("trained").sum(),
        )
        .filter((pl.col("role") != BEFORE_FIRST_MESSAGE) | (pl.col("tokens") > 0))
        .collect(engine="streaming")
    )


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
