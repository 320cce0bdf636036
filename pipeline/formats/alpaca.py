"""Alpaca instruction data: `instruction` + `input` + `output` (with optional `system` and
`history` of earlier [instruction, response] pairs), the `response` variant (GPTeacher,
torchtune instruct; Dolly's `instruction` + `context` + `response`), preference variants (LLaMA-Factory `chosen`/`rejected` strings,
torchtune stack_exchange_paired `question` + `response_j`/`response_k`) and torchtune's
visual QA rows (`input` + `output` + `image`). Media (`image`, `images`, and when kept
LLaMA-Factory's `videos` and `audios`, at their `<image>`-style tags in the prompt or
else before it) follow `--multimodal`.

Example: a row and the thread it becomes.

>>> from pipeline.formats.base import ConvertOptions
>>> from pipeline.sources import Record
>>> row = {"instruction": "Name a prime number.", "input": "", "output": "7"}
>>> [thread] = to_threads(Record("tasks.json", "tasks.json#0", row), ConvertOptions())
>>> [(m.role, m.content) for m in thread.messages]
[('user', 'Name a prime number.'), ('assistant', '7')]
"""

from __future__ import annotations

import re
from typing import Any

from pipeline.formats.base import ConvertOptions, InputFormat, Sniff
from pipeline.formats.builder import ThreadBuilder, json_kind, source_thread_id
from pipeline.formats.media_tags import MediaTags
from pipeline.mms import Media, Thread
from pipeline.quarantine import RecordRejected
from pipeline.sources import Record

NAME = "alpaca"
ANSWER_KEYS = ("output", "response")
STACK_EXCHANGE = {"chosen": "response_j", "rejected": "response_k"}
"""torchtune's stack_exchange_paired: `response_j` is preferred over `response_k`."""
MEDIA_KEYS = {"image": "image", "images": "image"}
READ_KEYS = frozenset(
    {
        "instruction",
        "input",
        "output",
        "response",
        "system",
        "history",
        "chosen",
        "rejected",
        "question",
        "response_j",
        "response_k",
    }
)
CONTEXT = "context"
"""Dolly's name for the input: read as the input when the row has no `input`."""
TEMPLATE_SLOT = re.compile(r"\{\{\s*\w+\s*\}\}")


def _is_text(value: Any) -> bool:
    return isinstance(value, str)


def _is_source_id(value: Any) -> bool:
    """Whether `id` became the thread id (a non-empty string or an integer)."""
    return (isinstance(value, str) and value != "") or (
        isinstance(value, int) and not isinstance(value, bool)
    )


def sniff(value: object) -> Sniff:
    """Sure for stack_exchange_paired rows; likely for instruction + output/response or
    instruction + chosen/rejected strings; half sure for input + output (visual QA)."""
    if not isinstance(value, dict):
        return Sniff(0.0, "not an object")
    if all(_is_text(value.get(key)) for key in ("question", "response_j", "response_k")):
        return Sniff(1.0, "question + response_j/response_k (stack_exchange_paired)")
    if _is_text(value.get("instruction")):
        if any(_is_text(value.get(key)) for key in ANSWER_KEYS):
            return Sniff(0.9, "instruction + output/response")
        if _is_text(value.get("chosen")) and _is_text(value.get("rejected")):
            return Sniff(0.9, "instruction + chosen/rejected strings (alpaca preference)")
        return Sniff(0.0, "instruction without output, response or chosen/rejected")
    if _is_text(value.get("input")) and _is_text(value.get("output")):
        return Sniff(0.5, "input + output without instruction (visual QA shape)")
    return Sniff(0.0, "no instruction/question with an answer")


def _text_field(data: dict[str, Any], key: str) -> str:
    """A string field; absent or null is empty, any other type is an error."""
    value = data.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise RecordRejected("missing_field", f"{key} must be a string (got {json_kind(value)})")
    return value


def _prompt(data: dict[str, Any]) -> str:
    """The user message: the instruction (or question), then the input (Dolly's `context`)
    after a blank line."""
    instruction = _text_field(data, "question" if "question" in data else "instruction")
    extra = _text_field(data, "input" if "input" in data else CONTEXT)
    prompt = "\n\n".join(part for part in (instruction, extra) if part)
    if not prompt.strip():
        raise RecordRejected("missing_field", "instruction and input are both empty")
    return prompt


