"""`mms pack`: an existing tokenized output packed into sequences of at most `seq_len`
tokens, written in the same output layout (shards per split, tokenizer, manifest, card).

The job is the pack stage (pipeline/stages/pack.py) between the source's shards, read in
order, and the packed shards: a row over `seq_len` is dropped (counted, listed in
quarantine/dropped.jsonl), cut at a message boundary and rendered again with the output's
own tokenizer (truncate), or an error naming it. Every other row lands in exactly one
packed row with its ids and labels unchanged; the same input and settings give the same
bytes, whatever the source's shard files."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.output.card import CardStats, dataset_card, license_fields, training_facts
from pipeline.output.files import (
    atomic_output,
    atomic_text_output,
    discard_if_none,
    file_sha256,
)
from pipeline.output.manifest import build_manifest, file_entries, input_record, write_manifest
from pipeline.output.shards import SHARD_FILE, Shard, ShardWriter, split_files
from pipeline.output.tokenizer import shipped_renderer
from pipeline.packing import PACKED_SCHEMA, SEQUENCES_PER_SHARD, TOKEN_COLUMNS, WINDOW, PackingStats
from pipeline.stages.pack import Pack, PackError, SplitPacking
from pipeline.tokenize.overlong import OverlongPolicy

STAGING_DIR = ".packing"
"""Where shards are written until every split is packed (under the output folder)."""


@dataclass
class PackResult:
    """The packed output: its shards per split, and the counts of each split."""

    output: Path
    seq_len: int
    shards: dict[str, list[Shard]]
    splits: dict[str, SplitPacking]
    stats: PackingStats

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
    """Pack the tokenized output `source` into `output` (see the module docstring): a
    source (the shards of each split, in order), the pack stage, and a sink (the packed
    shards, published once every split is packed, and quarantine/dropped.jsonl)."""
    source, output = Path(source), Path(output)
    if output.resolve() == source.resolve():
        raise PackError("the packed output must be another folder than the one packed")
    splits = source_shards(source)
    renderer = shipped_renderer(source / "tokenizer") if overlong == "truncate" else None
    stage = Pack(seq_len, window=window, overlong=overlong, renderer=lambda: renderer)
    columns = [*TOKEN_COLUMNS, *(["messages"] if overlong == "truncate" else [])]
    shards: dict[str, list[Shard]] = {}
    staging = output / STAGING_DIR
    shutil.rmtree(staging, ignore_errors=True)
    try:
        dropped = 0
        with atomic_output(output / "quarantine" / "dropped.jsonl") as dropped_out:
            for split, paths in splits.items():
                rows = _source_rows(paths, columns, window)
                shards[split] = _pack_split(stage, split, rows, staging, progress)
                lines = list(stage.dropped_lines(split))
                dropped_out.writelines(lines)
                dropped += len(lines)
            _publish(staging, output / "data", shards)
        discard_if_none(output / "quarantine" / "dropped.jsonl", dropped)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    counts = {split: stage.counts(split) for split in splits}
    result = PackResult(output, seq_len, shards, counts, stage.stats())
    _ship(source, output, result, overlong, window)
    return result


def _source_rows(paths: list[Path], columns: list[str], window: int) -> Iterator[pa.Table]:
    """A split's rows in order, at most `window` at a time, only `columns` read (the
    tokens, and the messages when truncation renders them again)."""
    for path in paths:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=window, columns=columns):
            yield pa.Table.from_batches([batch])


def _pack_split(
    stage: Pack,
    split: str,
    rows: Iterator[pa.Table],
    staging: Path,
    progress: Callable[[int], None] | None,
) -> list[Shard]:
    """One split through the pack stage into shards under `staging`."""
    writer = ShardWriter(
        staging, PACKED_SCHEMA, split=split, shard_rows=SEQUENCES_PER_SHARD, empty_shard=False
    )
    with writer:
        for table in rows:
            for packed in stage.reshape(split, table):
                writer.write(packed)
            if progress is not None:
                progress(stage.rows_read())
        for packed in stage.flush(split):
            writer.write(packed)
    return writer.shards


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
        files=file_entries(output, _published(output)),
    )
    write_manifest(output / "manifest.json", manifest)
    _card(source, output, result, stats, tokenizer_record)


def _published(output: Path) -> list[str]:
    """The files of a packed output besides its shards, card and manifest: the tokenizer
    and what the quarantine holds."""
    folders = [output / "tokenizer", output / "quarantine"]
    return [
        path.relative_to(output).as_posix()
        for folder in folders
        if folder.is_dir()
        for path in sorted(folder.iterdir())
        if path.is_file()
    ]


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
    inputs = _source_inputs(source)
    card = dataset_card(
        name=f"{source.name} packed",
        description=f"The tokenized threads of `{source.name}`, packed by `mms pack` into "
        f"rows of at most {result.seq_len:,} tokens.",
        license=license_fields([entry.get("license") for entry in inputs]),
        sources=[entry["path"] for entry in inputs],
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


def _source_inputs(source: Path) -> list[dict[str, Any]]:
    """The inputs the packed output's source was built from (its manifest's per-input
    counts), for the card's license and sources; none when it does not say."""
    manifest = source / "manifest.json"
    if not manifest.is_file():
        return []
    return list(orjson.loads(manifest.read_bytes()).get("counts", {}).get("inputs", []))


def _json_sha256(value: Any) -> str:
    """sha256 of a value's canonical JSON (sorted keys)."""
    return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()
