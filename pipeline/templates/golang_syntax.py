"""Go text/template source -> a tree of text and actions (the subset we render).

Actions: `{{pipeline}}`, `{{if}}` / `{{else if}}` / `{{else}}` / `{{end}}`, `{{range}}`
(with `$e :=` or `$i, $e :=`), `{{with}}` (also `{{else with}}`), `{{$x := ...}}` /
`{{$x = ...}}`, `{{break}}` / `{{continue}}`, comments `{{/* */}}`, trim markers
`{{- ` and ` -}}`. A pipeline is one operand - `.`, `.A.B`, `$`, `$x.A`, or a literal;
a function or a `|` pipe (`{{printf "%s" .X}}`, `{{ .X | json }}`), and `template`,
`define` and `block` actions, raise UnrenderableTemplate naming the action as written.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from pipeline.templates.errors import TemplateError, UnrenderableTemplate, line_at
from pipeline.templates.limits import Budget

_SPACE = " \t\r\n"
_TOKEN = re.compile(
    r"""\s*("(?:[^"\\]|\\.)*"|`[^`]*`|'(?:[^'\\]|\\.)*'|:=|[=,|()]|\$\w*(?:\.\w+)*"""
    r"""|\.\w+(?:\.\w+)*|\.|[-+]?\d[\w.+-]*|[A-Za-z_]\w*|\S)"""
)
_UNRUN_ACTIONS = ("template", "define", "block")
_ACTION_MARKS = re.compile(r"""/\*|["'`]|\}\}""")
"""What matters inside an action: a comment, a string, its closing `}}`."""
_STRING_MARKS = {quote: re.compile(r"\\.|\n|" + quote, re.DOTALL) for quote in "\"'"}
"""What matters inside a quoted string: an escape, a line end, the closing quote."""


@dataclass(frozen=True, slots=True)
class Operand:
    """One value: a literal, or a path from dot (`.A.B`) or from a variable (`$x.A`)."""

    text: str
    line: int
    variable: str | None = None
    fields: tuple[str, ...] = ()
    literal: Any = None


@dataclass(slots=True)
class Print:
    """`{{operand}}` printed."""

    operand: Operand
    written: str


@dataclass(slots=True)
class Assign:
    """`{{$x := operand}}` (declare) or `{{$x = operand}}` (assign)."""

    variable: str
    operand: Operand
    declare: bool
    written: str


@dataclass(slots=True)
class Control:
    """`if`, `range` or `with`: the operand, its loop/with variables, both branches."""

    keyword: str
    operand: Operand
    variables: tuple[str, ...] = ()
    body: list[Node] = field(default_factory=list)
    otherwise: list[Node] = field(default_factory=list)


@dataclass(slots=True)
class Jump:
    """`{{break}}` or `{{continue}}` inside a range."""

    keyword: str
    written: str


Node = str | Print | Assign | Control | Jump


@dataclass(slots=True)
class _Action:
    body: str
    written: str
    offset: int


def parse(source: str, budget: Budget) -> list[Node]:
    """The template's tree; raises TemplateError / UnrenderableTemplate with the line.
    Checks the render's clock on every action: parsing a huge template takes time too."""
    pieces = _scan(source, budget)
    nodes, _, ender = _parse_nodes(pieces, 0, source, budget)
    if ender is not None:
        raise _error(f"{ender.written} has no action to end", ender, source)
    return nodes


def _scan(source: str, budget: Budget) -> list[str | _Action]:
    pieces: list[str | _Action] = []
    position = 0
    start = source.find("{{")
    while start != -1:
        budget.tick()
        text = source[position:start]
        inner = start + 2
        if source.startswith("-", inner) and source[inner + 1 : inner + 2] in tuple(_SPACE):
            text, inner = text.rstrip(_SPACE), inner + 1
        end = _action_end(source, inner)
        if end == -1:
            written = source[start : start + 20]
            raise TemplateError(
                "an action is never closed with }}", written, line_at(source, start)
            )
        stop = end + 2
        body = source[inner:end]
        trim_after = len(body) >= 2 and body[-1] == "-" and body[-2] in _SPACE
        if trim_after:
            body = body[:-1]
        pieces.append(text)
        pieces.append(_Action(body.strip(_SPACE), source[start:stop], start))
        position = stop
        if trim_after:
            while position < len(source) and source[position] in _SPACE:
                position += 1
        start = source.find("{{", position)
    pieces.append(source[position:])
    return pieces


def _action_end(source: str, index: int) -> int:
    """Where the `}}` closing an action starts, skipping strings and comments."""
    while (mark := _ACTION_MARKS.search(source, index)) is not None:
        if mark.group() == "}}":
            return mark.start()
        if mark.group() == "/*":
            close = source.find("*/", mark.end())
            index = close + 2 if close != -1 else -1
        else:
            index = _string_end(source, mark.start())
        if index == -1:
            return -1
    return -1


def _string_end(source: str, index: int) -> int:
    """Just past the string opened at `index`; -1 when the source (or, but for a raw
    `backquoted` string, the line) ends first."""
    quote = source[index]
    if quote == "`":
        close = source.find("`", index + 1)
        return close + 1 if close != -1 else -1
    index += 1
    while (mark := _STRING_MARKS[quote].search(source, index)) is not None:
        if mark.group() == quote:
            return mark.end()
        if mark.group() == "\n":
            return -1
        index = mark.end()
    return -1


