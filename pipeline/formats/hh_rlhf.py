"""Anthropic HH-RLHF transcripts: `chosen` and `rejected` strings of
`\n\nHuman: ...\n\nAssistant: ...` turns, each side its own thread. A lone `chosen` (or
`rejected`) and a single `text` transcript convert too, and so do prompt/response splits
(`prompt` ending in `Assistant:` with `chosen`/`rejected` holding only the answers).

Example: a pair of transcripts and the chosen and rejected threads it becomes.

>>> from pipeline.formats.base import ConvertOptions
>>> from pipeline.sources import Record
>>> pair = {
...     "chosen": "\\n\\nHuman: Hi\\n\\nAssistant: Hello!",
...     "rejected": "\\n\\nHuman: Hi\\n\\nAssistant: Go away.",
... }
>>> threads = to_threads(Record("pairs.jsonl", "pairs.jsonl:1", pair), ConvertOptions())
>>> [(t.meta["preference"], [(m.role, m.content) for m in t.messages]) for t in threads]
[('chosen', [('user', 'Hi'), ('assistant', 'Hello!')]), ('rejected', [('user', 'Hi'), ('assistant', 'Go away.')])]
"""

from __future__ import annotations

import re
from typing import Any

from pipeline.formats.base import ConvertOptions, InputFormat, Sniff
from pipeline.formats.builder import ThreadBuilder, json_kind, source_thread_id
from pipeline.mms import Thread
from pipeline.quarantine import RecordRejected
from pipeline.sources import Record

NAME = "hh-rlhf"
SIDES = ("chosen", "rejected")
HUMAN = "\n\nHuman:"
SPEAKER = re.compile(r"\n\n(Human|Assistant):")


def _transcript(text: str) -> str:
    """The transcript with its first speaker label preceded by a blank line, as the rest."""
    stripped = text.lstrip()
    return "\n\n" + stripped if stripped.startswith(("Human:", "Assistant:")) else text


def _speakers(value: Any) -> set[str]:
    """The speaker labels a string holds (none for anything else)."""
    return set(SPEAKER.findall(_transcript(value))) if isinstance(value, str) else set()


def _is_source_id(value: Any) -> bool:
    """Whether `id` became the thread id (a non-empty string or an integer)."""
    return (isinstance(value, str) and value != "") or (
        isinstance(value, int) and not isinstance(value, bool)
    )


def sniff(value: object) -> Sniff:
    """Sure for chosen/rejected (or prompt) strings with Human:/Assistant: turns; likely
    for a lone `text` transcript."""
    if not isinstance(value, dict):
        return Sniff(0.0, "not an object")
    sides = [value.get(key) for key in SIDES]
    if any(map(_speakers, sides)) or (
        _speakers(value.get("prompt")) and any(isinstance(v, str) for v in sides)
    ):
        if all(isinstance(side, (str, type(None))) for side in sides):
            return Sniff(1.0, "chosen/rejected transcripts of Human:/Assistant: turns")
        return Sniff(0.0, "chosen/rejected are not both strings")
    if _speakers(value.get("text")) == {"Human", "Assistant"}:
        return Sniff(0.9, "a text transcript of Human:/Assistant: turns")
    return Sniff(0.0, "no Human:/Assistant: transcript")


def _turns(text: str, field: str) -> list[tuple[str, str]]:
    """(speaker, content) pairs; the transcript must open with a Human turn and hold an
    Assistant turn."""
    transcript = _transcript(text)
    marks = list(SPEAKER.finditer(transcript))
    if not marks:
        raise RecordRejected("missing_field", f"{field} holds no Human:/Assistant: turns")
    lead = transcript[: marks[0].start()]
    if lead.strip() or marks[0].group(1) != "Human":
        start = lead.strip() or marks[0].group(1) + ":"
        raise RecordRejected(
            "missing_field", f"{field} does not start with a Human turn (starts {start[:40]!r})"
        )
    if not any(mark.group(1) == "Assistant" for mark in marks):
        raise RecordRejected("missing_field", f"{field} has no Assistant turn")
    ends = [mark.start() for mark in marks[1:]] + [len(transcript)]
    return [
        (mark.group(1), transcript[mark.end() : end].strip())
        for mark, end in zip(marks, ends, strict=True)
    ]


def _thread(
    record: Record,
    options: ConvertOptions,
    field: str,
    thread_id: str,
    meta: dict[str, Any],
) -> Thread:
    """The thread of one transcript field; fields it does not read go to extra_fields."""
    data: dict[str, Any] = record.value
    text, read = _side_text(data, field)
    builder = ThreadBuilder(record, NAME, options, thread_id=thread_id, meta=meta)
    previous = None
    for index, (speaker, content) in enumerate(_turns(text, field)):
        if speaker == previous:
            builder.note(f"{field} turn {index} is a second {speaker} turn in a row")
        if not content:
            builder.note(f"{field} turn {index} ({speaker}) is empty")
        if speaker == "Human":
            builder.user(content)
        else:
            builder.assistant(content)
        previous = speaker
    if _is_source_id(data.get("id")):
        read.add("id")
    builder.keep_unread(data, read | set(SIDES))
    return builder.build()


def _side_text(data: dict[str, Any], field: str) -> tuple[str, set[str]]:
    """A field's full transcript (the string itself, or `prompt` + the answer) and the
    fields it was read from."""
    value = data[field]
    if not isinstance(value, str):
        raise RecordRejected("missing_field", f"{field} must be a string (got {json_kind(value)})")
    prompt = data.get("prompt")
    if field in SIDES and isinstance(prompt, str) and HUMAN not in _transcript(value):
        return prompt.rstrip() + " " + value.lstrip(), {field, "prompt"}
    return value, {field}


def to_threads(record: Record, options: ConvertOptions) -> list[Thread]:
    """Both sides of a pair as `:chosen`/`:rejected` threads; a lone side or a `text`
    transcript as one thread."""
    data = record.value
    if not isinstance(data, dict):
        raise RecordRejected("not_an_object", f"expected an object, got {json_kind(data)}")
    base = source_thread_id(record, data.get("id"))
    sides = [side for side in SIDES if data.get(side) is not None]
    if len(sides) == 2:
        return [
            _thread(record, options, side, f"{base}:{side}", {"pair_id": base, "preference": side})
            for side in sides
        ]
    if sides:
        return [_thread(record, options, sides[0], base, {"preference": sides[0]})]
    if isinstance(data.get("text"), str):
        return [_thread(record, options, "text", base, {})]
    raise RecordRejected("missing_field", "no chosen, rejected or text transcript")


FORMAT = InputFormat(
    name=NAME,
    summary="Anthropic HH-RLHF chosen/rejected transcripts of Human:/Assistant: turns",
    sniff=sniff,
    to_threads=to_threads,
)
