"""The typed thread (DESIGN §3): Thread, Message (with its Media), Format and
SystemSettings, their JSON forms, and the stable ids of threads a source gives no id."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from pipeline.mms.validation import (
    DEFAULT_FORMAT,
    FRAMES,
    MEDIA_MARKER,
    MEDIA_SOURCES,
    MESSAGE_FIELDS,
    FieldError,
    ThreadValidationError,
    is_weight,
    validate_thread_dict,
    without_foreign_nulls,
)

Role = Literal["platform", "developer", "user", "assistant", "context"]
MediaKind = Literal["image", "audio", "video"]


@dataclass(frozen=True, slots=True, repr=False)
class Media:
    """An image, audio or video in a message: exactly one of `path` (as the source wrote
    it, relative to the folder of its input file), `url`, `data` (base64) or, for a video
    given as its frame images, `frames` (each an image Media, in order); and the MIME type
    when the source states it. Never read or fetched by the model."""

    kind: MediaKind
    path: str | None = None
    url: str | None = None
    data: str | None = None
    mime: str | None = None
    frames: tuple[Media, ...] = ()

    def __repr__(self) -> str:
        """The fields, `frames` only when it holds some (the form before frames existed)."""
        shown = ", ".join(
            f"{key}={getattr(self, key)!r}" for key in ("kind", *MEDIA_SOURCES, "mime")
        )
        return f"Media({shown}{f', frames={self.frames!r}' if self.frames else ''})"

    @classmethod
    def video_frames(cls, frames: Iterable[Media], mime: str | None = None) -> Media:
        """A video given as its frame images, in order (each frame an image Media)."""
        return cls("video", mime=mime, frames=tuple(frames))

    def to_part(self) -> dict[str, Any]:
        """The JSON content part: its type, its source, its mime when known.

        >>> Media("image", path="a.jpg").to_part()
        {'type': 'image', 'path': 'a.jpg'}
        >>> Media("audio", data="UklGRg==", mime="audio/wav").to_part()
        {'type': 'audio', 'data': 'UklGRg==', 'mime': 'audio/wav'}
        >>> Media.video_frames([Media("image", path="f1.jpg"), Media("image", path="f2.jpg")]).to_part()
        {'type': 'video', 'frames': [{'path': 'f1.jpg'}, {'path': 'f2.jpg'}]}
        """
        part: dict[str, Any] = {"type": self.kind}
        for key in MEDIA_SOURCES:
            value = getattr(self, key)
            if value is not None:
                part[key] = value
        if self.frames:
            part[FRAMES] = [frame.frame_part() for frame in self.frames]
        if self.mime is not None:
            part["mime"] = self.mime
        return part

    def frame_part(self) -> dict[str, Any]:
        """A frame's JSON form: its part without the type (every frame is an image)."""
        part = self.to_part()
        del part["type"]
        return part

    @classmethod
    def from_part(cls, part: Mapping[str, Any]) -> Media:
        """Build from an already validated media part."""
        frames = part.get(FRAMES) or ()
        return cls(
            part["type"],
            path=part.get("path"),
            url=part.get("url"),
            data=part.get("data"),
            mime=part.get("mime"),
            frames=tuple(cls.from_part({"type": "image", **frame}) for frame in frames),
        )


def content_parts(content: str, media: Sequence[Media]) -> list[dict[str, Any]]:
    r"""The JSON content list of a message with media: its text between the markers and a
    media part at each marker, in order (no empty text parts). Raises ValueError when the
    markers and the media differ in number (`Thread.validate` names such a message).

    >>> content_parts("\ufffc\nWho is this?", [Media("image", path="1.jpg")])
    [{'type': 'image', 'path': '1.jpg'}, {'type': 'text', 'text': '\nWho is this?'}]
    """
    pieces = content.split(MEDIA_MARKER)
    if len(pieces) != len(media) + 1:
        raise ValueError(
            f"content holds {len(pieces) - 1} media marker(s) (U+FFFC) for {len(media)} media"
        )
    parts: list[dict[str, Any]] = []
    for piece, item in zip(pieces, media, strict=False):
        if piece:
            parts.append({"type": "text", "text": piece})
        parts.append(item.to_part())
    if pieces[-1]:
        parts.append({"type": "text", "text": pieces[-1]})
    return parts


