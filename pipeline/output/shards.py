"""Deterministic Parquet shards (DESIGN §7): `{split}-{i:05d}-of-{n:05d}.parquet`, zstd by
default, fixed row groups, so the same rows give the same bytes; a shard ends at a row count, a
byte size or both; the shards take their final names only when the whole split is written, so a
failed run leaves no half dataset. `mms run` writes each shard in a task of its own
(pipeline/jobs/run/shard_tasks.py: a named shard)."""

from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.output.files import file_sha256

SHARD_ROWS = 50_000
"""Rows per shard when no limit is given (the last one holds the rest)."""
ROW_GROUP_ROWS = 1_000
"""Rows per Parquet row group: small enough for the Hub's dataset viewer and for readers
that stream row groups, large enough for zstd to compress well."""
PARQUET_OPTIONS: dict[str, Any] = {
    "version": "2.6",
    "data_page_version": "1.0",
    "use_dictionary": False,
    "write_statistics": True,
    "store_schema": True,
}
"""Every Parquet writer option but the codec that affects the bytes, fixed here (Parquet itself
stores no timestamp; `created_by` names the pyarrow version). No dictionary pages: token ids and
free text gain nothing from them, plain pages + zstd are smaller and faster."""
COMPRESSIONS: dict[str, dict[str, Any]] = {
    "zstd": {"compression": "zstd", "compression_level": 3},
    "snappy": {"compression": "snappy"},
    "gzip": {"compression": "gzip", "compression_level": 6},
    "none": {"compression": "none"},
}
"""Codec name (as in the pipeline config) -> Parquet writer options, levels fixed for stable bytes."""
_SPLIT_NAME = re.compile(r"^\w+$")


@dataclass(frozen=True, slots=True)
class Shard:
    """One written shard: its file name (in the shard directory), rows, size and sha256."""

    name: str
    rows: int
    bytes: int
    sha256: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "rows": self.rows, "bytes": self.bytes, "sha256": self.sha256}


SHARD_FILE = re.compile(r"^(?P<split>\w+)-\d{5}-of-\d{5}\.parquet$")
"""The name of a shard file: `{split}-{i:05d}-of-{n:05d}.parquet`."""


def split_files(data: Path) -> dict[str, list[Path]]:
    """The shard files in the folder `data`, per split (in the order splits first appear
    by name), each split's in name order."""
    found: dict[str, list[Path]] = {}
    for path in sorted(data.glob("*.parquet")) if data.is_dir() else []:
        match = SHARD_FILE.match(path.name)
        if match is not None:
            found.setdefault(match["split"], []).append(path)
    return found


def shard_name(split: str, index: int, count: int) -> str:
    """`train-00000-of-00004.parquet`: the name the Hugging Face Hub reads as a split."""
    return f"{split}-{index:05d}-of-{count:05d}.parquet"


