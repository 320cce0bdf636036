"""Capabilities (DESIGN §5): which formats a message enables, and tool declarations.

Shared by the format adapters (which declare tools) and the linter (which checks that
every assistant format was enabled by an earlier platform/developer message).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson

DEFAULT_CAPABILITY = "markdown"

_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.DOTALL)


def enabled_formats(text: str) -> set[str]:
    """The formats a platform/developer message enables: every inline code span
    (`` `F` ``, exact, outside fenced code blocks)."""
    return set(_inline_code_spans(_outside_fences(text)))


def _outside_fences(text: str) -> str:
    """The text with fenced code blocks removed (an unclosed fence runs to the end)."""
    kept: list[str] = []
    fence: str | None = None
    for line in text.splitlines():
        match = _FENCE.match(line)
        if fence is None:
            if match:
                fence = match.group(1)
            else:
                kept.append(line)
        elif match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
            fence = None
    return "\n".join(kept)


def _inline_code_spans(text: str) -> Iterable[str]:
    for match in _CODE_SPAN.finditer(text):
        content = match.group(2)
        if "\n" in content:
            content = content.replace("\n", " ")
        if len(content) > 2 and content[0] == " " and content[-1] == " " and content.strip():
            content = content[1:-1]
        yield content


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool the developer declares: its name, description and JSON Schema of arguments."""

    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None

    @property
    def call_format(self) -> str:
        """The assistant format that calls this tool: `name:json`."""
        return tool_format(self.name)


def tool_format(name: str, sampler: str = "json") -> str:
    """The MMS format name for calling tool `name` with arguments in `sampler` syntax."""
    return f"{name}:{sampler}"


class ToolDefinitionError(ValueError):
    """A tool definition that cannot be read (the message says which and why)."""


def parse_tool_definitions(value: Any, where: str = "tools") -> list[ToolSpec]:
    """Tool specs from any of the ecosystem's shapes: OpenAI `tools`
    (`{type: function, function: {...}}`), legacy `functions`, Anthropic (`input_schema`),
    Gemini (`functionDeclarations`), bare `{name, description, parameters}` objects, or
    a JSON string of any of these (ShareGPT/LLaMA-Factory). Raises ToolDefinitionError,
    naming the entry at fault from `where` (the field the definitions came from)."""
    if isinstance(value, str):
        if not value.strip():
            return []
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError as err:
            raise ToolDefinitionError(f"{where} is a string but not valid JSON ({err})") from None
    if value is None:
        return []
    if isinstance(value, dict):
        return _specs_from_entry(value, where)
    if not isinstance(value, list):
        raise ToolDefinitionError(f"{where} must be a list, got {type(value).__name__}")
    specs: list[ToolSpec] = []
    for index, entry in enumerate(value):
        specs.extend(_specs_from_entry(entry, f"{where}[{index}]"))
    return specs


def _specs_from_entry(entry: Any, where: str) -> list[ToolSpec]:
    if not isinstance(entry, dict):
        raise ToolDefinitionError(f"{where} is not an object")
    declarations = entry.get("functionDeclarations", entry.get("function_declarations"))
    if isinstance(declarations, list):
        return [_spec(d, f"{where}.functionDeclarations[{i}]") for i, d in enumerate(declarations)]
    if isinstance(entry.get("function"), dict):
        return [_spec(entry["function"], f"{where}.function")]
    return [_spec(entry, where)]


def _spec(data: Any, where: str) -> ToolSpec:
    if not isinstance(data, dict):
        raise ToolDefinitionError(f"{where} is not an object")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ToolDefinitionError(f"{where} has no name")
    if "`" in name or "\n" in name:
        raise ToolDefinitionError(f"{where}: tool name {name!r} contains a backtick or newline")
    description = data.get("description")
    schema = data.get("parameters", data.get("input_schema", data.get("parametersJsonSchema")))
    return ToolSpec(
        name=name,
        description=description if isinstance(description, str) else None,
        parameters=schema if isinstance(schema, dict) else None,
    )