def content_from_parts(parts: Iterable[Mapping[str, Any]]) -> tuple[str, tuple[Media, ...]]:
    r"""The content (text, a marker where each media part stands) and media of an already
    validated content list; neighbouring text parts join as written.

    >>> content, media = content_from_parts(
    ...     [{"type": "text", "text": "Look: "}, {"type": "video", "url": "https://x/v.mp4"}]
    ... )
    >>> content == "Look: \ufffc", media
    (True, (Media(kind='video', path=None, url='https://x/v.mp4', data=None, mime=None),))
    """
    texts: list[str] = []
    media: list[Media] = []
    for part in parts:
        if part["type"] == "text":
            texts.append(part["text"])
        else:
            texts.append(MEDIA_MARKER)
            media.append(Media.from_part(part))
    return "".join(texts), tuple(media)


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
    weight of 0 means "never train this message". `media` (not on platform messages) are
    the message's images, audio and video, in order: the k-th U+FFFC in `content` is
    where `media[k]` stands (DESIGN §3)."""

    role: Role
    content: str
    format: str | None = None
    end_turn: bool | None = None
    name: str | None = None
    weight: float | None = None
    media: tuple[Media, ...] = ()

    @classmethod
    def platform(cls, content: str) -> Message:
        return cls("platform", content)

    @classmethod
    def developer(cls, content: str, media: Iterable[Media] = ()) -> Message:
        return cls("developer", content, media=tuple(media))

    @classmethod
    def user(cls, content: str, media: Iterable[Media] = ()) -> Message:
        """A user message; `media` stand at the U+FFFC markers of `content`, in order.

        >>> Message.user("\ufffcWho is this?", [Media("image", path="1.jpg")]).to_dict()
        {'role': 'user', 'content': [{'type': 'image', 'path': '1.jpg'}, {'type': 'text', 'text': 'Who is this?'}]}
        """
        return cls("user", content, media=tuple(media))

    @classmethod
    def assistant(
        cls,
        content: str,
        format: str = DEFAULT_FORMAT,
        end_turn: bool = True,
        weight: float | None = None,
        media: Iterable[Media] = (),
    ) -> Message:
        return cls(
            "assistant",
            content,
            format=format,
            end_turn=end_turn,
            weight=canonical_weight(weight),
            media=tuple(media),
        )

    @property
    def trained(self) -> bool:
        """False for an assistant message its source weighted 0 (never to be learned)."""
        return self.weight is None or self.weight > 0

    @classmethod
    def context(cls, content: str, name: str | None = None, media: Iterable[Media] = ()) -> Message:
        return cls("context", content, name=name, media=tuple(media))

    def all_fields(self) -> dict[str, Any]:
        """Every field but `media`, set or not (the Arrow struct's view of a message; its
        media are the thread's `media` column)."""
        return {key: getattr(self, key) for key in MESSAGE_FIELDS}

    def json_content(self) -> str | list[dict[str, Any]]:
        """`content` as the JSON form has it: the string, or with media the list of parts."""
        return content_parts(self.content, self.media) if self.media else self.content

    def marker_errors(self, path: str) -> list[FieldError]:
        """The error of a message with media whose content holds another number of U+FFFC
        markers than it has media (none for a message without media)."""
        markers = self.content.count(MEDIA_MARKER)
        if not self.media or markers == len(self.media):
            return []
        message = f"holds {markers} media marker(s) (U+FFFC) for {len(self.media)} media"
        return [FieldError(f"{path}.content", message, "value")]

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
        content = self.json_content()
        if self.role == "assistant":
            data: dict[str, Any] = {
                "role": "assistant",
                "format": self.format,
                "content": content,
                "end_turn": self.end_turn,
            }
            if self.weight is not None:
                data["weight"] = self.weight
            return data
        if self.role == "context":
            return {"role": "context", "name": self.name, "content": content}
        return {"role": self.role, "content": content}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Message:
        """Build from an already validated dict, filling the assistant's default format;
        a content list becomes the text with its markers and the media.

        >>> Message.from_dict({"role": "assistant", "content": "Hi", "end_turn": True})
        Message(role='assistant', content='Hi', format='markdown', end_turn=True, name=None, weight=None, media=())
        """
        role = data["role"]
        content = data["content"]
        media: tuple[Media, ...] = ()
        if isinstance(content, list):
            content, media = content_from_parts(content)
        if role == "assistant":
            return cls.assistant(
                content,
                format=data.get("format", DEFAULT_FORMAT),
                end_turn=data["end_turn"],
                weight=data.get("weight"),
                media=media,
            )
        if role == "context":
            return cls("context", content, name=data.get("name"), media=media)
        return cls(role, content, media=media)


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
        data: dict[str, Any] = {
            "id": self.id,
            "settings": self.settings.to_dict() if self.settings is not None else None,
            "meta": self.meta,
        }
        markers: list[FieldError] = []
        messages = []
        for index, message in enumerate(self.messages):
            fields = message.all_fields()
            found = message.marker_errors(f"messages[{index}]")
            if not found:
                fields["content"] = message.json_content()
            markers.extend(found)
            messages.append(without_foreign_nulls(fields))
        data["messages"] = messages
        errors = validate_thread_dict(data) + markers
        if errors:
            raise ThreadValidationError(errors)

    @property
    def has_media(self) -> bool:
        """Whether any message holds media."""
        return any(m.media for m in self.messages)


def shown_content(message: Message) -> str:
    r"""A message's content for a reader (reports, `mms inspect`): its text, each media as
    a label naming its kind and where it is (inline data by its size).

    >>> shown_content(Message.user("￼Who?", [Media("image", path="1.jpg")]))
    '[image: 1.jpg]Who?'
    >>> shown_content(Message.user("￼", [Media("audio", data="UklGRg==", mime="audio/wav")]))
    '[audio: 8 characters of base64, audio/wav]'
    >>> frames = [Media("image", path=f"f/{n}.jpg") for n in range(3)]
    >>> shown_content(Message.user("￼", [Media.video_frames(frames)]))
    '[video: 3 frames, f/0.jpg ... f/2.jpg]'
    """
    if not message.media:
        return message.content
    pieces = message.content.split(MEDIA_MARKER)
    labels = [_media_label(media) for media in message.media]
    if len(pieces) != len(labels) + 1:
        return message.content
    return "".join(piece + label for piece, label in zip(pieces, [*labels, ""], strict=True))


def _media_label(media: Media) -> str:
    if media.frames:
        first, last = (_where(frame) for frame in (media.frames[0], media.frames[-1]))
        shown = first if len(media.frames) == 1 else f"{first} ... {last}"
        where = f"{len(media.frames)} frame{'s' if len(media.frames) > 1 else ''}, {shown}"
    else:
        where = _where(media)
    return f"[{media.kind}: {where}{f', {media.mime}' if media.mime else ''}]"


def _where(media: Media) -> str:
    return media.path or media.url or f"{len(media.data or '')} characters of base64"


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
