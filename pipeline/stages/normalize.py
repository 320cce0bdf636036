"""The normalize stage: records -> MMS threads. Picks a file's (or part's) format, named or
detected from its first records, converts each record, and hands every record that fails
to a rejection callback with file, position and reason."""

from __future__ import annotations

import dataclasses
import itertools
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

from pipeline.accounting import Account
from pipeline.config_slice import ConfigSlice
from pipeline.formats import AUTO, FORMATS, ConvertOptions, InputFormat, get_format
from pipeline.formats.detect import best_for_record, detect
from pipeline.media import MediaChecker, MediaProblem
from pipeline.mms import Thread
from pipeline.quarantine import RecordRejected, Rejection, raw_text
from pipeline.sources import Record


@dataclass(frozen=True, slots=True)
class NormalizeSettings:
    """The `normalize` slice: converter options (pipeline.formats.ConvertOptions), as the
    config names them."""

    parallel_calls: Literal["sequence", "jsonl"] = "sequence"
    reasoning: Literal["keep", "drop"] = "keep"
    multimodal: Literal["keep", "drop", "placeholder"] = "keep"
    oasst_paths: Literal["all", "top"] = "all"
    expand_selects: int = 0

    def to_convert_options(self) -> ConvertOptions:
        """The ConvertOptions the converters take."""
        return ConvertOptions(**dataclasses.asdict(self))


CONFIG = ConfigSlice("normalize", NormalizeSettings)


SNIFF_RECORDS = 32
"""How many parsed records of a file auto-detection looks at."""


def _convert(fmt: InputFormat, record: Record, options: ConvertOptions) -> list[Thread] | Rejection:
    try:
        return fmt.to_threads(record, options)
    except RecordRejected as err:
        code, message, details = err.code, err.message, err.details
    except Exception as err:  # a converter bug must not stop the batch
        where = traceback.extract_tb(err.__traceback__)[-1]
        code, details = "internal_error", ()
        message = (
            f"{fmt.name} converter raised {type(err).__name__}: {err} ({where.name}:{where.lineno})"
        )
    return Rejection(
        record.source,
        record.locator,
        code,
        message,
        raw=raw_text(record.raw, record.value),
        stage=f"normalize:{fmt.name}",
        details=details,
        record_id=_record_id(record.value),
    )


def _checked(
    media: MediaChecker, threads: list[Thread], record: Record, path: str
) -> list[Thread] | Rejection:
    """The record's threads with their media checked, or the record's rejection."""
    try:
        return media.check(threads, path)
    except MediaProblem as problem:
        return Rejection(
            record.source,
            record.locator,
            problem.code,
            f"record {record.locator}: {problem.why}",
            raw=raw_text(record.raw, record.value),
            stage="media",
            record_id=_record_id(record.value),
        )


def _record_id(value: object) -> str | None:
    source_id = value.get("id") if isinstance(value, dict) else None
    if isinstance(source_id, int) and not isinstance(source_id, bool):
        return str(source_id)
    return source_id if isinstance(source_id, str) and source_id else None


def read_items(
    path: str,
    items: Iterator[Record | Rejection],
    *,
    format: str = AUTO,
    on_reject: Callable[[Rejection], object] | None = None,
    stats: Account | None = None,
    options: ConvertOptions | None = None,
    media: MediaChecker | None = None,
) -> Iterator[Thread]:
    """Threads from the records (and read rejections) of one file, or of one part of it:
    its format named or detected from its first records, each record converted or
    handed to `on_reject`. `read` does this for every file; engines that split a big
    file into parts call it for each part. With `media`, the media of each record's
    threads are checked (pipeline/media): a record with a bad one is quarantined whole."""
    stats = stats if stats is not None else Account()
    options = options or ConvertOptions()

    counts = stats.file(path)

    def reject(rejection: Rejection) -> None:
        stats.quarantined[rejection.code] += 1
        counts.quarantined[rejection.code] += 1
        if on_reject is not None:
            on_reject(rejection)

    fmt = None if format == AUTO else get_format(format)
    per_record = False
    if fmt is None:
        head: list[Record | Rejection] = []
        parsed = 0
        for item in items:
            head.append(item)
            parsed += isinstance(item, Record)
            if parsed >= SNIFF_RECORDS:
                break
        detection = detect(r.value for r in head if isinstance(r, Record))
        fmt, per_record = detection.format, detection.per_record
        stats.formats[path] = detection.label
        items = itertools.chain(head, items)
    else:
        stats.formats[path] = fmt.name
    # a format whose conversations span records merges them (InputFormat.group); a
    # merged record counts, converts and is quarantined as every raw record it holds
    stream = fmt.group(items) if fmt is not None and fmt.group is not None else items
    for entry in stream:
        item, merged = entry if isinstance(entry, tuple) else (entry, None)
        read = len(merged) if merged is not None else 1
        stats.records_read += read
        counts.read += read
        if isinstance(item, Rejection):
            reject(item)
            continue
        members = merged if merged is not None else (item,)
        record_format = best_for_record(item.value) if per_record else fmt
        if record_format is None:
            reject(_unknown_format(item, path, per_record))
            continue
        result = _convert(record_format, item, options)
        if media is not None and not isinstance(result, Rejection):
            result = _checked(media, result, item, path)
        if isinstance(result, Rejection):
            for rejection in _member_rejections(result, item, members):
                reject(rejection)
            continue
        stats.records_converted += len(members)
        counts.converted += len(members)
        stats.threads += len(result)
        yield from result


def _member_rejections(
    result: Rejection, item: Record, members: tuple[Record, ...]
) -> list[Rejection]:
    """A conversation merged from several records that fails quarantines each record,
    with its own locator and raw text."""
    if members == (item,):
        return [result]
    note = f" [{len(members)} records were merged into this conversation; each is quarantined]"
    return [
        dataclasses.replace(
            result,
            source=member.source,
            locator=member.locator,
            message=result.message + note,
            raw=raw_text(member.raw, member.value),
        )
        for member in members
    ]


def _unknown_format(record: Record, path: str, per_record: bool) -> Rejection:
    value = record.value
    if isinstance(value, dict):
        keys = ", ".join(list(value)[:8]) or "none"
        shape = f"an object with keys {keys}"
    else:
        shape = "null" if value is None else f"a JSON {type(value).__name__}"
    where = "this record" if per_record else path
    return Rejection(
        record.source,
        record.locator,
        "unknown_format",
        f"no input format recognises {where} ({shape}); name one with --from "
        f"({', '.join(FORMATS)}), or write a field mapping: `mms formats --suggest-mapping "
        f"{path}` prints one to start from (then --mapping FILE)",
        raw=raw_text(record.raw, record.value),
        stage="detect",
    )
