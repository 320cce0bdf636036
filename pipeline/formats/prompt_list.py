"""Plain prompt lists: a JSON array of strings, JSON Lines of bare strings, or objects that
hold only a `prompt`, `question` or `query` string (with ids, an optional `system` prompt
and a few metadata fields). Each prompt becomes a prompt-only thread: its user message
(after the system prompt as a developer message), the answer to be generated.

Vicuna-80's question file (FastChat, `{question_id, text, category}`) is a prompt list too:
beside a `question_id`, `text` is the prompt. `--from prompts` also reads MT-Bench's
`{question_id, category, turns}` as the `mt-bench` format does (which detection picks).

Detection is conservative so it never takes another format's records: `text` alone is not
a prompt key (it is how pretraining corpora hold documents), nor is `instruction` (Alpaca's);
an object with any key beyond the prompt, ids, `system` and metadata is declined (an answer
field makes it another format's); a string that reads as a chat transcript (ChatML
`<|im_start|>`, `User:`/`Human:`/`ASSISTANT:` lines) is declined. `--from prompts` reads
any such record anyway, keeping the other fields in `meta.extra_fields`, except one that
holds an answer (`completion`, `response`, `chosen`/`rejected`, `completions`, `output`):
a prompt-only thread would lose it, so the record is quarantined, pointing at the format
that reads it.

Example: a prompt and the prompt-only thread it becomes.

>>> from pipeline.formats.base import ConvertOptions
>>> from pipeline.sources import Record
>>> prompt = "How do I decline a meeting politely?"
>>> [thread] = to_threads(Record("lines.jsonl", "lines.jsonl:1", prompt), ConvertOptions())
>>> [(m.role, m.content) for m in thread.messages], thread.meta["prompt_only"]
([('user', 'How do I decline a meeting politely?')], True)
"""

from __future__ import annotations

import re
from typing import Any

from pipeline.formats import mt_bench
from pipeline.formats.base import ConvertOptions, InputFormat, Sniff
from pipeline.formats.builder import ThreadBuilder, a_json_kind, json_kind, source_thread_id
from pipeline.formats.field_names import answer_fields
from pipeline.mms import Thread
from pipeline.quarantine import RecordRejected
from pipeline.sources import Record

NAME = "prompts"
PROMPT_KEYS = ("prompt", "question", "query")
QUESTION_TEXT = ("text", "question_id")
"""A `text` string is the prompt beside a `question_id` (Vicuna-80's questions), never alone."""
ID_KEYS = ("id", "prompt_id", "question_id", "query_id", "uid", "idx")
"""Keys that name the prompt; the first present that is a string or integer is the id."""
SYSTEM = "system"
METADATA_KEYS = frozenset({"category", "source", "lang", "language", "tags"})
ALLOWED_KEYS = frozenset({*ID_KEYS, SYSTEM, *METADATA_KEYS})
"""Keys a prompt object may hold besides its prompt and still be detected as one."""
TRANSCRIPT = re.compile(
    r"<\|im_start\|>|<\|start\|>|^[ \t]*(?:system|user|assistant|human|gpt|tool)[ \t]*:",
    re.IGNORECASE | re.MULTILINE,
)
PROMPT_ONLY_REASON = "a prompt without an answer: the assistant turn is to be generated"
ANSWER_KEYS = ("completion", "response", "chosen", "rejected", "completions", "output")
"""Keys that hold the prompt's answer: such a record is not a prompt list's."""


def _prompt_key(value: dict[str, Any]) -> str | None:
    """The first prompt key the object has, whatever its value (`text` beside a
    `question_id` when it has none)."""
    text, question_id = QUESTION_TEXT
    fallback = text if text in value and question_id in value else None
    return next((key for key in PROMPT_KEYS if key in value), fallback)


def _prompt_strings(value: dict[str, Any]) -> list[str]:
    """The prompt keys holding a string (`text` beside a `question_id` when none does)."""
    found = [key for key in PROMPT_KEYS if isinstance(value.get(key), str)]
    text, question_id = QUESTION_TEXT
    if not found and question_id in value and isinstance(value.get(text), str):
        return [text]
    return found


