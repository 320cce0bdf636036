"""Anthropic Messages API records: a top-level `system` (string or text blocks), `tools`
with `input_schema`, and `messages` whose content is a string or a list of blocks (text,
tool_use, tool_result, thinking, redacted_thinking, image, document). Also the request
wrappers of the Message Batches API (`{custom_id, params}`) and of Amazon Bedrock batch
inference (`{recordId, modelInput}`); the Bedrock fine-tuning shape is the bare request.

Example: a Messages API request and the thread it becomes (the system prompt is the
developer's).

>>> from pipeline.formats.base import ConvertOptions
>>> from pipeline.sources import Record
>>> request = {
...     "system": "Answer in French.",
...     "messages": [
...         {"role": "user", "content": "Good morning!"},
...         {"role": "assistant", "content": "Bonjour !"},
...     ],
... }
>>> [thread] = to_threads(Record("chat.jsonl", "chat.jsonl:1", request), ConvertOptions())
>>> [(m.role, m.content) for m in thread.messages]
[('developer', 'Answer in French.'), ('user', 'Good morning!'), ('assistant', 'Bonjour !')]
"""

from __future__ import annotations

from typing import Any

from pipeline.formats.base import ConvertOptions, InputFormat, Sniff
from pipeline.formats.builder import (
    ThreadBuilder,
    a_json_kind,
    canonical_json,
    joined,
    json_kind,
    source_thread_id,
    tool_specs,
    turn_list,
)
from pipeline.formats.media import anthropic_source
from pipeline.mms import Media, Thread
from pipeline.quarantine import RecordRejected
from pipeline.sources import Record

NAME = "anthropic"
ROLES = ("user", "assistant")
WRAPPERS = (("params", "custom_id"), ("modelInput", "recordId"))
"""Batch request wrappers: (field holding the request body, field holding its id)."""
BODY_FIELDS = ("system", "tools", "messages", "id")
"""Request fields the thread itself holds (the rest go to meta.extra_fields)."""
SIGNATURE_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking"})
MEDIA_BLOCKS = frozenset({"image", "document"})
BLOCKS_BY_ROLE = {
    "user": frozenset({"text", "image", "document", "tool_result"}),
    "assistant": frozenset(
        {"text", "image", "document", "tool_use", "server_tool_use", "thinking"}
    ),
}
"""Block types each role may hold (redacted_thinking, server tool results and unknown
types are handled on their own)."""


def _unwrap(value: Any) -> tuple[Any, Any, dict[str, Any]]:
    """The request body, the wrapper's id (or None) and the wrapper's other fields."""
    if isinstance(value, dict):
        for body_key, id_key in WRAPPERS:
            body = value.get(body_key)
            if isinstance(body, dict) and isinstance(body.get("messages"), list):
                rest = {k: v for k, v in value.items() if k not in (body_key, id_key)}
                return body, value.get(id_key), rest
    return value, None, {}


def _block_types(messages: list[Any]) -> set[str]:
    return {
        str(block.get("type"))
        for message in messages
        if isinstance(message, dict) and isinstance(message.get("content"), list)
        for block in message["content"]
        if isinstance(block, dict)
    }


def _has_media_source(messages: list[Any]) -> bool:
    return any(
        isinstance(block.get("type"), str)
        and block["type"] in MEDIA_BLOCKS
        and isinstance(block.get("source"), dict)
        for message in messages
        if isinstance(message, dict) and isinstance(message.get("content"), list)
        for block in message["content"]
        if isinstance(block, dict)
    )


def sniff(value: object) -> Sniff:
    """Sure for Messages API shapes (top-level `system`, Anthropic block types, tools with
    `input_schema`, image/document blocks with a `source`, batch wrappers); weak for plain
    user/assistant messages, which OpenAI records share."""
    body = _unwrap(value)[0]
    if not isinstance(body, dict):
        return Sniff(0.0, "not an object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return Sniff(0.0, "no messages list")
    if not all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and m["role"] in ROLES
        for m in messages
    ):
        return Sniff(0.0, "a message is not a user/assistant Messages API message")
    if _block_types(messages) & SIGNATURE_BLOCKS:
        return Sniff(1.0, "Anthropic content blocks (tool_use, tool_result or thinking)")
    if isinstance(body.get("system"), (str, list)):
        return Sniff(1.0, "top-level system next to user/assistant messages")
    tools = body.get("tools")
    if isinstance(tools, list) and any(isinstance(t, dict) and "input_schema" in t for t in tools):
        return Sniff(1.0, "tools with input_schema")
    if _has_media_source(messages):
        return Sniff(1.0, "image/document blocks with a source")
    if body is not value:
        return Sniff(0.9, "Message Batches / Bedrock batch request wrapper")
    return Sniff(0.3, "plain user/assistant messages (OpenAI records look the same)")


