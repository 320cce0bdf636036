"""The decisions of `mms run`'s dataset side (DESIGN §7): each part is one task on the
engine's workers, in parallel: every stage decides the part's rows (a partitioned stage
takes what the pass over repeated rows found, pipeline/jobs/run/repeated_pass.py, in place
of its state), the part's drops are listed, its findings and counts recorded, and the rows
it keeps split, weighted and recorded in its selection (pipeline/jobs/run/selection.py)
for the shard tasks. The driver merges what the tasks return, part after part, in plan
order, into the quarantine file, the list of threads left out, the lint report and the
counts: the same bytes as one process taking every row in order, so the output never
depends on the number of workers or the engine."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

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
from pipeline.jobs.run.part_rows import PART_ROW, RESOLVED_DIR, part_tables, resolved_columns
from pipeline.jobs.run.partition import RepeatedRows, partitioned
from pipeline.jobs.run.phases import PART_DECISIONS, Progress
from pipeline.jobs.run.repeated_pass import RepeatedPass
from pipeline.jobs.run.report_parts import (
    CHECKS_DIR,
    MergeChecks,
    save_checks,
    save_examples,
    wanted_examples,
)
from pipeline.jobs.run.selection import SELECTED_DIR, Selections, SplitTotals
from pipeline.jobs.run.stages import Side, row_schema, run_stages
from pipeline.jobs.run.work_removal import remove_on
from pipeline.lint import LintReport, select_rules
from pipeline.lint.diagnostic import Diagnostic
from pipeline.lint.report import ReportPart
from pipeline.lint.store import DiagnosticStore
from pipeline.mms.arrow import MEDIA_COLUMN
from pipeline.output.files import atomic_output
from pipeline.quarantine import DROPPED_FILE, REJECTED_FILE, dropped_line, rejection_from_line
from pipeline.sources.parts import InputPart
from pipeline.stages.contract import TOKENS_CUT
from pipeline.stages.lint import Lint
from pipeline.stages.sample import SPLIT_GROUP, THREAD_GROUP
from pipeline.stages.split import split_rows
from pipeline.task_files import replaced

DECIDED_DIR = "decided"
"""In the work directory: each part's list of the threads left out (`{part}.jsonl`)."""
FINDINGS_DIR = "findings"
"""In the work directory: each part's lint findings (`{part}.jsonl`), which the run's
report writers read (the findings never pass through the driver's memory)."""
SHUFFLED_SPLIT = "train"
"""The split written in a shuffled order (with `shard.shuffle`): what training reads."""


@dataclass
class Decided:
    """What the parts' tasks decided, merged in plan order: the run's counts and lint
    report, whether the lint gate failed, the record of the parts' selections (what the
    shard tasks write; None when the run writes no split), and the parts' directories in
    plan order."""

    counts: Account
    report: LintReport
    part_dirs: list[Path]
    gate_failed: bool
    selections: Selections | None

    @property
    def media(self) -> tuple[str, ...]:
        """The media kinds the run's kept rows hold (none: text only)."""
        return self.selections.media if self.selections is not None else ()


