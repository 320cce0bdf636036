"""Open input files (local paths, or URLs of an object store: pipeline/storage) as binary
streams, decompressing by suffix (.gz, .zst, .zstd, .bz2, .xz). Every codec is read through
one reader, `_Decoded`, which decodes each stream of the file to its end: a file cut short,
corrupt, or holding bytes after its streams that no stream decodes raises
BrokenStreamError (naming the file and the decompressed bytes read) instead of ending as
if it were shorter."""

from __future__ import annotations

import bz2
import io
import lzma
import os
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO, Protocol

import zstandard

from pipeline import storage


class Decompressor(Protocol):
    """One compressed stream (a gzip member, a zstd frame ...) being decoded, driven as the
    standard library's bz2 and lzma decompressors are: at most `max_length` bytes a call,
    `eof` once the stream's end is decoded, the bytes after it in `unused_data`."""

    @property
    def eof(self) -> bool: ...

    @property
    def needs_input(self) -> bool: ...

    @property
    def unused_data(self) -> bytes: ...

    def decompress(self, data: bytes, max_length: int = -1) -> bytes: ...


class _GzipMember:
    """One gzip member, driven as a Decompressor (zlib keeps the input a call did not take
    in `unconsumed_tail`, and may hold output when a call stopped at `max_length`)."""

    def __init__(self) -> None:
        self._zlib = zlib.decompressobj(wbits=31)
        self._tail = b""
        self._full = False

    @property
    def eof(self) -> bool:
        return self._zlib.eof

    @property
    def needs_input(self) -> bool:
        return not (self._tail or self._full)

    @property
    def unused_data(self) -> bytes:
        return self._zlib.unused_data

    def decompress(self, data: bytes, max_length: int = -1) -> bytes:
        out = self._zlib.decompress(self._tail + data, max(max_length, 0))
        self._tail = self._zlib.unconsumed_tail
        self._full = 0 < max_length == len(out)
        return out


_ZSTD_STEP = 1024
"""zstd input fed at a time: it decompresses to at most 32 MiB (128 KiB blocks from 4 bytes)."""


class _ZstdFrame:
    """One zstd frame, driven as a Decompressor: zstandard's decompressobj takes no output
    limit, so it is fed _ZSTD_STEP bytes at a time and what exceeds `max_length` waits."""

    def __init__(self) -> None:
        self._zstd = zstandard.ZstdDecompressor().decompressobj()
        self._input, self._at = b"", 0
        self._output = bytearray()

    @property
    def eof(self) -> bool:
        return self._zstd.eof and not self._output

    @property
    def needs_input(self) -> bool:
        return self._at >= len(self._input) and not self._output

    @property
    def unused_data(self) -> bytes:
        return self._zstd.unused_data + self._input[self._at :]

    def decompress(self, data: bytes, max_length: int = -1) -> bytes:
        if data:
            self._input, self._at = self._input[self._at :] + data, 0
        while (
            (max_length < 0 or len(self._output) < max_length)
            and self._at < len(self._input)
            and not self._zstd.eof
        ):
            step = self._input[self._at : self._at + _ZSTD_STEP]
            self._at += len(step)
            self._output += self._zstd.decompress(step)
        size = len(self._output) if max_length < 0 else max_length
        out = bytes(self._output[:size])
        del self._output[:size]
        return out


@dataclass(frozen=True, slots=True)
class Codec:
    """A compression format: its name for messages, and a fresh Decompressor for each of
    the streams a file may hold one after another (concatenated members or frames)."""

    name: str
    decompressor: Callable[[], Decompressor]


CODECS: dict[str, Codec] = {
    ".gz": Codec("gzip", _GzipMember),
    ".zst": Codec("zstd", _ZstdFrame),
    ".zstd": Codec("zstd", _ZstdFrame),
    ".bz2": Codec("bzip2", bz2.BZ2Decompressor),
    ".xz": Codec("xz", lzma.LZMADecompressor),
}
"""Suffix -> codec; every one is read through `_Decoded`, so its end is checked."""
COMPRESSION_SUFFIXES = tuple(CODECS)


def split_compression(path: str) -> tuple[str, str | None]:
    """`data.jsonl.gz` -> (`data.jsonl`, `.gz`); an uncompressed path -> (path, None)."""
    lower = path.lower()
    for suffix in COMPRESSION_SUFFIXES:
        if lower.endswith(suffix):
            return path[: -len(suffix)], suffix
    return path, None


