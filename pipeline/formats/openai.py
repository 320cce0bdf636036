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
- `{"messages": [...]}` or TRL's `prompt` + `completion` message lists, with a boolean
  `label` (KTO) -> one thread.

Tool calls, tool results, reasoning and refusals follow the shared mapping (builder.py);
fields MMS has no place for go to `meta.extra_fields` (record) or `meta.message_meta`
(message: `weight`, `loss_weight`, `name`, media references ...).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from pipeline.capabilities import ToolSpec
from pipeline.formats.base import ConvertOptions, InputFormat, Sniff
from pipeline.formats.builder import (
    ThreadBuilder,
    canonical_json,
    json_kind,
    source_thread_id,
    tool_specs,
)
from pipeline.formats.media_tags import MediaTags
from pipeline.mms import Thread, canonical_weight, is_weight
from pipeline.quarantine import RecordRejected
from pipeline.sources import Record

NAME = "openai"
ROLES = ("system", "developer", "user", "assistant", "tool", "function")
PAIRS = (("chosen_messages", "rejected_messages"), ("chosen", "rejected"))
PREFERENCE_OUTPUTS = ("preferred_output", "non_preferred_output")
TOOL_KEYS = ("tools", "functions")
REASONING_KEYS = ("reasoning_content", "reasoning", "thinking")
WEIGHT_KEYS = ("weight", "loss_weight")
MESSAGE_KEYS = frozenset(
    {"role", "content", "tool_calls", "function_call", "tool_call_id", "refusal"}
    | set(REASONING_KEYS)
    | set(WEIGHT_KEYS)
)
RESULT_KEYS = MESSAGE_KEYS | {"name"}
"""Message fields read into MMS; a result's `name` names its tool, other roles' go to meta."""
TEXT_PARTS = frozenset({"text", "input_text", "output_text"})
MEDIA_PARTS = {
    "image_url": "image",
    "input_image": "image",
    "image": "image",
    "input_audio": "audio",
    "audio": "audio",
    "audio_url": "audio",
    "video_url": "video",
    "video": "video",
    "file": "file",
    "input_file": "file",
}
"""Content part type -> the media kind it is dropped or placeholdered as."""
"""LLaMA-Factory: a top-level media list -> the `<kind>` tag its items stand for in text."""
FOREIGN_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking"})
CODE_INTERPRETER = "code_interpreter"
CODE_TOOL = ToolSpec(
    "python",
    "Runs Python code in a stateful interpreter and returns its output (the record's "
    "code_interpreter tool).",
    {
        "type": "object",
        "properties": {"code": {"type": "string", "description": "The Python code to run."}},
        "required": ["code"],
    },
)


# --------------------------------------------------------------------------- detection


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
        message.get("tool_calls") or message.get("function_call") or message["role"] in ROLES[4:]
        for message in messages
    )


def sniff(value: object) -> Sniff:
    """Sure with tool calls, tool results or tool definitions; typical for role/content
    message lists; unlikely with a top-level `system` (Anthropic); not for ShareGPT
    from/value turns or Anthropic content blocks."""
    if not isinstance(value, dict):
        return Sniff(0.0, "not a JSON object")
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


# --------------------------------------------------------------------------- record layout


@dataclass(slots=True)
class _Side:
    """One thread to build: its id, meta and (where, message) turns."""

    thread_id: str
    meta: dict[str, Any]
    turns: list[tuple[str, Any]]


@dataclass(slots=True)
class _Layout:
    """What a record holds: the threads to build, its tool definitions (and where they
    were), the keys it used, and notes every thread gets."""

    sides: list[_Side] = field(default_factory=list)
    tools: list[tuple[str, Any]] = field(default_factory=list)
    used: set[str] = field(default_factory=set)
    extras: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _turns(value: Any, where: str, text_ok: bool = False) -> list[tuple[str, Any]]:
    """A message list (or one message object, or, where `text_ok`, a text prompt) as
    (where, message) turns."""
    if text_ok and isinstance(value, str):
        return [(where, {"role": "user", "content": value})]
    if isinstance(value, dict):
        return [(where, value)]
    if not isinstance(value, list):
        kind = json_kind(value)
        raise RecordRejected("missing_field", f"{where} is {kind}, expected a list of messages")
    return [(f"{where}[{index}]", message) for index, message in enumerate(value)]


