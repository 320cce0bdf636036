"""Thread figures of `mms stats`, kept as a small table per shard and merged as shards are
read: one row per (group, length in tokens) with counts and sums. Exact percentiles and
histograms come out of the merged counts, so memory grows with the distinct lengths (at
most max_tokens of them) and the groups, never with the threads."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import polars as pl

PERCENTILES = (0.5, 0.9, 0.99)
"""Thread-length percentiles reported (numpy's `lower`: a length some thread really has)."""
GROUP = "group"
LENGTH = "num_tokens"
NO_VALUE = "-"
"""The group of rows whose meta lacks the `--by` field."""


@dataclass(frozen=True, slots=True)
class Shape:
    """What the shards hold: token figures, the messages, packed rows (many threads each),
    pairs (two threads each)."""

    tokenized: bool
    messages: bool
    packed: bool
    threads_per_row: int = 1
    """2 for preference pairs (pipeline/objectives), 1 otherwise (packed: `seq_lens`)."""

    @classmethod
    def of(cls, columns: set[str]) -> Shape:
        return cls(
            tokenized={"num_tokens", "num_trained"} <= columns,
            messages="messages" in columns,
            packed="seq_lens" in columns,
            threads_per_row=2 if "chosen_ids" in columns else 1,
        )


def group_column(by: str | None) -> pl.Expr:
    """The group of each row: the meta field `by`'s value, or one group for all."""
    if by is None:
        return pl.lit(NO_VALUE).alias(GROUP)
    return pl.col("meta").str.json_path_match(f"$.{by}").fill_null(NO_VALUE).alias(GROUP)


def shard_counts(source: str | pl.LazyFrame, shape: Shape, by: str | None) -> pl.DataFrame:
    """One shard's counts per (group, length): rows, threads, messages, user turns (sum
    and max), tool calls, threads with one, trained tokens (`source`: its file, or a scan
    of some of its rows). Read as a streaming scan of the columns needed."""
    one = pl.repeat(1, pl.len(), dtype=pl.Int64)  # a literal alone would make one row
    per_row = [group_column(by), one.alias("rows")]
    if shape.packed:
        per_row.append(pl.col("seq_lens").list.len().cast(pl.Int64).alias("threads"))
    else:
        per_row.append((one * shape.threads_per_row).alias("threads"))
    if shape.messages:
        messages = pl.col("messages")
        roles = messages.list.eval(pl.element().struct.field("role"))
        formats = messages.list.eval(pl.element().struct.field("format"))
        calls = formats.list.eval(pl.element().str.contains(":").fill_null(False).cast(pl.Int64))
        per_row += [
            messages.list.len().cast(pl.Int64).alias("messages"),
            roles.list.eval((pl.element() == "user").cast(pl.Int64)).list.sum().alias("turns"),
            calls.list.sum().alias("tool_calls"),
        ]
    keys = [GROUP]
    if shape.tokenized:
        per_row += [pl.col(LENGTH).cast(pl.Int64), pl.col("num_trained").cast(pl.Int64)]
        keys.append(LENGTH)
    scan = source if isinstance(source, pl.LazyFrame) else pl.scan_parquet(source)
    frame = scan.select(per_row)
    sums = [pl.col("rows").sum(), pl.col("threads").sum()]
    if shape.messages:
        sums += [
            pl.col("messages").sum(),
            pl.col("turns").sum(),
            pl.col("turns").max().alias("turns_max"),
            pl.col("tool_calls").sum(),
            (pl.col("tool_calls") > 0).sum().cast(pl.Int64).alias("threads_with_tool_calls"),
        ]
    if shape.tokenized:
        sums.append(pl.col("num_trained").sum())
    return frame.group_by(keys).agg(sums).collect(engine="streaming")


def merge_counts(counts: pl.DataFrame | None, more: pl.DataFrame) -> pl.DataFrame:
    """`counts` with a further shard's added (sums summed, maxima kept)."""
    if counts is None:
        return more
    return _summed(pl.concat([counts, more]))


def ungrouped(counts: pl.DataFrame) -> pl.DataFrame:
    """Counts per group summed into one group: the whole split's, without reading the
    shards again."""
    return _summed(counts.with_columns(pl.lit(NO_VALUE).alias(GROUP)))


def _summed(counts: pl.DataFrame) -> pl.DataFrame:
    """One row per (group, length): sums summed, maxima kept."""
    keys = [name for name in (GROUP, LENGTH) if name in counts.columns]
    aggregates = [
        pl.col(name).max() if name == "turns_max" else pl.col(name).sum()
        for name in counts.columns
        if name not in keys
    ]
    return counts.group_by(keys).agg(aggregates)


def thread_figures(counts: pl.DataFrame, shape: Shape) -> dict[Any, dict[str, Any]]:
    """Per group: the figures `mms stats` reports (threads, packed rows, messages, turns,
    tool calls, tokens, trained tokens and share, length percentiles and histogram)."""
    figures: dict[Any, dict[str, Any]] = {}
    for (group,), rows in counts.sort(GROUP).group_by(GROUP, maintain_order=True):
        figures[group] = _group_figures(rows, shape)
    return figures


def _group_figures(rows: pl.DataFrame, shape: Shape) -> dict[str, Any]:
    totals = rows.select(pl.exclude(GROUP, LENGTH, "turns_max").sum()).row(0, named=True)
    found: dict[str, Any] = {"threads": totals["threads"]}
    if shape.packed:
        found["rows"] = totals["rows"]
    if shape.messages:
        threads = totals["threads"]
        found |= {
            "messages": totals["messages"],
            "turns_mean": round(totals["turns"] / threads, 3) if threads else 0.0,
            "turns_max": rows["turns_max"].max() or 0,
            "tool_calls": totals["tool_calls"],
            "threads_with_tool_calls": totals["threads_with_tool_calls"],
        }
    if shape.tokenized:
        lengths = rows.select(LENGTH, "rows").sort(LENGTH)
        length = lengths[LENGTH].to_list()
        many = lengths["rows"].to_list()
        tokens = sum(n * k for n, k in zip(length, many, strict=True))
        found |= {
            "tokens": tokens,
            "trained_tokens": totals["num_trained"],
            "trained_fraction": round(totals["num_trained"] / tokens, 6) if tokens else 0.0,
            "length_max": length[-1],
            **length_percentiles(length, many),
            "length_histogram": _histogram(length, many),
        }
    return found


def length_percentiles(length: list[int], many: list[int]) -> dict[str, int]:
    """numpy's `percentile(..., method="lower")` of the lengths, read off their counts."""
    total = sum(many)
    found = {}
    for q in PERCENTILES:
        rank = math.floor(q * (total - 1))
        seen = 0
        for value, count in zip(length, many, strict=True):
            seen += count
            if seen > rank:
                found[f"length_p{q * 100:g}"] = value
                break
    return found


def _histogram(length: list[int], many: list[int]) -> dict[str, int]:
    """Rows per power-of-two length bucket (`512` holds 512..1023 tokens; `0` empty rows)."""
    buckets: dict[int, int] = {}
    for value, count in zip(length, many, strict=True):
        bucket = 1 << (value.bit_length() - 1) if value > 0 else 0
        buckets[bucket] = buckets.get(bucket, 0) + count
    return {str(bucket): buckets[bucket] for bucket in sorted(buckets)}
