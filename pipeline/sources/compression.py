"""Open input files (local paths, or URLs of an object store: pipeline/storage) as binary
streams, decompressing by suffix (.gz, .zst, .bz2, .xz)."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
from typing import BinaryIO

import zstandard

from pipeline import storage

COMPRESSION_SUFFIXES = (".gz", ".zst", ".zstd", ".bz2", ".xz")


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


class _Owning(io.RawIOBase):
    """The bytes of a decompressing stream over a stream it owns: closing it closes both
    (the decompressors leave a stream they were handed open)."""

    def __init__(self, inner: io.BufferedIOBase, owned: BinaryIO) -> None:
        super().__init__()
        self._inner, self._owned = inner, owned

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self._inner.read1(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            self._owned.close()
            super().close()


def _decompressing_url(url: str, compression: str) -> io.BufferedIOBase:
    raw = storage.open_read(url)
    inner: io.BufferedIOBase
    if compression == ".gz":
        inner = gzip.GzipFile(fileobj=raw, mode="rb")
    elif compression in (".zst", ".zstd"):
        reader = zstandard.ZstdDecompressor().stream_reader(raw, closefd=False)
        inner = io.BufferedReader(reader, buffer_size=1024 * 1024)
    elif compression == ".bz2":
        inner = bz2.BZ2File(raw, "rb")
    else:
        inner = lzma.LZMAFile(raw, "rb")  # noqa: SIM115 - closed with the stream returned
    return io.BufferedReader(_Owning(inner, raw), buffer_size=1024 * 1024)


def _decompressing(path: str, compression: str) -> io.BufferedIOBase:
    if storage.is_url(path):
        return _decompressing_url(path, compression)
    if compression == ".gz":
        return gzip.open(path, "rb")
    if compression in (".zst", ".zstd"):
        raw = open(path, "rb")  # noqa: SIM115 - closed with the reader (closefd)
        reader = zstandard.ZstdDecompressor().stream_reader(raw, closefd=True)
        return io.BufferedReader(reader, buffer_size=1024 * 1024)
    if compression == ".bz2":
        return bz2.open(path, "rb")
    return lzma.open(path, "rb")


def open_binary(path: str, max_ratio: int | None = None) -> BinaryIO:
    """A buffered binary stream of the file's decompressed bytes; with `max_ratio`, a
    compressed file stops (DecompressionBombError) past that many times its size (plus
    BOMB_FLOOR)."""
    _, compression = split_compression(path)
    if compression is None:
        if storage.is_url(path):
            return storage.open_read(path)
        return open(path, "rb", buffering=1024 * 1024)
    stream = _decompressing(path, compression)
    if max_ratio is not None:
        size = storage.size(path) if storage.is_url(path) else os.path.getsize(path)
        limit = size * max_ratio + BOMB_FLOOR
        bounded = _Bounded(stream, limit, path)
        stream = io.BufferedReader(bounded, buffer_size=1024 * 1024)
    # GzipFile, BZ2File and LZMAFile are binary streams typeshed does not declare BinaryIO
    return stream  # type: ignore[return-value]
