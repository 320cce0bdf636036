"""The developer message that enables tools, reasoning and response formats in converted
threads.

The spec asks curators for variety, so wording and tool order vary across threads; they
are picked from a hash of the thread id (of its group's id for the threads of a pair or
group, so both sides of a preference pair get the same prompt), so a thread always gets
the same text.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

import orjson

from pipeline.capabilities import ToolSpec, tool_format
from pipeline.formats.typescript import schema_to_typescript

INTROS = (
    "You can use the following tools.",
    "## Tools\n\nThese tools are available to you.",
    "You have access to the tools below.",
    "# Available tools",
)
HOW_TO_CALL = (
    "To call a tool, reply with a message in the tool's format; its content is a JSON object "
    "of the arguments, matching the tool's schema. The result comes back in a context "
    "message named after the tool.",
    "Each tool is called by answering in its response format with the arguments as one "
    "JSON object. Wait for the tool's result before you continue.",
    "Write a tool call as a message whose format is the tool's format and whose content is "
    "the JSON arguments. You will receive the output as context.",
)
TOOL_SECTIONS = (
    "## {name}\nUse the `{fmt}` format to call it, with arguments of this type:\n{schema}",
    "Call **{name}** with the `{fmt}` response format; its arguments follow this schema:\n{schema}",
    "- `{fmt}`\n{schema}",
)
JSONL_NOTE = (
    "To call {name} several times at once, use `{fmt}`: one JSON object of arguments per line."
)
REASONING = (
    "Before answering, you may think step by step in a `reasoning` message, then write your "
    "answer.",
    "You can reason privately in the `reasoning` format before you reply.",
    "Think the problem through in a message with the `reasoning` format, then give your final "
    "answer.",
)
RESPONSE_FORMAT = (
    "Write your answer in the `{fmt}` format.",
    "Answer using the `{fmt}` format.",
    "Your reply must use the `{fmt}` format.",
)
RESPONSE_SCHEMA = (
    "Its content must be a value of this type:\n{schema}",
    "The answer follows this schema:\n{schema}",
    "Match this type exactly:\n{schema}",
)
ALLOWED_VALUES = (
    "Reply with exactly one of these values and nothing else: {values}.",
    "The only valid answers are {values}.",
    "Choose one of {values}; write only that value.",
)
ORDERINGS = ("given", "reversed", "alphabetical", "hashed")
_BACKTICK_RUN = re.compile(r"`{3,}")


def _digest(thread_id: str, purpose: str) -> bytes:
    return hashlib.sha256(f"{purpose}\n{thread_id}".encode()).digest()


def _pick(options: Sequence[str], thread_id: str, purpose: str) -> str:
    return options[int.from_bytes(_digest(thread_id, purpose)[:4], "big") % len(options)]


def _ordered(tools: Sequence[ToolSpec], thread_id: str) -> list[ToolSpec]:
    ordering = _pick(ORDERINGS, thread_id, "tool-order")
    if ordering == "reversed":
        return list(reversed(tools))
    if ordering == "alphabetical":
        return sorted(tools, key=lambda t: t.name)
    if ordering == "hashed":
        return sorted(tools, key=lambda t: _digest(thread_id, f"tool:{t.name}"))
    return list(tools)


def _fenced(code: str) -> str:
    """A typescript code block whose fence is longer than any backtick run inside."""
    longest = max((len(m.group()) for m in _BACKTICK_RUN.finditer(code)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}typescript\n{code}\n{fence}"


def tool_declaration(tools: Sequence[ToolSpec], thread_id: str, *, jsonl: bool = False) -> str:
    """Text enabling each tool as `` `name:json` `` with its schema in TypeScript (and
    `` `name:jsonl` `` too when parallel calls are written as JSONL)."""
    section = _pick(TOOL_SECTIONS, thread_id, "tool-section")
    parts = [_pick(INTROS, thread_id, "tool-intro"), _pick(HOW_TO_CALL, thread_id, "tool-how")]
    for tool in _ordered(tools, thread_id):
        schema = _fenced(schema_to_typescript(tool.name, tool.parameters, tool.description))
        parts.append(section.format(name=tool.name, fmt=tool.call_format, schema=schema))
        if jsonl:
            parts.append(JSONL_NOTE.format(name=tool.name, fmt=tool_format(tool.name, "jsonl")))
    return "\n\n".join(parts)


def reasoning_declaration(thread_id: str) -> str:
    """A sentence enabling the `reasoning` format."""
    return _pick(REASONING, thread_id, "reasoning")


def response_format_declaration(
    format_name: str,
    thread_id: str,
    *,
    schema: Any = None,
    allowed_values: Sequence[str] = (),
) -> str:
    """Sentences enabling the response format `format_name`, with the answer's JSON Schema
    (as TypeScript) or the allowed answers when the prompt gives them."""
    parts = [_pick(RESPONSE_FORMAT, thread_id, "response-format").format(fmt=format_name)]
    if schema is not None:
        typed = _fenced(schema_to_typescript("Response", schema))
        parts.append(_pick(RESPONSE_SCHEMA, thread_id, "response-schema").format(schema=typed))
    if allowed_values:
        values = ", ".join(orjson.dumps(value).decode() for value in allowed_values)
        parts.append(_pick(ALLOWED_VALUES, thread_id, "allowed-values").format(values=values))
    return " ".join(parts[:1]) + "".join(f"\n\n{part}" for part in parts[1:])
