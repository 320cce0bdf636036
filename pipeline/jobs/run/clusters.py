"""The rows whose keys repeat, decided in the runner's tasks rather than in one process: a
partitioned stage's state about a row is reached only through the row's keys (dedup's
content and band keys, lint's duplicate-thread key), so rows that share no key, directly
or through other rows, never see each other's state. The partition pass links each
repeated row to the first row of each of its keys (pipeline/engine/keys.py); one task joins
those links, and a group's rows (decided whole), into clusters, and deals the clusters out
to buckets; each bucket's task then decides its rows in plan order (a cluster's rows keep
their plan order inside its bucket) with every stage, as the one process taking every row
in order would (the first of two copies is the one kept), and writes what the partitioned
stages' state told of each row per part. No process holds every key, and the process that
plans submits a few tasks, whatever the rows."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from pipeline.accounting import Account
from pipeline.engine import Runner
from pipeline.engine.keys import LINK_ROW, LINK_SOURCE, MAX_TASKS, ROW, SOURCE
from pipeline.jobs.batch_steps import decide
from pipeline.jobs.run.config import RunConfig
from pipeline.jobs.run.part import PART_THREADS
from pipeline.jobs.run.part_rows import PART_ROW, part_tables, with_group_starts, write_resolved
from pipeline.jobs.run.partition import LINKS_DIR, RepeatedRows, partitioned
from pipeline.jobs.run.stages import Side, run_stages
from pipeline.stages.sample import THREAD_GROUP

CLUSTERS_DIR = "clusters"
"""In the work directory: one `bucket-{n}.arrow` per bucket of clusters, its rows (columns
PART, ROW) in plan order (removed after)."""
PART = "part"
_CODE_BITS = 40
"""A (part, row) as one integer, part << _CODE_BITS | row: sorted, plan order."""


def decide_clusters(
    config: RunConfig,
    runner: Runner,
    part_ids: Sequence[str],
    part_dirs: Sequence[Path],
    repeated: RepeatedRows,
    resolved: Path,
    workdir: Path,
) -> None:
    """Decide every repeated row, cluster by cluster in the runner's tasks, writing what the
    partitioned stages' state told of them under `resolved` (one folder per part, one file
    per bucket; see the module docstring)."""
    stages = len(partitioned(run_stages(config, Side())))
    folder = workdir / CLUSTERS_DIR
    buckets = min(len(part_ids), MAX_TASKS)
    find = FindClusters(
        [str(d) for d in part_dirs], list(part_ids), str(repeated.folder), stages,
        str(workdir / LINKS_DIR), str(folder), buckets,
    )  # fmt: skip
    try:
        filled = runner.map_tasks([find])[0]
        tasks = [
            DecideBucket(config, str(folder), bucket, str(repeated.folder), str(resolved))
            for bucket in filled
        ]
        runner.map_tasks(tasks)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(workdir / LINKS_DIR, ignore_errors=True)


@dataclass(frozen=True)
class FindClusters:
    """The task that joins the repeated rows into clusters and deals them to `buckets`
    files; it answers with the buckets that got rows."""

    part_dirs: list[str]
    part_ids: list[str]
    repeated: str
    stages: int
    links: str
    folder: str
    buckets: int

    def __call__(self) -> list[int]:
        nodes, targets = self._edges()
        if not len(nodes):
            return []
        found, inverse = np.unique(np.concatenate([nodes, targets]), return_inverse=True)
        labels = components(inverse[: len(nodes)], inverse[len(nodes) :], len(found))
        # clusters numbered by their first row, dealt out in turn
        _, cluster = np.unique(labels, return_inverse=True)
        bucket = cluster % self.buckets
        folder = Path(self.folder)
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        write_part_names(folder, self.part_ids, self.part_dirs)
        filled = []
        mask = (1 << _CODE_BITS) - 1
        for index in range(self.buckets):
            codes = found[bucket == index]  # sorted: plan order
            if not len(codes):
                continue
            table = pa.table({PART: pa.array(codes >> _CODE_BITS), ROW: pa.array(codes & mask)})
            _write_table(bucket_file(folder, index), table)
            filled.append(index)
        return filled

    def _edges(self) -> tuple[np.ndarray, np.ndarray]:
        """Every repeated row (and its group's rows) linked to itself, to the first row of
        each of its keys, and to its group's first row, as (part, row) codes."""
        nodes: list[np.ndarray] = []
        targets: list[np.ndarray] = []
        for path in sorted(Path(self.links).glob("links-*.arrow")):
            with pa.memory_map(str(path)) as mapped:
                table = pa.ipc.open_file(mapped).read_all()
            for source, row, into in ((SOURCE, ROW, nodes), (LINK_SOURCE, LINK_ROW, targets)):
                into.append(
                    (table[source].to_numpy() << _CODE_BITS)
                    | (table[row].to_numpy() // self.stages)
                )
        repeated = RepeatedRows(Path(self.repeated))
        names = [path.name for path in Path(self.repeated).iterdir() if path.is_dir()]
        for index, (part_id, part_dir) in enumerate(
            zip(self.part_ids, self.part_dirs, strict=True)
        ):
            found = [repeated.rows(name, part_id) for name in names]
            rows = np.unique(np.concatenate(found)) if found else np.zeros(0, np.int64)
            if not len(rows):
                continue
            with pa.memory_map(str(Path(part_dir) / PART_THREADS)) as mapped:
                groups = pa.ipc.open_file(mapped).read_all().column(THREAD_GROUP)
            rows, starts = with_group_starts(rows, groups)
            nodes.append((np.int64(index) << _CODE_BITS) | rows)
            targets.append((np.int64(index) << _CODE_BITS) | starts)
        if not nodes:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return np.concatenate(nodes), np.concatenate(targets)


def components(left: np.ndarray, right: np.ndarray, count: int) -> np.ndarray:
    """The connected components of `count` nodes joined by the edges (left[i], right[i]):
    each node's label, the least node of its component."""
    parent = np.arange(count, dtype=np.int64)
    while True:
        a, b = parent[left], parent[right]
        if np.array_equal(a, b):
            return parent
        low = np.minimum(a, b)
        np.minimum.at(parent, a, low)
        np.minimum.at(parent, b, low)
        while True:  # every node straight to its root
            up = parent[parent]
            if np.array_equal(up, parent):
                break
            parent = up


def bucket_file(folder: Path, bucket: int) -> Path:
    """The rows of bucket `bucket` of clusters."""
    return folder / f"bucket-{bucket:04d}.arrow"


@dataclass(frozen=True)
class DecideBucket:
    """The task of one bucket of clusters: its rows decided part by part in plan order,
    what the partitioned stages told of them written to `resolved/{part}/{bucket}.arrow`."""

    config: RunConfig
    folder: str
    bucket: int
    repeated: str
    resolved: str

    def __call__(self) -> int:
        with pa.memory_map(str(bucket_file(Path(self.folder), self.bucket))) as mapped:
            table = pa.ipc.open_file(mapped).read_all()
        parts, rows = table[PART].to_numpy(), table[ROW].to_numpy()
        side = Side(lint_source=self.config.recorded_source, resolving=True)
        stages = run_stages(self.config, side)
        resolving = partitioned(stages)
        repeated = RepeatedRows(Path(self.repeated))
        names = _part_names(Path(self.folder))
        scratch = Account()  # each part's own task counts these rows
        for index in np.unique(parts).tolist():
            lo, hi = np.searchsorted(parts, [index, index + 1])
            part_id, part_dir = names[index]
            decided: list[np.ndarray] = []
            answers: dict[str, list[object]] = {stage.name: [] for stage in resolving}
            for rows_table in part_tables(
                Path(part_dir), part_id, resolving, repeated, rows[lo:hi]
            ):
                groups = rows_table[THREAD_GROUP].to_pylist()
                decide(stages, rows_table, scratch, groups, record=False)
                decided.append(rows_table[PART_ROW].to_numpy())
                for stage in resolving:
                    answers[stage.name] += stage.resolutions()
            target = Path(self.resolved) / part_id / f"{self.bucket:04d}.arrow"
            write_resolved(target, decided, answers)
        return len(rows)


PARTS_FILE = "parts.arrow"
"""In the clusters folder: each part's id and directory, by its index in the plan."""


def write_part_names(folder: Path, part_ids: Sequence[str], part_dirs: Sequence[str]) -> None:
    """The parts' ids and directories, for the buckets' tasks to find a part by index."""
    table = pa.table({"id": pa.array(list(part_ids)), "dir": pa.array(list(part_dirs))})
    _write_table(folder / PARTS_FILE, table)


def _write_table(path: Path, table: pa.Table) -> None:
    """`table` as an Arrow file at `path`."""
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as out:
        out.write_table(table)


def _part_names(folder: Path) -> list[tuple[str, str]]:
    with pa.memory_map(str(folder / PARTS_FILE)) as mapped:
        table = pa.ipc.open_file(mapped).read_all()
    return list(zip(table["id"].to_pylist(), table["dir"].to_pylist(), strict=True))
