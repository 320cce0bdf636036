"""ShareGPT conversations: `conversations` (or `messages`) lists of `{from, value}` turns,
as FastChat/Vicuna, axolotl and LLaMA-Factory write them. LLaMA-Factory adds a top-level
`system` prompt, `tools` (a JSON string or a list), `function_call`/`observation` turns,
DPO pairs (`chosen`/`rejected` turns after the prompt), KTO labels (`kto_tag`) and
`<image>`-style tags that point into a top-level `images` (`videos`, `audios`) list (LLaVA's
and xtuner's single `image` too, when media are kept).

Example: a conversation and the thread it becomes (`human` is the user, `gpt` the
assistant).

>>> from pipeline.formats.base import ConvertOptions
>>> from pipeline.sources import Record
>>> record = {"conversations": [
...     {"from": "human", "value": "Who are you?"},
...     {"from": "gpt", "value": "An assistant."},
... ]}
>>> [thread] = to_threads(Record("chats.json", "chats.json#0", record), ConvertOptions())
>>> [(m.role, m.content) for m in thread.messages]
[('user', 'Who are you?'), ('assistant', 'An assistant.')]
"""

from __future__ import annotations

from typing import Any

import orjson

from pipeline.formats.base import ConvertOptions, InputFormat, Sniff
from pipeline.formats.builder import ThreadBuilder, json_kind, source_thread_id, tool_specs
from pipeline.formats.media_tags import MediaTags
from pipeline.mms import Media, Thread
from pipeline.quarantine import RecordRejected
from pipeline.sources import Record

NAME = "sharegpt"
TURN_KEYS = ("conversations", "messages")
SPEAKERS = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "chatgpt": "assistant",
    "bard": "assistant",
    "bing": "assistant",
    "system": "developer",
    "function_call": "call",
    "observation": "result",
    "tool": "result",
}
"""Every speaker ShareGPT files use, and what its turn becomes."""
HERMES_TAGS = ("<tool_call>", "<tools>", "<tool_response>")
KTO_KEYS = ("kto_tag", "label")
READ_KEYS = frozenset({*TURN_KEYS, "system", "tools", "chosen", "rejected", "kto_tag"})
WEIGHT = "weight"
"""An assistant turn's training weight (axolotl's; the `mapped` format writes the weight a
mapping names here). Other turns keep it in their meta, as any other key."""


def _strict_turns_key(value: dict[str, Any]) -> str | None:
    """The key holding a list whose every item is a `{from, ...}` turn (for sniffing)."""
    for key in TURN_KEYS:
        turns = value.get(key)
        if isinstance(turns, list) and all(isinstance(t, dict) and "from" in t for t in turns):
            return key
    return None


def _texts(value: dict[str, Any], key: str) -> list[str]:
    turns = [*value[key], *(value.get(side) for side in ("chosen", "rejected"))]
    return [t["value"] for t in turns if isinstance(t, dict) and isinstance(t.get("value"), str)]


def sniff(value: object) -> Sniff:
    """Sure with LLaMA-Factory signs (tools, function_call/observation turns, DPO turns),
    likely for plain `{from, value}` turns, unlikely when the text holds Hermes tags."""
    if not isinstance(value, dict):
        return Sniff(0.0, "not an object")
    key = _strict_turns_key(value)
    if key is None:
        return Sniff(0.0, "no conversations/messages list of {from, value} turns")
    if not value[key]:
        return Sniff(0.3, f"an empty {key} list")
    if any(tag in text for text in _texts(value, key) for tag in HERMES_TAGS):
        return Sniff(0.5, "{from, value} turns holding Hermes <tool_call>/<tools> tags")
    if isinstance(value.get("tools"), (str, list)) or any(
        isinstance(t["from"], str) and SPEAKERS.get(t["from"]) in ("call", "result")
        for t in value[key]
    ):
        return Sniff(1.0, "{from, value} turns with LLaMA-Factory tools or function_call turns")
    if isinstance(value.get("chosen"), dict) and isinstance(value.get("rejected"), dict):
        return Sniff(1.0, "{from, value} prompt with chosen/rejected turns (LLaMA-Factory DPO)")
    return Sniff(0.9, f"{key} list of {{from, value}} turns")


