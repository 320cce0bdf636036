"""MT-Bench style question files (FastChat's `mt_bench` and `vicuna_bench` question.jsonl,
Arena-Hard's `{content}` turns): `question_id`, `category`, `turns` (the user's prompts,
in order) and an optional `reference` answer per turn.

A question has no answer: it becomes a prompt-only thread whose one user message is the
first turn. The later turns are written against the model's own earlier answer ("Rewrite
your previous response ..."), so they wait in `meta.follow_ups` (see follow_ups.py) for
the curator to send after generating each answer. `question_id` (also the thread id),
`category` and `reference` are kept in meta as they are.

Example: a two-turn question and the prompt-only thread it becomes (the second turn
kept for later, in meta).

>>> from pipeline.formats.base import ConvertOptions
>>> from pipeline.sources import Record
>>> question = {"question_id": 901, "category": "writing", "turns": ["Write a haiku.", "Now rhyme."]}
>>> [thread] = to_threads(Record("question.jsonl", "question.jsonl:1", question), ConvertOptions())
>>> thread.id, [(m.role, m.content) for m in thread.messages]
('901', [('user', 'Write a haiku.')])
>>> thread.meta["follow_ups"]
[[{'role': 'user', 'content': 'Now rhyme.'}]]
"""

from __future__ import annotations

from typing import Any

from pipeline.formats.base import ConvertOptions, InputFormat, Sniff
from pipeline.formats.builder import (
    ThreadBuilder,
    a_json_kind,
    json_kind,
    source_thread_id,
    turn_list,
)
from pipeline.formats.follow_ups import keep_follow_ups
from pipeline.mms import Thread
from pipeline.quarantine import RecordRejected
from pipeline.sources import Record

NAME = "mt-bench"
META_KEYS = ("question_id", "category", "reference")
PROMPT_ONLY_REASON = "a benchmark question: the assistant's answer is to be generated"


def _is_turn(turn: Any) -> bool:
    return isinstance(turn, str) or (
        isinstance(turn, dict) and isinstance(turn.get("content"), str)
    )


def sniff(value: object) -> Sniff:
    """Sure for `turns` of prompt strings with a `question_id` or `category`; likely for
    such `turns` alone (no other format has them)."""
    if not isinstance(value, dict):
        return Sniff(0.0, "not an object")
    turns = value.get("turns")
    if not (isinstance(turns, list) and turns and all(map(_is_turn, turns))):
        return Sniff(0.0, "no turns list of prompt strings")
    if "question_id" in value or "category" in value:
        return Sniff(1.0, "turns of user prompts with a question_id/category (MT-Bench question)")
    return Sniff(0.6, "turns of user prompts without a question_id (MT-Bench shape)")


def _text(builder: ThreadBuilder, turn: Any, where: str) -> str:
    """A turn's prompt: a string, or the `content` of a turn object (its other fields kept)."""
    if isinstance(turn, dict):
        builder.keep_unread(turn, ("content",), where)
        turn, where = turn.get("content"), f"{where}.content"
    if not isinstance(turn, str):
        raise RecordRejected(
            "missing_field", f"{where} is {a_json_kind(turn)} (expected a prompt string)"
        )
    if not turn.strip():
        raise RecordRejected("missing_field", f"{where} is empty (a turn needs a prompt)")
    return turn


def to_threads(record: Record, options: ConvertOptions) -> list[Thread]:
    """One prompt-only thread: the first turn; the later ones in `meta.follow_ups`."""
    data = record.value
    if not isinstance(data, dict):
        raise RecordRejected(
            "not_an_object", f"expected an MT-Bench question object, got {json_kind(data)}"
        )
    turns = turn_list(data, "turns", "prompt strings")
    builder = ThreadBuilder(
        record,
        NAME,
        options,
        thread_id=source_thread_id(record, data.get("question_id")),
        meta={key: data[key] for key in META_KEYS if key in data},
    )
    first, *later = (_text(builder, turn, f"turns[{i}]") for i, turn in enumerate(turns))
    builder.user(first)
    builder.prompt_only(PROMPT_ONLY_REASON)
    keep_follow_ups(builder, [[{"role": "user", "content": text}] for text in later], "turns")
    builder.keep_unread(data, ("turns", *META_KEYS))
    return [builder.build()]


FORMAT = InputFormat(
    name=NAME,
    summary="MT-Bench style questions (question_id, category, turns of user prompts, "
    "reference): prompt-only threads, later turns in meta.follow_ups",
    sniff=sniff,
    to_threads=to_threads,
)
