"""The dataset stages' partition pass (on Ray always; on the local engine for large inputs):
every part's keys of each partitioned stage (`Stage.partition_keys`: dedup's content and
band keys, lint's duplicate-thread key) are grouped by key, bucket by bucket, in the
runner's tasks (pipeline/engine/keys.py), and the rows whose key another row shares are
written to the work directory, part by part, with each one's link to the first row of its
key. The stage is then handed a column saying which of its rows are repeated, and keeps
state for those only (decided in plan order, cluster by cluster, in the runner's tasks:
pipeline/jobs/run/clusters.py): no process holds every key, and the decisions are those
of one process taking every row in order. A run that does not partition
(`partitions`) takes the parts as the map side finishes them and keeps every key in the
driver."""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.engine import LocalRunner, Runner, find_repeated
from pipeline.jobs.run.config import RunConfig
from pipeline.jobs.run.part import PART_THREADS
from pipeline.jobs.run.phases import PARTITION_KEYS, Progress
from pipeline.jobs.run.stages import Side, run_stages
from pipeline.sources import is_hf_input
from pipeline.sources.parts import InputPart, file_size
from pipeline.stages.contract import Stage
from pipeline.task_files import replaced

PARTITION_BYTES = 1 << 30
"""Inputs from which the local engine partitions keys by default (`engine.partition: auto`)."""

KEYS_DIR = "keys"
"""In the work directory: the partition pass's scratch folder, removed after (the work
directory is on a file system every node of the run sees)."""
REPEATED_DIR = "repeated"
"""In the work directory: one folder per partitioned stage, one `{part}.npy` per part that
has repeated rows (their sorted indices in the part's threads file)."""
LINKS_DIR = "links"
"""In the work directory: the partition pass's links (pipeline/engine/keys.py), each
repeated row with the first row of its key, that pipeline/jobs/run/clusters.py joins into
clusters (removed after)."""


def partition_pass(
    config: RunConfig,
    runner: Runner,
    parts: list[InputPart],
    part_dirs: Iterable[Path],
    workdir: Path,
    progress: Progress | None,
) -> tuple[Iterable[Path], RepeatedRows | None]:
    """When the run partitions (`partitions`), let the map side finish, then find the rows
    whose keys repeat; otherwise the parts' directories as the map side gives them (the
    driver then takes the parts as they become ready and decides every row, keeping every
    key itself) and None."""
    if not partitions(config, runner, parts):
        return part_dirs, None
    stages = partitioned(run_stages(config, Side()))
    if not stages:
        return part_dirs, None
    ready = list(part_dirs)
    if progress is not None:
        progress(PARTITION_KEYS, 0, len(stages), None)
    repeated = mark_repeated(runner, stages, ready, workdir)
    if progress is not None:
        progress(PARTITION_KEYS, len(stages), len(stages), None)
    return ready, repeated


def partitions(config: RunConfig, runner: Runner, parts: list[InputPart]) -> bool:
    """Whether the run finds shared keys in a partition pass (`engine.partition`): `auto`
    does on a distributed engine, and locally when the inputs hold PARTITION_BYTES or more
    (below that, the driver deciding every row as parts finish costs less than waiting for
    the map)."""
    choice = config.engine.partition or "auto"
    if choice == "never":
        return False
    if choice == "always":
        return True
    return not isinstance(runner, LocalRunner) or input_bytes(parts) >= PARTITION_BYTES


def input_bytes(parts: list[InputPart]) -> int:
    """The bytes the parts read (a part its range, a local or stored file its size; a Hub
    dataset counts nothing)."""
    total = 0
    for part in parts:
        if part.start is not None and part.end is not None:
            total += part.end - part.start
        elif not is_hf_input(part.path):
            total += file_size(part.path)
    return total


def partitioned(stages: Sequence[Stage]) -> list[Stage]:
    """The stages whose decisions partition by key."""
    return [stage for stage in stages if stage.partition_columns]


