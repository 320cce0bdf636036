"""`mms stats`: the figures a curator decides from, computed by polars over streaming
scans of an output's Parquet shards, one shard at a time, each reduced to small count
tables that are merged as they come (memory bounded by distinct lengths and groups, not
by threads): per split, and per value of a meta field (`--by source`)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import polars as pl

from pipeline.jobs.stats.capabilities import (
    capability_figures,
    merge_capabilities,
    shard_capabilities,
)
from pipeline.jobs.stats.files import StatsError, role_token_id, shard_files
from pipeline.jobs.stats.media import (
    media_figures,
    merge_media,
    shard_kind_media,
    shard_media,
)
from pipeline.jobs.stats.objectives import (
    merge_objective_counts,
    objective_figures,
    shard_objective_counts,
)
from pipeline.jobs.stats.roles import merge_role_tokens, role_figures, shard_role_tokens
from pipeline.jobs.stats.run import run_figures
from pipeline.jobs.stats.threads import (
    Shape,
    merge_counts,
    shard_counts,
    thread_figures,
    ungrouped,
)
from pipeline.objectives import objective_of

_FIELD = re.compile(r"^[A-Za-z_][\w-]*$")
T = TypeVar("T")


def compute_stats(
    files: dict[str, list[str]], by: str | None = None, *, role_id: int | None = None
) -> dict[str, Any]:
    """The figures of every split (and, with `by`, of every value of that meta field).
    With `role_id` (the `<|role|>` id) tokens are also counted per role."""
    if by is not None and not _FIELD.match(by):
        raise StatsError(f"--by takes a meta field name (source, source_format ...), not {by!r}")
    return {"splits": {split: _split(paths, by, role_id) for split, paths in files.items()}}


@dataclass(frozen=True)
class ShardTables:
    """One shard's count tables (small, mergeable: what a worker that wrote the shard hands
    back), and the shape of its split's shards."""

    shape: Shape
    objective: str | None
    counts: pl.DataFrame
    roles: pl.DataFrame | None
    capabilities: pl.DataFrame | None
    objectives: dict[str, Any] | None
    media: pl.DataFrame | None = None
    """Media per (kind, role), when the shard has a `media` column holding some; else per
    kind, from its kind columns (`images` ...) when they hold some."""
    media_from_kind_columns: bool = False
    """`media` was counted from the kind columns (no `media` column: roles not known)."""


STATS_ROWS = 5_000
"""A shard's rows counted at a time (a scan of that many): their count tables are merged
as they come, so counting a shard takes memory for this many rows, not for the shard."""


def shard_tables(
    path: str,
    by: str | None = None,
    role_id: int | None = None,
    roles: pl.DataFrame | None = None,
) -> ShardTables:
    """The count tables of one shard (tokens per role too with `role_id`), counted
    STATS_ROWS rows at a time; `roles`: its tokens per role, when its writer counted them
    as it wrote (they are not read again)."""
    scan = pl.scan_parquet(path)
    columns = set(scan.collect_schema().names())
    shape = Shape.of(columns)
    if by is not None and "meta" not in columns:
        raise StatsError(f"--by needs the `meta` column, which these shards lack: {path}")
    objective: str | None = objective_of(columns)
    objective = None if objective == "sft" else objective
    with_roles = role_id is not None and shape.messages and shape.tokenized and not shape.packed
    from_kind_columns = "media" not in columns
    rows: int = scan.select(pl.len()).collect().item()
    slices = [scan.slice(start, STATS_ROWS) for start in range(0, rows, STATS_ROWS)]
    counted: ShardTables | None = None
    for frame in slices if len(slices) > 1 else [scan]:
        piece = ShardTables(
            shape,
            objective,
            shard_counts(frame, shape, by),
            shard_role_tokens(frame, role_id)
            if with_roles and role_id is not None and roles is None
            else None,
            shard_capabilities(frame) if shape.messages else None,
            shard_objective_counts(frame, objective) if objective is not None else None,
            shard_kind_media(frame) if from_kind_columns else shard_media(frame),
            from_kind_columns,
        )
        counted = piece if counted is None else merged_tables(counted, piece)
    assert counted is not None
    if with_roles and roles is not None:
        counted = replace(counted, roles=roles)
    return counted


def merged_tables(tables: ShardTables, more: ShardTables) -> ShardTables:
    """The count tables of two sets of rows of one split, as one."""

    def both(merge: Callable[[T, T], T], first: T | None, second: T | None) -> T | None:
        if first is None:
            return second
        return first if second is None else merge(first, second)

    return ShardTables(
        tables.shape,
        tables.objective,
        merge_counts(tables.counts, more.counts),
        both(merge_role_tokens, tables.roles, more.roles),
        both(merge_capabilities, tables.capabilities, more.capabilities),
        both(merge_objective_counts, tables.objectives, more.objectives),
        both(merge_media, tables.media, more.media),
        tables.media_from_kind_columns,
    )


def _split(paths: Sequence[str], by: str | None, role_id: int | None) -> dict[str, Any]:
    return split_figures([shard_tables(path, by, role_id) for path in paths], by)


def split_figures(tables: Sequence[ShardTables], by: str | None = None) -> dict[str, Any]:
    """The figures of a split from its shards' count tables (at least one)."""
    shape, objective = tables[0].shape, tables[0].objective
    counts = roles = capabilities = objectives = media = None
    from_kind_columns = False
    for each in tables:
        counts = merge_counts(counts, each.counts)
        if each.roles is not None:
            roles = merge_role_tokens(roles, each.roles)
        if each.capabilities is not None:
            capabilities = merge_capabilities(capabilities, each.capabilities)
        if each.objectives is not None:
            objectives = merge_objective_counts(objectives, each.objectives)
        if each.media is not None:
            media = merge_media(media, each.media)
            from_kind_columns = each.media_from_kind_columns
    assert counts is not None
    whole = ungrouped(counts) if by is not None else counts
    figures = next(iter(thread_figures(whole, shape).values()))
    if roles is not None:
        figures["roles"] = role_figures(roles)
    if capabilities is not None:
        figures["capabilities"] = capability_figures(capabilities)
    found_media = (
        media_figures(media, from_kind_columns=from_kind_columns) if media is not None else None
    )
    if found_media is not None:
        figures["media"] = found_media
    if objective is not None:
        assert objectives is not None
        figures["objective"] = objective_figures(objective, objectives)
    if by is not None:
        groups = thread_figures(counts, shape)
        figures["by"] = {
            "field": by,
            "groups": [{"group": name, **found} for name, found in groups.items()],
        }
    return figures


def stats_json(stats: dict[str, Any]) -> str:
    """The figures as JSON text (sorted keys: the same figures give the same bytes)."""
    return json.dumps(stats, indent=2, sort_keys=True) + "\n"


def output_stats(targets: Sequence[str | Path], by: str | None = None) -> dict[str, Any]:
    """`compute_stats` of output folders or Parquet files, with the run's accounting when
    exactly one run's folder is given."""
    stats = compute_stats(shard_files(targets), by, role_id=role_token_id(targets))
    runs = [figures for target in targets if (figures := run_figures(target)) is not None]
    if len(runs) == 1:
        stats["run"] = runs[0]
    return stats
