"""`mms pack`: an existing tokenized output packed into sequences of at most `seq_len`
tokens, written in the same output layout (shards per split, tokenizer, manifest, card).

The job is the pack stage (pipeline/stages/pack.py) between the source's shards, read in
order, and the packed shards: a row over `seq_len` is dropped (counted, listed in
quarantine/dropped.jsonl), cut at a message boundary and rendered again with the output's
own tokenizer (truncate), or an error naming it. Every other row lands in exactly one
packed row with its ids and labels unchanged; the same input and settings give the same
bytes, whatever the source's shard files."""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.media.check import MEDIA_DIR, content_address
from pipeline.mms import MEDIA_COLUMN
from pipeline.mms.media_columns import FRAMES_COLUMN, column_type, kind_columns
from pipeline.objectives import objective_of
from pipeline.output.card import CardStats, dataset_card, license_fields, local_dataset_path
from pipeline.output.card_training import training_facts, where_media_are
from pipeline.output.files import (
    atomic_output,
    atomic_text_output,
    discard_if_none,
    file_sha256,
)
from pipeline.output.folder import OutputFolder, Publication
from pipeline.output.manifest import (
    CARD_FILE,
    DATA_DIR,
    MANIFEST_FILE,
    build_manifest,
    card_entry,
    file_entries,
    input_record,
    json_sha256,
    published_files,
    write_manifest,
)
from pipeline.output.overlap import refuse_inputs_in_managed_places
from pipeline.output.shards import Shard, ShardWriter, split_files
from pipeline.output.tokenizer import SPECIAL_TOKENS_FILE, TOKENIZER_DIR, shipped_renderer
from pipeline.packing import PACKED_SCHEMA, SEQUENCES_PER_SHARD, TOKEN_COLUMNS, WINDOW, PackingStats
from pipeline.quarantine import DROPPED_FILE
from pipeline.stages.pack import Pack, PackError, SplitPacking
from pipeline.tokenize.overlong import OverlongPolicy


@dataclass
class PackResult:
    """The packed output: its shards per split, and the counts of each split."""

    output: Path
    seq_len: int
    shards: dict[str, list[Shard]]
    splits: dict[str, SplitPacking]
    stats: PackingStats
    schema: pa.Schema = PACKED_SCHEMA
    """The packed shards' columns: PACKED_SCHEMA, and the source's media columns."""
    publication: Publication | None = None
    """What publishing removed of an earlier output in the folder."""

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
        objective = objective_of(names)
        if objective != "sft":
            raise PackError(
                f"{paths[0]} holds {objective} rows: pack packs threads (an sft output); "
                "the loader batches these rows padded"
            )
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
    overwrite: bool = False,
) -> PackResult:
    """Pack the tokenized output `source` into `output` (see the module docstring): a
    source (the shards of each split, in order), the pack stage, and a sink (the packed
    shards and quarantine/dropped.jsonl, staged in the output folder and published when
    every split is packed; pipeline/output/folder.py, `overwrite` as there)."""
    source, output = Path(source), Path(output)
    if output.resolve() == source.resolve():
        raise PackError("the packed output must be another folder than the one packed")
    refuse_inputs_in_managed_places(output, [str(source)])
    splits = source_shards(source)
    renderer = shipped_renderer(source / TOKENIZER_DIR) if overlong == "truncate" else None
    stage = Pack(
        seq_len,
        window=window,
        overlong=overlong,
        renderer=(lambda: renderer) if renderer is not None else None,
    )
    names = {name for paths in splits.values() for name in pq.read_schema(paths[0]).names}
    media = kind_columns(names)  # the threads' media lists: each sequence gets its threads'
    rendered = ["messages", *([MEDIA_COLUMN] if MEDIA_COLUMN in names else [])]
    columns = [*TOKEN_COLUMNS, *media, *(rendered if overlong == "truncate" else [])]
    schema = pa.schema([*PACKED_SCHEMA, *(pa.field(name, column_type(name)) for name in media)])
    shards: dict[str, list[Shard]] = {}
    with OutputFolder(output, overwrite=overwrite) as folder:
        staging = folder.staging
        dropped = 0
        with atomic_output(staging / DROPPED_FILE) as dropped_out:
            for split, paths in splits.items():
                rows = _source_rows(paths, columns, window)
                shards[split] = _pack_split(
                    stage, split, rows, staging / DATA_DIR, schema, progress
                )
                lines = list(stage.dropped_lines(split))
                dropped_out.writelines(lines)
                dropped += len(lines)
        discard_if_none(staging / DROPPED_FILE, dropped)
        counts = {split: stage.counts(split) for split in splits}
        result = PackResult(output, seq_len, shards, counts, stage.stats(), schema)
        _ship(source, staging, output.resolve().name, result, overlong, window)
        result.publication = folder.publish()
        folder.finish()
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
    data: Path,
    schema: pa.Schema,
    progress: Callable[[int], None] | None,
) -> list[Shard]:
    """One split through the pack stage into shards of `schema` under `data`; a split
    whose every thread is dropped gets one empty shard, as a run's split that keeps no
    row does (the manifest and the card then declare it with its 0 rows)."""
    writer = ShardWriter(data, schema, split=split, shard_rows=SEQUENCES_PER_SHARD)
    with writer:
        for table in rows:
            for packed in stage.reshape(split, table):
                writer.write(packed)
            if progress is not None:
                progress(stage.rows_read())
        for packed in stage.flush(split):
            writer.write(packed)
    return writer.shards


