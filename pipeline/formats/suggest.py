"""A field mapping suggested from the keys a file's records hold (`mms formats
--suggest-mapping FILE`): what a curator edits and passes as `--mapping FILE` or
`inputs[].mapping` when no format reads the file. The reading by structure
(pipeline/formats/structural.py) gives it when it can; otherwise the likeliest keys are
guessed (a list of message-like objects: the key whose values repeat as the speaker, the
longest text as the content; else text fields as prompt and answer) and the YAML says what
to check. Every guess weighs the evidence of the sampled records (field_evidence.py): a
label, an assertion, an id, a number or a link is never taken as the answer; with no
answer left the mapping makes prompt-only threads, and the comments give the evidence.

    {"dialog": [{"who": "doc", "said": "Hello"}, {"who": "pt", "said": "My knee hurts"}]}
    -> messages: dialog / role: who / content: said / roles: {doc: user, pt: assistant}
       (a comment asks to check which speaker is which)
    {"question_id": 1, "text": "How can I ...?", "category": "generic"}
    -> shape: alpaca / prompt: text (no response: prompt-only threads), with the comment
       "category: 9 distinct values over 43 records, mean 7 chars: a label, not an answer"
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

import yaml

from pipeline.formats.builder import json_kind
from pipeline.formats.field_evidence import FieldEvidence, field_evidence, name_words
from pipeline.formats.field_names import ANSWER_NAMES, PROMPT_NAMES, SPEAKER_NAMES
from pipeline.formats.structural import infer_mapping

SPEAKER_VALUES = 8
"""At most this many distinct values make a key a speaker (a role), not text."""
SHOWN_KEYS = 40
"""The suggestion's comments list this many of the keys seen, then how many more."""
NOT_ANSWER_WORDS = frozenset({"incorrect", "wrong", "bad", "rejected", "false", "negative"})
"""Words in a field's name that say it holds what an answer is not."""
QUERY_WORDS = frozenset({"input", "context", "given", "passage"})
"""Words in a field's name that say it completes the prompt (Alpaca's `input`)."""
NOT_ANSWERS = ("label", "assertion", "id", "number", "link")
"""Roles whose evidence the comments give: fields never taken as the answer."""


@dataclass
class Suggestion:
    """The suggested mapping (the data a mapping file holds), and what to check in it."""

    mapping: dict[str, Any]
    checks: list[str] = field(default_factory=list)
    keys: dict[str, str] = field(default_factory=dict)
    """Every top-level key seen, with the kinds of value it held."""
    evidence: list[str] = field(default_factory=list)
    """Why fields were not taken as the answer, with their measures."""

    @property
    def sure(self) -> bool:
        """Whether the file converts with the mapping as it is (nothing to check)."""
        return not self.checks

    def to_yaml(self, path: str) -> str:
        """The mapping file's text: comments saying where it comes from and what to check,
        then the mapping."""
        lines = [f"# A field mapping for {path}, from the keys of its first records:"]
        lines += [f"#   {key}: {kinds}" for key, kinds in islice(self.keys.items(), SHOWN_KEYS)]
        if len(self.keys) > SHOWN_KEYS:
            lines += [f"#   ... and {len(self.keys) - SHOWN_KEYS} more keys"]
        lines += [f"# mms convert {path} --mapping THIS_FILE -o threads.jsonl"]
        lines += ["# (or paste it under `mapping:` of the input in a pipeline config)"]
        if self.evidence:
            lines += ["# Not an answer, by the records sampled:"]
            lines += [f"#   {said}" for said in self.evidence]
        if self.checks:
            lines += ["# Check before use:"] + [f"#   - {check}" for check in self.checks]
        else:
            lines += ["# mms reads the file this way already (the `structural` format)."]
        body = yaml.safe_dump(self.mapping, sort_keys=False, allow_unicode=True)
        return "\n".join(lines) + "\n" + body


def suggest_mapping(records: Sequence[object]) -> Suggestion | None:
    """The mapping that reads `records` (a file's first records), None when they hold no
    object to map."""
    objects = [record for record in records if isinstance(record, dict)]
    if not objects:
        return None
    keys = _key_kinds(objects)
    evidence = {found.key: found for found in field_evidence(objects)}
    notes = [found.said() for found in evidence.values() if found.role in NOT_ANSWERS]
    inferred = [infer_mapping(record) for record in objects]
    if all(found is not None for found in inferred):
        readings = {_plain(found[0].to_plain()) for found in inferred if found is not None}
        first = inferred[0]
        assert first is not None
        if len(readings) == 1 and _answers_are_text(first[0].to_plain(), evidence):
            return Suggestion(first[0].to_plain(), [], keys, notes)
    guess = _messages_guess(objects, keys, evidence) or _fields_guess(keys, evidence)
    if guess is not None:
        guess.evidence = notes + guess.evidence
    return guess


def _answers_are_text(mapping: dict[str, Any], evidence: dict[str, FieldEvidence]) -> bool:
    """Whether the fields a reading by structure takes as answers (or messages) hold
    text (or message-like objects) by the evidence: never a label or an assertion."""
    wanted = {"response": "text", "chosen": "text", "rejected": "text", "messages": "messages"}
    return all(
        evidence[key].role == role
        for part, role in wanted.items()
        if isinstance(key := mapping.get(part), str) and key in evidence
    )


