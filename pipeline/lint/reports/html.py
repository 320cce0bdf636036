"""The HTML lint report: one self-contained page (inline CSS, SVG charts and a few lines of
JS, nothing fetched) with the run's totals, the dataset's profile as charts, and each
rule's findings next to the offending thread drawn the way the MMS spec draws threads.
Built from the report's counters and capped examples, never from a list of all findings."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, TextIO

from jinja2 import Template
from markupsafe import Markup

from pipeline.accounting import most_first
from pipeline.lint.report import Example, LintReport
from pipeline.lint.reports import charts
from pipeline.lint.reports.page import page_template
from pipeline.lint.rule import Rule
from pipeline.lint.rules import RULES_BY_CODE

TEMPLATE = "report.html.j2"
RAW_CHARS = 4000
"""Characters of a raw record shown for a record that never became a thread."""
NO_FORMAT = "no format detected"
"""How the files table names Account.formats' `-` (no input format recognised the file)."""
OPEN_EXAMPLES = 3
"""Examples per rule whose thread is shown expanded; the others start collapsed."""


def write_html(report: LintReport, out: TextIO) -> None:
    """Write `report` to `out` as a self-contained HTML page (same report, same bytes)."""
    out.writelines(_template().generate(page=_page(report)))


def _template() -> Template:
    """The page template, compiled once per process."""
    return page_template(Path(__file__).parent, TEMPLATE)


def _page(report: LintReport) -> dict[str, Any]:
    """Everything the template shows, as plain values."""
    split = report.by_code_severity
    rules = {rule.code: rule for rule in report.rules}
    groups = [_group(report, code, rules, split) for code in _codes_by_count(report)]
    return {
        "inputs": list(report.inputs),
        "failed": report.failed(),
        "config": report.config,
        "cards": _cards(report),
        "files": _files(report),
        "quarantined": most_first(report.stats.quarantined),
        "charts": _charts(report, groups),
        "rules": [
            {"rule": rule, "count": report.by_code[rule.code]}
            for rule in sorted(report.listed_rules, key=lambda r: r.code)
        ],
        "groups": groups,
    }


def _codes_by_count(report: LintReport) -> list[str]:
    """Codes with findings, most findings first (ties by code)."""
    return sorted(
        (c for c, n in report.by_code.items() if n), key=lambda c: (-report.by_code[c], c)
    )


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}% of {whole:,}" if whole else ""


def _cards(report: LintReport) -> list[dict[str, str]]:
    """The summary cards: label, value, a note and a tone for the colour."""
    summary = report.summary()
    threads = summary["threads"]
    records = summary["records"]
    errors, warnings = report.errors, report.warnings
    return [
        {"label": "records read", "value": f"{records:,}", "note": "", "tone": ""},
        {"label": "threads", "value": f"{threads:,}", "note": "", "tone": ""},
        {"label": "findings", "value": f"{summary['findings']:,}", "note": "", "tone": ""},
        {
            "label": "errors",
            "value": f"{errors:,}",
            "note": "",
            "tone": "error" if errors else "ok",
        },
        {
            "label": "warnings",
            "value": f"{warnings:,}",
            "note": "",
            "tone": "warning" if warnings else "ok",
        },
        {
            "label": "records quarantined",
            "value": f"{summary['records_quarantined']:,}",
            "note": _percent(summary["records_quarantined"], records),
            "tone": "warning" if summary["records_quarantined"] else "ok",
        },
        {
            "label": "threads with findings",
            "value": f"{summary['threads_with_findings']:,}",
            "note": _percent(summary["threads_with_findings"], threads),
            "tone": "",
        },
        {"label": "rules run", "value": f"{len(summary['rules']):,}", "note": "", "tone": ""},
    ]


def _files(report: LintReport) -> dict[str, Any]:
    """Files read, per detected input format."""
    stats = report.stats
    formats = Counter(NO_FORMAT if name == "-" else name for name in stats.formats.values())
    return {
        "count": len(stats.files),
        "by_format": sorted(formats.items(), key=lambda f: (-f[1], f[0])),
        "skipped": len(stats.skipped_files),
    }


