"""Handlebars source -> a tree of text, mustaches and blocks.

Tags are split as handlebars.js splits them: `{{! }}` / `{{!-- --}}` comments, `{{{raw}}}`
and `{{&raw}}`, `{{#block}}` / `{{^inverse}}` / `{{/close}}`, `{{else}}` (also `{{^}}` and
`{{else if x}}` chains), `\\{{` for a literal `{{`; `~` strips the whitespace next to a
tag, and a block, else or comment tag alone on its line takes that line with it
("standalone" lines). Partials, decorators and raw-block helpers are never run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pipeline.templates.errors import TemplateError, UnrenderableTemplate, line_at
from pipeline.templates.limits import Budget

BUILTIN_BLOCKS = ("if", "unless", "each", "with")
_STANDALONE_KINDS = ("comment", "open", "inverse", "close", "else")
_BLOCK_PARAMS = re.compile(r"\s+as\s+\|\s*([^|]*?)\s*\|\s*$")
_TRIPLE_END = re.compile(r"\}(~?)\}\}")
_TAG_MARKS = re.compile(r"""["']|\}\}""")
_ARGUMENT = re.compile(r"""\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|\S+)""")


@dataclass(slots=True)
class Tag:
    """One `{{...}}` tag: its kind, the expression inside, and where it was written."""

    kind: str
    body: str
    written: str
    offset: int
    strip_before: bool = False
    strip_after: bool = False


@dataclass(slots=True)
class Mustache:
    """`{{path}}` or `{{{path}}}`: one value printed."""

    path: str
    written: str


@dataclass(slots=True)
class Block:
    """A block: the name its close tag repeats, the built-in helper ("" for a plain
    section over a value), the helper's one parameter, block params, both branches."""

    name: str
    helper: str
    param: str
    written: str
    block_params: tuple[str, ...] = ()
    inverted: bool = False
    program: list[Node] = field(default_factory=list)
    inverse: list[Node] = field(default_factory=list)
    line: int = 0


Node = str | Mustache | Block


def parse(source: str, budget: Budget) -> list[Node]:
    """The template's tree; raises TemplateError / UnrenderableTemplate with the line.
    Checks the render's clock on every tag: parsing a huge template takes time too."""
    pieces = _whitespace_controlled(_standalone_stripped(_scan(source, budget)))
    budget.tick()
    nodes, index = _parse_nodes(pieces, 0, source, budget)
    if index < len(pieces):
        tag = pieces[index]
        assert isinstance(tag, Tag)
        raise TemplateError(
            f"{tag.written} has no open block to close", tag.written, line_at(source, tag.offset)
        )
    return nodes


def _scan(source: str, budget: Budget) -> list[str | Tag]:
    """Text and tags, alternating (text pieces may be empty)."""
    pieces: list[str | Tag] = []
    text, text_start = "", 0
    index = source.find("{{")
    while index != -1:
        budget.tick()
        if index > 0 and source[index - 1] == "\\" and not source.startswith("\\\\", index - 2):
            text += source[text_start : index - 1] + "{{"
            text_start = index + 2
        else:
            tag = _tag_at(source, index)
            pieces += [text + source[text_start:index], tag]
            text, text_start = "", index + len(tag.written)
        index = source.find("{{", text_start)
    pieces.append(text + source[text_start:])
    return pieces


def _tag_at(source: str, start: int) -> Tag:
    line = line_at(source, start)
    if source.startswith("{{{{", start):
        end = source.find("}}}}", start)
        written = source[start : end + 4] if end != -1 else source[start : start + 40]
        raise UnrenderableTemplate(
            f"{written} is a raw-block helper, which is never run", written, line
        )
    strip_before = source.startswith("~", start + 2)
    inner = start + 2 + strip_before
    if source.startswith("!--", inner):
        return _comment(source, start, inner, "--", strip_before, line)
    if source.startswith("!", inner):
        return _comment(source, start, inner, "", strip_before, line)
    if source.startswith("{", inner):
        match = _TRIPLE_END.search(source, inner + 1)
        if not match:
            raise TemplateError("a {{{ tag is never closed", source[start : inner + 1], line)
        written = source[start : match.end()]
        body = "&" + source[inner + 1 : match.start()]
        return _classified(body, written, start, strip_before, bool(match.group(1)))
    end = _tag_end(source, inner)
    if end == -1:
        raise TemplateError("a tag is never closed with }}", source[start:inner], line)
    strip_after = source[end - 1] == "~"
    body = source[inner : end - strip_after]
    return _classified(body, source[start : end + 2], start, strip_before, strip_after)