def decide_parts(
    config: RunConfig,
    out: Path,
    parts: list[InputPart],
    first: RepeatedPass,
    runner: Runner,
    workdir: Path,
    progress: Progress | None = None,
    skipped: Sequence[str] = (),
    refused: dict[str, str] | None = None,
) -> Decided:
    """Every part in its own task on `runner`, after the pass over the repeated rows
    (`first`, which took every part), merged in plan order into the quarantine file and
    the list of threads left out under `out` (the output folder's staging folder), the
    lint report and the counts; then whether the lint gate passes (a failed gate keeps
    no normal-looking counts). The report lists the `skipped` files of the inputs' folders
    and globs, that are not data files, and the `refused` ones."""
    merger = _Merger(config, skipped, refused or {}, workdir)
    repeated = first.repeated
    tasks = [
        DecidePart(
            config,
            part,
            str(part_dir),
            str(workdir),
            str(repeated.folder) if repeated is not None else None,
            str(first.resolved_path(part.id)),
            _part_threads(part_dir),
        )
        for part, part_dir in zip(parts, first.part_dirs, strict=True)
    ]

    def parts_progress(count: int) -> None:
        if progress is not None:
            progress(PART_DECISIONS, count, len(tasks), None)

    parts_progress(0)
    decided = runner.map_tasks(tasks, parts_progress)
    saved = [found.checks for found in decided if found.checks is not None]
    rows = sum(task.rows for task in tasks)
    merged = runner.map_tasks([MergeChecks(config, saved, rows)])[0] if saved else None
    told = iter(merged.found if merged is not None else ())
    with ExitStack() as stack:
        quarantine = stack.enter_context(atomic_output(out / REJECTED_FILE))
        left_out = stack.enter_context(atomic_output(out / DROPPED_FILE))
        for part, part_dir, found in zip(parts, first.part_dirs, decided, strict=True):
            at_merge = next(told) if found.checks is not None else []
            merger.take_part(part, part_dir, found, (quarantine, left_out), at_merge)
        if merged is not None:  # the parts merged: their state, as if merged here
            merger.report.add(merger.lint.linter.merge(merged.state))
            merger.report.profile.merge(merged.profile)
        report = merger.lint.finish(keyed_by=first.linter)
    if progress is not None:
        progress(PART_DECISIONS, len(tasks), len(tasks), merger.counts)
    remove_on(runner, [workdir / DECIDED_DIR, workdir / RESOLVED_DIR, workdir / CHECKS_DIR])
    gate_failed = report.failed(config.stages.lint.fail_on)
    if gate_failed:
        merger.counts.withhold()  # no normal-looking output from a failed gate
    return Decided(merger.counts, report, first.part_dirs, gate_failed, merger.selections)


def _part_threads(part_dir: Path) -> int:
    """The threads a part's map side kept, as its stats.json counts them."""
    counts = orjson.loads((Path(part_dir) / PART_STATS).read_bytes())
    return int(counts["threads"])


@dataclass
class PartDecided:
    """What a part's task found: its drops, groups and written rows (`counts`, and its
    input's share, `origin`), its lint findings, the file of its unkeyed dataset rules'
    state, what its selection holds per split, and the file listing the threads it left
    out."""

    counts: Account
    origin: InputAccount
    report: ReportPart | None
    checks: str | None
    totals: dict[str, SplitTotals] | None
    dropped: str
    examples: str | None = None
    """The folder of the report's example findings (`save_examples`), taken out of
    `report` (which lists their rules, with no example): None when the part has none."""


@dataclass(frozen=True)
class DecidePart:
    """The task of one part (see the module docstring); `repeated`: the partition pass's
    folder, when the run partitioned; `resolved`: the repeated rows' answers."""

    config: RunConfig
    part: InputPart
    part_dir: str
    workdir: str
    repeated: str | None
    resolved: str
    rows: int
    """The threads the part's map side kept (its stats.json): a local engine runs a few
    small tasks in the planning process rather than start workers for them."""

    def __call__(self) -> PartDecided:
        config, part, part_dir = self.config, self.part, Path(self.part_dir)
        source = config.recorded_source
        lint_config = config.stages.lint.to_lint_config(source)
        counts = Account()
        report = LintReport(lint_config, [], [], counts, DiagnosticStore())
        stages = run_stages(config, Side(lint_source=source, report=report))
        lint = next((stage for stage in stages if isinstance(stage, Lint)), None)
        with (part_dir / PART_REJECTED).open("rb") as rejected:
            for line in rejected:
                rejection = rejection_from_line(line)
                for stage in stages:
                    stage.rejected(rejection)
        for stage in stages:
            state_file = part_dir / stage_file(stage.name)
            if state_file.is_file():
                stage.merge_part(orjson.loads(state_file.read_bytes()))
        origin = InputAccount(part.path)
        selections = selections_for(config, Path(self.workdir))
        dropped = Path(self.workdir) / DECIDED_DIR / f"{part.id}.jsonl"
        dropped.parent.mkdir(parents=True, exist_ok=True)
        with replaced(dropped) as temp, temp.open("wb") as left_out:
            with (part_dir / PART_DROPPED).open("rb") as map_drops:
                shutil.copyfileobj(map_drops, left_out)
            self._decide_rows(stages, (counts, origin), selections, left_out)
        if selections is not None:
            selections.finish_part(part.id)
        recorded, examples, checks = None, None, None
        if lint is not None:  # the driver's report takes the files, not the bytes
            findings = Path(self.workdir) / FINDINGS_DIR / f"{part.id}.jsonl"
            findings.parent.mkdir(parents=True, exist_ok=True)
            report.diagnostics.save(findings)
            recorded = report.part()
            kept = Path(self.workdir) / CHECKS_DIR
            examples = save_examples(recorded, kept / f"{part.id}.examples")
            checks = save_checks(lint.linter.state(), recorded, kept / f"{part.id}.pickle")
        return PartDecided(
            counts,
            origin,
            recorded,
            checks,
            selections.totals if selections is not None else None,
            str(dropped),
            examples,
        )

    def _decide_rows(
        self,
        stages: list[Any],
        accounts: tuple[Account, InputAccount],
        selections: Selections | None,
        left_out: BinaryIO,
    ) -> None:
        """Decide, list, count and select the part's rows, a table of whole groups at a
        time."""
        config, part, part_dir = self.config, self.part, Path(self.part_dir)
        counts, origin = accounts
        resolving = partitioned(stages)
        repeated = RepeatedRows(Path(self.repeated)) if self.repeated is not None else None
        resolved = resolved_columns(Path(self.resolved), resolving, _row_count(part_dir))
        weight = config.inputs[part.input_index].weight
        columns = row_schema(config).names
        for table in part_tables(part_dir, part.id, resolving, repeated):
            where = table[PART_ROW]
            for name, column in resolved.items():
                table = table.append_column(name, column.take(where))
            drops: dict[int, Drop] = {}
            groups = table[THREAD_GROUP].to_pylist()
            reasons = decide(stages, table, counts, groups, drops)
            _list_drops(table, drops, left_out)
            counts.count_groups(groups, reasons)
            _count_tokens_lost(table, reasons, counts)
            origin.dropped_by.update(reason for reason in reasons if reason is not None)
            kept = table.filter(pa.array([reason is None for reason in reasons], pa.bool_()))
            media = [MEDIA_COLUMN] if MEDIA_COLUMN in kept.column_names else []
            kept = kept.select([*columns, *media, SPLIT_GROUP, THREAD_GROUP, PART_ROW])
            if kept.num_rows:
                _select(kept, config, (weight, origin), selections, counts)


