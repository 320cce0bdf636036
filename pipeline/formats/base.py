"""What every input format adapter provides: a name, a one-line summary, a sniff verdict
for auto-detection, and the conversion of one record into threads; plus the options
that steer conversions."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal, NamedTuple

from pipeline.formats.field_mapping import FieldMapping, FileMappings
from pipeline.mms import Thread
from pipeline.quarantine import Rejection
from pipeline.sources import Record

PARALLEL_CALLS = ("sequence", "jsonl")
REASONING = ("keep", "drop")
MULTIMODAL = ("keep", "drop", "placeholder")
OASST_PATHS = ("all", "top")


@dataclass(frozen=True, slots=True)
class ConvertOptions:
    """Choices a curator makes about lossy or ambiguous mappings.

    parallel_calls: `sequence` writes call1, result1, call2, result2; `jsonl` writes one
    `name:jsonl` message per tool with a line per call. reasoning: `keep` as an assistant
    `reasoning` message, or `drop`. multimodal: `keep` images, audio and video as media
    parts of their messages (DESIGN §3), `drop` them (noted in meta) or write a
    `[image]`-style `placeholder`. oasst_paths: every root-to-leaf path, or only the
    `top`-ranked one. expand_selects: for prompt templates with select variables, up to
    this many threads per prompt, one per allowed value (0 renders only the defaults).
    mapping: what the `mapped` format reads where (one for every input, or per file).
    """

    parallel_calls: Literal["sequence", "jsonl"] = "sequence"
    reasoning: Literal["keep", "drop"] = "keep"
    multimodal: Literal["keep", "drop", "placeholder"] = "keep"
    oasst_paths: Literal["all", "top"] = "all"
    expand_selects: int = 0
    mapping: FieldMapping | FileMappings | None = None


class Sniff(NamedTuple):
    """How sure a format is that a record is its own (0..1) and why, for `--detect`."""

    score: float
    reason: str


@dataclass(frozen=True, slots=True)
class InputFormat:
    """An input format. `sniff` scores a parsed record from 0 (not this format) to 1
    (certainly this format), with the reason; `to_threads` converts a record or raises
    RecordRejected.

    `group` is for formats whose conversations span several records (OASST's flat
    message exports): ingest passes it one file's stream (records and read rejections)
    and converts what it yields. It passes items through as they are, may quarantine a
    record by yielding a Rejection in its place, and yields each merged conversation as
    `(merged record, the raw records it stands for)`, so every raw record is still counted
    once, and each is quarantined on its own line if the merged one fails. It must stream:
    hold one conversation at a time, never the whole file.
    """

    name: str
    summary: str
    sniff: Callable[[object], Sniff]
    to_threads: Callable[[Record, ConvertOptions], list[Thread]]
    group: (
        Callable[
            [Iterator[Record | Rejection]],
            Iterator[Record | Rejection | tuple[Record, tuple[Record, ...]]],
        ]
        | None
    ) = None
    fallback: bool = False
    """Read a record only when no other format accepts it (a reading by structure alone):
    detection never prefers it to a specific format."""
