"""The ordered pass of `mms run`: the parts' directories taken in plan order (so the
output never depends on the number of workers or the engine). Every stage of the run
(pipeline/jobs/run/stages.py) merges what it kept of each part and decides, batch by batch,
which rows it drops and why; this pass counts every decision once, then writes the kept rows:
mixing weights, the split, and the shards, published only if the lint gate passes. The train
split's rows are shuffled (seeded by `shard.seed`; `shard.shuffle`, on by default;
pipeline/output/shards.py: ShuffledShardWriter) before they are packed (if they are) and
written, a preference pair's or group's rows kept together, so any range of its row groups
holds the sources mixed as the whole does; the other splits keep the plan order."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.accounting import Account, InputAccount
from pipeline.jobs.batch_steps import Drop, decide
from pipeline.jobs.run.config import RunConfig
from pipeline.jobs.run.part import (
    PART_DROPPED,
    PART_REJECTED,
    PART_STATS,
    PART_THREADS,
    stage_file,
)
from pipeline.jobs.run.partition import RepeatedRows, partitioned
from pipeline.jobs.run.stages import Side, row_schema, run_stages, shard_schema
from pipeline.lint import LintReport, select_rules
from pipeline.lint.store import DiagnosticStore
from pipeline.mms.groups import whole_groups_end
from pipeline.output.files import atomic_output
from pipeline.output.shards import Shard, ShardWriter, ShuffledShardWriter
from pipeline.packing import PACKED_SCHEMA, SEQUENCES_PER_SHARD
from pipeline.quarantine import DROPPED_FILE, REJECTED_FILE, dropped_line, rejection_from_line
from pipeline.sources.parts import InputPart
from pipeline.stages.contract import TOKENS_CUT, Stage, repeated_column
from pipeline.stages.lint import Lint
from pipeline.stages.pack import Pack
from pipeline.stages.sample import SPLIT_GROUP, THREAD_GROUP
from pipeline.stages.split import split_rows

Progress = Callable[[str, int, int, Account | None], None]
"""(stage, parts done, parts in all, the run's counts so far when the stage has them)."""


@dataclass
class Reduced:
    """What the ordered pass produced: the counts, the shards (only splits that got rows;
    none when the gate failed), the lint report, whether the gate failed, and the part
    directories it read (in part order)."""

    counts: Account
    shards: dict[str, list[Shard]]
    report: LintReport
    part_dirs: list[Path]
    gate_failed: bool = False
    packing: dict[str, Any] | None = None
    """What the pack stage did (seq_len, sequences, fill ...), None without one."""


def reduce_parts(
    config: RunConfig,
    out: Path,
    parts: list[InputPart],
    part_dirs: Iterable[Path],
    progress: Progress | None = None,
    skipped: Sequence[str] = (),
    refused: dict[str, str] | None = None,
    repeated: RepeatedRows | None = None,
) -> Reduced:
    """Read the parts' directories (in plan order, as they become ready) into the shards
    under `out/data` (`out`: the output folder's staging folder), the quarantine file, and the lint report (which lists the `skipped`
    files of the inputs' folders and globs, that are not data files). The shards are
    published only when the lint gate passes; a split that got no rows gets no file.
    `repeated`: what a partition pass found (pipeline/jobs/run/partition.py), if any."""
    reducer = _Reducer(config, skipped, refused or {}, repeated)
    writers = _shard_writers(config, out, reducer.stages)
    with ExitStack() as stack:
        quarantine = stack.enter_context(atomic_output(out / REJECTED_FILE))
        left_out = stack.enter_context(atomic_output(out / DROPPED_FILE))
        stack.push(_discard_on_error(writers))  # nothing half-written survives a failure
        if progress is not None:
            progress("lint, dedup, shard", 0, len(parts), reducer.counts)
        read: list[Path] = []
        for done, (part, part_dir) in enumerate(zip(parts, part_dirs, strict=True), 1):
            reducer.take_part(part, part_dir, (quarantine, left_out), writers)
            read.append(part_dir)
            if progress is not None:
                progress("lint, dedup, shard", done, len(parts), reducer.counts)
        report = reducer.lint.finish()
        gate_failed = report.failed(config.stages.lint.fail_on)
        if gate_failed:
            reducer.counts.withhold()
        for name, writer in writers.items():
            if gate_failed:
                writer.discard()  # no normal-looking output from a failed gate
                continue
            if not isinstance(writer, ShuffledShardWriter):  # it flushes the stages itself
                for table in _reshaped(reducer.stages, name, None):
                    writer.write(table)
            writer.commit()
    shards = {name: writer.shards for name, writer in writers.items() if writer.shards}
    pack = next((stage for stage in reducer.stages if isinstance(stage, Pack)), None)
    packing = pack.stats().to_dict() if pack is not None and shards else None
    if packing is not None:  # a packed output lists its splits by name, as `mms pack` does
        shards = dict(sorted(shards.items()))
    return Reduced(reducer.counts, shards, report, read, gate_failed, packing)


Writer = ShardWriter | ShuffledShardWriter
SHUFFLED_SPLIT = "train"
"""The split written in a shuffled order (with `shard.shuffle`): what training reads."""


def _discard_on_error(writers: dict[str, Writer]) -> Callable[..., bool]:
    """An exit callback removing every shard file written when the pass fails."""

    def on_exit(exc_type: type[BaseException] | None, *_: object) -> bool:
        if exc_type is not None:
            for writer in writers.values():
                writer.discard()
        return False

    return on_exit


def _shard_writers(config: RunConfig, out: Path, stages: list[Stage]) -> dict[str, Writer]:
    """A writer per split; the train split's shuffles its rows before the stages reshape
    them (pack), so a packed run packs the threads in the order its unpacked run writes."""
    shard = config.stages.shard
    if shard is None:
        return {}
    writers: dict[str, Writer] = dict(_plain_writers(config, out))
    if shard.shuffle and SHUFFLED_SPLIT in writers:
        plain = writers[SHUFFLED_SPLIT]
        assert isinstance(plain, ShardWriter)
        writers[SHUFFLED_SPLIT] = ShuffledShardWriter(
            plain,
            out,
            shard.seed,
            schema=row_schema(config),
            reshape=lambda rows: _reshaped(stages, SHUFFLED_SPLIT, rows),
            flush=lambda: _reshaped(stages, SHUFFLED_SPLIT, None),
        )
    return writers


def _plain_writers(config: RunConfig, out: Path) -> dict[str, ShardWriter]:
    shard = config.stages.shard
    assert shard is not None
    if config.stages.pack is not None:
        return {
            name: ShardWriter(
                out / "data",
                PACKED_SCHEMA,
                split=name,
                shard_rows=SEQUENCES_PER_SHARD,
                empty_shard=False,
            )
            for name, _ in shard.splits
        }
    return {
        name: ShardWriter(
            out / "data",
            shard_schema(config),
            split=name,
            shard_rows=shard.rows_per_shard,
            shard_bytes=shard.bytes_per_shard,
            compression=shard.compression,
            empty_shard=False,
        )
        for name, _ in shard.splits
    }


class _Reducer:
    """The state of the ordered pass: the run's stages (their dataset side), the lint
    report, the counts."""

    def __init__(
        self,
        config: RunConfig,
        skipped: Sequence[str],
        refused: dict[str, str],
        repeated: RepeatedRows | None,
    ):
        self.config = config
        self.repeated = repeated
        source = config.recorded_path(config.source) if config.source else None
        lint_config = config.stages.lint.to_lint_config(source)
        self.report = LintReport(
            lint_config,
            select_rules(lint_config.select, lint_config.ignore),
            [config.recorded_path(spec.path) for spec in config.inputs],
            Account(skipped_files=list(skipped), refused_files=dict(refused)),
            DiagnosticStore(),
        )
        self.stages = run_stages(config, Side(lint_source=source, report=self.report))
        self.lint = next(stage for stage in self.stages if isinstance(stage, Lint))
        self.partitioned = partitioned(self.stages) if repeated is not None else []
        self.counts = self.report.stats
        self.counts.inputs = [
            InputAccount(config.recorded_path(spec.path), spec.license) for spec in config.inputs
        ]
        self.columns = row_schema(config).names

    def take_part(
        self,
        part: InputPart,
        part_dir: Path,
        lists: tuple[BinaryIO, BinaryIO],
        writers: dict[str, Writer],
    ) -> None:
        """Take one part's files: its counts, quarantined records, stage states and rows;
        `lists`: the quarantine and the list of threads left out, which it extends."""
        quarantine, left_out = lists
        self._account(part, orjson.loads((part_dir / PART_STATS).read_bytes()))
        with (part_dir / PART_REJECTED).open("rb") as rejected:
            for line in rejected:
                quarantine.write(line)
                rejection = rejection_from_line(line)
                for stage in self.stages:
                    stage.rejected(rejection)
        for stage in self.stages:
            state_file = part_dir / stage_file(stage.name)
            if state_file.is_file():
                stage.merge_part(orjson.loads(state_file.read_bytes()))
        weight = self.config.inputs[part.input_index].weight
        origin = self.counts.inputs[part.input_index]
        with (part_dir / PART_DROPPED).open("rb") as map_drops:
            shutil.copyfileobj(map_drops, left_out)
        with pa.memory_map(str(part_dir / PART_THREADS)) as mapped:
            for table in self._whole_groups(pa.ipc.open_file(mapped), part):
                drops: dict[int, Drop] = {}
                groups = table[THREAD_GROUP].to_pylist()
                reasons = decide(self.stages, table, self.counts, groups, drops)
                _list_drops(table, drops, left_out)
                self.counts.count_groups(groups, reasons)
                _count_tokens_lost(table, reasons, self.counts)
                origin.dropped_by.update(reason for reason in reasons if reason is not None)
                keep = [reason is None for reason in reasons]
                kept = table.filter(pa.array(keep, pa.bool_()))
                kept = kept.select([*self.columns, SPLIT_GROUP, THREAD_GROUP])
                if kept.num_rows:
                    _write(kept, self.config, (weight, origin), writers, self.counts, self.stages)

    def _whole_groups(
        self, threads: pa.ipc.RecordBatchFileReader, part: InputPart
    ) -> Iterator[pa.Table]:
        """A part's rows in tables that never cut a group (a group's rows are decided
        together), each with the partitioned stages' `repeated` columns."""
        held: pa.Table | None = None
        start = 0
        for index in range(threads.num_record_batches):
            table = self._with_repeated(threads.get_batch(index), part, start)
            start += table.num_rows
            if held is not None:
                table = pa.concat_tables([held, table])
            end = whole_groups_end(table[THREAD_GROUP].to_pylist())
            held = table.slice(end) if end < table.num_rows else None
            if end:
                yield table.slice(0, end)
        if held is not None:
            yield held

    def _with_repeated(self, batch: pa.RecordBatch, part: InputPart, start: int) -> pa.Table:
        """A batch of a part's rows, with each partitioned stage's `repeated` column."""
        table = pa.Table.from_batches([batch])
        for stage in self.partitioned:
            assert self.repeated is not None
            flags = self.repeated.column(stage.name, part.id, start, table.num_rows)
            table = table.append_column(repeated_column(stage.name), flags)
        return table

    def _account(self, part: InputPart, part_counts: dict[str, Any]) -> None:
        counts = self.counts
        counts.records_read += part_counts["records_read"]
        counts.records_converted += part_counts["records_converted"]
        counts.threads += part_counts["threads"]
        source = counts.inputs[part.input_index]
        source.records_read += part_counts["records_read"]
        source.quarantined_by.update(part_counts["quarantined"])
        source.threads += part_counts["threads"]
        source.dropped_by.update(part_counts["dropped"])
        counts.quarantined.update(part_counts["quarantined"])
        counts.formats.update(part_counts["formats"])
        if part.path not in counts.files:
            counts.files.append(part.path)
        counts.dropped.update(part_counts["dropped"])
        counts.tokens_dropped.update(part_counts["dropped_tokens"])
        counts.groups_dropped.update(part_counts["groups_dropped"])
        counts.tagged.update(part_counts["tagged"])


def _list_drops(table: pa.Table, drops: dict[int, Drop], out: BinaryIO) -> None:
    """One line of quarantine/dropped.jsonl per row the stages left out, in order."""
    if not drops:
        return
    ids, metas = table["id"], table["meta"]
    for row in sorted(drops):
        drop = drops[row]
        meta = orjson.loads(metas[row].as_py() or "{}")
        line = dropped_line(ids[row].as_py(), meta, drop.stage, drop.reason, drop.details)
        out.write(line)


def _count_tokens_lost(table: pa.Table, reasons: list[str | None], counts: Account) -> None:
    """The tokens of the rows dropped here, per reason, and of the cuts of the kept rows a
    map stage truncated (TOKENS_CUT)."""
    if "num_tokens" not in table.column_names:
        return
    if any(reason is not None for reason in reasons):
        tokens = table["num_tokens"].to_pylist()
        for reason, count in zip(reasons, tokens, strict=True):
            if reason is not None and count is not None:
                counts.tokens_dropped[reason] += count
    if TOKENS_CUT in table.column_names:
        kept = pa.array([reason is None for reason in reasons], pa.bool_())
        cut = table[TOKENS_CUT].filter(kept)
        counts.truncated += len(cut) - cut.null_count
        counts.tokens_truncated += pc.sum(cut).as_py() or 0


def _write(
    table: pa.Table,
    config: RunConfig,
    origin: tuple[int, InputAccount],
    writers: dict[str, Writer],
    counts: Account,
    stages: list[Stage],
) -> None:
    """Split a batch of kept rows of one input (`origin`: its weight and account), weight
    it, reshape it (pack), then write it; to a shuffled split, the rows with their groups
    (a weighted copy of a group is a group of its own), reshaped once shuffled."""
    weight, source = origin
    if not writers:
        counts.not_sharded += table.num_rows
        return
    shard = config.stages.shard
    assert shard is not None
    chosen = split_rows(table, shard)
    thread_groups = table[THREAD_GROUP]
    table = table.drop_columns([SPLIT_GROUP, THREAD_GROUP])
    for name, rows in chosen.items():
        if not rows:
            continue
        taken = pa.array(rows, type=pa.int64())
        part = table.take(taken)
        groups = thread_groups.take(taken).to_pylist()
        writer = writers[name]
        for copy in range(weight):
            rows_of_copy = part if copy == 0 else _copy_ids(part, copy)
            if isinstance(writer, ShuffledShardWriter):  # it reshapes the rows once shuffled
                copy_groups = [g if g is None or not copy else f"{g}#{copy}" for g in groups]
                writer.write(rows_of_copy, copy_groups)
                continue
            for written in _reshaped(stages, name, rows_of_copy):
                writer.write(written)
        counts.count_written(name, part, weight, source)


def _reshaped(stages: list[Stage], split: str, rows: pa.Table | None) -> list[pa.Table]:
    """Rows kept for `split` through every stage's `reshape`, in order; None: what the
    stages still hold at the end of the split (each stage's `flush`)."""
    tables = [rows] if rows is not None else []
    for stage in stages:
        tables = [out for table in tables for out in stage.reshape(split, table)]
        if rows is None:
            tables += stage.flush(split)
    return tables


def _copy_ids(table: pa.Table, copy: int) -> pa.Table:
    """A weighted copy of the rows, each id marked with its copy number."""
    ids = pa.array([f"{thread_id}#{copy}" for thread_id in table["id"].to_pylist()])
    return table.set_column(table.schema.get_field_index("id"), "id", ids)
