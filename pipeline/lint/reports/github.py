"""GitHub Actions workflow commands: one `::error`/`::warning` annotation per finding, on
its file and line, then a `::notice` with the totals."""

from __future__ import annotations

from typing import TextIO

from pipeline.lint.diagnostic import Diagnostic, locator_line
from pipeline.lint.report import LintReport
from pipeline.lint.reports.sarif import relative_path
from pipeline.lint.reports.text import totals_line
from pipeline.lint.rule import Rule


def write_github(report: LintReport, out: TextIO) -> None:
    """One workflow command per finding, then the totals as a notice."""
    rules = {rule.code: rule for rule in report.rules}
    for diagnostic in report.diagnostics:
        out.write(annotation(diagnostic, rules[diagnostic.code]) + "\n")
    out.write(f"::notice title={escape_property('mms lint')}::{escape_data(totals_line(report))}\n")


def annotation(diagnostic: Diagnostic, rule: Rule) -> str:
    """`::error file=path,line=12,title=MMS201 name::message` (file and line when known)."""
    properties = []
    if diagnostic.source:
        properties.append(("file", relative_path(diagnostic.source)))
        line = locator_line(diagnostic.locator)
        if line is not None:
            properties.append(("line", str(line)))
    properties.append(("title", f"{rule.code} {rule.name}"))
    listed = ",".join(f"{key}={escape_property(value)}" for key, value in properties)
    return f"::{diagnostic.severity} {listed}::{escape_data(diagnostic.message)}"


def escape_data(text: str) -> str:
    """A command's message: `%`, CR and LF percent-encoded, as the runner expects."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A command property: escaped like data, and `:` and `,` too (they delimit properties)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")
