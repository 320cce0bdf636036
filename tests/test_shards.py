"""ShardWriter codecs and byte-sized shards: round trips, stable bytes, limits, bad values."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.output.shards import SHARD_ROWS, Shard, ShardWriter

SCHEMA = pa.schema([("id", pa.string()), ("tokens", pa.list_(pa.int32()))])


def rows(count: int, start: int = 0, width: int = 64) -> pa.Table:
    """Rows of up to `width` scattered token ids: enough entropy that codecs differ."""
    ids = [f"thread-{i:06d}" for i in range(start, start + count)]
    tokens = [
        [(i * 7919 + j * 104_729) % 50_000 for j in range(i % width)]
        for i in range(start, start + count)
    ]
    return pa.table({"id": ids, "tokens": tokens}, schema=SCHEMA)


def write(directory: Path, batches: list[pa.Table], **kwargs) -> list[Shard]:
    with ShardWriter(directory, SCHEMA, **kwargs) as writer:
        for batch in batches:
            writer.write(batch)
    return writer.shards


def read_back(directory: Path, shards: list[Shard]) -> pa.Table:
    return pa.concat_tables(pq.read_table(directory / shard.name) for shard in shards)


def file_bytes(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}


def group_spans(path: Path) -> list[tuple[int, int, int]]:
    """(rows, first byte, end byte) of each row group of a Parquet file."""
    meta = pq.ParquetFile(path).metadata
    spans = []
    for index in range(meta.num_row_groups):
        group = meta.row_group(index)
        columns = [group.column(c) for c in range(group.num_columns)]
        start = min(column.data_page_offset for column in columns)
        end = max(column.data_page_offset + column.total_compressed_size for column in columns)
        spans.append((group.num_rows, start, end))
    return spans


# --------------------------------------------------------------------------- codecs

CODECS = {"zstd": "ZSTD", "snappy": "SNAPPY", "gzip": "GZIP", "none": "UNCOMPRESSED"}


@pytest.mark.parametrize("codec", list(CODECS))
def test_each_codec_round_trips_with_the_same_bytes_twice(tmp_path, codec):
    table = rows(700)
    first = write(tmp_path / "a", [table], shard_rows=300, row_group_rows=100, compression=codec)
    again = write(tmp_path / "b", [table], shard_rows=300, row_group_rows=100, compression=codec)
    assert [shard.rows for shard in first] == [300, 300, 100]
    assert read_back(tmp_path / "a", first).equals(table)
    assert first == again
    assert file_bytes(tmp_path / "a") == file_bytes(tmp_path / "b")
    meta = pq.ParquetFile(tmp_path / "a" / first[0].name).metadata
    for index in range(meta.num_row_groups):
        group = meta.row_group(index)
        assert {group.column(c).compression for c in range(2)} == {CODECS[codec]}


def test_codecs_give_different_sizes_and_zstd_is_the_default(tmp_path):
    table = rows(700)
    sizes = {
        codec: write(tmp_path / codec, [table], compression=codec)[0].bytes for codec in CODECS
    }
    default = write(tmp_path / "default", [table])
    assert file_bytes(tmp_path / "default") == file_bytes(tmp_path / "zstd")
    assert default[0].bytes == sizes["zstd"]
    assert sizes["none"] > max(sizes["zstd"], sizes["snappy"], sizes["gzip"])


# --------------------------------------------------------------------------- byte-sized shards


def test_byte_sized_shards_end_at_the_first_row_group_reaching_the_target(tmp_path):
    target = 20_000
    table = rows(2_000)
    shards = write(tmp_path, [table], shard_bytes=target, row_group_rows=50)
    assert len(shards) >= 4
    assert sum(shard.rows for shard in shards) == 2_000
    assert read_back(tmp_path, shards).equals(table)
    for position, shard in enumerate(shards):
        spans = group_spans(tmp_path / shard.name)
        assert all(group_rows == 50 for group_rows, _, _ in spans[:-1])
        assert all(end < target for _, _, end in spans[:-1])  # it did not end any earlier
        if position < len(shards) - 1:
            assert spans[-1][2] >= target  # it ended as soon as the target was reached
            assert target <= shard.bytes < target * 1.25


def test_byte_sized_shards_do_not_depend_on_the_batches(tmp_path):
    table = rows(400)
    options = {"shard_bytes": 6_000, "row_group_rows": 16}
    one = write(tmp_path / "one", [table], **options)
    single = write(tmp_path / "single", [table.slice(i, 1) for i in range(400)], **options)
    assert len(one) > 2
    assert one == single
    assert file_bytes(tmp_path / "one") == file_bytes(tmp_path / "single")


def test_a_row_group_bigger_than_the_target_is_a_shard_of_its_own(tmp_path):
    shards = write(tmp_path, [rows(230)], shard_bytes=1, row_group_rows=50)
    assert [shard.rows for shard in shards] == [50, 50, 50, 50, 30]
    assert [shard.name for shard in shards][-1] == "train-00004-of-00005.parquet"
    assert sorted(os.listdir(tmp_path)) == [shard.name for shard in shards]


def test_byte_sized_shards_have_no_row_limit_of_their_own(tmp_path):
    table = pa.table(
        {"id": [f"t{i}" for i in range(SHARD_ROWS + 1)], "tokens": [[1]] * (SHARD_ROWS + 1)},
        schema=SCHEMA,
    )
    rows_only = write(tmp_path / "rows", [table])
    bytes_only = write(tmp_path / "bytes", [table], shard_bytes=1 << 30)
    assert [shard.rows for shard in rows_only] == [SHARD_ROWS, 1]
    assert [shard.rows for shard in bytes_only] == [SHARD_ROWS + 1]


def test_no_rows_with_a_byte_limit_give_one_empty_shard(tmp_path):
    shards = write(tmp_path, [], shard_bytes=1_000, compression="gzip")
    assert [(shard.name, shard.rows) for shard in shards] == [("train-00000-of-00001.parquet", 0)]
    assert pq.read_table(tmp_path / shards[0].name).schema == SCHEMA


def test_a_failed_byte_sized_run_leaves_no_file(tmp_path):
    with pytest.raises(RuntimeError), ShardWriter(tmp_path, SCHEMA, shard_bytes=2_000) as writer:
        writer.write(rows(500))
        raise RuntimeError("stage failed")
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- both limits


def test_with_both_limits_whichever_comes_first_ends_the_shard(tmp_path):
    small = rows(300, width=2)  # 300 rows of at most 1 token: the row limit comes first
    big = rows(300, start=700, width=1_000)  # 700 to 999 tokens: the byte limit comes first
    table = pa.concat_tables([small, big])
    options = {"shard_rows": 100, "shard_bytes": 100_000, "row_group_rows": 30}
    shards = write(tmp_path / "one", [table], **options)
    counts = [shard.rows for shard in shards]
    assert counts[:3] == [100, 100, 100]
    assert all(count < 100 for count in counts[3:-1]) and len(counts) > 5
    assert all(shard.bytes >= 100_000 for shard in shards[3:-1])
    first = group_spans(tmp_path / "one" / shards[0].name)
    assert [group_rows for group_rows, _, _ in first] == [30, 30, 30, 10]
    assert read_back(tmp_path / "one", shards).equals(table)
    batches = [table.slice(start, 7) for start in range(0, 600, 7)]
    assert write(tmp_path / "many", batches, **options) == shards
    assert file_bytes(tmp_path / "many") == file_bytes(tmp_path / "one")


# --------------------------------------------------------------------------- bad values


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"compression": "lz4"}, r"compression must be one of zstd, snappy, gzip, none, not 'lz4'"),
        ({"compression": "ZSTD"}, r"compression must be one of .*, not 'ZSTD'"),
        ({"shard_rows": 0}, r"shard_rows must be a positive integer or None, not 0"),
        ({"shard_bytes": 0}, r"shard_bytes must be a positive integer or None, not 0"),
        ({"shard_bytes": -5}, r"shard_bytes must be a positive integer or None, not -5"),
        ({"shard_bytes": "1MB"}, r"shard_bytes must be a positive integer or None, not '1MB'"),
        ({"shard_bytes": 1.5}, r"shard_bytes must be a positive integer or None, not 1.5"),
        ({"shard_rows": True}, r"shard_rows must be a positive integer or None, not True"),
        ({"row_group_rows": 0}, r"row_group_rows must be a positive integer, not 0"),
        ({"row_group_rows": None}, r"row_group_rows must be a positive integer, not None"),
    ],
)
def test_bad_values_are_refused_before_anything_is_written(tmp_path, options, message):
    with pytest.raises(ValueError, match=message):
        ShardWriter(tmp_path / "data", SCHEMA, **options)
    assert not (tmp_path / "data").exists()
