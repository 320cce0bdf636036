"""OpenAI chat messages as input: Chat Completions / fine-tuning JSONL, Hugging Face
`messages` columns, preference pairs and KTO labels built from such message lists,
OpenAI evals samples, and LLaMA-Factory's OpenAI-shaped files (content parts with
`value`, `reasoning` and `tool_call` parts, `loss_weight`, `<image>` tags).

Record shapes read (first match wins):
- `{"input": {"messages", "tools"}, "preferred_output", "non_preferred_output"}`
  (OpenAI preference fine-tuning) -> a chosen and a rejected thread;
- `chosen_messages` / `rejected_messages` (LLaMA-Factory v1 DPO) or `chosen` / `rejected`
  message lists (full conversations, or completions after `prompt` / `messages`);
- `{"input": [messages] | "text", "ideal": ...}` (OpenAI evals) -> input plus the ideal
  answer as the final assistant message;
- `{"messages": [...]}` or TRL's `prompt` + `completion` message lists (a string prompt
  or completion is one user or assistant message: OpenAI's legacy fine-tuning files),
  with a boolean `label` (KTO) -> one thread; a `prompt` alone (TRL's prompt-only type)
  -> a prompt-only thread;
- a bare JSON array of messages (a JSON Lines line that is a list, as xtuner's files
  hold) -> one thread, as if it were `{"messages": [...]}`.

TRL's other standard (string) forms (implicit-prompt preference, prompt/response,
stepwise supervision) are the `trl` format's.

Tool calls, tool results, reasoning and refusals follow the shared mapping (builder.py);
fields MMS has no place for go to `meta.extra_fields` (record) or `meta.message_meta`
(message: `weight`, `loss_weight`, `name`, media references ...).

Layout: layout.py reads the record's shape into the threads to build; tools.py reads its
tool definitions; messages.py adds each message to a thread, with content.py reading
content parts and calls.py tool calls.

Example: a chat record and the thread it becomes (system is the developer's).

>>> from pipeline.formats.base import ConvertOptions
>>> from pipeline.sources import Record
>>> record = {"messages": [
...     {"role": "system", "content": "Be terse."},
...     {"role": "user", "content": "Name a prime."},
...     {"role": "assistant", "content": "7"},
... ]}
>>> [thread] = to_threads(Record("chat.jsonl", "chat.jsonl:1", record), ConvertOptions())
>>> [(m.role, m.content) for m in thread.messages]
[('developer', 'Be terse.'), ('user', 'Name a prime.'), ('assistant', '7')]
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pipeline.formats.base import ConvertOptions, InputFormat, Sniff
from pipeline.formats.builder import ThreadBuilder
from pipeline.formats.openai.layout import PAIRS, PREFERENCE_OUTPUTS, read_layout
from pipeline.formats.openai.messages import ROLES, TOOL_ROLES, MessageReader
from pipeline.formats.openai.tools import TOOL_KEYS, read_tools
from pipeline.mms import Thread
from pipeline.sources import Record

NAME = "openai"
FOREIGN_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking"})
"""Anthropic content block types: a message holding one is not an OpenAI message."""


def _as_list(value: Any) -> list[Any] | None:
    if isinstance(value, list):
        return value
    if isinstance(value, dict) and "role" in value:
        return [value]
    return None


def _message_lists(value: dict[str, Any]) -> list[list[Any]]:
    """Every OpenAI message list the record carries, whatever its shape."""
    lists = [_as_list(value.get(key)) for key in ("messages", "prompt", "completion")]
    lists += [_as_list(value.get(key)) for pair in PAIRS for key in pair]
    inputs = value.get("input")
    if isinstance(inputs, list):
        lists.append(inputs)
    elif isinstance(inputs, dict):
        lists.append(_as_list(inputs.get("messages")))
        lists += [_as_list(value.get(key)) for key in PREFERENCE_OUTPUTS]
    return [found for found in lists if found]


def _foreign_shape(message: Any) -> str | None:
    """Why a message is not an OpenAI message, or None if it is one."""
    if not isinstance(message, dict):
        return "a message is not an object"
    if "role" not in message:
        if "from" in message or "value" in message:
            return "messages use from/value (ShareGPT)"
        return "a message has no role"
    if message["role"] not in ROLES:
        return f"role {message['role']!r} is not an OpenAI role"
    content = message.get("content")
    if isinstance(content, list) and any(
        isinstance(part, dict)
        and isinstance(part.get("type"), str)
        and part["type"] in FOREIGN_BLOCKS
        for part in content
    ):
        return "content blocks of Anthropic types (tool_use, tool_result, thinking)"
    return None


def _uses_tools(value: dict[str, Any], messages: list[Any]) -> bool:
    inputs = value.get("input")
    holders = [value, inputs] if isinstance(inputs, dict) else [value]
    if any(holder.get(key) for holder in holders for key in TOOL_KEYS):
        return True
    return any(
        message.get("tool_calls") or message.get("function_call") or message["role"] in TOOL_ROLES
        for message in messages
    )


def _sniff_list(value: list[Any]) -> Sniff:
    """A bare message list: typical with an assistant message; unlikely with user
    messages only (MMS reads those as well); not when a message carries MMS's `end_turn`."""
    if not value:
        return Sniff(0.0, "an empty list")
    for message in value:
        reason = _foreign_shape(message)
        if reason is not None:
            return Sniff(0.0, reason)
        if "end_turn" in message:
            return Sniff(0.0, "a message carries end_turn (an MMS message list)")
    if _uses_tools({}, value):
        return Sniff(1.0, "a bare list of OpenAI messages with tool calls or results")
    if any(message["role"] == "assistant" for message in value):
        return Sniff(0.8, "a bare list of role/content messages (OpenAI chat)")
    return Sniff(0.4, "a bare list of role/content messages without an assistant message")


