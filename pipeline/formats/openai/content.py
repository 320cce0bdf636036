"""Message content (a string or a list of content parts) as ordered pieces: text (with
LLaMA-Factory media tags dropped or placeholdered), reasoning parts, `tool_call` parts,
and media parts dropped or placeholdered with where they pointed remembered."""

from __future__ import annotations

from typing import Any

import orjson

from pipeline.formats.builder import ThreadBuilder, json_kind
from pipeline.formats.media_tags import MediaTags
from pipeline.formats.openai.calls import CallReader
from pipeline.quarantine import RecordRejected

TEXT_PARTS = frozenset({"text", "input_text", "output_text"})
MEDIA_PARTS = {
    "image_url": "image",
    "input_image": "image",
    "image": "image",
    "input_audio": "audio",
    "audio": "audio",
    "audio_url": "audio",
    "video_url": "video",
    "video": "video",
    "file": "file",
    "input_file": "file",
}
"""Content part type -> the media kind it is dropped or placeholdered as."""


def _media_ref(part: dict[str, Any]) -> str | None:
    """Where a media part points (URL, path or file id); None for inline data."""
    for key in ("image_url", "video_url", "audio_url", "file", "value", "url"):
        ref = part.get(key)
        if isinstance(ref, dict):
            ref = ref.get("url", ref.get("file_id", ref.get("filename")))
        if isinstance(ref, str) and ref and not ref.startswith("data:"):
            return ref
    return None


class ContentReader:
    """Reads the content of one thread's messages, one message at a time (`start`)."""

    def __init__(self, builder: ThreadBuilder, value: dict[str, Any], calls: CallReader):
        self.b = builder
        self.calls = calls
        self.media_tags = MediaTags(builder, value)
        self.role = ""
        """The role of the message being read."""
        self.media_refs: list[str] = []
        """Where the media parts of the current message pointed (kept in message meta)."""

    def start(self, role: str) -> None:
        """Begin reading a message of `role`, with no media references yet."""
        self.role, self.media_refs = role, []

    def plain_text(self, content: Any, where: str, role: str) -> str:
        """Content of a non-assistant message as one text."""
        texts = []
        for piece in self.pieces(content, where):
            if piece[0] == "reasoning":
                self.b.note(f"{where} has a reasoning part in a {role} message; kept as text")
            texts.append(piece[1])
        return "\n\n".join(texts)

    def pieces(self, content: Any, where: str) -> list[tuple[Any, ...]]:
        """Content as ordered pieces: ("text", str), ("reasoning", str), ("call", ...);
        neighbouring text parts are joined, media parts dropped or placeholdered."""
        if content is None:
            return []
        if not isinstance(content, list):
            return [("text", self.media_tags.replace(self.b.text(content, where)))]
        pieces: list[tuple[Any, ...]] = []
        texts: list[str] = []
        for index, part in enumerate(content):
            piece = self._part(part, f"{where}[{index}]")
            if piece is None:
                continue
            if piece[0] == "text":
                texts.append(piece[1])
                continue
            if texts:
                pieces.append(("text", "\n\n".join(texts)))
                texts = []
            pieces.append(piece)
        if texts:
            pieces.append(("text", "\n\n".join(texts)))
        return pieces

    def _part(self, part: Any, where: str) -> tuple[Any, ...] | None:
        if not isinstance(part, dict):
            return ("text", self.b.text([part], where))
        kind = part.get("type")
        if kind is not None and not isinstance(kind, str):
            raise RecordRejected(
                "missing_field",
                f"{where} has a content part whose type is a JSON {json_kind(kind)}, not a string",
            )
        text = part.get("text", part.get("value"))
        if kind in TEXT_PARTS or (kind is None and "text" in part):
            return ("text", self.media_tags.replace(self.b.text(text, where)))
        if kind == "refusal":
            return ("text", self.b.text(part.get("refusal"), where))
        if kind in ("reasoning", "thinking"):
            return ("reasoning", self.b.text(text if text is not None else part.get(kind), where))
        if kind == "tool_call":
            if self.role != "assistant":
                raise RecordRejected(
                    "invalid_thread",
                    f"{where} is a tool_call part in a {self.role} message "
                    "(only assistant messages call tools)",
                )
            return self.calls.call(where, _call_value(where, text))
        ref = _media_ref(part)
        if ref is not None:
            self.media_refs.append(ref)
        media = self.b.media(MEDIA_PARTS.get(str(kind), str(kind or "unknown")))
        return None if media is None else ("text", media)


def _call_value(where: str, value: Any) -> Any:
    """A `tool_call` part's value: the call object, parsed when it is JSON text."""
    if not isinstance(value, str):
        return value
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError as err:
        raise RecordRejected(
            "invalid_tool_call", f"{where} (tool_call) is not a JSON call object ({err})"
        ) from None
