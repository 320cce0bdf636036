"""JSON Lines, read one line at a time: memory stays bounded by the longest allowed line."""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

import orjson

from pipeline.quarantine import Rejection, raw_text
from pipeline.sources.record import Record

UTF8_BOM = b"\xef\xbb\xbf"
_DRAIN_CHUNK = 1024 * 1024


def decode_problem(data: bytes) -> tuple[str, str]:
    """Why `data` failed to parse as JSON: (`invalid_utf8`, where) or (`invalid_json`, why)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as err:
        bad = data[err.start : err.end].hex(" ")
        return "invalid_utf8", f"invalid UTF-8 byte(s) {bad} at byte {err.start}"
    try:
        orjson.loads(data)
    except orjson.JSONDecodeError as err:
        return "invalid_json", f"invalid JSON: {err}"
    return "invalid_json", "invalid JSON"


def _skip_blank_run(stream: BinaryIO) -> int:
    """Skip the newlines that follow in the stream's buffer at once (a run of blank lines
    costs one call, not one per line); how many were skipped."""
    peek = getattr(stream, "peek", None)
    if peek is None:
        return 0
    ahead = peek(_DRAIN_CHUNK)[:_DRAIN_CHUNK]
    run = len(ahead) - len(ahead.lstrip(b"\n"))
    if run:
        stream.read(run)
    return run


def iter_jsonl(
    source: str, stream: BinaryIO, max_record_bytes: int
) -> Iterator[Record | Rejection]:
    """Yield a Record per non-blank line (locator `path:line`), or a Rejection for a line
    that is too long, not UTF-8 or not JSON. Blank lines are not records."""
    line_no = 0
    while True:
        line = stream.readline(max_record_bytes + 1)
        if not line:
            return
        line_no += 1
        if line_no == 1 and line.startswith(UTF8_BOM):
            line = line[len(UTF8_BOM) :]
        if len(line) > max_record_bytes and not line.endswith(b"\n"):
            head, size = line, len(line)
            while not line.endswith(b"\n"):
                line = stream.readline(_DRAIN_CHUNK)
                if not line:
                    break
                size += len(line)
            size -= line.endswith(b"\n")
            yield Rejection(
                source,
                f"{source}:{line_no}",
                "oversize_record",
                f"line is {size} bytes, over the limit of {max_record_bytes} bytes "
                "(raise --max-record-bytes)",
                raw=raw_text(head),
            )
            continue
        body = line.strip()
        if not body:
            line_no += _skip_blank_run(stream)
            continue
        try:
            value = orjson.loads(body)
        except orjson.JSONDecodeError:
            code, message = decode_problem(body)
            yield Rejection(source, f"{source}:{line_no}", code, message, raw=raw_text(body))
            continue
        yield Record(source, f"{source}:{line_no}", value, body)
