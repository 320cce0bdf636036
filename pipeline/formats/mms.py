"""MMS threads as input: canonical thread objects (JSONL, JSON arrays, our own Parquet),
bare message lists (the spec's `Thread = Message[]`), and the spec repository's example
file, whose context messages lack `name` and whose messages carry extra keys such as
`halted_on_completion` (kept in `meta.extra_fields`, never dropped).

Example: an MMS thread is read as it is (validated, lineage added to meta).

>>> from pipeline.formats.base import ConvertOptions
>>> from pipeline.sources import Record
>>> record = {"id": "t1", "messages": [
...     {"role": "user", "content": "Hi"},
...     {"role": "assistant", "content": "Hello!", "end_turn": True},
... ]}
>>> [thread] = to_threads(Record("threads.jsonl", "threads.jsonl:1", record), ConvertOptions())
>>> thread.id, [(m.role, m.format, m.content, m.end_turn) for m in thread.messages]
('t1', [('user', None, 'Hi', None), ('assistant', 'markdown', 'Hello!', True)])
"""

from __future__ import annotations

from typing import Any

from pipeline.formats.base import ConvertOptions, InputFormat, Sniff
from pipeline.mms import (
    MESSAGE_FIELDS,
    ROLES,
    THREAD_FIELDS,
    Thread,
    ThreadValidationError,
    normalize_thread_dict,
    stable_thread_id,
)
from pipeline.quarantine import RecordRejected
from pipeline.sources import Record

NAME = "mms"
MMS_ONLY_ROLES = frozenset({"developer", "context", "platform"})
MESSAGE_FIELD_SET = frozenset(MESSAGE_FIELDS)


def _messages_of(value: Any) -> list[Any] | None:
    if isinstance(value, list):
        return value
    messages = value.get("messages") if isinstance(value, dict) else None
    return messages if isinstance(messages, list) else None


def sniff(value: object) -> Sniff:
    """Sure for a message list in MMS shape (only MMS roles, every assistant message with
    `end_turn`, some role or field other chat formats lack); half sure for user-only
    lists; not MMS with a `system` or `tool` role or an assistant without `end_turn`."""
    messages = _messages_of(value)
    if not messages:
        return Sniff(0.0, "no message list")
    if not all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and m["role"] in ROLES
        for m in messages
    ):
        return Sniff(0.0, "a message has a role MMS does not define")
    assistants = [m for m in messages if m["role"] == "assistant"]
    if any("end_turn" not in m for m in assistants):
        return Sniff(0.0, "an assistant message lacks end_turn")
    if assistants or any(m["role"] in MMS_ONLY_ROLES for m in messages):
        return Sniff(1.0, "MMS roles, assistant messages carry end_turn")
    if isinstance(value, dict) and ("settings" in value or isinstance(value.get("meta"), dict)):
        return Sniff(0.9, "only user messages, with MMS thread fields (settings or meta)")
    return Sniff(0.5, "only user messages (valid MMS, but other chat formats look the same)")


def _split_extras(data: dict[str, Any]) -> dict[str, Any]:
    """Move every key that is not an MMS field out of the thread and its messages,
    returning them keyed by path (`messages[2].halted_on_completion`)."""
    extras = {key: data.pop(key) for key in list(data) if key not in THREAD_FIELDS}
    messages = data.get("messages")
    if isinstance(messages, list):
        cleaned = []
        for index, message in enumerate(messages):
            if isinstance(message, dict) and not message.keys() <= MESSAGE_FIELD_SET:
                message = dict(message)
                for key in list(message):
                    if key not in MESSAGE_FIELDS:
                        extras[f"messages[{index}].{key}"] = message.pop(key)
            cleaned.append(message)
        data["messages"] = cleaned
    return extras


def _set_lineage(meta: dict[str, Any], record: Record) -> None:
    """Point meta at this record; lineage the thread already carried (an earlier
    conversion's source and locator) moves to `meta.upstream`, the oldest kept."""
    source, locator = record.lineage
    lineage = {"source": source, "locator": locator, "source_format": NAME}
    earlier = {key: meta[key] for key in lineage if key in meta}
    if earlier and earlier != lineage and "upstream" not in meta:
        meta["upstream"] = earlier
    meta.update(lineage)


def _unname_empty_context_names(data: dict[str, Any]) -> int:
    """Drop `name: ""` from context messages (converters write empty names; MMS has no
    empty name, only none); how many were dropped."""
    messages = data.get("messages")
    if not isinstance(messages, list):
        return 0
    dropped = 0
    for index, message in enumerate(messages):
        if (
            isinstance(message, dict)
            and message.get("role") == "context"
            and message.get("name") == ""
        ):
            messages[index] = {k: v for k, v in message.items() if k != "name"}
            dropped += 1
    return dropped


def _note(meta: dict[str, Any], note: str) -> None:
    notes = meta.get("notes")
    notes = list(notes) if isinstance(notes, list) else [] if notes is None else [notes]
    notes.append(note)
    meta["notes"] = notes


def _keep_extras(meta: dict[str, Any], extras: dict[str, Any]) -> None:
    """Record the non-MMS fields in `meta.extra_fields`, with a note; whatever the input
    meta already held under those keys is kept too."""
    earlier = meta.get("extra_fields")
    if earlier is not None and not isinstance(earlier, dict):
        earlier = {"meta.extra_fields": earlier}
    meta["extra_fields"] = {**(earlier or {}), **extras}
    _note(meta, f"kept {len(extras)} non-MMS field(s) in meta.extra_fields")


def to_threads(record: Record, options: ConvertOptions | None = None) -> list[Thread]:
    """One thread per record; ids come from the record or from (source, locator)."""
    value = record.value
    if not isinstance(value, (list, dict)):
        kind = "null" if value is None else type(value).__name__
        raise RecordRejected(
            "not_an_object", f"expected a thread object or a list of messages, got {kind}"
        )
    try:
        data: dict[str, Any] = normalize_thread_dict(
            {"messages": value} if isinstance(value, list) else value
        )
    except ThreadValidationError as err:
        raise _invalid(err) from None
    extras = _split_extras(data)
    unnamed = _unname_empty_context_names(data)
    meta = data.get("meta")
    if meta is None:
        meta = {}
    if isinstance(meta, dict):  # anything else is left for validation to report
        meta = dict(meta)
        _set_lineage(meta, record)
        for note in record.notes:
            _note(meta, note)
        if extras:
            _keep_extras(meta, extras)
        if unnamed:
            _note(meta, f"read {unnamed} empty context name(s) as no name")
    data["meta"] = meta
    if isinstance(data.get("id"), int) and not isinstance(data.get("id"), bool):
        data["id"] = str(data["id"])
    if data.get("id") is None:
        data["id"] = stable_thread_id(*record.lineage)
    try:
        return [Thread.from_dict(data)]
    except ThreadValidationError as err:
        raise _invalid(err) from None


def _invalid(err: ThreadValidationError) -> RecordRejected:
    """The rejection of a record that is no valid thread, naming every field at fault."""
    details = tuple({"path": e.path, "kind": e.kind, "message": e.message} for e in err.errors)
    return RecordRejected("invalid_thread", str(err), details)


FORMAT = InputFormat(
    name=NAME,
    summary="Modular Model Spec threads: JSONL or JSON arrays of {id, messages, settings, meta}, "
    "or bare message lists",
    sniff=sniff,
    to_threads=to_threads,
)
