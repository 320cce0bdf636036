"""The steps every job runs its threads through (DESIGN §2): map a batch, decide, count.

Every job is a source of threads, a list of stages and a sink. Its driver is its own module
(the driver of `mms run` is pipeline/jobs/run/job.py); every driver uses these functions.

Threads go through the stages a batch at a time: each stage's map side tags the batch
(`map_batch`, `map_batches`), then each stage's dataset side decides, in list order, which
rows it drops and why (`decide`); every drop is counted once in the job's Account, under
the first stage's reason, and the sink gets the batch with those reasons. `mms run` splits
the two sides across an engine (the map side per part, the dataset side in the ordered
pass) with the same functions; convert, lint, tokenize and curate stream through
`StreamDriver`, in one process and reading order."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa

from pipeline.accounting import Account
from pipeline.mms import Thread, threads_to_arrow
from pipeline.mms.groups import GROUP_DROP, group_column, group_of, group_runs
from pipeline.quarantine import Rejection
from pipeline.stages.contract import Batch, Stage, StageError

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
    """Every stage's map side on one batch, in list order; each thread a stage rewrote is
    checked (`check_rewritten`), so no job writes a thread that is not valid MMS."""
    for stage in stages:
        earlier = list(batch.threads)  # a stage may change the list in place
        batch = stage.map(batch)
        check_rewritten(stage.name, earlier, batch.threads)
    return batch


def check_rewritten(stage: str, earlier: list[Thread], threads: list[Thread]) -> None:
    """Raise StageError naming `stage` and the thread when a thread of `threads` that is
    not one of `earlier` is invalid MMS. One that kept an earlier thread's messages and
    settings (only its meta is new: a tagger's findings) needs only a meta object; any
    other is validated whole."""
    before = {id(thread) for thread in earlier}
    kept_messages = {id(thread.messages) for thread in earlier}
    kept_settings = {id(thread.settings) for thread in earlier}
    for thread in threads:
        if id(thread) in before:
            continue
        try:
            if id(thread.messages) in kept_messages and id(thread.settings) in kept_settings:
                if not isinstance(thread.meta, dict):
                    raise ValueError(f"meta is {type(thread.meta).__name__}, not an object")
            else:
                thread.validate()
        except ValueError as err:
            where = thread.meta.get("locator") if isinstance(thread.meta, dict) else None
            raise StageError(
                f"stage {stage} made thread {thread.id} ({where or 'no locator'}) invalid "
                f"MMS: {err}"
            ) from None


def map_batches(
    threads: Iterable[Thread], stages: Sequence[Stage], batch_size: int = BATCH
) -> Iterator[Batch]:
    """The threads in batches of about `batch_size` (never cutting a group), each through
    every stage's map side."""
    for chunk in whole_group_batches(threads, batch_size):
        yield map_batch(Batch(chunk), stages)


def whole_group_batches(threads: Iterable[Thread], batch_size: int) -> Iterator[list[Thread]]:
    """The threads in lists of `batch_size`, each list grown past it to the end of a group
    its last thread is in (pipeline/mms/groups.py), so no group is cut."""
    iterator = iter(threads)
    chunk = list(itertools.islice(iterator, batch_size))
    while chunk:
        group = group_of(chunk[-1].meta)
        following = next(iterator, None)
        while following is not None and group is not None and group_of(following.meta) == group:
            chunk.append(following)
            following = next(iterator, None)
        yield chunk
        chunk = [] if following is None else [following]
        chunk += itertools.islice(iterator, batch_size - len(chunk))


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


@dataclass(frozen=True, slots=True)
class Drop:
    """Why a row was left out: the stage, its reason and what more it said (dedup: the id
    of the thread it repeats), for the list of threads left out."""

    stage: str
    reason: str
    details: dict[str, Any]


def decide(
    stages: Sequence[Stage],
    rows: pa.Table,
    account: Account,
    groups: Sequence[str | None] | None = None,
    drops: dict[int, Drop] | None = None,
    *,
    record: bool = True,
) -> list[str | None]:
    """Each stage decides in turn on the rows the earlier ones kept; every stage then sees
    the final reasons; each drop is counted once, under the first stage's reason.

    `groups` (each row's group, pipeline/mms/groups.py; a group's rows are consecutive and
    all in `rows`): when a stage drops a row of a group, the group's other rows are dropped
    with it, as `group:REASON`, before the next stage decides, so no group is ever left
    with a member missing. `drops`, when given, receives each dropped row's Drop. Without
    `record`, the stages do not see the final reasons (a run's pass over repeated rows:
    each part's task records them)."""
    kept = [True] * rows.num_rows
    reasons: list[str | None] = [None] * rows.num_rows
    runs = group_runs(groups) if groups is not None else []
    for stage in stages:
        decided = stage.decide(rows, kept)
        details = stage.drop_details() if drops is not None else {}
        for row, reason in enumerate(decided):
            if reason is not None and kept[row]:
                reasons[row], kept[row] = reason, False
                if drops is not None:
                    drops[row] = Drop(stage.name, reason, details.get(row, {}))
        for start, end in runs:
            if end - start > 1 and not all(kept[start:end]) and any(kept[start:end]):
                cause = next(r for r in reasons[start:end] if r is not None)
                partner = GROUP_DROP + cause.removeprefix(GROUP_DROP)
                for row in range(start, end):
                    if kept[row]:
                        reasons[row], kept[row] = partner, False
                        if drops is not None:
                            drops[row] = Drop(stage.name, partner, {})
    for stage in stages if record else ():
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
        keep_drops: bool = False,
    ):
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {batch_size}")
        self.stages, self.sink, self.account = list(stages), sink, account
        self.batch_size, self.progress = batch_size, progress
        self.keep_drops = keep_drops
        self.drops: dict[int, Drop] = {}
        """With `keep_drops`, why each row of the batch the sink is given was dropped."""
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
        """Drive every thread through the stages into the sink (a batch is never cut
        inside a group)."""
        for thread in threads:
            if len(self.pending) >= self.batch_size and not self._continues_group(thread):
                self._flush()
            self.pending.append(thread)
        self._flush()

    def _continues_group(self, thread: Thread) -> bool:
        group = group_of(thread.meta)
        return group is not None and group == group_of(self.pending[-1].meta)

    def _flush(self) -> None:
        if not self.pending:
            return
        batch = map_batch(Batch(self.pending), self.stages)
        self.pending = []
        self.account.dropped.update(batch.dropped)
        self.account.tagged.update(batch.tagged)
        for stage in self.stages:
            state = stage.part_state()
            if state is not None:
                stage.merge_part(state)
        if not self.stages:  # nothing decides: the rows are not built
            self.sink.write(batch, None, [None] * len(batch.threads))
        else:
            # nothing is written from these rows: the threads stay objects, not Arrow
            rows = batch_rows(batch, threads=False)
            groups = group_column(batch.threads)
            self.drops = {}
            drops = self.drops if self.keep_drops else None
            self.sink.write(batch, rows, decide(self.stages, rows, self.account, groups, drops))
        if self.progress is not None:
            self.progress()
