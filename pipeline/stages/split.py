"""The split stage, configured by the `shard` slice: each kept thread goes to the split
whose band of [0, 1) the stable hash of its split group (and the seed) falls in, so a
thread and its duplicates or preference pair always land in the same split."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa

from pipeline.config_slice import ConfigSlice, SliceReader, plain_settings
from pipeline.stages.fractions import stable_fraction
from pipeline.stages.sample import SPLIT_GROUP


@dataclass(frozen=True, slots=True)
class ShardSettings:
    """Shard size, splits (name, fraction) in config order, split hash seed, codec, and
    whether the train split is written in a shuffled order (seeded by `seed`)."""

    rows_per_shard: int = 50_000
    splits: tuple[tuple[str, float], ...] = (("train", 1.0),)
    seed: int = 0
    compression: Literal["zstd", "snappy", "gzip", "none"] = "zstd"
    bytes_per_shard: int | None = None
    shuffle: bool = True


def _read(raw: dict[str, Any] | Literal[False], reader: SliceReader) -> ShardSettings | None:
    """`shard: false` writes no shards; the split fractions must sum to 1."""
    if raw is False:
        return None
    splits = tuple((name, float(value)) for name, value in raw.get("splits", {}).items())
    total = sum(value for _, value in splits)
    if splits and not math.isclose(total, 1.0, abs_tol=1e-9):
        shown = " + ".join(f"{name} {value:g}" for name, value in splits)
        reason = f"split fractions must sum to 1, these sum to {total:g} ({shown})"
        raise reader.error(["splits"], reason, key=True)
    return ShardSettings(**{**raw, **({"splits": splits} if splits else {})})


CONFIG = ConfigSlice(
    "shard",
    ShardSettings,
    read=_read,
    plain=lambda shard, recorded: {**plain_settings(shard), "splits": dict(shard.splits)},
    resolved_off=False,
)


def split_rows(rows: pa.Table, settings: ShardSettings) -> dict[str, list[int]]:
    """Row indices per split, every split named (in config order), empty ones included.

    Rows of one split group (here rows 0 and 2, group `a`) always share a split:

    >>> rows = pa.table({SPLIT_GROUP: ["a", "b", "a", "c", "d"]})
    >>> halves = (("train", 0.5), ("test", 0.5), ("extra", 0.0))
    >>> split_rows(rows, ShardSettings(splits=halves, seed=1))
    {'train': [1, 3, 4], 'test': [0, 2], 'extra': []}
    """
    bounds = []
    total = 0.0
    for name, share in settings.splits:
        total += share
        bounds.append((name, total))
    chosen: dict[str, list[int]] = {name: [] for name, _ in settings.splits}
    for row, group in enumerate(rows[SPLIT_GROUP].to_pylist()):
        fraction = stable_fraction(group, settings.seed)
        name = next((n for n, bound in bounds if fraction < bound), bounds[-1][0])
        chosen[name].append(row)
    return chosen