def _ship(
    source: Path, staging: Path, name: str, result: PackResult, overlong: str, window: int
) -> None:
    """The tokenizer of the source, the card and the manifest of the packed output,
    written into the staging folder (the manifest last); `name`: the output folder's."""
    shutil.copytree(source / TOKENIZER_DIR, staging / TOKENIZER_DIR)
    packed = [staging / DATA_DIR / s.name for shards in result.shards.values() for s in shards]
    media_cells = _copy_media(packed, source, staging)
    source_manifest = source / MANIFEST_FILE
    inputs = [
        input_record(path, "parquet", recorded_as=f"{source.name}/data/{path.name}")
        for path in sorted((source / DATA_DIR).glob("*.parquet"))
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
    tokenizer_record = orjson.loads((staging / TOKENIZER_DIR / SPECIAL_TOKENS_FILE).read_bytes())
    _card(source, staging, name, result, stats, tokenizer_record, media_cells)
    manifest = build_manifest(
        inputs=inputs,
        config=config,
        config_digest=json_sha256(config),
        counts=counts,
        shards=result.shards,
        tokenizer={
            "path": f"{TOKENIZER_DIR}/tokenizer.json",
            "sha256": file_sha256(staging / TOKENIZER_DIR / "tokenizer.json"),
            "renderer": tokenizer_record["renderer"],
            "label_policy": tokenizer_record.get("label_policy"),
            "pad_token": tokenizer_record["pad_token"],
            "vocabulary": tokenizer_record["vocabulary"],
        },
        reports=[],
        files=file_entries(staging, published_files(staging)),
        card=card_entry(staging),
    )
    write_manifest(staging / MANIFEST_FILE, manifest)


def _card(
    source: Path,
    output: Path,
    name: str,
    result: PackResult,
    stats: dict[str, Any],
    tokenizer_record: dict[str, Any],
    media_cells: str,
) -> None:
    """README.md: the dataset card of the packed output (`media_cells`: what its media
    cells hold, `_copy_media`'s sentence)."""
    card_stats = CardStats(
        threads=stats["threads"],
        rows={split: sum(s.rows for s in shards) for split, shards in result.shards.items()},
        bytes={split: sum(s.bytes for s in shards) for split, shards in result.shards.items()},
        renderer=tokenizer_record["renderer"],
        tokens=stats["tokens"],
        trained_tokens=sum(s.trained for s in result.splits.values()),
        training=training_facts(
            tokenizer_record,
            zero_weight_messages=0,
            media_cells=media_cells,
            packed=True,
        ),
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
        features=result.schema,
        stats=card_stats,
        how_to_load=local_dataset_path(name),
    )
    with atomic_text_output(output / CARD_FILE) as handle:
        handle.write(card)


def _path_cells(paths: list[Path]) -> Iterator[pa.Array]:
    """The paths of the packed shards' media cells that hold no bytes, a batch at a time."""
    for path in paths:
        file = pq.ParquetFile(path)
        columns = kind_columns(file.schema_arrow.names)
        if not columns:
            continue
        for batch in file.iter_batches(columns=columns):
            for name, column in zip(batch.schema.names, batch.columns, strict=True):
                cells = pc.list_flatten(column)
                if name == FRAMES_COLUMN:  # each cell a video's frames
                    cells = pc.list_flatten(cells)
                without = pc.invert(pc.is_valid(pc.struct_field(cells, "bytes")))
                yield pc.filter(pc.struct_field(cells, "path"), without)


def _copy_media(paths: list[Path], source: Path, staging: Path) -> str:
    """Copy into the packed output's media/ each file of the source's media/ a packed cell
    names by its content address without embedding it (a copy-mode source), so the packed
    output stands alone (its manifest lists them as a run's); returns the card's sentence
    on what the cells hold, read back from them (the source's manifest cannot tell a run
    that embedded its media from one that read none)."""
    unembedded = [path for found in _path_cells(paths) for path in found.to_pylist()]
    if not unembedded:
        return where_media_are(embedded=True, copied=False, checked_meta=False)
    named = [content_address(path) for path in unembedded]
    for name in sorted({found[0] for found in named if found is not None}):
        copy = source / MEDIA_DIR / name
        if copy.is_file():
            (staging / MEDIA_DIR).mkdir(exist_ok=True)
            shutil.copyfile(copy, staging / MEDIA_DIR / name)
    copied = all(
        found is not None and (staging / MEDIA_DIR / found[0]).is_file() for found in named
    )
    return where_media_are(embedded=False, copied=copied)


def _source_inputs(source: Path) -> list[dict[str, Any]]:
    """The inputs the packed output's source was built from (its manifest's per-input
    counts), for the card's license and sources; none when it does not say."""
    manifest = source / "manifest.json"
    if not manifest.is_file():
        return []
    return list(orjson.loads(manifest.read_bytes()).get("counts", {}).get("inputs", []))
