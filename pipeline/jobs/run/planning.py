"""The plan of a run: its parts (each input file, or a byte range of a big JSON Lines file;
pipeline/sources/parts.py), and the files of the inputs' folders that no part reads. The
plan depends on the inputs and the config alone, never on the engine or the workers."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path

from pipeline import storage
from pipeline.engine import Runner, workers_apart
from pipeline.formats import AUTO
from pipeline.formats.detect import detect
from pipeline.jobs.parallel import splits_by_record
from pipeline.jobs.run.config import RunConfig
from pipeline.sources import DEFAULT_SPLIT, InputFiles, Record
from pipeline.sources.parts import (
    CountLines,
    InputPart,
    LineWindow,
    WindowLines,
    count_here,
    input_files,
    iter_part_records,
    plan_parts,
)
from pipeline.stages.normalize import SNIFF_RECORDS

COUNT_HERE_BYTES = 1 << 30
"""Split files from which the planner counts their lines on the engine's workers."""


@dataclass(frozen=True)
class Plan:
    """A run's parts, in plan order, and the files its inputs' folders and globs hold that
    no part reads: `skipped` (not data files: a README, a licence) and `refused` (devices,
    symlinks out of the folder), with why; the summary and the lint report list them."""

    parts: list[InputPart]
    skipped: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)


def plan_run(config: RunConfig, output: Path | storage.StoredPath, runner: Runner) -> Plan:
    """The plan of a run writing `output` on `runner` (see `plan` and `passed_over`), its
    inputs listed once."""
    listed = [input_files(spec.path, output) for spec in config.inputs]
    parts = plan(config, output, runner, listed)
    skipped, refused = passed_over(listed)
    return Plan(parts, skipped, refused)


def plan(
    config: RunConfig,
    output: Path | storage.StoredPath | None = None,
    runner: Runner | None = None,
    listed: list[InputFiles] | None = None,
) -> list[InputPart]:
    """The run's parts, never from its output folder (default: the config's). A big
    JSON Lines file is split into parts only when its format is named and converts record
    by record: a detected format could differ between parts, and a grouped one (OASST
    messages) has conversations across records. Its lines are counted on `runner`'s
    workers when the split files hold COUNT_HERE_BYTES or more, or the workers are apart
    (Ray: the planner's process is the cluster's serial step), else here. `listed`: the
    inputs' files, when the caller listed them already."""
    return plan_parts(
        [(spec.path, spec.format) for spec in config.inputs],
        can_split=splits_by_record,
        exclude=output or config.output,
        count_lines=count_here if runner is None else _counted_on(runner),
        listed=listed,
    )


def _counted_on(runner: Runner) -> CountLines:
    """Count windows' newlines as tasks on `runner`, or here when they are few bytes and
    the workers are not apart."""

    def count(windows: list[LineWindow]) -> list[WindowLines]:
        if not windows:
            return []
        if (
            not workers_apart(runner)
            and sum(window.end - window.start for window in windows) < COUNT_HERE_BYTES
        ):
            return count_here(windows)
        return runner.map_tasks(windows)

    return count


def passed_over(listed: list[InputFiles]) -> tuple[list[str], dict[str, str]]:
    """The files in the inputs' folders and globs (`listed`) that no part reads: not data
    files (a README, a licence), and refused ones (devices, symlinks out of the folder),
    with why; the summary and the report list them."""
    skipped = [path for files in listed for path in files.skipped]
    refused = {path: why for files in listed for path, why in files.refused.items()}
    return skipped, refused


def detected_format(config: RunConfig, part: InputPart) -> str:
    """The format a part is read as: the named one, or what detection finds in its first
    records (for `--dry-run`)."""
    if part.format != AUTO:
        return part.format
    spec = config.inputs[part.input_index]
    items = iter_part_records(part, split=spec.split or DEFAULT_SPLIT, hf_config=spec.hf_config)
    head = itertools.islice((i.value for i in items if isinstance(i, Record)), SNIFF_RECORDS)
    return f"auto -> {detect(head).label}"
