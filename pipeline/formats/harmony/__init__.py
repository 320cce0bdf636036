"""Harmony, OpenAI's transcript format for gpt-oss, as input:
`<|start|>{role}[ to={recipient}][<|channel|>{channel}][ <|constrain|>json]<|message|>...`
closed by `<|end|>`, `<|call|>` or `<|return|>`. A record is a whole transcript: a `.txt`
file starting with `<|start|>` (read whole), or a JSON Lines record `{"text": ..., "id":
...}` or a bare string (the record's other fields go to meta.extra_fields).

Mapping (threads.py, mapping.py): the system message -> platform (Harmony's system
message is the serving platform's: identity, dates, reasoning effort, built-in tools);
the developer's `# Instructions` -> developer; its `# Tools` namespaces
(`namespace functions { type x = (_: {...}) => any; }`) and the system's built-in tool
namespaces (`browser`) -> declared tools with JSON Schemas (ts_schema.py), enabled by the
builder's developer message as `x:json` / `browser.search:json`; `analysis` -> reasoning
(kept or dropped per --reasoning); `final` -> the answer (`<|constrain|>F` -> format F); a
`commentary` message without recipient (a preamble) -> an answer; `to=functions.x` -> a
call in format `x:json`; `functions.x to=assistant` -> a context message named `x`; a
closing `<|start|>assistant` -> a prompt-only thread. Unreadable transcripts are
quarantined: `missing_field` (grammar: an unterminated header, text outside messages, a
message not closed before the next), `unknown_role`, `invalid_tools` (a declaration that
does not read). Nothing in a transcript is ever run.

Not kept: end tokens (`<|end|>` vs `<|return|>`), blank space between messages, JSON
spacing of call arguments (canonical JSON, as for every format), `integer` vs `number`
(Harmony writes both as `number`). render.py writes threads back as Harmony.

Example: a transcript and the thread it becomes.

>>> from pipeline.formats.base import ConvertOptions
>>> from pipeline.sources import Record
>>> text = (
...     "<|start|>user<|message|>What is 2 + 2?<|end|>"
...     "<|start|>assistant<|channel|>final<|message|>4<|end|>"
... )
>>> [thread] = to_threads(Record("chat.txt", "chat.txt", text), ConvertOptions())
>>> [(m.role, m.format, m.content) for m in thread.messages]
[('user', None, 'What is 2 + 2?'), ('assistant', 'markdown', '4')]
"""

from __future__ import annotations

import re
from typing import Any

from pipeline.formats.base import ConvertOptions, InputFormat, Sniff
from pipeline.formats.builder import a_json_kind, source_thread_id
from pipeline.formats.harmony.threads import NAME, transcript_thread
from pipeline.formats.harmony.transcript import parse_transcript
from pipeline.mms import Thread
from pipeline.quarantine import RecordRejected
from pipeline.sources import Record, TextDocument
from pipeline.sources.harmony_files import HARMONY_KIND

TEXT_FIELD = "text"
_STARTS = re.compile(r"\s*<\|start\|>")


def _text_of(value: object) -> str | None:
    """The transcript a record holds, if it holds text where one would be."""
    if isinstance(value, TextDocument):
        return value.text if value.kind == HARMONY_KIND else None
    if isinstance(value, str):
        return value
    text = value.get(TEXT_FIELD) if isinstance(value, dict) else None
    return text if isinstance(text, str) else None


def sniff(value: object) -> Sniff:
    """Sure for text starting with `<|start|>` (a transcript file, a bare string, a
    record's `text`); nothing else is Harmony."""
    text = _text_of(value)
    if text is not None and _STARTS.match(text):
        return Sniff(1.0, "a Harmony transcript (text starting with <|start|>)")
    return Sniff(0.0, "no text starting with <|start|> (a Harmony transcript)")


def _record_parts(value: Any) -> tuple[str, Any, dict[str, Any]]:
    """The transcript, the record's id (None without one) and its other fields."""
    if isinstance(value, TextDocument):
        return value.text, None, {}
    if isinstance(value, str):
        return value, None, {}
    if not isinstance(value, dict):
        raise RecordRejected(
            "not_an_object",
            f"expected a Harmony transcript (text, or an object with a {TEXT_FIELD!r} string), "
            f"got {a_json_kind(value)}",
        )
    text = value.get(TEXT_FIELD)
    if not isinstance(text, str):
        raise RecordRejected(
            "missing_field", f"{TEXT_FIELD} is {a_json_kind(text)} (expected a Harmony transcript)"
        )
    source_id = value.get("id")
    usable = (
        isinstance(source_id, (str, int)) and not isinstance(source_id, bool) and source_id != ""
    )
    read = (TEXT_FIELD, "id") if usable else (TEXT_FIELD,)
    return text, source_id if usable else None, {k: v for k, v in value.items() if k not in read}


def to_threads(record: Record, options: ConvertOptions) -> list[Thread]:
    """One thread per transcript."""
    text, source_id, extras = _record_parts(record.value)
    thread_id = source_thread_id(record, source_id)
    return [transcript_thread(record, options, parse_transcript(text), thread_id, extras)]


FORMAT = InputFormat(
    name=NAME,
    summary="OpenAI Harmony transcripts (gpt-oss): .txt files or JSONL text records; "
    "channels, reasoning, namespace-declared tools and calls, prompt-only endings",
    sniff=sniff,
    to_threads=to_threads,
)
