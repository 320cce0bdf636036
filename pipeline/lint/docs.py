"""Rule documentation for `mms rules`: the table of all rules, and one rule's page
(summary, why, a bad and a good example, the settings that tune it)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

import orjson

from pipeline.lint.rule import Rule
from pipeline.lint.rules import RULES

SCOPES = {
    "record": "records that never became threads",
    "thread": "each thread",
    "dataset": "the whole dataset",
}


def rules_table(rules: tuple[Rule, ...] = RULES) -> str:
    """One line per rule: code, severity, name, summary."""
    width = max(len(rule.name) for rule in rules)
    lines = [f"{r.code}  {r.severity:<7}  {r.name:<{width}}  {r.summary}" for r in rules]
    lines.append("")
    lines.append("`mms rules CODE` shows a rule's rationale and examples.")
    return "\n".join(lines)


def example_lines(examples: Sequence[dict[str, Any] | str]) -> list[str]:
    """Examples as the JSONL lines a dataset would hold."""
    return [e if isinstance(e, str) else orjson.dumps(e).decode() for e in examples]


def _shown(examples: Sequence[dict[str, Any] | str], limit: int = 3) -> list[str]:
    lines = example_lines(examples)
    if len(lines) > limit + 1:
        lines = [*lines[:limit], f"... and {len(lines) - limit} more threads like these"]
    return [f"  {line}" for line in lines]


def rule_page(rule: Rule) -> str:
    """Everything about one rule, as plain text."""
    parts = [
        f"{rule.code} {rule.name} ({rule.severity}, checks {SCOPES[rule.scope]})",
        "",
        rule.summary,
        "",
        "Why",
        textwrap.fill(rule.rationale, width=88, initial_indent="  ", subsequent_indent="  "),
        "",
        "Bad (fires)",
        *_shown(rule.bad),
        "",
        "Good (does not fire)",
        *_shown(rule.good),
    ]
    if rule.options:
        parts += ["", f"Settings ([tool.mms.lint]): {', '.join(rule.options)}"]
    return "\n".join(parts)


def rule_dict(rule: Rule) -> dict[str, Any]:
    """A rule's docs as JSON (for `mms rules --output-format json`)."""
    return {
        "code": rule.code,
        "name": rule.name,
        "severity": rule.severity,
        "scope": rule.scope,
        "summary": rule.summary,
        "rationale": rule.rationale,
        "bad": example_lines(rule.bad),
        "good": example_lines(rule.good),
        "options": list(rule.options),
    }
