"""Conversation-shaped records no specific format knows, read by their structure: a list of
objects with a speaker-like and a text-like key (under any top-level key), or a
prompt-like and an answer-like string field by the names such fields go by (prompt,
query, question, instruction, input x completion, response, answer, output, target,
chosen/rejected), with the system- and history-like fields beside them.

The reading is a field mapping (pipeline/formats/field_mapping.py) inferred from the
record, converted as the `mapped` format converts; the thread's `meta.structure` says
which keys it took, and detection only falls back to it when no specific format accepts
the file's records (pipeline/formats/detect.py), so it never steals a record a specific
adapter reads better.

    {"dialog": [{"speaker": "customer", "text": "Hi"}, {"speaker": "agent", "text": "Hello!"}]}
    -> user "Hi", assistant "Hello!"; meta.structure {messages: dialog, role: speaker,
       content: text, roles: {customer: user, agent: assistant}}

Example: a record in a shape no format names, and the thread its structure gives.

>>> from pipeline.formats.base import ConvertOptions
>>> from pipeline.sources import Record
>>> record = {"dialog": [
...     {"speaker": "customer", "text": "My order is late."},
...     {"speaker": "agent", "text": "Sorry, let me check."},
... ]}
>>> [thread] = to_threads(Record("support.jsonl", "support.jsonl:1", record), ConvertOptions())
>>> [(m.role, m.content) for m in thread.messages]
[('user', 'My order is late.'), ('assistant', 'Sorry, let me check.')]
>>> thread.meta["structure"]["roles"]
{'agent': 'assistant', 'customer': 'user'}
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable
from typing import Any

from pipeline.formats.base import ConvertOptions, InputFormat, Sniff
from pipeline.formats.builder import json_kind
from pipeline.formats.field_mapping import FieldMapping
from pipeline.formats.field_names import (
    ANSWER_NAMES,
    HISTORY_NAMES,
    PROMPT_NAMES,
    REFERENCE_NAMES,
    SPEAKER_KEYS,
    SPEAKER_NAMES,
    SYSTEM_NAMES,
    TEXT_KEYS,
)
from pipeline.formats.mapped import convert_with
from pipeline.mms import Thread
from pipeline.quarantine import RecordRejected
from pipeline.sources import Record

NAME = "structural"
SPEAKER_KEYS_SET, TEXT_KEYS_SET = frozenset(SPEAKER_KEYS), frozenset(TEXT_KEYS)
TWO_SPEAKERS = "two speakers taking turns: the first read as the user, the second as the assistant"


def infer_mapping(value: object) -> tuple[FieldMapping, str] | None:
    """The mapping that reads `value` as a conversation, and what it took in words (None
    when the record has no conversation shape)."""
    if not isinstance(value, dict):
        return None
    messages = _messages_mapping(value)
    if messages is not None:
        return messages
    return _pair_mapping(value)


def _messages_mapping(value: dict[str, Any]) -> tuple[FieldMapping, str] | None:
    """A top-level list of message objects with a speaker-like and a text-like key."""
    for key, turns in value.items():
        if not isinstance(turns, list) or not turns or not isinstance(turns[0], dict):
            continue
        if not SPEAKER_KEYS_SET & turns[0].keys() or not TEXT_KEYS_SET & turns[0].keys():
            continue  # the first turn already lacks a speaker or a text key
        if not all(isinstance(t, dict) for t in turns):
            continue
        role = _common_key(turns, SPEAKER_KEYS)
        content = _common_key(turns, TEXT_KEYS)
        if role is None or content is None:
            continue
        roles = _roles([turn.get(role) for turn in turns])
        if roles is None:
            continue
        system = next((k for k in SYSTEM_NAMES if isinstance(value.get(k), str)), None)
        mapping = FieldMapping(messages=key, role=role, content=content, roles=roles, system=system)
        said = f"messages in `{key}`: speaker `{role}`, text `{content}`"
        return mapping, said + (f", system `{system}`" if system else "")
    return None


def _common_key(turns: list[dict[str, Any]], candidates: Iterable[str]) -> str | None:
    """The first candidate key every turn holds as a string (case as written)."""
    for candidate in candidates:
        if all(isinstance(turn.get(candidate), str) for turn in turns):
            return candidate
    return None


def _roles(speakers: list[Any]) -> tuple[tuple[str, str], ...] | None:
    """What each speaker name means: the known names, or two unknown speakers taking turns
    (the first the user); None when a speaker cannot be placed."""
    names = list(dict.fromkeys(str(name) for name in speakers))
    known = {name: SPEAKER_NAMES.get(name.lower().strip()) for name in names}
    if all(known.values()) and "assistant" in known.values():
        return tuple(sorted((name, meaning) for name, meaning in known.items() if meaning))
    unknown = [name for name in names if known[name] is None]
    if len(names) == 2 and len(unknown) >= 1 and _alternate(speakers):
        first, second = names
        return tuple(sorted({first: "user", second: "assistant"}.items()))
    return None


def _alternate(speakers: list[Any]) -> bool:
    return all(a != b for a, b in itertools.pairwise(speakers))


def _pair_mapping(value: dict[str, Any]) -> tuple[FieldMapping, str] | None:
    """A prompt-like and an answer-like string field (or chosen and rejected answers)."""
    strings = {key.lower(): key for key, field in value.items() if isinstance(field, str)}
    prompt_names = [strings[name] for name in PROMPT_NAMES if name in strings]
    if not prompt_names:
        return None
    answer = next(
        (strings[name] for name in (*ANSWER_NAMES, *REFERENCE_NAMES) if name in strings), None
    )
    sides = [strings.get("chosen"), strings.get("rejected")]
    if answer is None and None in sides:
        return None
    prompt, query = prompt_names[0], None
    if prompt.lower() == "instruction" and "input" in strings:
        query = strings["input"]
    elif len(prompt_names) > 1 and prompt_names[1].lower() in ("input", "context"):
        query = prompt_names[1]
    system = next((strings[k] for k in SYSTEM_NAMES if k in strings), None)
    history = next((k for k in HISTORY_NAMES if isinstance(value.get(k), list)), None)
    chosen, rejected = sides if answer is None else (None, None)
    mapping = FieldMapping(
        shape="alpaca",
        prompt=prompt,
        query=query,
        response=answer,
        system=system,
        history=history,
        chosen=chosen,
        rejected=rejected,
    )
    said = f"prompt `{prompt}`" + (f" + `{query}`" if query else "")
    said += f", answer `{answer}`" if answer else f", answers `{chosen}`/`{rejected}`"
    said += "".join(
        f", {what} `{key}`" for what, key in (("system", system), ("history", history)) if key
    )
    return mapping, said


def sniff(value: object) -> Sniff:
    """A low score for any record with a conversation shape: detection takes this format
    only when no specific one accepts the records."""
    found = infer_mapping(value)
    if found is None:
        return Sniff(0.0, "no list of speaker/text objects, and no prompt/answer fields")
    return Sniff(0.3, f"read by its structure: {found[1]}")


def to_threads(record: Record, options: ConvertOptions) -> list[Thread]:
    """The record read through the mapping its structure gives; `meta.structure` says which
    keys were taken, and a note says so in words."""
    if not isinstance(record.value, dict):
        raise RecordRejected("not_an_object", f"expected an object, got {json_kind(record.value)}")
    found = infer_mapping(record.value)
    if found is None:
        raise RecordRejected(
            "unknown_format",
            "no conversation shape: no list of speaker/text objects, no prompt/answer fields",
        )
    mapping, said = found
    threads = convert_with(record, options, mapping)
    note = f"read by its structure ({said})"
    if any(meaning for _, meaning in mapping.roles) and _two_unknown(mapping):
        note += f"; {TWO_SPEAKERS}"
    return [
        dataclasses.replace(
            thread,
            meta={
                **thread.meta,
                "source_format": NAME,
                "structure": mapping.to_plain(),
                "notes": [*thread.meta.get("notes", []), note],
            },
        )
        for thread in threads
    ]


def _two_unknown(mapping: FieldMapping) -> bool:
    return any(SPEAKER_NAMES.get(name.lower().strip()) is None for name, _ in mapping.roles)


FORMAT = InputFormat(
    name=NAME,
    summary="any conversation-shaped record no other format knows, read by its structure "
    "(a list of speaker/text objects; prompt/answer fields), the keys taken in meta.structure",
    sniff=sniff,
    to_threads=to_threads,
    fallback=True,
)
