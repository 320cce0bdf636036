"""Whether a media file's bytes hold what its container promises: images are decoded by
Pillow (every pixel, so a truncated PNG or JPEG is caught, with a cap on pixels against
decompression bombs); audio and video containers have their headers and declared sizes
checked against the bytes there are (no codec is run)."""

from __future__ import annotations

import io
import re
import struct
import warnings

from pipeline.media.sniff import Sniffed


class Corrupt(ValueError):
    """The bytes do not hold a whole, readable media of their container."""


class TooManyPixels(ValueError):
    """An image with more pixels than the limit (a decompression bomb, or simply huge)."""


def check_decodes(data: bytes, sniffed: Sniffed, max_pixels: int) -> None:
    """Raise Corrupt (or TooManyPixels) unless `data` decodes as `sniffed` says."""
    checker = _CHECKERS.get(sniffed.container)
    if checker is None:  # pragma: no cover - every container sniff knows has a checker
        raise Corrupt(f"no check for {sniffed.container}")
    if sniffed.container in _IMAGES:
        _check_image(data, sniffed, max_pixels)
    else:
        checker(data)


_IMAGES = frozenset({"png", "jpeg", "gif", "bmp", "tiff", "webp"})


def _check_image(data: bytes, sniffed: Sniffed, max_pixels: int) -> None:
    from PIL import Image, ImageFile

    ImageFile.LOAD_TRUNCATED_IMAGES = False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:
                width, height = image.size
                if width * height > max_pixels:
                    raise TooManyPixels(
                        f"{width}x{height} = {width * height:,} pixels (limit {max_pixels:,})"
                    )
                image.verify()
            with Image.open(io.BytesIO(data)) as image:  # verify() leaves it unusable
                image.load()  # every pixel: a truncated file fails here
    except TooManyPixels:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as err:
        raise TooManyPixels(str(err)) from None
    except Exception as err:  # Pillow raises OSError, SyntaxError, ValueError ...
        said = _OBJECT_AT.sub("the bytes", str(err))  # no memory address: same bytes each run
        raise Corrupt(f"{sniffed.container} does not decode: {said}") from None


_OBJECT_AT = re.compile(r"<[^<>]* at 0x[0-9a-fA-F]+>")


def _riff(data: bytes) -> None:
    """RIFF (WAV, AVI): the declared size fits the bytes, the chunks are whole."""
    if len(data) < 12:
        raise Corrupt("RIFF header cut short")
    (declared,) = struct.unpack_from("<I", data, 4)
    if declared + 8 > len(data):
        raise Corrupt(f"RIFF declares {declared + 8:,} bytes, the file has {len(data):,}")
    _chunks(data, 12, declared + 8, little=True)


def _chunks(data: bytes, start: int, end: int, *, little: bool) -> list[bytes]:
    """The ids of the RIFF chunks between `start` and `end`; raises Corrupt for a chunk
    that runs past the end."""
    ids, at = [], start
    form = "<I" if little else ">I"
    while at + 8 <= end:
        chunk = data[at : at + 4]
        (size,) = struct.unpack_from(form, data, at + 4)
        if at + 8 + size > end:
            raise Corrupt(f"chunk {chunk!r} runs past the end of the file")
        ids.append(chunk)
        at += 8 + size + (size & 1)
    return ids


def _wav(data: bytes) -> None:
    _riff(data)
    (declared,) = struct.unpack_from("<I", data, 4)
    ids = _chunks(data, 12, declared + 8, little=True)
    if b"fmt " not in ids or b"data" not in ids:
        raise Corrupt("WAV without its 'fmt ' and 'data' chunks")


def _avi(data: bytes) -> None:
    _riff(data)


def _flac(data: bytes) -> None:
    if len(data) < 8 + 34 or data[4] & 0x7F != 0:
        raise Corrupt("FLAC without its STREAMINFO block")
    length = int.from_bytes(data[5:8], "big")
    if length != 34:
        raise Corrupt(f"FLAC STREAMINFO of {length} bytes (34 expected)")