def _system(builder: ThreadBuilder, system: Any) -> None:
    """The top-level system prompt as a developer message."""
    if system is None:
        return
    if isinstance(system, str):
        text = system
    elif isinstance(system, list):
        pieces = []
        for index, block in enumerate(system):
            if not isinstance(block, dict) or not isinstance(block.get("text"), str):
                raise RecordRejected(
                    "missing_field", f"system[{index}] is not a text block with a string text"
                )
            _note_cache_control(builder, block)
            pieces.append(block["text"])
        text = "\n\n".join(pieces)
    else:
        raise RecordRejected(
            "missing_field",
            f"system is {a_json_kind(system)} (expected a string or a list of text blocks)",
        )
    if text.strip():
        builder.developer(text)


def _tools(builder: ThreadBuilder, tools: Any) -> None:
    builder.declare_tools(tool_specs(tools))


def _note_cache_control(builder: ThreadBuilder, block: dict[str, Any]) -> None:
    if "cache_control" in block:
        builder.note("dropped prompt-caching cache_control markers (request transport only)")


class _Message:
    """Reads one message's blocks in order: runs of text become one message, each
    tool_use, tool_result and thinking block its own item."""

    def __init__(self, builder: ThreadBuilder, role: str, where: str):
        self.builder = builder
        self.role = role
        self.where = where
        self.pieces: list[str | Media] = []
        """Text blocks and kept images, in order."""
        self.citations: list[Any] = []
        self.dropped_media = False
        """An image/document was dropped: the message is kept even when no text is left."""

    def read(self, blocks: list[Any]) -> None:
        for index, block in enumerate(blocks):
            self.block(block, f"{self.where}.content[{index}]")
        self.flush()

    def flush(self) -> None:
        if not self.pieces and not self.dropped_media:
            return
        meta: dict[str, Any] = {"citations": self.citations} if self.citations else {}
        separator = "" if self.citations else "\n\n"
        text, media = self.builder.media_content(joined(([p] for p in self.pieces), separator))
        if self.role == "user":
            self.builder.user(text, meta=meta, media=media)
        else:
            self.builder.assistant(text, meta=meta, media=media)
        self.pieces, self.citations, self.dropped_media = [], [], False

    def block(self, block: Any, where: str) -> None:
        if isinstance(block, str):
            self.pieces.append(block)
            return
        if not isinstance(block, dict):
            raise RecordRejected("missing_field", f"{where} is {a_json_kind(block)}, not a block")
        _note_cache_control(self.builder, block)
        kind = block.get("type")
        if kind == "redacted_thinking":
            self.builder.note("dropped redacted_thinking blocks (encrypted, cannot be read)")
            return
        if self.role == "assistant" and isinstance(kind, str) and kind.endswith("_tool_result"):
            self.server_tool_result(block, where)
            return
        if (
            not isinstance(kind, str)
            or kind not in BLOCKS_BY_ROLE["user"] | BLOCKS_BY_ROLE["assistant"]
        ):
            self.builder.note(f"{where} has unknown block type {kind!r}; kept in meta")
            self.builder.keep(where, block)
            return
        if kind not in BLOCKS_BY_ROLE[self.role]:
            raise RecordRejected(
                "invalid_thread", f"{where} is a {kind} block in a {self.role} message"
            )
        getattr(self, f"_{kind}")(block, where)

    def _text(self, block: dict[str, Any], where: str) -> None:
        text = block.get("text")
        if not isinstance(text, str):
            raise RecordRejected(
                "missing_field", f"{where}.text is {a_json_kind(text)}, not a string"
            )
        if isinstance(block.get("citations"), list):
            self.citations.extend(block["citations"])
        self.pieces.append(text)

    def _image(self, block: dict[str, Any], where: str) -> None:
        self._placeholder("image", anthropic_source(block.get("source")))

    def _placeholder(self, kind: str, media: Media | None = None) -> None:
        """A media block: kept, replaced by its placeholder, or dropped."""
        kept = self.builder.kept(kind, media)
        if kept is None:
            self.dropped_media = True
        else:
            self.pieces.append(kept)

    def _document(self, block: dict[str, Any], where: str) -> None:
        source = block.get("source")
        if isinstance(source, dict) and source.get("type") == "text":
            data = source.get("data")
            if isinstance(data, str):
                title = block.get("title")
                self.pieces.append(f"{title}\n\n{data}" if isinstance(title, str) else data)
                return
        self._placeholder("document")

    def _tool_use(self, block: dict[str, Any], where: str) -> None:
        self.flush()
        name = block.get("name")
        if not isinstance(name, str) or not name:
            raise RecordRejected("invalid_tool_call", f"{where}.name is missing or not a string")
        call_id = block.get("id")
        self.builder.tool_call(
            name, block.get("input"), call_id=call_id if isinstance(call_id, str) else None
        )

    _server_tool_use = _tool_use

    def _tool_result(self, block: dict[str, Any], where: str) -> None:
        self.flush()
        call_id = block.get("tool_use_id")
        if not isinstance(call_id, str):
            raise RecordRejected("missing_field", f"{where}.tool_use_id is missing")
        text, media = self.builder.content(block.get("content"), f"{where}.content")
        meta = {"is_error": True} if block.get("is_error") is True else {}
        self.builder.tool_result(text, call_id=call_id, meta=meta, media=media)

    def server_tool_result(self, block: dict[str, Any], where: str) -> None:
        self.flush()
        call_id = block.get("tool_use_id")
        if not isinstance(call_id, str):
            raise RecordRejected("missing_field", f"{where}.tool_use_id is missing")
        content = block.get("content")
        text = content if isinstance(content, str) else canonical_json(content)
        self.builder.tool_result(text, call_id=call_id, meta={"block_type": block["type"]})

    def _thinking(self, block: dict[str, Any], where: str) -> None:
        self.flush()
        thinking = block.get("thinking")
        if not isinstance(thinking, str):
            raise RecordRejected("missing_field", f"{where}.thinking is not a string")
        signature = block.get("signature")
        meta = {"signature": signature} if isinstance(signature, str) else {}
        self.builder.reasoning(thinking, meta=meta)


