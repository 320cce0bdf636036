"""Tabular inputs: Parquet read in row batches (`path#row`), CSV row by row (`path:line`)."""

from __future__ import annotations

import csv
import io
import sys
from collections.abc import Iterator
from typing import BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline import storage
from pipeline.arrow_pandas import pandas_for
from pipeline.quarantine import Rejection
from pipeline.sources.jsonable import to_jsonable
from pipeline.sources.limits import ReadLimits
from pipeline.sources.record import Record

PARQUET_BATCH_ROWS = 1024


def iter_parquet(source: str, limits: ReadLimits) -> Iterator[Record | Rejection]:
    """One record per row, a batch of rows in memory at a time."""
    row = 0
    stored: BinaryIO | None = None
    try:
        if storage.is_url(source):
            stored = storage.open_read(source)
        parquet = pq.ParquetFile(stored or source)
        pandas_for(parquet.schema_arrow)  # its nanosecond times become what they always did
        for batch in parquet.iter_batches(batch_size=PARQUET_BATCH_ROWS):
            for value in batch.to_pylist():
                yield Record(source, f"{source}#{row}", to_jsonable(value))
                row += 1
    except storage.StorageUnavailable:
        raise  # the store, not the file: the part stops, to resume
    except (pa.ArrowException, OSError) as err:
        yield Rejection(source, f"{source}#{row}", "unreadable_file", f"cannot read Parquet: {err}")
    finally:
        if stored is not None:
            stored.close()


class _Lines:
    """The lines of a text, noting when they run out: the csv reader ends a row at the end
    of its line, so a row it ends only there has a quote that is never closed."""

    def __init__(self, text: io.TextIOWrapper) -> None:
        self._text = text
        self.ended = False

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        line = self._text.readline()
        if not line:
            self.ended = True
            raise StopIteration
        return line


def _unclosed(source: str, line: int) -> Rejection:
    """The rejection of a row (or header) from `line` whose quote runs to the end of the file."""
    return Rejection(
        source,
        f"{source}:{line}",
        "invalid_csv",
        f"invalid CSV: the row from line {line} opens a quote that is never closed",
    )


def iter_csv(source: str, stream: BinaryIO, limits: ReadLimits) -> Iterator[Record | Rejection]:
    """One record (a dict keyed by the header) per row; the header is line 1. A row whose
    quote is never closed (it runs to the end of the file) is `invalid_csv`."""
    csv.field_size_limit(min(limits.max_record_bytes, sys.maxsize))
    lines = _Lines(io.TextIOWrapper(stream, encoding="utf-8-sig", newline=""))
    reader = csv.DictReader(lines)
    try:
        _ = reader.fieldnames  # reads the header, so line numbers below are exact
    except (UnicodeDecodeError, csv.Error) as err:
        yield Rejection(source, f"{source}:1", "invalid_csv", f"cannot read the CSV header: {err}")
        return
    if lines.ended and reader.fieldnames is not None:
        yield _unclosed(source, 1)
        return
    while True:
        start = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except UnicodeDecodeError as err:
            yield Rejection(
                source,
                f"{source}:{start}",
                "invalid_utf8",
                f"invalid UTF-8 at or after line {start}: {err.reason}; "
                "the rest of the file is skipped",
            )
            return
        except csv.Error as err:
            yield Rejection(
                source,
                f"{source}:{start}",
                "invalid_csv",
                f"invalid CSV: {err}; the rest of the file is skipped",
            )
            return
        if lines.ended:
            yield _unclosed(source, start)
            return
        extra = row.pop(None, None)
        if extra is not None:
            row["_extra_columns"] = extra
        yield Record(source, f"{source}:{start}", row)