def _charts(report: LintReport, groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each chart's SVG (None: nothing to show, with the reason) and its layout width."""
    profile = report.profile
    no_threads = "No threads were read, so there is nothing to show."
    findings = [(f"{g['code']}  {g['name']}", g["errors"], g["warnings"]) for g in groups]
    drawn = [
        ("findings", charts.findings_by_rule(findings), "No findings: every rule passed.", True),
        ("messages", charts.messages_per_thread(profile.messages_per_thread), no_threads, False),
        ("lengths", charts.content_length(profile.content_length), no_threads, False),
        ("roles", charts.role_distribution(profile.roles), no_threads, False),
        (
            "formats",
            charts.format_distribution(profile.formats),
            "No assistant messages, so there are no formats to show.",
            False,
        ),
        (
            "capabilities",
            charts.capability_usage(profile.capability_enabled, profile.capability_used),
            "No thread enables or uses a capability beyond markdown.",
            True,
        ),
    ]
    return [
        {"key": key, "svg": Markup(svg) if svg else None, "empty": empty, "wide": wide}
        for key, svg, empty, wide in drawn
    ]


def _group(
    report: LintReport, code: str, rules: dict[str, Rule], split: Counter[tuple[str, str]]
) -> dict[str, Any]:
    """One rule's findings: the rule's docs, its counts and its examples."""
    rule = rules.get(code) or RULES_BY_CODE[code]
    examples = report.examples.get(code, [])
    return {
        "code": code,
        "name": rule.name,
        "severity": rule.severity,
        "summary": rule.summary,
        "rationale": rule.rationale,
        "count": report.by_code[code],
        "errors": split[(code, "error")],
        "warnings": split[(code, "warning")],
        "examples": [_example(e, n < OPEN_EXAMPLES) for n, e in enumerate(examples)],
    }


def _example(example: Example, expanded: bool) -> dict[str, Any]:
    """A finding with its location and what it points at."""
    found = example.diagnostic
    raw = None
    if example.thread is None and example.raw is not None:
        text = example.raw
        raw = {"text": text[:RAW_CHARS], "cut": max(0, len(text) - RAW_CHARS)}
    return {
        "severity": found.severity,
        "message": found.message,
        "location": _location(found.source, found.locator),
        "thread_id": found.thread_id,
        "message_index": found.message_index,
        "thread": _thread(example.thread, found.message_index) if example.thread else None,
        "raw": raw,
        "expanded": expanded,
    }


def _location(source: str | None, locator: str | None) -> str | None:
    """Where the finding is: the locator (`path:line`, `path#index`), which names the
    source itself, else whichever of the two is known."""
    if source and locator and not locator.startswith(source):
        return f"{source} ({locator})"
    return locator or source


def _thread(thread: dict[str, Any], at_fault: int | None) -> dict[str, Any]:
    """An example thread for drawing: its messages (content split into lines), the window
    notes, and its settings' formats."""
    settings = thread.get("settings") or {}
    return {
        "id": thread["id"],
        "messages": [_message(m, m["index"] == at_fault) for m in thread["messages"]],
        "omitted_before": thread["omitted_before"],
        "omitted_after": thread["omitted_after"],
        "formats": [_format_label(f) for f in settings.get("formats", [])],
    }


def _message(message: dict[str, Any], at_fault: bool) -> dict[str, Any]:
    content = message["content"]
    return {
        "index": message["index"],
        "role": message["role"],
        "known_role": message["role"] in charts.ROLE_ORDER,
        "name": message.get("name"),
        "format": message.get("format"),
        "end_turn": message.get("end_turn"),
        "lines": content.split("\n") if content else [],
        "truncated": message.get("truncated", 0),
        "at_fault": at_fault,
    }


def _format_label(entry: dict[str, Any] | str) -> str:
    """A settings format as `name` plus its non-default options."""
    if isinstance(entry, str):
        return entry
    options = [key for key in ("halt_on_start", "halt_on_completion") if entry.get(key)]
    if entry.get("sampler") is not None:
        sampler = entry["sampler"]
        options.append(f"sampler {sampler if isinstance(sampler, str) else 'schema'}")
    return f"{entry['name']} ({', '.join(options)})" if options else entry["name"]
