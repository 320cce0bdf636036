"""The dataset side of `mms run`, so that the output never depends on the number of workers
or the engine. The driver decides, in plan order, only the rows whose keys repeat (a
duplicate and what it repeats: pipeline/jobs/run/repeated_pass.py); every part is then
decided by its own task on the engine's workers (pipeline/jobs/run/decisions.py: the
stages' decisions, the drops listed, the findings and counts recorded, the rows kept split,
weighted and recorded in the part's selection, pipeline/jobs/run/selection.py), and the
driver merges the tasks' results in plan order. If the lint gate passes, the workers then
write the shards in parallel (pipeline/jobs/run/shard_tasks.py). The train split's rows are
shuffled (seeded by `shard.seed`; `shard.shuffle`, on by default) before they are packed
(if they are), a preference pair's or group's rows kept together, so any range of its row
groups holds the sources mixed as the whole does; the other splits keep the plan order."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import orjson

from pipeline.accounting import Account, InputAccount
from pipeline.engine import Runner
from pipeline.jobs.run.config import RunConfig
from pipeline.jobs.run.decisions import DECIDED_DIR, DecidePart, PartDecided, selections_for
from pipeline.jobs.run.part import PART_REJECTED, PART_STATS
from pipeline.jobs.run.part_rows import RESOLVED_DIR
from pipeline.jobs.run.partition import RepeatedRows
from pipeline.jobs.run.repeated_pass import RepeatedPass
from pipeline.jobs.run.selection import SELECTED_DIR, Selections
from pipeline.jobs.run.shard_tasks import ShardDone, ShardTask, packing_stats, plan_shard_tasks
from pipeline.jobs.run.stages import Side, run_stages
from pipeline.lint import LintReport, select_rules
from pipeline.lint.store import DiagnosticStore
from pipeline.output.files import atomic_output
from pipeline.output.shards import Shard
from pipeline.quarantine import DROPPED_FILE, REJECTED_FILE
from pipeline.sources.parts import InputPart
from pipeline.stages.lint import Lint

if TYPE_CHECKING:
    from pipeline.jobs.stats.compute import ShardTables

Progress = Callable[[str, int, int, Account | None], None]
"""(stage, parts done, parts in all, the run's counts so far when the stage has them); for
SHARD_WRITES, shards written of all."""
REPEATED_ROWS = "repeated rows"
"""The stage of the pass over the rows whose keys repeat, counted in parts."""
PART_DECISIONS = "lint, dedup, split"
"""The stage of the parts' tasks, counted in parts."""
SHARD_WRITES = "write shards"
"""The stage of the shard tasks, counted in shards."""


@dataclass
class Reduced:
    """What the dataset side produced: the counts, the shards (only splits that got rows;
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
    media: tuple[str, ...] = ()
    """The media kinds the run's kept rows hold (none: text only)."""
    media_files: dict[str, int] = field(default_factory=dict)
    """The media the shard tasks published under media/ (copy mode): name, bytes."""


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
    """Decide the repeated rows in plan order, as the parts' directories become ready
    (pipeline/jobs/run/repeated_pass.py); then every part in its own task on `runner`
    (pipeline/jobs/run/decisions.py), merged in plan order into the quarantine file, the
    list of threads left out, the lint report and the counts; then, if the lint gate
    passes, the shards under `out/data` (`out`: the output folder's staging folder),
    written by `runner`'s workers (pipeline/jobs/run/shard_tasks.py). The report lists the
    `skipped` files of the inputs' folders and globs, that are not data files. A split that
    got no rows gets no file. `repeated`: what a partition pass found
    (pipeline/jobs/run/partition.py); without it every row counts as repeated."""
    first = RepeatedPass(config, repeated, workdir)
    read: list[Path] = []
    if progress is not None:
        progress(REPEATED_ROWS, 0, len(parts), None)
    for done, (part, part_dir) in enumerate(zip(parts, part_dirs, strict=True), 1):
        first.take_part(part, part_dir)
        read.append(part_dir)
        if progress is not None:
            progress(REPEATED_ROWS, done, len(parts), None)
    merger = _Merger(config, skipped, refused or {}, workdir)
    tasks = [
        DecidePart(
            config,
            part,
            str(part_dir),
            str(workdir),
            str(repeated.folder) if repeated is not None else None,
            str(first.resolved_path(part.id)),
        )
        for part, part_dir in zip(parts, read, strict=True)
    ]

    def parts_progress(count: int) -> None:
        if progress is not None:
            progress(PART_DECISIONS, count, len(tasks), None)

    parts_progress(0)
    decided = runner.map_tasks(tasks, parts_progress)
    with ExitStack() as stack:
        quarantine = stack.enter_context(atomic_output(out / REJECTED_FILE))
        left_out = stack.enter_context(atomic_output(out / DROPPED_FILE))
        for part, part_dir, found in zip(parts, read, decided, strict=True):
            merger.take_part(part, part_dir, found, (quarantine, left_out))
        report = merger.lint.finish(keyed_by=first.linter)
    if progress is not None:
        progress(PART_DECISIONS, len(tasks), len(tasks), merger.counts)
    shutil.rmtree(workdir / DECIDED_DIR, ignore_errors=True)
    shutil.rmtree(workdir / RESOLVED_DIR, ignore_errors=True)
    gate_failed = report.failed(config.stages.lint.fail_on)
    if gate_failed:
        merger.counts.withhold()  # no normal-looking output from a failed gate
    tasks_of_shards: list[ShardTask] = []
    written: list[ShardDone] = []
    if merger.selections is not None and not gate_failed:
        tasks_of_shards = plan_shard_tasks(merger.selections, read, config, out / "data")

        def shards_progress(count: int) -> None:
            if progress is not None:
                progress(SHARD_WRITES, count, len(tasks_of_shards), None)

        shards_progress(0)
        written = runner.map_tasks(tasks_of_shards, shards_progress)
        shutil.rmtree(workdir / SELECTED_DIR, ignore_errors=True)
    shards: dict[str, list[Shard]] = {}
    tables: dict[str, list[ShardTables]] = {}
    for task, shard_done in zip(tasks_of_shards, written, strict=True):
        shards.setdefault(task.split, []).append(shard_done.shard)
        tables.setdefault(task.split, []).append(shard_done.tables)
    packing = None
    if config.stages.pack is not None and shards:
        packing = packing_stats(written, config.stages.pack.seq_len).to_dict()
        shards = dict(sorted(shards.items()))  # a packed output lists its splits by name
    media = merger.selections.media if merger.selections is not None else ()
    media_files = {name: size for done in written for name, size in done.media}
    return Reduced(
        merger.counts, shards, report, read, gate_failed, packing, tables, media, media_files
    )


class _Merger:
    """What the driver keeps of the parts' tasks: the run's lint report and counts, and the
    record of the selections, merged part after part in plan order."""

    def __init__(
        self, config: RunConfig, skipped: Sequence[str], refused: dict[str, str], workdir: Path
    ):
        self.config = config
        self.selections = _fresh_selections(config, workdir)
        source = config.recorded_source
        lint_config = config.stages.lint.to_lint_config(source)
        self.report = LintReport(
            lint_config,
            select_rules(lint_config.select, lint_config.ignore),
            [config.recorded_path(spec.path) for spec in config.inputs],
            Account(skipped_files=list(skipped), refused_files=dict(refused)),
            DiagnosticStore(),
        )
        stages = run_stages(config, Side(lint_source=source, report=self.report))
        self.lint = next(stage for stage in stages if isinstance(stage, Lint))
        self.counts = self.report.stats
        self.counts.inputs = [
            InputAccount(config.recorded_path(spec.path), spec.license) for spec in config.inputs
        ]

    def take_part(
        self,
        part: InputPart,
        part_dir: Path,
        found: PartDecided,
        lists: tuple[BinaryIO, BinaryIO],
    ) -> None:
        """Take one part: its reading's counts and quarantined records (from its
        directory), and what its task decided; `lists`: the quarantine and the list of
        threads left out, which it extends."""
        quarantine, left_out = lists
        self._account(part, orjson.loads((part_dir / PART_STATS).read_bytes()))
        with (part_dir / PART_REJECTED).open("rb") as rejected:
            shutil.copyfileobj(rejected, quarantine)
        with open(found.dropped, "rb") as dropped:
            shutil.copyfileobj(dropped, left_out)
        self.counts.merge_decided(found.counts)
        self.counts.inputs[part.input_index].merge_decided(found.origin)
        if found.report is not None:
            self.report.merge(found.report)
            self.report.add(self.lint.linter.merge(found.checks))
        if self.selections is not None and found.totals is not None:
            self.selections.merge_part(part.id, found.totals)

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


def _fresh_selections(config: RunConfig, workdir: Path) -> Selections | None:
    """The run's record of the parts' selections, its folder emptied of an earlier run's."""
    shutil.rmtree(workdir / SELECTED_DIR, ignore_errors=True)
    return selections_for(config, workdir)
