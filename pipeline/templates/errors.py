"""Why a template did not render: each error names the construct and, when known, its line."""

from __future__ import annotations


class TemplateError(Exception):
    """The template cannot be rendered (e.g. a syntax error); `.construct` names the part
    of the template at fault and `.line` its 1-based line when known."""

    def __init__(self, message: str, construct: str = "", line: int | None = None) -> None:
        self.construct = construct
        self.line = line
        self.reason = message
        super().__init__(f"{message} (line {line})" if line else message)

    def at_line(self, line: int | None) -> TemplateError:
        """The same error with its line filled in, when it had none."""
        if self.line is not None or line is None:
            return self
        located = type(self)(self.reason, self.construct, line)
        located.__cause__ = self.__cause__
        return located


class UnrenderableTemplate(TemplateError):
    """The template needs a function, helper, plugin call or include that is never run;
    `.construct` names it as written (e.g. `message(item)`, `{{time.now}}`)."""


class UnsafeTemplate(TemplateError):
    """The sandbox refused the template: it reaches for interpreter internals, or it
    exceeds the output size, time or iteration bounds."""


_last_line: tuple[str, int, int] = ("", 0, 1)
"""The last answer of `line_at` (source, offset, line), where the next one starts counting."""


def line_at(source: str, offset: int) -> int:
    """The 1-based line of `source` holding character `offset`. Parsers ask it for every
    tag in order, so it counts on from its last answer for the same source: the lines of
    all tags cost one pass over the template, not one pass per tag."""
    global _last_line
    offset = max(offset, 0)
    last_source, start, line = _last_line
    if last_source is not source or start > offset:
        start, line = 0, 1
    line += source.count("\n", start, offset)
    _last_line = (source, offset, line)
    return line
