"""Make values from YAML, Parquet or CSV JSON-compatible, so every record is plain JSON."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
from typing import Any

import orjson

SMALLEST_INTEGER = -(2**63)
LARGEST_INTEGER = 2**64 - 1
"""The integers JSON tools hold exactly (orjson, Arrow): signed 64-bit up to unsigned. An
integer beyond refuses to be written (orjson) or is read as an inexact float."""
_DIGITS_AS_ZEROS = bytes.maketrans(b"123456789", b"000000000")
_LONG_RUNS = (b"0" * 20, b"-" + b"0" * 19)
"""Runs of digits that may be an integer beyond 64 bits (2**64 has 20 digits, -2**63 - 1
has 19), which orjson reads as a float or refuses; 19-digit ids are never one. Searched in
the text with every digit made 0: a translate and two substring searches cost a twentieth
of a regular expression's scan, which every record of every file pays."""
_NOTED_PATHS = 3


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


def long_integers_as_text(value: Any) -> tuple[Any, tuple[str, ...]]:
    """`value` (JSON-compatible, freshly read: its lists and objects are changed in
    place) with every integer beyond 64 bits, which the outputs' JSON and Arrow cannot
    hold exactly, replaced by its exact digits as a string; and the note saying so and
    where (no note when it holds no such integer). Without recursion."""
    if _is_long_integer(value):
        return str(value), (_long_integers_note(["the value"]),)
    if not isinstance(value, (dict, list)):
        return value, ()
    found: list[str] = []
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        container, path = stack.pop()
        keys: Any = container.keys() if isinstance(container, dict) else range(len(container))
        for key in keys:
            item = container[key]
            if isinstance(item, (dict, list)):
                stack.append((item, _step(path, key)))
            elif _is_long_integer(item):
                found.append(_step(path, key))
                container[key] = str(item)
    if not found:
        return value, ()
    return value, (_long_integers_note(sorted(found)),)


def _is_long_integer(value: Any) -> bool:
    return isinstance(value, int) and not SMALLEST_INTEGER <= value <= LARGEST_INTEGER


def _step(path: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def _long_integers_note(paths: list[str]) -> str:
    shown = ", ".join(paths[:_NOTED_PATHS]) + (", ..." if len(paths) > _NOTED_PATHS else "")
    return (
        f"kept {len(paths)} integer(s) beyond 64 bits as text with their exact digits "
        f"({shown}): JSON tools cannot hold them as numbers"
    )


def may_hold_long_integers(data: bytes | str) -> bool:
    """Whether JSON text `data` may hold an integer beyond 64 bits (a long run of digits):
    when not, `long_integers_as_text` of its value has nothing to do."""
    return has_long_digit_run(data.encode() if isinstance(data, str) else data)


def has_long_digit_run(raw: bytes) -> bool:
    """Whether the bytes hold a run of digits long enough to be an integer beyond 64 bits."""
    zeros = raw.translate(_DIGITS_AS_ZEROS)
    return any(run in zeros for run in _LONG_RUNS)


def loads_exact(data: bytes | str) -> Any:
    """The JSON value of `data` as orjson reads it, but integers beyond 64 bits kept exact
    (the standard library reads the text again when a long run of digits is there, which
    is also the only case where orjson refuses an integer as "infinity"). Raises
    orjson.JSONDecodeError as orjson does for anything else."""
    raw = data.encode() if isinstance(data, str) else data
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as err:
        if not has_long_digit_run(raw) or "infinity" not in str(err):
            raise
        return _exact_or_raise(raw, err)
    if has_long_digit_run(raw):
        try:
            return json.loads(raw)
        except RecursionError:  # nested deeper than the standard library reads
            return value
    return value


def _exact_or_raise(raw: bytes, err: orjson.JSONDecodeError) -> Any:
    """`raw` read by the standard library when it is JSON orjson refused only for an
    integer too long for a double; else orjson's error `err` is raised."""

    def refuse(text: str) -> Any:
        raise ValueError(text)

    def finite(text: str) -> float:
        number = float(text)
        if not math.isfinite(number):
            raise ValueError(text)
        return number

    try:
        value = json.loads(raw, parse_constant=refuse, parse_float=finite)
        # what else orjson refuses (a lone surrogate) is no UTF-8 either
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except (ValueError, RecursionError):  # incl. an integer of more digits than Python reads
        raise err from None
    return value
