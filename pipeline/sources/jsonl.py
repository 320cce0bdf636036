"""JSON Lines, read one line at a time: memory stays bounded by the longest allowed line."""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

import orjson

from pipeline.quarantine import Rejection, raw_text
from pipeline.sources.jsonable import loads_exact, long_integers_as_text, may_hold_long_integers
from pipeline.sources.limits import ReadLimits
from pipeline.sources.record import Record

UTF8_BOM = b"\xef\xbb\xbf"
_DRAIN_CHUNK = 1024 * 1024
_BLANK = b" \t\r\n"
JSON_PARSE_DEPTH = 1024
"""orjson refuses to parse JSON nested deeper than this."""


def decode_problem(data: bytes) -> tuple[str, str]:
    """Why `data` failed to parse as JSON: (`invalid_utf8`, where), (`too_deep`, how deep)
    when it nests deeper than JSON is parsed, or (`invalid_json`, why)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as err:
        bad = data[err.start : err.end].hex(" ")
        return "invalid_utf8", f"invalid UTF-8 byte(s) {bad} at byte {err.start}"
    try:
        orjson.loads(data)
    except orjson.JSONDecodeError as err:
        if "depth limit exceeded" in str(err):
            return "too_deep", (
                f"the record nests lists and objects more than {JSON_PARSE_DEPTH} levels "
                f"deep ({err}), too deep to parse"
            )
        return "invalid_json", f"invalid JSON: {err}"
    return "invalid_json", "invalid JSON"


def _skip_blank_run(stream: BinaryIO) -> int:
    """Skip the blank lines (whitespace only) that follow in the stream's buffer at once,
    so a run of them costs one call, not one per line; how many lines were skipped."""
    peek = getattr(stream, "peek", None)
    if peek is None:
        return 0
    ahead: bytes = peek(_DRAIN_CHUNK)[:_DRAIN_CHUNK]
    blank = ahead[: len(ahead) - len(ahead.lstrip(_BLANK))]
    end = blank.rfind(b"\n") + 1
    if end:
        stream.read(end)
    return blank.count(b"\n", 0, end)


def _drain_line(stream: BinaryIO, most: int) -> tuple[int, bool]:
    """Read the rest of the current line, but no more than `most` bytes: how many bytes it
    held (newline excluded), and whether its end (or the stream's) was reached."""
    size = 0
    while size <= most:
        chunk = stream.readline(min(_DRAIN_CHUNK, most - size + 1))
        if not chunk:
            return size, True
        size += len(chunk)
        if chunk.endswith(b"\n"):
            return size - 1, True
    return size, False


def _oversize(
    source: str, line_no: int, head: bytes, stream: BinaryIO, limits: ReadLimits
) -> tuple[Rejection, bool]:
    """The rejection of a line over the record limit whose first bytes are `head`,
    skipped to its end; and whether the reader may go on (False when the line is longer
    than `limits.max_skip_bytes`, so the rest of the file is given up)."""
    most = max(limits.max_skip_bytes, len(head))
    rest, ended = _drain_line(stream, most - len(head))
    size = len(head) + rest
    message = f"line is {size} bytes, over the limit of {limits.max_record_bytes} bytes"
    if not ended:
        message = (
            f"line is more than {most} bytes long, over the limit of "
            f"{limits.max_record_bytes} bytes, and too long to skip: the rest of the file "
            "is not read"
        )
    rejection = Rejection(
        source,
        f"{source}:{line_no}",
        "oversize_record",
        f"{message} (raise --max-record-bytes)",
        raw=raw_text(head),
    )
    return rejection, ended


def iter_jsonl(source: str, stream: BinaryIO, limits: ReadLimits) -> Iterator[Record | Rejection]:
    """Yield a Record per non-blank line (locator `path:line`), or a Rejection for a line
    that is too long, not UTF-8, not JSON or nested too deep to parse. Blank lines are not
    records; a line too long to skip (`limits.max_skip_bytes`) ends the file."""
    max_record_bytes = limits.max_record_bytes
    line_no = 0
    while True:
        line = stream.readline(max_record_bytes + 1)
        if not line:
            return
        line_no += 1
        if line_no == 1 and line.startswith(UTF8_BOM):
            line = line[len(UTF8_BOM) :]
        if len(line) > max_record_bytes and not line.endswith(b"\n"):
            rejection, go_on = _oversize(source, line_no, line, stream, limits)
            yield rejection
            if not go_on:
                return
            continue
        body = line.strip()
        if not body:
            line_no += _skip_blank_run(stream)
            continue
        try:
            value = loads_exact(body)
        except orjson.JSONDecodeError:
            code, message = decode_problem(body)
            yield Rejection(source, f"{source}:{line_no}", code, message, raw=raw_text(body))
            continue
        notes: tuple[str, ...] = ()
        if may_hold_long_integers(body):
            value, notes = long_integers_as_text(value)
        yield Record(source, f"{source}:{line_no}", value, body, notes)
