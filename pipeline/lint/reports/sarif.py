"""The SARIF 2.1.0 report, for GitHub code scanning and SARIF viewers: one run whose driver
lists the rules that ran; results streamed one per line, located by file and line."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote

from pipeline.lint.diagnostic import Diagnostic, locator_line
from pipeline.lint.report import LintReport
from pipeline.lint.reports.json_report import dumps, write_array
from pipeline.lint.rule import Rule
from pipeline.version import __version__

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"
DRIVER_NAME = "mms-lint"
URI_PATH_SAFE = "/!$&'()*+,;=@~"
"""Characters a relative URI path keeps as they are (`:` is encoded: a first segment cannot
hold one)."""


def write_sarif(report: LintReport, out: TextIO) -> None:
    """Write the SARIF log; `results` is written element by element."""
    index = {rule.code: number for number, rule in enumerate(report.listed_rules)}
    out.write(f'{{"$schema":{dumps(SARIF_SCHEMA)},"version":{dumps(SARIF_VERSION)},"runs":[\n')
    out.write(f'{{"tool":{dumps(tool(report.listed_rules))},\n"results":[')
    write_array(out, (result(diagnostic, index) for diagnostic in report.diagnostics))
    out.write("]}]}\n")


def tool(rules: list[Rule]) -> dict[str, Any]:
    """The `tool` object: mms-lint with every rule that ran as a reportingDescriptor."""
    return {
        "driver": {
            "name": DRIVER_NAME,
            "version": __version__,
            "rules": [descriptor(rule) for rule in rules],
        }
    }


def descriptor(rule: Rule) -> dict[str, Any]:
    """A rule as SARIF describes one: id, name, both descriptions, default level."""
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.rationale},
        "defaultConfiguration": {"level": rule.severity},
    }


def result(diagnostic: Diagnostic, index: dict[str, int]) -> dict[str, Any]:
    """One finding as a SARIF result; located only when it has a source file."""
    found: dict[str, Any] = {
        "ruleId": diagnostic.code,
        "ruleIndex": index[diagnostic.code],
        "level": diagnostic.severity,
        "message": {"text": diagnostic.message},
    }
    if diagnostic.source:
        found["locations"] = [location(diagnostic.source, locator_line(diagnostic.locator))]
    found["properties"] = {
        "thread_id": diagnostic.thread_id,
        "message_index": diagnostic.message_index,
        "locator": diagnostic.locator,
    }
    return found


def location(source: str, line: int | None) -> dict[str, Any]:
    """A physicalLocation in `source`, at `line` when known."""
    physical: dict[str, Any] = {"artifactLocation": {"uri": artifact_uri(source)}}
    if line is not None:
        physical["region"] = {"startLine": line}
    return {"physicalLocation": physical}


def artifact_uri(source: str) -> str:
    """`source` as a URI reference: relative with forward slashes when under the working
    directory (what code scanning needs), a file URI elsewhere on disk, `hf:` encoded."""
    relative = relative_path(source)
    path = Path(relative)
    return path.as_uri() if path.is_absolute() else quote(relative, safe=URI_PATH_SAFE)


def relative_path(source: str) -> str:
    """`source` relative to the working directory when under it, else as given; with
    forward slashes."""
    path = Path(source)
    if path.is_absolute() and path.is_relative_to(Path.cwd()):
        return path.relative_to(Path.cwd()).as_posix()
    return path.as_posix()