def sniff(value: object) -> Sniff:
    """Likely for an object of one prompt string (with ids, system, metadata); half sure
    for a bare string that does not read as a chat transcript."""
    if isinstance(value, str):
        if TRANSCRIPT.search(value):
            return Sniff(0.0, "a string that reads as a chat transcript, not one prompt")
        return Sniff(0.5, "a bare string: one prompt")
    if not isinstance(value, dict):
        return Sniff(0.0, "not a string or an object")
    prompts = _prompt_strings(value)
    if len(prompts) != 1:
        return Sniff(0.0, "no single prompt, question or query string")
    others = sorted(set(value) - ALLOWED_KEYS - {prompts[0]})
    if others:
        return Sniff(0.0, f"a {prompts[0]} string with other fields ({', '.join(others[:4])})")
    if not isinstance(value.get(SYSTEM, ""), str):
        return Sniff(0.0, "a prompt with a system field that is not a string")
    if prompts[0] == QUESTION_TEXT[0]:
        return Sniff(0.8, "a text string with a question_id (a Vicuna question): one prompt")
    return Sniff(0.8, f"only a {prompts[0]} string (with ids or metadata): one prompt")


def _source_id(value: dict[str, Any]) -> tuple[str | None, Any]:
    """The id key and value of the first usable id (a non-empty string or an integer)."""
    for key in ID_KEYS:
        candidate = value.get(key)
        usable_text = isinstance(candidate, str) and candidate != ""
        if usable_text or (isinstance(candidate, int) and not isinstance(candidate, bool)):
            return key, candidate
    return None, None


def _text(value: Any, where: str) -> str:
    """The prompt text; not a string or blank quarantines the record."""
    if not isinstance(value, str):
        raise RecordRejected("missing_field", f"{where} is {a_json_kind(value)}, not a string")
    if not value.strip():
        raise RecordRejected("empty_conversation", f"{where} is blank: nothing to answer")
    return value


def _from_object(record: Record, options: ConvertOptions, value: dict[str, Any]) -> ThreadBuilder:
    """The builder of a prompt object: system prompt, prompt, other fields in meta."""
    key = _prompt_key(value)
    if key is None:
        raise RecordRejected(
            "missing_field", f"no {', '.join(PROMPT_KEYS[:-1])} or {PROMPT_KEYS[-1]} field"
        )
    answers = [k for k in ANSWER_KEYS if value.get(k) is not None] or answer_fields(value)
    if answers:
        raise RecordRejected(
            "missing_field",
            f"the record holds an answer ({', '.join(answers)}), which a prompt-only thread "
            "would lose: read it with its own format (auto-detection, or --from trl for "
            "prompt + completion/response/chosen/rejected strings)",
        )
    id_key, source_id = _source_id(value)
    builder = ThreadBuilder(record, NAME, options, thread_id=source_thread_id(record, source_id))
    system = value.get(SYSTEM)
    if system is not None and not isinstance(system, str):
        raise RecordRejected("missing_field", f"system is {a_json_kind(system)}, not a string")
    if system and system.strip():
        builder.developer(system)
    builder.user(_text(value[key], key))
    builder.keep_unread(value, {key, SYSTEM} | ({"id"} if id_key == "id" else set()))
    return builder


def to_threads(record: Record, options: ConvertOptions) -> list[Thread]:
    """One prompt-only thread per prompt."""
    value = record.value
    if isinstance(value, str):
        builder = ThreadBuilder(record, NAME, options, thread_id=source_thread_id(record))
        builder.user(_text(value, "the prompt"))
    elif isinstance(value, dict) and _prompt_key(value) is None and "turns" in value:
        return mt_bench.to_threads(record, options)
    elif isinstance(value, dict):
        builder = _from_object(record, options, value)
    else:
        raise RecordRejected(
            "not_an_object", f"expected a prompt string or object, got {json_kind(value)}"
        )
    builder.prompt_only(PROMPT_ONLY_REASON)
    return [builder.build()]


FORMAT = InputFormat(
    name=NAME,
    summary="plain prompt lists (JSON array or JSON Lines of strings, or {prompt|question|"
    "query} objects): prompt-only threads",
    sniff=sniff,
    to_threads=to_threads,
)
