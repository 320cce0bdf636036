"""The account of a job: every record read becomes threads or is quarantined, and every
thread is written or dropped with a named reason. The stages report what they did; the
job adds it up here, once."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass(slots=True)
class ReadStats:
    """Counts kept while reading. Invariant: records_read = records_converted + quarantined."""

    records_read: int = 0
    records_converted: int = 0
    threads: int = 0
    quarantined: Counter[str] = field(default_factory=Counter)
    files: list[str] = field(default_factory=list)
    skipped_files: list[str] = field(default_factory=list)
    companion_files: dict[str, str] = field(default_factory=dict)
    """Files read as part of another one (config.json -> its skprompt.txt)."""
    refused_files: dict[str, str] = field(default_factory=dict)
    """Files of the inputs' folders and globs never opened, and why (not a regular file,
    a symlink leading outside the folder named)."""
    formats: dict[str, str] = field(default_factory=dict)
    """The format each file was read as (`-` when none was detected)."""

    @property
    def quarantined_total(self) -> int:
        return sum(self.quarantined.values())

    @property
    def balanced(self) -> bool:
        return self.records_read == self.records_converted + self.quarantined_total
