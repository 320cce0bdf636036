"""`mms verify` of a packed output (DESIGN §7). Every packed row is checked as packed:
lengths that add up, positions restarting at 0 for every thread, labels that are -100 or
the token, one media per placeholder, and (an `mms pack` output) the thread counts its
manifest gives against its rows and its drop list.

A packed sequence holds no messages, so its threads are checked on the rows the pack read:
the output it was packed from (`--source`, else the folder its manifest's inputs name,
beside the packed one), taken only when its shards are the very files the manifest lists
(sha256). Those rows are rendered again (renderer and chat template) as any SFT row is,
each one over `seq_len` is cut again as the pack's overlong policy cuts it (its kept
messages through the chat template too), and every source row must be in the packed rows
exactly once (its id, ids, labels and media, as one thread's slice of a sequence) or in
the drop list with its code: records in = threads packed + dropped. Thread ids need not
be unique (two files of one source may number their records alike), so threads are
matched by what they hold, not by id."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import orjson
import pyarrow.parquet as pq

from pipeline.mms.media_columns import MEDIA_SHARD_COLUMNS, kind_columns
from pipeline.objectives.views import SftView, sft_views
from pipeline.output.files import file_sha256
from pipeline.output.shards import split_files
from pipeline.output.tokenizer import shipped_renderer
from pipeline.quarantine import DROPPED_FILE
from pipeline.tokenize import IGNORE, TokenizerLoadError
from pipeline.tokenize.overlong import fit_batch
from pipeline.tokenize.renderer import Renderer

from pipeline.jobs.verify import (  # isort: skip  (verify imports this module lazily)
    ROW_BATCH,
    Problem,
    TemplateCheck,
    Verification,
    _check_rows,
    _check_template,
    _media_problem,
    _placed_media,
    _placeholders,
    _rows,
    _thread,
)

Media = list[tuple[str, list[dict[str, Any]]]]
"""A thread's media cells per media column (`images` ...), in column order."""


def check_packed_output(
    out: Path,
    manifest: dict[str, Any],
    shards: list[tuple[str, Path]],
    result: Verification,
    *,
    source: Path | None,
    render: bool,
    template: bool,
    progress: Callable[[str, int], None] | None,
) -> None:
    """Check the packed output `out` (see the module docstring): its rows as packed, its
    counts, and with its source its threads against the rows they were packed from."""
    placeholders = _placeholders(out) or {}
    threads = _check_structure(shards, result, placeholders)
    packing = _pack_config(manifest)
    if packing is None:
        result.notes.append(
            "packed rows: checked as packed (positions, lengths, labels, media); a run's "
            "packed threads keep no messages, so they are not rendered again"
        )
        return
    _check_counts(out, manifest, threads, result)
    splits = _source_splits(out, manifest, source, result)
    if splits is None:
        return
    labelled = [(f"source {split}", path) for split, paths in splits.items() for path in paths]
    if render:
        _check_rows(out, labelled, result, progress)
    if template:
        _check_template(out, labelled, result)
    try:
        renderer = shipped_renderer(out / "tokenizer")
    except TokenizerLoadError as err:
        result.problems.append(Problem("tokenizer/", str(err)))
        return
    check = TemplateCheck.load(out / "tokenizer", result) if template else None
    expected = _Expected(*packing, renderer, placeholders, check)
    for split, paths in splits.items():
        for path in paths:
            expected.read(split, path, result)
    _match(out, shards, expected, placeholders, result)


def _check_structure(
    shards: list[tuple[str, Path]], result: Verification, placeholders: dict[int, str]
) -> int:
    """Every packed row holds whole threads and one media per placeholder; the threads
    the rows hold, in all."""
    threads = 0
    for split, rows in _rows(shards):
        for index, row in enumerate(rows):
            where = f"{split} packed row {index} ({', '.join(row['ids'][:2])} ...)"
            what = _packed_problem(row) or _media_problem(row, placeholders)
            if what:
                result.problems.append(Problem(where, what))
            threads += len(row["ids"])
        result.count("packed rows checked", len(rows))
    return threads


def _packed_problem(row: dict[str, Any]) -> str | None:
    """What does not hold in one packed row's lengths, positions and labels."""
    lengths, tokens = row["seq_lens"], row["input_ids"]
    if len(row["ids"]) != len(lengths):
        return "ids and seq_lens differ in length"
    if not (sum(lengths) == row["num_tokens"] == len(tokens) == len(row["labels"])):
        return "seq_lens, num_tokens, input_ids and labels disagree on the length"
    if row["position_ids"] != [p for n in lengths for p in range(n)]:
        return "position_ids do not restart at 0 for every thread"
    trained = [pair for pair in zip(row["labels"], tokens, strict=True) if pair[0] != IGNORE]
    if len(trained) != row["num_trained"] or any(label != token for label, token in trained):
        return "labels are not -100 or the token, or num_trained differs"
    return None


def _pack_config(manifest: dict[str, Any]) -> tuple[int, str] | None:
    """The seq_len and overlong policy of an `mms pack` output (None: a run's)."""
    config = manifest.get("config") or {}
    pack, overlong = config.get("pack"), config.get("overlong")
    if not isinstance(pack, dict) or not isinstance(pack.get("seq_len"), int):
        return None
    return pack["seq_len"], str(overlong)