def _comment(source: str, start: int, inner: int, dashes: str, strip: bool, line: int) -> Tag:
    closer = re.compile(re.escape(dashes) + r"~?\}\}")
    match = closer.search(source, inner + 1 + len(dashes))
    if not match:
        raise TemplateError("a comment is never closed", source[start : inner + 3], line)
    written = source[start : match.end()]
    return Tag("comment", "", written, start, strip, match.group().startswith(dashes + "~"))


def _tag_end(source: str, index: int) -> int:
    """Where the `}}` closing a tag starts, skipping quoted strings inside the tag."""
    while (mark := _TAG_MARKS.search(source, index)) is not None:
        if mark.group() == "}}":
            return mark.start()
        index = source.find(mark.group(), mark.end()) + 1
        if index == 0:
            return -1
    return -1


def _classified(body: str, written: str, start: int, before: bool, after: bool) -> Tag:
    stripped = body.strip()
    kinds = {"#": "open", "^": "inverse", "/": "close", ">": "partial", "*": "decorator"}
    if stripped.startswith("&"):
        return Tag("var", stripped[1:].strip(), written, start, before, after)
    if stripped == "^" or stripped == "else" or stripped.startswith("else "):
        return Tag(
            "else", stripped[4:].strip() if stripped != "^" else "", written, start, before, after
        )
    kind = kinds.get(stripped[:1], "var")
    expression = stripped[1:].strip() if kind != "var" else stripped
    return Tag(kind, expression, written, start, before, after)


def _standalone_stripped(pieces: list[str | Tag]) -> list[str | Tag]:
    """Drop the indentation and line break around block, else and comment tags that
    stand alone on their line, as handlebars.js does."""
    standalone = [index for index in range(1, len(pieces) - 1, 2) if _alone(pieces, index)]
    for index in standalone:
        before, after = str(pieces[index - 1]), str(pieces[index + 1])
        pieces[index - 1] = before.rstrip(" \t")
        last_line = index + 2 == len(pieces) and "\n" not in after
        pieces[index + 1] = "" if last_line else after.partition("\n")[2]
    return pieces


def _alone(pieces: list[str | Tag], index: int) -> bool:
    """True when the tag at `index` (between two text pieces) has its line to itself."""
    tag, before, after = pieces[index], str(pieces[index - 1]), str(pieces[index + 1])
    if not isinstance(tag, Tag) or tag.kind not in _STANDALONE_KINDS:
        return False
    starts_line = "\n" in before or index == 1
    ends_line = "\n" in after or index + 2 == len(pieces)
    head = before.rpartition("\n")[2]
    tail = after.partition("\n")[0]
    return starts_line and ends_line and not head.strip(" \t") and not tail.strip(" \t\r")


def _whitespace_controlled(pieces: list[str | Tag]) -> list[str | Tag]:
    """Apply `~`: strip all whitespace on that side of the tag."""
    for index, piece in enumerate(pieces):
        if not isinstance(piece, Tag):
            continue
        if piece.strip_before and index > 0 and isinstance(pieces[index - 1], str):
            pieces[index - 1] = str(pieces[index - 1]).rstrip()
        if piece.strip_after and index + 1 < len(pieces) and isinstance(pieces[index + 1], str):
            pieces[index + 1] = str(pieces[index + 1]).lstrip()
    return pieces


