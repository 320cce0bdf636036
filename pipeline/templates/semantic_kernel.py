"""Semantic Kernel's basic prompt template syntax.

`{{$var}}` / `{{ $var }}` insert a variable; `{{ "text" }}` / `{{'text'}}` insert a quoted
value, where a backslash escapes a quote or a backslash as SK does (`{{ "{{" }}` prints
`{{`); anything else in braces is a function call (`{{time.now}}`, `{{plugin.fn $arg}}`,
`{{fn "x" name=$y}}`), which is never run: `UnrenderableTemplate` names it as written.
Blocks split the way SK's tokenizer splits them: a `{{` inside a block restarts it, a
`}}` inside quotes does not end it, `{{ }}` stays text. Values print as Python SK prints
them: strings as they are, None as nothing, anything else with str().
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pipeline.templates.errors import TemplateError, UnrenderableTemplate, line_at
from pipeline.templates.limits import Budget

_QUOTES = "'\""
_BLANKS = " \t\r\n"
_ESCAPABLE = "'\"\\"
_NAME = re.compile(r"[A-Za-z0-9_]+")
_BLOCK_MARKS = re.compile(r"\{\{|\}\}|['\"]")
_QUOTED_MARKS = {quote: re.compile(r"\\[\\'\"]|" + quote) for quote in _QUOTES}
"""What matters inside a block (a restart, its end, a quote) and inside quotes (an
escape, the closing quote): the scan jumps from one to the next."""
_FUNCTION_ID = re.compile(r"[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)?")


@dataclass(frozen=True, slots=True)
class _Block:
    """One `{{...}}` block: where it starts, its text as written, and its code tokens."""

    offset: int
    written: str
    tokens: tuple[str, ...]


def render(template: str, variables: dict[str, Any], budget: Budget) -> None:
    """Render a Semantic Kernel template into `budget`."""
    pieces = _split(template, budget)
    for piece in pieces:
        if isinstance(piece, _Block) and piece.tokens[0][0] not in "$" + _QUOTES:
            raise UnrenderableTemplate(
                f"{piece.written} calls the function {piece.tokens[0]}, which is never run",
                construct=piece.written,
                line=line_at(template, piece.offset),
            )
    for piece in pieces:
        budget.write(piece if isinstance(piece, str) else _block_text(piece, variables, budget))


def _block_text(block: _Block, variables: dict[str, Any], budget: Budget) -> str:
    token = block.tokens[0]
    if token[0] in _QUOTES:
        return token[1:-1]
    name = token[1:]
    if name not in variables:
        budget.miss(name)
        return block.written
    value = variables[name]
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def _split(template: str, budget: Budget) -> list[str | _Block]:
    """Text and blocks in order, as SK's template tokenizer splits them."""
    pieces: list[str | _Block] = []
    end_of_last = 0
    for start, stop in _block_spans(template, budget):
        budget.tick()
        written = template[start:stop]
        content = written[2:-2].strip()
        if not content:
            continue
        if start > end_of_last:
            pieces.append(template[end_of_last:start])
        line = line_at(template, start)
        pieces.append(
            _Block(start, written, _checked(_tokens(content, written, line), written, line))
        )
        end_of_last = stop
    if end_of_last < len(template):
        pieces.append(template[end_of_last:])
    return pieces


def _block_spans(template: str, budget: Budget) -> list[tuple[int, int]]:
    """Where each block starts and stops: the last `{{` before its `}}`, skipping quoted
    values (a `}}` in quotes ends nothing)."""
    spans = []
    start = template.find("{{")
    index = start
    while start != -1:
        budget.tick()
        mark = _BLOCK_MARKS.search(template, max(index, start + 1))
        if mark is None:
            break
        if mark.group() == "{{":
            start = index = mark.start()
        elif mark.group() == "}}":
            spans.append((start, mark.end()))
            start = index = template.find("{{", mark.end())
        else:
            index = _quote_end(template, mark.end(), mark.group(), budget)
            if index == -1:
                break
    return spans


def _quote_end(template: str, index: int, quote: str, budget: Budget) -> int:
    """Just past the quote closing a value opened before `index`; -1 if none does."""
    while (mark := _QUOTED_MARKS[quote].search(template, index)) is not None:
        budget.tick()
        if mark.group() == quote:
            return mark.end()
        index = mark.end()
    return -1


def _tokens(content: str, written: str, line: int) -> list[str]:
    """The code tokens of a block: $variables, quoted values (escapes resolved), function
    ids and named arguments, which must be separated by blanks."""
    tokens: list[str] = []
    current = ""
    quote = ""
    index = 0
    while index < len(content):
        char = content[index]
        if quote:
            if char == "\\" and index + 1 < len(content) and content[index + 1] in _ESCAPABLE:
                current += content[index + 1]
                index += 2
                continue
            current += char
            if char == quote:
                tokens.append(current)
                current, quote = "", ""
            index += 1
            continue
        if char in _BLANKS:
            if current:
                tokens.append(current)
                current = ""
        elif (
            not current
            and tokens
            and tokens[-1][0] in _QUOTES
            and content[index - 1] not in _BLANKS
        ):
            raise _syntax("tokens must be separated by at least one space", written, line)
        else:
            if char in _QUOTES and (not current or current.endswith("=")):
                quote = char
            current += char
        index += 1
    if quote:
        raise _syntax(f"the value {current} has no closing quote", written, line)
    if current:
        tokens.append(current)
    return tokens


def _checked(tokens: list[str], written: str, line: int) -> tuple[str, ...]:
    """The tokens, when they make a variable, a value or a function call."""
    first = tokens[0]
    if first[0] == "$":
        if len(tokens) > 1:
            raise _syntax(f"invalid token {tokens[1]} after the variable", written, line)
        if not _NAME.fullmatch(first[1:]):
            raise _syntax(
                f"the variable name {first!r} is empty or not [A-Za-z0-9_]", written, line
            )
    elif first[0] in _QUOTES:
        if len(tokens) > 1:
            raise _syntax(f"invalid token {tokens[1]} after the value", written, line)
    elif not _FUNCTION_ID.fullmatch(first):
        raise _syntax(f"{first!r} is not a variable, a value or a function name", written, line)
    return tuple(tokens)


def _syntax(problem: str, written: str, line: int) -> TemplateError:
    return TemplateError(f"{problem} in {written}", written, line)