def _messages(builder: ThreadBuilder, messages: list[Any]) -> None:
    """Append every message."""
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            raise RecordRejected(
                "missing_field", f"{where} is {a_json_kind(message)}, not an object"
            )
        role = message.get("role")
        if role not in ROLES:
            raise RecordRejected(
                "unknown_role", f"{where}.role is {role!r} (expected user or assistant)"
            )
        content = message.get("content")
        if isinstance(content, str):
            content = [content]
        if not isinstance(content, list):
            raise RecordRejected(
                "missing_field",
                f"{where}.content is {a_json_kind(content)} (expected a string or a list of blocks)",
            )
        _Message(builder, role, where).read(content)
        builder.keep_unread(message, ("role", "content"), where)


def to_threads(record: Record, options: ConvertOptions) -> list[Thread]:
    """One thread per request: system -> developer, blocks -> messages, tools declared."""
    value = record.value
    if not isinstance(value, dict):
        raise RecordRejected(
            "not_an_object", f"expected a Messages API request object, got {json_kind(value)}"
        )
    body, wrapper_id, wrapper = _unwrap(value)
    messages = turn_list(body, "messages", "messages")
    source_id = wrapper_id if wrapper_id is not None else body.get("id")
    builder = ThreadBuilder(record, NAME, options, thread_id=source_thread_id(record, source_id))
    _system(builder, body.get("system"))
    _tools(builder, body.get("tools"))
    _messages(builder, messages)
    used = ("system", "tools", "messages") if wrapper_id is not None else BODY_FIELDS
    builder.keep_unread(body, used)
    builder.keep_unread(wrapper)
    return [builder.build()]


FORMAT = InputFormat(
    name=NAME,
    summary="Anthropic Messages API requests (system, tools with input_schema, content blocks: "
    "tool_use, tool_result, thinking, image, document); Message Batches and Bedrock wrappers",
    sniff=sniff,
    to_threads=to_threads,
)
