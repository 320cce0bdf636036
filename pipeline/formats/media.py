"""Where a source's media part points, as an MMS `Media` (DESIGN §3): a path as written,
a URL, or base64 data (a `data:` URL split into its mime and base64, bytes encoded). The
shapes are the ones the formats write: a bare string, bytes, a Hugging Face image dict
(`{"bytes", "path"}`), OpenAI content parts (`image_url`, `input_image`, `input_audio`,
`video_url` ...), Anthropic image sources and Gemini `inlineData` / `fileData`. Nothing
here reads a file or fetches a URL."""

from __future__ import annotations

import base64
import re
import urllib.parse
from typing import Any, cast

from pipeline.mms import MEDIA_KINDS, Media, MediaKind

URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
"""A string that starts with a scheme and `//` is a URL (https, gs, s3, file ...); any
other string is a path (a Windows drive letter has no `//`)."""
PART_KINDS = {
    "image_url": "image",
    "input_image": "image",
    "image": "image",
    "input_audio": "audio",
    "audio": "audio",
    "audio_url": "audio",
    "video_url": "video",
    "video": "video",
}
"""Content part type (OpenAI's, vLLM's, Hugging Face's, Anthropic's `image`) -> the media
kind it holds."""
AUDIO_FORMATS = {"wav": "audio/wav", "mp3": "audio/mpeg"}
"""OpenAI `input_audio.format` -> its MIME type (the two formats the API accepts)."""


def media_kind(kind: str) -> bool:
    """Whether `kind` is one MMS holds (image, audio, video)."""
    return kind in MEDIA_KINDS


def _media(
    kind: str,
    mime: str | None,
    *,
    path: str | None = None,
    url: str | None = None,
    data: str | None = None,
) -> Media:
    """A Media of a kind already checked to be one MMS holds."""
    return Media(cast(MediaKind, kind), path=path, url=url, data=data, mime=mime)


def from_reference(kind: str, value: Any, mime: str | None = None) -> Media | None:
    """The media a value names: a string (a `data:` URL, a URL or a path), bytes, or a
    dict with `bytes`, `data`, `url` or `path`; None when it names nothing usable.

    >>> from_reference("image", "mllm_demo_data/1.jpg")
    Media(kind='image', path='mllm_demo_data/1.jpg', url=None, data=None, mime=None)
    >>> from_reference("image", "data:image/png;base64,iVBORw0KGgo=")
    Media(kind='image', path=None, url=None, data='iVBORw0KGgo=', mime='image/png')
    >>> from_reference("video", {"bytes": None, "path": "https://x.org/v.mp4"}).url
    'https://x.org/v.mp4'
    >>> from_reference("audio", b"RIFF").data, from_reference("image", 7)
    ('UklGRg==', None)

    A video may be a list of its frames (qwen-vl-utils, LLaMA-Factory), each a reference
    to an image; one that names none makes the video None:

    >>> from_reference("video", ["f/1.jpg", "file:///f/2.jpg"]).to_part()
    {'type': 'video', 'frames': [{'path': 'f/1.jpg'}, {'url': 'file:///f/2.jpg'}]}
    >>> from_reference("video", ["f/1.jpg", 7]) is None, from_reference("image", ["a.jpg"])
    (True, None)
    """
    if not media_kind(kind):
        return None
    if isinstance(value, (list, tuple)):
        return _from_frames(kind, value, mime)
    if isinstance(value, (bytes, bytearray)):
        if not value:
            return None
        return _media(kind, mime, data=base64.b64encode(value).decode("ascii"))
    if isinstance(value, dict):
        return _from_dict(kind, value, mime)
    if not isinstance(value, str) or not value:
        return None
    if value.startswith("data:"):
        return _from_data_url(kind, value, mime)
    if URL.match(value):
        return _media(kind, mime, url=value)
    return _media(kind, mime, path=value)


def _from_frames(kind: str, frames: list[Any] | tuple[Any, ...], mime: str | None) -> Media | None:
    """A video given as a non-empty list of frame images, each a reference to an image;
    None for another kind, an empty list, or a frame that names nothing usable."""
    if kind != "video" or not frames:
        return None
    found = [from_reference("image", frame) for frame in frames]
    if any(frame is None or frame.frames for frame in found):
        return None
    return Media.video_frames([frame for frame in found if frame is not None], mime)


