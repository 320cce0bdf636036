"""The stage contract (DESIGN §2): taggers record, mixers decide.

A stage is configured by its own slice of the config. Its map side runs where a part is
read (any worker, any engine): it tags a batch of threads with the columns it publishes
(`columns`, part of the part's schema) and may keep a small per-part summary. Its dataset
side runs in each part's task (after the rows whose keys repeat, decided in plan order:
`resolutions`): from those columns it decides which of the rows still kept it drops, and
why, and may reshape the rows a split keeps before they are written (pack). The job counts
what every stage decided; no stage counts for itself."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.mms import MEDIA_COLUMN, THREAD_ARROW_SCHEMA, Thread, threads_from_arrow
from pipeline.quarantine import Rejection


class StageError(RuntimeError):
    """A stage that made a thread invalid MMS (a bug of the stage; the message names the
    stage and the thread)."""


@dataclass
class Batch:
    """Threads in flight through the map stages of one part: the threads, the Arrow rows a
    sink writes (None until a stage builds them: tokenize does), the columns the stages
    published (one value per thread) and the threads map stages left out, per reason (and
    their tokens, once tokenized)."""

    threads: list[Thread]
    rows: pa.Table | None = None
    columns: dict[str, pa.Array] = field(default_factory=dict)
    dropped: Counter[str] = field(default_factory=Counter)
    dropped_tokens: Counter[str] = field(default_factory=Counter)
    left_out: list[tuple[Thread, str, str]] = field(default_factory=list)
    """The threads map stages left out: (thread, stage, reason), for the list of drops."""
    tagged: Counter[str] = field(default_factory=Counter)
    """What curation stages found and tagged or rewrote (`stage:what`), counted."""

    def keep(self, mask: list[bool], reason: str, stage: str = "") -> Batch:
        """The batch without the threads `mask` leaves out, counted under `reason` (by
        `stage`). A map stage keeps or drops a group whole (pipeline/mms/groups.py)."""
        left_out = mask.count(False)
        if not left_out:
            return self
        self.dropped[reason] += left_out
        self.left_out += [
            (thread, stage, reason)
            for thread, keep in zip(self.threads, mask, strict=True)
            if not keep
        ]
        kept = pa.array(mask, pa.bool_())
        rows = self.rows
        if rows is not None and "num_tokens" in rows.column_names:
            left = rows["num_tokens"].filter(pc.invert(kept))
            self.dropped_tokens[reason] += pc.sum(left).as_py() or 0
        return Batch(
            [thread for thread, keep in zip(self.threads, mask, strict=True) if keep],
            rows.filter(kept) if rows is not None else None,
            {name: column.filter(kept) for name, column in self.columns.items()},
            self.dropped,
            self.dropped_tokens,
            self.left_out,
            self.tagged,
        )


class Stage:
    """One step of a job (see the module docstring). Every hook has a neutral default, so a
    stage implements only the sides it has."""

    name: ClassVar[str]
    columns: ClassVar[tuple[pa.Field, ...]] = ()
    """The columns `map` adds to every batch (their names are the stage's to publish)."""
    reshaped_schema: ClassVar[pa.Schema | None] = None
    """The columns of the rows `reshape` yields (None: those of the rows it is given)."""
    threads_per_row: ClassVar[int] = 1
    """The rows `reshape` turns into one (a preference pair's two): `rows_per_shard`
    counts the rows it yields."""
    partition_columns: ClassVar[tuple[str, ...]] = ()
    """The columns `partition_keys` reads; none: the stage does not partition."""
    sees_rejections: ClassVar[bool] = False
    """Whether `rejected` must see each record in reading order among the threads (a
    streaming job then finishes the batch read so far before handing one on)."""

    def prepare(self) -> None:
        """Load what every worker needs (a model, an index) in the process that starts the
        workers: forked workers inherit it, once in memory for all of them."""

    def map(self, batch: Batch) -> Batch:
        """Tag a batch (in the worker that read it)."""
        return batch

    def part_state(self) -> Any:
        """What the stage kept of the threads it mapped since the last call (JSON data; a
        run asks once per part), handed to `merge_part`."""
        return None

    def merge_part(self, state: Any) -> None:
        """Take a `part_state`, in reading order, before deciding on those threads."""

    def decide(self, rows: pa.Table, kept: list[bool]) -> list[str | None]:
        """Why each row still `kept` is dropped here (a reason), or None to keep it; rows
        already dropped by an earlier stage are given None."""
        return [None] * rows.num_rows

    def drop_details(self) -> dict[int, dict[str, Any]]:
        """What more there is to say of the rows the last `decide` dropped, by row (dedup:
        the id of the thread a duplicate repeats), for the list of threads left out."""
        return {}

    def partition_keys(self, rows: pa.Table) -> pa.Table:
        """The keys through which `decide` depends on other rows (columns `row`, the row's
        index in `rows`, and `key`, binary; several per row or none): a row none of whose
        keys another row of the dataset has is decided without the stage's state, so an
        engine that partitions the dataset by key hands `decide` the column
        `repeated_column(name)` (whether a key of the row is shared) and the stage keeps
        state only for those rows. Without that column every row counts as repeated."""
        return pa.table({"row": pa.array([], pa.int64()), "key": pa.array([], pa.binary())})

    def resolutions(self) -> list[Any]:
        """A partitioned stage's answers for the rows of the last `decide` that its state
        told of (JSON data per row, None where it told nothing). A run decides the rows
        whose keys repeat in one pass, in plan order, and hands these back to `decide` in
        each part's own task as the column `resolved_column(name)` (JSON, null for None),
        which then stands in for the state."""
        raise NotImplementedError(f"{self.name} keeps no state to resolve")

    def record(self, rows: pa.Table, reasons: list[str | None]) -> None:
        """See every row of a batch with the reason it was dropped (None: kept)."""

    def rejected(self, rejection: Rejection) -> None:
        """See a record that did not become a thread (in its part's order, before its threads)."""

    def reshape(self, split: str, rows: pa.Table) -> Iterator[pa.Table]:
        """The rows kept for `split` (in order, after the split and the weights) as the sink
        writes them: pack turns many threads into one row. By default unchanged."""
        yield rows

    def flush(self, split: str) -> Iterator[pa.Table]:
        """What `reshape` still holds of `split` once every row was given."""
        return iter(())


def repeated_column(stage: str) -> str:
    """The column an engine that partitions adds for the stage `stage` (see
    `Stage.partition_keys`): whether a key of the row is shared with another row."""
    return f"{stage}_repeated"


def resolved_column(stage: str) -> str:
    """The column a run adds for the partitioned stage `stage` in a part's task: what the
    stage's state told of each repeated row (`Stage.resolutions`, as JSON)."""
    return f"{stage}_resolved"


ORIGINAL_THREAD = "original_thread"
"""The published column of a map stage that changes a thread (tokenize's truncation): the
thread as read (JSON), null for the threads it left as they were."""
TOKENS_CUT = "tokens_cut"
"""The published column of a map stage that shortens a thread: the tokens it cut off
(the whole thread's less the written one's), null for the threads it left whole."""


def thread_as_read(rows: pa.Table, row: int) -> Thread:
    """The thread of a part's row as it was read (before any truncation)."""
    if ORIGINAL_THREAD in rows.column_names:
        original = rows[ORIGINAL_THREAD][row].as_py()
        if original is not None:
            return Thread.from_dict(orjson.loads(original))
    names = [*THREAD_ARROW_SCHEMA.names, *({MEDIA_COLUMN} & set(rows.column_names))]
    return threads_from_arrow(rows.slice(row, 1).select(names))[0]
