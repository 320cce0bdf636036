"""Make values from YAML, Parquet or CSV JSON-compatible, so every record is plain JSON."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import math
from typing import Any


class TooLargeError(ValueError):
    """The value expands to more nodes than allowed (e.g. YAML alias bombs)."""


def to_jsonable(value: Any, budget: int = 1_000_000) -> Any:
    """A JSON-compatible copy: dates become ISO strings, bytes base64, sets and tuples
    lists, keys strings, non-finite floats strings. Raises TooLargeError past `budget` nodes."""
    remaining = [budget]

    def convert(item: Any) -> Any:
        remaining[0] -= 1
        if remaining[0] < 0:
            raise TooLargeError(f"the document expands to more than {budget} values")
        if item is None or isinstance(item, (str, bool, int)):
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


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, bool) or key is None:
        return {True: "true", False: "false", None: "null"}[key]
    return str(key)
