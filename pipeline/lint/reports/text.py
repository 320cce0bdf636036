"""The terminal report, compact like ruff: findings grouped under their source file, then
the count per rule and a totals line (`statistics=True`: only the counts and totals)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TextIO

from pipeline.lint.diagnostic import Diagnostic
from pipeline.lint.report import LintReport
from pipeline.lint.rule import Rule
from pipeline.wording import plural

NO_SOURCE = "(no source file)"
"""The group header of findings on threads that came from memory, not a file."""


def write_text(report: LintReport, out: TextIO, statistics: bool = False) -> None:
    """Write every finding (unless `statistics`), then the per-rule counts and the totals."""
    if not statistics:
        write_findings(report.diagnostics, out)
    if len(report.diagnostics):
        if not statistics:
            out.write("\n")
        write_counts(report, out)
    out.write(totals_line(report) + "\n")


def write_findings(diagnostics: Iterable[Diagnostic], out: TextIO) -> None:
    """One line per finding, under a header naming the file each run of findings came from."""
    current: str | None = None
    for diagnostic in diagnostics:
        header = diagnostic.source or NO_SOURCE
        if header != current:
            out.write(f"{header}\n")
            current = header
        out.write(finding_line(diagnostic) + "\n")


def finding_line(diagnostic: Diagnostic) -> str:
    """`  :12 error MMS201 [thread abc, msg 3] message` (position and brackets when known)."""
    parts = [position(diagnostic), diagnostic.severity, diagnostic.code, where(diagnostic)]
    parts.append(one_line(diagnostic.message))
    return "  " + " ".join(part for part in parts if part)


def position(diagnostic: Diagnostic) -> str:
    """The locator without its source: `:12` (line), `#4` (record index), "" (whole file)."""
    locator, source = diagnostic.locator, diagnostic.source
    if not locator:
        return ""
    if source and locator.startswith(source):
        return locator[len(source) :]
    return locator


def where(diagnostic: Diagnostic) -> str:
    """`[thread abc, msg 3]`, `[thread abc]` for thread- and dataset-level findings."""
    parts = []
    if diagnostic.thread_id is not None:
        parts.append(f"thread {diagnostic.thread_id}")
    if diagnostic.message_index is not None:
        parts.append(f"msg {diagnostic.message_index}")
    return f"[{', '.join(parts)}]" if parts else ""


def one_line(text: str) -> str:
    """`text` with line breaks shown as `\\n`, so one finding stays one line."""
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\\n")


def rule_counts(report: LintReport) -> list[tuple[int, Rule]]:
    """(count, rule) for every rule with findings, most findings first, then by code."""
    rules = {rule.code: rule for rule in report.rules}
    counted = [(count, rules[code]) for code, count in report.by_code.items()]
    return sorted(counted, key=lambda item: (-item[0], item[1].code))


def write_counts(report: LintReport, out: TextIO) -> None:
    """The `--statistics` table: count, code, severity and name of each rule."""
    counts = rule_counts(report)
    width = max(len(f"{count:,}") for count, _ in counts)
    severity_width = max(len("warning"), *(len(report.severity_of(r.code)) for _, r in counts))
    for count, rule in counts:
        severity = report.severity_of(rule.code)
        out.write(f"{count:>{width},}  {rule.code}  {severity:<{severity_width}}  {rule.name}\n")


def totals_line(report: LintReport) -> str:
    """`Found N findings (E errors, W warnings) in T of M threads; R records read, Q
    quarantined.`, or `All checks passed` with the same counts when nothing was found."""
    stats = report.stats
    read = f"{plural(stats.records_read, 'record')} read, {stats.quarantined_total:,} quarantined."
    findings = len(report.diagnostics)
    if not findings:
        return f"All checks passed: no findings in {plural(stats.threads, 'thread')}; {read}"
    return (
        f"Found {plural(findings, 'finding')} ({plural(report.errors, 'error')}, "
        f"{plural(report.warnings, 'warning')}) in {report.threads_with_findings:,} of "
        f"{plural(stats.threads, 'thread')}; {read}"
    )

