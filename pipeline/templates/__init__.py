"""Safe rendering of prompt templates found in data.

Seven engines (`ENGINES`), each sandboxed: nothing in a template is ever executed beyond
the engine's own data-only constructs. A function, helper, plugin call or include raises
`UnrenderableTemplate` naming it as written; reaching for interpreter internals or
exceeding the output/time/iteration bounds of `RenderLimits` raises `UnsafeTemplate`;
a syntax error raises `TemplateError` with its line. A variable with no value keeps its
placeholder as written and is named in `Rendered.missing`. Output is never HTML-escaped:
these are prompts, not web pages.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pipeline.templates.errors import TemplateError, UnrenderableTemplate, UnsafeTemplate
from pipeline.templates.limits import Budget, Deadline, RenderLimits
from pipeline.templates.values import plain_variables

__all__ = [
    "ENGINES",
    "Deadline",
    "RenderLimits",
    "Rendered",
    "TemplateError",
    "UnrenderableTemplate",
    "UnsafeTemplate",
    "engine_name",
    "render",
]

ENGINES: dict[str, str] = {
    "jinja2": "Jinja2 in an immutable sandbox; no loader, calls limited to Jinja builtins",
    "hf": "Jinja2 sandbox plus the JavaScript-isms of @huggingface/jinja (x.length, null)",
    "handlebars": "Handlebars paths, if/unless/each/with and comments; other helpers not run",
    "liquid": "python-liquid 2 with its loop, output, context and namespace limits",
    "semantic-kernel": "Semantic Kernel {{$var}} and quoted values; plugin calls not run",
    "golang": "Go text/template fields, if/range/with/variables; functions not run",
    "fstring": "Python str.format fields as LangChain uses them; no attribute or index access",
}
"""Canonical engine name -> what it renders."""

_ENGINE_MODULES: dict[str, str] = {
    "jinja2": "jinja_engine",
    "hf": "hf_engine",
    "handlebars": "handlebars",
    "liquid": "liquid_engine",
    "semantic-kernel": "semantic_kernel",
    "golang": "golang",
    "fstring": "fstring",
}
"""Canonical engine name -> its module in this package, imported on first use: most runs
render no template, and the engines' libraries (python-liquid, jinja2) take a quarter of
a second to import in every worker process."""


def _renderer(engine: str) -> Callable[[str, dict[str, Any], Budget], None]:
    module = importlib.import_module(f"pipeline.templates.{_ENGINE_MODULES[engine]}")
    return module.render  # type: ignore[no-any-return]


_ALIASES = {
    "jinja": "jinja2",
    "huggingface": "hf",
    "localai": "golang",
    "ollama": "golang",
    "go": "golang",
    "python": "fstring",
    "f-string": "fstring",
    "langchain": "fstring",
    "semantic_kernel": "semantic-kernel",
}


@dataclass(frozen=True, slots=True)
class Rendered:
    """The rendered text and the variables whose placeholders were kept for lack of a value."""

    text: str
    missing: tuple[str, ...] = ()


def engine_name(alias: str) -> str:
    """The canonical engine for a template-format name as data spells it (case-insensitive:
    huggingface -> hf, ollama/localai -> golang, python/f-string/langchain -> fstring)."""
    key = alias.strip().lower()
    name = _ALIASES.get(key, key)
    if name not in ENGINES:
        raise UnrenderableTemplate(
            f"unknown template format {alias!r} (known: {', '.join(ENGINES)})", construct=alias
        )
    return name


def render(
    template: str,
    engine: str,
    variables: Mapping[str, Any],
    *,
    limits: RenderLimits | None = None,
    deadline: Deadline | None = None,
) -> Rendered:
    """Render `template` with `engine` (a name or alias) and JSON-like `variables`, within
    `limits` and by `deadline` (shared by the templates of one record; default: the time
    limit from now); raises a `TemplateError` subclass when it cannot be rendered safely."""
    renderer = _renderer(engine_name(engine))
    budget = Budget(limits or RenderLimits(), deadline)
    try:
        renderer(template, plain_variables(variables), budget)
    except RecursionError as err:
        raise UnsafeTemplate("the template nests or recurses too deeply") from err
    except MemoryError as err:
        raise UnsafeTemplate("the template needs more memory than rendering may use") from err
    return Rendered(budget.text(), budget.missing)
