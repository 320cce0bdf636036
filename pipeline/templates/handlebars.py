"""Handlebars, rendered by a small interpreter of our own (nothing is compiled to Python).

Supported: `{{path.to.value}}`, `{{{raw}}}`, comments, `{{#if}}` / `{{#unless}}` /
`{{#each}}` / `{{#with}}` with `{{else}}` and `{{else if}}` chains, `this`, `../`,
`@index` / `@key` / `@first` / `@last` / `@root`, block params (`as |item i|`), plain
sections over a value (`{{#items}}`, `{{^items}}`), `~` whitespace control. Any other
helper - one with arguments, a partial, a block helper with no value of that name
(`{{json x}}`, `{{#message role="user"}}`, `{{set ...}}`) - raises UnrenderableTemplate.

Values are NOT HTML-escaped (`{{x}}` prints like `{{{x}}}`): these are prompts, not web
pages, and escaping would corrupt the text. Values print as JavaScript prints them
(true/false, null as nothing, arrays comma-joined), objects as JSON. Lookups follow
handlebars.js: a name is looked up in the current context only (use `../` for outer ones).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pipeline.templates.errors import UnrenderableTemplate
from pipeline.templates.handlebars_syntax import Block, Mustache, Node, parse
from pipeline.templates.limits import Budget
from pipeline.templates.values import js_text

_MISSING = object()
_SEGMENT = re.compile(r"\[([^\]]*)\]|([^./\[\]]+)")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_LITERALS = {"true": True, "false": False, "null": None, "undefined": None}


@dataclass(slots=True)
class _Frame:
    """One context level: the value `this` refers to, @data variables, block params."""

    context: Any
    parent: _Frame | None = None
    data: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)


def render(template: str, variables: dict[str, Any], budget: Budget) -> None:
    """Render a Handlebars template into `budget`."""
    root = _Frame(variables, data={"root": variables})
    _nodes(parse(template, budget), root, budget)


def _nodes(nodes: list[Node], frame: _Frame, budget: Budget) -> None:
    for node in nodes:
        if isinstance(node, str):
            budget.write(node)
        elif isinstance(node, Mustache):
            value = _lookup(node.path, frame)
            if value is _MISSING:
                budget.miss(node.path)
                budget.write(node.written)
            else:
                budget.write(js_text(value))
        else:
            _block(node, frame, budget)


def _block(block: Block, frame: _Frame, budget: Budget) -> None:
    value = _lookup(block.param, frame)
    if block.helper in ("if", "unless"):
        shown = _falsy(value) == (block.helper == "unless")
        _nodes(block.program if shown != block.inverted else block.inverse, frame, budget)
    elif block.inverted:
        _nodes(block.program if _empty(value) else block.inverse, frame, budget)
    elif block.helper == "each" or (not block.helper and isinstance(value, list)):
        _each(block, value, frame, budget)
    elif block.helper == "with" or value is not True:
        _with(block, value, frame, budget)
    else:
        _nodes(block.program, frame, budget)


def _with(block: Block, value: Any, frame: _Frame, budget: Budget) -> None:
    if value is _MISSING and not block.helper:
        raise UnrenderableTemplate(
            f"{block.written} is a block helper (no value is named {block.param}), "
            "which is never run",
            block.written,
            block.line,
        )
    if _empty(value):
        _nodes(block.inverse, frame, budget)
        return
    params = dict(zip(block.block_params, [value], strict=False))
    _nodes(block.program, _Frame(value, frame, params=params), budget)


def _each(block: Block, value: Any, frame: _Frame, budget: Budget) -> None:
    if isinstance(value, list):
        entries: list[tuple[Any, Any]] = list(enumerate(value))
    elif isinstance(value, dict):
        entries = list(value.items())
    else:
        entries = []
    if not entries:
        _nodes(block.inverse, frame, budget)
    for index, (key, item) in enumerate(entries):
        budget.iterate()
        data = {"index": index, "key": key, "first": index == 0, "last": index == len(entries) - 1}
        params = dict(zip(block.block_params, (item, key), strict=False))
        _nodes(block.program, _Frame(item, frame, data, params), budget)


def _empty(value: Any) -> bool:
    """handlebars.js isEmpty: no value, null, false, "" or [] (but not 0)."""
    return value is _MISSING or value is None or value is False or value in ("", [])


def _falsy(value: Any) -> bool:
    """What #if treats as false: the empty values and 0."""
    return _empty(value) or (not isinstance(value, bool) and value == 0)


def _lookup(path: str, frame: _Frame) -> Any:
    """The value `path` names from `frame`, or _MISSING."""
    literal = _literal(path)
    if literal is not _MISSING:
        return literal
    ups = 0
    while path.startswith("../"):
        path, ups = path[3:], ups + 1
    if path.startswith("@"):
        name, _, rest = path[1:].partition(".")
        return _walk(_data(name, frame), _segments(rest))
    segments = _segments(path)
    if segments and segments[0] in ("this", "."):
        segments = segments[1:]
    elif segments and ups == 0:
        for scope in _frames(frame):
            if segments[0] in scope.params:
                return _walk(scope.params[segments[0]], segments[1:])
    for _ in range(ups):
        frame = frame.parent or frame
    return _walk(frame.context, segments)


def _literal(path: str) -> Any:
    if path[:1] in "\"'" and len(path) > 1 and path[-1] == path[0]:
        return path[1:-1]
    if path in _LITERALS:
        return _LITERALS[path]
    if _NUMBER.fullmatch(path):
        return float(path) if "." in path else int(path)
    return _MISSING


def _segments(path: str) -> list[str]:
    if path in ("this", "."):
        return ["this"]
    return [bracketed or plain for bracketed, plain in _SEGMENT.findall(path)]


def _frames(frame: _Frame | None) -> list[_Frame]:
    frames = []
    while frame is not None:
        frames.append(frame)
        frame = frame.parent
    return frames


def _data(name: str, frame: _Frame) -> Any:
    for scope in _frames(frame):
        if name in scope.data:
            return scope.data[name]
    return _MISSING


def _walk(value: Any, segments: list[str]) -> Any:
    for segment in segments:
        if value is _MISSING:
            return value
        value = _child(value, segment)
    return value


def _child(value: Any, segment: str) -> Any:
    if isinstance(value, dict):
        return value.get(segment, _MISSING)
    if isinstance(value, (list, str)) and segment == "length":
        return len(value)
    if isinstance(value, list) and segment.isdigit() and int(segment) < len(value):
        return value[int(segment)]
    return _MISSING
