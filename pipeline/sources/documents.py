"""Whole-document inputs (.json, .yaml): a top-level array yields one record per element
(`path#index`), anything else one record (`path`). A .json file that is really JSON Lines
is read as JSON Lines."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any, BinaryIO

import orjson
import yaml

from pipeline.quarantine import Rejection, raw_text
from pipeline.sources.jsonable import (
    NotTextError,
    TooLargeError,
    loads_exact,
    long_integers_as_text,
    may_hold_long_integers,
    to_jsonable,
)
from pipeline.sources.jsonl import UTF8_BOM, decode_problem, iter_jsonl
from pipeline.sources.limits import ReadLimits
from pipeline.sources.record import Record
from pipeline.sources.trailing_commas import without_trailing_commas
from pipeline.sources.yaml_text import TooDeepYamlError, UnsafeYamlError, load_yaml_documents


def read_document_bytes(source: str, stream: BinaryIO, limits: ReadLimits) -> bytes | Rejection:
    """The whole (decompressed) file, or a Rejection when it is over the document limit."""
    data = stream.read(limits.max_document_bytes + 1)
    if len(data) > limits.max_document_bytes:
        return Rejection(
            source,
            source,
            "oversize_record",
            f"document is over the limit of {limits.max_document_bytes} bytes; "
            "convert it to JSON Lines, which is streamed",
            raw=raw_text(data),
        )
    return data[len(UTF8_BOM) :] if data.startswith(UTF8_BOM) else data


def read_document_text(
    source: str, stream: BinaryIO, limits: ReadLimits
) -> tuple[bytes, str] | Rejection:
    """The whole file's bytes and text, or a Rejection when it is over the document
    limit or not UTF-8."""
    data = read_document_bytes(source, stream, limits)
    if isinstance(data, Rejection):
        return data
    try:
        return data, data.decode("utf-8")
    except UnicodeDecodeError:
        code, message = decode_problem(data)
        return Rejection(source, source, code, message, raw=raw_text(data))


def _elements(
    source: str, value: Any, notes: tuple[str, ...] = (), long_integers: bool = True
) -> Iterator[Record]:
    """A record per element of a top-level list, else one (a list that is one
    conversation's messages is one record); with `long_integers` (the document may hold
    integers beyond 64 bits), each record's are made text, noted."""
    if isinstance(value, list) and not _one_conversation(value):
        for index, item in enumerate(value):
            yield _record(source, f"{source}#{index}", item, notes, long_integers)
    else:
        yield _record(source, source, value, notes, long_integers)


def _one_conversation(items: list[Any]) -> bool:
    """Whether a document's top-level list is the messages of one conversation (every
    element a `{role, content}` object, a user and an assistant among them), as a file
    holding a single chat is written: one record, not a record per message."""
    roles = set()
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("role"), str):
            return False
        if "content" not in item and "tool_calls" not in item:
            return False
        roles.add(item["role"])
    return {"user", "assistant"} <= roles


def _record(
    source: str, locator: str, value: Any, notes: tuple[str, ...], long_integers: bool
) -> Record:
    if long_integers:
        value, more = long_integers_as_text(value)
        notes = (*notes, *more)
    return Record(source, locator, value, notes=notes)


def _looks_like_json_lines(data: bytes) -> bool:
    first, _, rest = data.strip().partition(b"\n")
    if not rest.strip():
        return False
    try:
        orjson.loads(first)
    except orjson.JSONDecodeError:
        return False
    return True


def iter_json(source: str, stream: BinaryIO, limits: ReadLimits) -> Iterator[Record | Rejection]:
    data = read_document_bytes(source, stream, limits)
    if isinstance(data, Rejection):
        yield data
        return
    try:
        value = loads_exact(data)
    except orjson.JSONDecodeError:
        if _looks_like_json_lines(data):
            yield from iter_jsonl(source, io.BytesIO(data), limits)
            return
        forgiven = _with_trailing_commas_forgiven(source, data)
        if isinstance(forgiven, bytes):
            data = forgiven
        elif forgiven is not None:
            yield from forgiven
            return
        code, message = decode_problem(data)
        yield Rejection(source, source, code, message, raw=raw_text(data))
        return
    yield from _elements(source, value, long_integers=may_hold_long_integers(data))


def _with_trailing_commas_forgiven(source: str, data: bytes) -> Iterator[Record] | bytes | None:
    """The records of a JSON document whose only fault is trailing commas (`[1, 2,]`),
    each noting where they were; when it has other faults too, the document with its
    trailing commas blanked (to report the other fault); None when it has none."""
    try:
        repaired = without_trailing_commas(data.decode("utf-8"))
    except UnicodeDecodeError:
        return None
    if repaired is None:
        return None
    text, lines = repaired
    try:
        value = loads_exact(text)
    except orjson.JSONDecodeError:
        return text.encode()
    where = ", ".join(str(line) for line in lines)
    note = f"accepted {len(lines)} trailing comma(s), which JSON does not allow (line {where})"
    return _elements(source, value, (note,), may_hold_long_integers(text))


def iter_yaml(source: str, stream: BinaryIO, limits: ReadLimits) -> Iterator[Record | Rejection]:
    document = read_document_text(source, stream, limits)
    if isinstance(document, Rejection):
        yield document
        return
    _, text = document
    documents: list[Any] = []
    try:
        # one level more than a record's limit: a top-level list is split into records,
        # each judged on its own depth afterwards
        for document in load_yaml_documents(text, max_depth=limits.max_depth + 1):
            documents.append(to_jsonable(document, limits.max_yaml_values))
    except TooDeepYamlError as err:
        yield _too_deep_yaml(source, text, str(err), limits.max_depth)
        return
    except UnsafeYamlError as err:
        yield Rejection(source, source, "unsafe_yaml", str(err), raw=text)
        return
    except yaml.YAMLError as err:
        yield Rejection(source, source, "invalid_yaml", f"invalid YAML: {_one_line(err)}", raw=text)
        return
    except RecursionError:  # a --max-depth beyond what the loader can build
        problem = "the YAML nests sequences and mappings deeper than the loader can build"
        yield _too_deep_yaml(source, text, problem, limits.max_depth)
        return
    except (TooLargeError, NotTextError) as err:
        yield Rejection(source, source, "invalid_yaml", f"YAML rejected: {err}", raw=text)
        return
    except ValueError as err:  # a value Python cannot hold, e.g. an integer of 5,000 digits
        yield Rejection(source, source, "invalid_yaml", f"YAML value rejected: {err}", raw=text)
        return
    if len(documents) == 1:
        yield from _elements(source, documents[0])
    else:
        for index, document in enumerate(documents):
            if document is not None:
                yield _record(source, f"{source}#{index}", document, (), True)


def _too_deep_yaml(source: str, text: str, problem: str, max_depth: int) -> Rejection:
    """The rejection of a YAML file nested too deep to build (`problem` says how deep)."""
    return Rejection(
        source,
        source,
        "too_deep",
        f"{problem}, too deep to read (a record may nest at most {max_depth} levels; "
        "raise --max-depth if this is real data)",
        raw=text,
    )


def _one_line(err: yaml.YAMLError) -> str:
    return " ".join(str(err).split())
