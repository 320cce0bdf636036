"""Reading a part's rows for the dataset side of `mms run`: its threads file in tables that
never cut a group, each with the columns the run adds (the row's index in the part, and
what the partition pass and the pass over repeated rows found of it). The pass over
repeated rows (pipeline/jobs/run/repeated_pass.py) and each part's task
(pipeline/jobs/run/decisions.py) read parts this way."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa

from pipeline.jobs.run.part import PART_THREADS
from pipeline.jobs.run.partition import RepeatedRows
from pipeline.mms.groups import whole_groups_end
from pipeline.output.files import atomic_output
from pipeline.stages.contract import Stage, repeated_column, resolved_column
from pipeline.stages.sample import THREAD_GROUP

PART_ROW = "__part_row"
"""The column of a row's index in its part's threads file."""
RESOLVED_DIR = "resolved"
"""In the work directory: one folder per part with repeated rows, holding what the pass over
them found (column `row`, and each partitioned stage's `resolved_column`) in one `.arrow`
file per task that decided some of them (their rows apart)."""


def part_tables(
    part_dir: Path,
    part_id: str,
    partitioned: Sequence[Stage],
    repeated: RepeatedRows | None,
    rows: np.ndarray | None = None,
) -> Iterator[pa.Table]:
    """The part's rows (only `rows`, sorted indices, when given) in tables that never cut a
    group, with PART_ROW and, when the run partitioned (`repeated`), each partitioned
    stage's `repeated_column`."""
    held: pa.Table | None = None
    with pa.memory_map(str(part_dir / PART_THREADS)) as mapped:
        threads = pa.ipc.open_file(mapped)
        start = 0
        for index in range(threads.num_record_batches):
            batch = threads.get_batch(index)
            table = _with_columns(batch, start, part_id, partitioned, repeated)
            start += batch.num_rows
            if rows is not None:
                table = _only(table, rows, start - batch.num_rows, start)
            if held is not None:
                table = pa.concat_tables([held, table])
            end = whole_groups_end(table[THREAD_GROUP].to_pylist())
            held = table.slice(end) if end < table.num_rows else None
            if end:
                yield table.slice(0, end)
    if held is not None:
        yield held


def _with_columns(
    batch: pa.RecordBatch,
    start: int,
    part_id: str,
    partitioned: Sequence[Stage],
    repeated: RepeatedRows | None,
) -> pa.Table:
    table = pa.Table.from_batches([batch])
    indices = pa.array(np.arange(start, start + table.num_rows, dtype=np.int64))
    table = table.append_column(PART_ROW, indices)
    if repeated is not None:
        for stage in partitioned:
            flags = repeated.column(stage.name, part_id, start, table.num_rows)
            table = table.append_column(repeated_column(stage.name), flags)
    return table


def _only(table: pa.Table, rows: np.ndarray, start: int, end: int) -> pa.Table:
    """The rows of `table` (part rows `start .. end`) among the sorted part rows `rows`."""
    lo, hi = np.searchsorted(rows, [start, end])
    return table.take(pa.array(rows[lo:hi] - start))


def linked_rows(
    part_dir: Path, part_id: str, partitioned: Sequence[Stage], repeated: RepeatedRows
) -> np.ndarray:
    """The part's rows that some partitioned stage found repeated, with the other rows of
    their groups (a group is decided whole), sorted."""
    found = [repeated.rows(stage.name, part_id) for stage in partitioned]
    rows = np.unique(np.concatenate(found)) if found else np.zeros(0, np.int64)
    if not len(rows):
        return rows
    with pa.memory_map(str(part_dir / PART_THREADS)) as mapped:
        groups = pa.ipc.open_file(mapped).read_all().column(THREAD_GROUP)
    return _with_groups(rows, groups)


def _with_groups(rows: np.ndarray, groups: pa.ChunkedArray) -> np.ndarray:
    """`rows` and every row of the groups they are in (a group's rows are consecutive)."""
    return with_group_starts(rows, groups)[0]


def with_group_starts(rows: np.ndarray, groups: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """`rows` and every row of the groups they are in (a group's rows are consecutive),
    sorted, and the first row of each one's group (a row alone: itself)."""
    codes = groups.combine_chunks().dictionary_encode().indices.to_numpy(zero_copy_only=False)
    valid = groups.combine_chunks().is_valid().to_numpy(zero_copy_only=False)
    codes = np.where(valid, codes, -1)
    new_run = np.ones(len(codes), bool)
    new_run[1:] = (codes[1:] != codes[:-1]) | (codes[1:] < 0)
    run_of = np.cumsum(new_run) - 1
    wanted = np.zeros(run_of[-1] + 1 if len(run_of) else 0, bool)
    wanted[run_of[rows]] = True
    found = np.flatnonzero(wanted[run_of]).astype(np.int64)
    starts = np.flatnonzero(new_run).astype(np.int64)
    return found, starts[run_of[found]]


def write_resolved(path: Path, rows: list[np.ndarray], answers: dict[str, list[object]]) -> None:
    """A part's resolved rows that some stage answered for (a row no stage told anything of
    reads as null, whether listed or not): their indices and each stage's answers (JSON),
    written atomically."""
    told = list(answers.values())
    keep = [r for r in range(len(told[0]) if told else 0) if any(t[r] is not None for t in told)]
    indices = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    columns = {"row": pa.array(indices[keep])}
    for stage, said in answers.items():
        encoded = [orjson.dumps(said[row]) if said[row] is not None else None for row in keep]
        columns[resolved_column(stage)] = pa.array(encoded, pa.binary())
    table = pa.table(columns)
    with atomic_output(path) as sink, pa.ipc.new_file(sink, table.schema) as out:
        out.write_table(table)


def resolved_columns(path: Path, stages: Sequence[Stage], count: int) -> dict[str, pa.Array]:
    """Each stage's `resolved_column` over the part's `count` rows (null where the pass over
    repeated rows told nothing), from the files of its folder `path` (none: every row
    null)."""
    files = sorted(path.glob("*.arrow")) if path.is_dir() else []
    if not files:
        return {resolved_column(s.name): pa.nulls(count, pa.binary()) for s in stages}
    tables = []
    for file in files:
        with pa.memory_map(str(file)) as mapped:
            tables.append(pa.ipc.open_file(mapped).read_all())
    table = pa.concat_tables(tables)
    where = np.full(count, table.num_rows, np.int64)
    where[table["row"].to_numpy()] = np.arange(table.num_rows)
    columns = {}
    for stage in stages:
        name = resolved_column(stage.name)
        told = pa.concat_arrays([*table[name].chunks, pa.nulls(1, pa.binary())])
        columns[name] = told.take(pa.array(where))
    return columns
