"""The jinja2 engine: parse, check what the template needs, instrument, then stream.

Before anything runs, the parsed tree is checked (jinja_checks) and instrumented: every
`{{ ... }}` output goes through a filter that keeps the placeholder as written for a
missing value, every `{% for %}` iterable through a counting filter, every `~` through a
size-checked join. Rendering streams with generate() so output stops at the size bound.
Values print as Jinja prints them (Python str(): True, None, ['a'], {'k': 'v'}).
"""

from __future__ import annotations

import re
import traceback
from typing import Any

from jinja2 import TemplateSyntaxError, nodes
from jinja2 import exceptions as jinja_errors
from jinja2.visitor import NodeTransformer

from pipeline.templates.errors import TemplateError, UnrenderableTemplate, UnsafeTemplate
from pipeline.templates.jinja_checks import check_needs, output_blocks, tag_as_written
from pipeline.templates.jinja_sandbox import (
    CONCAT_FILTER,
    LOOP_FILTER,
    OUTPUT_FILTER,
    JinjaSandbox,
)
from pipeline.templates.limits import Budget

_RUNTIME_ERRORS = (TypeError, ValueError, ArithmeticError, LookupError, AttributeError)
"""What a template expression can raise on bad data (1/0, 'a' + 1, x[5] ...)."""
_UNKNOWN_TAG = re.compile(r"Encountered unknown tag '([\w.]+)'")
_BLOCK_KEYWORDS = re.compile(r"end\w*|else|elif|continue|break")
"""Tags that are Jinja's own (misplaced ones are syntax errors, not custom tags)."""


def render(template: str, variables: dict[str, Any], budget: Budget) -> None:
    """Render a Jinja2 template into `budget`."""
    render_in(JinjaSandbox, template, variables, budget)


def render_in(
    sandbox: type[JinjaSandbox], template: str, variables: dict[str, Any], budget: Budget
) -> None:
    """Render `template` in a fresh `sandbox` bound to `budget`."""
    env = sandbox(budget, template)
    try:
        tree = env.parse(template)
        check_needs(env, tree, template, variables, budget.tick)
        blocks = output_blocks(budget.ticking(env.lex(template)))
        _Instrument(blocks, budget).visit(tree)
        compiled = env.from_string(tree)
    except TemplateSyntaxError as err:
        raise _syntax_error(err, template) from err
    try:
        for chunk in compiled.generate(variables):
            budget.write(chunk)
    except (TemplateError, jinja_errors.TemplateError, *_RUNTIME_ERRORS) as err:
        raise _runtime_error(err, template) from err


class _Instrument(NodeTransformer):
    """Wrap outputs, loop iterables and `~` joins in the sandbox's internal filters,
    checking the render's clock on every node."""

    def __init__(self, blocks: list[str], budget: Budget) -> None:
        self.blocks = blocks
        self.budget = budget
        self.seen = 0

    def visit(self, node: nodes.Node, *args: Any, **kwargs: Any) -> Any:
        self.budget.tick()
        return super().visit(node, *args, **kwargs)

    def visit_Output(self, node: nodes.Output) -> nodes.Output:
        node.nodes = [self._output(child) for child in node.nodes]
        return node

    def _output(self, child: nodes.Expr) -> nodes.Expr:
        if isinstance(child, nodes.TemplateData):
            return child
        child = self.visit(child)
        written = self.blocks[self.seen] if self.seen < len(self.blocks) else None
        self.seen += 1
        name = written.strip("{}-+ \t\r\n") if written else ""
        arguments: list[nodes.Expr] = [nodes.Const(written), nodes.Const(name)]
        return _filter(child, OUTPUT_FILTER, arguments)

    def visit_For(self, node: nodes.For) -> nodes.For:
        self.generic_visit(node)
        node.iter = _filter(node.iter, LOOP_FILTER, [])
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Expr:
        self.generic_visit(node)
        return _filter(nodes.List(node.nodes), CONCAT_FILTER, [])


def _filter(node: nodes.Node, name: str, arguments: list[nodes.Expr]) -> nodes.Filter:
    """`node | name(arguments)` at `node`'s line (jinja2 types a for loop's iterable as
    any node)."""
    wrapped = nodes.Filter(node, name, arguments, [], None, None)
    wrapped.set_lineno(node.lineno)
    return wrapped


def _syntax_error(err: TemplateSyntaxError, template: str) -> TemplateError:
    unknown = _UNKNOWN_TAG.match(err.message or "")
    if unknown and not _BLOCK_KEYWORDS.fullmatch(unknown.group(1)):
        written = tag_as_written(template, unknown.group(1), err.lineno)
        return UnrenderableTemplate(
            f"{written} is not a Jinja tag; custom tags are never run", written, err.lineno
        )
    construct = _line_text(template, err.lineno)
    return TemplateError(f"Jinja syntax error: {err.message}", construct, err.lineno)


def _runtime_error(err: Exception, template: str) -> TemplateError:
    line = _template_line(err)
    if isinstance(err, TemplateError):
        return err.at_line(line)
    construct = _line_text(template, line)
    if isinstance(err, jinja_errors.SecurityError):
        return UnsafeTemplate(f"the sandbox refused: {err}", construct, line)
    return TemplateError(f"the template failed: {err}", construct, line)


def _template_line(err: BaseException) -> int | None:
    """The template line the error was raised at, from Jinja's rewritten traceback."""
    lines = [
        lineno
        for frame, lineno in traceback.walk_tb(err.__traceback__)
        if frame.f_code.co_filename == "<template>"
    ]
    return lines[-1] if lines else None


def _line_text(template: str, line: int | None) -> str:
    if not line:
        return ""
    lines = template.splitlines()
    return lines[line - 1].strip() if line <= len(lines) else ""
