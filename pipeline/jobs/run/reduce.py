"""The reduce side of `mms run`: one pass over the units' files in unit order (so the
output never depends on the number of workers). Per thread: its findings recorded, the
dataset rules fed, the lint gate's drops, the message-count filters, dataset-wide exact
and near dedup, the tokenize stage's drops and the token filters; per batch: mixing
weights, the split by a stable hash of the thread's split group (its content key, or its
preference pair), and the shards, published only if the lint gate passes."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.accounting import ReadStats
from pipeline.dedup import NearDuplicateIndex
from pipeline.jobs.run.config import RunConfig
from pipeline.jobs.run.counts import RunCounts
from pipeline.jobs.run.keys import stable_fraction
from pipeline.jobs.run.unit import (
    DROP,
    FACTS,
    FINDINGS,
    GROUP,
    KEY,
    MESSAGES,
    NEAR,
    ORIGINAL,
    UNIT_EXAMPLES,
    UNIT_PROFILE,
    UNIT_REJECTED,
    UNIT_STATS,
    UNIT_THREADS,
    shard_schema,
)
from pipeline.lint import Diagnostic, Linter, LintReport
from pipeline.lint.diagnostic import ThreadRef
from pipeline.lint.profile import DatasetProfile
from pipeline.lint.report import example_thread
from pipeline.lint.store import DiagnosticStore
from pipeline.mms import THREAD_ARROW_SCHEMA, Thread, threads_from_arrow
from pipeline.output.files import atomic_output
from pipeline.output.shards import Shard, ShardWriter
from pipeline.quarantine import rejection_from_line
from pipeline.sources.parts import WorkUnit
from pipeline.tokenize.overlong import OverlongThreadError
from pipeline.tokenize.stage import zero_weight_messages

Progress = Callable[[str, int, int], None]


@dataclass
class Reduced:
    """What the ordered pass produced: the counts, the shards (only splits that got rows;
    none when the gate failed), the lint report, whether the gate failed, and the unit
    directories it read (in unit order)."""

    counts: RunCounts
    shards: dict[str, list[Shard]]
    report: LintReport
    unit_dirs: list[Path]
    gate_failed: bool = False


def reduce_units(
    config: RunConfig,
    out: Path,
    units: list[WorkUnit],
    unit_dirs: Iterable[Path],
    progress: Progress | None = None,
    skipped: Sequence[str] = (),
    refused: dict[str, str] | None = None,
) -> Reduced:
    """Read the units' directories (in unit order, as they become ready) into the shards
    under `out/data`, the quarantine file, and the lint report (which lists the `skipped`
    files of the inputs' folders and globs, that are not data files). The shards are
    published only when the lint gate passes; a split that got no rows gets no file."""
    reducer = _Reducer(config, skipped, refused or {})
    writers = _shard_writers(config, out)
    with ExitStack() as stack:
        quarantine = stack.enter_context(atomic_output(out / "quarantine" / "rejected.jsonl"))
        stack.push(_discard_on_error(writers))  # nothing half-written survives a failure
        if progress is not None:
            progress("lint, dedup, shard", 0, len(units))
        read: list[Path] = []
        for done, (unit, unit_dir) in enumerate(zip(units, unit_dirs, strict=True), 1):
            reducer.unit(unit, unit_dir, quarantine, writers)
            read.append(unit_dir)
            if progress is not None:
                progress("lint, dedup, shard", done, len(units))
        reducer.report.add(list(reducer.linter.finish()))
        gate_failed = reducer.report.failed(config.stages.lint.fail_on)
        if gate_failed:
            reducer.counts.withhold()
        for writer in writers.values():
            if gate_failed:
                writer.discard()  # no normal-looking output from a failed gate
            else:
                writer.commit()
    shards = {name: writer.shards for name, writer in writers.items() if writer.shards}
    return Reduced(reducer.counts, shards, reducer.report, read, gate_failed)


def _discard_on_error(writers: dict[str, ShardWriter]) -> Callable[..., bool]:
    """An exit callback removing every shard file written when the pass fails."""

    def on_exit(exc_type: type[BaseException] | None, *_: object) -> bool:
        if exc_type is not None:
            for writer in writers.values():
                writer.discard(keep_earlier=True)
        return False

    return on_exit


def _shard_writers(config: RunConfig, out: Path) -> dict[str, ShardWriter]:
    shard = config.stages.shard
    if shard is None:
        return {}
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
    """The state of the ordered pass: the linter's dataset rules, the report, the dedup
    keys seen, the counts."""

    def __init__(self, config: RunConfig, skipped: Sequence[str], refused: dict[str, str]):
        self.config = config
        lint_config = config.stages.lint.to_lint_config(
            config.recorded_path(config.source) if config.source else None
        )
        self.linter = Linter(lint_config)
        self.report = LintReport(
            lint_config,
            self.linter.rules,
            [config.recorded_path(spec.path) for spec in config.inputs],
            ReadStats(skipped_files=list(skipped), refused_files=dict(refused)),
            DiagnosticStore(),
        )
        self.counts = RunCounts()
        self.seen: set[int] = set()
        near = config.stages.dedup.near
        self.near = NearDuplicateIndex(near) if near is not None else None
        self.drop_on = frozenset(config.stages.lint.drop_on)
        self.columns = shard_schema(config).names
        # max_tokens when an overlong thread that reaches the tokenize stage ends the run
        tokenize = config.stages.tokenize
        self.overlong_error = (
            tokenize.max_tokens if tokenize is not None and tokenize.overlong == "error" else None
        )

    def unit(
        self, unit: WorkUnit, unit_dir: Path, quarantine: BinaryIO, writers: dict[str, ShardWriter]
    ) -> None:
        """Take one unit's files: its counts, quarantined records, profile and rows."""
        self._account(unit, orjson.loads((unit_dir / UNIT_STATS).read_bytes()))
        with (unit_dir / UNIT_REJECTED).open("rb") as rejected:
            for line in rejected:
                quarantine.write(line)
                self.report.check_rejection(self.linter, rejection_from_line(line), self.drop_on)
        profile = DatasetProfile.from_state(orjson.loads((unit_dir / UNIT_PROFILE).read_bytes()))
        self.report.profile.merge(profile)
        examples = orjson.loads((unit_dir / UNIT_EXAMPLES).read_bytes())
        weight = self.config.inputs[unit.input_index].weight
        first_row = 0
        with pa.memory_map(str(unit_dir / UNIT_THREADS)) as source:
            threads = pa.ipc.open_file(source)
            for index in range(threads.num_record_batches):
                table = pa.Table.from_batches([threads.get_batch(index)])
                keep = self._judge(table, examples, first_row)
                first_row += table.num_rows
                kept = table.filter(pa.array(keep, pa.bool_())).select([*self.columns, GROUP])
                if kept.num_rows:
                    _write(kept, self.config, weight, writers, self.counts)

    def _account(self, unit: WorkUnit, unit_counts: dict[str, Any]) -> None:
        stats, counts = self.report.stats, self.counts
        stats.records_read += unit_counts["records_read"]
        stats.records_converted += unit_counts["records_converted"]
        stats.threads += unit_counts["threads"]
        stats.quarantined.update(unit_counts["quarantined"])
        stats.formats.update(unit_counts["formats"])
        if unit.path not in stats.files:
            stats.files.append(unit.path)
        counts.records_read += unit_counts["records_read"]
        counts.records_converted += unit_counts["records_converted"]
        counts.quarantined.update(unit_counts["quarantined"])
        counts.threads += unit_counts["threads"]
        if unit_counts["sampled_out"]:
            counts.dropped["sampled_out"] += unit_counts["sampled_out"]

    def _judge(self, table: pa.Table, examples: dict[str, Any], first_row: int) -> list[bool]:
        """Record each row's findings; whether each row goes on to the shards (a dropped
        one is counted under its reason)."""
        ids = table["id"].to_pylist()
        findings = table[FINDINGS].to_pylist()
        facts = table[FACTS].to_pylist()
        keys = table[KEY].to_pylist()
        signatures = table[NEAR].to_pylist()
        message_counts = table[MESSAGES].to_pylist()
        drops = table[DROP].to_pylist()
        tokenized = "num_trained" in table.column_names
        trained = table["num_trained"].to_pylist() if tokenized else [None] * len(ids)
        tokens = table["num_tokens"].to_pylist() if tokenized else [None] * len(ids)
        keep = []
        for row, thread_id in enumerate(ids):
            found = [Diagnostic.from_dict(d) for d in orjson.loads(findings[row] or b"[]")]
            source, locator, *rule_facts = orjson.loads(facts[row])
            mapped = len(found)
            found += self.linter.observe(rule_facts, ThreadRef(thread_id, source, locator))
            reason = self._drop_reason(
                found, message_counts[row], keys[row], signatures[row], drops[row]
            ) or self._token_filter(trained[row], tokens[row])
            if found:
                shown = _examples_of(table, row, examples, first_row + row, mapped)
                self.report.add_shown(found, thread_id, shown, dropped=reason is not None)
            if reason == "overlong" and self.overlong_error is not None:
                tokens = table["num_tokens"][row].as_py()
                raise OverlongThreadError(_row_thread(table, row), tokens, self.overlong_error)
            if reason is not None:
                self.counts.dropped[reason] += 1
            keep.append(reason is None)
        return keep

    def _drop_reason(
        self,
        found: list[Diagnostic],
        message_count: int,
        key: int,
        signature: bytes | None,
        drop: str | None,
    ) -> str | None:
        """Why the thread is left out, stage by stage (lint gate, filters, dedup,
        tokenize), or None to keep it."""
        codes = sorted({d.code for d in found if d.code in self.drop_on})
        if codes:
            return f"lint:{codes[0]}"
        filters = self.config.stages.filters
        if message_count < filters.min_messages:
            return "too_few_messages"
        if filters.max_messages is not None and message_count > filters.max_messages:
            return "too_many_messages"
        if self.config.stages.dedup.enabled:
            if key in self.seen:
                return "duplicate"
            self.seen.add(key)
        near = self.near
        if near is not None and signature is not None and near.check(signature) is not None:
            return "near_duplicate"
        return drop

    def _token_filter(self, trained: int | None, tokens: int | None) -> str | None:
        """Why a tokenized thread is left out by the token filters, or None."""
        if trained is None or tokens is None:
            return None
        filters = self.config.stages.filters
        if trained < filters.min_trained_tokens:
            return "too_few_trained_tokens"
        if filters.max_tokens is not None and tokens > filters.max_tokens:
            return "too_many_tokens"
        return None


def _examples_of(
    table: pa.Table, row: int, examples: dict[str, Any], unit_row: int, mapped: int
) -> Callable[[int, Diagnostic], dict[str, Any]]:
    """The example threads of a row's findings: the unit's (taken by the worker, which
    had the thread) for the first `mapped`, the thread rebuilt from its row for the
    dataset rules' findings."""

    def shown(position: int, diagnostic: Diagnostic) -> dict[str, Any]:
        if position < mapped:
            return examples[f"{unit_row}:{position}"]
        return example_thread(_row_thread(table, row), diagnostic.message_index)

    return shown


def _row_thread(table: pa.Table, row: int) -> Thread:
    """The thread of a unit row as read (before any truncation)."""
    original = table[ORIGINAL][row].as_py()
    if original is not None:
        return Thread.from_dict(orjson.loads(original))
    return threads_from_arrow(table.slice(row, 1).select(THREAD_ARROW_SCHEMA.names))[0]


def _write(
    table: pa.Table,
    config: RunConfig,
    weight: int,
    writers: dict[str, ShardWriter],
    counts: RunCounts,
) -> None:
    """Filter a batch on tokens, weight and split it, then write it."""
    if not writers:
        counts.not_sharded += table.num_rows
        return
    shard = config.stages.shard
    assert shard is not None
    fractions = [stable_fraction(group, shard.seed) for group in table[GROUP].to_pylist()]
    table = table.drop_columns([GROUP])
    for name, rows in _split_rows(fractions, shard.splits).items():
        if not rows:
            continue
        part = table.take(pa.array(rows, type=pa.int64()))
        for copy in range(weight):
            writers[name].write(part if copy == 0 else _copy_ids(part, copy))
        counts.written[name] += part.num_rows * weight
        counts.copies += part.num_rows * (weight - 1)
        if "num_tokens" in part.column_names:
            counts.tokens += pc.sum(part["num_tokens"]).as_py() * weight
            counts.trained_tokens += pc.sum(part["num_trained"]).as_py() * weight
            counts.zero_weight_messages += zero_weight_messages(part["messages"]) * weight


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
