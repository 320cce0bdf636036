"""JSON Schema -> TypeScript type text, the schema language the MMS spec shows tools in.

Types, enums as unions of literals, optional properties with `?`, descriptions as `//`
comments, nested objects and arrays. Only reads the schema; unknown keywords are ignored
and anything it cannot express becomes `unknown`, so any schema renders.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

INDENT = "  "
MAX_DEPTH = 12
"""Nesting deeper than this renders as `unknown` (guards against self-similar schemas)."""

_IDENTIFIER = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")
_PRIMITIVES = {
    "string": "string",
    "number": "number",
    "integer": "number",
    "boolean": "boolean",
    "null": "null",
}


def schema_to_typescript(name: str, schema: Any, description: str | None = None) -> str:
    """A `type Name = {...}` declaration for a tool's parameter schema, with the tool's
    description as a leading comment."""
    lines = _comment_lines(description, "")
    lines.append(f"type {type_name(name)} = {_type(schema, 0)};")
    return "\n".join(lines)


def type_name(name: str) -> str:
    """A TypeScript identifier for a tool name: `get_weather` -> `GetWeather`."""
    words = [w for w in re.split(r"[^A-Za-z0-9]+", name) if w]
    ident = "".join(w[:1].upper() + w[1:] for w in words) or "Tool"
    return ident if not ident[0].isdigit() else f"T{ident}"


def _comment_lines(text: Any, indent: str) -> list[str]:
    if not isinstance(text, str) or not text.strip():
        return []
    return [f"{indent}// {line.rstrip()}".rstrip() for line in text.strip().splitlines()]


def _literal(value: Any) -> str:
    return orjson.dumps(value).decode() if isinstance(value, (str, int, float, bool)) else "null"


def _type(schema: Any, depth: int) -> str:
    if not isinstance(schema, dict) or depth > MAX_DEPTH:
        return "unknown"
    combined = _combination(schema, depth)
    return combined if combined is not None else _of_kind(schema, depth)


def _combination(schema: dict[str, Any], depth: int) -> str | None:
    """The type of a `const`, `enum`, `anyOf`/`oneOf` or `allOf` schema; None for others."""
    if "const" in schema:
        return _literal(schema["const"])
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return " | ".join(_literal(v) for v in enum)
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            return " | ".join(_type(option, depth + 1) for option in options)
    all_of = schema.get("allOf")
    if isinstance(all_of, list) and all_of:
        return " & ".join(_type(part, depth + 1) for part in all_of)
    return None


def _of_kind(schema: dict[str, Any], depth: int) -> str:
    """The type a schema's `type` (or its `items` or `properties`) says."""
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(_type({**schema, "type": k}, depth) for k in kind) or "unknown"
    if isinstance(kind, str) and kind in _PRIMITIVES:
        return _PRIMITIVES[kind]
    if kind == "array" or "items" in schema:
        item = _type(schema.get("items"), depth + 1)
        return f"({item})[]" if " " in item else f"{item}[]"
    if kind == "object" or "properties" in schema:
        return _object(schema, depth)
    return "unknown"


def _object(schema: dict[str, Any], depth: int) -> str:
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not properties:
        extra = schema.get("additionalProperties")
        value = _type(extra, depth + 1) if isinstance(extra, dict) else "unknown"
        return f"Record<string, {value}>"
    required = schema.get("required")
    required_names = (
        {n for n in required if isinstance(n, str)} if isinstance(required, list) else set()
    )
    inner = INDENT * (depth + 1)
    lines = ["{"]
    for key, prop in properties.items():
        lines.extend(
            _comment_lines(prop.get("description") if isinstance(prop, dict) else None, inner)
        )
        default = prop.get("default") if isinstance(prop, dict) else None
        if default is not None:
            lines.append(f"{inner}// default: {orjson.dumps(default).decode()}")
        field = key if _IDENTIFIER.match(key) else orjson.dumps(key).decode()
        optional = "" if key in required_names else "?"
        lines.append(f"{inner}{field}{optional}: {_type(prop, depth + 1)},")
    lines.append(INDENT * depth + "}")
    return "\n".join(lines)
