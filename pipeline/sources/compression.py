"""Open input files as binary streams, decompressing by suffix (.gz, .zst, .bz2, .xz)."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
from typing import BinaryIO

import zstandard

COMPRESSION_SUFFIXES = (".gz", ".zst", ".zstd", ".bz2", ".xz")

DECOMPRESSION_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    EOFError,
    lzma.LZMAError,
    zstandard.ZstdError,
)
"""What a corrupt or truncated compressed file raises while it is being read."""


def split_compression(path: str) -> tuple[str, str | None]:
    """`data.jsonl.gz` -> (`data.jsonl`, `.gz`); an uncompressed path -> (path, None)."""
    lower = path.lower()
    for suffix in COMPRESSION_SUFFIXES:
        if lower.endswith(suffix):
            return path[: -len(suffix)], suffix
    return path, None


def open_binary(path: str) -> BinaryIO:
    """A buffered binary stream of the file's decompressed bytes."""
    _, compression = split_compression(path)
    if compression == ".gz":
        return gzip.open(path, "rb")  # type: ignore[return-value]
    if compression in (".zst", ".zstd"):
        raw = open(path, "rb")  # noqa: SIM115 - closed with the reader (closefd)
        reader = zstandard.ZstdDecompressor().stream_reader(raw, closefd=True)
        return io.BufferedReader(reader, buffer_size=1024 * 1024)  # type: ignore[arg-type]
    if compression == ".bz2":
        return bz2.open(path, "rb")  # type: ignore[return-value]
    if compression == ".xz":
        return lzma.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb", buffering=1024 * 1024)
