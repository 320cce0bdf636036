"""Worst-case sizes of the operations that multiply text, checked before they run, so a
template cannot allocate far past the output bound in one filter or method call."""

from __future__ import annotations

import re
import string
from collections.abc import Callable
from typing import Any

from pipeline.templates.errors import UnsafeTemplate
from pipeline.templates.limits import Budget

_PERCENT_NUMBERS = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\d*)(?:\.(\d+))?")
_SPEC_NUMBERS = re.compile(r"(\d+)")
_MAX_POWER_BITS = 4096


def check_call(
    budget: Budget, name: str, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    """Refuse filter or method `name` on `value` when an integer argument, or the worst
    case of what it makes, exceeds the output bound."""
    for number in (a for a in (*args, *kwargs.values()) if type(a) is int):
        budget.check_size(abs(number), f"the argument {number} of {name}")
    estimate = _ESTIMATES.get(name)
    if estimate is not None:
        budget.check_size(estimate(value, args, kwargs), f"{name}(...)")


def check_binop(budget: Budget, operator: str, left: Any, right: Any) -> None:
    """Refuse `left <operator> right` when it would exceed the output bound."""
    if operator == "*":
        for sequence, count in ((left, right), (right, left)):
            if isinstance(sequence, (str, list)) and type(count) is int:
                budget.check_size(len(sequence) * count, "the * repetition")
    elif operator == "+" and isinstance(left, (str, list)) and isinstance(right, (str, list)):
        budget.check_size(len(left) + len(right), "the + concatenation")
    elif operator == "%" and isinstance(left, str):
        check_percent_widths(budget, left)
    elif operator == "**" and _power_bits(left, right) > _MAX_POWER_BITS:
        raise UnsafeTemplate(f"{left} ** {right} is too large a number to compute", "**")


def _power_bits(base: Any, exponent: Any) -> int:
    """About how many bits `base ** exponent` needs (0 unless both are integers)."""
    if type(base) is not int or type(exponent) is not int or abs(base) < 2:
        return 0
    return exponent * abs(base).bit_length()


def check_percent_widths(budget: Budget, text: str) -> None:
    """Refuse a %-format string whose widths or precisions exceed the output bound."""
    for width, precision in _PERCENT_NUMBERS.findall(text):
        for number in (width, precision):
            budget.check_size(_bounded_int(number), "a % format width")


def check_format_fields(budget: Budget, text: str) -> None:
    """Refuse a str.format string with nested specs or widths past the output bound."""
    try:
        fields = list(string.Formatter().parse(text))
    except ValueError:
        return
    for _, _, spec, _ in fields:
        if spec and "{" in spec:
            raise UnsafeTemplate(f"the nested format spec {spec!r} is refused", spec)
        for number in _SPEC_NUMBERS.findall(spec or ""):
            budget.check_size(_bounded_int(number), "a format width")


def _bounded_int(digits: str) -> int:
    if not digits:
        return 0
    return int(digits) if len(digits) <= 15 else 10**15


def _length(value: Any) -> int:
    return len(value) if isinstance(value, (str, list, tuple, dict)) else len(str(value))


def _first(args: tuple[Any, ...], kwargs: dict[str, Any], key: str, default: Any) -> Any:
    return args[0] if args else kwargs.get(key, default)


def _join_size(value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    if isinstance(value, str):
        items = args[0] if args else ()
        separator = value
    else:
        items, separator = value, str(_first(args, kwargs, "d", ""))
    if not hasattr(items, "__len__"):
        return 0
    return len(separator) * len(items) + sum(_length(item) for item in items)


def _replace_size(value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    text = str(value)
    old = str(args[0]) if args else str(kwargs.get("old", ""))
    new = str(args[1]) if len(args) > 1 else str(kwargs.get("new", ""))
    count = text.count(old) if old else len(text) + 1
    return len(text) + count * len(new)


def _indent_size(value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    width = _first(args, kwargs, "width", 4)
    per_line = len(width) if isinstance(width, str) else (width if type(width) is int else 0)
    text = str(value)
    return len(text) + per_line * (text.count("\n") + 1)


def _wordwrap_size(value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    text = str(value)
    width = max(int(_first(args, kwargs, "width", 79)), 1)
    wrapstring = args[2] if len(args) > 2 else kwargs.get("wrapstring") or "\n"
    return len(text) + (len(text) // width + 1) * len(str(wrapstring))


def _tojson_size(value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    indent = _first(args, kwargs, "indent", None)
    return _length(repr(value)) * (1 + (indent if type(indent) is int else 0))


def _width_size(value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    width = _first(args, kwargs, "width", 80)
    return max(_length(value), width if type(width) is int else 0)


def _expandtabs_size(value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    size = _first(args, kwargs, "tabsize", 8)
    text = str(value)
    return len(text) + text.count("\t") * (size if type(size) is int else 8)


_ESTIMATES: dict[str, Callable[[Any, tuple[Any, ...], dict[str, Any]], int]] = {
    "join": _join_size,
    "replace": _replace_size,
    "indent": _indent_size,
    "wordwrap": _wordwrap_size,
    "tojson": _tojson_size,
    "center": _width_size,
    "ljust": _width_size,
    "rjust": _width_size,
    "zfill": _width_size,
    "expandtabs": _expandtabs_size,
}
"""Worst-case characters of the operations that can multiply their input."""