BOMB_FLOOR = 64 * 1024 * 1024
"""A compressed file may always decompress to this much, whatever its ratio."""


class DecompressionBombError(OSError):
    """A compressed file decompresses to far more than its size allows."""


class _Bounded(io.RawIOBase):
    """The bytes of a decompressing stream, refused past `limit` bytes."""

    def __init__(self, inner: io.BufferedIOBase, limit: int, path: str) -> None:
        super().__init__()
        self._inner, self._left, self._limit, self._path = inner, limit, limit, path

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        # read1: what one step of decompression gives, so the lines before a corrupt
        # or truncated stretch are still delivered before it raises
        data = self._inner.read1(min(len(buffer), self._left + 1))
        if len(data) > self._left:
            raise DecompressionBombError(
                f"{self._path} decompresses to more than {self._limit} bytes, over the "
                "limit for its size (a decompression bomb? raise --max-decompression-ratio "
                "if it is real)"
            )
        self._left -= len(data)
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._inner.close()
        super().close()


class BrokenStreamError(OSError):
    """A compressed file that does not end cleanly: cut short, corrupt, or holding bytes
    after its streams that are no stream of its codec."""


_READ_BYTES = 128 * 1024
"""Compressed bytes read from the file at a time."""
_DECODE_ERRORS = (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError, zstandard.ZstdError)
"""What a Decompressor raises on bytes that are not its stream."""


class _Decoded(io.RawIOBase):
    """The decompressed bytes of a file it owns: its streams one after another, each decoded
    to its end. A file that ends inside a stream, or whose bytes a stream cannot decode,
    raises BrokenStreamError; the bytes decoded before are delivered first."""

    def __init__(self, raw: BinaryIO, codec: Codec, path: str) -> None:
        super().__init__()
        self._raw, self._codec, self._path = raw, codec, path
        self._stream = codec.decompressor()
        self._given = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self._decode(len(buffer))
        buffer[: len(data)] = data
        self._given += len(data)
        return len(data)

    def _decode(self, size: int) -> bytes:
        """Up to `size` decompressed bytes; b"" only where the file ends after a stream's end."""
        while True:
            if self._stream.eof:
                feed = self._stream.unused_data or self._raw.read(_READ_BYTES)
                if not feed:
                    return b""
                self._stream = self._codec.decompressor()
            elif self._stream.needs_input:
                feed = self._raw.read(_READ_BYTES)
                if not feed:
                    raise self._broken("the file ends inside the stream (truncated?)")
            else:
                feed = b""
            try:
                data = self._stream.decompress(feed, size)
            except _DECODE_ERRORS as err:
                raise self._broken(f"corrupt ({err})") from err
            if data:
                return data

    def _broken(self, why: str) -> BrokenStreamError:
        return BrokenStreamError(
            f"{self._path} is not a complete {self._codec.name} stream: {why}, after "
            f"{self._given} decompressed bytes"
        )

    def close(self) -> None:
        try:
            self._raw.close()
        finally:
            super().close()


def _decompressing(path: str, codec: Codec) -> io.BufferedReader:
    """The decompressed bytes of a local or stored file, its end checked (`_Decoded`)."""
    raw = storage.open_read(path) if storage.is_url(path) else open(path, "rb")  # noqa: SIM115
    return io.BufferedReader(_Decoded(raw, codec, path), buffer_size=1024 * 1024)


def open_binary(path: str, max_ratio: int | None = None) -> BinaryIO:
    """A buffered binary stream of the file's decompressed bytes; with `max_ratio`, a
    compressed file stops (DecompressionBombError) past that many times its size (plus
    BOMB_FLOOR)."""
    _, compression = split_compression(path)
    if compression is None:
        if storage.is_url(path):
            return storage.open_read(path)
        return open(path, "rb", buffering=1024 * 1024)
    stream: io.BufferedReader = _decompressing(path, CODECS[compression])
    if max_ratio is not None:
        size = storage.size(path) if storage.is_url(path) else os.path.getsize(path)
        limit = size * max_ratio + BOMB_FLOOR
        bounded = _Bounded(stream, limit, path)
        stream = io.BufferedReader(bounded, buffer_size=1024 * 1024)
    return stream
