"""The account of a job (DESIGN §2): every record read becomes threads or is quarantined, and
every thread is written, kept unwritten (linted only, withheld by the gate) or dropped with a
named reason. Stages publish what they decide; the job's driver adds it up here, once, for
every job alike (convert, lint, tokenize, run)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.mms.groups import group_kind, group_runs

TOKEN_FIGURES = ("num_tokens", "num_trained", "messages")
"""The columns written rows carry when they are tokenized (their token figures are counted)."""


DEDUPLICATED = ("duplicate", "near_duplicate")
"""The drop reasons of dedup."""
SAMPLED_OUT = "sampled_out"
"""The drop reason of an input's `sample`."""


@dataclass(slots=True)
class InputAccount:
    """One input's share of a run's account (an input as the config names it): records
    read and quarantined (per code), threads read and dropped (per reason), rows written
    per split (weighted copies included, and counted apart) and their tokens."""

    path: str
    license: str | None = None
    records_read: int = 0
    threads: int = 0
    tokens: int = 0
    copies: int = 0
    quarantined_by: Counter[str] = field(default_factory=Counter)
    dropped_by: Counter[str] = field(default_factory=Counter)
    written_by: Counter[str] = field(default_factory=Counter)

    @property
    def quarantined(self) -> int:
        return sum(self.quarantined_by.values())

    @property
    def dropped(self) -> int:
        return sum(self.dropped_by.values())

    @property
    def written(self) -> int:
        """Rows written, weighted copies included."""
        return sum(self.written_by.values())

    def main_loss(self) -> str | None:
        """What cost this input the most records or threads (`27 quarantined as
        unknown_format`, `12 dropped as duplicate`), None when nothing was lost."""
        losses = [(count, f"quarantined as {code}") for code, count in self.quarantined_by.items()]
        losses += [(count, f"dropped as {reason}") for reason, count in self.dropped_by.items()]
        if not losses:
            return None
        count, what = max(losses, key=lambda loss: (loss[0], loss[1]))
        return f"{count:,} {what}"

    @property
    def deduplicated(self) -> int:
        return sum(self.dropped_by[reason] for reason in DEDUPLICATED)

    def merge_decided(self, other: InputAccount) -> None:
        """Add what was decided of the input's threads elsewhere (a run's part task):
        drops, rows written, copies and tokens."""
        self.dropped_by.update(other.dropped_by)
        self.written_by.update(other.written_by)
        self.copies += other.copies
        self.tokens += other.tokens

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "license": self.license,
            "records_read": self.records_read,
            "records_quarantined": self.quarantined,
            "quarantined_by": dict(sorted(self.quarantined_by.items())),
            "threads": self.threads,
            "threads_dropped": self.dropped,
            "dropped_by": dict(sorted(self.dropped_by.items())),
            "rows_written": self.written,
            "written_by_split": dict(sorted(self.written_by.items())),
            "weighted_copies": self.copies,
            "tokens": self.tokens,
        }


@dataclass(slots=True)
class FileCount:
    """One file's share of a reading: records read, converted, and quarantined per code."""

    read: int = 0
    converted: int = 0
    quarantined: Counter[str] = field(default_factory=Counter)

    def to_list(self) -> list[Any]:
        return [self.read, self.converted, dict(self.quarantined)]

    def add(self, counts: list[Any]) -> None:
        """Add a part's counts of the file (`to_list`'s form)."""
        self.read += counts[0]
        self.converted += counts[1]
        self.quarantined.update(counts[2])


