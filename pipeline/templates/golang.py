"""Go text/template, the data-only subset, rendered by our own interpreter.

What renders is described in golang_syntax; functions and pipes never run. Values print
as Go's fmt prints them (%v): true/false, floats in Go's shortest form (1e+06), lists as
`[a b]`, maps as `map[k:v]` with sorted keys, a nil value as `<no value>`; `range` over a
map visits its keys in sorted order, as Go does. A field with no value keeps the action
as written (`{{.Name}}`) and is named in `missing` without its leading dot.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pipeline.templates.errors import TemplateError
from pipeline.templates.golang_syntax import Assign, Control, Jump, Node, Operand, Print, parse
from pipeline.templates.limits import Budget
from pipeline.templates.values import shortest_float

_MISSING = object()


class _Break(Exception):
    """`{{break}}` unwinding to its range."""


class _Continue(Exception):
    """`{{continue}}` unwinding to its range."""


class _Scope:
    """Dot and the variables in scope (innermost last)."""

    def __init__(self, dot: Any, variables: list[dict[str, Any]]) -> None:
        self.dot = dot
        self.variables = variables

    def inner(self, dot: Any) -> _Scope:
        return _Scope(dot, [*self.variables, {}])

    def get(self, name: str, line: int) -> Any:
        for frame in reversed(self.variables):
            if name in frame:
                return frame[name]
        raise TemplateError(f"undefined variable {name}", name, line)

    def set(self, name: str, value: Any, line: int) -> None:
        for frame in reversed(self.variables):
            if name in frame:
                frame[name] = value
                return
        raise TemplateError(f"undefined variable {name}", name, line)


def render(template: str, variables: dict[str, Any], budget: Budget) -> None:
    """Render a Go text/template into `budget`."""
    nodes = parse(template, budget)
    try:
        _nodes(nodes, _Scope(variables, [{"$": variables}]), budget)
    except (_Break, _Continue) as err:
        raise TemplateError("break or continue outside a range", "{{break}}") from err


def _nodes(nodes: list[Node], scope: _Scope, budget: Budget) -> None:
    for node in nodes:
        if isinstance(node, str):
            budget.write(node)
        elif isinstance(node, Print):
            _print(node, scope, budget)
        elif isinstance(node, Assign):
            value = _value(node.operand, scope)
            if node.declare:
                scope.variables[-1][node.variable] = value
            else:
                scope.set(node.variable, value, node.operand.line)
        elif isinstance(node, Jump):
            raise _Break() if node.keyword == "break" else _Continue()
        else:
            _control(node, scope, budget)


def _print(node: Print, scope: _Scope, budget: Budget) -> None:
    value = _value(node.operand, scope)
    if value is _MISSING:
        budget.miss(node.operand.text.removeprefix("$.").removeprefix("."))
        budget.write(node.written)
    else:
        budget.write("<no value>" if value is None else go_text(value))


def _control(node: Control, scope: _Scope, budget: Budget) -> None:
    value = _value(node.operand, scope)
    if node.keyword == "range":
        _range(node, value, scope, budget)
        return
    if not _truthy(value):
        _nodes(node.otherwise, scope.inner(scope.dot), budget)
        return
    inner = scope.inner(value if node.keyword == "with" else scope.dot)
    for name in node.variables:
        inner.variables[-1][name] = value
    _nodes(node.body, inner, budget)


def _range(node: Control, value: Any, scope: _Scope, budget: Budget) -> None:
    count, entries = _entries(value, node.operand)
    if not count:
        _nodes(node.otherwise, scope.inner(scope.dot), budget)
        return
    for key, item in entries:
        budget.iterate()
        inner = scope.inner(item)
        names = node.variables
        bound = (item,) if len(names) == 1 else (key, item)
        inner.variables[-1].update(zip(names, bound, strict=False))
        try:
            _nodes(node.body, inner, budget)
        except _Break:
            break
        except _Continue:
            continue


def _entries(value: Any, operand: Operand) -> tuple[int, Iterable[tuple[Any, Any]]]:
    """How many (key, item) pairs `range` visits, and the pairs, made as they are
    visited: `{{range 1000000000000}}` must meet the loop bounds, not build a list first."""
    if value is _MISSING or value is None:
        return 0, ()
    if isinstance(value, list):
        return len(value), enumerate(value)
    if isinstance(value, dict):
        return len(value), ((key, value[key]) for key in sorted(value))
    if isinstance(value, int) and not isinstance(value, bool):
        return max(value, 0), ((index, index) for index in range(value))
    shown = f"{go_text(value)!r} ({operand.text})"
    raise TemplateError(f"range can't iterate over {shown}", operand.text, operand.line)


def _truthy(value: Any) -> bool:
    return value is not _MISSING and bool(value)


def _value(operand: Operand, scope: _Scope) -> Any:
    if operand.variable is not None:
        value = scope.get(operand.variable, operand.line)
    elif operand.text.startswith("."):
        value = scope.dot
    else:
        return operand.literal
    for name in operand.fields:
        if value is _MISSING or value is None:
            return _MISSING
        if not isinstance(value, dict):
            raise TemplateError(
                f"can't evaluate field {name} in {operand.text}: {go_text(value)!r} has no fields",
                operand.text,
                operand.line,
            )
        value = value.get(name, _MISSING)
    return value


def go_text(value: Any) -> str:
    """`value` as Go's fmt %v prints it."""
    if isinstance(value, str):
        return value
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "0" if value == 0 else shortest_float(value, low=-4, high=6, pad_exponent=True)
    if isinstance(value, list):
        return "[" + " ".join(go_text(item) for item in value) + "]"
    if isinstance(value, dict):
        return "map[" + " ".join(f"{key}:{go_text(value[key])}" for key in sorted(value)) + "]"
    return str(value)
