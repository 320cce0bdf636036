"""A packed output's threads matched to the source rows they were packed from
(`match_threads`). Each source row is what `Expected` reads: a row over `seq_len` cut
again as the pack's overlong policy cuts it (its kept messages through the chat template
too), or dropped; and every source row must be in the packed rows exactly once (its id,
ids, labels and media, as one thread's slice of a sequence) or in the drop list with its
code: records in = threads packed + dropped. Thread ids need not be unique (two files of
one source may number their records alike), so threads are matched by what they hold, not
by id."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pyarrow.parquet as pq

from pipeline.jobs.verify.base import ROW_BATCH, Problem, Verification
from pipeline.jobs.verify.rows import read_rows, view_thread, with_placed_media
from pipeline.jobs.verify.template import TemplateCheck
from pipeline.mms.media_columns import COLUMN_KINDS, kind_columns
from pipeline.objectives.views import SftView, sft_views
from pipeline.quarantine import DROPPED_FILE
from pipeline.tokenize.overlong import fit_batch
from pipeline.tokenize.renderer import Renderer

Media = list[tuple[str, list[dict[str, Any]]]]
"""A thread's media cells per media column (`images` ...), in column order."""


def dropped_threads(out: Path) -> Counter[tuple[str, str, str]]:
    """The pack's drop list: (split, thread id, code) of every thread it left out."""
    path = out / DROPPED_FILE
    lines = path.read_bytes().splitlines() if path.is_file() else []
    entries = [orjson.loads(line) for line in lines if line.strip()]
    return Counter(
        (str(entry.get("split")), str(entry.get("id")), str(entry.get("code")))
        for entry in entries
        if entry.get("stage") == "pack"
    )


def _key(thread_id: str, ids: list[int], labels: list[int], media: Media) -> bytes:
    """What identifies a packed thread: its id, ids, labels and media cells."""
    digest = hashlib.sha256(orjson.dumps([thread_id, ids, labels]))
    for column, cells in media:
        digest.update(column.encode())
        for cell in cells:
            _add_cell(digest, cell)
    return digest.digest()


def _add_cell(digest: Any, cell: dict[str, Any] | list[Any] | None) -> None:
    """A media cell into `digest`: a `{bytes, path}` cell, a frame list (a `video_frames`
    entry: its frames in order) or null (a video whose frames are in `video_frames`)."""
    if cell is None:
        digest.update(b"null")
    elif isinstance(cell, list):
        digest.update(b"[%d" % len(cell))
        for frame in cell:
            _add_cell(digest, frame)
    else:
        digest.update(orjson.dumps(cell.get("path")))
        data = cell.get("bytes")
        digest.update(b"-" if data is None else hashlib.sha256(data).digest())


def _cut(media: Media, ids: list[int], placeholders: dict[int, str]) -> Media:
    """Each column's first cells, one per placeholder of its kind that `ids` hold."""
    kinds = COLUMN_KINDS
    return [
        (column, cells[: sum(1 for i in ids if placeholders.get(i) == kinds[column])])
        for column, cells in media
    ]


