"""ms-swift / Firefly / Qwen-style chats, the two shapes no other adapter reads:

- `conversation`: a list of `{human, assistant}` turns, with an optional `system` (Firefly's
  training files, ms-swift's "ShareGPT format"; Firefly's `conversation_id`, `category`
  and `dataset` are kept as fields);
- `query` / `response` with `history` (a list of earlier `[query, response]` pairs) and
  an optional `system` (ms-swift's query-response format, Qwen's chat API); a string
  `rejected_response` makes a preference pair (ms-swift DPO); without a `response` the
  thread is prompt-only.

Media: Qwen-VL's inline `<img>PATH</img>` tags, and `<image>` / `<video>` / `<audio>` tags
pointing into top-level `images` / `videos` / `audios` lists (listed media without any tag
are placed before the first user message, as ms-swift does) are kept as media, or dropped
or written as placeholders with the paths kept in `meta` (`--multimodal`).

Example: a query-response row with history, and the thread it becomes.

>>> from pipeline.formats.base import ConvertOptions
>>> from pipeline.sources import Record
>>> row = {"query": "What is 2 + 2?", "response": "4", "history": [["Hi", "Hello!"]]}
>>> [thread] = to_threads(Record("qr.jsonl", "qr.jsonl:1", row), ConvertOptions())
>>> [(m.role, m.content) for m in thread.messages]
[('user', 'Hi'), ('assistant', 'Hello!'), ('user', 'What is 2 + 2?'), ('assistant', '4')]
"""

from __future__ import annotations

import re
from typing import Any

from pipeline.formats.base import ConvertOptions, InputFormat, Sniff
from pipeline.formats.builder import ThreadBuilder, a_json_kind, json_kind, source_thread_id
from pipeline.formats.media_tags import MediaTags
from pipeline.mms import Media, Thread
from pipeline.quarantine import RecordRejected
from pipeline.sources import Record

NAME = "swift"
TURNS = "conversation"
TURN_ROLES = ("human", "assistant")
ID_KEYS = ("id", "conversation_id")
QUERY_KEYS = frozenset({"system", "query", "response", "history", "rejected_response"})
QWEN_IMAGE = re.compile(r"<img>(.*?)</img>(\n?)", re.DOTALL)
"""Qwen-VL's inline image reference: the path or URL between the tags."""
PROMPT_ONLY_REASON = "a query without a response: the assistant turn is to be generated"


def _is_turn(value: Any) -> bool:
    return isinstance(value, dict) and any(key in value for key in TURN_ROLES)


def sniff(value: object) -> Sniff:
    """Sure for a `conversation` of {human, assistant} turns; likely for a query with a
    response (or a rejected response); half sure for a query with a history only."""
    if not isinstance(value, dict):
        return Sniff(0.0, "not an object")
    turns = value.get(TURNS)
    if isinstance(turns, list) and turns and all(map(_is_turn, turns)):
        return Sniff(1.0, "a conversation of {human, assistant} turns (Firefly / ms-swift)")
    if isinstance(value.get("query"), str):
        if isinstance(value.get("response"), str) or isinstance(
            value.get("rejected_response"), str
        ):
            return Sniff(0.95, "a query with a response (ms-swift / Qwen query-response)")
        if isinstance(value.get("history"), list):
            return Sniff(0.7, "a query with a history and no response (prompt-only)")
    return Sniff(0.0, "no conversation of {human, assistant} turns nor a query with a response")


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise RecordRejected("missing_field", f"{where} is {a_json_kind(value)}, not a string")
    return value


class _Media:
    """The record's media tags: Qwen-VL `<img>` tags inline, LLaMA-Factory-style tags
    into the top-level lists; untagged listed media go before the first user message."""

    def __init__(self, builder: ThreadBuilder, data: dict[str, Any]):
        self.builder = builder
        self.tags = MediaTags(builder, data, inline=True)
        self.inline: list[str] = []
        self.untagged = ""
        texts = [str(v) for v in _all_texts(data)]
        for kind, key in self.tags.lists.items():
            if any(f"<{kind}>" in text for text in texts):
                continue
            items = data[key]
            count = len(items) if isinstance(items, list) else 1
            self.untagged += f"<{kind}>" * count
            builder.note(f"{key} has no <{kind}> tag in the text: placed before the first query")

    def user(self, text: str) -> tuple[str, tuple[Media, ...], dict[str, Any]]:
        """A user text with its media kept or replaced, its media, and the message meta
        naming inline images that were not kept."""
        if self.untagged:
            text, self.untagged = self.untagged + text, ""
        return self.text(text)

    def text(self, text: str) -> tuple[str, tuple[Media, ...], dict[str, Any]]:
        """A text with its media kept or replaced, its media, and the message meta naming
        inline images that were not kept."""
        if self.builder.keeps_media:
            content, media = self.builder.media_content(self.tags.take(text))
            return content, media, {}
        images: list[str] = []

        def one(match: re.Match[str]) -> str:
            images.append(match.group(1))
            placeholder = self.builder.media("image")
            return "" if placeholder is None else placeholder + match.group(2)

        replaced = QWEN_IMAGE.sub(one, text)
        if images and self.builder.options.multimodal != "placeholder":
            replaced = replaced.strip()
        return self.tags.replace(replaced), (), ({"images": images} if images else {})