def selections_for(config: RunConfig, workdir: Path) -> Selections | None:
    """Where a run records the rows each part keeps (None: the run writes no shards)."""
    shard = config.stages.shard
    if shard is None:
        return None
    names = [name for name, _ in shard.splits]
    shuffled = SHUFFLED_SPLIT if shard.shuffle and SHUFFLED_SPLIT in names else None
    return Selections(workdir / SELECTED_DIR, names, shuffled, shard.seed)


def _row_count(part_dir: Path) -> int:
    """The rows of a part's threads file."""
    with pa.memory_map(str(part_dir / PART_THREADS)) as mapped:
        threads = pa.ipc.open_file(mapped)
        return sum(threads.get_batch(i).num_rows for i in range(threads.num_record_batches))


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
        kinds = _media_kinds(taken)
        selections.add(name, part_rows[rows], weight, (groups, ids), (tokens, nbytes), kinds)
        counts.count_written(name, taken, weight, source)


def _media_kinds(rows: pa.Table) -> frozenset[str]:
    """The media kinds the rows' threads hold (their `media` column, DESIGN §3)."""
    if MEDIA_COLUMN not in rows.column_names:
        return frozenset()
    kinds = pc.list_flatten(rows[MEDIA_COLUMN]).combine_chunks().field("kind")
    return frozenset(kind for kind in pc.unique(kinds).to_pylist() if kind is not None)


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
        at_merge: list[Diagnostic],
    ) -> None:
        """Take one part: its reading's counts and quarantined records (from its
        directory), what its task decided, and what merging its dataset rules' state told
        (`at_merge`, pipeline/jobs/run/report_parts.py); `lists`: the quarantine and the
        list of threads left out, which it extends."""
        quarantine, left_out = lists
        self._account(part, orjson.loads((part_dir / PART_STATS).read_bytes()))
        with (part_dir / PART_REJECTED).open("rb") as rejected:
            shutil.copyfileobj(rejected, quarantine)
        with open(found.dropped, "rb") as dropped:
            shutil.copyfileobj(dropped, left_out)
        self.counts.merge_decided(found.counts)
        self.counts.inputs[part.input_index].merge_decided(found.origin)
        if found.report is not None:
            if found.examples is not None:
                most = self.report.config.max_examples
                found.report.examples = wanted_examples(
                    self.report.examples, most, found.report, found.examples
                )
            self.report.merge(found.report)
            self.report.add(at_merge)
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
