"""What makes a dict an MMS thread (DESIGN §3): the field names per role, the content parts
of a message with media, and validation that names every field at fault (the linter maps
the kinds to MMS101/MMS102)."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import orjson

ROLES: tuple[str, ...] = ("platform", "developer", "user", "assistant", "context")
SAMPLERS: tuple[str, ...] = ("json", "jsonl")
DEFAULT_FORMAT = "markdown"

THREAD_FIELDS = ("id", "messages", "settings", "meta")
MESSAGE_FIELDS = ("role", "name", "format", "content", "end_turn", "weight")
FORMAT_FIELDS = ("name", "halt_on_start", "halt_on_completion", "sampler")
ROLE_FIELDS: dict[str, tuple[str, ...]] = {
    "platform": ("role", "content"),
    "developer": ("role", "content"),
    "user": ("role", "content"),
    "assistant": ("role", "format", "content", "end_turn", "weight"),
    "context": ("role", "name", "content"),
}
MEDIA_KINDS: tuple[str, ...] = ("image", "audio", "video")
MEDIA_SOURCES: tuple[str, ...] = ("path", "url", "data")
"""Where a media part's bytes are: a path as the source wrote it, a URL, or base64 data."""
FRAMES = "frames"
"""A video given as its frame images, in order (DESIGN §3): `{"type": "video", "frames":
[FRAME, ...]}`, each FRAME an image's source `{path | url | data, mime}`; in place of the
video's own path, url or data."""
MEDIA_PART_FIELDS: tuple[str, ...] = ("type", *MEDIA_SOURCES, FRAMES, "mime")
FRAME_FIELDS: tuple[str, ...] = (*MEDIA_SOURCES, "mime")
TEXT_PART_FIELDS: tuple[str, ...] = ("type", "text")
MEDIA_ROLES: tuple[str, ...] = ("developer", "user", "assistant", "context")
"""The roles whose content may be a list of parts with media (not platform)."""
MEDIA_MARKER = "\ufffc"
"""U+FFFC OBJECT REPLACEMENT CHARACTER: in a message with media, the k-th one in `content`
is where its k-th media part stands (DESIGN §3)."""


class FieldError(NamedTuple):
    """One problem in a thread: where (`messages[3].end_turn`), what, and its kind.

    Kinds: `unknown_role`, `not_allowed` (field on the wrong role or unknown field),
    `missing`, `type`, `value`. The linter maps them to MMS101/MMS102.
    """

    path: str
    message: str
    kind: str

    def __str__(self) -> str:
        return f"{self.path or 'thread'}: {self.message}"


class ThreadValidationError(ValueError):
    """Raised when a dict is not a valid MMS thread; `errors` lists every problem found."""

    def __init__(self, errors: list[FieldError]):
        self.errors = errors
        super().__init__("; ".join(str(e) for e in errors))


def _show(value: Any, limit: int = 40) -> str:
    """A short JSON rendering of a value for error messages."""
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _type_error(path: str, expected: str, value: Any) -> FieldError:
    return FieldError(path, f"expected {expected}, got {_show(value)}", "type")


def validate_thread_dict(data: Any) -> list[FieldError]:
    """Every problem that keeps `data` (a parsed JSON value) from being a canonical thread."""
    if not isinstance(data, dict):
        return [_type_error("", "object", data)]
    errors: list[FieldError] = [
        FieldError(key, "unknown field", "not_allowed") for key in data if key not in THREAD_FIELDS
    ]
    if "id" not in data:
        errors.append(FieldError("id", "required field is missing", "missing"))
    elif not isinstance(data["id"], str):
        errors.append(_type_error("id", "string", data["id"]))
    elif not data["id"]:
        errors.append(FieldError("id", "must not be empty", "value"))

    messages = data.get("messages")
    if "messages" not in data:
        errors.append(FieldError("messages", "required field is missing", "missing"))
    elif not isinstance(messages, list):
        errors.append(_type_error("messages", "array", messages))
    elif not messages:
        errors.append(FieldError("messages", "must contain at least one message", "value"))
    else:
        for index, message in enumerate(messages):
            errors.extend(_message_errors(message, f"messages[{index}]"))

    settings = data.get("settings")
    if settings is not None:
        errors.extend(_settings_errors(settings, "settings"))
    if "meta" in data and not isinstance(data["meta"], dict):
        errors.append(_type_error("meta", "object", data["meta"]))
    return errors