def sniff(value: object) -> Sniff:
    """Sure with tool calls, tool results or tool definitions; typical for role/content
    message lists (also a bare list of them); unlikely with a top-level `system`
    (Anthropic); not for ShareGPT from/value turns or Anthropic content blocks."""
    if isinstance(value, list):
        return _sniff_list(value)
    if not isinstance(value, dict):
        return Sniff(0.0, "not a JSON object or a list of messages")
    lists = _message_lists(value)
    if not lists:
        return Sniff(0.0, "no OpenAI message list (messages, chosen/rejected, input + ideal)")
    messages = [message for found in lists for message in found]
    for message in messages:
        reason = _foreign_shape(message)
        if reason is not None:
            return Sniff(0.0, reason)
    if isinstance(value.get("system"), (str, list)):
        return Sniff(0.3, "role/content messages with a top-level system (Anthropic-like)")
    if _uses_tools(value, messages):
        return Sniff(1.0, "OpenAI messages with tool calls, tool results or tool definitions")
    return Sniff(0.8, "role/content message list (OpenAI chat)")


def to_threads(record: Record, options: ConvertOptions) -> list[Thread]:
    """One thread per record; two (chosen, rejected) for preference pairs."""
    if isinstance(record.value, list):  # a bare message list: its `messages`
        record = replace(record, value={"messages": record.value})
    layout = read_layout(record)
    tools = read_tools(layout.tools)
    threads = []
    for side in layout.sides:
        builder = ThreadBuilder(record, NAME, options, thread_id=side.thread_id, meta=side.meta)
        if side.prompt_only is not None:
            builder.prompt_only(side.prompt_only)
        builder.declare_tools(tools.specs)
        reader = MessageReader(builder, record.value, tools)
        for where, message in side.turns:
            reader.message(where, message)
        reader.finish()
        builder.keep_unread(layout.extras, reader.content.media_tags.read_keys)
        for note in layout.notes:
            builder.note(note)
        threads.append(builder.build())
    return threads


FORMAT = InputFormat(
    name=NAME,
    summary="OpenAI chat messages: fine-tuning JSONL, HF messages columns, tools and tool "
    "calls (also legacy functions), reasoning, preference pairs, KTO labels, evals samples, "
    "LLaMA-Factory's OpenAI-shaped files",
    sniff=sniff,
    to_threads=to_threads,
)
