"""The typed thread (DESIGN §3): Thread, Message, Format and SystemSettings, their JSON
forms, and the stable ids of threads a source gives no id."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from pipeline.mms.validation import (
    DEFAULT_FORMAT,
    MESSAGE_FIELDS,
    ThreadValidationError,
    is_weight,
    validate_thread_dict,
    without_foreign_nulls,
)

Role = Literal["platform", "developer", "user", "assistant", "context"]


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
        """Build from an already validated dict; a bare string stands for `Format(name)`.

        >>> SystemSettings.from_dict({"formats": "markdown"}).to_dict()
        {'formats': [{'name': 'markdown', 'halt_on_start': False, 'halt_on_completion': False, 'sampler': None}]}
        """
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
        then `weight` when it is not the default.

        >>> Message.user("Hi").to_dict()
        {'role': 'user', 'content': 'Hi'}
        >>> Message.assistant("Hello!", weight=0).to_dict()
        {'role': 'assistant', 'format': 'markdown', 'content': 'Hello!', 'end_turn': True, 'weight': 0.0}
        >>> Message.context("12 °C", name="get_weather").to_dict()
        {'role': 'context', 'name': 'get_weather', 'content': '12 °C'}
        """
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
        """Build from an already validated dict, filling the assistant's default format.

        >>> Message.from_dict({"role": "assistant", "content": "Hi", "end_turn": True})
        Message(role='assistant', content='Hi', format='markdown', end_turn=True, name=None, weight=None)
        """
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
        """Validate a parsed JSON value and build the thread; raises ThreadValidationError.

        >>> thread = Thread.from_dict({"id": "t1", "messages": [
        ...     {"role": "user", "content": "Hi"},
        ...     {"role": "assistant", "content": "Hello!", "end_turn": True},
        ... ]})
        >>> [m.role for m in thread.messages], thread.messages[1].format
        (['user', 'assistant'], 'markdown')
        >>> Thread.from_dict({"id": "t2", "messages": [{"role": "robot", "content": "Hi"}]})
        Traceback (most recent call last):
        ...
        pipeline.mms.validation.ThreadValidationError: ...
        """
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
        """One line of MMS JSONL (no trailing newline): compact UTF-8, fixed field order.

        >>> Thread("t1", [Message.user("Hi"), Message.assistant("Hello!")]).to_json()
        b'{"id":"t1","messages":[{"role":"user","content":"Hi"},{"role":"assistant","format":"markdown","content":"Hello!","end_turn":true}],"settings":null,"meta":{}}'
        """
        return orjson.dumps(self.to_dict())

    def to_json_line(self) -> bytes:
        """`to_json()` with the newline that ends a JSONL line."""
        return orjson.dumps(self.to_dict(), option=orjson.OPT_APPEND_NEWLINE)

    def validate(self) -> None:
        """Check a thread built in Python (not via from_dict); raises ThreadValidationError."""
        data = self.to_dict()
        data["messages"] = [without_foreign_nulls(m.all_fields()) for m in self.messages]
        errors = validate_thread_dict(data)
        if errors:
            raise ThreadValidationError(errors)


def canonical_weight(weight: Any) -> Any:
    """A training weight as threads keep it: None for the default 1, else a float (a
    value that is no weight is left for validation to name).

    >>> canonical_weight(1), canonical_weight(0), canonical_weight(0.5), canonical_weight("x")
    (None, 0.0, 0.5, 'x')
    """
    if not is_weight(weight):
        return weight
    return None if weight == 1 else float(weight)


def stable_thread_id(source: str, locator: str) -> str:
    """The id of a thread whose source gave none: a hash of where it came from.

    >>> stable_thread_id("chat.jsonl", "chat.jsonl:1")
    '66019881bece270e'
    """
    digest = hashlib.sha256(f"{source}\n{locator}".encode()).hexdigest()
    return digest[:16]