def _message_errors(message: Any, path: str) -> list[FieldError]:
    if not isinstance(message, dict):
        return [_type_error(path, "object", message)]
    role = message.get("role")
    if "role" not in message:
        return [FieldError(f"{path}.role", "required field is missing", "missing")]
    if not isinstance(role, str):
        return [_type_error(f"{path}.role", "string", role)]
    if role not in ROLE_FIELDS:
        expected = ", ".join(ROLES)
        return [
            FieldError(
                f"{path}.role",
                f"unknown role {_show(role)} (expected one of {expected})",
                "unknown_role",
            )
        ]

    allowed = ROLE_FIELDS[role]
    errors: list[FieldError] = []
    for key in message:
        if key not in allowed:
            why = f"not allowed on a {role} message" if key in MESSAGE_FIELDS else "unknown field"
            errors.append(FieldError(f"{path}.{key}", why, "not_allowed"))
    if "content" not in message:
        errors.append(FieldError(f"{path}.content", "required field is missing", "missing"))
    elif isinstance(message["content"], list) and role in MEDIA_ROLES:
        errors.extend(_parts_errors(message["content"], f"{path}.content"))
    elif not isinstance(message["content"], str):
        errors.append(_type_error(f"{path}.content", "string", message["content"]))

    if role == "assistant":
        if "format" in message:
            errors.extend(_name_errors(message["format"], f"{path}.format"))
        if "end_turn" not in message:
            errors.append(FieldError(f"{path}.end_turn", "required field is missing", "missing"))
        elif not isinstance(message["end_turn"], bool):
            errors.append(_type_error(f"{path}.end_turn", "bool", message["end_turn"]))
        weight = message.get("weight")
        if weight is not None and not is_weight(weight):
            errors.append(_type_error(f"{path}.weight", "a number >= 0 or null", weight))
    elif role == "context":
        name = message.get("name")
        if name is not None:
            errors.extend(_name_errors(name, f"{path}.name", expected="string or null"))
    return errors


def _parts_errors(parts: list[Any], path: str) -> list[FieldError]:
    """The problems of a content list: text and media parts, at least one media part."""
    errors: list[FieldError] = []
    has_media = False
    for index, part in enumerate(parts):
        where = f"{path}[{index}]"
        if not isinstance(part, dict):
            errors.append(_type_error(where, "content part object", part))
            continue
        kind = part.get("type")
        if "type" not in part:
            errors.append(FieldError(f"{where}.type", "required field is missing", "missing"))
        elif kind == "text":
            errors.extend(_text_part_errors(part, where))
        elif isinstance(kind, str) and kind in MEDIA_KINDS:
            has_media = True
            errors.extend(_media_part_errors(part, where))
        else:
            expected = ", ".join(("text", *MEDIA_KINDS))
            errors.append(
                FieldError(
                    f"{where}.type",
                    f"unknown part type {_show(kind)} (expected {expected})",
                    "value",
                )
            )
    if not has_media:
        errors.append(
            FieldError(
                path,
                "a list of content parts holds at least one media part (text alone is a string)",
                "value",
            )
        )
    return errors


def _unknown_keys(part: dict[str, Any], allowed: tuple[str, ...], where: str) -> list[FieldError]:
    return [
        FieldError(f"{where}.{key}", "unknown field", "not_allowed")
        for key in part
        if key not in allowed
    ]


def _text_part_errors(part: dict[str, Any], where: str) -> list[FieldError]:
    errors = _unknown_keys(part, TEXT_PART_FIELDS, where)
    if "text" not in part:
        errors.append(FieldError(f"{where}.text", "required field is missing", "missing"))
    elif not isinstance(part["text"], str):
        errors.append(_type_error(f"{where}.text", "string", part["text"]))
    elif MEDIA_MARKER in part["text"]:
        errors.append(
            FieldError(
                f"{where}.text",
                "holds U+FFFC, which marks where media stand in a message with media",
                "value",
            )
        )
    return errors


def _media_part_errors(part: dict[str, Any], where: str) -> list[FieldError]:
    errors = _unknown_keys(part, MEDIA_PART_FIELDS, where)
    frames = FRAMES in part
    if frames and part.get("type") != "video":
        errors.append(FieldError(f"{where}.{FRAMES}", "only a video is given as frames", "value"))
    keys = (*MEDIA_SOURCES, FRAMES) if part.get("type") == "video" else MEDIA_SOURCES
    errors.extend(_source_errors(part, where, "a media part", keys))
    if frames:
        errors.extend(_frames_errors(part[FRAMES], f"{where}.{FRAMES}"))
    return errors


