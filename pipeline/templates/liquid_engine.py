"""The liquid engine: python-liquid 2 with its resource limits mapped from RenderLimits.

Liquid reaches only into mappings and lists, never Python attributes. The environment
has no templates to load: `{% include %}` and `{% render %}`, tags and filters it does not
define (custom ones), and `date` of "now"/"today" or of a timestamp (which depend on the
clock and the machine's time zone) raise UnrenderableTemplate - found by static analysis,
even in branches that would not run. Limits: loop iterations (per nest, python-liquid's
rule) = max_iterations, output stream and local namespace = 4 bytes per allowed character,
context depth python-liquid's default; the lexer's tokens, parsed nodes, loop iterations,
filters and output writes (captured ones too) check the clock, and filters that multiply text are
checked first. Values print as python-liquid prints them
(true/false, nil as nothing, arrays joined without separator).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import wraps
from typing import Any, ClassVar, TextIO, cast

from liquid import Environment, RenderContext, Undefined
from liquid import exceptions as liquid_errors
from liquid.ast import Node
from liquid.output import LimitedStringIO
from liquid.stream import TokenStream
from liquid.tag import Tag
from liquid.template import BoundTemplate
from liquid.token import Token

from pipeline.templates.amplify import check_call
from pipeline.templates.errors import (
    TemplateError,
    UnrenderableTemplate,
    UnsafeTemplate,
    line_at,
)
from pipeline.templates.limits import Budget

_PATH = re.compile(r"[\w-]+\??(?:\.[\w-]+\??|\[[^\]]*\])*")
_LOADER_TAGS = ("include", "render")
_CLOCK_INPUTS = ("now", "today")
_BLOCK_ENDS = re.compile(r"end\w+|else|elsif|when")


class _Missing(Undefined):
    """A variable with no value: prints as its output statement as written (or
    `{{ path }}`), recording the path; otherwise empty, as Liquid's Undefined is."""

    __slots__ = ()
    budget: ClassVar[Budget]

    def __str__(self) -> str:
        path, written = _placeholder(self)
        self.budget.miss(path)
        return written


class _TimedBuffer(LimitedStringIO):
    """python-liquid's limited output stream that also checks the clock on each write."""

    def __init__(self, limit: int, budget: Budget) -> None:
        super().__init__(limit=limit)
        self.budget = budget

    def write(self, text: str) -> int:
        self.budget.tick()
        return super().write(text)


class _TimedContext(RenderContext):
    """python-liquid's render context that checks the clock on every loop iteration and
    on writes to captured text: a loop that prints nothing, or prints into a capture,
    never reaches the render's buffer, so it would otherwise run on past the limit."""

    __slots__ = ()
    budget: ClassVar[Budget]

    @contextmanager
    def loop(self, namespace: Mapping[str, object], forloop: Any) -> Iterator[RenderContext]:
        forloop.it = self.budget.ticking(forloop.it)
        with super().loop(namespace, forloop) as context:
            yield context

    def get_buffer(self, buf: TextIO | None = None) -> _TimedBuffer:
        inner = super().get_buffer(buf)
        # a LimitedStringIO: the environment always sets an output stream limit
        assert isinstance(inner, LimitedStringIO)
        return _TimedBuffer(inner.limit, self.budget)


class _TimedEnvironment(Environment):
    """An environment whose lexer checks the clock on every token, so the parse of a
    huge template is bounded by the time limit too."""

    budget: Budget

    def tokenizer(self) -> Callable[[str], Iterator[Token]]:
        lex = super().tokenizer()
        return lambda source: self.budget.ticking(lex(source))


class _TimedTag:
    """A tag whose parsing checks the clock first: the parser asks a tag for every node
    of the template, so this bounds the parse of a huge template too."""

    def __init__(self, tag: Tag, budget: Budget) -> None:
        self._tag = tag
        self._budget = budget

    def get_node(self, stream: TokenStream) -> Node:
        self._budget.tick()
        return self._tag.get_node(stream)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tag, name)


def render(template: str, variables: dict[str, Any], budget: Budget) -> None:
    """Render a Liquid template into `budget`."""
    env = _environment(budget)
    try:
        parsed = env.from_string(template)
        budget.tick()
        _check_needs(env, parsed, template)
        budget.tick()
        buffer = _TimedBuffer(env.output_stream_limit or 0, budget)
        timed = type("TimedContext", (_TimedContext,), {"__slots__": (), "budget": budget})
        context = timed(parsed, globals=parsed.make_globals(variables))
        parsed.render_with_context(context, buffer)
    except liquid_errors.LiquidError as err:
        if isinstance(err.__cause__, TemplateError):  # a limit hit inside python-liquid's parser
            raise err.__cause__ from None
        raise _translated(err, env, template) from err
    budget.write(buffer.getvalue())


