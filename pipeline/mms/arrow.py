"""The Arrow form of threads (DESIGN §3): `messages` as a list of structs, `meta` as a
JSON string, and the conversions both ways that every stage and shard uses."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson
import pyarrow as pa

from pipeline.mms.model import Format, Thread
from pipeline.mms.validation import without_foreign_nulls

MESSAGE_ARROW_TYPE = pa.struct(
    [
        ("role", pa.string()),
        ("content", pa.string()),
        ("format", pa.string()),
        ("end_turn", pa.bool_()),
        ("name", pa.string()),
        ("weight", pa.float64()),
    ]
)
FORMAT_ARROW_TYPE = pa.struct(
    [
        ("name", pa.string()),
        ("halt_on_start", pa.bool_()),
        ("halt_on_completion", pa.bool_()),
        # "json" / "jsonl", or a custom sampler object as JSON text (it starts with "{").
        ("sampler", pa.string()),
    ]
)
THREAD_ARROW_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("messages", pa.list_(MESSAGE_ARROW_TYPE)),
        ("settings", pa.struct([("formats", pa.list_(FORMAT_ARROW_TYPE))])),
        ("meta", pa.string()),
    ]
)


def _arrow_row(thread: Thread) -> dict[str, Any]:
    return {
        "id": thread.id,
        "messages": [m.all_fields() for m in thread.messages],
        "settings": _arrow_settings(thread),
        "meta": orjson.dumps(thread.meta).decode(),
    }


def _arrow_settings(thread: Thread) -> dict[str, Any] | None:
    if thread.settings is None:
        return None
    return {"formats": [_format_to_arrow(f) for f in thread.settings.formats]}


def settings_to_arrow(threads: Iterable[Thread]) -> pa.Array:
    """The `settings` column of threads_to_arrow alone."""
    settings_type = THREAD_ARROW_SCHEMA.field("settings").type
    return pa.array([_arrow_settings(t) for t in threads], type=settings_type)


def _format_to_arrow(fmt: Format) -> dict[str, Any]:
    row = fmt.to_dict()
    if isinstance(fmt.sampler, dict):
        row["sampler"] = orjson.dumps(fmt.sampler).decode()
    return row


def threads_to_arrow(threads: Iterable[Thread]) -> pa.Table:
    """A table with THREAD_ARROW_SCHEMA: messages as list<struct>, meta as a JSON string."""
    return pa.Table.from_pylist([_arrow_row(t) for t in threads], schema=THREAD_ARROW_SCHEMA)


def normalize_thread_dict(data: Mapping[str, Any]) -> dict[str, Any]:
    """Bring a thread dict from JSON or an Arrow/Parquet row into the canonical JSON form.

    Arrow structs carry every message field, so a null field that the role does not
    have means "absent"; `meta` and custom samplers stored as JSON text are parsed.
    """
    data = dict(data)
    messages = data.get("messages")
    if isinstance(messages, list):
        data["messages"] = [without_foreign_nulls(m) for m in messages]
    settings = data.get("settings")
    if isinstance(settings, dict) and isinstance(settings.get("formats"), list):
        data["settings"] = {
            **settings,
            "formats": [_format_from_arrow(f) for f in settings["formats"]],
        }
    if isinstance(data.get("meta"), str):
        data["meta"] = _json_object_or_text(data["meta"])
    return data


def _json_object_or_text(text: str) -> Any:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return text
    return value if isinstance(value, dict) else text


def _format_from_arrow(entry: Any) -> Any:
    if isinstance(entry, dict) and isinstance(entry.get("sampler"), str):
        sampler = entry["sampler"]
        if sampler.startswith("{"):
            return {**entry, "sampler": _json_object_or_text(sampler)}
    return entry


def threads_from_arrow(table: pa.Table) -> list[Thread]:
    """Threads from a table in THREAD_ARROW_SCHEMA (the inverse of threads_to_arrow)."""
    return [Thread.from_dict(normalize_thread_dict(row)) for row in table.to_pylist()]