def _history(builder: ThreadBuilder, history: Any) -> None:
    """Earlier [instruction, response] pairs become user/assistant turns."""
    if history is None:
        return
    if not isinstance(history, list):
        raise RecordRejected("missing_field", f"history must be a list (got {json_kind(history)})")
    for index, pair in enumerate(history):
        if not (isinstance(pair, list) and len(pair) == 2 and all(map(_is_text, pair))):
            raise RecordRejected(
                "missing_field", f"history[{index}] is not an [instruction, response] pair"
            )
        builder.user(pair[0])
        builder.assistant(pair[1])


def _user(builder: ThreadBuilder, data: dict[str, Any]) -> frozenset[str]:
    """The user message: the prompt with the record's media (kept: at their tags in the
    prompt, LLaMA-Factory's way, else before it; or placeholders before it, or dropped),
    and the keys read into it."""
    if not builder.keeps_media:
        builder.user("\n\n".join([*_media(builder, data), _prompt(data)]))
        return frozenset()
    prompt = _prompt(data)
    tags = MediaTags(builder, data)
    pieces: list[str | Media] = (
        tags.take(prompt) if tags.tagged(prompt) else [*tags.listed(), prompt]
    )
    tags.finish()
    text, media = builder.media_content(pieces)
    builder.user(text, media=media)
    return tags.read_keys


def _media(builder: ThreadBuilder, data: dict[str, Any]) -> list[str]:
    """Placeholders (or nothing, when dropped) for the record's images, kept as fields."""
    placeholders: list[str] = []
    for key, kind in MEDIA_KEYS.items():
        value = data.get(key)
        if value is None:
            continue
        for _ in value if isinstance(value, list) else [value]:
            placeholder = builder.media(kind)
            if placeholder is not None:
                placeholders.append(placeholder)
    return placeholders


def _answers(data: dict[str, Any]) -> dict[str, str]:
    """The response(s) to write after the prompt, by preference side ("" for SFT rows)."""
    if "response_j" in data or "response_k" in data:
        return {side: _text_field(data, key) for side, key in STACK_EXCHANGE.items()}
    if "chosen" in data or "rejected" in data:
        return {side: _text_field(data, side) for side in ("chosen", "rejected")}
    key = next((k for k in ANSWER_KEYS if k in data), None)
    if key is None:
        raise RecordRejected("missing_field", "no output, response or chosen/rejected")
    return {"": _text_field(data, key)}


def _thread(
    record: Record, options: ConvertOptions, answer: str, thread_id: str, meta: dict[str, Any]
) -> Thread:
    data: dict[str, Any] = record.value
    builder = ThreadBuilder(record, NAME, options, thread_id=thread_id, meta=meta)
    system = _text_field(data, "system")
    if system:
        builder.developer(system)
    _history(builder, data.get("history"))
    media_keys = _user(builder, data)
    if answer.strip():
        builder.assistant(answer)
    else:
        builder.note("the answer is empty; the thread ends with the user message")
    slots = sorted(
        {slot for text in (_prompt(data), answer) for slot in TEMPLATE_SLOT.findall(text)}
    )
    if slots:
        builder.note(f"holds unfilled template placeholders: {', '.join(slots)}")
    read = (READ_KEYS | {"id"}) if _is_source_id(data.get("id")) else READ_KEYS
    read |= media_keys
    if "input" not in data:
        read |= {CONTEXT}
    builder.keep_unread(data, read)
    return builder.build()


def to_threads(record: Record, options: ConvertOptions) -> list[Thread]:
    """One thread per row; a preference row gives a chosen and a rejected thread."""
    data = record.value
    if not isinstance(data, dict):
        raise RecordRejected("not_an_object", f"expected an object, got {json_kind(data)}")
    answers = _answers(data)
    base = source_thread_id(record, data.get("id"))
    if "" in answers:
        return [_thread(record, options, answers[""], base, {})]
    return [
        _thread(record, options, answer, f"{base}:{side}", {"pair_id": base, "preference": side})
        for side, answer in answers.items()
    ]


FORMAT = InputFormat(
    name=NAME,
    summary="Alpaca instruction rows (instruction/input/output or response, system, history), "
    "with preference and visual QA variants",
    sniff=sniff,
    to_threads=to_threads,
)