def _source_errors(
    part: dict[str, Any], where: str, what: str, keys: tuple[str, ...]
) -> list[FieldError]:
    """The problems of a media part's (or a frame's) source: exactly one of `keys`, a
    non-empty string (frames are checked apart), and its mime a string when given."""
    errors: list[FieldError] = []
    sources = [key for key in keys if key in part]
    if not sources:
        errors.append(FieldError(where, f"{what} needs one of {', '.join(keys)}", "missing"))
    elif len(sources) > 1:
        errors.append(
            FieldError(where, f"holds {' and '.join(sources)}: {what} has exactly one", "value")
        )
    for key in sources:
        if key != FRAMES:
            errors.extend(_name_errors(part[key], f"{where}.{key}"))
    mime = part.get("mime")
    if mime is not None:
        errors.extend(_name_errors(mime, f"{where}.mime", expected="string or null"))
    return errors


def _frames_errors(frames: Any, where: str) -> list[FieldError]:
    """The problems of a video's frames: a non-empty list of image sources."""
    if not isinstance(frames, list):
        return [_type_error(where, "array", frames)]
    if not frames:
        return [FieldError(where, "a video given as frames holds at least one", "value")]
    errors: list[FieldError] = []
    for index, frame in enumerate(frames):
        at = f"{where}[{index}]"
        if not isinstance(frame, dict):
            errors.append(_type_error(at, "frame object", frame))
            continue
        errors.extend(_unknown_keys(frame, FRAME_FIELDS, at))
        errors.extend(_source_errors(frame, at, "a frame", MEDIA_SOURCES))
    return errors


def is_weight(value: Any) -> bool:
    """Whether `value` is a training weight: a finite number >= 0 (not a bool)."""
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


def _name_errors(value: Any, path: str, expected: str = "string") -> list[FieldError]:
    if not isinstance(value, str):
        return [_type_error(path, expected, value)]
    if not value:
        return [FieldError(path, "must not be empty", "value")]
    return []


def _settings_errors(settings: Any, path: str) -> list[FieldError]:
    if not isinstance(settings, dict):
        return [_type_error(path, "object or null", settings)]
    errors = [
        FieldError(f"{path}.{key}", "unknown field", "not_allowed")
        for key in settings
        if key != "formats"
    ]
    if "formats" not in settings:
        errors.append(FieldError(f"{path}.formats", "required field is missing", "missing"))
        return errors
    formats = settings["formats"]
    if isinstance(formats, str):
        errors.extend(_name_errors(formats, f"{path}.formats"))
    elif isinstance(formats, list):
        for index, entry in enumerate(formats):
            errors.extend(_format_errors(entry, f"{path}.formats[{index}]"))
    else:
        errors.append(_type_error(f"{path}.formats", "string or array", formats))
    return errors


def _format_errors(entry: Any, path: str) -> list[FieldError]:
    if isinstance(entry, str):
        return _name_errors(entry, path)
    if not isinstance(entry, dict):
        return [_type_error(path, "string or object", entry)]
    errors = [
        FieldError(f"{path}.{key}", "unknown field", "not_allowed")
        for key in entry
        if key not in FORMAT_FIELDS
    ]
    if "name" not in entry:
        errors.append(FieldError(f"{path}.name", "required field is missing", "missing"))
    else:
        errors.extend(_name_errors(entry["name"], f"{path}.name"))
    for flag in ("halt_on_start", "halt_on_completion"):
        if flag in entry and not isinstance(entry[flag], bool):
            errors.append(_type_error(f"{path}.{flag}", "bool", entry[flag]))
    sampler = entry.get("sampler")
    if sampler is not None and not isinstance(sampler, dict) and sampler not in SAMPLERS:
        errors.append(_type_error(f"{path}.sampler", '"json", "jsonl", an object or null', sampler))
    return errors


def without_foreign_nulls(message: Any) -> Any:
    """A message dict without the null fields its role does not have (Arrow rows carry
    every field of every role)."""
    if not isinstance(message, dict) or None not in message.values():
        return message
    role = message.get("role")
    allowed = ROLE_FIELDS.get(role, MESSAGE_FIELDS) if isinstance(role, str) else MESSAGE_FIELDS
    return {k: v for k, v in message.items() if k in allowed or v is not None}
