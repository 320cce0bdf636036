"""Finding the rows that share a key, in bounded memory, whatever runs it: each source's
keys are spread over hash buckets (crc32 of the key's bytes, the same in every process), and
each bucket, holding every copy of its keys, finds its shared keys alone."""

from __future__ import annotations

import zlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

BUCKET = "bucket"
SOURCE = "source"
ROW = "row"
KEY = "key"


def spread_keys(found: pa.Table, source: int, buckets: int) -> pa.Table:
    """A source's keys (columns `row`, `key`) with their bucket and the source's index."""
    spread = [zlib.crc32(key) % buckets for key in found[KEY].to_pylist()]
    return pa.table(
        {
            BUCKET: pa.array(spread, pa.int32()),
            SOURCE: pa.array(np.full(found.num_rows, source, dtype=np.int32)),
            ROW: found[ROW].cast(pa.int64()),
            KEY: found[KEY].cast(pa.binary()),
        }
    )


def empty_keys() -> pa.Table:
    """`spread_keys` of a source with no key."""
    return spread_keys(
        pa.table({ROW: pa.array([], pa.int64()), KEY: pa.array([], pa.binary())}), 0, 1
    )


def shared_rows(bucket: pa.Table) -> pa.Table:
    """The (source, row) of the rows of one bucket whose key another row has."""
    counts = bucket.group_by(KEY).aggregate([(ROW, "count")])
    shared = counts.filter(pc.greater(counts[f"{ROW}_count"], 1))[KEY]
    return bucket.filter(pc.is_in(bucket[KEY], value_set=shared)).select([SOURCE, ROW])