def _plain(data: dict[str, Any]) -> str:
    return repr(sorted(data.items(), key=lambda item: item[0]))


def _key_kinds(objects: list[dict[str, Any]]) -> dict[str, str]:
    kinds: dict[str, Counter[str]] = {}
    for record in objects:
        for key, value in record.items():
            kinds.setdefault(key, Counter())[_kind(value)] += 1
    return {key: ", ".join(kind for kind, _ in found.most_common()) for key, found in kinds.items()}


def _kind(value: Any) -> str:
    if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        inner = sorted({key for item in value for key in item})[:6]
        return f"list of objects ({', '.join(inner)})"
    return json_kind(value)


def _messages_guess(
    objects: list[dict[str, Any]], keys: dict[str, str], evidence: dict[str, FieldEvidence]
) -> Suggestion | None:
    """A list of message-like objects under the same key in the records (not assertions):
    the speaker is its key with few distinct string values, the content its longest text."""
    lists = Counter(
        key
        for record in objects
        for key, value in record.items()
        if isinstance(value, list) and value and evidence[key].role == "messages"
    )
    if not lists:
        return None
    messages = lists.most_common(1)[0][0]
    turns = [
        turn for record in objects for turn in record.get(messages) or [] if isinstance(turn, dict)
    ]
    strings: dict[str, list[str]] = {}
    for turn in turns:
        for key, value in turn.items():
            if isinstance(value, str):
                strings.setdefault(key, []).append(value)
    speakers = [k for k, values in strings.items() if len(set(values)) <= SPEAKER_VALUES]
    role = min(speakers, key=lambda k: len(set(strings[k])), default=None)
    texts = [k for k in strings if k != role]
    content = max(texts, key=lambda k: sum(map(len, strings[k])), default=None)
    checks = []
    mapping: dict[str, Any] = {"messages": messages}
    if role is None:
        checks.append(f"no key of the `{messages}` objects looks like a speaker: set `role`")
        mapping["role"] = "SPEAKER_KEY"
    else:
        mapping["role"] = role
    if content is None:
        checks.append(f"no key of the `{messages}` objects holds text: set `content`")
        mapping["content"] = "TEXT_KEY"
    else:
        mapping["content"] = content
    if role is not None:
        names = list(dict.fromkeys(strings[role]))
        roles = {}
        for order, name in enumerate(names):
            known = SPEAKER_NAMES.get(name.lower().strip())
            roles[name] = known or ("user" if order % 2 == 0 else "assistant")
            if known is None:
                checks.append(f"`{name}` is guessed to be the {roles[name]} (by turn order)")
        mapping["roles"] = roles
    return Suggestion(mapping, checks, keys)


def _fields_guess(keys: dict[str, str], evidence: dict[str, FieldEvidence]) -> Suggestion | None:
    """Text fields: the prompt by its name (else the first), the answer by its name (else
    the longest text longer than the prompt), none left making prompt-only threads."""
    texts = [found for found in evidence.values() if found.answerable]
    if not texts:
        return None
    prompt = next((e for e in texts if _named(e, PROMPT_NAMES)), texts[0])
    rest = [found for found in texts if found is not prompt]
    answer, why = _answer(prompt, rest)
    mapping: dict[str, Any] = {"shape": "alpaca", "prompt": prompt.key}
    query = next(
        (e for e in rest if e is not answer and set(name_words(e.key)) & QUERY_WORDS), None
    )
    if query is not None:
        mapping["query"] = query.key
    if answer is None:
        checks = [
            f"no field holds an answer: `{prompt.key}` is guessed to be the prompt of "
            "prompt-only threads (set `response` if a field is the answer)"
        ]
    else:
        mapping["response"] = answer.key
        checks = [
            f"`{prompt.key}` is guessed to be the prompt and `{answer.key}` the answer ({why})"
        ]
    checks.append(
        "add `query` (a second prompt field), `system` or `history` if the records have them"
    )
    shorter = [
        f"{e.key}: {e.measures()}: shorter than the prompt, not taken as the answer"
        for e in rest
        if answer is None and e is not query
    ]
    return Suggestion(mapping, checks, keys, shorter)


def _named(found: FieldEvidence, names: tuple[str, ...]) -> bool:
    """Whether a word of the field's name (singular) is one of `names`."""
    words = name_words(found.key)
    return not NOT_ANSWER_WORDS & set(words) and any(
        word in names or word.removesuffix("s") in names for word in words
    )


def _answer(prompt: FieldEvidence, rest: list[FieldEvidence]) -> tuple[FieldEvidence | None, str]:
    """The answer among the other text fields, and why: named as one (a singular name
    first), else the longest text longer on average than the prompt; else None."""
    named = [found for found in rest if _named(found, ANSWER_NAMES)]
    if named:
        best = min(
            named, key=lambda e: (not set(name_words(e.key)) & set(ANSWER_NAMES), -e.mean_chars)
        )
        return best, f"its name; {best.measures()}"
    longest = max(rest, key=lambda e: e.mean_chars, default=None)
    if longest is None or longest.mean_chars < prompt.mean_chars:
        return None, ""
    return (
        longest,
        f"the longest text, mean {longest.mean_chars:.0f} chars, the prompt's {prompt.mean_chars:.0f}",
    )
