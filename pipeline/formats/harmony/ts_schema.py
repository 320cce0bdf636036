"""Harmony's TypeScript-like parameter types <-> JSON Schema.

Harmony declares a tool as `type name = (_: {...}) => any;` (pipeline/formats/typescript.py
only writes TypeScript, in another layout, so this reads and writes Harmony's). Read:
primitives, string/number literals (an `enum`), `T[]`, `Array<T>`, `Record<string, T>`,
objects whose `?` marks optional properties, inline unions (a `type` list, an `enum`, or
`anyOf`), and the multi-line ` | variant` form (`oneOf`); `//` comments give titles
(a line then `//`), descriptions, `Examples:` and `default:` values. Written in the
layout of the openai/harmony renderer, so what it renders reads back the same; where that
renderer writes something that cannot be read back (a multi-line description, a union
inside `[]`, a key that is not a name, a variant's description it leaves out when the
property has one too), each line is commented, the union bracketed, the key quoted, the
description kept. `integer` is written as `number`: the difference does not survive.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

MAX_DEPTH = 64
"""Types nested deeper are refused when read, and written as `any`."""
PRIMITIVES = {"string": "string", "number": "number", "boolean": "boolean", "null": "null"}
PLAIN_KEY = re.compile(r"[A-Za-z_$][\w$.\-]*")
OPEN_TYPES = ("any", "unknown")
TYPE_LIST_NAMES = {**PRIMITIVES, "integer": "number", "object": "object", "array": "Array<any>"}
"""How each name of a `type` list is written."""
_EXAMPLE = re.compile(r'- ".*"')

_TOKEN = re.compile(
    r"(?P<comment>//[^\n]*)"
    r'|(?P<string>"(?:[^"\\\n]|\\.)*")'
    r"|(?P<number>-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)"
    r"|(?P<arrow>=>)"
    r"|(?P<name>[A-Za-z_$][\w$.\-]*)"
    r"|(?P<punct>[{}()\[\]<>:;,?|=])"
    r"|(?P<newline>\n)"
    r"|(?P<space>[ \t\r]+)"
    r"|(?P<bad>.)"
)


class TypeScriptError(ValueError):
    """A declaration that does not read as Harmony TypeScript (the line is given)."""


@dataclass(frozen=True, slots=True)
class Token:
    """One lexical token (a comment, string, number, name or punctuation) and its line."""

    kind: str
    text: str
    line: int
    first: bool
    """Whether it is the first token on its line (a comment's own line, or a trailing one)."""


@dataclass(frozen=True, slots=True)
class Declared:
    """One `type name = (...) => any;`: the tool, its description, its parameters
    (None for `() => any`)."""

    name: str
    description: str | None
    parameters: Any = field(default=None)


def _tokens(text: str, first_line: int) -> Iterator[Token]:
    line, first = first_line, True
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup or "bad"
        if kind == "newline":
            line, first = line + 1, True
        elif kind != "space":
            yield Token(kind, match.group(), line, first)
            first = False


def _comment_text(token: Token) -> str:
    """A comment's text: after `//` and the one space that follows it."""
    text = token.text[2:]
    return text[1:] if text.startswith(" ") else text


def _unquote(text: str) -> str:
    """A quoted string as written: JSON-decoded when it is valid JSON, else the text
    between the quotes (the harmony renderer does not escape)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return text[1:-1]
    return value if isinstance(value, str) else text[1:-1]


def _has_enum(schema: dict[str, Any]) -> bool:
    return isinstance(schema.get("enum"), list) and bool(schema["enum"])


def _default_value(text: str, schema: dict[str, Any]) -> Any:
    """A `default:` comment's value: quoted text is a string, an enum's default is written
    bare, anything else is JSON (or, failing that, the text)."""
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return _unquote(text)
    if _has_enum(schema):
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _set_trailing(schema: dict[str, Any], text: str) -> None:
    """A comment after a property or variant: `default: X`, a description, or both
    (`description default: X`)."""
    description, marker, default = text.rpartition("default: ")
    if marker and (not description or description.endswith(" ")):
        schema["default"] = _default_value(default, schema)
        description = description.rstrip()
    else:
        description = text
    if description:
        schema.setdefault("description", description)


def _set_leading(schema: dict[str, Any], comments: list[Token]) -> None:
    """Comment lines above a property: a title (a line, then a bare `//`), description
    lines, `Examples:` with `- "x"` lines, and (above a ` | ` union) `default: X`."""
    lines = [_comment_text(c) for c in comments]
    if len(comments) >= 2 and comments[1].text == "//" and lines[0]:
        schema["title"] = lines[0]
        lines = lines[2:]
    if "oneOf" in schema and lines and lines[-1].startswith("default: "):
        schema["default"] = _default_value(lines.pop()[len("default: ") :], schema)
    if "Examples:" in lines:
        at = end = lines.index("Examples:")
        while end + 1 < len(lines) and _EXAMPLE.fullmatch(lines[end + 1]):
            end += 1
        if end > at:
            schema["examples"] = [_unquote(line[2:]) for line in lines[at + 1 : end + 1]]
            lines = lines[:at] + lines[end + 1 :]
    if lines:
        schema["description"] = "\n".join(lines)


class _Reader:
    """A recursive-descent reader over one declaration block's tokens."""

    def __init__(self, text: str, first_line: int):
        self.tokens = list(_tokens(text, first_line))
        self.at = 0
        self.depth = 0

    # ------------------------------------------------------------------ tokens

    def _peek(self) -> Token | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def _fail(self, expected: str) -> TypeScriptError:
        token = self._peek()
        if token is None:
            return TypeScriptError(f"expected {expected}, found the end of the declarations")
        return TypeScriptError(f"line {token.line}: expected {expected}, found {token.text!r}")

    def _accept(self, text: str) -> Token | None:
        token = self._peek()
        if token is not None and token.text == text and token.kind != "string":
            self.at += 1
            return token
        return None

    def _expect(self, text: str) -> Token:
        token = self._accept(text)
        if token is None:
            raise self._fail(repr(text))
        return token

    def _name(self, what: str) -> str:
        token = self._peek()
        if token is None or token.kind != "name":
            raise self._fail(what)
        self.at += 1
        return token.text

    def _comments(self, *, leading: bool | None = None) -> list[Token]:
        """The comments next in line (only those on their own line, or only one that
        trails the previous token on its line, when `leading` says which)."""
        found = []
        while (token := self._peek()) is not None and token.kind == "comment":
            if leading is not None and token.first != leading:
                break
            found.append(token)
            self.at += 1
            if leading is False:
                break
        return found

    # ------------------------------------------------------------------ declarations

    def declarations(self) -> list[Declared]:
        """Every `type name = (_: T) => any;` with the comment lines above it."""
        declared = []
        while self._peek() is not None:
            comments = self._comments()
            if self._peek() is None:
                raise self._fail("a `type` declaration after the comment")
            if self._name("`type`") != "type":
                self.at -= 1
                raise self._fail("`type`")
            name = self._name("the tool's name")
            self._expect("=")
            self._expect("(")
            parameters = None
            if not self._accept(")"):
                if self._name("`_`") != "_":
                    self.at -= 1
                    raise self._fail("`_` (the one argument)")
                self._expect(":")
                parameters = self.type()
                self._expect(")")
            self._expect("=>")
            self.type()  # the result type: `any` by convention, never used
            self._expect(";")
            description = "\n".join(_comment_text(c) for c in comments) or None
            declared.append(Declared(name, description, parameters))
        return declared

    # ------------------------------------------------------------------ types

    def type(self) -> dict[str, Any]:
        """A type: inline (`A | B`), or the multi-line form whose variants each start a
        line with `|` and may carry a trailing comment (`oneOf`)."""
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise TypeScriptError(f"types nested deeper than {MAX_DEPTH} levels")
        try:
            bar = self._peek()
            if bar is not None and bar.text == "|" and bar.first:
                return {"oneOf": self._variants()}
            return self._inline()
        finally:
            self.depth -= 1

    def _variants(self) -> list[dict[str, Any]]:
        variants = []
        while (bar := self._peek()) is not None and bar.text == "|" and bar.first:
            self.at += 1
            variant = self._inline()
            for comment in self._comments(leading=False):
                _set_trailing(variant, _comment_text(comment))
            variants.append(variant)
        return variants

    def _inline(self) -> dict[str, Any]:
        members = [self._member()]
        while (bar := self._peek()) is not None and bar.text == "|" and not bar.first:
            self.at += 1
            members.append(self._member())
        return members[0] if len(members) == 1 else _union(members)

    def _member(self) -> dict[str, Any]:
        schema = self._primary()
        while self._accept("["):
            self._expect("]")
            schema = {"type": "array", "items": schema}
        return schema

    def _primary(self) -> dict[str, Any]:
        description = "\n".join(_comment_text(c) for c in self._comments())
        token = self._peek()
        if token is None:
            raise self._fail("a type")
        self.at += 1
        if token.text == "{":
            schema = self._object()
        elif token.text == "(":
            schema = self.type()
            self._expect(")")
        elif token.kind == "string":
            schema = {"type": "string", "enum": [_unquote(token.text)]}
        elif token.kind == "number":
            schema = {"enum": [json.loads(token.text)]}
        elif token.kind == "name":
            schema = self._named(token.text)
        else:
            self.at -= 1
            raise self._fail("a type")
        if description:
            schema.setdefault("description", description)
        return schema

    def _named(self, name: str) -> dict[str, Any]:
        if name in PRIMITIVES:
            return {"type": PRIMITIVES[name]}
        if name in OPEN_TYPES:
            return {}
        if name in ("true", "false"):
            return {"enum": [name == "true"]}
        if name == "object":
            return {"type": "object"}
        if name == "Array":
            self._expect("<")
            items = self.type()
            self._expect(">")
            return {"type": "array"} if items == {} else {"type": "array", "items": items}
        if name == "Record":
            self._expect("<")
            self._named(self._name("`string`"))
            self._expect(",")
            values = self.type()
            self._expect(">")
            return {"type": "object", "additionalProperties": values}
        self.at -= 1
        raise self._fail("a type (string, number, boolean, null, any, an object, a literal)")

    def _object(self) -> dict[str, Any]:
        properties: dict[str, Any] = {}
        required: list[str] = []
        while not self._accept("}"):
            leading = self._comments()
            token = self._peek()
            if token is None or token.kind not in ("name", "string"):
                raise self._fail("a property name")
            self.at += 1
            key = _unquote(token.text) if token.kind == "string" else token.text
            if key in properties:
                raise TypeScriptError(f"line {token.line}: property {key!r} is declared twice")
            optional = self._accept("?") is not None
            self._expect(":")
            schema = self.type()
            if not (self._accept(",") or self._accept(";")) and (
                (after := self._peek()) is None or after.text != "}"
            ):
                raise self._fail("`,` after the property")
            for comment in self._comments(leading=False):
                _set_trailing(schema, _comment_text(comment))
            _set_leading(schema, leading)
            properties[key] = schema
            if not optional:
                required.append(key)
        if not properties:
            return {"type": "object"}
        result: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            result["required"] = required
        return result


def _union(members: list[dict[str, Any]]) -> dict[str, Any]:
    """An inline union: literals make an `enum`, bare primitives a `type` list, anything
    else `anyOf`."""
    if all(set(m) <= {"type", "enum"} and len(m.get("enum", ())) == 1 for m in members):
        values = [m["enum"][0] for m in members]
        if all(m.get("type") == "string" for m in members):
            return {"type": "string", "enum": values}
        return {"enum": values}
    if all(set(m) == {"type"} and isinstance(m["type"], str) for m in members):
        return {"type": [m["type"] for m in members]}
    return {"anyOf": members}


def read_declarations(text: str, first_line: int = 1) -> list[Declared]:
    """The tools a namespace body declares, in order; raises TypeScriptError, whose line
    numbers count from `first_line`."""
    return _Reader(text, first_line).declarations()


# ---------------------------------------------------------------------- writing


def _comment_lines(text: str, indent: str) -> str:
    return "".join(f"{indent}// {line}\n" for line in text.split("\n"))


def _quoted(text: str) -> str:
    """A string as Harmony quotes it: `"text"` (escaped only where it must be, to read back)."""
    return json.dumps(text, ensure_ascii=False)


def _default_text(value: Any, schema: dict[str, Any]) -> str:
    """A default as the harmony renderer writes it: an enum's string bare, other strings
    quoted, anything else as JSON."""
    if isinstance(value, str):
        bare = _has_enum(schema) and "\n" not in value and not value.startswith('"')
        return value if bare else _quoted(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _trailing(schema: dict[str, Any]) -> str:
    comments = []
    description = schema.get("description")
    if isinstance(description, str) and description:
        comments.append(" ".join(description.splitlines()))
    if "default" in schema:
        comments.append(f"default: {_default_text(schema['default'], schema)}")
    return f" // {' '.join(comments)}" if comments else ""


def _literals(values: list[Any]) -> str:
    """An enum as a union of literals; `any` when a value has no literal (null, a list)."""
    if all(isinstance(v, (str, int, float)) for v in values):
        return " | ".join(json.dumps(v, ensure_ascii=False) for v in values)
    return "any"


def _grouped(text: str) -> str:
    """A type inside a union, bracketed when it is itself a multi-line ` | ` union."""
    return f"({text})" if text.startswith("\n") else text


def write_type(schema: Any, indent: str = "", depth: int = 0) -> str:
    """A JSON Schema as Harmony TypeScript, laid out as the openai/harmony renderer lays
    it out (objects' properties start at `indent`)."""
    if not isinstance(schema, dict) or depth > MAX_DEPTH:
        return "any"
    variants = schema.get("oneOf")
    if isinstance(variants, list) and variants:
        text = "".join(
            f"\n{indent} | {_grouped(write_type(v, indent + '   ', depth + 1))}"
            + (_trailing(v) if isinstance(v, dict) else "")
            for v in variants
        )
        # what follows the type must not land in the last variant's comment
        return text + f"\n{indent}" if "//" in text.rsplit("\n", 1)[-1] else text
    kind = schema.get("type")
    if isinstance(kind, list):
        names = [TYPE_LIST_NAMES.get(k, "any") for k in kind if isinstance(k, str)]
        if names:
            return " | ".join(names)
    if kind == "object":
        return _write_object(schema, indent, depth)
    if kind == "array":
        if "items" not in schema:
            return "Array<any>"
        items = write_type(schema["items"], indent, depth + 1)
        return f"({items})[]" if " | " in items else f"{items}[]"
    if kind in ("number", "integer"):
        return "number"
    if _has_enum(schema):
        return _literals(schema["enum"])
    if isinstance(kind, str) and kind in PRIMITIVES:
        return kind
    any_of = schema.get("anyOf")
    if isinstance(any_of, list) and any_of:
        return " | ".join(_grouped(write_type(v, indent, depth + 1)) for v in any_of)
    return "any"


def _write_object(schema: dict[str, Any], indent: str, depth: int) -> str:
    out = ""
    description = schema.get("description")
    if isinstance(description, str) and description:
        out += _comment_lines(description, indent)
    properties = schema.get("properties")
    values = schema.get("additionalProperties")
    if not properties and isinstance(values, dict):
        return out + f"Record<string, {write_type(values, indent, depth + 1)}>"
    out += "{\n"
    if isinstance(properties, dict):
        required = schema.get("required")
        needed = (
            {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
        )
        for key, value in properties.items():
            prop = value if isinstance(value, dict) else {}
            name = key if PLAIN_KEY.fullmatch(key) else json.dumps(key, ensure_ascii=False)
            out += _write_property(name, "" if key in needed else "?", prop, indent, depth)
    return out + f"{indent}}}"


def _write_property(name: str, mark: str, prop: dict[str, Any], indent: str, depth: int) -> str:
    out = ""
    title = prop.get("title")
    if isinstance(title, str) and title.strip():
        out += f"{indent}// {' '.join(title.splitlines())}\n{indent}//\n"
    variants = prop.get("oneOf")
    given = prop.get("description")
    description = given if isinstance(given, str) else ""
    described = bool(description)
    if not (isinstance(variants, list) and variants) and described:
        out += _comment_lines(description, indent)
    examples = prop.get("examples")
    shown = [e for e in examples if isinstance(e, str)] if isinstance(examples, list) else []
    if shown:
        out += f"{indent}// Examples:\n"
        out += "".join(f"{indent}// - {_quoted(e)}\n" for e in shown)
    if not (isinstance(variants, list) and variants):
        text = write_type(prop, indent + "    ", depth + 1)
        default = (
            f" // default: {_default_text(prop['default'], prop)}" if "default" in prop else ""
        )
        return out + f"{indent}{name}{mark}: {text},{default}\n"
    if described:
        out += _comment_lines(description, indent)
    if "default" in prop:
        out += f"{indent}// default: {_default_text(prop['default'], prop)}\n"
    out += f"{indent}{name}{mark}:\n"
    for variant in variants:
        variant = variant if isinstance(variant, dict) else {}
        text = write_type(variant, indent + "   ", depth + 1)
        out += f"{indent} | {text}{_trailing(variant)}\n"
    return out + f"{indent},\n"


def write_declaration(name: str, description: str | None, parameters: Any) -> str:
    """`type name = (_: T) => any;` with the description's lines as comments above."""
    comments = "".join(f"// {line}\n" for line in description.split("\n")) if description else ""
    if parameters is None:
        return f"{comments}type {name} = () => any;"
    return f"{comments}type {name} = (_: {write_type(parameters)}) => any;"
