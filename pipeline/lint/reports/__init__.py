"""Report writers, one module per output format; `write_report` picks one by name."""

from __future__ import annotations

from typing import TextIO

from pipeline.lint.report import LintReport

OUTPUT_FORMATS: tuple[str, ...] = (
    "text",
    "concise",
    "json",
    "markdown",
    "html",
    "sarif",
    "github",
)


def write_report(
    report: LintReport,
    output_format: str,
    out: TextIO,
    *,
    statistics: bool = False,
    color: bool = False,
    max_findings: int | None = None,
) -> None:
    """Write `report` to `out` as `output_format` (one of OUTPUT_FORMATS). `statistics`
    (text only) writes the count per rule instead of every finding; `color` and
    `max_findings` apply to text and concise, the terminal formats."""
    from pipeline.lint.reports.text import Look

    look = Look(color=color, max_findings=max_findings)
    if output_format == "text":
        from pipeline.lint.reports.text import write_text

        write_text(report, out, statistics=statistics, look=look)
    elif output_format == "concise":
        from pipeline.lint.reports.text import write_concise

        write_concise(report, out, look)
    elif output_format == "json":
        from pipeline.lint.reports.json_report import write_json

        write_json(report, out)
    elif output_format == "markdown":
        from pipeline.lint.reports.markdown import write_markdown

        write_markdown(report, out)
    elif output_format == "html":
        from pipeline.lint.reports.html import write_html

        write_html(report, out)
    elif output_format == "sarif":
        from pipeline.lint.reports.sarif import write_sarif

        write_sarif(report, out)
    elif output_format == "github":
        from pipeline.lint.reports.github import write_github

        write_github(report, out)
    else:
        raise ValueError(
            f"unknown output format {output_format!r} (one of {', '.join(OUTPUT_FORMATS)})"
        )
