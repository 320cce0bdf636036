"""Data written to standard output (`-o -`, a report without `-o`): the data alone reaches
it. While a command writes its data there, everything else printed in the process (a
plugin's `print`, a library's, C code's writes to file descriptor 1) goes to standard
error (the local engine's worker processes send theirs there always:
pipeline/engine/local.py)."""

from __future__ import annotations

import ctypes
import io
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import BinaryIO, TextIO


@contextmanager
def standard_output() -> Iterator[BinaryIO]:
    """A binary stream to standard output for the data; until the block ends, `sys.stdout`
    and file descriptor 1 lead to standard error (restored after, the data flushed)."""
    stdout = sys.stdout
    stdout.flush()
    descriptor = _descriptor(stdout)
    if descriptor is None:  # not a file (a caller's captured output): only Python's prints move
        sys.stdout = sys.stderr
        try:
            yield stdout.buffer
            stdout.buffer.flush()
        finally:
            sys.stdout = stdout
        return
    data = os.fdopen(os.dup(descriptor), "wb")
    os.dup2(_descriptor(sys.stderr) or 2, descriptor)
    sys.stdout = sys.stderr
    try:
        yield data
        data.flush()
    finally:
        sys.stdout = stdout
        stdout.flush()  # what was written to it meanwhile goes to standard error
        _flush_c_streams()
        os.dup2(data.fileno(), descriptor)
        data.close()


@contextmanager
def standard_text_output() -> Iterator[TextIO]:
    """`standard_output` as UTF-8 text (a report)."""
    with standard_output() as data:
        text = io.TextIOWrapper(data, encoding="utf-8", newline="\n", write_through=True)
        yield text
        text.flush()
        text.detach()


def _descriptor(stream: TextIO) -> int | None:
    """The file descriptor under `stream`, None when it has none."""
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):
        return None


def _flush_c_streams() -> None:
    """Flush what C code buffered for its `stdout` while it led to standard error."""
    with suppress(OSError, AttributeError):
        ctypes.CDLL(None).fflush(None)
