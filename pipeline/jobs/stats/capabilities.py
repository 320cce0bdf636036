"""Capabilities in `mms stats`: per non-default format, the threads whose platform or
developer messages enable it (DESIGN §5: an inline code span) and the threads whose
assistant uses it. Formats a thread's settings enable are not in the shards."""

from __future__ import annotations

import polars as pl

from pipeline.capabilities import DEFAULT_CAPABILITY, ENABLING_ROLES, enabled_formats

ROW = "row"


def shard_capabilities(source: str | pl.LazyFrame) -> pl.DataFrame:
    """One shard's threads enabling and using each non-default format (columns `format`,
    `enabled`, `used`; `source`: its file, or a scan of some of its rows). Each distinct
    enabling text is parsed once."""
    message = pl.element()
    role, fmt = message.struct.field("role"), message.struct.field("format")
    messages = pl.col("messages")
    rows = (
        (source if isinstance(source, pl.LazyFrame) else pl.scan_parquet(source))
        .select(
            enabling=messages.list.eval(
                message.filter(role.is_in(sorted(ENABLING_ROLES))).struct.field("content")
            ),
            used=messages.list.eval(
                message.filter(
                    (role == "assistant") & fmt.is_not_null() & (fmt != DEFAULT_CAPABILITY)
                ).struct.field("format")
            ).list.unique(),
        )
        .with_row_index(ROW)
        .collect(engine="streaming")
    )
    used = rows.select(ROW, pl.col("used").alias("format")).explode("format").drop_nulls()
    texts = rows.select(ROW, pl.col("enabling").alias("text")).explode("text").drop_nulls()
    if isinstance(texts.schema["text"], pl.List):  # a shard holding media: content parts
        part = pl.element().struct
        texts = texts.with_columns(
            pl.col("text")
            .list.eval(pl.when(part.field("type") == "text").then(part.field("text")))
            .list.drop_nulls()
            .list.join("")
        )
    distinct = texts["text"].unique()
    formats = pl.DataFrame(
        {
            "text": distinct,
            "format": [sorted(enabled_formats(text) - {DEFAULT_CAPABILITY}) for text in distinct],
        },
        schema={"text": pl.String, "format": pl.List(pl.String)},
    )
    enabled = (
        texts.join(formats, on="text").select(ROW, "format").explode("format").drop_nulls().unique()
    )
    return (
        pl.concat(
            [
                enabled.group_by("format").agg(pl.len().cast(pl.Int64).alias("enabled")),
                used.group_by("format").agg(pl.len().cast(pl.Int64).alias("used")),
            ],
            how="diagonal",
        )
        .group_by("format")
        .agg(pl.col("enabled").sum(), pl.col("used").sum())
    )


def merge_capabilities(counts: pl.DataFrame | None, more: pl.DataFrame) -> pl.DataFrame:
    """`counts` with a further shard's added."""
    if counts is None:
        return more
    return pl.concat([counts, more]).group_by("format").agg(pl.exclude("format").sum())


def capability_figures(counts: pl.DataFrame) -> dict[str, dict[str, int]]:
    """Per format: threads enabling it and threads using it, by format name."""
    return {
        row["format"]: {"enabled": row["enabled"], "used": row["used"]}
        for row in counts.sort("format").iter_rows(named=True)
    }
