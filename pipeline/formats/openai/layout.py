"""The shape of an OpenAI-style record: which threads it makes (chat, preference pair,
KTO verdict, evals sample), the (where, message) turns of each, where its tool
definitions are, and the fields it leaves unread for `meta.extra_fields`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline.formats.builder import json_kind, source_thread_id
from pipeline.formats.openai.tools import TOOL_KEYS
from pipeline.quarantine import RecordRejected
from pipeline.sources import Record

PAIRS = (("chosen_messages", "rejected_messages"), ("chosen", "rejected"))
"""Keys of preference pairs of message lists: LLaMA-Factory v1 DPO, then TRL / HF."""
PREFERENCE_OUTPUTS = ("preferred_output", "non_preferred_output")
"""OpenAI preference fine-tuning: the two completions of `input.messages`."""
REJECTED_RESPONSE = "rejected_response"
"""ms-swift's DPO rows: `messages` ending in the chosen answer, and the rejected one."""
OTHER_ANSWERS = ("response", "completions")
"""Answers of a `prompt` in other formats' shapes: a prompt holding one is no prompt-only."""


@dataclass(slots=True)
class Side:
    """One thread to build: its id, meta and (where, message) turns."""

    thread_id: str
    meta: dict[str, Any]
    turns: list[tuple[str, Any]]
    prompt_only: str | None = None
    """Why the thread ends with its prompt (a prompt without a completion), or None."""


@dataclass(slots=True)
class Layout:
    """What a record holds: the threads to build, its tool definitions (and where they
    were), the keys it used, and the unread fields and notes every thread gets."""

    sides: list[Side] = field(default_factory=list)
    tools: list[tuple[str, Any]] = field(default_factory=list)
    used: set[str] = field(default_factory=set)
    extras: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _turns(value: Any, where: str, text_role: str | None = None) -> list[tuple[str, Any]]:
    """A message list (or one message object, or, where `text_role` is given, a string:
    one message of that role, as TRL's standard form and OpenAI's legacy fine-tuning
    files hold a prompt and its completion) as (where, message) turns."""
    if text_role is not None and isinstance(value, str):
        return [(where, {"role": text_role, "content": value})]
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
) -> tuple[list[Side], bool]:
    """The chosen and rejected threads, and whether the shared prompt was used: it is
    prepended to a side that holds nothing but assistant messages."""
    sides = []
    prompted = False
    for key, preference in zip(keys, ("chosen", "rejected"), strict=True):
        if isinstance(value[key], str) and not prompt:
            raise RecordRejected(
                "missing_field",
                f"{key} is a string and there is no prompt (TRL's implicit-prompt "
                "preference in its standard form): read it with --from trl",
            )
        turns = _turns(value[key], key, text_role="assistant")
        if prompt and _completions_only(turns):
            turns = prompt + turns
            prompted = True
        meta = {"pair_id": base, "preference": preference}
        sides.append(Side(f"{base}:{preference}", meta, turns))
    return sides, prompted


def _openai_preference(value: dict[str, Any], base: str, layout: Layout) -> None:
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


def _message_pair(value: dict[str, Any], base: str, keys: tuple[str, str], layout: Layout) -> None:
    for key, other in (keys, keys[::-1]):
        if value.get(key) is None:
            raise RecordRejected("missing_field", f"{other} is present but {key} is missing")
    layout.used.update(keys)
    prompt_key = next((k for k in ("prompt", "messages") if value.get(k) is not None), None)
    prompt = _turns(value[prompt_key], prompt_key, text_role="user") if prompt_key else []
    layout.sides, prompted = _preference_sides(value, base, keys, prompt)
    if prompted:
        layout.used.add(str(prompt_key))
    if "messages" not in layout.used and value.get("messages") == value[keys[0]]:
        layout.used.add("messages")
        layout.notes.append(f"messages repeats {keys[0]}; not kept twice")


def _evals_sample(value: dict[str, Any], base: str, layout: Layout) -> None:
    layout.used.update(("input", "ideal"))
    turns = _turns(value["input"], "input", text_role="user")
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
    layout.sides = [Side(base, {}, turns)]


def _chat(value: dict[str, Any], base: str, layout: Layout) -> None:
    """`messages`, or TRL's `prompt` + `completion` (message lists or strings: OpenAI's
    legacy fine-tuning files), or a `prompt` alone (TRL's prompt-only type); a boolean
    `label` is KTO's verdict."""
    prompt_only = None
    if "messages" in value:
        layout.used.add("messages")
        turns = _turns(value["messages"], "messages")
    else:
        layout.used.update(("prompt", "completion"))
        turns = _turns(value["prompt"], "prompt", text_role="user")
        last = turns[-1][1] if turns else None
        answers = [key for key in OTHER_ANSWERS if value.get(key) is not None]
        if "completion" in value:
            turns += _turns(value["completion"], "completion", text_role="assistant")
        elif answers:
            raise RecordRejected(
                "missing_field",
                f"prompt has no completion but the record holds {', '.join(answers)}: not an "
                "OpenAI shape (--from trl reads prompt/response strings and TRL's stepwise "
                "supervision, --from completions a list of model completions)",
            )
        elif not (isinstance(last, dict) and last.get("role") == "assistant"):
            prompt_only = "a prompt without a completion: the assistant turn is to be generated"
    meta: dict[str, Any] = {}
    if isinstance(value.get("label"), bool):
        layout.used.add("label")
        meta["preference"] = "desirable" if value["label"] else "undesirable"
    rejected = value.get(REJECTED_RESPONSE)
    last = turns[-1][1] if turns else None
    if isinstance(rejected, str) and isinstance(last, dict) and last.get("role") == "assistant":
        layout.used.add(REJECTED_RESPONSE)
        answer = (REJECTED_RESPONSE, {"role": "assistant", "content": rejected})
        layout.sides = [
            Side(f"{base}:chosen", {**meta, "pair_id": base, "preference": "chosen"}, turns),
            Side(
                f"{base}:rejected",
                {**meta, "pair_id": base, "preference": "rejected"},
                [*turns[:-1], answer],
            ),
        ]
        return
    layout.sides = [Side(base, meta, turns, prompt_only)]


def read_layout(record: Record) -> Layout:
    """Read the record's shape: which threads it makes and from which fields; raises
    RecordRejected when it is not an object holding messages."""
    value = record.value
    if not isinstance(value, dict):
        kind = f"a JSON {json_kind(value)}"
        raise RecordRejected("not_an_object", f"expected an object with messages, got {kind}")
    source_id = value.get("id")
    base = source_thread_id(record, source_id)
    layout = Layout(used={"id"} if base == str(source_id) else set())
    pair = next((keys for keys in PAIRS if any(value.get(k) is not None for k in keys)), None)
    if isinstance(value.get("input"), dict) and any(k in value for k in PREFERENCE_OUTPUTS):
        _openai_preference(value, base, layout)
    elif pair is not None:
        _message_pair(value, base, pair, layout)
    elif "input" in value and "messages" not in value:
        _evals_sample(value, base, layout)
    elif "messages" in value or "prompt" in value:
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
