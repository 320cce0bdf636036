"""A lint job on several cores: each part's threads are read, normalized and tagged by the
Lint stage's map side in a worker (thread findings, the dataset rules' facts, the
profile and example threads, as `mms run` does per part); the job's own Lint stage then
takes the parts in plan order, each record in reading order, as the streaming job does."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import orjson
import pyarrow as pa

from pipeline.accounting import Account
from pipeline.jobs.batch_steps import batch_rows, decide, map_batches
from pipeline.jobs.parallel import add_counts, parts_in_order, read_part, write_counts
from pipeline.jobs.read import ReadSpec
from pipeline.lint.config import LintConfig
from pipeline.mms import Thread
from pipeline.quarantine import Rejection
from pipeline.sources.parts import InputPart
from pipeline.stages.contract import ORIGINAL_THREAD
from pipeline.stages.lint import Lint

PART_ROWS = "rows.arrow"
"""One row per thread, in reading order: its id, the Lint stage's columns, and the thread
as read (JSON), from which the dataset side shows the thread of a dataset rule's finding."""
PART_REJECTED = "rejected.jsonl"
"""Per record that did not become a thread: [threads read before it, the Rejection]."""
PART_STATE = "lint.json"
"""What the part's Lint stage kept (its profile and example threads)."""
ROWS_SCHEMA = pa.schema(
    [pa.field("id", pa.string()), *Lint.columns, pa.field(ORIGINAL_THREAD, pa.binary())]
)
BATCH = 512
"""Threads per batch, on either side."""


@dataclass(frozen=True)
class LintPart:
    """The map side of a lint job for one part (picklable: it runs in a worker)."""

    spec: ReadSpec
    config: LintConfig

    def __call__(self, part: InputPart, part_dir: Path) -> None:
        stage = Lint(self.config)
        if part.name is not None:
            stage.linter.places = {part.name: part.path}
        stats = Account()
        with (part_dir / PART_REJECTED).open("wb") as rejected:
            counter = _Positions(rejected)
            threads = counter.count(read_part(part, self.spec, counter.rejected, stats))
            with pa.ipc.new_file(part_dir / PART_ROWS, ROWS_SCHEMA) as rows:
                for batch in map_batches(threads, [stage], BATCH):
                    json = [thread.to_json() for thread in batch.threads]
                    table = batch_rows(batch, threads=False)
                    rows.write_table(table.append_column(ORIGINAL_THREAD, pa.array(json)))
        (part_dir / PART_STATE).write_bytes(orjson.dumps(stage.part_state()))
        write_counts(part_dir, stats)


class _Positions:
    """Writes each rejected record with how many threads were read before it, so that
    the dataset side hands it on where reading the file whole does."""

    def __init__(self, out: BinaryIO):
        self.out = out
        self.threads = 0

    def count(self, threads: Iterator[Thread]) -> Iterator[Thread]:
        for thread in threads:
            self.threads += 1
            yield thread

    def rejected(self, rejection: Rejection) -> None:
        self.out.write(orjson.dumps([self.threads, rejection], option=orjson.OPT_APPEND_NEWLINE))


def lint_parts(
    parts: list[InputPart],
    spec: ReadSpec,
    stage: Lint,
    account: Account,
    workers: int,
    progress: Callable[[], None] | None = None,
) -> None:
    """Lint every part in `workers` processes; `stage` (the job's, with its report) takes
    them in plan order; `progress()` after each."""
    process = LintPart(spec, stage.linter.config)
    with parts_in_order(parts, process, workers) as part_dirs:
        for _, part_dir in part_dirs:
            add_counts(account, part_dir)
            stage.merge_part(orjson.loads((part_dir / PART_STATE).read_bytes()))
            with pa.memory_map(str(part_dir / PART_ROWS)) as mapped:
                rows = pa.ipc.open_file(mapped).read_all()
                done = 0
                for before, rejection in _rejections(part_dir):
                    _decide(stage, rows.slice(done, before - done), account)
                    stage.rejected(rejection)
                    done = before
                _decide(stage, rows.slice(done), account)
            if progress is not None:
                progress()


def _rejections(part_dir: Path) -> Iterator[tuple[int, Rejection]]:
    """A part's rejected records, each with how many of its threads came before it."""
    with (part_dir / PART_REJECTED).open("rb") as lines:
        for line in lines:
            before, data = orjson.loads(line)
            yield before, Rejection(**{**data, "details": tuple(data["details"])})


def _decide(stage: Lint, rows: pa.Table, account: Account) -> None:
    """The Lint stage's dataset side on rows of a part, a batch at a time; the threads it
    keeps are linted only (as the streaming job's sink counts them)."""
    for start in range(0, rows.num_rows, BATCH):
        reasons = decide([stage], rows.slice(start, BATCH), account)
        account.not_sharded += reasons.count(None)
