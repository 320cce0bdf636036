"""Which files are Harmony transcripts: `.txt` files (optionally compressed) whose text
starts with `<|start|>`, so that other text files (READMEs, provenance notes) stay
unsupported files, skipped by a folder walk, as before.

pipeline/sources/paths.py asks `is_harmony_file` about `.txt` names, and such a file is
then read whole, as a TextDocument of kind `harmony` (pipeline/formats/harmony reads it)."""

from __future__ import annotations

import codecs
import re

from pipeline.sources.compression import open_binary

HARMONY_KIND = "harmony"
"""The TextDocument kind of a Harmony transcript file."""
SUFFIX = ".txt"
PEEK_BYTES = 4096
"""How much of a file is read to tell: the start token after at most this much blank space."""
_STARTS = re.compile(rb"\s*<\|start\|>")


def starts_like_harmony(head: bytes) -> bool:
    """Whether a file's first bytes (after a UTF-8 BOM and blank space) are `<|start|>`."""
    return _STARTS.match(head.removeprefix(codecs.BOM_UTF8)) is not None


def is_harmony_file(path: str) -> bool:
    """Whether the `.txt` file at `path` (compressed or not) is a Harmony transcript;
    False when it cannot be read (the reader then reports it as it reports any file)."""
    try:
        with open_binary(path) as stream:
            return starts_like_harmony(stream.read(PEEK_BYTES))
    except (OSError, ValueError, EOFError):
        return False
