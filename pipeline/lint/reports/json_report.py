"""The JSON report (schemas/lint-report.schema.json): the summary, the rules that ran, and
every diagnostic, one per line, streamed so millions of findings never sit in memory."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TextIO

import orjson

from pipeline.lint.report import LintReport
from pipeline.version import __version__

REPORT_VERSION = 1
TOOL_NAME = "mms-pipeline"


def write_json(report: LintReport, out: TextIO) -> None:
    """Write the report as one JSON object; `diagnostics` is written element by element."""
    out.write("{")
    for key, value in report_head(report).items():
        out.write(f"{dumps(key)}:{dumps(value)},\n")
    out.write('"diagnostics":[')
    write_lines_array(out, report.diagnostics.json_blocks())
    out.write("]}\n")


def report_head(report: LintReport) -> dict[str, Any]:
    """Everything but the diagnostics: format version, tool, summary and rules."""
    return {
        "version": REPORT_VERSION,
        "tool": {"name": TOOL_NAME, "version": __version__},
        "summary": report.summary(),
        "rules": [
            {"code": r.code, "name": r.name, "severity": r.severity, "summary": r.summary}
            for r in report.listed_rules
        ],
    }


def write_array(out: TextIO, items: Iterable[Any]) -> None:
    """The elements of a JSON array, one per line, between brackets the caller writes."""
    separator = "\n"
    for item in items:
        out.write(separator + dumps(item))
        separator = ",\n"
    out.write("\n")


def write_lines_array(out: TextIO, blocks: Iterable[str]) -> None:
    """The JSON values of `blocks` (whole lines, one value each) as `write_array` writes
    them: every line but the last ends in a comma."""
    out.write("\n")
    held = ""
    for block in blocks:
        if held:
            out.write(held.replace("\n", ",\n"))
        held = block
    if held:
        out.write(held[:-1].replace("\n", ",\n") + "\n")


def dumps(value: Any) -> str:
    """Compact JSON text of `value` (orjson: UTF-8, no spaces)."""
    return orjson.dumps(value).decode()