def _parse_nodes(
    pieces: list[str | _Action], index: int, source: str, budget: Budget
) -> tuple[list[Node], int, _Action | None]:
    """Nodes up to the `{{else ...}}` or `{{end}}` that ends the current branch."""
    nodes: list[Node] = []
    while index < len(pieces):
        budget.tick()
        piece = pieces[index]
        index += 1
        if isinstance(piece, str):
            if piece:
                nodes.append(piece)
            continue
        keyword = piece.body.split(None, 1)[0] if piece.body else ""
        if keyword in ("end", "else"):
            return nodes, index, piece
        if keyword in ("if", "range", "with"):
            control, index = _control(keyword, piece, pieces, index, source, budget)
            nodes.append(control)
        elif piece.body and not piece.body.startswith("/*"):
            nodes.append(_simple(keyword, piece, source))
    return nodes, index, None


def _control(
    keyword: str,
    action: _Action,
    pieces: list[str | _Action],
    index: int,
    source: str,
    budget: Budget,
) -> tuple[Control, int]:
    variables, operand = _header(action.body[len(keyword) :], action, source, keyword)
    control = Control(keyword, operand, variables)
    control.body, index, ender = _parse_nodes(pieces, index, source, budget)
    if ender is None:
        raise _error(f"{action.written} has no {{{{end}}}}", action, source)
    if ender.body.startswith("else"):
        rest = ender.body[4:].strip(_SPACE)
        chained = rest.split(None, 1)[0] if rest else ""
        if chained in ("if", "with"):
            else_action = _Action(rest, ender.written, ender.offset)
            inner, index = _control(chained, else_action, pieces, index, source, budget)
            control.otherwise = [inner]
            return control, index
        if rest:
            raise _error(f"{ender.written} is not a valid else", ender, source)
        control.otherwise, index, ender = _parse_nodes(pieces, index, source, budget)
        if ender is None or ender.body != "end":
            raise _error(f"{action.written} has no {{{{end}}}}", action, source)
    elif ender.body != "end":
        raise _error(f"{ender.written} is not a valid end", ender, source)
    return control, index


def _header(
    text: str, action: _Action, source: str, keyword: str
) -> tuple[tuple[str, ...], Operand]:
    tokens = _tokens(text, action, source)
    variables: tuple[str, ...] = ()
    if ":=" in tokens:
        split = tokens.index(":=")
        variables = tuple(token for token in tokens[:split] if token != ",")
        limit = 2 if keyword == "range" else 1
        if not 0 < len(variables) <= limit or not all(v.startswith("$") for v in variables):
            raise _error(f"{action.written} declares its variables wrongly", action, source)
        tokens = tokens[split + 1 :]
    return variables, _operand(tokens, action, source)


def _simple(keyword: str, action: _Action, source: str) -> Node:
    if keyword in ("break", "continue"):
        return Jump(keyword, action.written)
    if keyword in _UNRUN_ACTIONS:
        raise UnrenderableTemplate(
            f"{action.written} is a {keyword} action, which is never run",
            action.written,
            line_at(source, action.offset),
        )
    tokens = _tokens(action.body, action, source)
    if len(tokens) > 2 and tokens[0].startswith("$") and tokens[1] in (":=", "="):
        operand = _operand(tokens[2:], action, source)
        return Assign(tokens[0], operand, tokens[1] == ":=", action.written)
    return Print(_operand(tokens, action, source), action.written)


def _tokens(text: str, action: _Action, source: str) -> list[str]:
    tokens = [match.group(1) for match in _TOKEN.finditer(text) if match.group(1)]
    if not tokens:
        raise _error(f"{action.written} is empty", action, source)
    return tokens


def _operand(tokens: list[str], action: _Action, source: str) -> Operand:
    if len(tokens) != 1 or not _is_operand(tokens[0]):
        raise UnrenderableTemplate(
            f"{action.written} calls a function or pipeline, which is never run",
            action.written,
            line_at(source, action.offset),
        )
    token = tokens[0]
    line = line_at(source, action.offset)
    if token == ".":
        return Operand(token, line)
    if token.startswith("."):
        return Operand(token, line, fields=tuple(token[1:].split(".")))
    if token.startswith("$"):
        name, *fields = token.split(".")
        return Operand(token, line, variable=name, fields=tuple(fields))
    return Operand(token, line, literal=_literal(token, action, source))


def _is_operand(token: str) -> bool:
    return (
        token[0] in '.$"`' or token[0].isdigit() or token[0] in "+-" or token in ("true", "false")
    )


def _literal(token: str, action: _Action, source: str) -> Any:
    try:
        if token.startswith("`"):
            return token[1:-1]
        if token in ("true", "false"):
            return token == "true"
        if token.startswith('"'):
            return json.loads(token)
        return _number(token)
    except ValueError as err:
        raise _error(
            f"{token} in {action.written} is not a valid constant", action, source
        ) from err


def _number(token: str) -> int | float:
    try:
        return int(token, 0)
    except ValueError:
        return float(token)


def _error(message: str, action: _Action, source: str) -> TemplateError:
    return TemplateError(message, action.written, line_at(source, action.offset))
