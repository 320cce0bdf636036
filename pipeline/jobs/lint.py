"""The lint job: read inputs in any format, run the rules over every thread (and every
record that did not become one), and gather a LintReport."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pipeline.accounting import ReadStats
from pipeline.jobs.read import ReadSpec, read
from pipeline.lint.config import LintConfig
from pipeline.lint.linter import Linter
from pipeline.lint.report import LintReport
from pipeline.lint.store import DiagnosticStore
from pipeline.mms import Thread
from pipeline.quarantine import Rejection


def lint(
    inputs: str | Iterable[str],
    spec: ReadSpec | None = None,
    *,
    config: LintConfig | None = None,
    progress: Callable[[ReadStats, LintReport], None] | None = None,
) -> LintReport:
    """Lint INPUTS of any input format, read as `spec` says (normalized to MMS threads first). Every record that
    cannot become a thread is reported (MMS101/102/105) with its file and position."""
    config = config or LintConfig()
    linter = Linter(config)
    paths = [inputs] if isinstance(inputs, str) else list(inputs)
    stats = ReadStats()
    report = LintReport(config, linter.rules, paths, stats, DiagnosticStore())

    def on_reject(rejection: Rejection) -> None:
        report.check_rejection(linter, rejection)

    threads = read(paths, spec, on_reject=on_reject, stats=stats)
    _run(linter, report, threads, progress)
    return report


def lint_threads(threads: Iterable[Thread], config: LintConfig | None = None) -> LintReport:
    """Lint threads already in memory (each counts as one record)."""
    config = config or LintConfig()
    linter = Linter(config)
    stats = ReadStats()

    def counted() -> Iterable[Thread]:
        for thread in threads:
            stats.records_read += 1
            stats.records_converted += 1
            stats.threads += 1
            yield thread

    report = LintReport(config, linter.rules, [], stats, DiagnosticStore())
    _run(linter, report, counted(), None)
    return report


def _run(
    linter: Linter,
    report: LintReport,
    threads: Iterable[Thread],
    progress: Callable[[ReadStats, LintReport], None] | None,
) -> None:
    for count, thread in enumerate(threads, 1):
        report.check(linter, thread)
        if progress is not None and count % 512 == 0:
            progress(report.stats, report)
    report.add(list(linter.finish()))
    if progress is not None:
        progress(report.stats, report)
