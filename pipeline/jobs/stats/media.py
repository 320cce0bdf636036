"""Media in `mms stats` (DESIGN §3): per kind, the media, the threads holding one, the
media per role, and their sizes where known, from the shards' `media` column (DESIGN §3:
`list<struct<message, kind, path, url, data, mime>>`). Kept as a small count table per
shard, keyed by (kind, role) with null standing for "all", merged by summing.

A size is known for inline data (its decoded bytes, from the length of its base64) and
for a media whose struct records one in a `size` field (bytes; a later step that reads
the files may write it); a path or URL without it counts as media of unknown size, so
`sized` says how many media `bytes` covers. Shards without the column, or whose media
column holds none, give no table: text-only figures stay as they were.

Shards without a `media` column but with the kind columns (`images`, `audios`, `videos`:
an objective's rows and packed sequences, DESIGN §7) are counted from those instead: per
kind, the media, the rows holding one and the sizes of embedded bytes. Their cells do not
say which message held a media, so their figures say the roles are not known (`roles`
null) and count rows (a pair, a completion, a prompt or a packed sequence), not threads
(`counted_from`, `rows`)."""

from __future__ import annotations

from typing import Any

import polars as pl

from pipeline.mms.media_columns import MEDIA_SHARD_COLUMNS

MEDIA_COLUMN = "media"
SIZE_FIELD = "size"
"""A media struct field that records its size in bytes, when a step knows it."""
KEYS = ("kind", "role")
SUMS = ("media", "sized", "bytes", "threads")
FROM_KIND_COLUMNS = "kind_columns"
"""`counted_from` of figures counted from the kind columns (no `media` column)."""


def shard_media(source: str | pl.LazyFrame) -> pl.DataFrame | None:
    """One shard's media counts: rows (kind, role) with `media`, `sized`, `bytes` and
    `threads` (threads holding such a media); role null sums a kind's roles, kind and
    role null every media. None when the shard holds no media column or no media."""
    frame = source if isinstance(source, pl.LazyFrame) else pl.scan_parquet(source)
    schema = frame.collect_schema()
    column = schema.get(MEDIA_COLUMN)
    if not isinstance(column, pl.List) or not isinstance(column.inner, pl.Struct):
        return None
    fields = {f.name for f in column.inner.fields}
    if not {"kind", "message"} <= fields:
        return None
    media = pl.col(MEDIA_COLUMN)
    item = pl.col("item")
    selected = [pl.int_range(pl.len(), dtype=pl.Int64).alias("row"), media.alias("item")]
    if "messages" in schema.names():
        selected.append(
            pl.col("messages").list.eval(pl.element().struct.field("role")).alias("roles")
        )
    rows = frame.select(selected).explode("item").drop_nulls("item")
    role = (
        pl.col("roles").list.get(item.struct.field("message").cast(pl.Int64), null_on_oob=True)
        if "messages" in schema.names()
        else pl.lit(None, pl.String)
    )
    size = _size(item, fields)
    found = rows.select(
        "row",
        item.struct.field("kind").cast(pl.String).alias("kind"),
        role.fill_null("-").alias("role"),
        size.alias("size"),
    ).collect(engine="streaming")
    if found.is_empty():
        return None
    return pl.concat(
        [
            _counted(found, ["kind", "role"]),
            _counted(found, ["kind"]).with_columns(pl.lit(None, pl.String).alias("role")),
            _counted(found, []).with_columns(
                pl.lit(None, pl.String).alias("kind"), pl.lit(None, pl.String).alias("role")
            ),
        ],
        how="diagonal",
    ).select(*KEYS, *SUMS)