def _mp3(data: bytes) -> None:
    at = 0
    if data.startswith(b"ID3"):
        if len(data) < 10:
            raise Corrupt("ID3 header cut short")
        size = 0
        for byte in data[6:10]:
            size = (size << 7) | (byte & 0x7F)
        at = 10 + size + (10 if data[5] & 0x10 else 0)
        if at > len(data):
            raise Corrupt(f"ID3 tag declares {at:,} bytes, the file has {len(data):,}")
        while at < len(data) and data[at] == 0:  # padding
            at += 1
    if at + 4 > len(data) or data[at] != 0xFF or data[at + 1] & 0xE0 != 0xE0:
        raise Corrupt("no MPEG audio frame")
    if (data[at + 1] >> 3) & 3 == 1 or (data[at + 1] >> 1) & 3 == 0:
        raise Corrupt("MPEG frame header with a reserved version or layer")
    if data[at + 2] >> 4 == 0xF:
        raise Corrupt("MPEG frame header with a bad bitrate")


def _ogg(data: bytes) -> None:
    at = 0
    pages = 0
    while at < len(data):
        if data[at : at + 4] != b"OggS" or at + 27 > len(data):
            raise Corrupt(f"Ogg page {pages} is not whole")
        segments = data[at + 26]
        if at + 27 + segments > len(data):
            raise Corrupt(f"Ogg page {pages} is not whole")
        body = sum(data[at + 27 : at + 27 + segments])
        at += 27 + segments + body
        if at > len(data):
            raise Corrupt(f"Ogg page {pages} runs past the end of the file")
        pages += 1


def _mp4(data: bytes) -> None:
    """ISO base media (MP4, MOV, M4A): the top-level boxes fill the file exactly, the
    first is `ftyp`, and a `moov` is there."""
    at, boxes = 0, []
    while at < len(data):
        if at + 8 > len(data):
            raise Corrupt("a box header is cut short")
        (size,) = struct.unpack_from(">I", data, at)
        kind = data[at + 4 : at + 8]
        header = 8
        if size == 1:
            if at + 16 > len(data):
                raise Corrupt("a box header is cut short")
            (size,) = struct.unpack_from(">Q", data, at + 8)
            header = 16
        elif size == 0:
            size = len(data) - at
        if size < header or at + size > len(data):
            raise Corrupt(f"box {kind!r} runs past the end of the file")
        boxes.append(kind)
        at += size
    if not boxes or boxes[0] != b"ftyp":
        raise Corrupt("no 'ftyp' box first")
    if b"moov" not in boxes:
        raise Corrupt("no 'moov' box (the movie's header)")


def _vint(data: bytes, at: int) -> tuple[int, int, bool]:
    """An EBML variable-size integer at `at`: (value, length, all ones = unknown)."""
    if at >= len(data) or data[at] == 0:
        raise Corrupt("bad EBML size")
    length = 8 - data[at].bit_length() + 1
    if at + length > len(data):
        raise Corrupt("EBML size cut short")
    value = data[at] & (0xFF >> length)
    for byte in data[at + 1 : at + length]:
        value = (value << 8) | byte
    return value, length, value == (1 << (7 * length)) - 1


def _matroska(data: bytes) -> None:
    """Matroska / WebM: the EBML header and the Segment whose size fits the bytes."""
    size, length, _ = _vint(data, 4)
    at = 4 + length + size
    if at + 4 > len(data):
        raise Corrupt("EBML header runs past the end of the file")
    if data[at : at + 4] != b"\x18\x53\x80\x67":
        raise Corrupt("no Segment after the EBML header")
    size, length, unknown = _vint(data, at + 4)
    if not unknown and at + 4 + length + size > len(data):
        raise Corrupt(
            f"Segment declares {at + 4 + length + size:,} bytes, the file has {len(data):,}"
        )


def _pillow(data: bytes) -> None:  # pragma: no cover - images go through _check_image
    raise AssertionError("images are checked by _check_image")


_CHECKERS = {
    "png": _pillow,
    "jpeg": _pillow,
    "gif": _pillow,
    "bmp": _pillow,
    "tiff": _pillow,
    "webp": _pillow,
    "wav": _wav,
    "avi": _avi,
    "flac": _flac,
    "mp3": _mp3,
    "ogg": _ogg,
    "mp4": _mp4,
    "mov": _mp4,
    "webm": _matroska,
    "matroska": _matroska,
}
