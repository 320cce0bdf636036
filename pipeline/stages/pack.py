"""The pack stage, configured by the `pack` slice: a dataset-level stage that reshapes each
split's kept rows, in order, into packed rows of at most `seq_len` tokens (DESIGN §7).

The rows of a split are taken `window` at a time (whatever batches they arrive in) and placed
best-fit-decreasing (pipeline.packing), so memory holds a window and the open sequences,
not the split, and the result depends only on the rows and the settings. A row over
`seq_len` follows the overlong policy: dropped (counted, listed by `dropped_lines`), cut at
a message boundary and rendered again (truncate), or a PackError naming it. Every other row
lands in exactly one packed row with its ids and labels unchanged."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.config_slice import ConfigSlice
from pipeline.mms import MEDIA_COLUMN, Thread, normalize_thread_dict
from pipeline.mms.media_columns import COLUMN_KINDS, kind_columns
from pipeline.objectives.lists import head, take_rows
from pipeline.packing import PACKED_SCHEMA, WINDOW, BestFitPacker, PackingStats, packed_columns
from pipeline.packing import packed_table as build_packed_table
from pipeline.stages.contract import Stage
from pipeline.tokenize import Renderer
from pipeline.tokenize.overlong import OverlongPolicy, fit_batch


class PackError(ValueError):
    """The rows cannot be packed: not tokenized, packed already, or a row over `seq_len`
    under the `error` policy."""


@dataclass(frozen=True, slots=True)
class PackSettings:
    """Pack the tokenized threads into rows of at most `seq_len` tokens, best-fit-decreasing
    over a window of `window` threads."""

    seq_len: int
    strategy: Literal["bfd"] = "bfd"
    window: int = WINDOW


CONFIG = ConfigSlice("pack", PackSettings, on_by_default=False)
"""Packing needs sft rows tokenized into shards: the run config checks that."""


@dataclass
class SplitPacking:
    """What packing one split did: rows read, packed, dropped (by reason), truncated."""

    rows_in: int = 0
    truncated: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    sequences: int = 0
    threads: int = 0
    tokens: int = 0
    trained: int = 0

    @property
    def balanced(self) -> bool:
        return self.rows_in == self.threads + sum(self.dropped.values())


class Pack(Stage):
    """See the module docstring. `renderer` gives the renderer that truncates (needed only
    under `overlong: truncate`)."""

    name = "pack"
    reshaped_schema = PACKED_SCHEMA

    def __init__(
        self,
        seq_len: int,
        *,
        window: int = WINDOW,
        overlong: OverlongPolicy = "error",
        renderer: Callable[[], Renderer] | None = None,
    ):
        self.seq_len, self.window, self.overlong, self.renderer = (
            seq_len,
            window,
            overlong,
            renderer,
        )
        self.splits: dict[str, _SplitPacker] = {}

    @classmethod
    def from_settings(cls, settings: PackSettings) -> Pack:
        """The pack stage of a run: its tokenize stage kept every thread within max_tokens
        (at most seq_len), so a longer one is an error."""
        return cls(settings.seq_len, window=settings.window)

    def reshape(self, split: str, rows: pa.Table) -> Iterator[pa.Table]:
        if split not in self.splits:
            renderer = (
                self.renderer()
                if self.overlong == "truncate" and self.renderer is not None
                else None
            )
            self.splits[split] = _SplitPacker(self.seq_len, self.window, self.overlong, renderer)
        yield from self.splits[split].add(rows)

    def flush(self, split: str) -> Iterator[pa.Table]:
        if split in self.splits:
            yield from self.splits[split].finish()

    def counts(self, split: str) -> SplitPacking:
        """What packing `split` did (empty for a split that got no rows)."""
        return self.splits[split].counts if split in self.splits else SplitPacking()

    def rows_read(self) -> int:
        """The rows given to `reshape` so far, over every split."""
        return sum(packer.counts.rows_in for packer in self.splits.values())

    def stats(self) -> PackingStats:
        """How well the sequences of every split were filled."""
        done = [packer.counts for packer in self.splits.values()]
        return PackingStats(
            sequences=sum(s.sequences for s in done),
            rows=sum(s.threads for s in done),
            tokens=sum(s.tokens for s in done),
            seq_len=self.seq_len,
        )

    def dropped_lines(self, split: str) -> Iterator[bytes]:
        """One line of quarantine/dropped.jsonl per row of `split` left out."""
        if split not in self.splits:
            return
        for thread_id, code, tokens in self.splits[split].drops:
            yield orjson.dumps(
                {"id": thread_id, "split": split, "stage": "pack", "code": code, "tokens": tokens},
                option=orjson.OPT_APPEND_NEWLINE,
            )


class _SplitPacker:
    """Cuts a split's rows into windows and feeds them to a BestFitPacker, keeping the rows
    of open sequences between windows."""

    def __init__(
        self, seq_len: int, window: int, overlong: OverlongPolicy, renderer: Renderer | None
    ):
        self.seq_len, self.window, self.overlong, self.renderer = (
            seq_len,
            window,
            overlong,
            renderer,
        )
        self.counts = SplitPacking()
        self.packer = BestFitPacker(seq_len, max_open=window)
        self.pending: list[pa.Table] = []  # rows given, not yet a whole window
        self.pending_rows = 0
        self.kept: pa.Table | None = None  # rows of the open sequences, then the window's
        self.numbers: list[int] = []  # the packer's number of each row of `kept`
        self.drops: list[tuple[str, str, int]] = []

    def add(self, rows: pa.Table) -> Iterator[pa.Table]:
        """Take the next rows; pack every whole window they complete."""
        self.counts.rows_in += rows.num_rows
        self.pending.append(rows)
        self.pending_rows += rows.num_rows
        while self.pending_rows >= self.window:
            waiting = pa.concat_tables(self.pending)
            rest = waiting.slice(self.window)
            self.pending, self.pending_rows = [rest], rest.num_rows
            yield from self._place(self._fitting(waiting.slice(0, self.window)))

    def finish(self) -> Iterator[pa.Table]:
        """Pack the last, partial window and close every open sequence."""
        if self.pending_rows:
            yield from self._place(self._fitting(pa.concat_tables(self.pending)))
        self.pending, self.pending_rows = [], 0
        if self.kept is not None:
            yield from self._emit(self.packer.finish())

    def _place(self, rows: pa.Table) -> Iterator[pa.Table]:
        """Place a window; keep its rows and those of the sequences still open."""
        still_open = self.packer.open_rows()
        carried = None
        if still_open:
            assert self.kept is not None  # the rows of the open sequences were kept
            where = {number: index for index, number in enumerate(self.numbers)}
            carried = self.kept.take(pa.array([where[n] for n in still_open], pa.int64()))
        start = self.packer.placed
        closed = self.packer.place(rows["num_tokens"].to_pylist())
        self.kept = pa.concat_tables([carried, rows]) if carried is not None else rows
        self.numbers = still_open + list(range(start, start + rows.num_rows))
        yield from self._emit(closed)

    def _emit(self, sequences: list[list[int]]) -> Iterator[pa.Table]:
        if not sequences:
            return
        where = {number: index for index, number in enumerate(self.numbers)}
        local = [[where[number] for number in sequence] for sequence in sequences]
        table = build_packed_table(self.kept, local)
        self.counts.sequences += table.num_rows
        self.counts.threads += sum(len(sequence) for sequence in sequences)
        self.counts.tokens += pc.sum(table["num_tokens"]).as_py()
        self.counts.trained += pc.sum(table["num_trained"]).as_py()
        yield table

    def _fitting(self, table: pa.Table) -> pa.Table:
        """The window's rows that fit, truncated ones included; others counted as dropped
        (or PackError under `error`)."""
        over = pc.greater(table["num_tokens"], self.seq_len)
        columns = packed_columns(table.column_names)
        if not pc.any(over).as_py():
            return table.select(columns)
        long = table.filter(over)
        if self.overlong == "error":
            row = long.select(["id", "num_tokens"]).slice(0, 1).to_pylist()[0]
            raise PackError(
                f"thread {row['id']} has {row['num_tokens']:,} tokens, more than --seq-len "
                f"{self.seq_len:,}: use --overlong drop or truncate, or a longer --seq-len"
            )
        fits = table.filter(pc.invert(over)).select(columns)
        if self.overlong == "drop":
            for row in long.select(["id", "num_tokens"]).to_pylist():
                self.drops.append((row["id"], "overlong", row["num_tokens"]))
            self.counts.dropped["overlong"] += long.num_rows
            return fits
        return pa.concat_tables([fits, self._truncated(long)])

    def _truncated(self, long: pa.Table) -> pa.Table:
        """The rows over seq_len cut at a message boundary and rendered again; each keeps
        the media (in its media columns) whose placeholders its cut kept."""
        if self.renderer is None:
            raise PackError("truncating a row over seq_len needs the output's tokenizer")
        read = ["id", "messages", *([MEDIA_COLUMN] if MEDIA_COLUMN in long.column_names else [])]
        threads = [_thread(row) for row in long.select(read).to_pylist()]
        encoded = self.renderer.encode_batch(threads)
        fit = fit_batch(threads, encoded, self.renderer, max_tokens=self.seq_len, policy="truncate")
        for drop in fit.drops:
            self.drops.append((drop.thread.id, drop.code, drop.num_tokens))
            self.counts.dropped[drop.code] += 1
        self.counts.truncated += len(fit.truncated)
        schema = long.select(packed_columns(long.column_names)).schema
        if fit.truncated_encoded is None:
            return schema.empty_table()
        batch = fit.truncated_encoded
        table = pa.table(
            {
                "id": [thread.id for thread in fit.truncated],
                "input_ids": batch.input_ids,
                "labels": batch.labels,
                "num_tokens": batch.num_tokens,
                "num_trained": batch.num_trained,
            }
        )
        rows = np.array(fit.truncated_rows, np.int64)  # by place: ids may repeat
        for name in kind_columns(long.column_names):
            kept = _placeholder_counts(batch.input_ids, self.renderer, name)
            table = table.append_column(name, head(take_rows(long[name], rows), kept))
        return table.cast(schema)


def _placeholder_counts(ids: pa.ListArray, renderer: Renderer, column: str) -> np.ndarray:
    """How many placeholders of the media kind of `column` each row of `ids` holds."""
    kind = COLUMN_KINDS[column]
    token = renderer.media_tokens[kind][1]
    parents = pc.list_parent_indices(ids).to_numpy()
    found = pc.equal(pc.list_flatten(ids), token).to_numpy(zero_copy_only=False)
    return np.bincount(parents[found], minlength=len(ids))


def _thread(row: dict[str, Any]) -> Thread:
    """A row's thread, its media (its `media` column, when it has one) in its messages."""
    return Thread.from_dict(normalize_thread_dict(row))
