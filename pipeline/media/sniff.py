"""What a media file is, from its first bytes (magic numbers), never from its name: the
container, the kinds (image, audio, video) it can hold, the file name extension its copy
gets and its MIME type. Nothing here decodes; pipeline/media/decode.py does."""

from __future__ import annotations

from dataclasses import dataclass

HEAD_BYTES = 64
"""How many leading bytes `sniff` needs at most."""


@dataclass(frozen=True, slots=True)
class Sniffed:
    """A recognised container: its name, the kinds it holds, its extension and MIME."""

    container: str
    kinds: frozenset[str]
    ext: str
    mime: str


def _kinds(*names: str) -> frozenset[str]:
    return frozenset(names)


IMAGE, AUDIO, VIDEO = _kinds("image"), _kinds("audio"), _kinds("video")
AV = _kinds("audio", "video")

_MP4_AUDIO_BRANDS = (b"M4A ", b"M4B ", b"M4P ", b"F4A ", b"F4B ")


def sniff(head: bytes) -> Sniffed | None:
    """The container whose signature `head` (the file's first HEAD_BYTES bytes) starts
    with, None when none is known.

    >>> sniff(b"\\x89PNG\\r\\n\\x1a\\n" + bytes(8)).container
    'png'
    >>> sorted(sniff(b"RIFF\\x24\\x00\\x00\\x00WAVEfmt ").kinds)
    ['audio']
    >>> sniff(b"hello") is None
    True
    """
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return Sniffed("png", IMAGE, "png", "image/png")
    if head.startswith(b"\xff\xd8\xff"):
        return Sniffed("jpeg", IMAGE, "jpg", "image/jpeg")
    if head.startswith((b"GIF87a", b"GIF89a")):
        return Sniffed("gif", IMAGE, "gif", "image/gif")
    if head.startswith(b"BM") and len(head) >= 14:
        return Sniffed("bmp", IMAGE, "bmp", "image/bmp")
    if head.startswith((b"II*\x00", b"MM\x00*")):
        return Sniffed("tiff", IMAGE, "tiff", "image/tiff")
    if head.startswith(b"RIFF") and len(head) >= 12:
        form = head[8:12]
        if form == b"WEBP":
            return Sniffed("webp", IMAGE, "webp", "image/webp")
        if form == b"WAVE":
            return Sniffed("wav", AUDIO, "wav", "audio/wav")
        if form == b"AVI ":
            return Sniffed("avi", VIDEO, "avi", "video/x-msvideo")
        return None
    if head.startswith(b"fLaC"):
        return Sniffed("flac", AUDIO, "flac", "audio/flac")
    if head.startswith(b"ID3") or (len(head) >= 2 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0):
        return Sniffed("mp3", AUDIO, "mp3", "audio/mpeg")
    if head.startswith(b"OggS"):
        return Sniffed("ogg", AV, "ogg", "audio/ogg")
    if len(head) >= 12 and head[4:8] == b"ftyp":
        brand = head[8:12]
        if brand == b"qt  ":
            return Sniffed("mov", VIDEO, "mov", "video/quicktime")
        if brand in _MP4_AUDIO_BRANDS:
            return Sniffed("mp4", AUDIO, "m4a", "audio/mp4")
        return Sniffed("mp4", AV, "mp4", "video/mp4")
    if head.startswith(b"\x1a\x45\xdf\xa3"):
        if b"webm" in head:
            return Sniffed("webm", AV, "webm", "video/webm")
        return Sniffed("matroska", AV, "mkv", "video/x-matroska")
    return None
