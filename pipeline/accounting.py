"""The account of a job: every record read becomes threads or is quarantined (ReadStats),
and every thread is written or dropped with a named reason (RunCounts). The stages report
what they did; the job adds it up here, once."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any


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


@dataclass
class RunCounts:
    """What a run read, quarantined, dropped (by reason) and wrote (per split)."""

    records_read: int = 0
    records_converted: int = 0
    quarantined: Counter[str] = field(default_factory=Counter)
    threads: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    written: Counter[str] = field(default_factory=Counter)
    """threads written per split (weighted copies included)."""
    copies: int = 0
    """extra rows written by mixing weights above 1."""
    not_sharded: int = 0
    """threads kept but not written, because the run has no shard stage (lint only)."""
    withheld: int = 0
    """threads kept but not written, because the lint gate failed (nothing is published)."""
    tokens: int = 0
    trained_tokens: int = 0
    zero_weight_messages: int = 0
    """assistant messages written that their source weighted 0 (rendered, not trained)."""

    @property
    def balanced(self) -> bool:
        kept = sum(self.written.values()) - self.copies
        return self.records_read == self.records_converted + sum(
            self.quarantined.values()
        ) and self.threads == kept + self.not_sharded + self.withheld + sum(self.dropped.values())

    def withhold(self) -> None:
        """The gate failed: what would have been written is withheld instead."""
        self.withheld += sum(self.written.values()) - self.copies
        self.written.clear()
        self.copies = self.tokens = self.trained_tokens = self.zero_weight_messages = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "records_read": self.records_read,
            "records_converted": self.records_converted,
            "records_quarantined": dict(sorted(self.quarantined.items())),
            "threads": self.threads,
            "threads_dropped": dict(sorted(self.dropped.items())),
            "threads_written": dict(sorted(self.written.items())),
            "weighted_copies": self.copies,
            "threads_not_sharded": self.not_sharded,
            "threads_withheld_by_gate": self.withheld,
            "tokens": self.tokens,
            "trained_tokens": self.trained_tokens,
            "zero_weight_messages": self.zero_weight_messages,
            "balanced": self.balanced,
        }
