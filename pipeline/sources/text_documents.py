"""Files read whole as text because they are scripts or templates, not data: PPE
`.ai.yaml` scripts (not plain YAML: dialogue separators, `->` chains, repeated keys) and
legacy Semantic Kernel `skprompt.txt` templates, read with the `config.json` beside them."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import orjson

from pipeline import storage
from pipeline.quarantine import Rejection
from pipeline.sources.documents import read_document_text
from pipeline.sources.jsonable import loads_exact, long_integers_as_text, may_hold_long_integers
from pipeline.sources.jsonl import UTF8_BOM, decode_problem
from pipeline.sources.limits import ReadLimits
from pipeline.sources.record import Record

SKPROMPT_NAME = "skprompt.txt"
SKPROMPT_CONFIG_NAME = "config.json"


@dataclass(frozen=True, slots=True)
class TextDocument:
    """A script or template file: its `kind` (`ppe` or `skprompt`), its text (BOM
    stripped) and, for `skprompt`, the parsed `config` beside it and that file's path."""

    kind: str
    text: str
    config: Any = None
    config_path: str | None = None


def skprompt_config_path(path: str) -> str:
    """Where the `config.json` of a `skprompt.txt` lives: the same directory (and the same
    name prefix, for flattened copies such as `Chat__skprompt.txt`)."""
    return path[: len(path) - len(SKPROMPT_NAME)] + SKPROMPT_CONFIG_NAME


def iter_text_document(
    source: str, stream: BinaryIO, limits: ReadLimits, kind: str
) -> Iterator[Record | Rejection]:
    """The whole file as one record whose value is a TextDocument."""
    document = read_document_text(source, stream, limits)
    if isinstance(document, Rejection):
        yield document
        return
    data, text = document
    if kind != "skprompt":
        yield Record(source, source, TextDocument(kind, text), raw=data)
        return
    config_path = skprompt_config_path(source)
    read = _read_config(config_path, limits.max_document_bytes)
    if isinstance(read, str):
        yield Rejection(source, source, "invalid_json", read, raw=text)
        return
    config, notes = read
    found = config_path if _exists(config_path) else None
    value = TextDocument(kind, text, config, found)
    notes = tuple(f"{config_path}: {note}" for note in notes)
    yield Record(source, source, value, raw=data, notes=notes)


def _exists(path: str) -> bool:
    return storage.isfile(path) if storage.is_url(path) else os.path.exists(path)


def _read_config(path: str, max_bytes: int) -> tuple[Any, tuple[str, ...]] | str:
    """The parsed config.json (None when there is none) and the notes on reading it (its
    integers beyond 64 bits kept as text), or the reason it cannot be read: it is not a
    regular file (a device or pipe is never opened) or over `max_bytes`."""
    try:
        if storage.is_url(path):
            with storage.open_read(path) as stored:
                data = stored.read(max_bytes + 1)
        elif not stat.S_ISREG(os.stat(path).st_mode):
            return f"cannot read {path}: not a regular file"
        else:
            with open(path, "rb") as handle:
                data = handle.read(max_bytes + 1)
    except FileNotFoundError:
        return None, ()
    except storage.StorageUnavailable:
        raise
    except OSError as err:
        return f"cannot read {path}: {err.strerror or err}"
    if len(data) > max_bytes:
        return f"cannot read {path}: over the limit of {max_bytes} bytes"
    if data.startswith(UTF8_BOM):
        data = data[len(UTF8_BOM) :]
    try:
        value = loads_exact(data)
    except orjson.JSONDecodeError:
        return f"{path}: {decode_problem(data)[1]}"
    return long_integers_as_text(value) if may_hold_long_integers(data) else (value, ())
