"""One thread's OpenAI messages as ThreadBuilder calls: system and developer messages,
user messages, assistant messages (reasoning, text, refusal, tool calls, training
weight) and tool results, with the fields MMS has no place for in message meta."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from pipeline.formats.builder import ThreadBuilder, canonical_json, json_kind
from pipeline.formats.openai.calls import CallReader
from pipeline.formats.openai.content import ContentReader
from pipeline.formats.openai.tools import Tools
from pipeline.mms import Media, canonical_weight, is_weight
from pipeline.quarantine import RecordRejected

TOOL_ROLES = ("tool", "function")
"""Roles of tool results (`function`: the legacy functions API)."""
ROLES = ("system", "developer", "user", "assistant", *TOOL_ROLES)
REASONING_KEYS = ("reasoning_content", "reasoning", "thinking")
WEIGHT_KEYS = ("weight", "loss_weight")
MESSAGE_KEYS = frozenset(
    {"role", "content", "tool_calls", "function_call", "tool_call_id", "refusal"}
    | set(REASONING_KEYS)
    | set(WEIGHT_KEYS)
)
RESULT_KEYS = MESSAGE_KEYS | {"name"}
"""Message fields read into MMS; a result's `name` names its tool, other roles' go to meta."""


class MessageReader:
    """Adds one side's OpenAI messages to a ThreadBuilder."""

    def __init__(self, builder: ThreadBuilder, value: dict[str, Any], tools: Tools):
        self.b = builder
        self.calls = CallReader(builder, tools)
        self.content = ContentReader(builder, value, self.calls)

    def message(self, where: str, message: Any) -> None:
        """Add one message (any role); raises RecordRejected naming the field at fault."""
        if not isinstance(message, dict):
            kind = json_kind(message)
            raise RecordRejected("missing_field", f"{where} is {kind}, expected a message object")
        role = message.get("role")
        if role is None:
            raise RecordRejected("missing_field", f"{where}.role is missing")
        if role not in ROLES:
            raise RecordRejected(
                "unknown_role", f"{where}.role is {role!r} (expected {', '.join(ROLES)})"
            )
        weights, first = self._message_meta(message, role)
        self.content.start(role)
        if role == "assistant":
            self._assistant(where, message, self._weight(where, weights), first)
            return
        text, media = self.content.plain_text(message.get("content"), f"{where}.content", role)
        if self.content.media_refs:
            first["media"] = self.content.media_refs
        if role in TOOL_ROLES:
            self._result(where, message, text, {**weights, **first}, media)
        elif role == "user":
            self.b.user(text, meta={**weights, **first}, media=media)
        else:
            self.b.developer(text, meta={**weights, **first}, media=media)

    def finish(self) -> None:
        """Declare the tools the calls need (keep other hosted tools in meta), and check
        the media lists against their tags (MediaTags.finish)."""
        self.calls.finish()
        self.content.media_tags.finish()

    def _message_meta(
        self, message: dict[str, Any], role: str
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Per-message meta: training weights (for every message made from this one) and
        the other fields MMS has no place for (for the first)."""
        weights = {k: message[k] for k in WEIGHT_KEYS if message.get(k) is not None}
        known = RESULT_KEYS if role in TOOL_ROLES else MESSAGE_KEYS
        first = {k: v for k, v in message.items() if k not in known and v is not None}
        return weights, first

    def _weight(self, where: str, weights: dict[str, Any]) -> float | None:
        """An assistant message's training weight (`weight`, else `loss_weight`), as the
        thread keeps it; RecordRejected when it is not a number >= 0, since then nobody
        knows whether the answer is to be learned."""
        for key, value in weights.items():
            if not is_weight(value):
                raise RecordRejected(
                    "missing_field",
                    f"{where}.{key} is {canonical_json(value)[:40]}, expected a number >= 0 "
                    "(0: do not train this message)",
                )
        values = list(weights.values())
        if len(set(values)) > 1:
            self.b.note(f"{where} has weight {values[0]} and loss_weight {values[1]}; kept weight")
        return canonical_weight(values[0]) if values else None

    def _assistant(
        self, where: str, message: dict[str, Any], weight: float | None, first: dict[str, Any]
    ) -> None:
        """The assistant message as MMS messages (reasoning, text, tool calls), each with
        the message's training weight."""
        pieces: list[tuple[Any, ...]] = list(self._reasoning_field(where, message, first))
        pieces += self.content.pieces(message.get("content"), f"{where}.content")
        if self.content.media_refs:
            first["media"] = self.content.media_refs
        refusal = message.get("refusal")
        if isinstance(refusal, str) and refusal:
            if any(kind == "text" and text for kind, text, *_ in pieces):
                first["refusal"] = refusal
            else:
                pieces.append(("text", refusal, ()))
                first["refusal"] = True
        pieces += self.calls.calls(where, message)
        pieces = [piece for piece in pieces if piece[0] != "text" or piece[1]]
        if not pieces:
            self.b.note(f"{where} (assistant) has no content; kept as an empty message")
            pieces = [("text", "", ())]
        for piece in pieces:
            self._add_piece(piece, weight, first)
            first = {}

    def _add_piece(
        self, piece: tuple[Any, ...], weight: float | None, meta: dict[str, Any]
    ) -> None:
        kind = piece[0]
        if kind == "reasoning":
            self.b.reasoning(piece[1], weight=weight, meta=meta)
        elif kind == "call":
            _, name, arguments, call_id = piece
            arguments = self.calls.arguments(name, arguments)
            self.b.tool_call(name, arguments, call_id, weight=weight, meta=meta)
        else:
            self.b.assistant(piece[1], weight=weight, meta=meta, media=piece[2])

    def _reasoning_field(
        self, where: str, message: dict[str, Any], first: dict[str, Any]
    ) -> Iterator[tuple[str, str]]:
        """The first reasoning field as a reasoning piece; other ones go to message meta."""
        found = None
        for key in REASONING_KEYS:
            value = message.get(key)
            if isinstance(value, str) and value.strip() and found is None:
                found = value
                yield ("reasoning", value)
            elif value not in (None, "", found):
                first[key] = value
                self.b.note(f"{where}.{key} kept in message meta (not used as reasoning)")

    def _result(
        self,
        where: str,
        message: dict[str, Any],
        text: str,
        meta: dict[str, Any],
        media: tuple[Media, ...],
    ) -> None:
        """A tool (or legacy function) result, with the media it returned; a LLaMA-Factory
        tool message holding a JSON list of `{name, content}` results for earlier calls
        becomes one result per call."""
        call_id = message.get("tool_call_id")
        call_id = call_id if isinstance(call_id, str) and call_id else None
        name = message.get("name") if isinstance(message.get("name"), str) else None
        embedded = None if call_id is not None or media else self._embedded_results(text)
        if embedded is None:
            self.b.tool_result(text, call_id=call_id, name=name, meta=meta, media=media)
            return
        self.b.note(
            f"{where} holds a JSON list of {len(embedded)} tool result(s); "
            "unwrapped into one context message per call"
        )
        for entry in embedded:
            content = entry["content"]
            extra = {k: v for k, v in entry.items() if k not in ("name", "content")}
            text = content if isinstance(content, str) else canonical_json(content)
            self.b.tool_result(text, name=entry["name"], meta={**meta, **extra})

    def _embedded_results(self, text: str) -> list[dict[str, Any]] | None:
        """The entries of a JSON list of `{name, content}` results of tools called earlier,
        or None when the text is not one."""
        if not text.startswith("[{"):
            return None
        try:
            entries = orjson.loads(text)
        except orjson.JSONDecodeError:
            return None
        if isinstance(entries, list) and all(
            isinstance(e, dict) and e.get("name") in self.calls.called and "content" in e
            for e in entries
        ):
            return entries
        return None
