"""The Jinja2 sandbox every jinja-family template renders in.

An ImmutableSandboxedEnvironment (no loader, autoescape off, no `lipsum` or `random`,
which would make output vary) whose hooks also enforce the render's Budget: an unsafe
attribute raises UnsafeTemplate at once; every token lexed, node compiled, call, filter,
attribute and operator checks the clock; `range` and loops count against the iteration
bound; operations that multiply text (`'x' * n`, `~`, `center`, `indent`, `join`,
`replace`, `format`, `wordwrap`, `tojson`, `expandtabs`) are refused before they could
exceed the output bound.
Variables with no value are MissingValue objects that print as their placeholder.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import wraps
from types import CodeType
from typing import Any, ClassVar

from jinja2 import Undefined, pass_context
from jinja2.compiler import CodeGenerator
from jinja2.ext import Extension
from jinja2.lexer import Token, TokenStream
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import _PassArg

from pipeline.templates.amplify import (
    check_binop,
    check_call,
    check_format_fields,
    check_percent_widths,
)
from pipeline.templates.errors import UnrenderableTemplate, UnsafeTemplate
from pipeline.templates.jinja_checks import call_as_written
from pipeline.templates.limits import Budget

OUTPUT_FILTER = "mms-output"
LOOP_FILTER = "mms-loop"
CONCAT_FILTER = "mms-concat"
"""Internal filters the renderer wraps around outputs, loops and `~`; the hyphen keeps
templates from naming them."""


class MissingValue(Undefined):
    """A variable with no value: prints as its placeholder `{{ name }}` (recording the
    name), is false, iterates as empty, and lets attributes chain (`a.b` stays missing).
    Calling it raises UnrenderableTemplate. Subclassed per render with `budget`/`source`."""

    __slots__ = ()
    budget: ClassVar[Budget]
    source: ClassVar[str]

    @property
    def path(self) -> str | None:
        """The name as the template used it, when this stands for a named value."""
        return self._undefined_name

    def __str__(self) -> str:
        if self.path is None:
            return ""
        self.budget.miss(self.path)
        return "{{ " + self.path + " }}"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return type(self)(name=f"{self.path}.{name}" if self.path else name)

    def __getitem__(self, key: Any) -> Any:
        return type(self)(name=f"{self.path}[{key!r}]" if self.path else repr(key))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        written = call_as_written(self.source, self.path or "")
        raise UnrenderableTemplate(
            f"{written} calls {self.path}, which has no value; it is never run", written
        )


class _TimedLexing(Extension):
    """Checks the render's clock on every token the lexer makes, as the parser takes
    them: parsing a huge template takes time too."""

    environment: JinjaSandbox

    def filter_stream(self, stream: TokenStream) -> Iterable[Token]:
        return self.environment.budget.ticking(stream)


class _TimedCodeGenerator(CodeGenerator):
    """Jinja's compiler to Python source, checking the render's clock on every node."""

    environment: JinjaSandbox

    def visit(self, node: Any, *args: Any, **kwargs: Any) -> Any:
        self.environment.budget.tick()
        return super().visit(node, *args, **kwargs)


class JinjaSandbox(ImmutableSandboxedEnvironment):
    """The jinja2 engine's environment, bound to one render's budget."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})
    code_generator_class = _TimedCodeGenerator
    missing_class: ClassVar[type[MissingValue]] = MissingValue
    options: ClassVar[dict[str, Any]] = {}

    def __init__(self, budget: Budget, source: str) -> None:
        attributes = {"__slots__": (), "budget": budget, "source": source}
        missing = type("Missing", (self.missing_class,), attributes)
        super().__init__(
            autoescape=False,
            undefined=missing,
            extensions=["jinja2.ext.loopcontrols", _TimedLexing],
            **self.options,
        )
        self.budget = budget
        del self.globals["lipsum"]
        del self.filters["random"]
        self.globals["range"] = self._range
        self.filters = {name: self._guarded(name, f) for name, f in self.filters.items()}
        self.filters[OUTPUT_FILTER] = self._output
        self.filters[LOOP_FILTER] = self._loop
        self.filters[CONCAT_FILTER] = self._concat

    def _compile(self, source: str, filename: str) -> CodeType:
        """Python's compile of the generated source, which nothing can interrupt, starts
        only while there is time left."""
        self.budget.tick()
        return super()._compile(source, filename)

    def unsafe_undefined(self, obj: Any, attribute: str) -> Undefined:
        raise UnsafeTemplate(
            f"access to the attribute {attribute!r} of a {type(obj).__name__} is refused: "
            "templates may not reach interpreter internals",
            attribute,
        )

    def getattr(self, obj: Any, attribute: str) -> Any:
        self.budget.tick()
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        self.budget.tick()
        return super().getitem(obj, argument)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        __self.budget.tick()
        owner = getattr(__obj, "__self__", None)
        if isinstance(owner, str):
            if __obj.__name__ == "join" and args:
                args = (list(args[0]), *args[1:])
            __self._check_amplification(__obj.__name__, owner, args, kwargs)
        return super().call(__context, __obj, *args, **kwargs)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        self.budget.tick()
        check_binop(self.budget, operator, left, right)
        return super().call_binop(context, operator, left, right)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return None
        format_text = value.__self__

        def checked(*args: Any, **kwargs: Any) -> str:
            check_format_fields(self.budget, format_text)
            return wrapped(*args, **kwargs)

        return checked

    def _range(self, *args: int) -> range:
        numbers = range(*args)
        if len(numbers) > self.budget.limits.max_iterations:
            raise UnsafeTemplate(
                f"range({', '.join(map(str, args))}) has {len(numbers)} items, more than the "
                f"{self.budget.limits.max_iterations} iterations a template may run",
                f"range({', '.join(map(str, args))})",
            )
        return numbers

    def _guarded(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        passes_state = _PassArg.from_obj(function) is not None

        @wraps(function)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            self.budget.tick()
            state, (value, *rest) = (args[:1], args[1:]) if passes_state else ((), args)
            if name == "join":
                value = list(value)
                args = (*state, value, *rest)
            self._check_amplification(name, value, tuple(rest), kwargs)
            result = function(*args, **kwargs)
            if isinstance(result, (str, list)):
                self.budget.check_size(len(result), f"the filter |{name}")
            return result

        return guarded

    def _check_amplification(
        self, name: str, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        check_call(self.budget, name, value, args, kwargs)
        if name == "format" and isinstance(value, str):
            check_percent_widths(self.budget, value)

    def _output(self, value: Any, written: str | None, name: str) -> Any:
        """A missing value printed by `{{ ... }}` becomes that block as written."""
        if not written or not isinstance(value, MissingValue) or value.path is None:
            return value
        self.budget.miss(name)
        return written

    @pass_context
    def _loop(self, context: Any, value: Any) -> Any:
        for item in value:
            self.budget.iterate()
            yield item

    def _concat(self, values: list[Any]) -> str:
        parts = [str(value) for value in values]
        self.budget.check_size(sum(map(len, parts)), "the ~ concatenation")
        return "".join(parts)
