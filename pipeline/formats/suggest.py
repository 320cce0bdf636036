"""A field mapping suggested from the keys a file's records hold (`mms formats
--suggest-mapping FILE`): what a curator edits and passes as `--mapping FILE` or
`inputs[].mapping` when no format reads the file. The reading by structure
(pipeline/formats/structural.py) gives it when it can; otherwise the likeliest keys are
guessed (a list of objects: the key whose values repeat as the speaker, the longest text
as the content; else string fields as prompt and answer) and the YAML says what to check.

    {"dialog": [{"who": "doc", "said": "Hello"}, {"who": "pt", "said": "My knee hurts"}]}
    -> messages: dialog / role: who / content: said / roles: {doc: user, pt: assistant}
       (a comment asks to check which speaker is which)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

import yaml

from pipeline.formats.builder import json_kind
from pipeline.formats.field_names import SPEAKER_NAMES
from pipeline.formats.structural import infer_mapping

SPEAKER_VALUES = 8
"""At most this many distinct values make a key a speaker (a role), not text."""
SHOWN_KEYS = 40
"""The suggestion's comments list this many of the keys seen, then how many more."""


@dataclass
class Suggestion:
    """The suggested mapping (the data a mapping file holds), and what to check in it."""

    mapping: dict[str, Any]
    checks: list[str] = field(default_factory=list)
    keys: dict[str, str] = field(default_factory=dict)
    """Every top-level key seen, with the kinds of value it held."""

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
    inferred = [infer_mapping(record) for record in objects]
    if all(found is not None for found in inferred):
        readings = {_plain(found[0].to_plain()) for found in inferred if found is not None}
        if len(readings) == 1:
            first = inferred[0]
            assert first is not None
            return Suggestion(first[0].to_plain(), [], keys)
    return _messages_guess(objects, keys) or _pair_guess(objects, keys)


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


def _messages_guess(objects: list[dict[str, Any]], keys: dict[str, str]) -> Suggestion | None:
    """A list of objects under the same key in the records: the speaker is its key with few
    distinct string values, the content its longest text."""
    lists = Counter(
        key
        for record in objects
        for key, value in record.items()
        if isinstance(value, list) and value and all(isinstance(item, dict) for item in value)
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


def _pair_guess(objects: list[dict[str, Any]], keys: dict[str, str]) -> Suggestion | None:
    """String fields: the first as the prompt, the longest other as the answer."""
    lengths: Counter[str] = Counter()  # in the order the keys are first seen
    for record in objects:
        for key, value in record.items():
            if isinstance(value, str):
                lengths[key] += len(value)
    if len(lengths) < 2:
        return None
    prompt = next(iter(lengths))
    answer = max((key for key in lengths if key != prompt), key=lambda key: lengths[key])
    checks = [
        f"`{prompt}` is guessed to be the prompt and `{answer}` the answer",
        "add `query` (a second prompt field), `system` or `history` if the records have them",
    ]
    return Suggestion({"shape": "alpaca", "prompt": prompt, "response": answer}, checks, keys)