def _completions_only(turns: list[tuple[str, Any]]) -> bool:
    return all(isinstance(m, dict) and m.get("role") == "assistant" for _, m in turns)


def _preference_sides(
    value: dict[str, Any], base: str, keys: tuple[str, str], prompt: list[tuple[str, Any]]
) -> tuple[list[_Side], bool]:
    """The chosen and rejected threads, and whether the shared prompt was used: it is
    prepended to a side that holds nothing but assistant messages."""
    sides = []
    prompted = False
    for key, preference in zip(keys, ("chosen", "rejected"), strict=True):
        turns = _turns(value[key], key)
        if prompt and _completions_only(turns):
            turns = prompt + turns
            prompted = True
        meta = {"pair_id": base, "preference": preference}
        sides.append(_Side(f"{base}:{preference}", meta, turns))
    return sides, prompted


def _openai_preference(value: dict[str, Any], base: str, layout: _Layout) -> None:
    inputs = value["input"]
    layout.used.update(("input", *PREFERENCE_OUTPUTS))
    for key in PREFERENCE_OUTPUTS:
        if value.get(key) is None:
            raise RecordRejected("missing_field", f"input is an object but {key} is missing")
    prompt = _turns(inputs.get("messages"), "input.messages")
    layout.sides, _ = _preference_sides(value, base, PREFERENCE_OUTPUTS, prompt)
    for key, item in inputs.items():
        if key in TOOL_KEYS:
            layout.tools.append((f"input.{key}", item))
        elif key != "messages" and item is not None:
            layout.extras[f"input.{key}"] = item


def _message_pair(value: dict[str, Any], base: str, keys: tuple[str, str], layout: _Layout) -> None:
    for key, other in (keys, keys[::-1]):
        if value.get(key) is None:
            raise RecordRejected("missing_field", f"{other} is present but {key} is missing")
    layout.used.update(keys)
    prompt_key = next((k for k in ("prompt", "messages") if value.get(k) is not None), None)
    prompt = _turns(value[prompt_key], prompt_key, text_ok=True) if prompt_key else []
    layout.sides, prompted = _preference_sides(value, base, keys, prompt)
    if prompted:
        layout.used.add(str(prompt_key))
    if "messages" not in layout.used and value.get("messages") == value[keys[0]]:
        layout.used.add("messages")
        layout.notes.append(f"messages repeats {keys[0]}; not kept twice")


def _evals_sample(value: dict[str, Any], base: str, layout: _Layout) -> None:
    layout.used.update(("input", "ideal"))
    turns = _turns(value["input"], "input", text_ok=True)
    ideal = value.get("ideal")
    if isinstance(ideal, list):
        if not ideal:
            raise RecordRejected("missing_field", "ideal is an empty list (expected an answer)")
        if len(ideal) > 1:
            layout.extras["ideal"] = ideal[1:]
            layout.notes.append(
                f"ideal holds {len(ideal)} answers: the first is the assistant message, "
                "the others are kept in meta.extra_fields.ideal"
            )
        ideal = ideal[0]
    if ideal is not None:
        turns.append(("ideal", {"role": "assistant", "content": ideal}))
    layout.sides = [_Side(base, {}, turns)]


def _chat(value: dict[str, Any], base: str, layout: _Layout) -> None:
    """`messages`, or TRL's `prompt` + `completion`; a boolean `label` is KTO's verdict."""
    if "messages" in value:
        layout.used.add("messages")
        turns = _turns(value["messages"], "messages")
    else:
        layout.used.update(("prompt", "completion"))
        turns = _turns(value["prompt"], "prompt", text_ok=True)
        turns += _turns(value["completion"], "completion")
    meta: dict[str, Any] = {}
    if isinstance(value.get("label"), bool):
        layout.used.add("label")
        meta["preference"] = "desirable" if value["label"] else "undesirable"
    layout.sides = [_Side(base, meta, turns)]


