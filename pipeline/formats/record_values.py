"""Reading the values of a record, for every adapter: JSON kinds for error messages, tool
definitions and turn lists that quarantine a record naming what is wrong, and JSON text
parsed and written exactly (integers of any size, one spelling for equal values)."""

from __future__ import annotations

import json
from typing import Any

import orjson

from pipeline.capabilities import ToolDefinitionError, ToolSpec, parse_tool_definitions
from pipeline.quarantine import RecordRejected
from pipeline.sources.jsonable import has_long_digit_run


def json_kind(value: Any) -> str:
    """The JSON name of a parsed value's type, for error messages: object, array, ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    names: dict[type, str] = {str: "string", list: "array", dict: "object"}
    return names.get(type(value), type(value).__name__)


def a_json_kind(value: Any) -> str:
    """`json_kind` with its article: "an object", "a string", "null"."""
    kind = json_kind(value)
    return kind if kind == "null" else f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"


def tool_specs(value: Any, where: str = "tools") -> list[ToolSpec]:
    """A record's tool definitions (any ecosystem shape); unreadable ones quarantine the
    record as `invalid_tools`, naming the entry at fault."""
    try:
        return parse_tool_definitions(value, where)
    except ToolDefinitionError as err:
        raise RecordRejected("invalid_tools", str(err)) from None


def turn_list(data: dict[str, Any], key: str, items: str) -> list[Any]:
    """The record's list of turns under `key`: missing_field when it is not a list,
    empty_conversation when it is empty."""
    value = data.get(key)
    if not isinstance(value, list):
        raise RecordRejected(
            "missing_field", f"{key} is {a_json_kind(value)} (expected a list of {items})"
        )
    if not value:
        raise RecordRejected("empty_conversation", f"{key} is an empty list")
    return value


def exact_json(text: str) -> Any:
    """The JSON value of `text`, integers of any size kept exact (orjson is used, and the
    standard library only when a long run of digits is there). Raises orjson's error."""
    value = orjson.loads(text)
    if has_long_digit_run(text.encode()):
        value = json.loads(text)
    return value


def canonical_json(value: Any) -> str:
    """Compact JSON with sorted keys: one spelling for equal values. Integers beyond 64
    bits, which orjson refuses, are spelled by the standard library."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
