"""A record read from an input: its parsed value and where it came from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Record:
    """One input record. `locator` is `path:line` (line-based files) or `path#index`
    (documents and tables); `raw` keeps the original bytes when that is free; `notes` say
    what the reader had to forgive (e.g. trailing commas), for the thread's meta."""

    source: str
    locator: str
    value: Any
    raw: bytes | None = None
    notes: tuple[str, ...] = ()
