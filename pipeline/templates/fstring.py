"""Python str.format templates as LangChain writes them (`{name}`, `{{`/`}}` escapes).

The template is tokenized with `string.Formatter().parse` and assembled here: str.format
is never called on it, so a field can reach nothing but a variable's plain value.
Attribute or index access (`{a.__class__}`, `{a[0]}`) is refused as unsafe. Values print
as Python prints them (`format(value, spec)`), lists and dicts as their repr.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable
from typing import Any

from pipeline.templates.errors import TemplateError, UnsafeTemplate, line_at
from pipeline.templates.limits import Budget

_SPEC_NUMBERS = re.compile(r"^(?:.?[<>=^])?[-+ ]?z?#?0?(\d*)[,_]?(?:\.(\d+))?[a-zA-Z%]?$")
_CONVERSIONS: dict[str, Callable[[object], str]] = {"r": repr, "s": str, "a": ascii}


def render(template: str, variables: dict[str, Any], budget: Budget) -> None:
    """Render a str.format-style template into `budget`."""
    for literal, field, spec, conversion in _parse(template):
        budget.write(literal)
        if field is not None:
            budget.write(_field(field, spec or "", conversion, variables, budget))


def _parse(template: str) -> list[tuple[str, str | None, str | None, str | None]]:
    try:
        return list(string.Formatter().parse(template))
    except ValueError as err:
        raise TemplateError(f"bad format string: {err}", line=_error_line(template)) from err


def _error_line(template: str) -> int | None:
    """The line of the first unmatched brace, found in one pass over the template."""
    depth, start, index = 0, 0, 0
    while index < len(template):
        char = template[index]
        if depth == 0 and template.startswith(("{{", "}}"), index):
            index += 2
            continue
        if depth == 0 and char == "}":
            return line_at(template, index)
        if char == "{":
            depth, start = depth + 1, start if depth else index
        elif char == "}":
            depth -= 1
        index += 1
    return line_at(template, start) if depth else None


def _placeholder(field: str, spec: str, conversion: str | None) -> str:
    shown = field + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "")
    return "{" + shown + "}"


def _field(
    field: str, spec: str, conversion: str | None, variables: dict[str, Any], budget: Budget
) -> str:
    written = _placeholder(field, spec, conversion)
    name = _checked_name(field, written)
    if conversion and conversion not in _CONVERSIONS:
        raise TemplateError(f"{written} has an unknown conversion !{conversion}", written)
    if "{" in spec:
        nested = _nested_spec(spec, variables, written)
        if nested is None:
            budget.miss(name)
            return written
        spec = nested
    if name not in variables:
        budget.miss(name)
        return written
    value = variables[name]
    if conversion:
        value = _CONVERSIONS[conversion](value)
    _check_spec(spec, written, budget)
    try:
        return format(value, spec)
    except (TypeError, ValueError) as err:
        raise TemplateError(f"cannot format {written}: {err}", construct=written) from err


def _checked_name(field: str, written: str) -> str:
    if field == "" or field.isdigit():
        raise TemplateError(
            f"positional field {written}: LangChain templates name every variable",
            construct=written,
        )
    if "." in field or "[" in field:
        raise UnsafeTemplate(
            f"{written} reaches into a value (attribute or index access), which is refused",
            construct=written,
        )
    return field


def _nested_spec(spec: str, variables: dict[str, Any], written: str) -> str | None:
    """A format spec with fields in it (`{x:{width}}`), filled in; None when one is missing."""
    parts = []
    for literal, field, inner_spec, conversion in _parse(spec):
        parts.append(literal)
        if field is None:
            continue
        if inner_spec or conversion:
            raise TemplateError(f"{written} nests a formatted field in its spec", construct=written)
        name = _checked_name(field, written)
        if name not in variables:
            return None
        parts.append(str(variables[name]))
    return "".join(parts)


def _check_spec(spec: str, written: str, budget: Budget) -> None:
    """Refuse a width or precision that alone would exceed the output bound."""
    match = _SPEC_NUMBERS.match(spec)
    if not match:
        return
    for number in match.groups():
        if number:
            size = int(number) if len(number) <= 15 else 10**15
            budget.check_size(size, f"the format spec of {written}")
