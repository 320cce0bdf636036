"""The Arrow form of threads (DESIGN §3): `messages` as a list of structs, `meta` as a
JSON string, the thread's media (only in a table whose threads hold some) as one more
column, and the conversions both ways that every stage and shard uses."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson
import pyarrow as pa

from pipeline.mms.model import Format, Media, Thread
from pipeline.mms.validation import (
    FRAMES,
    MEDIA_MARKER,
    MEDIA_SOURCES,
    FieldError,
    ThreadValidationError,
    without_foreign_nulls,
)

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
FRAME_ARROW_TYPE = pa.struct(
    [("path", pa.string()), ("url", pa.string()), ("data", pa.string()), ("mime", pa.string())]
)
"""One frame of a video given as its frame images: an image's source and mime."""
MEDIA_ARROW_TYPE = pa.struct(
    [
        ("message", pa.int32()),
        ("kind", pa.string()),
        ("path", pa.string()),
        ("url", pa.string()),
        ("data", pa.string()),
        ("mime", pa.string()),
        (FRAMES, pa.list_(FRAME_ARROW_TYPE)),
    ]
)
"""One media part of a thread: the index of its message, its kind, its source (one of
path, url, data, or a video's `frames` in order; null otherwise) and mime; its place in
the message is its U+FFFC marker (DESIGN §3)."""
MEDIA_COLUMN = "media"
THREAD_MEDIA_ARROW_SCHEMA = THREAD_ARROW_SCHEMA.append(
    pa.field(MEDIA_COLUMN, pa.list_(MEDIA_ARROW_TYPE))
)
"""THREAD_ARROW_SCHEMA with the `media` column: the schema of a table whose threads hold
media (null for a thread without)."""


def _arrow_row(thread: Thread, with_media: bool) -> dict[str, Any]:
    row = {
        "id": thread.id,
        "messages": [m.all_fields() for m in thread.messages],
        "settings": _arrow_settings(thread),
        "meta": orjson.dumps(thread.meta).decode(),
    }
    if with_media:
        row[MEDIA_COLUMN] = media_rows(thread)
    return row


def media_rows(thread: Thread) -> list[dict[str, Any]] | None:
    """The thread's `media` column value: every media part in order with its message's
    index, or None when it holds none.

    >>> from pipeline.mms.model import Media, Message
    >>> image = Message.user("\ufffc", [Media("image", path="a.png")])
    >>> media_rows(Thread("t", [Message.user("Hi"), image]))
    [{'message': 1, 'kind': 'image', 'path': 'a.png', 'url': None, 'data': None, 'mime': None, 'frames': None}]
    """
    rows = [
        {
            "message": index,
            "kind": media.kind,
            "path": media.path,
            "url": media.url,
            "data": media.data,
            "mime": media.mime,
            FRAMES: [_frame_row(frame) for frame in media.frames] if media.frames else None,
        }
        for index, message in enumerate(thread.messages)
        for media in message.media
    ]
    return rows or None


def _frame_row(frame: Media) -> dict[str, str | None]:
    return {"path": frame.path, "url": frame.url, "data": frame.data, "mime": frame.mime}


def _arrow_settings(thread: Thread) -> dict[str, Any] | None:
    if thread.settings is None:
        return None
    return {"formats": [_format_to_arrow(f) for f in thread.settings.formats]}


def settings_to_arrow(threads: Iterable[Thread]) -> pa.Array:
    """The `settings` column of threads_to_arrow alone."""
    settings_type = THREAD_ARROW_SCHEMA.field("settings").type
    return pa.array([_arrow_settings(t) for t in threads], type=settings_type)


def media_to_arrow(
    threads: Iterable[Thread], message_counts: Sequence[int] | None = None
) -> pa.Array:
    """The `media` column of threads_to_arrow alone (null for a thread without media);
    with `message_counts`, each thread's media in its first so many messages (a thread
    a stage cut at a message boundary keeps those)."""
    rows = [media_rows(thread) for thread in threads]
    if message_counts is not None:
        rows = [
            [item for item in found if item["message"] < count] or None if found else None
            for found, count in zip(rows, message_counts, strict=True)
        ]
    return pa.array(rows, type=THREAD_MEDIA_ARROW_SCHEMA.field(MEDIA_COLUMN).type)


def _format_to_arrow(fmt: Format) -> dict[str, Any]:
    row = fmt.to_dict()
    if isinstance(fmt.sampler, dict):
        row["sampler"] = orjson.dumps(fmt.sampler).decode()
    return row


def threads_to_arrow(threads: Iterable[Thread], *, media: bool | None = None) -> pa.Table:
    """A table with THREAD_ARROW_SCHEMA (messages as list<struct>, meta as a JSON string),
    or THREAD_MEDIA_ARROW_SCHEMA when a thread holds media (`media=None`) or when asked
    (`media=True`); `media=False` with threads that hold media raises ValueError, since
    the table would lose them."""
    threads = list(threads)
    holds_media = any(thread.has_media for thread in threads)
    if media is False and holds_media:
        raise ValueError("the threads hold media: their table needs its media column")
    with_media = holds_media if media is None else media
    schema = THREAD_MEDIA_ARROW_SCHEMA if with_media else THREAD_ARROW_SCHEMA
    return pa.Table.from_pylist([_arrow_row(t, with_media) for t in threads], schema=schema)


