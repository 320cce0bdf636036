"""The curate job (`mms curate`): a source (inputs in any known format), the curation stages
a config names (pipeline/stages/curate/), and a sink writing the kept threads (redacted
where the PII stage redacts) as MMS JSONL, the records that did not become threads to the
quarantine file and the threads a stage left out, with why, to the dropped file."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa

from pipeline.accounting import Account
from pipeline.config_file import PathPart, check_schema, read_yaml_file
from pipeline.jobs.batch_steps import Drop, StreamDriver
from pipeline.jobs.convert import STDOUT, default_quarantine_path, output_stream
from pipeline.jobs.read import ReadSpec, read
from pipeline.output.guard import claim_file, claim_files_folder
from pipeline.quarantine import Rejection, dropped_line, rejection_line
from pipeline.schemas import definition_validator
from pipeline.stages.contract import Batch
from pipeline.stages.curate.plugins import PluginError
from pipeline.stages.curate.settings import SLICES, CurationSettings

SCHEMA = "pipeline-config"

WRITTEN = "threads"
"""The one split a curate job writes (its Account's `written` key)."""


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
) -> CurateResult:
    """Read `inputs`, run the curation stages of `settings` on every thread and write the
    kept threads to `output` (MMS JSONL, `-` for standard output), the quarantine and the
    list of dropped threads beside it. Raises InputError and OutputPathError for unusable
    paths, and PluginError (pipeline/stages/curate/plugins.py) for a plugin that fails.
    The files are claimed first (pipeline/output/guard.py; `overwrite` lets them replace
    files mms did not write)."""
    output = Path(output)
    quarantine, dropped = default_quarantine_path(output), default_dropped_path(output)
    target = None if str(output) == STDOUT else claim_file(output, overwrite=overwrite)
    rejected_file = claim_file(quarantine, overwrite=overwrite)
    dropped_file = claim_file(dropped, overwrite=overwrite)
    if spec is not None and spec.media_store is not None:
        claim_files_folder(spec.media_store, overwrite=overwrite)
    stages = [*settings.redaction(), *settings.taggers()]
    account = Account()
    with (
        output_stream(target) as out,
        rejected_file.open() as rejected_out,
        dropped_file.open() as dropped_out,
    ):
        sink = _CuratedSink(out, rejected_out, dropped_out, account)
        driver = StreamDriver(
            stages,
            sink,
            account,
            progress=(lambda: progress(account)) if progress is not None else None,
            keep_drops=True,
        )
        sink.driver = driver
        driver.run(
            read(
                inputs,
                spec,
                on_reject=driver.rejected,
                stats=account,
                outputs=(output, quarantine, dropped),
            )
        )
    rejected_file.discard_if_none(account.quarantined_total)
    dropped_file.discard_if_none(account.dropped_total)
    return CurateResult(output, quarantine, dropped, account)


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