def _environment(budget: Budget) -> Environment:
    limits = budget.limits
    missing = type("Missing", (_Missing,), {"__slots__": (), "budget": budget})

    class Limited(_TimedEnvironment):
        """python-liquid reads its limits from the environment's class."""

        loop_iteration_limit = limits.max_iterations
        output_stream_limit = 4 * limits.max_output_chars
        local_namespace_limit = 4 * limits.max_output_chars

    env = Limited(undefined=missing, strict_filters=True, autoescape=False)
    env.budget = budget
    env.filters = {name: _guarded(name, function, budget) for name, function in env.filters.items()}
    # a _TimedTag stands in for its tag (delegating what it does not override)
    env.tags = {name: cast(Tag, _TimedTag(tag, budget)) for name, tag in env.tags.items()}
    return env


def _guarded(name: str, function: Callable[..., Any], budget: Budget) -> Callable[..., Any]:
    @wraps(function)
    def guarded(value: Any, *args: Any, **kwargs: Any) -> Any:
        budget.tick()
        if name == "date" and (value in _CLOCK_INPUTS or type(value) is int):
            raise UnrenderableTemplate(
                f"the date filter on {value!r} depends on the clock or the machine's time zone",
                f"{value!r} | date",
            )
        arguments = {key: item for key, item in kwargs.items() if key != "environment"}
        check_call(budget, name, value, args, arguments)
        result = function(value, *args, **kwargs)
        if isinstance(result, (str, list)):
            budget.check_size(len(result), f"the filter {name}")
        return result

    return guarded


def _check_needs(env: Environment, parsed: BoundTemplate, source: str) -> None:
    analysis = parsed.analyze(include_partials=False)
    for tag, spans in analysis.tags.items():
        if tag in _LOADER_TAGS:
            written = _enclosing(source, spans[0].index, "{%", "%}")
            raise UnrenderableTemplate(
                f"{written} needs another template, and no template is ever loaded",
                written,
                line_at(source, spans[0].index),
            )
    for name, spans in analysis.filters.items():
        if name not in env.filters:
            raise UnrenderableTemplate(
                f"| {name} is not a Liquid filter; custom filters are never run",
                f"| {name}",
                line_at(source, spans[0].index),
            )


def _translated(err: liquid_errors.LiquidError, env: Environment, source: str) -> TemplateError:
    offset = err.token.start_index if err.token is not None else -1
    line = line_at(source, offset) if offset >= 0 else None
    construct = err.token.value if err.token is not None else ""
    message = str(err.message)
    if isinstance(err, liquid_errors.ResourceLimitError):
        return UnsafeTemplate(f"the template exceeds a Liquid limit: {message}", construct, line)
    if isinstance(err, (liquid_errors.UnknownFilterError, liquid_errors.TemplateNotFoundError)):
        return UnrenderableTemplate(f"{message}; it is never run", construct, line)
    unknown = re.fullmatch(r"unexpected tag '(\w+)'", message)
    if unknown and unknown.group(1) not in env.tags and not _BLOCK_ENDS.fullmatch(unknown.group(1)):
        written = _enclosing(source, offset, "{%", "%}") if offset >= 0 else construct
        return UnrenderableTemplate(f"{message}: custom tags are never run", written, line)
    return TemplateError(f"Liquid error: {message}", construct, line)


def _placeholder(missing: Undefined) -> tuple[str, str]:
    """The missing path as written and the text to keep for it: the whole output
    statement when it prints nothing but that path, else `{{ path }}`."""
    token = missing.token
    if token is None or token.start_index < 0:
        return missing.name, "{{ " + missing.name + " }}"
    source, start = token.source, token.start_index
    match = _PATH.match(source, start)
    path = match.group() if match else missing.name
    written = _enclosing(source, start, "{{", "}}")
    inner = written[2:-2].strip("- \t\r\n")
    return path, written if inner == path else "{{ " + path + " }}"


def _enclosing(source: str, index: int, opener: str, closer: str) -> str:
    """The `opener ... closer` tag around `index` as written."""
    start = source.rfind(opener, 0, index + 1)
    end = source.find(closer, index)
    if start == -1 or end == -1:
        return source[index : index + 40]
    return source[start : end + len(closer)]
