"""The hf engine: Jinja2 as @huggingface/jinja runs it, for PPE scripts.

The jinja2 sandbox plus what PPE templates written for the JavaScript engine rely on:
`x.length` on strings, lists and dicts gives their length; `null` is None; comparing a
missing value is false (JavaScript's `undefined > 100`); `raise_exception(msg)` fails the
render with that message; blocks are trimmed (`trim_blocks`, `lstrip_blocks`) and the
trailing newline kept, as @huggingface/jinja does. Values print as JavaScript does
(true/false, null as nothing, arrays comma-joined), objects as JSON.
"""

from __future__ import annotations

from typing import Any, ClassVar, NoReturn

from jinja2 import Undefined

from pipeline.templates.errors import TemplateError
from pipeline.templates.jinja_engine import render_in
from pipeline.templates.jinja_sandbox import JinjaSandbox, MissingValue
from pipeline.templates.limits import Budget
from pipeline.templates.values import js_text


class HfMissingValue(MissingValue):
    """A missing value that, like JavaScript's undefined, compares false to anything."""

    __slots__ = ()

    # jinja2 declares Undefined's comparisons as its error-raising method (returning
    # Never), so any override that returns is "incompatible" to mypy.
    def __lt__(self, other: Any) -> bool:  # type: ignore[override]
        return False

    __le__ = __gt__ = __ge__ = __lt__  # type: ignore[assignment]


def _printed(value: Any) -> Any:
    return value if isinstance(value, Undefined) else js_text(value)


def _raise_exception(message: Any = "") -> NoReturn:
    raise TemplateError(f"the template raised: {message}", "raise_exception(...)")


class HfSandbox(JinjaSandbox):
    """The jinja2 sandbox with @huggingface/jinja's options and JavaScript-isms."""

    missing_class: ClassVar[type[MissingValue]] = HfMissingValue
    options: ClassVar[dict[str, Any]] = {
        "trim_blocks": True,
        "lstrip_blocks": True,
        "keep_trailing_newline": True,
        "finalize": _printed,
    }

    def __init__(self, budget: Budget, source: str) -> None:
        super().__init__(budget, source)
        self.globals["null"] = None
        self.globals["raise_exception"] = _raise_exception

    def getattr(self, obj: Any, attribute: str) -> Any:
        value = super().getattr(obj, attribute)
        if (
            attribute == "length"
            and isinstance(value, Undefined)
            and isinstance(obj, (str, list, dict))
        ):
            return len(obj)
        return value


def render(template: str, variables: dict[str, Any], budget: Budget) -> None:
    """Render an @huggingface/jinja template into `budget`."""
    render_in(HfSandbox, template, variables, budget)
