"""`mms pack`: an existing tokenized output packed into sequences of at most `seq_len`
tokens, written in the same output layout (shards per split, tokenizer, manifest, card).

Each split is read a window of rows at a time and packed best-fit-decreasing
(pipeline.loader.packing), so memory holds a window and the open sequences, not the split.
A row over `seq_len` follows the overlong policy: dropped (counted, listed in
quarantine/dropped.jsonl), cut at a message boundary and rendered again with the output's
own tokenizer (truncate), or an error naming it. Every other row lands in exactly one
packed row with its ids and labels unchanged; the same input and settings give the same
bytes."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.loader.packed_rows import PACKED_SCHEMA, TOKEN_COLUMNS, packed_table
from pipeline.loader.packing import WINDOW, BestFitPacker, PackingStats
from pipeline.mms import Thread, normalize_thread_dict
from pipeline.output.card import CardStats, dataset_card, training_facts
from pipeline.output.files import atomic_output, atomic_text_output, file_sha256
from pipeline.output.manifest import build_manifest, input_record, write_manifest
from pipeline.output.shards import SHARD_FILE, Shard, ShardWriter, split_files
from pipeline.output.tokenizer import shipped_renderer
from pipeline.tokenize import Renderer
from pipeline.tokenize.overlong import OverlongPolicy, fit_batch

STAGING_DIR = ".packing"
"""Where shards are written until every split is packed (under the output folder)."""
PACK_ROWS_PER_SHARD = 10_000
"""Packed sequences per shard (a sequence holds many threads)."""


class PackError(ValueError):
    """The folder cannot be packed (not a tokenized output), or a row is over `seq_len`
    under the `error` policy."""


@dataclass
class SplitPacking:
    """What packing one split did: rows read, packed, dropped (by reason), truncated."""

    rows_in: int = 0
    truncated: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    sequences: int = 0
    threads: int = 0
    tokens: int = 0
    trained: int = 0

    @property
    def balanced(self) -> bool:
        return self.rows_in == self.threads + sum(self.dropped.values())


@dataclass
class PackResult:
    """The packed output: its shards per split, and the counts of each split."""

    output: Path
    seq_len: int
    shards: dict[str, list[Shard]]
    splits: dict[str, SplitPacking]

    @property
    def stats(self) -> PackingStats:
        done = self.splits.values()
        return PackingStats(
            sequences=sum(s.sequences for s in done),
            rows=sum(s.threads for s in done),
            tokens=sum(s.tokens for s in done),
            seq_len=self.seq_len,
        )

    @property
    def balanced(self) -> bool:
        return all(split.balanced for split in self.splits.values())


def source_shards(source: Path) -> dict[str, list[Path]]:
    """The shards of a tokenized output per split, in name order (PackError if none, or if
    they hold no tokens)."""
    found = split_files(source / "data")
    if not found:
        raise PackError(f"{source} has no shards in data/ (an `mms run` or `mms tokenize` output)")
    for paths in found.values():
        names = set(pq.read_schema(paths[0]).names)
        if "position_ids" in names:
            raise PackError(f"{paths[0]} is packed already")
        if not set(TOKEN_COLUMNS) <= names:
            raise PackError(f"{paths[0]} holds no tokens: pack an output made with a tokenizer")
    return found


def pack_output(
    source: str | Path,
    output: str | Path,
    *,
    seq_len: int,
    overlong: OverlongPolicy = "drop",
    window: int = WINDOW,
    progress: Callable[[int], None] | None = None,
) -> PackResult:
    """Pack the tokenized output `source` into `output` (see the module docstring)."""
    source, output = Path(source), Path(output)
    if output.resolve() == source.resolve():
        raise PackError("the packed output must be another folder than the one packed")
    splits = source_shards(source)
    renderer = shipped_renderer(source / "tokenizer") if overlong == "truncate" else None
    result = PackResult(output, seq_len, {}, {})
    with atomic_output(output / "quarantine" / "dropped.jsonl") as dropped_out:
        pack_splits(
            splits,
            output,
            result,
            overlong=overlong,
            window=window,
            renderer=renderer,
            dropped_out=dropped_out,
            progress=progress,
        )
    _ship(source, output, result, overlong, window)
    return result


def pack_run_output(out: Path, seq_len: int, window: int = WINDOW) -> PackResult:
    """Replace the thread shards of a run's output `out` by their packed rows (the pack
    stage of a run, whose tokenize stage already kept every thread within `seq_len`)."""
    result = PackResult(out, seq_len, {}, {})
    splits = source_shards(out)
    nothing_dropped = io.BytesIO()  # under `error` a thread over seq_len raises instead
    pack_splits(splits, out, result, overlong="error", window=window, dropped_out=nothing_dropped)
    return result


def pack_splits(
    splits: dict[str, list[Path]],
    output: Path,
    result: PackResult,
    *,
    overlong: OverlongPolicy,
    window: int,
    dropped_out: BinaryIO,
    renderer: Renderer | None = None,
    progress: Callable[[int], None] | None = None,
) -> None:
    """Pack every split of `splits` into `output/data` (in `result`); the shards appear,
    replacing any there, only once every split is packed."""
    staging = output / STAGING_DIR
    shutil.rmtree(staging, ignore_errors=True)
    try:
        for split, paths in splits.items():
            counts = SplitPacking()
            writer = ShardWriter(
                staging,
                PACKED_SCHEMA,
                split=split,
                shard_rows=PACK_ROWS_PER_SHARD,
                empty_shard=False,
            )
            with writer:
                packer = _SplitPacker(result.seq_len, window, overlong, renderer, counts)
                columns = [*TOKEN_COLUMNS, *(["messages"] if overlong == "truncate" else [])]
                for table in packer.pack(_windows(paths, columns, window, counts, progress)):
                    writer.write(table)
                for line in packer.dropped_lines(split):
                    dropped_out.write(line)
            result.shards[split] = writer.shards
            result.splits[split] = counts
        _publish(staging, output / "data", result.shards)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _publish(staging: Path, data: Path, shards: dict[str, list[Shard]]) -> None:
    """Move the new shards into `data`, and remove any shard an earlier run left there:
    nothing appears until every split is packed."""
    data.mkdir(parents=True, exist_ok=True)
    names = {shard.name for split in shards.values() for shard in split}
    for path in data.iterdir():
        if SHARD_FILE.match(path.name) and path.name not in names:
            path.unlink()
    for name in sorted(names):
        os.replace(staging / name, data / name)


def _windows(
    paths: list[Path],
    columns: list[str],
    window: int,
    counts: SplitPacking,
    progress: Callable[[int], None] | None,
) -> Iterator[pa.Table]:
    """The split's rows, `window` at a time, only `columns` read (the tokens, and the
    messages when truncation renders them again)."""
    for path in paths:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=window, columns=columns):
            counts.rows_in += batch.num_rows
            if progress is not None:
                progress(counts.rows_in)
            yield pa.Table.from_batches([batch])


class _SplitPacker:
    """Feeds windows to a BestFitPacker, keeping the rows of open sequences between them."""

    def __init__(
        self,
        seq_len: int,
        window: int,
        overlong: OverlongPolicy,
        renderer: Renderer | None,
        counts: SplitPacking,
    ):
        self.seq_len, self.overlong, self.renderer, self.counts = (
            seq_len,
            overlong,
            renderer,
            counts,
        )
        self.packer = BestFitPacker(seq_len, max_open=window)
        self.kept: pa.Table | None = None  # rows of the open sequences, then the window's
        self.numbers: list[int] = []  # the packer's number of each row of `kept`
        self.drops: list[tuple[str, str, int]] = []

    def pack(self, windows: Iterator[pa.Table]) -> Iterator[pa.Table]:
        for table in windows:
            rows = self._fitting(table)
            yield from self._place(rows)
        if self.kept is not None:
            yield from self._emit(self.packer.finish())

    def _place(self, rows: pa.Table) -> Iterator[pa.Table]:
        """Place a window; keep its rows and those of the sequences still open."""
        still_open = self.packer.open_rows()
        carried = None
        if still_open:
            where = {number: index for index, number in enumerate(self.numbers)}
            carried = self.kept.take(pa.array([where[n] for n in still_open], pa.int64()))
        start = self.packer.placed
        closed = self.packer.place(rows["num_tokens"].to_pylist())
        self.kept = pa.concat_tables([carried, rows]) if carried is not None else rows
        self.numbers = still_open + list(range(start, start + rows.num_rows))
        yield from self._emit(closed)

    def _emit(self, sequences: list[list[int]]) -> Iterator[pa.Table]:
        if not sequences:
            return
        where = {number: index for index, number in enumerate(self.numbers)}
        local = [[where[number] for number in sequence] for sequence in sequences]
        table = packed_table(self.kept, local)
        self.counts.sequences += table.num_rows
        self.counts.threads += sum(len(sequence) for sequence in sequences)
        self.counts.tokens += pc.sum(table["num_tokens"]).as_py()
        self.counts.trained += pc.sum(table["num_trained"]).as_py()
        yield table

    def _fitting(self, table: pa.Table) -> pa.Table:
        """The window's rows that fit, truncated ones included; others counted as dropped
        (or PackError under `error`)."""
        over = pc.greater(table["num_tokens"], self.seq_len)
        if not pc.any(over).as_py():
            return table.select(TOKEN_COLUMNS)
        long = table.filter(over)
        if self.overlong == "error":
            row = long.slice(0, 1).to_pylist()[0]
            raise PackError(
                f"thread {row['id']} has {row['num_tokens']:,} tokens, more than --seq-len "
                f"{self.seq_len:,}: use --overlong drop or truncate, or a longer --seq-len"
            )
        fits = table.filter(pc.invert(over)).select(TOKEN_COLUMNS)
        if self.overlong == "drop":
            for row in long.select(["id", "num_tokens"]).to_pylist():
                self.drops.append((row["id"], "overlong", row["num_tokens"]))
            self.counts.dropped["overlong"] += long.num_rows
            return fits
        return pa.concat_tables([fits, self._truncated(long)])

    def _truncated(self, long: pa.Table) -> pa.Table:
        assert self.renderer is not None
        threads = [_thread(row) for row in long.select(["id", "messages"]).to_pylist()]
        encoded = self.renderer.encode_batch(threads)
        fit = fit_batch(threads, encoded, self.renderer, max_tokens=self.seq_len, policy="truncate")
        for drop in fit.drops:
            self.drops.append((drop.thread.id, drop.code, drop.num_tokens))
            self.counts.dropped[drop.code] += 1
        self.counts.truncated += len(fit.truncated)
        if fit.truncated_encoded is None:
            return long.slice(0, 0).select(TOKEN_COLUMNS)
        batch = fit.truncated_encoded
        return pa.table(
            {
                "id": [thread.id for thread in fit.truncated],
                "input_ids": batch.input_ids,
                "labels": batch.labels,
                "num_tokens": batch.num_tokens,
                "num_trained": batch.num_trained,
            }
        ).cast(long.select(TOKEN_COLUMNS).schema)

    def dropped_lines(self, split: str) -> Iterator[bytes]:
        for thread_id, code, tokens in self.drops:
            yield orjson.dumps(
                {"id": thread_id, "split": split, "stage": "pack", "code": code, "tokens": tokens},
                option=orjson.OPT_APPEND_NEWLINE,
            )


def _thread(row: dict[str, Any]) -> Thread:
    return Thread.from_dict(normalize_thread_dict({"id": row["id"], "messages": row["messages"]}))


def _ship(source: Path, output: Path, result: PackResult, overlong: str, window: int) -> None:
    """The tokenizer of the source, and the manifest of the packed output."""
    if output.joinpath("tokenizer").exists():
        shutil.rmtree(output / "tokenizer")
    shutil.copytree(source / "tokenizer", output / "tokenizer")
    source_manifest = source / "manifest.json"
    inputs = [
        input_record(path, "parquet", recorded_as=f"{source.name}/data/{path.name}")
        for path in sorted((source / "data").glob("*.parquet"))
    ]
    stats = result.stats.to_dict()
    counts: dict[str, Any] = {
        "threads_in": sum(s.rows_in for s in result.splits.values()),
        "threads_packed": stats["threads"],
        "threads_truncated": sum(s.truncated for s in result.splits.values()),
        "threads_dropped": dict(sum((s.dropped for s in result.splits.values()), Counter())),
        "sequences": stats["sequences"],
        "tokens": stats["tokens"],
        "trained_tokens": sum(s.trained for s in result.splits.values()),
        "padding": stats["padding"],
        "fill": stats["fill"],
        "threads_per_sequence": stats["threads_per_sequence"],
        "balanced": result.balanced,
    }
    config = {
        "pack": {"seq_len": result.seq_len, "strategy": "bfd", "window": window},
        "overlong": overlong,
        "source_manifest_sha256": file_sha256(source_manifest)
        if source_manifest.is_file()
        else None,
    }
    tokenizer_record = orjson.loads((output / "tokenizer" / "mms_special_tokens.json").read_bytes())
    manifest = build_manifest(
        inputs=inputs,
        config=config,
        config_digest=_json_sha256(config),
        counts=counts,
        shards=result.shards,
        tokenizer={
            "path": "tokenizer/tokenizer.json",
            "sha256": file_sha256(output / "tokenizer" / "tokenizer.json"),
            "renderer": tokenizer_record["renderer"],
            "label_policy": tokenizer_record.get("label_policy"),
            "pad_token": tokenizer_record["pad_token"],
            "vocabulary": tokenizer_record["vocabulary"],
        },
        reports=[],
    )
    write_manifest(output / "manifest.json", manifest)
    _card(source, output, result, stats, tokenizer_record)


def _card(
    source: Path,
    output: Path,
    result: PackResult,
    stats: dict[str, Any],
    tokenizer_record: dict[str, Any],
) -> None:
    """README.md: the dataset card of the packed output."""
    card_stats = CardStats(
        threads=stats["threads"],
        rows={split: sum(s.rows for s in shards) for split, shards in result.shards.items()},
        bytes={split: sum(s.bytes for s in shards) for split, shards in result.shards.items()},
        renderer=tokenizer_record["renderer"],
        tokens=stats["tokens"],
        trained_tokens=sum(s.trained for s in result.splits.values()),
        training=training_facts(tokenizer_record, zero_weight_messages=0),
        packing=stats,
        formats={},
        capabilities={},
        lint=None,
    )
    card = dataset_card(
        name=f"{source.name} packed",
        description=f"The tokenized threads of `{source.name}`, packed by `mms pack` into "
        f"rows of at most {result.seq_len:,} tokens.",
        license="other",
        tags=["mms", "packed"],
        splits={
            split: [f"data/{s.name}" for s in shards] for split, shards in result.shards.items()
        },
        features=PACKED_SCHEMA,
        stats=card_stats,
        how_to_load=output.name,
    )
    with atomic_text_output(output / "README.md") as handle:
        handle.write(card)


def _json_sha256(value: Any) -> str:
    """sha256 of a value's canonical JSON (sorted keys)."""
    return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()
