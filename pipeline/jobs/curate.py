"""The curate job (`mms curate`): a source (inputs in any known format), the curation stages
a config names (pipeline/stages/curate/), and a sink writing the kept threads (redacted
where the PII stage redacts) as MMS JSONL, the records that did not become threads to the
quarantine file and the threads a stage left out, with why, to the dropped file. With
several workers, each part of the inputs is read and curated in a worker process and the
parts' lines are appended in reading order (pipeline/jobs/parallel.py): the same bytes."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson
import pyarrow as pa

from pipeline.accounting import Account
from pipeline.config_file import PathPart, check_schema, read_yaml_file
from pipeline.engine import PartFailed
from pipeline.jobs.batch_steps import Drop, StreamDriver
from pipeline.jobs.convert import (
    COPY_BYTES,
    PART_REJECTED,
    PART_THREADS,
    STDOUT,
    default_quarantine_path,
    output_stream,
)
from pipeline.jobs.parallel import add_counts, job_parts, parts_in_order, read_part, write_counts
from pipeline.jobs.read import ReadSpec, read
from pipeline.output.guard import OwnedFile, claim_file, claim_files_folder
from pipeline.quarantine import Rejection, dropped_line, rejection_line
from pipeline.schemas import definition_validator
from pipeline.sources.parts import DEFAULT_SPLIT_BYTES, InputPart
from pipeline.stages.contract import Batch, StageError
from pipeline.stages.curate.plugins import PluginError
from pipeline.stages.curate.settings import SLICES, CurationSettings

SCHEMA = "pipeline-config"

WRITTEN = "threads"
"""The one split a curate job writes (its Account's `written` key)."""
PART_DROPPED = "dropped.jsonl"
"""A part's list of dropped threads, in its directory."""
PART_CURATED = "curated.json"
"""A part's curation counts (threads kept, dropped per reason, tagged), in its directory."""


@dataclass(frozen=True, slots=True)
class CurateResult:
    output: Path
    quarantine: Path
    dropped: Path
    account: Account


def default_dropped_path(output: str | Path) -> Path:
    """`out/threads.jsonl(.gz)` -> `out/threads.dropped.jsonl` (beside the quarantine);
    standard output (`-`) -> `dropped.jsonl` in the current folder."""
    if str(output) == STDOUT:
        return Path("dropped.jsonl")
    quarantine = default_quarantine_path(output)
    return quarantine.with_name(quarantine.name.replace(".rejected.", ".dropped."))


def curate(
    inputs: str | Sequence[str],
    output: str | Path,
    settings: CurationSettings,
    spec: ReadSpec | None = None,
    *,
    progress: Callable[[Account], None] | None = None,
    overwrite: bool = False,
    workers: int = 1,
    split_bytes: int = DEFAULT_SPLIT_BYTES,
) -> CurateResult:
    """Read `inputs`, run the curation stages of `settings` on every thread and write the
    kept threads to `output` (MMS JSONL, `-` for standard output), the quarantine and the
    list of dropped threads beside it. Raises InputError and OutputPathError for unusable
    paths, and PluginError (pipeline/stages/curate/plugins.py) for a plugin that fails.
    The files are claimed first (pipeline/output/guard.py; `overwrite` lets them replace
    files mms did not write).

    With `workers` above 1 and more than one part to read (several files, or a big JSON
    Lines file of a named format cut into parts of about `split_bytes`), the parts are
    read and curated in that many processes and written in reading order: the same
    bytes."""
    output = Path(output)
    quarantine, dropped = default_quarantine_path(output), default_dropped_path(output)
    target = None if str(output) == STDOUT else claim_file(output, overwrite=overwrite)
    rejected_file = claim_file(quarantine, overwrite=overwrite)
    dropped_file = claim_file(dropped, overwrite=overwrite)
    spec = spec or ReadSpec()
    if spec.media_store is not None:
        claim_files_folder(spec.media_store, overwrite=overwrite)
    account = Account()
    outputs = (output, quarantine, dropped)
    parts = job_parts(inputs, spec, account, workers, split_bytes, outputs)
    with (
        output_stream(target) as out,
        rejected_file.open() as rejected_out,
        dropped_file.open() as dropped_out,
    ):
        sink = _CuratedSink(out, rejected_out, dropped_out, account)
        if parts:
            job = CuratePart(settings, spec)
            _curate_parts(parts, job, sink, workers, target or rejected_file, progress)
        else:
            driver = _driver(settings, sink, account, progress)
            driver.run(
                read(inputs, spec, on_reject=driver.rejected, stats=account, outputs=outputs)
            )
    rejected_file.discard_if_none(account.quarantined_total)
    dropped_file.discard_if_none(account.dropped_total)
    return CurateResult(output, quarantine, dropped, account)


def _driver(
    settings: CurationSettings,
    sink: _CuratedSink,
    account: Account,
    progress: Callable[[Account], None] | None = None,
) -> StreamDriver:
    """The driver of the curation stages into `sink`, which it tells the drops of."""
    driver = StreamDriver(
        [*settings.redaction(), *settings.taggers()],
        sink,
        account,
        progress=(lambda: progress(account)) if progress is not None else None,
        keep_drops=True,
    )
    sink.driver = driver
    return driver


def _curate_parts(
    parts: list[InputPart],
    job: CuratePart,
    sink: _CuratedSink,
    workers: int,
    beside: OwnedFile,
    progress: Callable[[Account], None] | None,
) -> None:
    """Curate the parts in `workers` processes (their work folder beside the file `beside`)
    and append each to the sink in reading order. A plugin's or a stage's failure in a
    worker is raised as it is in one process (PluginError, StageError)."""
    try:
        with (
            beside.scratch() as near,
            parts_in_order(parts, job, workers, near, job.prepare) as part_dirs,
        ):
            for _, part_dir in part_dirs:
                sink.take(part_dir)
                if progress is not None:
                    progress(sink.account)
    except PartFailed as err:
        if isinstance(err.__cause__, PluginError | StageError):
            raise err.__cause__ from None
        raise


@dataclass(frozen=True)
class CuratePart:
    """The map side of a curate job for one part (picklable: it runs in a worker): the
    part's kept threads, quarantine lines and dropped list, and its counts, each in a file
    of the part's directory."""

    settings: CurationSettings
    spec: ReadSpec

    def prepare(self) -> None:
        """Load the stages' models and build the evaluation index once, before the workers
        start (forked workers inherit them; spawned ones load them on first use)."""
        for stage in [*self.settings.redaction(), *self.settings.taggers()]:
            stage.prepare()

    def __call__(self, part: InputPart, part_dir: Path) -> None:
        stats = Account()
        with (
            (part_dir / PART_THREADS).open("wb") as out,
            (part_dir / PART_REJECTED).open("wb") as rejected,
            (part_dir / PART_DROPPED).open("wb") as dropped,
        ):
            driver = _driver(self.settings, _CuratedSink(out, rejected, dropped, stats), stats)
            driver.run(read_part(part, self.spec, driver.rejected, stats))
        write_counts(part_dir, stats)
        curated = {"kept": stats.written[WRITTEN], "dropped": stats.dropped, "tagged": stats.tagged}
        (part_dir / PART_CURATED).write_bytes(orjson.dumps(curated))


class _CuratedSink:
    """Kept threads to the output, dropped ones to the dropped list, rejected records to
    the quarantine."""

    def __init__(self, out: BinaryIO, rejected: BinaryIO, dropped: BinaryIO, account: Account):
        self.out, self.rejected_out, self.dropped_out = out, rejected, dropped
        self.account = account
        self.driver: StreamDriver | None = None

    def rejected(self, rejection: Rejection) -> None:
        self.rejected_out.write(rejection_line(rejection))

    def write(self, batch: Batch, rows: pa.Table | None, reasons: list[str | None]) -> None:
        drops: dict[int, Drop] = self.driver.drops if self.driver is not None else {}
        kept = 0
        for row, (thread, reason) in enumerate(zip(batch.threads, reasons, strict=True)):
            if reason is None:
                self.out.write(thread.to_json_line())
                kept += 1
                continue
            drop = drops.get(row)
            details: dict[str, Any] = drop.details if drop is not None else {}
            stage = drop.stage if drop is not None else ""
            self.dropped_out.write(dropped_line(thread.id, thread.meta, stage, reason, details))
        self.account.written[WRITTEN] += kept

    def take(self, part_dir: Path) -> None:
        """A part curated in a worker: its lines appended, its counts added."""
        add_counts(self.account, part_dir)
        curated = orjson.loads((part_dir / PART_CURATED).read_bytes())
        self.account.dropped.update(curated["dropped"])
        self.account.tagged.update(curated["tagged"])
        self.account.written[WRITTEN] += curated["kept"]
        for name, out in (
            (PART_THREADS, self.out),
            (PART_REJECTED, self.rejected_out),
            (PART_DROPPED, self.dropped_out),
        ):
            with (part_dir / name).open("rb") as lines:
                shutil.copyfileobj(lines, out, COPY_BYTES)


def load_curation_file(path: str | os.PathLike[str]) -> CurationSettings:
    """The curation settings a YAML (or JSON) file holds: the slices of a pipeline config's
    `stages:` (pii, language, quality, decontaminate, plugins), at its top level or under
    `stages:`; checked against the pipeline config schema's; evaluation paths relative to
    the file's folder. Raises ConfigFileError (file, key, line)."""
    data, doc = read_yaml_file(path, "the curation file", ", ".join(SLICES))
    where: list[PathPart] = []
    if isinstance(data, dict) and "stages" in data:
        data, where = data["stages"], ["stages"]
    check_schema(doc, data, definition_validator(SCHEMA, "curation"), where)
    base = Path(path).resolve().parent
    try:
        return CurationSettings.from_config(data, lambda given: str(base / given))
    except PluginError as err:
        raise doc.error([*where, "plugins"], str(err)) from None
