"""Make values from YAML, Parquet or CSV JSON-compatible, so every record is plain JSON."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import math
from typing import Any


class TooLargeError(ValueError):
    """The value expands to more nodes than allowed (e.g. YAML alias bombs)."""


class NotTextError(ValueError):
    """A string holds a lone surrogate (YAML's `"\\ud800"` escape allows one): not Unicode
    text, so it can be neither written as UTF-8 nor tokenized."""


def to_jsonable(value: Any, budget: int = 1_000_000) -> Any:
    """A JSON-compatible copy: dates become ISO strings, bytes base64, sets and tuples
    lists, keys strings, non-finite floats strings. Raises TooLargeError past `budget` nodes,
    NotTextError on a string that is not Unicode text."""
    remaining = [budget]

    def convert(item: Any) -> Any:
        remaining[0] -= 1
        if remaining[0] < 0:
            raise TooLargeError(f"the document expands to more than {budget} values")
        if isinstance(item, str):
            return item if item.isascii() else _unicode(item)
        if item is None or isinstance(item, (bool, int)):
            return item
        if isinstance(item, float):
            return item if math.isfinite(item) else str(item)
        if isinstance(item, dict):
            return {_key(k): convert(v) for k, v in item.items()}
        if isinstance(item, (list, tuple, set, frozenset)):
            items = sorted(item, key=repr) if isinstance(item, (set, frozenset)) else item
            return [convert(v) for v in items]
        if isinstance(item, (dt.datetime, dt.date, dt.time)):
            return item.isoformat()
        if isinstance(item, dt.timedelta):
            return item.total_seconds()
        if isinstance(item, decimal.Decimal):
            return str(item)
        if isinstance(item, (bytes, bytearray, memoryview)):
            return base64.b64encode(bytes(item)).decode("ascii")
        return str(item)

    return convert(value)


def _unicode(text: str) -> str:
    """`text`, if it encodes as UTF-8 (it holds no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        point = ord(text[err.start])
        raise NotTextError(
            f"a string holds a lone surrogate (U+{point:04X}) at character {err.start}, "
            "which is not Unicode text"
        ) from None
    return text


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key if key.isascii() else _unicode(key)
    if isinstance(key, bool) or key is None:
        return {True: "true", False: "false", None: "null"}[key]
    return str(key)
