"""Convert, lint and curate on several cores: their inputs planned into parts as `mms run` plans
them (pipeline/sources/parts.py), each part read and normalized in a worker process of
the local engine (pipeline/engine/), and the parts handed back in plan order, so that the
job's ordered side sees what one process reading every file in turn would have seen."""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import orjson

from pipeline.accounting import Account
from pipeline.engine import iter_parts
from pipeline.engine.workdir import Process
from pipeline.formats import AUTO, get_format
from pipeline.jobs.read import ReadSpec, count_files, files_to_read
from pipeline.mms import Thread
from pipeline.quarantine import Rejection
from pipeline.sources.parts import DEFAULT_SPLIT_BYTES, InputPart, iter_part_records, plan_parts
from pipeline.sources.stdin import STDIN
from pipeline.stages.normalize import read_items

PART_COUNTS = "counts.json"
"""The reading counts of a part, in its directory."""


def splits_by_record(path: str, format: str) -> bool:
    """Whether a big JSON Lines file may be read in parts: its format is named (a detected
    one could differ between parts) and converts record by record (no conversation spans
    records, as OASST's do)."""
    return format != AUTO and get_format(format).group is None


def job_parts(
    inputs: str | Iterable[str],
    spec: ReadSpec,
    stats: Account,
    workers: int,
    split_bytes: int = DEFAULT_SPLIT_BYTES,
    outputs: Iterable[str | os.PathLike[str]] = (),
) -> list[InputPart]:
    """The parts of a job's inputs when `workers` processes read them, with its files
    counted in `stats` (as `read` counts them); none, and nothing counted, when one
    process reads everything: one worker, or one part. The files are `read`'s, in its
    order; a big uncompressed JSON Lines file whose format `splits_by_record` is cut at
    line boundaries into parts of about `split_bytes`, any other file is one part.
    `outputs`: the files the job writes, never one of the inputs (OutputPathError)."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, not {workers}")
    if workers == 1:
        return []
    found = files_to_read(inputs, spec, outputs)
    if STDIN in found.files:  # standard input is read once, by this process
        return []
    planned = plan_parts(
        [(path, spec.format) for path in found.files], split_bytes, can_split=splits_by_record
    )
    # each file was planned as an input of its own: name it as its input named it
    parts = [dataclasses.replace(part, name=found.names.get(part.path)) for part in planned]
    if len(parts) < 2:
        return []
    count_files(stats, found)
    return parts


def read_part(
    part: InputPart, spec: ReadSpec, on_reject: Callable[[Rejection], object], stats: Account
) -> Iterator[Thread]:
    """The threads of one part, read as `spec` says; its rejected records go to
    `on_reject`, with the locators reading the whole file gives."""
    items = iter_part_records(part, spec.limits, split=spec.split, hf_config=spec.hf_config)
    return read_items(
        part.path,
        items,
        format=part.format,
        on_reject=on_reject,
        stats=stats,
        options=spec.options,
        media=spec.media_checker(),
    )


def write_counts(part_dir: Path, stats: Account) -> None:
    """Keep a part's reading counts in its directory."""
    counts = {
        "records_read": stats.records_read,
        "records_converted": stats.records_converted,
        "threads": stats.threads,
        "quarantined": stats.quarantined,
        "formats": stats.formats,
        "by_file": {path: count.to_list() for path, count in stats.by_file.items()},
    }
    (part_dir / PART_COUNTS).write_bytes(orjson.dumps(counts))


def add_counts(account: Account, part_dir: Path) -> dict[str, Any]:
    """Add a part's reading counts to the job's account (in plan order, so the formats
    are listed in reading order); returns them."""
    counts: dict[str, Any] = orjson.loads((part_dir / PART_COUNTS).read_bytes())
    account.records_read += counts["records_read"]
    account.records_converted += counts["records_converted"]
    account.threads += counts["threads"]
    account.quarantined.update(counts["quarantined"])
    account.formats.update(counts["formats"])
    for path, file_counts in counts["by_file"].items():
        account.file(path).add(file_counts)
    return counts


@contextmanager
def parts_in_order(
    parts: list[InputPart],
    process: Process,
    workers: int,
    near: Path | None = None,
    prepare_workers: Callable[[], object] | None = None,
) -> Iterator[Iterator[tuple[InputPart, Path]]]:
    """Run `process` on every part in `workers` processes and give each part with its
    directory, in plan order, as soon as it and the parts before it are done (the later
    ones go on meanwhile). The work directory is a temporary folder (in `near`, else the
    system's temporary folder): a part's directory is removed once the next is asked for,
    and the folder at the end. `prepare_workers()` runs here before the workers start
    (forked workers inherit what it loads). A failing part raises PartFailed, naming its
    file."""
    workdir = Path(tempfile.mkdtemp(prefix=".mms-parts-", dir=near))
    try:
        part_dirs = iter_parts(
            parts, process, workdir, workers=workers, prepare_workers=prepare_workers
        )
        with closing(part_dirs):
            yield _taken(parts, part_dirs)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _taken(parts: list[InputPart], part_dirs: Iterator[Path]) -> Iterator[tuple[InputPart, Path]]:
    """The parts with their directories, each directory removed once it was used."""
    for part, part_dir in zip(parts, part_dirs, strict=True):
        yield part, part_dir
        shutil.rmtree(part_dir)
