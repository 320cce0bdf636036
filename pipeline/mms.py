"""The canonical MMS thread (DESIGN §3): typed messages, validation that names the exact
field at fault, and the JSON and Arrow forms every stage reads and writes."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

import orjson
import pyarrow as pa

Role = Literal["platform", "developer", "user", "assistant", "context"]
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


# --------------------------------------------------------------------------- errors


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


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _show(value: Any, limit: int = 40) -> str:
    """A short JSON rendering of a value for error messages."""
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _type_error(path: str, expected: str, value: Any) -> FieldError:
    return FieldError(path, f"expected {expected}, got {_show(value)}", "type")


# --------------------------------------------------------------------------- validation


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


# --------------------------------------------------------------------------- model


@dataclass(frozen=True, slots=True)
class Format:
    """A response format named in system settings, with its halting and sampler settings."""

    name: str
    halt_on_start: bool = False
    halt_on_completion: bool = False
    sampler: str | dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "halt_on_start": self.halt_on_start,
            "halt_on_completion": self.halt_on_completion,
            "sampler": self.sampler,
        }


@dataclass(frozen=True, slots=True)
class SystemSettings:
    """The spec's SystemSettings: which formats the assistant may write and how."""

    formats: tuple[Format, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"formats": [f.to_dict() for f in self.formats]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SystemSettings:
        """Build from an already validated dict; a bare string stands for `Format(name)`."""
        formats = data["formats"]
        if isinstance(formats, str):
            formats = [formats]
        return cls(tuple(Format(f) if isinstance(f, str) else Format(**f) for f in formats))


@dataclass(frozen=True, slots=True)
class Message:
    """One message; `format`/`end_turn`/`weight` exist only on assistant messages, `name`
    only on context. `weight` is the source's training weight (None: the default, 1); a
    weight of 0 means "never train this message"."""

    role: Role
    content: str
    format: str | None = None
    end_turn: bool | None = None
    name: str | None = None
    weight: float | None = None

    @classmethod
    def platform(cls, content: str) -> Message:
        return cls("platform", content)

    @classmethod
    def developer(cls, content: str) -> Message:
        return cls("developer", content)

    @classmethod
    def user(cls, content: str) -> Message:
        return cls("user", content)

    @classmethod
    def assistant(
        cls,
        content: str,
        format: str = DEFAULT_FORMAT,
        end_turn: bool = True,
        weight: float | None = None,
    ) -> Message:
        return cls(
            "assistant", content, format=format, end_turn=end_turn, weight=canonical_weight(weight)
        )

    @property
    def trained(self) -> bool:
        """False for an assistant message its source weighted 0 (never to be learned)."""
        return self.weight is None or self.weight > 0

    @classmethod
    def context(cls, content: str, name: str | None = None) -> Message:
        return cls("context", content, name=name)

    def all_fields(self) -> dict[str, Any]:
        """Every field, set or not (the Arrow struct's view of a message)."""
        return {key: getattr(self, key) for key in MESSAGE_FIELDS}

    def to_dict(self) -> dict[str, Any]:
        """The JSON form, fields in the spec's order (role, name, format, content, end_turn),
        then `weight` when it is not the default."""
        if self.role == "assistant":
            data: dict[str, Any] = {
                "role": "assistant",
                "format": self.format,
                "content": self.content,
                "end_turn": self.end_turn,
            }
            if self.weight is not None:
                data["weight"] = self.weight
            return data
        if self.role == "context":
            return {"role": "context", "name": self.name, "content": self.content}
        return {"role": self.role, "content": self.content}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Message:
        """Build from an already validated dict, filling the assistant's default format."""
        role = data["role"]
        if role == "assistant":
            return cls.assistant(
                data["content"],
                format=data.get("format", DEFAULT_FORMAT),
                end_turn=data["end_turn"],
                weight=data.get("weight"),
            )
        if role == "context":
            return cls("context", data["content"], name=data.get("name"))
        return cls(role, data["content"])


@dataclass(slots=True)
class Thread:
    """A conversation: ordered messages, optional system settings, and lineage in `meta`."""

    id: str
    messages: list[Message]
    settings: SystemSettings | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Any) -> Thread:
        """Validate a parsed JSON value and build the thread; raises ThreadValidationError."""
        errors = validate_thread_dict(data)
        if errors:
            raise ThreadValidationError(errors)
        settings = data.get("settings")
        return cls(
            id=data["id"],
            messages=[Message.from_dict(m) for m in data["messages"]],
            settings=SystemSettings.from_dict(settings) if settings is not None else None,
            meta=dict(data.get("meta") or {}),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "messages": [m.to_dict() for m in self.messages],
            "settings": self.settings.to_dict() if self.settings is not None else None,
            "meta": self.meta,
        }

    def to_json(self) -> bytes:
        """One line of MMS JSONL (no trailing newline): compact UTF-8, fixed field order."""
        return orjson.dumps(self.to_dict())

    def to_json_line(self) -> bytes:
        """`to_json()` with the newline that ends a JSONL line."""
        return orjson.dumps(self.to_dict(), option=orjson.OPT_APPEND_NEWLINE)

    def validate(self) -> None:
        """Check a thread built in Python (not via from_dict); raises ThreadValidationError."""
        data = self.to_dict()
        data["messages"] = [_without_foreign_nulls(m.all_fields()) for m in self.messages]
        errors = validate_thread_dict(data)
        if errors:
            raise ThreadValidationError(errors)


def canonical_weight(weight: Any) -> Any:
    """A training weight as threads keep it: None for the default 1, else a float (a
    value that is no weight is left for validation to name)."""
    if not is_weight(weight):
        return weight
    return None if weight == 1 else float(weight)


def stable_thread_id(source: str, locator: str) -> str:
    """The id of a thread whose source gave none: a hash of where it came from."""
    digest = hashlib.sha256(f"{source}\n{locator}".encode()).hexdigest()
    return digest[:16]


# --------------------------------------------------------------------------- Arrow

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
        data["messages"] = [_without_foreign_nulls(m) for m in messages]
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


def _without_foreign_nulls(message: Any) -> Any:
    if not isinstance(message, dict) or None not in message.values():
        return message
    allowed = ROLE_FIELDS.get(message.get("role"), MESSAGE_FIELDS)
    return {k: v for k, v in message.items() if k in allowed or v is not None}


def _format_from_arrow(entry: Any) -> Any:
    if isinstance(entry, dict) and isinstance(entry.get("sampler"), str):
        sampler = entry["sampler"]
        if sampler.startswith("{"):
            return {**entry, "sampler": _json_object_or_text(sampler)}
    return entry


def threads_from_arrow(table: pa.Table) -> list[Thread]:
    """Threads from a table in THREAD_ARROW_SCHEMA (the inverse of threads_to_arrow)."""
    return [Thread.from_dict(normalize_thread_dict(row)) for row in table.to_pylist()]
