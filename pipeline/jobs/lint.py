"""The lint job: a source (inputs in any format, or threads in memory), the lint stage, and
no sink: every thread is linted, none written (DESIGN §2). Its LintReport holds the
findings of every thread and of every record that did not become one."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator

import pyarrow as pa

from pipeline.accounting import Account
from pipeline.jobs.batch_steps import StreamDriver
from pipeline.jobs.lint_parts import lint_parts
from pipeline.jobs.parallel import job_parts
from pipeline.jobs.read import ReadSpec, files_to_read, read
from pipeline.lint.config import LintConfig
from pipeline.lint.report import LintReport
from pipeline.lint.rules import select_rules
from pipeline.lint.store import DiagnosticStore
from pipeline.mms import Thread
from pipeline.quarantine import Rejection
from pipeline.sources.parts import DEFAULT_SPLIT_BYTES
from pipeline.stages.contract import Batch
from pipeline.stages.lint import Lint

PROGRESS_BATCH = 512
"""Threads per batch of a lint job (one progress update each)."""


def lint(
    inputs: str | Iterable[str],
    spec: ReadSpec | None = None,
    *,
    config: LintConfig | None = None,
    progress: Callable[[Account, LintReport], None] | None = None,
    workers: int = 1,
    split_bytes: int = DEFAULT_SPLIT_BYTES,
    outputs: Iterable[str | os.PathLike[str]] = (),
) -> LintReport:
    """Lint INPUTS of any input format, read as `spec` says (normalized to MMS threads
    first). Every record that cannot become a thread is reported (MMS101/102/105) with its
    file and position.

    With `workers` above 1 and more than one part to read (several files, or a big JSON
    Lines file of a named format cut into parts of about `split_bytes`), the parts are
    read and linted in that many processes, and the dataset rules see them in reading
    order (pipeline/jobs/lint_parts.py): the same report. `outputs`: the files the caller
    writes (a report file), never one of the inputs (OutputPathError, before reading)."""
    paths = [inputs] if isinstance(inputs, str) else list(inputs)
    spec = spec or ReadSpec()
    stage, driver = _lint_job(paths, config, progress)
    outputs = list(outputs)
    parts = job_parts(paths, spec, driver.account, workers, split_bytes, outputs)
    if parts:
        lint_parts(parts, spec, stage, driver.account, workers, driver.progress)
    else:
        found = files_to_read(paths, spec, outputs)
        stage.linter.places = {name: path for path, name in found.names.items()}
        read_all = read(
            paths, spec, on_reject=driver.rejected, stats=driver.account, outputs=outputs
        )
        driver.run(read_all)
    return _finished(stage, progress)


def lint_threads(threads: Iterable[Thread], config: LintConfig | None = None) -> LintReport:
    """Lint threads already in memory (each counts as one record)."""
    stage, driver = _lint_job([], config, None)
    account = driver.account

    def counted() -> Iterator[Thread]:
        for thread in threads:
            account.records_read += 1
            account.records_converted += 1
            account.threads += 1
            yield thread

    driver.run(counted())
    return _finished(stage, None)


class _Linted:
    """The lint job's sink: threads are linted only, never written."""

    def __init__(self, account: Account):
        self.account = account

    def rejected(self, rejection: Rejection) -> None:
        """The lint stage reports it."""

    def write(self, batch: Batch, rows: pa.Table | None, reasons: list[str | None]) -> None:
        self.account.not_sharded += reasons.count(None)


def _lint_job(
    paths: list[str],
    config: LintConfig | None,
    progress: Callable[[Account, LintReport], None] | None,
) -> tuple[Lint, StreamDriver]:
    config = config or LintConfig()
    account = Account()
    report = LintReport(
        config, select_rules(config.select, config.ignore), paths, account, DiagnosticStore()
    )
    stage = Lint(config, report)
    driver = StreamDriver(
        [stage],
        _Linted(account),
        account,
        batch_size=PROGRESS_BATCH,
        progress=(lambda: progress(account, report)) if progress is not None else None,
    )
    return stage, driver


def _finished(stage: Lint, progress: Callable[[Account, LintReport], None] | None) -> LintReport:
    """The report, with the dataset rules' findings at the end of the data."""
    report = stage.finish()
    if progress is not None:
        progress(report.stats, report)
    return report
