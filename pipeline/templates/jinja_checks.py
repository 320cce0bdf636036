"""What a Jinja template needs, read from its source and parsed tree before anything runs.

Includes, imports and extends (no loader is ever given), filters and tests Jinja does not
define, and calls of anything that is neither a Jinja builtin, a name the template binds
itself, nor a given variable (`{{ message(item) }}`) are reported as UnrenderableTemplate
naming the construct as written - even inside a loop that would not run. The `{{ ... }}`
blocks are also read as written, so a placeholder kept for a missing value keeps the
author's spelling. Dunder and name-mangled attributes (`__class__`, `_X__y`) are refused
as unsafe before anything runs; the sandbox refuses any `_` attribute again at run time.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable
from typing import Any

from jinja2 import Environment, nodes

from pipeline.templates.errors import UnrenderableTemplate, UnsafeTemplate

TEMPLATE_NAMES = frozenset({"loop", "caller", "varargs", "kwargs", "self"})
"""Names Jinja binds inside templates (loop variables, macro internals)."""

_LOADER_TAGS = (nodes.Extends, nodes.Include, nodes.Import, nodes.FromImport)


def output_blocks(tokens: Iterable[tuple[int, str, str]]) -> list[str]:
    """Each `{{ ... }}` block as written, in order, from the template's tokens as
    `Environment.lex` gives them."""
    blocks: list[str] = []
    current: list[str] | None = None
    for _, kind, value in tokens:
        if kind == "variable_begin":
            current = [value]
        elif kind == "variable_end" and current is not None:
            current.append(value[: value.index("}}") + 2])
            blocks.append("".join(current))
            current = None
        elif current is not None:
            current.append(value)
    return blocks


def check_needs(
    env: Environment,
    tree: nodes.Template,
    source: str,
    variables: Collection[str],
    tick: Callable[[], None],
) -> None:
    """Raise UnsafeTemplate for the first dunder or name-mangled attribute or key (the
    way to interpreter internals), then UnrenderableTemplate for the first loader tag, unknown
    filter or test, or call of something the template cannot get from Jinja, itself or
    the variables. `tick` is called on every node, to check the render's clock."""
    every = _descendants(tree, tick)
    _check_private_access(every)
    for tag in _of_type(every, _LOADER_TAGS):
        written = _tag_as_written(source, tag)
        raise UnrenderableTemplate(
            f"{written} needs another template, and no template is ever loaded",
            written,
            tag.lineno,
        )
    for node in _of_type(every, (nodes.Filter, nodes.Test)):
        known = env.filters if isinstance(node, nodes.Filter) else env.tests
        if node.name not in known:
            shown = f"|{node.name}" if isinstance(node, nodes.Filter) else f"is {node.name}"
            kind = "filter" if isinstance(node, nodes.Filter) else "test"
            raise UnrenderableTemplate(
                f"{shown} is not a Jinja {kind}; custom {kind}s are never run", shown, node.lineno
            )
    known_names = set(env.globals) | TEMPLATE_NAMES | _bound_names(every) | set(variables)
    for call in _of_type(every, nodes.Call):
        callee = callee_text(call.node)
        root = _root_name(call.node)
        if callee is not None and root is not None and root not in known_names:
            written = call_as_written(source, callee, call.lineno)
            raise UnrenderableTemplate(
                f"{written} calls {callee}, which is neither a Jinja builtin nor a given "
                "variable; it is never run",
                written,
                call.lineno,
            )


def _descendants(tree: nodes.Node, tick: Callable[[], None]) -> list[nodes.Node]:
    """Every node under `tree`, in the order `find_all` visits them, calling `tick` on
    each: one walk serves every check, however large the template."""
    found: list[nodes.Node] = []
    stack = list(reversed(list(tree.iter_child_nodes())))
    while stack:
        tick()
        node = stack.pop()
        found.append(node)
        stack.extend(reversed(list(node.iter_child_nodes())))
    return found


def _of_type(every: list[nodes.Node], types: type | tuple[type, ...]) -> list[Any]:
    return [node for node in every if isinstance(node, types)]


def _check_private_access(every: list[nodes.Node]) -> None:
    for node in _of_type(every, (nodes.Getattr, nodes.Getitem)):
        key = _private_key(node)
        if key is None:
            continue
        inner = node.node
        while isinstance(inner, (nodes.Getattr, nodes.Getitem)):
            key, inner = _private_key(inner) or key, inner.node
        raise UnsafeTemplate(
            f"the template reaches for {key!r}: dunder and private attributes lead to "
            "interpreter internals and are refused",
            key,
            node.lineno,
        )


def _private_key(node: nodes.Getattr | nodes.Getitem) -> str | None:
    """The attribute or constant key of `node` when it is a dunder or name-mangled one."""
    key: object
    if isinstance(node, nodes.Getattr):
        key = node.attr
    else:
        key = node.arg.value if isinstance(node.arg, nodes.Const) else None
    return key if isinstance(key, str) and key.startswith("_") and "__" in key else None


def _bound_names(every: list[nodes.Node]) -> set[str]:
    names = {node.name for node in _of_type(every, nodes.Name) if node.ctx in ("store", "param")}
    names |= {macro.name for macro in _of_type(every, nodes.Macro)}
    return names


def _root_name(node: nodes.Node) -> str | None:
    while isinstance(node, (nodes.Getattr, nodes.Getitem)):
        node = node.node
    return node.name if isinstance(node, nodes.Name) else None


def callee_text(node: nodes.Node) -> str | None:
    """`a.b['c']` for a name / attribute / constant-index chain; None for anything else."""
    if isinstance(node, nodes.Name):
        return node.name
    if isinstance(node, nodes.Getattr):
        inner = callee_text(node.node)
        return None if inner is None else f"{inner}.{node.attr}"
    if isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const):
        inner = callee_text(node.node)
        return None if inner is None else f"{inner}[{node.arg.value!r}]"
    return None


def call_as_written(source: str, callee: str, lineno: int | None = None) -> str:
    """The call of `callee` as the template writes it (`message(item)`), searched from
    line `lineno`; `callee(...)` when it cannot be found."""
    parts = [re.escape(part) for part in re.split(r"\s*\.\s*", callee)]
    pattern = re.compile(r"(?<![\w.])" + r"\s*\.\s*".join(parts) + r"\s*\(")
    start = _line_offset(source, lineno or 1)
    match = pattern.search(source, start) or pattern.search(source)
    if match is None:
        return f"{callee}(...)"
    end = _closing_paren(source, match.end())
    return source[match.start() : end] if end else f"{callee}(...)"


def _closing_paren(source: str, index: int) -> int | None:
    depth, quote = 1, ""
    while index < len(source):
        char = source[index]
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                return index + 1
        index += 1
    return None


def _line_offset(source: str, lineno: int) -> int:
    offset = 0
    for _ in range(lineno - 1):
        offset = source.find("\n", offset) + 1
        if offset == 0:
            return 0
    return offset


def _tag_as_written(source: str, tag: nodes.Node) -> str:
    keyword = "from" if type(tag) is nodes.FromImport else type(tag).__name__.lower()
    return tag_as_written(source, keyword, tag.lineno)


def tag_as_written(source: str, keyword: str, lineno: int | None) -> str:
    """The `{% keyword ... %}` tag as written, searched from line `lineno`."""
    pattern = re.compile(r"\{%[-+]?\s*" + re.escape(keyword) + r"\b.*?%\}", re.DOTALL)
    match = pattern.search(source, _line_offset(source, lineno or 1)) or pattern.search(source)
    return match.group() if match else f"{{% {keyword} %}}"
