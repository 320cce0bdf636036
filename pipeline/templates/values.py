"""Template variables as plain JSON-like data, and the way JavaScript hosts print values."""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from pipeline.sources.jsonable import NotTextError, TooLargeError, to_jsonable
from pipeline.templates.errors import UnsafeTemplate

MAX_VARIABLE_VALUES = 1_000_000
"""How many values (nodes) the variables of one render may hold."""


def plain_variables(variables: Mapping[str, Any]) -> dict[str, Any]:
    """A private JSON-like copy of the variables (dates as ISO text, tuples as lists), so
    no engine ever sees an object with behaviour and no render can change the caller's data."""
    try:
        copied: dict[str, Any] = to_jsonable(dict(variables), budget=MAX_VARIABLE_VALUES)
    except TooLargeError as err:
        raise UnsafeTemplate(f"the variables are too large to render: {err}") from err
    except NotTextError as err:
        raise UnsafeTemplate(f"the variables cannot be rendered: {err}") from err
    except RecursionError as err:
        raise UnsafeTemplate("the variables nest too deeply (or refer to themselves)") from err
    return copied


def shortest_float(value: float, *, low: int, high: int, pad_exponent: bool) -> str:
    """`value` in its shortest round-trip digits, in exponent form when the decimal
    exponent is below `low` or at least `high` (the rule differs between hosts)."""
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    text = "".join(map(str, digits))
    point = len(text) + int(exponent)
    magnitude = point - 1
    prefix = "-" if sign else ""
    if low <= magnitude < high:
        if point <= 0:
            return f"{prefix}0.{'0' * -point}{text}"
        if point >= len(text):
            return f"{prefix}{text}{'0' * (point - len(text))}"
        return f"{prefix}{text[:point]}.{text[point:]}"
    mantissa = text[0] + (f".{text[1:]}" if len(text) > 1 else "")
    power = f"{abs(magnitude):02d}" if pad_exponent else str(abs(magnitude))
    return f"{prefix}{mantissa}e{'-' if magnitude < 0 else '+'}{power}"


def js_number(value: float) -> str:
    """A number as JavaScript's String(n) prints it (1.0 -> "1", 1e21 -> "1e+21")."""
    if value == 0:
        return "0"
    return shortest_float(value, low=-6, high=21, pad_exponent=False)


def js_text(value: Any) -> str:
    """A value as a JavaScript template host prints it: true/false, null as nothing,
    integral floats without ".0", arrays joined by commas. Objects print as JSON, where
    JavaScript would print the useless "[object Object]"."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return js_number(value) if isinstance(value, float) else str(value)
    if isinstance(value, list):
        return ",".join(js_text(item) for item in value)
    return json.dumps(value, ensure_ascii=False)
