"""The partition pass, on any runner (`Runner.map_tasks`: local processes or Ray tasks):
finds the rows that share a key with another row of any source, in bounded memory, with no
process holding every key and the process that plans reading none. Three phases of tasks,
each reading the files the one before wrote to a scratch folder:

(a) per source, its keys spread over hash buckets (crc32 of the key's bytes, the same in
    every process), one file per source with one record batch per bucket;
(b) per bucket, holding every copy of its keys, its shared (source, row) pairs found alone,
    one file per bucket with one record batch per group of sources;
(c) per group of sources, its pairs gathered from every bucket and handed over source by
    source, sorted and once each.

Asked for (`links`), phase (b) also writes, per bucket, every shared (source, row) with the
first (source, row) of its key: what joins the rows that must be decided together into
clusters (pipeline/jobs/run/clusters.py)."""

from __future__ import annotations

import shutil
import zlib
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.engine.parts import Runner
from pipeline.task_files import replaced

SOURCE = "source"
ROW = "row"
KEY = "key"
LINK_SOURCE = "link_source"
LINK_ROW = "link_row"
"""In a links file: the first (source, row) of the row's key (the least source, then row)."""
_CODE_BITS = 40
"""A (source, row) as one integer: source << _CODE_BITS | row."""
MAX_TASKS = 256
"""Buckets, and groups of sources, of the partition pass: one per source up to this many,
so a bucket holds about one part's keys (a few parts' on the largest inputs), and phases
(b) and (c) are at most this many tasks, on any engine."""


