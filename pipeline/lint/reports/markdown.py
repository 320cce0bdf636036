"""The Markdown report a curator reads on GitHub: the totals, the findings per rule, and for
each rule its kept examples (where and what); the full list is the JSON report's job."""

from __future__ import annotations

import re
from typing import TextIO

from pipeline.lint.report import Example, LintReport
from pipeline.lint.reports.text import rule_counts
from pipeline.lint.rule import Rule

CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")
"""A CommonMark code span: a backtick run, then the next run of the same length."""
LEADING_BLOCK = re.compile(r"[-+]|\d+[.)]")
"""A paragraph start that would make it a list item or a thematic break."""
SPECIAL = re.compile(r"([\\`*_\[\]<>|~&#!$])")
"""Characters that would start Markdown, HTML or GitHub math syntax inside running text."""


def write_markdown(report: LintReport, out: TextIO) -> None:
    """Write the whole report: title, summary table, rules table, one section per rule."""
    out.write("# mms lint report\n\n")
    if report.inputs:
        out.write("Inputs: " + ", ".join(code_span(path) for path in report.inputs) + "\n\n")
    write_summary(report, out)
    counts = rule_counts(report)
    if not counts:
        out.write("All checks passed: no findings.\n")
        return
    write_rules_table(report, counts, out)
    for count, rule in counts:
        write_rule_section(report, rule, count, out)


def write_summary(report: LintReport, out: TextIO) -> None:
    """The totals: records, threads, findings by severity."""
    stats = report.stats
    rows = [
        ("records read", stats.records_read),
        ("records quarantined", stats.quarantined_total),
        ("threads", stats.threads),
        ("threads with findings", report.threads_with_findings),
        ("findings", len(report.diagnostics)),
        ("errors", report.errors),
        ("warnings", report.warnings),
    ]
    dropped = sum(report.on_dropped.values())
    if dropped:
        rows.append(("findings on dropped threads (not gated)", dropped))
    out.write("| | count |\n|---|---:|\n")
    for label, count in rows:
        out.write(f"| {label} | {count:,} |\n")
    out.write("\n")
    write_gate(report, out)


def write_gate(report: LintReport, out: TextIO) -> None:
    """The gate's verdict at its fail_on level, and the findings that decided it."""
    level = report.config.fail_on
    failing = report.gate_findings()
    if not failing:
        out.write(f"**Gate** (fail on {level}): passed.\n\n")
        return
    decided = ", ".join(
        f"{code} {severity} x{count} (first at {first.locator or first.source or first.thread_id})"
        for code, severity, count, first in failing
    )
    out.write(f"**Gate** (fail on {level}): **failed** by {inline(decided)}.\n\n")


def write_rules_table(report: LintReport, counts: list[tuple[int, Rule]], out: TextIO) -> None:
    """One row per rule with findings, most findings first."""
    out.write("## Findings by rule\n\n")
    out.write("| code | rule | severity | count | summary |\n|---|---|---|---:|---|\n")
    for count, rule in counts:
        cells = [
            f"[{rule.code}](#{section_anchor(report, rule, count)})",
            rule.name,
            report.severity_of(rule.code),
            f"{count:,}",
            inline(rule.summary, table=True),
        ]
        out.write("| " + " | ".join(cells) + " |\n")
    out.write("\n")


def write_rule_section(report: LintReport, rule: Rule, count: int, out: TextIO) -> None:
    """A rule's heading, why it matters, its examples, and how many more there are."""
    examples = report.examples.get(rule.code, [])
    out.write(f"## {section_title(report, rule, count)}\n\n")
    out.write(block_safe(inline(rule.rationale)) + "\n\n")
    for example in examples:
        out.write(f"- {example_item(example)}\n")
    more = count - len(examples)
    if more > 0:
        out.write(f"- … and {more:,} more: see the JSON report (`--output-format json`)\n")
    out.write("\n")


def section_title(report: LintReport, rule: Rule, count: int) -> str:
    """`MMS501 duplicate-thread (warning, 1,065)`."""
    return f"{rule.code} {rule.name} ({report.severity_of(rule.code)}, {count:,})"


def section_anchor(report: LintReport, rule: Rule, count: int) -> str:
    """The id GitHub gives the section's heading: lower case, punctuation but `-` dropped,
    spaces as `-` (`mms501-duplicate-thread-warning-1065`)."""
    kept = re.sub(r"[^\w\- ]", "", section_title(report, rule, count).lower())
    return kept.replace(" ", "-")


def example_item(example: Example) -> str:
    """`path:12` · thread `abc` · message 3: the finding's message."""
    diagnostic = example.diagnostic
    parts = []
    location = diagnostic.locator or diagnostic.source
    if location:
        parts.append(code_span(location))
    if diagnostic.thread_id is not None:
        parts.append("thread " + code_span(diagnostic.thread_id))
    if diagnostic.message_index is not None:
        parts.append(f"message {diagnostic.message_index}")
    where = " · ".join(parts)
    message = inline(diagnostic.message)
    return f"{where}: {message}" if where else block_safe(message)


def inline(text: str, *, table: bool = False) -> str:
    """`text` as one line of Markdown: its code spans kept (re-fenced), everything else
    escaped; in a `table` cell, pipes are escaped inside code spans too."""
    flat = flatten(text)
    pieces = []
    last = 0
    for match in CODE_SPAN.finditer(flat):
        pieces.append(escape(flat[last : match.start()]))
        content = match.group(2)
        if content.startswith(" ") and content.endswith(" ") and content.strip(" "):
            content = content[1:-1]
        pieces.append(code_span(content, table=table))
        last = match.end()
    pieces.append(escape(flat[last:]))
    return "".join(pieces)


def block_safe(markdown: str) -> str:
    """`markdown` with no leading indent and its list or rule marker escaped, so it stays a
    paragraph (headings, quotes and HTML are escaped already)."""
    markdown = markdown.lstrip()
    marker = LEADING_BLOCK.match(markdown)
    if marker is None:
        return markdown
    end = marker.end() - 1
    return f"{markdown[:end]}\\{markdown[end:]}"


def escape(text: str) -> str:
    """Backslash-escape the characters that would start Markdown or HTML syntax."""
    return SPECIAL.sub(r"\\\1", text)


def code_span(text: str, *, table: bool = False) -> str:
    """`text` as a code span whose fence is longer than any backtick run inside it."""
    flat = flatten(text)
    if table:
        flat = flat.replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", flat)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if flat.startswith(("`", " ")) or flat.endswith(("`", " ")) else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def flatten(text: str) -> str:
    """`text` on one line: line breaks become spaces."""
    return text.replace("\r\n", " ").replace("\r", " ").replace("\n", " ")