@dataclass(slots=True)
class Account:
    """What a job read, quarantined, dropped (by reason) and wrote (per split).

    Invariants (`balanced`): records_read = records_converted + quarantined, and threads =
    written (weighted copies aside) + not_sharded + withheld + dropped."""

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
    dropped: Counter[str] = field(default_factory=Counter)
    written: Counter[str] = field(default_factory=Counter)
    """Threads written per split (weighted copies included)."""
    copies: int = 0
    """Extra rows written by mixing weights above 1."""
    not_sharded: int = 0
    """Threads kept but not written: the job has no shards (lint)."""
    withheld: int = 0
    """Threads kept but not written, because the lint gate failed (nothing is published)."""
    truncated: int = 0
    """Threads written shorter than read (cut at a message boundary to fit max_tokens)."""
    tokens_truncated: int = 0
    """The tokens those cuts left out (each thread once, weighted copies aside)."""
    tokens_dropped: Counter[str] = field(default_factory=Counter)
    """The tokens of the threads dropped after tokenizing, per reason (each thread once)."""
    tokens: int = 0
    trained_tokens: int = 0
    untrained: int = 0
    """Threads written with no trained token (num_trained 0)."""
    longest: int = 0
    """The most tokens of a written thread."""
    zero_weight_messages: int = 0
    """Assistant messages written that their source weighted 0 (rendered, not trained)."""
    inputs: list[InputAccount] = field(default_factory=list)
    """Per input of a run, in config order (empty for the other jobs)."""
    tagged: Counter[str] = field(default_factory=Counter)
    """What the curation stages found, tagged or rewrote (`stage:what`: `pii:redacted:EMAIL`,
    `language:en`, `quality:refusal` ...), in threads kept or not."""
    by_file: dict[str, FileCount] = field(default_factory=dict)
    """Each file's records read, converted and quarantined (the files no record of which
    converted are named in the summary)."""
    groups_kept: Counter[str] = field(default_factory=Counter)
    """Groups kept whole, by kind (`pair`: preference pairs; `group`: a task's instances,
    a prompt's completions; pipeline/mms/groups.py)."""
    groups_dropped: Counter[str] = field(default_factory=Counter)
    """Groups left out whole, by kind (no stage ever leaves a group with a member missing)."""

    def file(self, path: str) -> FileCount:
        """The counts of the file at `path` (made on first use)."""
        found = self.by_file.get(path)
        if found is None:
            found = self.by_file[path] = FileCount()
        return found

    def files_with_nothing_converted(self) -> list[tuple[str, FileCount]]:
        """The files whose records were read but none converted, in reading order."""
        return [(path, c) for path, c in self.by_file.items() if c.read and not c.converted]

    @property
    def quarantined_total(self) -> int:
        return sum(self.quarantined.values())

    @property
    def dropped_total(self) -> int:
        return sum(self.dropped.values())

    @property
    def kept(self) -> int:
        """Threads written, each counted once (weighted copies aside)."""
        return sum(self.written.values()) - self.copies

    @property
    def read_balanced(self) -> bool:
        return self.records_read == self.records_converted + self.quarantined_total

    @property
    def balanced(self) -> bool:
        return self.read_balanced and self.threads == (
            self.kept + self.not_sharded + self.withheld + self.dropped_total
        )

    def count_written(
        self, split: str, rows: pa.Table, weight: int = 1, source: InputAccount | None = None
    ) -> None:
        """Rows written to `split`, `weight` times each, with their token figures (also
        counted for the input `source` they came from, if given)."""
        self.written[split] += rows.num_rows * weight
        self.copies += rows.num_rows * (weight - 1)
        if source is not None:
            source.written_by[split] += rows.num_rows * weight
            source.copies += rows.num_rows * (weight - 1)
        if not rows.num_rows or not set(TOKEN_FIGURES) <= set(rows.column_names):
            return
        num_tokens, num_trained = rows["num_tokens"], rows["num_trained"]
        tokens = pc.sum(num_tokens).as_py() * weight
        self.tokens += tokens
        if source is not None:
            source.tokens += tokens
        self.trained_tokens += pc.sum(num_trained).as_py() * weight
        self.untrained += pc.sum(pc.equal(num_trained, 0)).as_py() * weight
        self.longest = max(self.longest, pc.max(num_tokens).as_py())
        self.zero_weight_messages += zero_weight_messages(rows["messages"]) * weight

    def count_groups(self, groups: Sequence[str | None], reasons: Sequence[str | None]) -> None:
        """Count each group of the rows (`groups[i]`, consecutive) as kept or dropped: a
        stage drops a group whole, so its first row's reason says for all of it."""
        for start, _ in group_runs(groups):
            group = groups[start]
            if group is not None:
                kept = reasons[start] is None
                (self.groups_kept if kept else self.groups_dropped)[group_kind(group)] += 1

    def merge_decided(self, other: Account) -> None:
        """Add the counts of threads decided elsewhere (a run's part task counts its part's
        drops, groups and written rows; reading is counted apart)."""
        self.dropped.update(other.dropped)
        self.tokens_dropped.update(other.tokens_dropped)
        self.written.update(other.written)
        self.groups_kept.update(other.groups_kept)
        self.groups_dropped.update(other.groups_dropped)
        self.copies += other.copies
        self.not_sharded += other.not_sharded
        self.truncated += other.truncated
        self.tokens_truncated += other.tokens_truncated
        self.tokens += other.tokens
        self.trained_tokens += other.trained_tokens
        self.untrained += other.untrained
        self.longest = max(self.longest, other.longest)
        self.zero_weight_messages += other.zero_weight_messages

    def withhold(self) -> None:
        """The gate failed: what would have been written is withheld instead."""
        self.withheld += self.kept
        self.written.clear()
        self.copies = self.tokens = self.trained_tokens = self.zero_weight_messages = 0
        self.truncated = self.tokens_truncated = self.untrained = self.longest = 0
        for source in self.inputs:
            source.written_by.clear()
            source.tokens = source.copies = 0

    def to_dict(self) -> dict[str, Any]:
        """The counts of a run's manifest (DESIGN §7)."""
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
            "threads_truncated": self.truncated,
            "tokens_truncated": self.tokens_truncated,
            "tokens_dropped": dict(sorted(self.tokens_dropped.items())),
            "tokens": self.tokens,
            "trained_tokens": self.trained_tokens,
            "zero_weight_messages": self.zero_weight_messages,
            "threads_tagged": dict(sorted(self.tagged.items())),
            "groups_kept": dict(sorted(self.groups_kept.items())),
            "groups_dropped": dict(sorted(self.groups_dropped.items())),
            "balanced": self.balanced,
            **({"inputs": [source.to_dict() for source in self.inputs]} if self.inputs else {}),
        }


def most_first(counts: Mapping[str, int]) -> list[tuple[str, int]]:
    """Counts per code or reason, the largest first (ties by name): how every summary,
    report and card lists them."""
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


def zero_weight_messages(messages: pa.ChunkedArray | pa.Array) -> int:
    """How many messages of a `messages` column have weight 0 (their source said: do not
    train them), counted in Arrow."""
    weights = pc.struct_field(pc.list_flatten(messages), "weight")
    return pc.sum(pc.equal(weights, 0)).as_py() or 0