def _from_dict(kind: str, value: dict[str, Any], mime: str | None) -> Media | None:
    stated = value.get("mime") or value.get("mime_type") or value.get("media_type")
    mime = stated if isinstance(stated, str) and stated else mime
    if isinstance(value.get("frames"), list):
        return _from_frames(kind, value["frames"], mime)
    for key in ("bytes", "data"):
        payload = value.get(key)
        if isinstance(payload, (bytes, bytearray)) and payload:
            return from_reference(kind, payload, mime)
        if isinstance(payload, str) and payload:
            if payload.startswith("data:"):
                return _from_data_url(kind, payload, mime)
            return _media(kind, mime, data=payload)
    for key in ("url", "path"):
        ref = value.get(key)
        if isinstance(ref, str) and ref:
            return from_reference(kind, ref, mime)
    return None


def _from_data_url(kind: str, url: str, mime: str | None) -> Media | None:
    """A `data:[mime][;base64],payload` URL as base64 data and its mime."""
    header, comma, payload = url[5:].partition(",")
    if not comma:
        return None
    params = header.split(";")
    stated = params[0].strip() or None
    if "base64" in (p.strip().lower() for p in params[1:]):
        data = payload
    else:
        data = base64.b64encode(urllib.parse.unquote_to_bytes(payload)).decode("ascii")
    if not data:
        return None
    return _media(kind, stated or mime, data=data)


def openai_part(part: dict[str, Any], kind: str) -> Media | None:
    """The media of an OpenAI-style content part of `kind`: `image_url` ({url} or a
    string), `input_image`, `input_audio` ({data, format}), `video_url`, `audio_url`,
    LLaMA-Factory's `value`, Hugging Face's `image` / `video` / `audio` and `url` /
    `path`, or an MMS part's own `path` / `url` / `data`; None for an uploaded file's id.

    >>> openai_part({"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}, "audio")
    Media(kind='audio', path=None, url=None, data='UklGRg==', mime='audio/wav')
    >>> openai_part({"type": "image_url", "image_url": {"url": "https://x.org/a.png"}}, "image").url
    'https://x.org/a.png'
    >>> openai_part({"type": "input_image", "file_id": "file-123"}, "image") is None
    True
    """
    if not media_kind(kind):
        return None
    mime = part.get("mime") if isinstance(part.get("mime"), str) and part.get("mime") else None
    if isinstance(part.get("path"), str) and part["path"]:
        return _media(kind, mime, path=part["path"])
    if isinstance(part.get("data"), str) and part["data"]:
        return from_reference(kind, {"data": part["data"]}, mime)
    frames = ("frames",) if kind == "video" else ()
    keys = (part.get("type"), "image_url", "video_url", "audio_url", kind, "url", "path", "value")
    keys = (*keys, *frames)
    for key in keys:
        if not isinstance(key, str) or key == "type":
            continue
        value = part.get(key)
        if value is None:
            continue
        if isinstance(value, dict) and key == "input_audio":
            audio_format = value.get("format")
            stated = AUDIO_FORMATS.get(audio_format) if isinstance(audio_format, str) else None
            return from_reference(kind, {"data": value.get("data")}, stated or mime)
        found = from_reference(kind, value, mime)
        if found is not None:
            return found
    return None


def anthropic_source(source: Any) -> Media | None:
    """The image of an Anthropic block's `source`: base64 data with its media type, or a
    URL; None for an uploaded file (`file_id`) or anything else."""
    if not isinstance(source, dict):
        return None
    kind = source.get("type")
    mime = source.get("media_type") if isinstance(source.get("media_type"), str) else None
    if kind == "base64" and isinstance(source.get("data"), str) and source["data"]:
        return _media("image", mime or None, data=source["data"])
    if kind == "url" and isinstance(source.get("url"), str) and source["url"]:
        return from_reference("image", source["url"], mime)
    return None


def gemini_payload(kind: str, payload: dict[str, Any], mime: str | None) -> Media | None:
    """The media of a Gemini `inlineData` ({data}) or `fileData` ({fileUri}) payload."""
    if not media_kind(kind):
        return None
    data = payload.get("data")
    if isinstance(data, str) and data:
        return _media(kind, mime, data=data)
    uri = payload.get("fileUri", payload.get("file_uri"))
    if isinstance(uri, str) and uri:
        return from_reference(kind, uri, mime)
    return None
