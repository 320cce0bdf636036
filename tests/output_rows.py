"""An output folder's rows, as tests read them back: every shard of `data/`, in name order."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq


def shard_rows(out: Path) -> list[dict]:
    """Every row of the output `out`'s shards (`data/*.parquet`, sorted), as Python dicts."""
    return [
        row
        for shard in sorted((out / "data").glob("*.parquet"))
        for row in pq.read_table(shard).to_pylist()
    ]
