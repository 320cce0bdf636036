"""The convert job: a source (inputs in any known format), no stage, and a sink writing one
MMS JSONL file plus a quarantine file, with the counts that prove nothing was lost. With
several workers, each part of the inputs is converted in a worker process and the parts'
lines are appended in reading order (pipeline/jobs/parallel.py): the same bytes."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa

from pipeline.accounting import Account
from pipeline.jobs.batch_steps import StreamDriver
from pipeline.jobs.parallel import add_counts, job_parts, parts_in_order, read_part, write_counts
from pipeline.jobs.read import ReadSpec, read
from pipeline.output.guard import OwnedFile, claim_file, claim_files_folder
from pipeline.output.stdout import standard_output
from pipeline.quarantine import Rejection, rejection_line
from pipeline.sources import InputError
from pipeline.sources.parts import DEFAULT_SPLIT_BYTES, InputPart
from pipeline.stages.contract import Batch

STDOUT = "-"
"""The output name of standard output."""
WRITTEN = "threads"
"""The one split a convert job writes (its Account's `written` key)."""
BATCH = 64
"""Threads per batch: no stage gains from larger ones, and memory stays small."""
PART_THREADS = "threads.jsonl"
"""A part's threads as MMS JSON Lines, in its directory."""
PART_REJECTED = "rejected.jsonl"
"""A part's quarantine lines, in its directory."""
COPY_BYTES = 1 << 20
"""How much of a part's file is copied to the output at a time."""


@dataclass(frozen=True, slots=True)
class ConvertResult:
    output: Path
    quarantine: Path
    account: Account


def default_quarantine_path(output: str | Path) -> Path:
    """`out/threads.jsonl(.gz)` -> `out/threads.rejected.jsonl`; standard output (`-`) ->
    `rejected.jsonl` in the current folder."""
    if str(output) == STDOUT:
        return Path("rejected.jsonl")
    path = Path(output)
    name = path.name
    for suffix in (".gz", ".zst", ".zstd", ".jsonl", ".ndjson", ".json"):
        name = name.removesuffix(suffix)
    return path.with_name(f"{name}.rejected.jsonl")


def convert(
    inputs: str | Sequence[str],
    output: str | Path,
    spec: ReadSpec | None = None,
    *,
    quarantine: str | Path | None = None,
    progress: Callable[[Account], None] | None = None,
    workers: int = 1,
    split_bytes: int = DEFAULT_SPLIT_BYTES,
    overwrite: bool = False,
) -> ConvertResult:
    """Convert `inputs`, read as `spec` says, to MMS JSONL at `output`; rejected records go
    to `quarantine` (default: next to the output; not written when none is). Both files
    are written atomically.

    With `workers` above 1 and more than one part to read (several files, or a big JSON
    Lines file of a named format cut into parts of about `split_bytes`), the parts are
    converted in that many processes and written in reading order: the same bytes.
    Both files are claimed first (pipeline/output/guard.py: `overwrite` lets them replace
    files mms did not write)."""
    output = Path(output)
    quarantine = Path(quarantine) if quarantine is not None else default_quarantine_path(output)
    if quarantine.resolve() == output.resolve():
        raise InputError("the quarantine file must differ from the output file")
    target = None if str(output) == STDOUT else claim_file(output, overwrite=overwrite)
    rejected_file = claim_file(quarantine, overwrite=overwrite)
    spec = spec or ReadSpec()
    if spec.media_store is not None:
        claim_files_folder(spec.media_store, overwrite=overwrite)
    account = Account()
    outputs = (output, quarantine)
    parts = job_parts(inputs, spec, account, workers, split_bytes, outputs)
    with output_stream(target) as out, rejected_file.open() as rejected:
        sink = _JsonlSink(out, rejected, account)
        if parts:
            scratch = (target or rejected_file).scratch()
            with (
                scratch as near,
                parts_in_order(parts, ConvertPart(spec), workers, near) as part_dirs,
            ):
                for _, part_dir in part_dirs:
                    sink.take(part_dir)
                    if progress is not None:
                        progress(account)
        else:
            driver = StreamDriver(
                [],
                sink,
                account,
                batch_size=BATCH,
                progress=(lambda: progress(account)) if progress is not None else None,
            )
            read_all = read(inputs, spec, on_reject=driver.rejected, stats=account, outputs=outputs)
            driver.run(read_all)
    rejected_file.discard_if_none(account.quarantined_total)
    if progress is not None:
        progress(account)
    return ConvertResult(output, quarantine, account)


@contextmanager
def output_stream(target: OwnedFile | None) -> Iterator[BinaryIO]:
    """Where the threads go: standard output for None (the data alone: anything else
    printed meanwhile goes to standard error), else the claimed file, written atomically."""
    if target is None:
        with standard_output() as out:
            yield out
        return
    with target.open() as out:
        yield out


@dataclass(frozen=True)
class ConvertPart:
    """The map side of a convert job for one part (picklable: it runs in a worker): the
    part's threads as MMS JSON Lines, its rejected records as quarantine lines, and its
    counts, each in a file of the part's directory."""

    spec: ReadSpec

    def __call__(self, part: InputPart, part_dir: Path) -> None:
        stats = Account()
        with (
            (part_dir / PART_THREADS).open("wb") as out,
            (part_dir / PART_REJECTED).open("wb") as bad,
        ):
            for thread in read_part(part, self.spec, _JsonlSink(out, bad, stats).rejected, stats):
                out.write(thread.to_json_line())
        write_counts(part_dir, stats)


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

    def take(self, part_dir: Path) -> None:
        """A part converted in a worker: its lines appended, its counts added."""
        counts = add_counts(self.account, part_dir)
        with (part_dir / PART_THREADS).open("rb") as threads:
            shutil.copyfileobj(threads, self.out, COPY_BYTES)
        with (part_dir / PART_REJECTED).open("rb") as rejected:
            shutil.copyfileobj(rejected, self.quarantine, COPY_BYTES)
        self.account.written[WRITTEN] += counts["threads"]
