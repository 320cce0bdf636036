"""Message content (a string or a list of content parts) as ordered pieces: text with its
media (LLaMA-Factory media tags and media parts kept, or dropped or placeholdered with
where they pointed remembered), reasoning parts and `tool_call` parts."""

from __future__ import annotations

import re
from typing import Any

import orjson

from pipeline.formats.builder import ThreadBuilder, joined, json_kind
from pipeline.formats.media import PART_KINDS, openai_part
from pipeline.formats.media_tags import MediaTags
from pipeline.formats.openai.calls import CallReader
from pipeline.mms import Media
from pipeline.quarantine import RecordRejected

TEXT_PARTS = frozenset({"text", "input_text", "output_text"})
MEDIA_PARTS = {**PART_KINDS, "file": "file", "input_file": "file"}
"""Content part type -> the media kind it is kept, dropped or placeholdered as (files are
never kept: MMS media are images, audio and video)."""
IMG_CONTEXT = re.compile(r"<IMG_CONTEXT>\n?")
"""xtuner's older image marker (its InternVL token, then a newline): in a message with
image parts, each marker is where the next image part stands, as `<image>` is in LLaVA's
text (xtuner's own conversion to its current format moves the images there and drops the
markers)."""


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

    def plain_text(self, content: Any, where: str, role: str) -> tuple[str, tuple[Media, ...]]:
        """Content of a non-assistant message as one text, and its media."""
        texts: list[str] = []
        media: list[Media] = []
        for piece in self.pieces(content, where):
            if piece[0] == "reasoning":
                self.b.note(f"{where} has a reasoning part in a {role} message; kept as text")
            else:
                media += piece[2]
            texts.append(piece[1])
        return "\n\n".join(texts), tuple(media)

    def pieces(self, content: Any, where: str) -> list[tuple[Any, ...]]:
        """Content as ordered pieces: ("text", str, media), ("reasoning", str), ("call",
        ...); neighbouring text and media parts make one text piece (text parts joined by a
        blank line, each kept media at its marker), media not kept dropped or
        placeholdered."""
        if content is None:
            return []
        if not isinstance(content, list):
            return [self._text_piece([self._tagged(self.b.text(content, where))])]
        pieces: list[tuple[Any, ...]] = []
        run: list[list[str | Media]] = []
        for index, part in _at_markers(self.b, content, where):
            piece = self._part(part, f"{where}[{index}]")
            if piece is None:
                continue
            if piece[0] == "content":
                run.append(piece[1])
                continue
            if run:
                pieces.append(self._text_piece(run))
                run = []
            pieces.append(piece)
        if run:
            pieces.append(self._text_piece(run))
        return pieces

    def _text_piece(self, run: list[list[str | Media]]) -> tuple[str, str, tuple[Media, ...]]:
        text, media = self.b.media_content(joined(run, "\n\n"))
        return ("text", text, media)

    def _tagged(self, text: str) -> list[str | Media]:
        """A text's pieces: its LLaMA-Factory media tags kept, dropped or placeholdered."""
        return self.media_tags.take(text)

    def _part(self, part: Any, where: str) -> tuple[Any, ...] | None:
        if not isinstance(part, dict):
            return ("content", [self.b.text([part], where)])
        kind = part.get("type")
        if kind is not None and not isinstance(kind, str):
            raise RecordRejected(
                "missing_field",
                f"{where} has a content part whose type is a JSON {json_kind(kind)}, not a string",
            )
        text = part.get("text", part.get("value"))
        if kind in TEXT_PARTS or (kind is None and "text" in part):
            return ("content", self._tagged(self.b.text(text, where)))
        if kind == "refusal":
            return ("content", [self.b.text(part.get("refusal"), where)])
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
        media_kind = MEDIA_PARTS.get(str(kind), str(kind or "unknown"))
        found = openai_part(part, media_kind) if kind in PART_KINDS else None
        if found is None and kind in PART_KINDS and self.b.keeps_media and _bare(part):
            found = self.media_tags.next_listed(media_kind)
        if found is not None and self.b.keeps_media:
            if _detail(part) is not None:
                self.b.note(f"dropped the detail hint of {kind} parts (how an API sizes an image)")
            return ("content", [found])
        ref = _media_ref(part)
        if ref is None and self.b.keeps_media and isinstance(part.get("file_id"), str):
            ref = part["file_id"]  # an uploaded file (Responses API): named in meta, not kept
        if ref is not None:
            self.media_refs.append(ref)
        media = self.b.media(media_kind)
        return None if media is None else ("content", [media])


def _text_of(part: Any) -> str | None:
    """A text part's text (None for any other part)."""
    if not isinstance(part, dict):
        return None
    kind = part.get("type")
    if (isinstance(kind, str) and kind in TEXT_PARTS) or (kind is None and "text" in part):
        text = part.get("text", part.get("value"))
        return text if isinstance(text, str) else None
    return None


def _at_markers(builder: ThreadBuilder, content: list[Any], where: str) -> list[tuple[int, Any]]:
    """A content list's parts with their indexes, each image part moved to the place of
    its `<IMG_CONTEXT>` marker (the k-th marker of the text parts takes the k-th image
    part) and the markers taken out; as written when no text part holds one. Markers and
    image parts that differ in number quarantine the record when media are kept
    (`media_mismatch`), and are noted otherwise (the markers then taken out, as with
    media dropped there is nothing for them to mark)."""
    indexed = list(enumerate(content))
    markers = sum(len(IMG_CONTEXT.findall(_text_of(part) or "")) for part in content)
    if not markers:
        return indexed
    images = [
        (index, part)
        for index, part in indexed
        if isinstance(part, dict) and PART_KINDS.get(str(part.get("type"))) == "image"
    ]
    if len(images) != markers:
        message = f"{where} holds {len(images)} image part(s) but {markers} <IMG_CONTEXT> marker(s)"
        if builder.keeps_media:
            raise RecordRejected("media_mismatch", message)
        builder.note(message)
    placed: list[tuple[int, Any]] = []
    moved = images if len(images) == markers else []
    taken, moved_indexes = iter(moved), {index for index, _ in moved}
    for index, part in indexed:
        text = _text_of(part)
        if text is None:
            if index not in moved_indexes:
                placed.append((index, part))
            continue
        last = 0
        for match in IMG_CONTEXT.finditer(text):
            if match.start() > last:
                placed.append((index, {**part, "text": text[last : match.start()]}))
            image = next(taken, None)
            if image is not None:
                placed.append(image)
            last = match.end()
        if last < len(text):
            placed.append((index, {**part, "text": text[last:]}))
    return placed


def _bare(part: dict[str, Any]) -> bool:
    """Whether a media part names no source of its own (`{"type": "image"}`, its other
    keys null as a Hugging Face dataset's struct holds them): the record's list does."""
    return all(value is None for key, value in part.items() if key != "type")


def _detail(part: dict[str, Any]) -> Any:
    """An image part's `detail` (low, high, auto), beside its URL or inside it."""
    inner = part.get(str(part.get("type")))
    return part.get("detail", inner.get("detail") if isinstance(inner, dict) else None)


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
