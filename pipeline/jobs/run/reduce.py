"""The ordered pass of `mms run`: the parts' directories taken in plan order (so the
output never depends on the number of workers or the engine). Every stage of the run
(pipeline/jobs/run/stages.py) merges what it kept of each part and decides, batch by batch,
which rows it drops and why; this pass counts every decision once and records, part by part,
the rows it keeps: their split and weighted copies (pipeline/jobs/run/selection.py). If the
lint gate passes, the engine's workers then write the shards in parallel
(pipeline/jobs/run/shard_tasks.py). The train split's rows are shuffled (seeded by
`shard.seed`; `shard.shuffle`, on by default) before they are packed (if they are), a
preference pair's or group's rows kept together, so any range of its row groups holds the
sources mixed as the whole does; the other splits keep the plan order."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.accounting import Account, InputAccount
from pipeline.engine import Runner
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
from pipeline.jobs.run.selection import SELECTED_DIR, Selections
from pipeline.jobs.run.shard_tasks import ShardDone, ShardTask, packing_stats, plan_shard_tasks
from pipeline.jobs.run.stages import Side, row_schema, run_stages
from pipeline.lint import LintReport, select_rules
from pipeline.lint.store import DiagnosticStore
from pipeline.mms.groups import whole_groups_end
from pipeline.output.files import atomic_output
from pipeline.output.shards import Shard
from pipeline.quarantine import DROPPED_FILE, REJECTED_FILE, dropped_line, rejection_from_line
from pipeline.sources.parts import InputPart
from pipeline.stages.contract import TOKENS_CUT, repeated_column
from pipeline.stages.lint import Lint
from pipeline.stages.sample import SPLIT_GROUP, THREAD_GROUP
from pipeline.stages.split import split_rows

if TYPE_CHECKING:
    from pipeline.jobs.stats.compute import ShardTables

Progress = Callable[[str, int, int, Account | None], None]
"""(stage, parts done, parts in all, the run's counts so far when the stage has them); for
SHARD_WRITES, shards written of all."""
SHARD_WRITES = "write shards"
"""The stage of the shard tasks, counted in shards."""


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
    tables: dict[str, list[ShardTables]] = field(default_factory=dict)
    """Each split's shards' count tables (for the stats), as the shard tasks gave them."""


def reduce_parts(
    config: RunConfig,
    out: Path,
    parts: list[InputPart],
    part_dirs: Iterable[Path],
    runner: Runner,
    workdir: Path,
    progress: Progress | None = None,
    skipped: Sequence[str] = (),
    refused: dict[str, str] | None = None,
    repeated: RepeatedRows | None = None,
) -> Reduced:
    """Read the parts' directories (in plan order, as they become ready) into the
    quarantine file, the list of threads left out, the lint report and each part's
    selection (under `workdir`); then, if the lint gate passes, the shards under
    `out/data` (`out`: the output folder's staging folder), written by `runner`'s workers
    (pipeline/jobs/run/shard_tasks.py). The report lists the `skipped` files of the
    inputs' folders and globs, that are not data files. A split that got no rows gets no
    file. `repeated`: what a partition pass found (pipeline/jobs/run/partition.py)."""
    reducer = _Reducer(config, skipped, refused or {}, repeated, workdir)
    with ExitStack() as stack:
        quarantine = stack.enter_context(atomic_output(out / REJECTED_FILE))
        left_out = stack.enter_context(atomic_output(out / DROPPED_FILE))
        if progress is not None:
            progress("lint, dedup, split", 0, len(parts), reducer.counts)
        read: list[Path] = []
        for done, (part, part_dir) in enumerate(zip(parts, part_dirs, strict=True), 1):
            reducer.take_part(part, part_dir, (quarantine, left_out))
            read.append(part_dir)
            if progress is not None:
                progress("lint, dedup, split", done, len(parts), reducer.counts)
        report = reducer.lint.finish()
    gate_failed = report.failed(config.stages.lint.fail_on)
    if gate_failed:
        reducer.counts.withhold()  # no normal-looking output from a failed gate
    tasks: list[ShardTask] = []
    written: list[ShardDone] = []
    if reducer.selections is not None and not gate_failed:
        tasks = plan_shard_tasks(reducer.selections, read, config, out / "data")

        def shards_progress(count: int) -> None:
            if progress is not None:
                progress(SHARD_WRITES, count, len(tasks), None)

        shards_progress(0)
        written = runner.map_tasks(tasks, shards_progress)
        shutil.rmtree(workdir / SELECTED_DIR, ignore_errors=True)
    shards: dict[str, list[Shard]] = {}
    tables: dict[str, list[ShardTables]] = {}
    for task, shard_done in zip(tasks, written, strict=True):
        shards.setdefault(task.split, []).append(shard_done.shard)
        tables.setdefault(task.split, []).append(shard_done.tables)
    packing = None
    if config.stages.pack is not None and shards:
        packing = packing_stats(written, config.stages.pack.seq_len).to_dict()
        shards = dict(sorted(shards.items()))  # a packed output lists its splits by name
    return Reduced(reducer.counts, shards, report, read, gate_failed, packing, tables)


SHUFFLED_SPLIT = "train"
"""The split written in a shuffled order (with `shard.shuffle`): what training reads."""


class _Reducer:
    """The state of the ordered pass: the run's stages (their dataset side), the lint
    report, the counts."""

    def __init__(
        self,
        config: RunConfig,
        skipped: Sequence[str],
        refused: dict[str, str],
        repeated: RepeatedRows | None,
        workdir: Path,
    ):
        self.config = config
        self.repeated = repeated
        self.selections = _selections(config, workdir)
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
                kept = kept.select([*self.columns, SPLIT_GROUP, THREAD_GROUP, PART_ROW])
                if kept.num_rows:
                    _select(kept, self.config, (weight, origin), self.selections, self.counts)
        if self.selections is not None:
            self.selections.finish_part(part.id)

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
        rows = pa.array(np.arange(start, start + table.num_rows, dtype=np.int64))
        table = table.append_column(PART_ROW, rows)
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


def _select(
    table: pa.Table,
    config: RunConfig,
    origin: tuple[int, InputAccount],
    selections: Selections | None,
    counts: Account,
) -> None:
    """Split a batch of kept rows of one input (`origin`: its weight and account) and
    record them, weighted, in the part's selection (written by the shard tasks)."""
    weight, source = origin
    if selections is None:
        counts.not_sharded += table.num_rows
        return
    shard = config.stages.shard
    assert shard is not None
    chosen = split_rows(table, shard)
    part_rows = table[PART_ROW].to_numpy()
    for name, rows in chosen.items():
        if not rows:
            continue
        taken = table.take(pa.array(rows, type=pa.int64()))
        groups = taken[THREAD_GROUP].to_pylist()
        ids = taken["id"].to_pylist() if name == selections.shuffled else []
        tokens = (pc.sum(taken["num_tokens"]).as_py() or 0) if config.stages.pack else 0
        nbytes = taken.nbytes if shard.bytes_per_shard is not None else 0
        selections.add(name, part_rows[rows], weight, (groups, ids), (tokens, nbytes))
        counts.count_written(name, taken, weight, source)


def _selections(config: RunConfig, workdir: Path) -> Selections | None:
    """Where the ordered pass records the rows it keeps (None: the run writes no shards)."""
    shard = config.stages.shard
    if shard is None:
        return None
    folder = workdir / SELECTED_DIR
    shutil.rmtree(folder, ignore_errors=True)
    names = [name for name, _ in shard.splits]
    shuffled = SHUFFLED_SPLIT if shard.shuffle and SHUFFLED_SPLIT in names else None
    return Selections(folder, names, shuffled, shard.seed)


PART_ROW = "__part_row"
"""The ordered pass's column of a row's index in its part's threads file."""