def shard_kind_media(source: str | pl.LazyFrame) -> pl.DataFrame | None:
    """One shard's media counted from its kind columns (`images` ...), for shards without
    a `media` column: rows (kind, role null) and (null, null) as `shard_media` gives, whose
    `threads` counts the rows holding one and whose sizes are the embedded bytes' lengths.
    None when the shard has no kind column or they hold no media."""
    frame = source if isinstance(source, pl.LazyFrame) else pl.scan_parquet(source)
    schema = frame.collect_schema()
    kinds = {
        kind: column
        for kind, column in MEDIA_SHARD_COLUMNS.items()
        if isinstance(schema.get(column), pl.List)
    }
    if not kinds:
        return None
    held = {
        kind: pl.col(column).list.len().fill_null(0).cast(pl.Int64)
        for kind, column in kinds.items()
    }
    selected = [pl.sum_horizontal(*held.values()).gt(0).sum().alias("rows")]
    for kind, column in kinds.items():
        data = pl.col(column).list.eval(pl.element().struct.field("bytes"))
        embedded = data.list.eval(pl.element().is_not_null().cast(pl.Int64))
        lengths = data.list.eval(pl.element().bin.size().cast(pl.Int64))
        selected += [
            held[kind].sum().alias(f"{kind}.media"),
            held[kind].gt(0).sum().alias(f"{kind}.threads"),
            embedded.list.sum().sum().alias(f"{kind}.sized"),
            lengths.list.sum().sum().alias(f"{kind}.bytes"),
        ]
    found = frame.select(selected).collect(engine="streaming").row(0, named=True)
    counts = {
        kind: {name: int(found[f"{kind}.{name}"] or 0) for name in SUMS}
        for kind in kinds
        if found[f"{kind}.media"]
    }
    if not counts:
        return None
    total = {name: sum(each[name] for each in counts.values()) for name in SUMS}
    total["threads"] = int(found["rows"])
    table = pl.DataFrame(
        [{"kind": kind, **each} for kind, each in counts.items()] + [{"kind": None, **total}],
        schema={"kind": pl.String, **dict.fromkeys(SUMS, pl.Int64)},
    )
    return table.with_columns(pl.lit(None, pl.String).alias("role")).select(*KEYS, *SUMS)


def _size(item: pl.Expr, fields: set[str]) -> pl.Expr:
    """A media's size in bytes when known: a recorded `size`, else inline data's decoded
    length (base64 digits x 3/4), else null."""
    size = pl.lit(None, pl.Int64)
    if "data" in fields:
        data = item.struct.field("data")
        digits = data.str.replace_all(r"[\s=]", "").str.len_bytes().cast(pl.Int64)
        size = pl.when(data.is_not_null()).then(digits * 3 // 4).otherwise(size)
    if SIZE_FIELD in fields:
        recorded = item.struct.field(SIZE_FIELD).cast(pl.Int64, strict=False)
        size = pl.coalesce(recorded, size)
    return size


def _counted(found: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    aggregates = [
        pl.len().cast(pl.Int64).alias("media"),
        pl.col("size").is_not_null().sum().cast(pl.Int64).alias("sized"),
        pl.col("size").sum().cast(pl.Int64).alias("bytes"),
        pl.col("row").n_unique().cast(pl.Int64).alias("threads"),
    ]
    if not keys:
        return found.select(aggregates)
    return found.group_by(keys).agg(aggregates)


def merge_media(counts: pl.DataFrame | None, more: pl.DataFrame) -> pl.DataFrame:
    """`counts` with a further shard's added (every count sums: a thread is in one shard)."""
    if counts is None:
        return more
    return pl.concat([counts, more]).group_by(list(KEYS)).agg(pl.col(name).sum() for name in SUMS)


def media_figures(
    counts: pl.DataFrame, *, from_kind_columns: bool = False
) -> dict[str, Any] | None:
    """The split's media figures: totals, and per kind its totals and roles (None when
    the counts hold no media). Counted `from_kind_columns` (`shard_kind_media`): marked
    so (`counted_from`), `rows` for `threads`, and per kind `roles` null (not known)."""
    rows = {(r["kind"], r["role"]): r for r in counts.iter_rows(named=True)}
    total = rows.get((None, None))
    if total is None or not total["media"]:
        return None
    kinds: dict[str, Any] = {}
    for kind in sorted({kind for kind, _ in rows if kind is not None}):
        roles = sorted(role for k, role in rows if k == kind and role is not None)
        if from_kind_columns:
            kinds[kind] = {**_figures(rows[(kind, None)], "rows"), "roles": None}
            continue
        kinds[kind] = {
            **_figures(rows[(kind, None)]),
            "roles": {role: _figures(rows[(kind, role)]) for role in roles},
        }
    if from_kind_columns:
        return {"counted_from": FROM_KIND_COLUMNS, **_figures(total, "rows"), "kinds": kinds}
    return {**_figures(total), "kinds": kinds}


def _figures(row: dict[str, Any], holders: str = "threads") -> dict[str, int]:
    """A count row's figures, its `threads` named `holders` (what holds the media)."""
    return {(holders if name == "threads" else name): int(row[name] or 0) for name in SUMS}