@dataclass
class Expected:
    """The packed threads and the drops the source rows call for, under the pack's
    `seq_len` and overlong policy (a row over it cut again, `fit_batch`)."""

    seq_len: int
    overlong: str
    renderer: Renderer
    placeholders: dict[int, str]
    template: TemplateCheck | None
    threads: dict[str, Counter[bytes]] = field(default_factory=dict)
    names: dict[bytes, str] = field(default_factory=dict)
    drops: Counter[tuple[str, str, str]] = field(default_factory=Counter)

    def read(self, split: str, path: Path, result: Verification) -> None:
        """The rows of one source shard of `split`."""
        wanted = self.threads.setdefault(split, Counter())
        for batch in pq.ParquetFile(path).iter_batches(batch_size=ROW_BATCH):
            long: list[dict[str, Any]] = []
            for row in batch.to_pylist():
                if row["num_tokens"] > self.seq_len:
                    long.append(row)
                    continue
                media = [(column, row[column] or []) for column in kind_columns(row)]
                self._want(wanted, row["id"], row["input_ids"], row["labels"], media)
            if long:
                self._overlong(split, long, wanted, result)

    def _want(
        self, wanted: Counter[bytes], name: str, ids: list[int], labels: list[int], media: Media
    ) -> None:
        key = _key(name, ids, labels, media)
        wanted[key] += 1
        self.names[key] = name

    def _overlong(
        self,
        split: str,
        rows: list[dict[str, Any]],
        wanted: Counter[bytes],
        result: Verification,
    ) -> None:
        """Source rows over seq_len: dropped, or cut at a message boundary and rendered
        again, their kept messages through the chat template (truncate)."""
        if self.overlong == "drop":
            self.drops.update((split, row["id"], "overlong") for row in rows)
            return
        if self.overlong != "truncate":
            for row in rows:
                result.problems.append(
                    Problem(
                        f"source {split} row {row['id']}",
                        f"{row['num_tokens']} tokens, over seq_len {self.seq_len}, which "
                        f"--overlong {self.overlong} packs in no way",
                    )
                )
            return
        placed = [with_placed_media(row, self.placeholders) for row in rows]
        views = [sft_views(row, self.placeholders or None)[0] for row in placed]
        threads = [view_thread(view) for view in views]
        encoded = self.renderer.encode_batch(threads)
        fit = fit_batch(threads, encoded, self.renderer, max_tokens=self.seq_len, policy="truncate")
        self.drops.update((split, drop.thread.id, drop.code) for drop in fit.drops)
        if fit.truncated_encoded is None:
            return
        for index, (thread, at) in enumerate(zip(fit.truncated, fit.truncated_rows, strict=True)):
            row, cut = rows[at], fit.truncated_encoded[index]
            ids, labels = list(cut.input_ids), list(cut.labels)
            media = _cut([(c, row[c] or []) for c in kind_columns(row)], ids, self.placeholders)
            self._want(wanted, thread.id, ids, labels, media)
            if self.template is not None:
                kept = row["messages"][: len(thread.messages)]  # as stored: what a trainer reads
                self.template(f"source {split}", SftView(f"{thread.id} (cut)", kept, ids, labels))


def _slices(row: dict[str, Any], placeholders: dict[int, str]) -> Iterator[tuple[str, bytes]]:
    """Each thread of a packed row: its id and its key (`_key`), its slice of the row's
    tokens and of its media cells."""
    kinds = COLUMN_KINDS
    columns = kind_columns(row)
    taken = dict.fromkeys(columns, 0)
    start = 0
    for name, length in zip(row["ids"], row["seq_lens"], strict=False):
        ids = row["input_ids"][start : start + length]
        labels = row["labels"][start : start + length]
        media: Media = []
        for column in columns:
            count = sum(1 for i in ids if placeholders.get(i) == kinds[column])
            media.append((column, (row[column] or [])[taken[column] : taken[column] + count]))
            taken[column] += count
        start += length
        yield name, _key(name, ids, labels, media)


def match_threads(
    out: Path,
    shards: list[tuple[str, Path]],
    expected: Expected,
    placeholders: dict[int, str],
    result: Verification,
) -> None:
    """Every source row's thread in the packed rows exactly once, or dropped with the
    code its policy gives; nothing else in them."""
    found: dict[str, Counter[bytes]] = {}
    names: dict[bytes, str] = {}
    for split, rows in read_rows(shards):
        held = found.setdefault(split, Counter())
        for row in rows:
            for name, key in _slices(row, placeholders):
                held[key] += 1
                names[key] = name
    matched = 0
    for split in dict.fromkeys([*expected.threads, *found]):
        wanted, held = expected.threads.get(split, Counter()), found.get(split, Counter())
        matched += sum((wanted & held).values())
        for key, count in sorted((held - wanted).items(), key=lambda item: names[item[0]]):
            result.problems.append(
                Problem(
                    f"{split} thread {names[key]}",
                    f"{count} packed slice(s) that are no source row's tokens, labels and "
                    "media (altered, or packed twice)",
                )
            )
        for key, count in sorted((wanted - held).items(), key=lambda item: expected.names[item[0]]):
            result.problems.append(
                Problem(
                    f"source {split} row {expected.names[key]}",
                    f"its thread is missing from the packed rows ({count}x) and not dropped",
                )
            )
    listed = dropped_threads(out)
    for (split, name, code), count in sorted((expected.drops - listed).items()):
        result.problems.append(
            Problem(f"source {split} row {name}", f"dropped ({code}) but not listed {count}x")
        )
    for (split, name, code), count in sorted((listed - expected.drops).items()):
        result.problems.append(
            Problem(DROPPED_FILE, f"lists {split} thread {name} as {code} {count}x too many")
        )
    result.count("packed threads matched to their source rows", matched)
