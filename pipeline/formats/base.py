"""What every input format adapter provides: a name, a one-line summary, a sniff score
for auto-detection, and the conversion of one record into threads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pipeline.mms import Thread
from pipeline.sources import Record


@dataclass(frozen=True, slots=True)
class InputFormat:
    """An input format. `sniff` scores a parsed record from 0 (not this format) to 1
    (certainly this format); `to_threads` converts a record or raises RecordRejected."""

    name: str
    summary: str
    sniff: Callable[[object], float]
    to_threads: Callable[[Record], list[Thread]]
