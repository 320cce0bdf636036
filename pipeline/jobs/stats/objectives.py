"""`mms stats` on the rows of an objective other than sft (pipeline/objectives): pairs,
labelled completions or prompts, and their parts' lengths; for pairs, the share whose
chosen side is the longer (preference sets are known to favour length: a share far from
half says a model may learn length for quality). Kept per shard as counts per length, as
the thread figures are, so memory grows with the distinct lengths."""

from __future__ import annotations

from typing import Any

import polars as pl

from pipeline.jobs.stats.threads import length_percentiles
from pipeline.objectives import OBJECTIVE_PARTS


def shard_objective_counts(source: str | pl.LazyFrame, objective: str) -> dict[str, Any]:
    """One shard's rows per length of each part, and the objective's own counts."""
    frame = source if isinstance(source, pl.LazyFrame) else pl.scan_parquet(source)
    counts: dict[str, Any] = {}
    for part in OBJECTIVE_PARTS[objective]:
        column = f"num_{part}_tokens"
        lengths = frame.group_by(column).agg(pl.len().alias("rows")).collect(engine="streaming")
        counts[part] = dict(zip(lengths[column].to_list(), lengths["rows"].to_list(), strict=True))
    if objective == "preference":
        chosen, rejected = pl.col("num_chosen_tokens"), pl.col("num_rejected_tokens")
        flags = [
            (chosen > rejected).sum().alias("longer"),
            (chosen == rejected).sum().alias("equal"),
        ]
    elif objective == "unpaired_preference":
        flags = [pl.col("label").sum().alias("desirable")]
    else:
        flags = [pl.col("reference").is_not_null().sum().alias("with_reference")]
    counts["flags"] = frame.select(flags).collect(engine="streaming").row(0, named=True)
    return counts


def merge_objective_counts(counts: dict[str, Any] | None, more: dict[str, Any]) -> dict[str, Any]:
    """`counts` with a further shard's added."""
    if counts is None:
        return more
    merged: dict[str, Any] = {}
    for key, values in more.items():
        total = dict(counts[key])
        for value, count in values.items():
            total[value] = total.get(value, 0) + count
        merged[key] = total
    return merged


def objective_figures(objective: str, counts: dict[str, Any]) -> dict[str, Any]:
    """The figures `mms stats` reports for the objective's rows."""
    rows = sum(counts[OBJECTIVE_PARTS[objective][0]].values())
    found: dict[str, Any] = {"objective": objective, "rows": rows}
    for part in OBJECTIVE_PARTS[objective]:
        length = sorted(counts[part])
        many = [counts[part][value] for value in length]
        tokens = sum(value * count for value, count in zip(length, many, strict=True))
        found[f"{part}_tokens"] = {
            "total": tokens,
            "mean": round(tokens / rows, 3) if rows else 0.0,
            **(length_percentiles(length, many) if rows else {}),
            "length_max": length[-1] if length else 0,
        }
    flags = counts["flags"]

    def share(count: int | None) -> float:
        return round((count or 0) / rows, 6) if rows else 0.0

    if objective == "preference":
        found |= {
            "chosen_longer_share": share(flags["longer"]),
            "equal_length_share": share(flags["equal"]),
        }
    elif objective == "unpaired_preference":
        found["desirable_share"] = share(flags["desirable"])
    else:
        found["with_reference_share"] = share(flags["with_reference"])
    return found