def part_keys(stages: Sequence[Stage], part_dir: str) -> pa.Table:
    """A part's keys for every stage of `stages`, from its threads file (read once, only
    the columns the stages read): each key prefixed with its stage's index, so no two
    stages share one, and each row numbered `row * len(stages) + index` (`stage_rows`
    takes a stage's rows back)."""
    columns = list(dict.fromkeys(c for stage in stages for c in stage.partition_columns))
    with pa.memory_map(str(Path(part_dir) / PART_THREADS)) as source:
        rows = pa.ipc.open_file(source).read_all().select(columns)
    found = []
    for index, stage in enumerate(stages):
        keys = stage.partition_keys(rows.select(list(stage.partition_columns)))
        prefix = pa.scalar(index.to_bytes(2, "big"), pa.binary())
        found.append(
            pa.table(
                {
                    "row": pc.add(pc.multiply(keys["row"].cast(pa.int64()), len(stages)), index),
                    "key": pc.binary_join_element_wise(prefix, keys["key"].cast(pa.binary()), b""),
                }
            )
        )
    return pa.concat_tables(found)


def stage_rows(rows: np.ndarray, index: int, stages: int) -> np.ndarray:
    """Stage `index`'s rows among the sorted, numbered rows `part_keys` made (sorted)."""
    found: np.ndarray = rows[rows % stages == index] // stages
    return found


def publish_stages(folders: Sequence[str], part_dir: str, rows: np.ndarray) -> None:
    """Write a part's repeated rows of each stage (`folders`, in the stages' order) that
    has some, from the numbered rows `part_keys` made."""
    for index, folder in enumerate(folders):
        found = stage_rows(rows, index, len(folders))
        if len(found):
            publish_repeated(folder, part_dir, found)


def publish_repeated(folder: str, part_dir: str, rows: np.ndarray) -> None:
    """Write a part's repeated rows (atomically: a retried task writes the same file)."""
    target = Path(folder) / f"{Path(part_dir).name}.npy"
    with replaced(target) as temp, open(temp, "wb") as out:
        np.save(out, np.asarray(rows, dtype=np.int64))
        out.flush()
        os.fsync(out.fileno())


def mark_repeated(
    runner: Runner, stages: Sequence[Stage], part_dirs: Sequence[Path], workdir: Path
) -> RepeatedRows:
    """Run one partition pass over the parts' directories for every partitioned stage at
    once (each stage's keys apart by a prefix): a part's keys read in one task, not one per
    stage, so the pass costs the driver the same few tasks per part whatever the stages."""
    folders = []
    for stage in stages:
        folder = workdir / REPEATED_DIR / stage.name
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        folders.append(str(folder))
    find_repeated(
        runner,
        [str(part_dir) for part_dir in part_dirs],
        functools.partial(part_keys, list(stages)),
        functools.partial(publish_stages, folders),
        workdir / KEYS_DIR,
        workdir / LINKS_DIR,
    )
    return RepeatedRows(workdir / REPEATED_DIR)


class RepeatedRows:
    """What the partition pass found, read back part by part."""

    def __init__(self, folder: Path):
        self.folder = folder
        self._part: str | None = None
        self._loaded: dict[str, np.ndarray] = {}

    def column(self, stage: str, part_id: str, start: int, count: int) -> pa.Array:
        """Whether each of the part's rows `start .. start + count` is repeated."""
        rows = self.rows(stage, part_id)
        mask = np.zeros(count, dtype=bool)
        inside = rows[(rows >= start) & (rows < start + count)]
        mask[inside - start] = True
        return pa.array(mask, pa.bool_())

    def rows(self, stage: str, part_id: str) -> np.ndarray:
        """The part's repeated rows for `stage`, sorted (the last part's kept in memory)."""
        if self._part != part_id:
            self._part, self._loaded = part_id, {}
        rows = self._loaded.get(stage)
        if rows is None:
            path = self.folder / stage / f"{part_id}.npy"
            rows = np.load(path) if path.is_file() else np.zeros(0, dtype=np.int64)
            self._loaded[stage] = rows
        return rows
