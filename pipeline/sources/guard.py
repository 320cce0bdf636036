"""The guard every file's records pass through: a record nested deeper than the limit is
rejected (`too_deep`, with its depth) before any converter or writer can recurse into
it, and anything a reader raises ends that file with one `unreadable_file` rejection,
so one bad file never stops the others."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pipeline.quarantine import Rejection, raw_text
from pipeline.sources.paths import InputError
from pipeline.sources.record import Record
from pipeline.sources.text_documents import TextDocument
from pipeline.storage import StorageUnavailable


def nesting_depth(value: Any, stop: int) -> int:
    """How deep `value` nests lists and objects (a scalar is 0), counted without recursion
    and only up to `stop + 1` (enough to know it is over `stop`)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        depth += 1
        if depth > deepest:
            deepest = depth
            if deepest > stop:
                return deepest
        stack.extend((child, depth) for child in children if isinstance(child, (dict, list)))
    return deepest


def _too_deep(record: Record, max_depth: int) -> Rejection | None:
    """A rejection for a record nested deeper than `max_depth`, else None. A record whose
    bytes hold at most `max_depth` brackets cannot be deeper: that count is cheap. A
    script read whole is judged by the JSON config read with it."""
    value, raw = record.value, record.raw
    if isinstance(value, TextDocument):
        value, raw = value.config, None
    if raw is not None and raw.count(b"{") + raw.count(b"[") <= max_depth:
        return None
    if not isinstance(value, (dict, list)):
        return None
    depth = nesting_depth(value, max_depth)
    if depth <= max_depth:
        return None
    return Rejection(
        record.source,
        record.locator,
        "too_deep",
        f"the record nests lists and objects more than {max_depth} levels deep "
        "(raise --max-depth if this is real data)",
        raw=raw_text(record.raw, record.value),
    )


def guarded(
    path: str, items: Iterator[Record | Rejection], max_depth: int
) -> Iterator[Record | Rejection]:
    """`items` of the file `path` with too-deep records rejected, and whatever the reader
        raises turned into one final `unreadable_file` rejection naming the last good place
        (an InputError, for an input that cannot be used at all, still stops the command; so
    does a store that keeps failing, StorageUnavailable, so that no record is lost to it)."""
    last = path
    try:
        for item in items:
            if isinstance(item, Record):
                deep = _too_deep(item, max_depth)
                if deep is not None:
                    item = deep
            last = item.locator
            yield item
    except (InputError, StorageUnavailable):
        # not the file's fault: the input cannot be used at all (usage), or its store
        # keeps failing (the part stops, and the run resumes it)
        raise
    except Exception as err:  # any reader failure ends this file only
        where = "" if last == path else f" after {last}"
        yield Rejection(
            path,
            path,
            "unreadable_file",
            f"cannot read {path}{where}: {type(err).__name__}: {err}; the rest of the file is lost",
        )
