"""The step of `mms run` that takes rows in plan order: the rows whose keys
repeat (pipeline/jobs/run/partition.py: a duplicate and the thread it repeats, with the
other rows of their groups), decided by every stage in plan order, so that the first of
two copies is the one kept whatever the engine or the workers. What the partitioned stages'
state told of each of those rows (`Stage.resolutions`) is recorded per part; each part's
task (pipeline/jobs/run/decisions.py) then decides all its rows with those answers in
place of the state. A run that partitioned decides them in the runner's tasks, cluster by
cluster (pipeline/jobs/run/clusters.py); one that did not counts every row as repeated,
and decides them here, in one process."""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from pipeline.accounting import Account
from pipeline.engine import Runner
from pipeline.jobs.batch_steps import decide
from pipeline.jobs.run.clusters import decide_clusters
from pipeline.jobs.run.config import RunConfig
from pipeline.jobs.run.part_rows import (
    PART_ROW,
    RESOLVED_DIR,
    linked_rows,
    part_tables,
    write_resolved,
)
from pipeline.jobs.run.partition import RepeatedRows, partitioned
from pipeline.jobs.run.phases import REPEATED_ROWS, Progress
from pipeline.jobs.run.stages import Side, run_stages
from pipeline.lint import Linter
from pipeline.sources.parts import InputPart
from pipeline.stages.lint import Lint
from pipeline.stages.sample import THREAD_GROUP


def repeated_rows(
    config: RunConfig,
    parts: list[InputPart],
    part_dirs: Iterable[Path],
    repeated: RepeatedRows | None,
    workdir: Path,
    progress: Progress | None,
    runner: Runner | None = None,
) -> RepeatedPass:
    """Decide the repeated rows of every part in plan order; `repeated`: what a partition
    pass found (pipeline/jobs/run/partition.py), whose rows are then decided cluster by
    cluster in `runner`'s tasks (pipeline/jobs/run/clusters.py). Without it every row
    counts as repeated, and this process decides them as the parts' directories become
    ready (the map side's last parts finish meanwhile)."""
    first = RepeatedPass(config, repeated, workdir)
    if progress is not None:
        progress(REPEATED_ROWS, 0, len(parts), None)
    if repeated is not None and runner is not None:
        first.part_dirs = list(part_dirs)
        if first.partitioned:
            ids = [part.id for part in parts]
            decide_clusters(config, runner, ids, first.part_dirs, repeated, first.folder, workdir)
        if progress is not None:
            progress(REPEATED_ROWS, len(parts), len(parts), None)
        return first
    for done, (part, part_dir) in enumerate(zip(parts, part_dirs, strict=True), 1):
        first.take_part(part, part_dir)
        if progress is not None:
            progress(REPEATED_ROWS, done, len(parts), None)
    return first


class RepeatedPass:
    """The pass over the repeated rows (see the module docstring), part after part."""

    def __init__(self, config: RunConfig, repeated: RepeatedRows | None, workdir: Path):
        side = Side(lint_source=config.recorded_source, resolving=True)
        self.stages = run_stages(config, side)
        self.partitioned = partitioned(self.stages)
        self.repeated = repeated
        self.part_dirs: list[Path] = []
        """The parts' directories taken so far, in plan order."""
        self.folder = workdir / RESOLVED_DIR
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder.mkdir(parents=True)

    @property
    def linter(self) -> Linter | None:
        """The linter whose keyed rules saw the repeated rows in this process (their
        findings at the end; the keyed rules tell theirs per row, so one that saw none when
        the runner's tasks decided them tells the same)."""
        lint = next((stage for stage in self.stages if isinstance(stage, Lint)), None)
        return lint.linter if lint is not None else None

    def take_part(self, part: InputPart, part_dir: Path) -> int:
        """Decide the part's repeated rows and record what the partitioned stages' state
        told of them (`resolved_path`); the number of rows decided."""
        self.part_dirs.append(part_dir)
        if not self.partitioned:
            return 0
        rows = None
        if self.repeated is not None:
            rows = linked_rows(part_dir, part.id, self.partitioned, self.repeated)
            if not len(rows):
                return 0
        decided: list[np.ndarray] = []
        answers: dict[str, list[object]] = {stage.name: [] for stage in self.partitioned}
        scratch = Account()  # the part's task counts these rows
        for table in part_tables(part_dir, part.id, self.partitioned, self.repeated, rows):
            decide(self.stages, table, scratch, table[THREAD_GROUP].to_pylist(), record=False)
            decided.append(table[PART_ROW].to_numpy())
            for stage in self.partitioned:
                answers[stage.name] += stage.resolutions()
        write_resolved(self.resolved_path(part.id) / "all.arrow", decided, answers)
        return int(sum(len(rows) for rows in decided))

    def resolved_path(self, part_id: str) -> Path:
        """The folder of what the pass found of a part's repeated rows."""
        return self.folder / part_id