def _layout(record: Record) -> _Layout:
    """Read the record's shape: which threads it makes and from which fields."""
    value = record.value
    if not isinstance(value, dict):
        kind = f"a JSON {json_kind(value)}"
        raise RecordRejected("not_an_object", f"expected an object with messages, got {kind}")
    source_id = value.get("id")
    base = source_thread_id(record, source_id)
    layout = _Layout(used={"id"} if base == str(source_id) else set())
    pair = next((keys for keys in PAIRS if any(value.get(k) is not None for k in keys)), None)
    if isinstance(value.get("input"), dict) and any(k in value for k in PREFERENCE_OUTPUTS):
        _openai_preference(value, base, layout)
    elif pair is not None:
        _message_pair(value, base, pair, layout)
    elif "input" in value and "messages" not in value:
        _evals_sample(value, base, layout)
    elif "messages" in value or ("prompt" in value and "completion" in value):
        _chat(value, base, layout)
    else:
        keys = ", ".join(list(value)[:8]) or "none"
        raise RecordRejected(
            "missing_field",
            "no messages (expected messages, chosen/rejected, chosen_messages/"
            f"rejected_messages, prompt/completion or input); the record has keys {keys}",
        )
    layout.tools += [(key, value[key]) for key in TOOL_KEYS if value.get(key) is not None]
    layout.used.update(TOOL_KEYS)
    for key, item in value.items():
        if key not in layout.used and item is not None:
            layout.extras[key] = item
    return layout


# --------------------------------------------------------------------------- tools


@dataclass(slots=True)
class _Tools:
    """The record's tool definitions: function tools, and whether it declares a
    code_interpreter (whose calls arrive as `python` with the code as arguments)."""

    specs: list[ToolSpec] = field(default_factory=list)
    code_interpreter: bool = False
    hosted: list[Any] = field(default_factory=list)
    """Non-function entries (code_interpreter, file_search ...): no schema to declare."""


def _is_hosted(entry: Any) -> bool:
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("type"), str)
        and entry["type"] != "function"
        and "function" not in entry
        and "name" not in entry
    )


def _read_tools(definitions: list[tuple[str, Any]]) -> _Tools:
    """Parse every tool definition; raises RecordRejected(invalid_tools) naming the field."""
    tools = _Tools()
    for key, value in definitions:
        if isinstance(value, str):
            try:
                value = orjson.loads(value) if value.strip() else []
            except orjson.JSONDecodeError as err:
                raise RecordRejected(
                    "invalid_tools", f"{key} is a string but not JSON ({err})"
                ) from None
        if value is None:
            continue
        if not isinstance(value, (list, dict)):
            raise RecordRejected(
                "invalid_tools", f"{key} is a JSON {json_kind(value)}, expected a list"
            )
        for index, entry in enumerate(value if isinstance(value, list) else [value]):
            if _is_hosted(entry):
                tools.hosted.append(entry)
                tools.code_interpreter |= entry["type"] == CODE_INTERPRETER
                continue
            tools.specs += tool_specs(entry, f"{key}[{index}]")
    return tools


# --------------------------------------------------------------------------- messages


def _media_ref(part: dict[str, Any]) -> str | None:
    """Where a media part points (URL, path or file id); None for inline data."""
    for key in ("image_url", "video_url", "audio_url", "file", "value", "url"):
        ref = part.get(key)
        if isinstance(ref, dict):
            ref = ref.get("url", ref.get("file_id", ref.get("filename")))
        if isinstance(ref, str) and ref and not ref.startswith("data:"):
            return ref
    return None


