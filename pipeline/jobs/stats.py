"""`mms stats`: the figures a curator decides from, computed by polars over lazy scans of
an output's Parquet shards (streaming, so memory stays bounded on any size): per split,
and per value of a meta field (`--by source`): threads, messages, user turns and tool
calls per thread, tokens and trained tokens, and thread lengths in tokens (percentiles
and a histogram)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.output.shards import SHARD_FILE

PERCENTILES = (0.5, 0.9, 0.99)
"""Thread-length percentiles reported (the `lower` value: one a thread really has)."""
ALL = "all"
"""The split name of Parquet files given one by one."""
_FIELD = re.compile(r"^[A-Za-z_][\w-]*$")


class StatsError(ValueError):
    """What cannot be summed up (no Parquet files, an unknown meta field): the message says."""


def shard_files(targets: Sequence[str | Path]) -> dict[str, list[str]]:
    """The Parquet files to read, per split: an output folder's `data/` shards by split
    name, Parquet files given one by one under `all`."""
    found: dict[str, list[str]] = {}
    for target in map(Path, targets):
        if target.is_dir():
            data = target / "data" if (target / "data").is_dir() else target
            for path in sorted(data.glob("*.parquet")):
                match = SHARD_FILE.match(path.name)
                found.setdefault(match.group("split") if match else ALL, []).append(str(path))
        elif target.suffix == ".parquet" and target.is_file():
            found.setdefault(ALL, []).append(str(target))
        else:
            raise StatsError(f"{target}: not an output folder nor a Parquet file")
    if not found:
        raise StatsError("no Parquet shards found in " + ", ".join(map(str, targets)))
    return found


def run_figures(folder: str | Path) -> dict[str, Any] | None:
    """What a run's manifest tells beside the shards: records read and quarantined, the
    duplicate rates, drops per reason, threads truncated, packing fill, and the per-input
    accounting; None for a folder without a manifest."""
    path = Path(folder) / "manifest.json"
    if not path.is_file():
        return None
    manifest = json.loads(path.read_text(encoding="utf-8"))
    counts = manifest.get("counts", {})
    threads = counts.get("threads", 0)
    dropped = counts.get("threads_dropped", {})
    return {
        "records_read": counts.get("records_read", 0),
        "records_quarantined": sum(counts.get("records_quarantined", {}).values()),
        "threads": threads,
        "duplicate_rate": {
            kind: round(dropped.get(reason, 0) / threads, 6) if threads else 0.0
            for kind, reason in (("exact", "duplicate"), ("near", "near_duplicate"))
        },
        "dropped": dropped,
        "truncated": counts.get("threads_truncated", 0),
        "weighted_copies": counts.get("weighted_copies", 0),
        "packing": manifest.get("packing"),
        "inputs": counts.get("inputs", []),
    }


def compute_stats(files: dict[str, list[str]], by: str | None = None) -> dict[str, Any]:
    """The figures of every split (and, with `by`, of every value of that meta field)."""
    if by is not None and not _FIELD.match(by):
        raise StatsError(f"--by takes a meta field name (source, source_format ...), not {by!r}")
    splits = {}
    for split, paths in files.items():
        columns = set(pl.scan_parquet(paths[0]).collect_schema().names())
        shape = _Shape(
            tokenized={"num_tokens", "num_trained"} <= columns,
            messages="messages" in columns,
            packed="seq_lens" in columns,
        )
        if by is not None and "meta" not in columns:
            raise StatsError(f"--by needs the `meta` column, which the {split} shards lack")
        per_thread = _per_thread(paths, shape, by)
        figures = _figures(per_thread, shape, None)[0]
        if by is not None:
            figures["by"] = {"field": by, "groups": _figures(per_thread, shape, by)}
        splits[split] = figures
    return {"splits": splits}


@dataclass(frozen=True, slots=True)
class _Shape:
    """What the shards hold: token figures, the messages, packed rows (many threads each)."""

    tokenized: bool
    messages: bool
    packed: bool


def _per_thread(paths: list[str], shape: _Shape, by: str | None) -> pl.LazyFrame:
    """A few integers per row (messages, user turns, tool calls, tokens, the threads packed
    in it; the `by` field's value), read one file at a time: the text of one shard is in
    memory at once, never the dataset's."""
    columns = []
    if by:
        columns.append(pl.col("meta").str.json_path_match(f"$.{by}").fill_null("-").alias("group"))
    if shape.messages:
        messages = pl.col("messages")
        roles = messages.list.eval(pl.element().struct.field("role"))
        formats = messages.list.eval(pl.element().struct.field("format"))
        columns += [
            messages.list.len().cast(pl.Int64).alias("messages"),
            roles.list.eval((pl.element() == "user").cast(pl.Int64)).list.sum().alias("turns"),
            formats.list.eval(pl.element().str.contains(":").fill_null(False).cast(pl.Int64))
            .list.sum()
            .alias("tool_calls"),
        ]
    if shape.packed:
        columns.append(pl.col("seq_lens").list.len().cast(pl.Int64).alias("threads_in_row"))
    if shape.tokenized:
        columns += [pl.col("num_tokens").cast(pl.Int64), pl.col("num_trained").cast(pl.Int64)]
    frames = [pl.scan_parquet(path).select(columns).collect(engine="streaming") for path in paths]
    return pl.concat(frames, rechunk=True).lazy()


def _figures(per_thread: pl.LazyFrame, shape: _Shape, by: str | None) -> list[dict[str, Any]]:
    """One row of figures, or one per value of the meta field `by`. Packed shards give
    their rows (`rows`; the lengths are of rows) and the threads packed in them."""
    threads = pl.col("threads_in_row").sum() if shape.packed else pl.len()
    aggregates = [threads.alias("threads")]
    if shape.packed:
        aggregates.append(pl.len().alias("rows"))
    if shape.messages:
        aggregates += [
            pl.col("messages").sum().alias("messages"),
            pl.col("turns").mean().alias("turns_mean"),
            pl.col("turns").max().alias("turns_max"),
            pl.col("tool_calls").sum().alias("tool_calls"),
            (pl.col("tool_calls") > 0).sum().alias("threads_with_tool_calls"),
        ]
    tokenized = shape.tokenized
    if tokenized:
        tokens = pl.col("num_tokens")
        aggregates += [
            tokens.sum().alias("tokens"),
            pl.col("num_trained").sum().alias("trained_tokens"),
            tokens.max().alias("length_max"),
            *(
                tokens.quantile(q, interpolation="lower").cast(pl.Int64).alias(f"length_p{_pct(q)}")
                for q in PERCENTILES
            ),
        ]
    grouped = per_thread.group_by("group").agg(aggregates).sort("group") if by else None
    table = (grouped if grouped is not None else per_thread.select(aggregates)).collect(
        engine="streaming"
    )
    rows = table.to_dicts()
    if tokenized:
        histograms = _histograms(per_thread, by)
        for row in rows:
            row["length_histogram"] = histograms.get(row.get("group"), {})
            row["trained_fraction"] = (
                round(row["trained_tokens"] / row["tokens"], 6) if row["tokens"] else 0.0
            )
    for row in rows:
        if "turns_mean" in row:
            row["turns_mean"] = round(row["turns_mean"] or 0.0, 3)
    return rows


def _histograms(per_thread: pl.LazyFrame, by: str | None) -> dict[Any, dict[str, int]]:
    """Threads per power-of-two length bucket (`512` holds 512..1023 tokens), per group."""
    bucket = (
        pl.when(pl.col("num_tokens") > 0)
        .then(pl.lit(2, pl.Int64).pow(pl.col("num_tokens").log(2).floor().cast(pl.Int64)))
        .otherwise(0)
        .alias("bucket")
    )
    keys = ["group", "bucket"] if by else ["bucket"]
    counted = (
        per_thread.with_columns(bucket)
        .group_by(keys)
        .agg(pl.len().alias("threads"))
        .sort(keys)
        .collect(engine="streaming")
    )
    found: dict[Any, dict[str, int]] = {}
    for row in counted.to_dicts():
        found.setdefault(row.get("group"), {})[str(row["bucket"])] = row["threads"]
    return found


def _pct(q: float) -> str:
    return f"{q * 100:g}"


def stats_json(stats: dict[str, Any]) -> str:
    """The figures as JSON text (sorted keys: the same figures give the same bytes)."""
    return json.dumps(stats, indent=2, sort_keys=True) + "\n"