class ShardWriter:
    """Writes tables of `schema` rows as Parquet shards under `directory`.

    A shard ends after `shard_rows` rows, or after the row group that brings its written bytes
    to `shard_bytes` (footer not counted), whichever comes first; with neither given, shards
    hold `SHARD_ROWS` rows. Use it as a context manager: on success the shards are renamed to
    their final names (replacing files of the same names) and listed in `.shards`; on an
    exception every file written so far is removed. Rows are cut into row groups of
    `row_group_rows` whatever the batches written, so bytes depend on the rows only."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        schema: pa.Schema,
        *,
        split: str = "train",
        shard_rows: int | None = None,
        shard_bytes: int | None = None,
        row_group_rows: int = ROW_GROUP_ROWS,
        compression: str = "zstd",
        empty_shard: bool = True,
        name: str | None = None,
    ):
        if not _SPLIT_NAME.match(split):
            raise ValueError(f"split name {split!r} must be letters, digits and underscores")
        if compression not in COMPRESSIONS:
            codecs = ", ".join(COMPRESSIONS)
            raise ValueError(f"compression must be one of {codecs}, not {compression!r}")
        _check_positive("shard_rows", shard_rows, optional=True)
        _check_positive("shard_bytes", shard_bytes, optional=True)
        _check_positive("row_group_rows", row_group_rows, optional=False)
        self.directory = Path(directory)
        self.schema = schema
        self.split = split
        self.name = name
        """One shard under this name, however many rows (no limit may be given), or None:
        shards cut by the limits, named `{split}-{i:05d}-of-{n:05d}.parquet`."""
        if name is not None and (shard_rows is not None or shard_bytes is not None):
            raise ValueError("a named shard takes no row or byte limit")
        unlimited = shard_rows is None and shard_bytes is None and name is None
        self.shard_rows = SHARD_ROWS if unlimited else shard_rows
        self.shard_bytes = shard_bytes
        self.row_group_rows = row_group_rows
        self.compression = compression
        self.empty_shard = empty_shard
        """Whether a split with no rows gets one empty shard (keeps its schema readable) or
        no file at all (a dataset card must not declare a split without data)."""
        self.shards: list[Shard] = []
        self._pending = schema.empty_table()
        self._temps: list[Path] = []
        self._rows: list[int] = []
        self._sink: pa.NativeFile | None = None
        self._writer: pq.ParquetWriter | None = None

    def __enter__(self) -> ShardWriter:
        self.directory.mkdir(parents=True, exist_ok=True)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.discard()

    def write(self, table: pa.Table) -> None:
        """Append `table`'s rows; full row groups go to disk at once."""
        if not table.schema.equals(self.schema):
            raise ValueError(f"table schema differs from the shard schema:\n{table.schema}")
        self._pending = pa.concat_tables([self._pending, table])
        while self._pending.num_rows >= self._next_group_rows():
            self._flush(self._next_group_rows())

    # ------------------------------------------------------------------ internals

    def _next_group_rows(self) -> int:
        """Rows of the next row group: a full group, or what the current shard has left."""
        if self.shard_rows is None:
            return self.row_group_rows
        in_shard = self._rows[-1] if self._writer is not None else 0
        return min(self.row_group_rows, self.shard_rows - in_shard)

    def _flush(self, rows: int) -> None:
        group, self._pending = self._pending.slice(0, rows), self._pending.slice(rows)
        writer = self._writer or self._open()
        writer.write_table(group.combine_chunks(), row_group_size=rows)
        self._rows[-1] += rows
        if self._shard_full():
            self._close()

    def _shard_full(self) -> bool:
        """Whether the open shard has reached its row or byte limit (row groups are flushed)."""
        if self.shard_rows is not None and self._rows[-1] >= self.shard_rows:
            return True
        if self.shard_bytes is None or self._sink is None:
            return False
        written: int = self._sink.tell()
        return written >= self.shard_bytes

    def _open(self) -> pq.ParquetWriter:
        self.directory.mkdir(parents=True, exist_ok=True)
        stem = self.name or f"{self.split}-{len(self._temps):05d}"
        temp = self.directory / f".{stem}.{os.getpid()}.{uuid.uuid4().hex}.tmp"
        self._temps.append(temp)
        self._rows.append(0)
        self._sink = pa.OSFile(str(temp), "wb")
        options = PARQUET_OPTIONS | COMPRESSIONS[self.compression]
        self._writer = pq.ParquetWriter(self._sink, self.schema, **options)
        return self._writer

    def _close(self) -> None:
        """Finish the open shard (footer written, file closed), if any."""
        writer, sink = self._writer, self._sink
        self._writer = self._sink = None
        try:
            if writer is not None:
                writer.close()
        finally:
            if sink is not None:
                sink.close()

    def commit(self) -> None:
        """Publish the shards under their final names (files of those names are replaced)."""
        if self._pending.num_rows:
            self._flush(self._pending.num_rows)
        if not self._temps and self.empty_shard:  # one empty shard keeps the schema readable
            self._open()
        self._close()
        count = len(self._temps)
        names = (
            [self.name] if self.name else [shard_name(self.split, i, count) for i in range(count)]
        )
        self.shards = [
            Shard(name, rows, temp.stat().st_size, file_sha256(temp))
            for name, rows, temp in zip(names, self._rows, self._temps, strict=True)
        ]
        for name, temp in zip(names, self._temps, strict=True):
            os.replace(temp, self.directory / name)

    def discard(self) -> None:
        """Remove every file written so far. Files this writer did not write are never
        touched: what an earlier output left is the output folder's business
        (pipeline/output/folder.py), so write shards into a staging folder."""
        try:
            self._close()
        finally:
            for temp in self._temps:
                temp.unlink(missing_ok=True)


def _check_positive(name: str, value: int | None, *, optional: bool) -> None:
    """A clear ValueError unless `value` is an integer of at least 1 (or None when optional)."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        allowed = "a positive integer or None" if optional else "a positive integer"
        raise ValueError(f"{name} must be {allowed}, not {value!r}")