def _dropped(out: Path) -> Counter[tuple[str, str, str]]:
    """The pack's drop list: (split, thread id, code) of every thread it left out."""
    path = out / DROPPED_FILE
    lines = path.read_bytes().splitlines() if path.is_file() else []
    entries = [orjson.loads(line) for line in lines if line.strip()]
    return Counter(
        (str(entry.get("split")), str(entry.get("id")), str(entry.get("code")))
        for entry in entries
        if entry.get("stage") == "pack"
    )


def _check_counts(out: Path, manifest: dict[str, Any], threads: int, result: Verification) -> None:
    """The manifest's thread counts against the rows (threads packed) and the drop list
    (threads dropped), and in = packed + dropped."""
    counts = manifest.get("counts") or {}
    dropped = sum(_dropped(out).values())
    stated = sum((counts.get("threads_dropped") or {}).values())
    if counts.get("threads_packed") != threads:
        result.problems.append(
            Problem(
                "manifest.json",
                f"threads_packed is {counts.get('threads_packed')}, the rows hold {threads}",
            )
        )
    if stated != dropped:
        result.problems.append(
            Problem(DROPPED_FILE, f"lists {dropped} dropped threads, the manifest {stated}")
        )
    if counts.get("threads_in") != threads + dropped:
        result.problems.append(
            Problem(
                "manifest.json",
                f"threads_in is {counts.get('threads_in')}, not the {threads} packed "
                f"+ {dropped} dropped",
            )
        )
    result.count("packed threads counted", threads)


def _source_splits(
    out: Path, manifest: dict[str, Any], given: Path | None, result: Verification
) -> dict[str, list[Path]] | None:
    """The shards per split of the output `out` was packed from, when they are the files
    its manifest lists; None (a note, or a problem when the source was given) else."""
    inputs = [entry for entry in manifest.get("inputs") or [] if isinstance(entry, dict)]
    recorded = [PurePosixPath(str(entry.get("path"))) for entry in inputs]
    folder = given
    if folder is None and recorded and len(recorded[0].parts) > 2:
        folder = out.parent / recorded[0].parts[0]
    if folder is None or not (folder / "data").is_dir():
        result.notes.append(
            "packed threads not rendered again: the output they were packed from is not "
            f"beside {out.name} (name it with --source)"
        )
        return None
    present = {path.name: path for path in (folder / "data").glob("*.parquet")}
    wanted = {
        name.name: str(entry.get("sha256")) for name, entry in zip(recorded, inputs, strict=True)
    }
    same = set(present) == set(wanted) and all(
        file_sha256(present[name]) == digest for name, digest in wanted.items()
    )
    if not same:
        what = f"{folder} holds other shards than those packed (the manifest's inputs)"
        if given is not None:
            result.problems.append(Problem("--source", what))
        else:
            result.notes.append(f"packed threads not rendered again: {what}")
        return None
    return split_files(folder / "data")


def _key(thread_id: str, ids: list[int], labels: list[int], media: Media) -> bytes:
    """What identifies a packed thread: its id, ids, labels and media cells."""
    digest = hashlib.sha256(orjson.dumps([thread_id, ids, labels]))
    for column, cells in media:
        digest.update(column.encode())
        for cell in cells:
            digest.update(orjson.dumps(cell.get("path")))
            data = cell.get("bytes")
            digest.update(b"-" if data is None else hashlib.sha256(data).digest())
    return digest.digest()


def _cut(media: Media, ids: list[int], placeholders: dict[int, str]) -> Media:
    """Each column's first cells, one per placeholder of its kind that `ids` hold."""
    kinds = {column: kind for kind, column in MEDIA_SHARD_COLUMNS.items()}
    return [
        (column, cells[: sum(1 for i in ids if placeholders.get(i) == kinds[column])])
        for column, cells in media
    ]


@dataclass
class _Expected:
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
        placed = [_placed_media(row, self.placeholders) for row in rows]
        views = [sft_views(row, self.placeholders or None)[0] for row in placed]
        threads = [_thread(view) for view in views]
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
    kinds = {column: kind for kind, column in MEDIA_SHARD_COLUMNS.items()}
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


def _match(
    out: Path,
    shards: list[tuple[str, Path]],
    expected: _Expected,
    placeholders: dict[int, str],
    result: Verification,
) -> None:
    """Every source row's thread in the packed rows exactly once, or dropped with the
    code its policy gives; nothing else in them."""
    found: dict[str, Counter[bytes]] = {}
    names: dict[bytes, str] = {}
    for split, rows in _rows(shards):
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
    listed = _dropped(out)
    for (split, name, code), count in sorted((expected.drops - listed).items()):
        result.problems.append(
            Problem(f"source {split} row {name}", f"dropped ({code}) but not listed {count}x")
        )
    for (split, name, code), count in sorted((listed - expected.drops).items()):
        result.problems.append(
            Problem(DROPPED_FILE, f"lists {split} thread {name} as {code} {count}x too many")
        )
    result.count("packed threads matched to their source rows", matched)
