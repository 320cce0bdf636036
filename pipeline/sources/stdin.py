"""Standard input as an input (`-`): spooled to a temporary file (so every reader, which
may read a file twice, works on it), read as JSON Lines or as one JSON document by what
it starts with, and every record and rejection labelled `-` instead of the spool's path,
so outputs never hold a temporary name."""

from __future__ import annotations

import dataclasses
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

import orjson

from pipeline.quarantine import Rejection
from pipeline.sources.record import Record

STDIN = "-"
"""The input name of standard input."""
COPY_BYTES = 1 << 20


def is_stdin(path: str) -> bool:
    return path == STDIN


@contextmanager
def spooled(stream: BinaryIO | None = None) -> Iterator[Path]:
    """`stream` (default: standard input) copied to a temporary file, removed afterwards:
    `stdin.json` when it holds one JSON document that is not a single line (a pretty-printed
    object, an array), else `stdin.jsonl`."""
    source = stream if stream is not None else sys.stdin.buffer
    folder = Path(tempfile.mkdtemp(prefix="mms-stdin-"))
    try:
        temp = folder / "spool"
        with temp.open("wb") as out:
            shutil.copyfileobj(source, out, COPY_BYTES)
        named = folder / f"stdin.{_kind(temp)}"
        temp.rename(named)
        yield named
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _kind(path: Path) -> str:
    """`json` when the first line alone is not a JSON value (a document over many lines)
    or the text starts an array; `jsonl` otherwise."""
    with path.open("rb") as data:
        first = data.readline().strip()
    if first.startswith(b"["):
        return "json"
    try:
        orjson.loads(first)
    except orjson.JSONDecodeError:
        return "json" if first.startswith(b"{") else "jsonl"
    return "jsonl"


def relabelled(item: Record | Rejection, spool: str) -> Record | Rejection:
    """A record or rejection of the spooled file as one of `-`."""
    locator = STDIN + item.locator.removeprefix(spool)
    if isinstance(item, Rejection):
        message = item.message.replace(spool, STDIN)
        return dataclasses.replace(item, source=STDIN, locator=locator, message=message)
    return dataclasses.replace(item, source=STDIN, locator=locator)