class _Reader:
    """Adds one side's OpenAI messages to a ThreadBuilder."""

    def __init__(self, builder: ThreadBuilder, value: dict[str, Any], tools: _Tools):
        self.b = builder
        self.tools = tools
        self.declared = {spec.name for spec in tools.specs}
        self.media_tags = MediaTags(builder, value)
        self.called: list[str] = []
        self.role = ""
        """The role of the message being read."""
        self.media_refs: list[str] = []
        """Where the media parts of the current message pointed (kept in message meta)."""

    # ------------------------------------------------------------- per role

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
        self.role, self.media_refs = role, []
        if role == "assistant":
            self._assistant(where, message, self._weight(where, weights), first)
            return
        text = self._plain_text(message.get("content"), f"{where}.content", role)
        if self.media_refs:
            first["media"] = self.media_refs
        if role in ("tool", "function"):
            self._result(where, message, text, {**weights, **first})
        elif role == "user":
            self.b.user(text, **weights, **first)
        else:
            self.b.developer(text, **weights, **first)

    def _message_meta(
        self, message: dict[str, Any], role: str
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Per-message meta: training weights (for every message made from this one) and
        the other fields MMS has no place for (for the first)."""
        weights = {k: message[k] for k in WEIGHT_KEYS if message.get(k) is not None}
        known = RESULT_KEYS if role in ROLES[4:] else MESSAGE_KEYS
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
        pieces = list(self._reasoning_field(where, message, first))
        pieces += self._pieces(message.get("content"), f"{where}.content")
        if self.media_refs:
            first["media"] = self.media_refs
        refusal = message.get("refusal")
        if isinstance(refusal, str) and refusal:
            if any(kind == "text" and text for kind, text, *_ in pieces):
                first["refusal"] = refusal
            else:
                pieces.append(("text", refusal))
                first["refusal"] = True
        pieces += self._calls(where, message)
        pieces = [piece for piece in pieces if piece[0] != "text" or piece[1]]
        if not pieces:
            self.b.note(f"{where} (assistant) has no content; kept as an empty message")
            pieces = [("text", "")]
        for piece in pieces:
            self._add_piece(piece, weight, first)
            first = {}

    def _add_piece(
        self, piece: tuple[Any, ...], weight: float | None, meta: dict[str, Any]
    ) -> None:
        kind = piece[0]
        if kind == "reasoning":
            self.b.reasoning(piece[1], weight=weight, **meta)
        elif kind == "call":
            _, name, arguments, call_id = piece
            arguments = self._arguments(name, arguments)
            self.b.tool_call(name, arguments, call_id, weight=weight, **meta)
        else:
            self.b.assistant(piece[1], weight=weight, **meta)

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

    def _calls(self, where: str, message: dict[str, Any]) -> list[tuple[Any, ...]]:
        calls = message.get("tool_calls")
        if calls is not None and not isinstance(calls, list):
            raise RecordRejected(
                "missing_field",
                f"{where}.tool_calls is {json_kind(calls)}, expected a list of calls",
            )
        pieces = [
            self._call(f"{where}.tool_calls[{index}]", call)
            for index, call in enumerate(calls or [])
        ]
        legacy = message.get("function_call")
        if legacy is not None:
            pieces.append(self._call(f"{where}.function_call", {"function": legacy}))
        return pieces

    def _call(self, where: str, call: Any) -> tuple[Any, ...]:
        """A call object (`{id, function: {name, arguments}}` or flat `{name, arguments}`)."""
        if not isinstance(call, dict):
            raise RecordRejected("invalid_tool_call", f"{where} is not a tool call object")
        function = call.get("function", call)
        if not isinstance(function, dict):
            raise RecordRejected("invalid_tool_call", f"{where}.function is not an object")
        name = function.get("name")
        if not isinstance(name, str) or not name.strip():
            raise RecordRejected("invalid_tool_call", f"{where} has no function name")
        arguments = function.get("arguments", function.get("parameters"))
        call_id = call.get("id")
        self.called.append(name)
        return ("call", name, arguments, call_id if isinstance(call_id, str) and call_id else None)

    def _arguments(self, name: str, arguments: Any) -> Any:
        """Arguments as given; the bare code of a code_interpreter's `python` call becomes
        `{"code": ...}` so the call is a JSON object like every other."""
        if name != CODE_TOOL.name or name in self.declared or not self.tools.code_interpreter:
            return arguments
        if isinstance(arguments, str):
            try:
                if isinstance(orjson.loads(arguments), dict):
                    return arguments
            except orjson.JSONDecodeError:
                pass
            self.b.note('python calls hold bare code; wrapped as {"code": ...}')
            return {"code": arguments}
        return arguments

    def _result(self, where: str, message: dict[str, Any], text: str, meta: dict[str, Any]) -> None:
        """A tool (or legacy function) result; a LLaMA-Factory tool message holding a JSON
        list of `{name, content}` results for earlier calls becomes one result per call."""
        call_id = message.get("tool_call_id")
        call_id = call_id if isinstance(call_id, str) and call_id else None
        name = message.get("name") if isinstance(message.get("name"), str) else None
        embedded = None if call_id is not None else self._embedded_results(text)
        if embedded is None:
            self.b.tool_result(text, call_id=call_id, name=name, **meta)
            return
        self.b.note(
            f"{where} holds a JSON list of {len(embedded)} tool result(s); "
            "unwrapped into one context message per call"
        )
        for entry in embedded:
            content = entry["content"]
            extra = {k: v for k, v in entry.items() if k not in ("name", "content")}
            text = content if isinstance(content, str) else canonical_json(content)
            self.b.tool_result(text, name=entry["name"], **meta, **extra)

    def _embedded_results(self, text: str) -> list[dict[str, Any]] | None:
        if not text.startswith("[{"):
            return None
        try:
            entries = orjson.loads(text)
        except orjson.JSONDecodeError:
            return None
        if all(
            isinstance(e, dict) and e.get("name") in self.called and "content" in e for e in entries
        ):
            return entries
        return None

    # ------------------------------------------------------------- content

    def _plain_text(self, content: Any, where: str, role: str) -> str:
        """Content of a non-assistant message as one text."""
        texts = []
        for piece in self._pieces(content, where):
            if piece[0] == "reasoning":
                self.b.note(f"{where} has a reasoning part in a {role} message; kept as text")
            texts.append(piece[1])
        return "\n\n".join(texts)

    def _pieces(self, content: Any, where: str) -> list[tuple[Any, ...]]:
        """Content as ordered pieces: ("text", str), ("reasoning", str), ("call", ...);
        neighbouring text parts are joined, media parts dropped or placeholdered."""
        if content is None:
            return []
        if not isinstance(content, list):
            return [("text", self.media_tags.replace(self.b.text(content, where)))]
        pieces: list[tuple[Any, ...]] = []
        texts: list[str] = []
        for index, part in enumerate(content):
            piece = self._part(part, f"{where}[{index}]")
            if piece is None:
                continue
            if piece[0] == "text":
                texts.append(piece[1])
                continue
            if texts:
                pieces.append(("text", "\n\n".join(texts)))
                texts = []
            pieces.append(piece)
        if texts:
            pieces.append(("text", "\n\n".join(texts)))
        return pieces

    def _part(self, part: Any, where: str) -> tuple[Any, ...] | None:
        if not isinstance(part, dict):
            return ("text", self.b.text([part], where))
        kind = part.get("type")
        if kind is not None and not isinstance(kind, str):
            raise RecordRejected(
                "missing_field",
                f"{where} has a content part whose type is a JSON {json_kind(kind)}, not a string",
            )
        text = part.get("text", part.get("value"))
        if kind in TEXT_PARTS or (kind is None and "text" in part):
            return ("text", self.media_tags.replace(self.b.text(text, where)))
        if kind == "refusal":
            return ("text", self.b.text(part.get("refusal"), where))
        if kind in ("reasoning", "thinking"):
            return ("reasoning", self.b.text(text if text is not None else part.get(kind), where))
        if kind == "tool_call":
            if self.role != "assistant":
                raise RecordRejected(
                    "invalid_thread",
                    f"{where} is a tool_call part in a {self.role} message "
                    "(only assistant messages call tools)",
                )
            return self._call(where, self._call_value(where, text))
        ref = _media_ref(part)
        if ref is not None:
            self.media_refs.append(ref)
        media = self.b.media(MEDIA_PARTS.get(str(kind), str(kind or "unknown")))
        return None if media is None else ("text", media)

    def _call_value(self, where: str, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError as err:
            raise RecordRejected(
                "invalid_tool_call", f"{where} (tool_call) is not a JSON call object ({err})"
            ) from None

    def finish(self) -> None:
        """Declare the code_interpreter tool if its calls were read (keep other hosted tools
        in meta), and note media lists whose length does not match their tags."""
        hosted = self.tools.hosted
        if CODE_TOOL.name in self.called and self.tools.code_interpreter:
            if CODE_TOOL.name not in self.declared:
                self.b.declare_tools([CODE_TOOL])
                self.b.note(
                    "declared the code_interpreter tool as `python`, the name its calls use"
                )
            hosted = [entry for entry in hosted if entry["type"] != CODE_INTERPRETER]
        if hosted:
            self.b.keep("hosted_tools", hosted)
            self.b.note(
                f"kept {len(hosted)} non-function tool(s) without a schema in "
                "meta.extra_fields.hosted_tools"
            )
        self.media_tags.note_mismatches()


# --------------------------------------------------------------------------- conversion


def to_threads(record: Record, options: ConvertOptions) -> list[Thread]:
    """One thread per record; two (chosen, rejected) for preference pairs."""
    layout = _layout(record)
    tools = _read_tools(layout.tools)
    threads = []
    for side in layout.sides:
        builder = ThreadBuilder(record, NAME, options, thread_id=side.thread_id, meta=side.meta)
        builder.declare_tools(tools.specs)
        reader = _Reader(builder, record.value, tools)
        for where, message in side.turns:
            reader.message(where, message)
        reader.finish()
        for key, item in layout.extras.items():
            builder.keep(key, item)
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
