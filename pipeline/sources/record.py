"""A record read from an input: its parsed value and where it came from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Record:
    """One input record. `locator` is `path:line` (line-based files) or `path#index`
    (documents and tables); `raw` keeps the original bytes when that is free; `notes` say
    what the reader had to forgive (e.g. trailing commas), for the thread's meta.

    `source` is the file as the user named it (what a quarantine line points at); `name`
    is the file's name relative to its input (pipeline/sources/names.py), None when it is
    the source itself. Threads record the name (`lineage`), so that their ids and meta do
    not depend on where the input lives."""

    source: str
    locator: str
    value: Any
    raw: bytes | None = None
    notes: tuple[str, ...] = ()
    name: str | None = None

    @property
    def lineage(self) -> tuple[str, str]:
        """(source, locator) as the thread records them: with the file's name in place of
        its path.

        >>> Record("/data/chat.jsonl", "/data/chat.jsonl:3", {}, name="chat.jsonl").lineage
        ('chat.jsonl', 'chat.jsonl:3')
        """
        if self.name is None:
            return self.source, self.locator
        return self.name, self.name + self.locator[len(self.source) :]


def named(record: Record, name: str | None) -> Record:
    """The record with the file name `name` (unchanged when that is its source)."""
    if name is None or name == record.source:
        return record
    return Record(record.source, record.locator, record.value, record.raw, record.notes, name)