def _parse_nodes(
    pieces: list[str | Tag], index: int, source: str, budget: Budget
) -> tuple[list[Node], int]:
    """Nodes up to the `{{else}}` or `{{/...}}` that ends the current branch."""
    nodes: list[Node] = []
    while index < len(pieces):
        budget.tick()
        piece = pieces[index]
        if isinstance(piece, str):
            if piece:
                nodes.append(piece)
        elif piece.kind in ("close", "else"):
            return nodes, index
        elif piece.kind == "var":
            nodes.append(_mustache(piece, source))
        elif piece.kind in ("open", "inverse"):
            block, index = _block(pieces, index, source, budget)
            nodes.append(block)
        elif piece.kind != "comment":
            raise UnrenderableTemplate(
                f"{piece.written} is a {piece.kind}, which is never run",
                piece.written,
                line_at(source, piece.offset),
            )
        index += 1
    return nodes, index


def _mustache(tag: Tag, source: str) -> Mustache:
    arguments = _arguments(tag.body)
    if len(arguments) != 1 or "=" in arguments[0] or arguments[0].startswith("("):
        raise _helper_call(tag, source)
    return Mustache(arguments[0], tag.written)


def _block(
    pieces: list[str | Tag], index: int, source: str, budget: Budget, closed_by: str = ""
) -> tuple[Block, int]:
    """The block opened at `pieces[index]`, its branches, and the index of its close tag
    (an `{{else if}}` chain is closed by the tag of the block that opened the chain)."""
    tag = pieces[index]
    assert isinstance(tag, Tag)
    block = _opened(tag, source)
    closed_by = closed_by or block.name
    block.program, index = _parse_nodes(pieces, index + 1, source, budget)
    end = pieces[index] if index < len(pieces) else None
    if isinstance(end, Tag) and end.kind == "else" and end.body:
        pieces[index] = Tag("open", end.body, end.written, end.offset)
        chained, index = _block(pieces, index, source, budget, closed_by)
        block.inverse = [chained]
        return block, index
    if isinstance(end, Tag) and end.kind == "else":
        block.inverse, index = _parse_nodes(pieces, index + 1, source, budget)
        end = pieces[index] if index < len(pieces) else None
    if not isinstance(end, Tag) or end.kind != "close":
        raise TemplateError(
            f"{tag.written} is never closed", tag.written, line_at(source, tag.offset)
        )
    if end.body != closed_by:
        raise TemplateError(
            f"{end.written} does not close {{{{#{closed_by}}}}}",
            end.written,
            line_at(source, end.offset),
        )
    return block, index


def _opened(tag: Tag, source: str) -> Block:
    body = tag.body
    block_params: tuple[str, ...] = ()
    match = _BLOCK_PARAMS.search(body)
    if match:
        block_params = tuple(match.group(1).split())
        body = body[: match.start()]
    arguments = _arguments(body)
    line = line_at(source, tag.offset)
    if not arguments:
        raise TemplateError(f"{tag.written} names no helper", tag.written, line)
    name, params = arguments[0], arguments[1:]
    if any("=" in param or param.startswith("(") for param in params):
        raise _helper_call(tag, source)
    inverted = tag.kind == "inverse"
    if name in BUILTIN_BLOCKS:
        if len(params) != 1:
            raise TemplateError(
                f"{tag.written}: #{name} takes exactly one argument", tag.written, line
            )
        return Block(name, name, params[0], tag.written, block_params, inverted, line=line)
    if params:
        raise _helper_call(tag, source)
    return Block(name, "", name, tag.written, block_params, inverted, line=line)


def _arguments(body: str) -> list[str]:
    """The space-separated parts of a tag's expression, quoted strings kept whole."""
    return [match.group(1) for match in _ARGUMENT.finditer(body) if match.group(1)]


def _helper_call(tag: Tag, source: str) -> UnrenderableTemplate:
    return UnrenderableTemplate(
        f"{tag.written} calls a helper with arguments, which is never run",
        tag.written,
        line_at(source, tag.offset),
    )