def normalize_thread_dict(data: Mapping[str, Any]) -> dict[str, Any]:
    """Bring a thread dict from JSON or an Arrow/Parquet row into the canonical JSON form.

    Arrow structs carry every message field, so a null field that the role does not
    have means "absent"; `meta` and custom samplers stored as JSON text are parsed; a
    row's `media` go into their messages' content as parts, each at its marker (raises
    ThreadValidationError when the media and the markers do not match); contents that are
    lists of parts as a shard stores them (`marked_content`) are read back to their
    markers first.
    """
    data = dict(data)
    stored = MEDIA_COLUMN in data and _is_media_column(data[MEDIA_COLUMN])
    media = data.pop(MEDIA_COLUMN) if stored else None
    messages = data.get("messages")
    if isinstance(messages, list):
        # a shard's row may hold its content as a list of parts (DESIGN §7), with or
        # without its `media` column: read back to markers (other content is kept as is)
        data["messages"] = [_marked(without_foreign_nulls(m)) for m in messages]
    if media:
        data["messages"] = _with_media(data.get("messages"), media)
    settings = data.get("settings")
    if isinstance(settings, dict) and isinstance(settings.get("formats"), list):
        data["settings"] = {
            **settings,
            "formats": [_format_from_arrow(f) for f in settings["formats"]],
        }
    if isinstance(data.get("meta"), str):
        data["meta"] = _json_object_or_text(data["meta"])
    return data


def marked_content(content: object) -> object:
    """A stored message's content as the model holds it: a list of parts as a shard with
    media stores it (`PART_ARROW_TYPE`: every part exactly `type` and `text`) becomes its
    text with a U+FFFC marker for each media part; any other content is returned as is."""
    if not isinstance(content, list) or not all(
        isinstance(part, dict) and set(part) == {"type", "text"} for part in content
    ):
        return content
    return "".join(
        (part["text"] or "") if part["type"] == "text" else MEDIA_MARKER for part in content
    )


def _marked(message: Any) -> Any:
    """A message whose content is a shard's list of parts, with its content marked."""
    if isinstance(message, dict) and isinstance(message.get("content"), list):
        return {**message, "content": marked_content(message["content"])}
    return message


def _is_media_column(value: Any) -> bool:
    """Whether a thread dict's `media` is the Arrow column's (null, or rows with a message
    index and a kind); a JSON thread's field of another shape is left for its reader."""
    return value is None or (
        isinstance(value, list)
        and all(isinstance(row, dict) and "message" in row and "kind" in row for row in value)
    )


def _with_media(messages: Any, media: list[Any]) -> list[Any]:
    """The messages with each row of a `media` column in its message's content parts."""
    if not isinstance(messages, list):
        raise ThreadValidationError([FieldError("media", "media without messages", "value")])
    placed: dict[int, list[dict[str, Any]]] = {}
    errors: list[FieldError] = []
    for number, row in enumerate(media):
        index = row.get("message") if isinstance(row, dict) else None
        if not isinstance(index, int) or not 0 <= index < len(messages):
            errors.append(
                FieldError(f"media[{number}].message", f"no message {index!r} to be in", "value")
            )
            continue
        placed.setdefault(index, []).append(row)
    out = list(messages)
    for index, rows in placed.items():
        message = out[index]
        content = message.get("content") if isinstance(message, dict) else None
        where = f"messages[{index}].content"
        if not isinstance(content, str) or content.count(MEDIA_MARKER) != len(rows):
            found = content.count(MEDIA_MARKER) if isinstance(content, str) else 0
            errors.append(
                FieldError(
                    where, f"holds {found} media marker(s) (U+FFFC) for {len(rows)} media", "value"
                )
            )
            continue
        pieces = content.split(MEDIA_MARKER)
        parts: list[dict[str, Any]] = []
        for piece, row in zip(pieces[:-1], rows, strict=True):
            if piece:
                parts.append({"type": "text", "text": piece})
            parts.append(_media_part(row))
        if pieces[-1]:
            parts.append({"type": "text", "text": pieces[-1]})
        out[index] = {**message, "content": parts}
    if errors:
        raise ThreadValidationError(errors)
    return out


def _media_part(row: dict[str, Any]) -> dict[str, Any]:
    """A `media` column row as its JSON content part (nulls are absent)."""
    part: dict[str, Any] = {"type": row.get("kind")}
    for key in (*MEDIA_SOURCES, FRAMES, "mime"):
        if row.get(key) is not None:
            part[key] = row[key]
    if isinstance(part.get(FRAMES), list):
        part[FRAMES] = [
            {k: v for k, v in frame.items() if v is not None} if isinstance(frame, dict) else frame
            for frame in part[FRAMES]
        ]
    return part


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
    """Threads from a table in THREAD_ARROW_SCHEMA, with or without its `media` column
    (the inverse of threads_to_arrow); raises ThreadValidationError."""
    return [Thread.from_dict(normalize_thread_dict(row)) for row in table.to_pylist()]
