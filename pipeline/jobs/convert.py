"""The convert job: a source (inputs in any known format), no stage, and a sink writing one
MMS JSONL file plus a quarantine file, with the counts that prove nothing was lost."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa

from pipeline.accounting import Account
from pipeline.jobs.driver import StreamDriver
from pipeline.jobs.read import ReadSpec, read
from pipeline.output.files import OutputPathError, atomic_output, check_writable
from pipeline.quarantine import Rejection, rejection_line
from pipeline.sources import InputError
from pipeline.stages.contract import Batch

WRITTEN = "threads"
"""The one split a convert job writes (its Account's `written` key)."""
BATCH = 64
"""Threads per batch: no stage gains from larger ones, and memory stays small."""


@dataclass(frozen=True, slots=True)
class ConvertResult:
    output: Path
    quarantine: Path
    account: Account


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
    progress: Callable[[Account], None] | None = None,
) -> ConvertResult:
    """Convert `inputs`, read as `spec` says, to MMS JSONL at `output`; rejected records go
    to `quarantine` (default: next to the output). Both files are written atomically."""
    output = Path(output)
    quarantine = Path(quarantine) if quarantine is not None else default_quarantine_path(output)
    if quarantine.resolve() == output.resolve():
        raise InputError("the quarantine file must differ from the output file")
    check_output_file(output)
    check_output_file(quarantine)
    account = Account()
    with atomic_output(output) as out, atomic_output(quarantine) as rejected:
        driver = StreamDriver(
            [],
            _JsonlSink(out, rejected, account),
            account,
            batch_size=BATCH,
            progress=(lambda: progress(account)) if progress is not None else None,
        )
        exclude = (output, quarantine)
        driver.run(read(inputs, spec, on_reject=driver.rejected, stats=account, exclude=exclude))
    if progress is not None:
        progress(account)
    return ConvertResult(output, quarantine, account)


class _JsonlSink:
    """Threads to MMS JSON Lines, rejected records to the quarantine file."""

    def __init__(self, out: BinaryIO, quarantine: BinaryIO, account: Account):
        self.out, self.quarantine, self.account = out, quarantine, account

    def rejected(self, rejection: Rejection) -> None:
        self.quarantine.write(rejection_line(rejection))

    def write(self, batch: Batch, rows: pa.Table | None, reasons: list[str | None]) -> None:
        kept = [t for t, reason in zip(batch.threads, reasons, strict=True) if reason is None]
        self.out.write(b"".join(thread.to_json_line() for thread in kept))
        self.account.written[WRITTEN] += len(kept)
