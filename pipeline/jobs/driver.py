"""The job driver (DESIGN §2): every job is a source of threads, a list of stages and a sink.

Threads go through the stages a batch at a time: each stage's map side tags the batch, then
each stage's dataset side decides, in list order, which rows it drops and why; every drop is
counted once in the job's Account, under the first stage's reason, and the sink gets the
batch with those reasons. `mms run` splits the two sides across an engine (the map side per
part, the dataset side in the ordered pass) with the same functions; convert, lint and
tokenize stream through `StreamDriver`, in one process and reading order."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Protocol

import pyarrow as pa

from pipeline.accounting import Account
from pipeline.mms import Thread, threads_to_arrow
from pipeline.quarantine import Rejection
from pipeline.stages.contract import Batch, Stage

BATCH = 1024
"""Threads per batch: one pass of every map stage (one tokenizer call) each."""


class Sink(Protocol):
    """Where a streaming job's results go."""

    def rejected(self, rejection: Rejection) -> None:
        """A record that did not become a thread."""

    def write(self, batch: Batch, rows: pa.Table | None, reasons: list[str | None]) -> None:
        """A batch after every stage: `rows[i]` is `batch.threads[i]` with the stages'
        columns (None in a job without stages); `reasons[i]` why a stage dropped it (None:
        kept)."""


def map_batch(batch: Batch, stages: Sequence[Stage]) -> Batch:
    """Every stage's map side on one batch, in list order."""
    for stage in stages:
        batch = stage.map(batch)
    return batch


def map_batches(
    threads: Iterable[Thread], stages: Sequence[Stage], batch_size: int = BATCH
) -> Iterator[Batch]:
    """The threads in batches of `batch_size`, each through every stage's map side."""
    iterator = iter(threads)
    while chunk := list(itertools.islice(iterator, batch_size)):
        yield map_batch(Batch(chunk), stages)


def batch_rows(batch: Batch, *, threads: bool = True) -> pa.Table:
    """A mapped batch as rows: the shard columns (as a stage built them, else the threads',
    or only their ids when `threads` is False) and every column the stages published."""
    if batch.rows is not None:
        table = batch.rows
    elif threads:
        table = threads_to_arrow(batch.threads)
    else:
        table = pa.table({"id": [thread.id for thread in batch.threads]})
    for name, column in batch.columns.items():
        table = table.append_column(name, column)
    return table


def decide(stages: Sequence[Stage], rows: pa.Table, account: Account) -> list[str | None]:
    """Each stage decides in turn on the rows the earlier ones kept; every stage then sees
    the final reasons; each drop is counted once, under the first stage's reason."""
    kept = [True] * rows.num_rows
    reasons: list[str | None] = [None] * rows.num_rows
    for stage in stages:
        for row, reason in enumerate(stage.decide(rows, kept)):
            if reason is not None and kept[row]:
                reasons[row], kept[row] = reason, False
    for stage in stages:
        stage.record(rows, reasons)
    account.dropped.update(reason for reason in reasons if reason is not None)
    return reasons


class StreamDriver:
    """Runs a streaming job: `run(threads)` with the threads of a source whose rejected
    records go to `rejected`.

    When a stage sees rejected records (`Stage.sees_rejections`: lint reports them in
    reading order), the batch read so far is finished before the rejection is handed on."""

    def __init__(
        self,
        stages: Sequence[Stage],
        sink: Sink,
        account: Account,
        *,
        batch_size: int = BATCH,
        progress: Callable[[], None] | None = None,
    ):
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {batch_size}")
        self.stages, self.sink, self.account = list(stages), sink, account
        self.batch_size, self.progress = batch_size, progress
        self.in_order = any(stage.sees_rejections for stage in self.stages)
        self.pending: list[Thread] = []

    def rejected(self, rejection: Rejection) -> None:
        """Take a record that did not become a thread (the source's `on_reject`)."""
        if self.in_order:
            self._flush()
        self.sink.rejected(rejection)
        for stage in self.stages:
            stage.rejected(rejection)

    def run(self, threads: Iterable[Thread]) -> None:
        """Drive every thread through the stages into the sink."""
        for thread in threads:
            self.pending.append(thread)
            if len(self.pending) >= self.batch_size:
                self._flush()
        self._flush()

    def _flush(self) -> None:
        if not self.pending:
            return
        batch = map_batch(Batch(self.pending), self.stages)
        self.pending = []
        self.account.dropped.update(batch.dropped)
        for stage in self.stages:
            state = stage.part_state()
            if state is not None:
                stage.merge_part(state)
        if not self.stages:  # nothing decides: the rows are not built
            self.sink.write(batch, None, [None] * len(batch.threads))
        else:
            # nothing is written from these rows: the threads stay objects, not Arrow
            rows = batch_rows(batch, threads=False)
            self.sink.write(batch, rows, decide(self.stages, rows, self.account))
        if self.progress is not None:
            self.progress()