def _all_texts(data: dict[str, Any]) -> list[Any]:
    """Every text of the record that may hold a media tag."""
    texts: list[Any] = [data.get("query"), data.get("response")]
    turns = data.get(TURNS)
    if isinstance(turns, list):
        texts += [turn.get(role) for turn in turns if isinstance(turn, dict) for role in TURN_ROLES]
    history = data.get("history")
    if isinstance(history, list):
        texts += [text for pair in history if isinstance(pair, list) for text in pair]
    return [text for text in texts if isinstance(text, str)]


def _system(builder: ThreadBuilder, data: dict[str, Any]) -> None:
    system = data.get("system")
    if system is None:
        return
    if _text(system, "system").strip():
        builder.developer(system)


def _conversation(builder: ThreadBuilder, data: dict[str, Any], media: _Media) -> None:
    turns = data.get(TURNS)
    if not isinstance(turns, list):
        raise RecordRejected("missing_field", f"{TURNS} is {a_json_kind(turns)}, not a list")
    if not turns:
        raise RecordRejected("empty_conversation", f"{TURNS} is an empty list")
    for index, turn in enumerate(turns):
        where = f"{TURNS}[{index}]"
        if not isinstance(turn, dict):
            raise RecordRejected("missing_field", f"{where} is {a_json_kind(turn)}, not a turn")
        others = {key: value for key, value in turn.items() if key not in TURN_ROLES}
        if "human" in turn:
            text, found, meta = media.user(_text(turn["human"], f"{where}.human"))
            builder.user(text, meta={**meta, **others}, media=found)
            others = {}
        if "assistant" in turn and turn["assistant"] is not None:
            text, found, meta = media.text(_text(turn["assistant"], f"{where}.assistant"))
            builder.assistant(text, meta={**meta, **others}, media=found)
        elif index == len(turns) - 1:
            builder.prompt_only("the last turn has no assistant answer: it is to be generated")
        else:
            raise RecordRejected("missing_field", f"{where} has no assistant answer")


def _query(builder: ThreadBuilder, data: dict[str, Any], media: _Media, answer: str | None) -> None:
    history = data.get("history")
    if history is not None and not isinstance(history, list):
        raise RecordRejected("missing_field", f"history is {a_json_kind(history)}, not a list")
    for index, pair in enumerate(history or []):
        if not (
            isinstance(pair, list) and len(pair) == 2 and all(isinstance(t, str) for t in pair)
        ):
            raise RecordRejected(
                "missing_field", f"history[{index}] is not a [query, response] pair"
            )
        text, found, meta = media.user(pair[0])
        builder.user(text, meta=meta, media=found)
        text, found, meta = media.text(pair[1])
        builder.assistant(text, meta=meta, media=found)
    query = _text(data.get("query"), "query")
    if not query.strip():
        raise RecordRejected("empty_conversation", "query is blank")
    text, found, meta = media.user(query)
    builder.user(text, meta=meta, media=found)
    if answer is None:
        builder.prompt_only(PROMPT_ONLY_REASON)
        return
    text, found, meta = media.text(answer)
    builder.assistant(text, meta=meta, media=found)


def _answers(data: dict[str, Any]) -> dict[str, str | None]:
    """The answer of each thread to build, by preference side ("" for one thread)."""
    response = data.get("response")
    if response is not None:
        _text(response, "response")
    if "rejected_response" in data:
        rejected = _text(data["rejected_response"], "rejected_response")
        chosen = _text(response, "response")
        return {"chosen": chosen, "rejected": rejected}
    return {"": response}


def _id(record: Record, data: dict[str, Any]) -> tuple[str, str | None]:
    for key in ID_KEYS:
        value = data.get(key)
        if (isinstance(value, str) and value) or (
            isinstance(value, int) and not isinstance(value, bool)
        ):
            return source_thread_id(record, value), key
    return source_thread_id(record), None


def to_threads(record: Record, options: ConvertOptions) -> list[Thread]:
    """One thread per record; a `rejected_response` gives a chosen and a rejected one."""
    data = record.value
    if not isinstance(data, dict):
        raise RecordRejected("not_an_object", f"expected an object, got {json_kind(data)}")
    base, id_key = _id(record, data)
    read = {id_key} if id_key else set()
    if TURNS in data:
        sides: dict[str, str | None] = {"": None}
        read |= {TURNS, "system"}
    elif "query" in data:
        sides = _answers(data)
        read |= QUERY_KEYS
    else:
        raise RecordRejected("missing_field", f"no {TURNS} list and no query")
    threads = []
    for side, answer in sides.items():
        meta = {"pair_id": base, "preference": side} if side else {}
        thread_id = f"{base}:{side}" if side else base
        builder = ThreadBuilder(record, NAME, options, thread_id=thread_id, meta=meta)
        media = _Media(builder, data)
        _system(builder, data)
        if TURNS in data:
            _conversation(builder, data, media)
        else:
            _query(builder, data, media, answer)
        media.tags.finish()
        builder.keep_unread(data, read | media.tags.read_keys)
        threads.append(builder.build())
    return threads


FORMAT = InputFormat(
    name=NAME,
    summary="ms-swift / Firefly / Qwen chats: conversation of {human, assistant} turns, or "
    "query/response with history (+system, <img> and <image> tags, rejected_response)",
    sniff=sniff,
    to_threads=to_threads,
)