class _Conversation:
    """Feeds one record's turns into a ThreadBuilder, noting what is odd."""

    def __init__(self, builder: ThreadBuilder, media: MediaTags):
        self.builder = builder
        self.media = media
        self.last_role: str | None = None

    def add(self, turn: Any, where: str) -> None:
        """One turn: its speaker decides which message(s) it becomes."""
        if not isinstance(turn, dict):
            raise RecordRejected("missing_field", f"{where} is not a {{from, value}} object")
        speaker = turn.get("from")
        kind = SPEAKERS.get(speaker.lower()) if isinstance(speaker, str) else None
        if kind is None:
            raise RecordRejected(
                "unknown_role",
                f"{where}.from is {speaker!r} (expected one of {', '.join(SPEAKERS)})",
            )
        if "value" not in turn:
            raise RecordRejected("missing_field", f"{where} has no value")
        meta = {k: v for k, v in turn.items() if k not in ("from", "value")}
        weight = meta.pop(WEIGHT, None) if kind in ("assistant", "call") else None
        text, media = self._text(turn["value"], where)
        if not text.strip() and kind != "result":
            self.builder.note(f"{where} ({speaker}) is empty; left it out")
            return
        if kind == self.last_role and kind in ("user", "assistant"):
            self.builder.note(f"{where} is a second {kind} turn in a row")
        self.last_role = kind
        if kind == "call":
            if media:
                raise RecordRejected(
                    "invalid_thread", f"{where} is a function_call turn holding a media tag"
                )
            self._calls(text, where, weight, meta)
        elif kind == "assistant":
            self.builder.assistant(text, weight=weight, meta=meta, media=media)
        elif kind == "result":
            self.builder.tool_result(text, meta=meta, media=media)
        elif kind == "user":
            self.builder.user(text, meta=meta, media=media)
        else:
            self.builder.developer(text, meta=meta, media=media)

    def _text(self, value: Any, where: str) -> tuple[str, tuple[Media, ...]]:
        """The turn's text and media: media tags kept, dropped or replaced when the
        record lists media."""
        text, media = self.builder.content(value, f"{where}.value")
        if any(tag in text for tag in HERMES_TAGS):
            self.builder.note("turns hold Hermes <tool_call>/<tools> tags, kept as text")
        if media:
            return text, media
        return self.builder.media_content(self.media.take(text))

    def _calls(self, text: str, where: str, weight: Any, meta: dict[str, Any]) -> None:
        """A function_call turn: one `{name, arguments}` object or a list of them."""
        try:
            parsed = orjson.loads(text)
        except orjson.JSONDecodeError as err:
            raise RecordRejected(
                "invalid_tool_call", f"{where}.value of a function_call turn is not JSON ({err})"
            ) from None
        calls = parsed if isinstance(parsed, list) else [parsed]
        for index, call in enumerate(calls):
            at = f"{where}.value[{index}]" if isinstance(parsed, list) else f"{where}.value"
            name = call.get("name") if isinstance(call, dict) else None
            if not isinstance(name, str) or not name.strip() or "`" in name or "\n" in name:
                raise RecordRejected(
                    "invalid_tool_call", f"{at} is not a {{name, arguments}} call with a tool name"
                )
            self.builder.tool_call(name, call.get("arguments"), weight=weight, meta=meta)


def _declare_tools(builder: ThreadBuilder, tools: Any) -> None:
    builder.declare_tools(tool_specs(tools))


def _thread(
    record: Record,
    options: ConvertOptions,
    turns: list[tuple[Any, str]],
    thread_id: str,
    meta: dict[str, Any] | None = None,
) -> Thread:
    """One thread from the record's top-level fields and the given (turn, where) list."""
    data: dict[str, Any] = record.value
    builder = ThreadBuilder(record, NAME, options, thread_id=thread_id, meta=meta)
    if data.get("system") not in (None, ""):
        builder.developer(builder.text(data["system"], "system"))
    _declare_tools(builder, data.get("tools"))
    media = MediaTags(builder, data)
    conversation = _Conversation(builder, media)
    for turn, where in turns:
        conversation.add(turn, where)
    media.finish()
    shaped = {field for field in ("id", "label") if field in data and _is_read(field, data[field])}
    builder.keep_unread(data, READ_KEYS | shaped | media.read_keys)
    return builder.build()


def _is_read(field: str, value: Any) -> bool:
    """Fields read only in some shapes: `id` (a non-empty string or an integer) and `label` (boolean)."""
    if field == "id":
        return (isinstance(value, str) and value != "") or (
            isinstance(value, int) and not isinstance(value, bool)
        )
    return field == "label" and isinstance(value, bool)


def _turns(data: dict[str, Any]) -> list[tuple[Any, str]]:
    """The conversation's turns with where each one is, for specific errors."""
    for key in TURN_KEYS:
        if isinstance(data.get(key), list):
            return [(turn, f"{key}[{i}]") for i, turn in enumerate(data[key])]
    raise RecordRejected("missing_field", "no conversations (or messages) list of turns")


def _preference_side(data: dict[str, Any], side: str) -> list[tuple[Any, str]]:
    value = data.get(side)
    if isinstance(value, list):
        return [(turn, f"{side}[{i}]") for i, turn in enumerate(value)]
    if isinstance(value, dict):
        return [(value, side)]
    if value is None:
        raise RecordRejected("missing_field", f"{side} is missing (a DPO record needs both sides)")
    raise RecordRejected(
        "missing_field",
        f"{side} must be a {{from, value}} turn or a list (got {json_kind(value)})",
    )


def _kto_label(data: dict[str, Any]) -> bool | None:
    """The KTO label (`kto_tag`, or LLaMA-Factory's usual `label` column), if any."""
    for key in KTO_KEYS:
        label = data.get(key)
        if isinstance(label, bool):
            return label
    if data.get("kto_tag") is not None:
        raise RecordRejected("missing_field", f"kto_tag is {data['kto_tag']!r}, not true/false")
    return None


def to_threads(record: Record, options: ConvertOptions) -> list[Thread]:
    """One thread per conversation; a DPO record gives a chosen and a rejected thread."""
    data = record.value
    if not isinstance(data, dict):
        raise RecordRejected("not_an_object", f"expected an object, got {json_kind(data)}")
    turns = _turns(data)
    base = source_thread_id(record, data.get("id"))
    if "chosen" in data or "rejected" in data:
        return [
            _thread(
                record,
                options,
                turns + _preference_side(data, side),
                f"{base}:{side}",
                {"pair_id": base, "preference": side},
            )
            for side in ("chosen", "rejected")
        ]
    label = _kto_label(data)
    if label is not None:
        preference = "desirable" if label else "undesirable"
        return [_thread(record, options, turns, base, {"preference": preference})]
    return [_thread(record, options, turns, base)]


FORMAT = InputFormat(
    name=NAME,
    summary="ShareGPT / FastChat / LLaMA-Factory conversations of {from, value} turns, "
    "with tools, function calls, DPO pairs and KTO labels",
    sniff=sniff,
    to_threads=to_threads,
)