def find_repeated(
    runner: Runner,
    sources: Sequence[str],
    keys: Callable[[str], pa.Table],
    publish: Callable[[str, np.ndarray], None],
    scratch: Path,
    links: Path | None = None,
) -> None:
    """For every source (a name the caller gives, a part's directory), the rows one of whose
    keys another row of any source shares: `keys(source)` gives a source's keys (columns
    `row` int64, `key` binary; a row may have several), `publish(source, rows)` receives a
    source's repeated rows, sorted, only for sources having some. Both run in the runner's
    tasks (picklable). `scratch` must be on a file system every task's node sees (the work
    directory is); it is cleared first and removed at the end, here, never by a task.
    `links`: a folder (cleared first, the caller's to remove) that gets one `links_file`
    per bucket: each shared (source index, row) with the first of its key's."""
    if not sources:
        return
    root = str(scratch)
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    if links is not None:
        shutil.rmtree(links, ignore_errors=True)
        links.mkdir(parents=True)
    linked = str(links) if links is not None else None
    try:
        count = min(len(sources), MAX_TASKS)
        write = [
            partial(_write_buckets, root, keys, name, index, count)
            for index, name in enumerate(sources)
        ]
        find = [
            partial(_find_shared, root, len(sources), bucket, count, linked)
            for bucket in range(count)
        ]
        hand = [
            partial(
                _publish_group, root, group, count, _group_sources(sources, group, count), publish
            )
            for group in range(count)
        ]
        for phase in (write, find, hand):
            runner.map_tasks(phase)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _group_sources(sources: Sequence[str], group: int, groups: int) -> dict[int, str]:
    """The sources of group `group` of `groups` (contiguous: source s is in group
    s * groups // len(sources)), by index."""
    first, end = (-(-at * len(sources) // groups) for at in (group, group + 1))
    return {index: sources[index] for index in range(first, end)}


def _keys_file(scratch: str, source: int) -> Path:
    return Path(scratch) / f"keys-{source:06d}.arrow"


def _shared_file(scratch: str, bucket: int) -> Path:
    return Path(scratch) / f"shared-{bucket:04d}.arrow"


def links_file(links: str | Path, bucket: int) -> Path:
    """Bucket `bucket`'s links (columns SOURCE, ROW, LINK_SOURCE, LINK_ROW)."""
    return Path(links) / f"links-{bucket:04d}.arrow"


def _write_buckets(
    scratch: str, keys: Callable[[str], pa.Table], name: str, index: int, buckets: int
) -> None:
    """Phase (a): source `index`'s keys, batch b of its file holding those of bucket b."""
    found = keys(name)
    spread = np.fromiter(
        (zlib.crc32(key) % buckets for key in found[KEY].to_pylist()),
        dtype=np.int64,
        count=found.num_rows,
    )
    table = pa.table(
        {
            SOURCE: pa.array(np.full(found.num_rows, index, dtype=np.int32)),
            ROW: found[ROW].cast(pa.int64()),
            KEY: found[KEY].cast(pa.binary()),
        }
    )
    _write_batches(_keys_file(scratch, index), table, spread, buckets)


def _find_shared(
    scratch: str, sources: int, bucket: int, groups: int, links: str | None = None
) -> None:
    """Phase (b): bucket `bucket`'s (source, row) pairs whose key another row has, batch g
    of its file holding those of the sources of group g; and its links when asked."""
    keys = _gather([_keys_file(scratch, index) for index in range(sources)], bucket)
    if links is not None:
        _write_links(links_file(links, bucket), keys)
    found = _shared_rows(keys)
    origin = found[SOURCE].to_numpy().astype(np.int64)
    _write_batches(_shared_file(scratch, bucket), found, origin * groups // sources, groups)


def _publish_group(
    scratch: str,
    group: int,
    buckets: int,
    names: dict[int, str],
    publish: Callable[[str, np.ndarray], None],
) -> None:
    """Phase (c): every source of group `group` (`names`, by index) handed its repeated
    rows, gathered from every bucket's file, sorted and once each."""
    found = _gather([_shared_file(scratch, bucket) for bucket in range(buckets)], group)
    origin, rows = found[SOURCE].to_numpy(), found[ROW].to_numpy()
    order = np.lexsort((rows, origin))
    origin, rows = origin[order], rows[order]
    for index in np.unique(origin).tolist():
        lo, hi = np.searchsorted(origin, [index, index + 1])
        publish(names[index], np.unique(rows[lo:hi]))


def _shared_rows(bucket: pa.Table) -> pa.Table:
    """The (source, row) of the rows of one bucket whose key another row has."""
    counts = bucket.group_by(KEY).aggregate([(ROW, "count")])
    shared = counts.filter(pc.greater(counts[f"{ROW}_count"], 1))[KEY]
    return bucket.filter(pc.is_in(bucket[KEY], value_set=shared)).select([SOURCE, ROW])


def _write_links(path: Path, bucket: pa.Table) -> None:
    """Every row of the bucket whose key another row has, with the first (source, row) of
    that key, as an Arrow file (written under a name of its own and renamed)."""
    code = pc.add(
        pc.shift_left(bucket[SOURCE].cast(pa.int64()), _CODE_BITS), bucket[ROW].cast(pa.int64())
    )
    coded = pa.table({KEY: bucket[KEY], "code": code})
    found = coded.group_by(KEY).aggregate([("code", "count"), ("code", "min")])
    shared = found.filter(pc.greater(found["code_count"], 1)).select([KEY, "code_min"])
    joined = coded.join(shared, KEY, join_type="inner")
    codes, firsts = (joined[name].to_numpy() for name in ("code", "code_min"))
    order = np.lexsort((firsts, codes))
    mask = (1 << _CODE_BITS) - 1
    table = pa.table(
        {
            SOURCE: pa.array(codes[order] >> _CODE_BITS),
            ROW: pa.array(codes[order] & mask),
            LINK_SOURCE: pa.array(firsts[order] >> _CODE_BITS),
            LINK_ROW: pa.array(firsts[order] & mask),
        }
    )
    with (
        replaced(path) as temp,
        pa.OSFile(str(temp), "wb") as sink,
        pa.ipc.new_file(sink, table.schema) as writer,
    ):
        writer.write_table(table)


def _gather(paths: list[Path], batch: int) -> pa.Table:
    """Record batch `batch` of every file, as one table."""
    batches = []
    for path in paths:
        with pa.memory_map(str(path)) as mapped:
            batches.append(pa.ipc.open_file(mapped).get_batch(batch))
    return pa.Table.from_batches(batches)


def _write_batches(path: Path, table: pa.Table, labels: np.ndarray, count: int) -> None:
    """`table` as an Arrow file of `count` record batches, batch i holding the rows labelled
    i (empty or not) in their order, so a reader takes just its own. Written under a name of
    its own and renamed: a retried task writes the same bytes to the same name."""
    order = np.argsort(labels, kind="stable")
    table = table.take(order)
    ends = np.searchsorted(labels[order], np.arange(1, count + 1))
    with (
        replaced(path) as temp,
        pa.OSFile(str(temp), "wb") as sink,
        pa.ipc.new_file(sink, table.schema) as writer,
    ):
        start = 0
        for end in ends.tolist():
            rows = table.slice(start, end - start)
            columns = [column.combine_chunks() for column in rows.columns]
            writer.write_batch(pa.RecordBatch.from_arrays(columns, schema=table.schema))
            start = end
