"""A record with renamed keys rewritten into the shape an existing adapter reads: ShareGPT
turns (`{from, value}` with the usual speakers, `system`, `tools`, DPO sides, KTO label,
media lists) or Alpaca columns. The keys the mapping does not name are carried over, so
the adapter keeps them in meta as it keeps any field it does not read."""

from __future__ import annotations

from typing import Any

from pipeline.formats.builder import json_kind
from pipeline.formats.field_mapping import FieldMapping
from pipeline.quarantine import RecordRejected

SPEAKERS = {
    "user": "human",
    "assistant": "gpt",
    "system": "system",
    "tool_call": "function_call",
    "tool": "observation",
}
"""Each role's ShareGPT speaker."""
TURN_KEYS = ("conversations", "messages")
TURN_FIELDS = (("from", "value"), ("role", "content"))
"""Where messages, and a message's role and text, are looked for when the mapping does
not say."""
MEDIA = ("images", "videos", "audios")
SHAREGPT_KEYS = frozenset({"conversations", "system", "tools", "chosen", "rejected", "kto_tag"})
ALPACA_KEYS = frozenset(
    {"instruction", "input", "output", "system", "history", "chosen", "rejected"}
)
"""The keys of the rewritten records (a carried-over key of the same name is dropped)."""


def lookup(data: dict[str, Any], path: str) -> tuple[bool, Any]:
    """The value at a dotted key path, and whether it is there."""
    value: Any = data
    for key in path.split("."):
        if not isinstance(value, dict) or key not in value:
            return False, None
        value = value[key]
    return True, value


def sharegpt_record(data: dict[str, Any], mapping: FieldMapping) -> dict[str, Any]:
    """The record as ShareGPT turns, for the sharegpt adapter."""
    key, turns = _messages(data, mapping)
    rewritten: dict[str, Any] = {
        "conversations": [_turn(t, f"{key}[{i}]", mapping) for i, t in enumerate(turns)]
    }
    used = {key.split(".")[0]}
    for ours, theirs in (
        ("system", mapping.system),
        ("tools", mapping.tools),
        ("kto_tag", mapping.label),
    ):
        if theirs is not None:
            found, value = lookup(data, theirs)
            used.add(theirs.split(".")[0])
            if found:
                rewritten[ours] = value
    for side in ("chosen", "rejected"):
        theirs = getattr(mapping, side)
        if theirs is None:
            continue
        used.add(theirs.split(".")[0])
        found, value = lookup(data, theirs)
        if found:
            rewritten[side] = _side(value, side, mapping)
    _media(data, mapping, rewritten, used)
    _id(data, mapping, rewritten, used)
    return _carry_over(data, rewritten, used, SHAREGPT_KEYS)


def alpaca_record(data: dict[str, Any], mapping: FieldMapping) -> dict[str, Any]:
    """The record as Alpaca columns, for the alpaca adapter (`output` absent when the
    record has no response: a prompt-only record)."""
    rewritten: dict[str, Any] = {}
    used: set[str] = set()
    for ours, theirs in (
        ("instruction", mapping.prompt or "instruction"),
        ("input", mapping.query or "input"),
        ("output", mapping.response or "output"),
        ("system", mapping.system),
        ("history", mapping.history),
        ("chosen", mapping.chosen),
        ("rejected", mapping.rejected),
    ):
        if theirs is None:
            continue
        used.add(theirs.split(".")[0])
        found, value = lookup(data, theirs)
        if found:
            rewritten[ours] = value
    if not isinstance(rewritten.get("instruction"), str):
        where = mapping.prompt or "instruction"
        raise RecordRejected(
            "missing_field",
            f"{where} (the mapping's prompt) is {json_kind(rewritten.get('instruction'))}, not text",
        )
    _media(data, mapping, rewritten, used)
    _id(data, mapping, rewritten, used)
    return _carry_over(data, rewritten, used, ALPACA_KEYS)


def _messages(data: dict[str, Any], mapping: FieldMapping) -> tuple[str, list[Any]]:
    keys = [mapping.messages] if mapping.messages else list(TURN_KEYS)
    for key in keys:
        found, value = lookup(data, key)
        if found and isinstance(value, list):
            return key, value
        if found:
            raise RecordRejected(
                "missing_field", f"{key} (the mapping's messages) is {json_kind(value)}, not a list"
            )
    raise RecordRejected("missing_field", f"no {' or '.join(keys)} list of messages")


def _turn(message: Any, where: str, mapping: FieldMapping) -> dict[str, Any]:
    """One message as a ShareGPT turn (its other keys kept, for the message's meta)."""
    if not isinstance(message, dict):
        raise RecordRejected(
            "missing_field", f"{where} is {json_kind(message)}, not a message object"
        )
    role_key, content_key = _fields(message, mapping)
    role = message.get(role_key)
    target = mapping.role_of(role) if isinstance(role, str) else None
    if target is None:
        raise RecordRejected(
            "unknown_role",
            f"{where}.{role_key} is {role!r}: the mapping's roles know "
            + ", ".join(mapping.role_names()),
        )
    if content_key not in message:
        raise RecordRejected("missing_field", f"{where} has no {content_key}")
    turn = {k: v for k, v in message.items() if k not in (role_key, content_key, mapping.weight)}
    turn.pop("from", None)
    turn.pop("value", None)
    turn |= {"from": SPEAKERS[target], "value": message[content_key]}
    if mapping.weight is not None and message.get(mapping.weight) is not None:
        turn["weight"] = _weight(message[mapping.weight], f"{where}.{mapping.weight}")
    return turn


def _fields(message: dict[str, Any], mapping: FieldMapping) -> tuple[str, str]:
    """The message's role and content keys: the mapping's, else the usual pairs."""
    if mapping.role and mapping.content:
        return mapping.role, mapping.content
    for role, content in TURN_FIELDS:
        if (mapping.role or role) in message:
            return mapping.role or role, mapping.content or content
    return mapping.role or "from", mapping.content or "value"


def _weight(value: Any, where: str) -> float:
    """A training flag or weight: true/false (axolotl's `train`) or a number."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        return float(value)
    raise RecordRejected(
        "missing_field", f"{where} is {json_kind(value)}, not a weight or true/false"
    )


def _side(value: Any, side: str, mapping: FieldMapping) -> Any:
    """A DPO side: one message or a list of them, as turns."""
    if isinstance(value, list):
        return [_turn(turn, f"{side}[{i}]", mapping) for i, turn in enumerate(value)]
    if isinstance(value, dict):
        return _turn(value, side, mapping)
    if isinstance(value, str):
        return {"from": "gpt", "value": value}
    return value


def _media(
    data: dict[str, Any], mapping: FieldMapping, rewritten: dict[str, Any], used: set[str]
) -> None:
    for kind in MEDIA:
        theirs = getattr(mapping, kind)
        if theirs is None:
            continue
        used.add(theirs.split(".")[0])
        found, value = lookup(data, theirs)
        if found:
            rewritten[kind] = value


def _id(
    data: dict[str, Any], mapping: FieldMapping, rewritten: dict[str, Any], used: set[str]
) -> None:
    if mapping.id is None:
        return
    used.add(mapping.id.split(".")[0])
    found, value = lookup(data, mapping.id)
    if found:
        rewritten["id"] = value


def _carry_over(
    data: dict[str, Any], rewritten: dict[str, Any], used: set[str], taken: frozenset[str]
) -> dict[str, Any]:
    """The rewritten record with the record's keys the mapping did not read."""
    kept = {
        k: v for k, v in data.items() if k not in used and k not in taken and k not in rewritten
    }
    return {**kept, **rewritten}
