"""`run_pipeline`: the staged job of a pipeline config (DESIGN §7, §8).

Map, in parallel over work units and resumable (pipeline/engine/local.py): each unit's
records are read, normalized to threads and sampled; the threads go to the unit's
Parquet file, the records that did not become threads to its quarantine file.
Reduce, one pass over the units in unit order (so the output never depends on the
number of workers): lint (thread and dataset rules), the lint gate's drops, filters,
dataset-wide exact dedup, tokenization, mixing weights, the split by a stable hash of the
thread id, and the shards; then the reports, the quarantine, the manifest and the card.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import os
import shutil
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.card import CardStats, dataset_card, lint_summary
from pipeline.engine.local import run_units
from pipeline.engine.units import WorkUnit, iter_unit_records, plan_units
from pipeline.formats import AUTO, get_format
from pipeline.formats.detect import detect
from pipeline.ingest import SNIFF_RECORDS, ReadStats, read_items
from pipeline.lint import Diagnostic, Linter, LintReport
from pipeline.lint.reports import write_report
from pipeline.lint.store import DiagnosticStore
from pipeline.manifest import build_manifest, input_record, write_manifest
from pipeline.mms import THREAD_ARROW_SCHEMA, Thread, threads_from_arrow, threads_to_arrow
from pipeline.output_files import atomic_output, atomic_text_output, file_sha256
from pipeline.quarantine import rejection_from_line, rejection_line
from pipeline.run_config import FilterStage, RunConfig
from pipeline.shards import Shard, ShardWriter
from pipeline.sources import DEFAULT_SPLIT, Record, is_hf_input
from pipeline.tokenize import LoadedTokenizer, Renderer, load_tokenizer, tokenize_threads
from pipeline.tokenize.job import write_tokenizer
from pipeline.tokenize.stage import TOKENIZED_SCHEMA

WORK_DIR = ".work"
"""The engine's work directory inside the output directory, removed once a run succeeds
(a stopped run keeps it, and resumes from its finished units)."""
UNIT_THREADS = "threads.parquet"
UNIT_REJECTED = "rejected.jsonl"
UNIT_STATS = "stats.json"
BATCH = 1024
"""Threads per reduce batch (one tokenizer call each)."""
_HASH_SPACE = float(2**64)


def stable_fraction(key: str, seed: int = 0) -> float:
    """A number in [0, 1) from a hash of `key` and `seed`: the same thread always lands in
    the same sample and split, whatever the order or the number of workers."""
    digest = hashlib.blake2b(f"{seed}\n{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / _HASH_SPACE


# --------------------------------------------------------------------------- map


@dataclass(frozen=True)
class UnitJob:
    """The map side for one work unit (picklable: the engine runs it in worker
    processes): read, normalize and sample the unit, write its threads and rejections."""

    config: RunConfig

    def __call__(self, unit: WorkUnit, out: Path) -> None:
        # sources are recorded relative to the config file (when it has one), so thread
        # ids, meta and splits do not depend on where the checkout lives
        base = self.config.source.parent if self.config.source else None
        out = out.resolve()  # before any change of working directory
        if base is None or is_hf_input(unit.path):
            self._process(unit, unit, out)
            return
        relative = dataclasses.replace(unit, path=os.path.relpath(unit.path, base))
        with _working_directory(base):
            self._process(unit, relative, out)

    def _process(self, unit: WorkUnit, read_as: WorkUnit, out: Path) -> None:
        spec = self.config.inputs[unit.input_index]
        options = self.config.stages.normalize.to_convert_options()
        stats = ReadStats()
        sampled_out = 0
        with (out / UNIT_REJECTED).open("wb") as rejected:
            items = iter_unit_records(
                read_as, split=spec.split or DEFAULT_SPLIT, hf_config=spec.hf_config
            )
            threads = read_items(
                read_as.path,
                items,
                format=unit.format,
                on_reject=lambda rejection: rejected.write(rejection_line(rejection)),
                stats=stats,
                options=options,
            )
            with pq.ParquetWriter(out / UNIT_THREADS, THREAD_ARROW_SCHEMA) as writer:
                batch: list[Thread] = []
                for thread in threads:
                    if spec.sample < 1.0 and stable_fraction(thread.id) >= spec.sample:
                        sampled_out += 1
                        continue
                    batch.append(thread)
                    if len(batch) == BATCH:
                        writer.write_table(threads_to_arrow(batch))
                        batch = []
                writer.write_table(threads_to_arrow(batch))
        counts = {
            "records_read": stats.records_read,
            "records_converted": stats.records_converted,
            "threads": stats.threads,
            "quarantined": dict(sorted(stats.quarantined.items())),
            "formats": stats.formats,
            "sampled_out": sampled_out,
        }
        (out / UNIT_STATS).write_bytes(orjson.dumps(counts, option=orjson.OPT_SORT_KEYS))


@contextmanager
def _working_directory(path: Path) -> Iterator[None]:
    previous = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(previous)


# --------------------------------------------------------------------------- reduce


@dataclass
class RunCounts:
    """The run's account: every record read is a written thread, a quarantined record or
    a thread dropped by a named stage (with fan-out: records -> threads)."""

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
    tokens: int = 0
    trained_tokens: int = 0

    @property
    def balanced(self) -> bool:
        kept = sum(self.written.values()) - self.copies
        return self.records_read == self.records_converted + sum(
            self.quarantined.values()
        ) and self.threads == kept + self.not_sharded + sum(self.dropped.values())

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
            "tokens": self.tokens,
            "trained_tokens": self.trained_tokens,
            "balanced": self.balanced,
        }


@dataclass
class RunResult:
    """What a run wrote, and its lint report (for the gate and the summary)."""

    output: Path
    counts: RunCounts
    shards: dict[str, list[Shard]]
    report: LintReport
    gate_failed: bool


def plan(config: RunConfig) -> list[WorkUnit]:
    """The run's work units. A big JSON Lines file is split into parts only when its
    format is named and converts record by record: a detected format could differ between
    parts, and a grouped one (OASST messages) has conversations across records."""

    def can_split(path: str, format: str) -> bool:
        return format != AUTO and get_format(format).group is None

    return plan_units([(spec.path, spec.format) for spec in config.inputs], can_split=can_split)


def detected_format(config: RunConfig, unit: WorkUnit) -> str:
    """The format a unit is read as: the named one, or what detection finds in its first
    records (for `--dry-run`)."""
    if unit.format != AUTO:
        return unit.format
    spec = config.inputs[unit.input_index]
    items = iter_unit_records(unit, split=spec.split or DEFAULT_SPLIT, hf_config=spec.hf_config)
    head = itertools.islice((i.value for i in items if isinstance(i, Record)), SNIFF_RECORDS)
    return f"auto -> {detect(head).label}"


def run_pipeline(
    config: RunConfig,
    *,
    output: Path | None = None,
    workers: int | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> RunResult:
    """Run every stage of `config`; output under `output` (default: the config's)."""
    out = Path(output or config.output).resolve()
    units = plan(config)
    unit_dirs = run_units(
        units,
        UnitJob(config),
        out / WORK_DIR,
        config_digest=config.digest(),
        workers=workers or config.engine.workers,
        progress=(lambda done, total: progress("read", done, total)) if progress else None,
    )
    result = _reduce(config, out, units, unit_dirs, progress)
    # the output is complete: the units' intermediate files are no longer needed
    shutil.rmtree(out / WORK_DIR)
    return result


def _reduce(
    config: RunConfig,
    out: Path,
    units: list[WorkUnit],
    unit_dirs: list[Path],
    progress: Callable[[str, int, int], None] | None = None,
) -> RunResult:
    stages = config.stages
    lint_config = stages.lint.to_lint_config(str(config.source) if config.source else None)
    linter = Linter(lint_config)
    read_stats = ReadStats()
    report = LintReport(
        lint_config,
        linter.rules,
        [spec.path for spec in config.inputs],
        read_stats,
        DiagnosticStore(),
    )
    counts = RunCounts()
    renderer, base = _renderer(config)
    splits = stages.shard.splits if stages.shard else (("train", 1.0),)
    schema = TOKENIZED_SCHEMA if renderer else THREAD_ARROW_SCHEMA
    seen: set[int] = set()
    writers = (
        {
            name: ShardWriter(
                out / "data",
                schema,
                split=name,
                shard_rows=stages.shard.rows_per_shard,
                shard_bytes=stages.shard.bytes_per_shard,
                compression=stages.shard.compression,
            )
            for name, _ in splits
        }
        if stages.shard
        else {}
    )
    with ExitStack() as stack:
        quarantine = stack.enter_context(atomic_output(out / "quarantine" / "rejected.jsonl"))
        for writer in writers.values():
            stack.enter_context(writer)  # a failure aborts every shard: nothing half-written
        for done, (unit, unit_dir) in enumerate(zip(units, unit_dirs, strict=True)):
            if progress is not None:
                progress("lint, dedup, tokenize, shard", done, len(units))
            _account(unit_dir, unit, read_stats, counts)
            with (unit_dir / UNIT_REJECTED).open("rb") as rejected:
                for line in rejected:
                    quarantine.write(line)
                    report.check_rejection(linter, rejection_from_line(line))
            weight = config.inputs[unit.input_index].weight
            for kept in _kept_batches(unit_dir, config, linter, report, counts, seen):
                _write(kept, renderer, config, weight, writers, counts)
        report.add(list(linter.finish()))
    shards = {name: writer.shards for name, writer in writers.items()}
    reports = _write_reports(out, report)
    tokenizer = None
    if renderer is not None and base is not None:
        file = write_tokenizer(out / "tokenizer", renderer, base)
        tokenizer = {
            "path": "tokenizer/tokenizer.json",
            "sha256": file_sha256(file),
            "renderer": renderer.name,
            "special_tokens": renderer.special_ids.as_dict(),
            "base": {"path": str(base.path), "sha256": base.sha256},
        }
    manifest = build_manifest(
        inputs=[input_record(unit.path, unit.format) for unit in _whole_files(units)],
        config=config.resolved(),
        config_digest=config.digest(),
        counts=counts.to_dict(),
        shards=shards,
        tokenizer=tokenizer,
        reports=reports,
    )
    write_manifest(out / "manifest.json", manifest)
    if shards:
        _write_card(out, config, report, counts, shards, schema, renderer)
    return RunResult(out, counts, shards, report, report.failed(stages.lint.fail_on))


def _whole_files(units: list[WorkUnit]) -> list[WorkUnit]:
    """One unit per input file (a split file's first part stands for the file)."""
    return list({unit.path: unit for unit in reversed(units)}.values())[::-1]


def _write_card(
    out: Path,
    config: RunConfig,
    report: LintReport,
    counts: RunCounts,
    shards: dict[str, list[Shard]],
    schema: pa.Schema,
    renderer: Renderer | None,
) -> None:
    licenses = sorted({spec.license for spec in config.inputs if spec.license})
    tags = sorted({tag for spec in config.inputs for tag in spec.tags} | {"mms"})
    profile = report.profile
    stats: CardStats = {
        "threads": sum(counts.written.values()),
        "rows": {name: sum(s.rows for s in split) for name, split in shards.items()},
        "bytes": {name: sum(s.bytes for s in split) for name, split in shards.items()},
        "renderer": renderer.name if renderer else None,
        "tokens": counts.tokens if renderer else None,
        "trained_tokens": counts.trained_tokens if renderer else None,
        "formats": dict(profile.formats),
        "capabilities": profile.capabilities(),
        "lint": lint_summary(report),
    }
    card = dataset_card(
        name=config.name,
        description=f"MMS threads built by `mms run` from {len(config.inputs)} input(s).",
        license=licenses[0] if len(licenses) == 1 else "other",
        tags=tags,
        splits={name: [f"data/{s.name}" for s in split] for name, split in shards.items()},
        features=schema,
        stats=stats,
        how_to_load=out.name,
    )
    with atomic_text_output(out / "README.md") as handle:
        handle.write(card)


def _renderer(config: RunConfig) -> tuple[Renderer | None, LoadedTokenizer | None]:
    """The renderer of the tokenize stage and its base tokenizer (loaded once: a large
    vocabulary takes seconds), or None for both when the run does not tokenize."""
    tokenize = config.stages.tokenize
    if tokenize is None:
        return None, None
    base = load_tokenizer(tokenize.tokenizer)
    return Renderer(base, bos=tokenize.bos), base


def _account(unit_dir: Path, unit: WorkUnit, read_stats: ReadStats, counts: RunCounts) -> None:
    unit_counts = orjson.loads((unit_dir / UNIT_STATS).read_bytes())
    read_stats.records_read += unit_counts["records_read"]
    read_stats.records_converted += unit_counts["records_converted"]
    read_stats.threads += unit_counts["threads"]
    read_stats.quarantined.update(unit_counts["quarantined"])
    read_stats.formats.update(unit_counts["formats"])
    if unit.path not in read_stats.files:
        read_stats.files.append(unit.path)
    counts.records_read += unit_counts["records_read"]
    counts.records_converted += unit_counts["records_converted"]
    counts.quarantined.update(unit_counts["quarantined"])
    counts.threads += unit_counts["threads"]
    if unit_counts["sampled_out"]:
        counts.dropped["sampled_out"] += unit_counts["sampled_out"]


def _kept_batches(
    unit_dir: Path,
    config: RunConfig,
    linter: Linter,
    report: LintReport,
    counts: RunCounts,
    seen: set[int],
) -> Iterator[list[Thread]]:
    """The unit's threads that pass the lint gate's drops, the filters and dedup."""
    stages = config.stages
    drop_on = set(stages.lint.drop_on)
    filters = stages.filters
    parquet = pq.ParquetFile(unit_dir / UNIT_THREADS)
    for record_batch in parquet.iter_batches(batch_size=BATCH):
        kept: list[Thread] = []
        for thread in threads_from_arrow(pa.Table.from_batches([record_batch])):
            found = report.check(linter, thread)
            reason = _drop_reason(thread, found, drop_on, filters, stages.dedup.enabled, seen)
            if reason is not None:
                counts.dropped[reason] += 1
                continue
            kept.append(thread)
        if kept:
            yield kept


def _drop_reason(
    thread: Thread,
    found: list[Diagnostic],
    drop_on: set[str],
    filters: FilterStage,
    dedup: bool,
    seen: set[int],
) -> str | None:
    """Why the thread is left out (lint gate, filters, a duplicate), or None to keep it."""
    codes = sorted({d.code for d in found if d.code in drop_on})
    if codes:
        return f"lint:{codes[0]}"
    count = len(thread.messages)
    if count < filters.min_messages:
        return "too_few_messages"
    if filters.max_messages is not None and count > filters.max_messages:
        return "too_many_messages"
    if dedup:
        key = _content_key(thread)
        if key in seen:
            return "duplicate"
        seen.add(key)
    return None


def _content_key(thread: Thread) -> int:
    body = [m.to_dict() for m in thread.messages]
    settings = thread.settings.to_dict() if thread.settings else None
    digest = hashlib.blake2b(orjson.dumps([body, settings]), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def _write(
    threads: list[Thread],
    renderer: Renderer | None,
    config: RunConfig,
    weight: int,
    writers: dict[str, ShardWriter],
    counts: RunCounts,
) -> None:
    """Tokenize (when asked), filter on tokens, weight and split a batch, then write it."""
    if not writers:
        counts.not_sharded += len(threads)
        return
    if renderer is not None:
        tokenize = config.stages.tokenize
        assert tokenize is not None
        drops: Counter[str] = Counter()
        tables = list(
            tokenize_threads(
                threads,
                renderer,
                max_tokens=tokenize.max_tokens,
                overlong=tokenize.overlong,
                batch_size=len(threads),
                on_drop=lambda drop: drops.update([drop.code]),
            )
        )
        counts.dropped.update(drops)
        table = pa.concat_tables(tables) if tables else TOKENIZED_SCHEMA.empty_table()
        table = _token_filters(table, config, counts)
    else:
        table = threads_to_arrow(threads)
    if not table.num_rows:
        return
    shard = config.stages.shard
    assert shard is not None
    ids = table["id"].to_pylist()
    fractions = [stable_fraction(thread_id, shard.seed) for thread_id in ids]
    for name, rows in _split_rows(fractions, shard.splits).items():
        if not rows:
            continue
        part = table.take(pa.array(rows, type=pa.int64()))
        for copy in range(weight):
            writers[name].write(part if copy == 0 else _copy_ids(part, copy))
        counts.written[name] += part.num_rows * weight
        counts.copies += part.num_rows * (weight - 1)
        if "num_tokens" in part.column_names:
            counts.tokens += pa.compute.sum(part["num_tokens"]).as_py() * weight
            counts.trained_tokens += pa.compute.sum(part["num_trained"]).as_py() * weight


def _token_filters(table: pa.Table, config: RunConfig, counts: RunCounts) -> pa.Table:
    filters = config.stages.filters
    trained = table["num_trained"].to_numpy()
    keep = trained >= filters.min_trained_tokens
    counts.dropped["too_few_trained_tokens"] += int((~keep).sum())
    if filters.max_tokens is not None:
        long = table["num_tokens"].to_numpy() > filters.max_tokens
        counts.dropped["too_many_tokens"] += int((long & keep).sum())
        keep &= ~long
    for reason in ("too_few_trained_tokens", "too_many_tokens"):
        if not counts.dropped[reason]:
            del counts.dropped[reason]
    return table.filter(pa.array(keep))


def _split_rows(
    fractions: list[float], splits: tuple[tuple[str, float], ...]
) -> dict[str, list[int]]:
    """Row indices per split: split k takes the rows whose fraction falls in its band."""
    bounds = []
    total = 0.0
    for name, share in splits:
        total += share
        bounds.append((name, total))
    rows: dict[str, list[int]] = {name: [] for name, _ in splits}
    for row, fraction in enumerate(fractions):
        name = next((n for n, bound in bounds if fraction < bound), bounds[-1][0])
        rows[name].append(row)
    return rows


def _copy_ids(table: pa.Table, copy: int) -> pa.Table:
    """A weighted copy of the rows, each id marked with its copy number."""
    ids = pa.array([f"{thread_id}#{copy}" for thread_id in table["id"].to_pylist()])
    return table.set_column(table.schema.get_field_index("id"), "id", ids)


def _write_reports(out: Path, report: LintReport) -> list[str]:
    written = []
    for name, fmt in (("lint.json", "json"), ("lint.md", "markdown"), ("lint.html", "html")):
        with atomic_text_output(out / "reports" / name) as handle:
            write_report(report, fmt, handle)
        written.append(f"reports/{name}")
    return written
