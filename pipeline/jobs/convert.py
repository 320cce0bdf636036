"""The convert job: inputs in any known format -> one MMS JSONL file plus a quarantine
file, with the counts that prove nothing was lost."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pipeline.accounting import ReadStats
from pipeline.jobs.read import ReadSpec, read
from pipeline.output.files import OutputPathError, atomic_output, check_writable
from pipeline.quarantine import Rejection, rejection_line
from pipeline.sources import InputError

PROGRESS_EVERY = 2000
"""Threads between two progress callbacks."""


@dataclass(frozen=True, slots=True)
class ConvertResult:
    output: Path
    quarantine: Path
    stats: ReadStats


def default_quarantine_path(output: str | Path) -> Path:
    """`out/threads.jsonl(.gz)` -> `out/threads.rejected.jsonl`."""
    path = Path(output)
    name = path.name
    for suffix in (".gz", ".zst", ".zstd", ".jsonl", ".ndjson", ".json"):
        name = name.removesuffix(suffix)
    return path.with_name(f"{name}.rejected.jsonl")


def check_output_file(path: str | Path) -> None:
    """Make sure a file can be written at `path` before any work starts (as
    check_writable), and that it is not a device, pipe or socket: an output is written
    to a temporary file renamed over it, which would replace `/dev/null` itself."""
    if os.path.exists(path) and not os.path.isfile(path) and not os.path.isdir(path):
        raise OutputPathError(f"cannot write {path}: not a regular file (a device or pipe)")
    check_writable(path)


def convert(
    inputs: str | Sequence[str],
    output: str | Path,
    spec: ReadSpec | None = None,
    *,
    quarantine: str | Path | None = None,
    progress: Callable[[ReadStats], None] | None = None,
) -> ConvertResult:
    """Convert `inputs`, read as `spec` says, to MMS JSONL at `output`; rejected records go
    to `quarantine` (default: next to the output). Both files are written atomically."""
    output = Path(output)
    quarantine = Path(quarantine) if quarantine is not None else default_quarantine_path(output)
    if quarantine.resolve() == output.resolve():
        raise InputError("the quarantine file must differ from the output file")
    check_output_file(output)
    check_output_file(quarantine)
    stats = ReadStats()
    with atomic_output(output) as out, atomic_output(quarantine) as rejected:

        def on_reject(rejection: Rejection) -> None:
            rejected.write(rejection_line(rejection))

        for count, thread in enumerate(
            read(inputs, spec, on_reject=on_reject, stats=stats, exclude=(output, quarantine)),
            1,
        ):
            out.write(thread.to_json_line())
            if progress is not None and count % PROGRESS_EVERY == 0:
                progress(stats)
    if progress is not None:
        progress(stats)
    return ConvertResult(output, quarantine, stats)
