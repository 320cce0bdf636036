"""Capabilities (DESIGN §5): which formats a message enables, and tool declarations.

Shared by the format adapters (which declare tools) and the linter (which checks that
every assistant format was enabled by an earlier platform/developer message).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from pipeline.digest_cache import DigestCache

if TYPE_CHECKING:
    from pipeline.mms import Message, Thread

DEFAULT_CAPABILITY = "markdown"
ENABLING_ROLES = frozenset({"platform", "developer"})

_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.DOTALL)


_ENABLED = DigestCache[frozenset[str]]()


def enabled_formats(text: str) -> frozenset[str]:
    """The formats a platform/developer message enables: every inline code span
    (`` `F` ``, exact, outside fenced code blocks). Datasets repeat their developer
    prompts thread after thread, so each distinct text is parsed once."""
    return _ENABLED.get(text, lambda: frozenset(_inline_code_spans(outside_fences(text))))


def outside_fences(text: str) -> str:
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


def without_code(text: str) -> str:
    """The prose of a message: fenced blocks removed and inline code spans blanked."""
    return _CODE_SPAN.sub(" ", outside_fences(text))


def mentions_without_backticks(text: str, format_name: str) -> str | None:
    """How `text` names `format_name` as a plain word outside code (case-insensitive),
    e.g. "JSON" for `json`; None when it does not."""
    pattern = re.compile(rf"(?<![\w:`]){re.escape(format_name)}(?![\w`]|:\w)", re.IGNORECASE)
    match = pattern.search(without_code(text))
    return match.group(0) if match else None


@dataclass(frozen=True, slots=True)
class CapabilityUse:
    """One assistant message in a non-default format, and who enabled that format before it.

    `enabled_by` is the index of the first earlier platform/developer message that enables
    it (None if none does); `in_settings` whether settings.formats names it; `by_user` and
    `by_context` the first earlier user/context message that names it as a code span, which
    never enables anything but tells a curator where the format came from.
    """

    index: int
    format: str
    enabled_by: int | None
    in_settings: bool
    by_user: int | None
    by_context: int | None

    @property
    def enabled(self) -> bool:
        return self.enabled_by is not None or self.in_settings


@dataclass(frozen=True, slots=True)
class ThreadCapabilities:
    """What a thread enables and uses: `enabled` maps each format enabled by a
    platform/developer message to the first such message (settings-only formats map to
    None); `uses` lists every assistant message in a non-default format, in order."""

    enabled: dict[str, int | None]
    uses: list[CapabilityUse]


def thread_capabilities(thread: Thread) -> ThreadCapabilities:
    """One pass over the thread (DESIGN §5): a format is enabled for assistant message i by
    an EARLIER platform/developer code span or by settings.formats; user and context
    messages never enable anything (they are searched only for a format nothing enabled,
    to say where it came from)."""
    messages = thread.messages
    settings = {f.name for f in thread.settings.formats} if thread.settings else set()
    by_developer: dict[str, int] = {}
    uses: list[CapabilityUse] = []
    for index, message in enumerate(messages):
        if message.role in ENABLING_ROLES:
            for name in enabled_formats(message.content):
                by_developer.setdefault(name, index)
        elif message.role == "assistant":
            name = message.format or DEFAULT_CAPABILITY
            if name == DEFAULT_CAPABILITY:
                continue
            enabled_by = by_developer.get(name)
            in_settings = name in settings
            unexplained = enabled_by is None and not in_settings
            uses.append(
                CapabilityUse(
                    index,
                    name,
                    enabled_by,
                    in_settings,
                    _first_naming(messages, "user", name, index) if unexplained else None,
                    _first_naming(messages, "context", name, index) if unexplained else None,
                )
            )
    enabled: dict[str, int | None] = dict.fromkeys(sorted(settings))
    enabled.update(by_developer)
    return ThreadCapabilities(enabled, uses)


def _first_naming(messages: Sequence[Message], role: str, name: str, before: int) -> int | None:
    """The first message of `role` before index `before` that names `name` as a code span
    (not cached: user and context texts rarely repeat)."""
    for index in range(before):
        message = messages[index]
        if (
            message.role == role
            and name in message.content
            and name in _inline_code_spans(outside_fences(message.content))
        ):
            return index
    return None


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
