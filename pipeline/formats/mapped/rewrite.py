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


class _Rewrite:
    """The rewritten record being built, and the record's keys the mapping read."""

    def __init__(self, data: dict[str, Any]):
        self.data = data
        self.record: dict[str, Any] = {}
        self.used: set[str] = set()

    def take(self, ours: str, theirs: str | None) -> None:
        """Copy the value at `theirs` (a dotted path) to `ours`, when there is one."""
        if theirs is None:
            return
        self.used.add(theirs.split(".")[0])
        found, value = lookup(self.data, theirs)
        if found:
            self.record[ours] = value

    def unread(self, key: str) -> str | None:
        """`key`, unless the mapping already read it for another column."""
        return None if key in self.used else key

    def finish(self, mapping: FieldMapping, taken: frozenset[str]) -> dict[str, Any]:
        """With the media lists and the id, and the keys the mapping did not read."""
        for kind in MEDIA:
            self.take(kind, getattr(mapping, kind))
        self.take("id", mapping.id)
        kept = {
            key: value
            for key, value in self.data.items()
            if key not in self.used and key not in taken and key not in self.record
        }
        return {**kept, **self.record}


def sharegpt_record(data: dict[str, Any], mapping: FieldMapping) -> dict[str, Any]:
    """The record as ShareGPT turns, for the sharegpt adapter."""
    key, turns = _messages(data, mapping)
    rewrite = _Rewrite(data)
    rewrite.used.add(key.split(".")[0])
    rewrite.record["conversations"] = [
        _turn(turn, f"{key}[{i}]", mapping) for i, turn in enumerate(turns)
    ]
    rewrite.take("system", mapping.system)
    rewrite.take("tools", mapping.tools)
    rewrite.take("kto_tag", mapping.label)
    for side in ("chosen", "rejected"):
        rewrite.take(side, getattr(mapping, side))
        if side in rewrite.record:
            rewrite.record[side] = _side(rewrite.record[side], side, mapping)
    return rewrite.finish(mapping, SHAREGPT_KEYS)


def alpaca_record(data: dict[str, Any], mapping: FieldMapping) -> dict[str, Any]:
    """The record as Alpaca columns, for the alpaca adapter (`output` absent when the
    record has no response: a prompt-only record)."""
    rewrite = _Rewrite(data)
    rewrite.take("instruction", mapping.prompt or "instruction")
    # a column is read under its Alpaca name only when the mapping does not name it, and
    # never twice (a mapping whose prompt is `input` has no `input` query)
    rewrite.take("input", mapping.query or rewrite.unread("input"))
    rewrite.take("output", mapping.response or rewrite.unread("output"))
    rewrite.take("system", mapping.system)
    rewrite.take("history", mapping.history)
    rewrite.take("chosen", mapping.chosen)
    rewrite.take("rejected", mapping.rejected)
    prompt = rewrite.record.get("instruction")
    if not isinstance(prompt, str):
        where = mapping.prompt or "instruction"
        raise RecordRejected(
            "missing_field", f"{where} (the mapping's prompt) is {json_kind(prompt)}, not text"
        )
    return rewrite.finish(mapping, ALPACA_KEYS)


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
