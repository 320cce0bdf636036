"""`lint()`: read inputs in any format, run the rules, and gather a LintReport (summary
counts, spooled diagnostics, dataset profile, and example threads per rule for the
human-readable reports)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pipeline.accounting import Account
from pipeline.lint.config import LintConfig
from pipeline.lint.diagnostic import Diagnostic
from pipeline.lint.linter import Linter
from pipeline.lint.profile import DatasetProfile
from pipeline.lint.rule import Rule
from pipeline.lint.rules import RULES_BY_CODE
from pipeline.lint.store import DiagnosticStore
from pipeline.mms import Thread, shown_content
from pipeline.quarantine import Rejection

EXAMPLE_CONTENT_CHARS = 2000
EXAMPLE_WINDOW = 12
"""Messages shown on each side of the message at fault in an example thread."""


@dataclass(frozen=True, slots=True)
class Example:
    """A finding with what it points at: the thread (trimmed for display) or the raw
    record that never became one."""

    diagnostic: Diagnostic
    thread: dict[str, Any] | None = None
    raw: str | None = None


def example_thread(thread: Thread, index: int | None) -> dict[str, Any]:
    """The thread's JSON form for display: messages carry their index; long threads keep a
    window around `index`, long contents are cut (both noted); a message's media are
    shown as labels in its text (`shown_content`)."""
    messages = thread.messages
    centre = index if index is not None else 0
    start = max(0, centre - EXAMPLE_WINDOW)
    stop = min(len(messages), centre + EXAMPLE_WINDOW + 1)
    shown = []
    for number in range(start, stop):
        data = {**messages[number].to_dict(), "content": shown_content(messages[number])}
        content = data["content"]
        if len(content) > EXAMPLE_CONTENT_CHARS:
            data["content"] = content[:EXAMPLE_CONTENT_CHARS]
            data["truncated"] = len(content) - EXAMPLE_CONTENT_CHARS
        shown.append({"index": number, **data})
    return {
        "id": thread.id,
        "messages": shown,
        "omitted_before": start,
        "omitted_after": len(messages) - stop,
        "settings": thread.settings.to_dict() if thread.settings else None,
    }


def gating_severities(fail_on: str) -> tuple[str, ...]:
    """The severities that fail a gate set at `fail_on` (error, warning or never)."""
    return {"error": ("error",), "warning": ("error", "warning")}.get(fail_on, ())


@dataclass
class ReportPart:
    """What a report recorded (`LintReport.part`), sent from the process that linted a
    run's part to the run's report (`LintReport.merge`)."""

    diagnostics: DiagnosticStore
    profile: DatasetProfile
    by_code: Counter[str]
    by_severity: Counter[str]
    by_code_severity: Counter[tuple[str, str]]
    threads_with_findings: int
    examples: dict[str, list[Example]]
    on_dropped: Counter[tuple[str, str]]
    first_kept: dict[tuple[str, str], Diagnostic]


@dataclass
class LintReport:
    """Everything a report writer needs. `diagnostics` iterates in reading order (dataset
    findings last); `examples` keeps up to config.max_examples findings per rule."""

    config: LintConfig
    rules: list[Rule]
    inputs: list[str]
    stats: Account
    diagnostics: DiagnosticStore
    profile: DatasetProfile = field(default_factory=DatasetProfile)
    by_code: Counter[str] = field(default_factory=Counter)
    by_severity: Counter[str] = field(default_factory=Counter)
    by_code_severity: Counter[tuple[str, str]] = field(default_factory=Counter)
    threads_with_findings: int = 0
    examples: dict[str, list[Example]] = field(default_factory=dict)
    on_dropped: Counter[tuple[str, str]] = field(default_factory=Counter)
    """(code, severity) of findings on threads a run left out (drop_on, filters, dedup):
    they are reported, but the gate judges only what is kept."""
    first_kept: dict[tuple[str, str], Diagnostic] = field(default_factory=dict)
    """The first finding of each (code, severity) the gate counts: where to look first."""

    @property
    def listed_rules(self) -> list[Rule]:
        """The rules reports list as run: every rule selected, but a media rule only when
        the data held media or it fired (a text-only dataset's reports keep their bytes)."""
        media = self.profile.media_threads > 0
        return [rule for rule in self.rules if not rule.media or media or self.by_code[rule.code]]

    def add(
        self, found: list[Diagnostic], thread: Thread | None = None, raw: str | None = None
    ) -> None:
        """Record a thread's (or a rejected record's) findings."""
        shown = (
            (lambda _, d: example_thread(thread, d.message_index)) if thread is not None else None
        )
        self.add_shown(found, thread.id if thread is not None else None, shown, raw)

    def add_shown(
        self,
        found: list[Diagnostic],
        thread_id: str | None,
        shown: Callable[[int, Diagnostic], dict[str, Any] | None] | None = None,
        raw: str | None = None,
        dropped: bool = False,
    ) -> None:
        """Record findings whose example thread `shown(position in found, finding)` gives
        (asked only for findings kept as examples): how a run records threads linted in
        other processes. `dropped`: the thread was left out, so these findings do not
        count for the gate."""
        if not found:
            return
        self.diagnostics.extend(found)
        if thread_id is not None and any(d.thread_id == thread_id for d in found):
            self.threads_with_findings += 1
        for position, diagnostic in enumerate(found):
            key = (diagnostic.code, diagnostic.severity)
            self.by_code[diagnostic.code] += 1
            self.by_severity[diagnostic.severity] += 1
            self.by_code_severity[key] += 1
            if dropped:
                self.on_dropped[key] += 1
            else:
                self.first_kept.setdefault(key, diagnostic)
            kept = self.examples.setdefault(diagnostic.code, [])
            if len(kept) < self.config.max_examples:
                thread = shown(position, diagnostic) if shown else None
                kept.append(Example(diagnostic, thread, raw))

    def part(self) -> ReportPart:
        """What this report recorded, to be merged into a run's report (`merge`)."""
        return ReportPart(
            self.diagnostics,
            self.profile,
            self.by_code,
            self.by_severity,
            self.by_code_severity,
            self.threads_with_findings,
            self.examples,
            self.on_dropped,
            self.first_kept,
        )

    def merge(self, part: ReportPart) -> None:
        """Record what a report of the threads after these recorded (a run's part, linted
        in another process), as if this one had: the run merges its parts in order."""
        self.diagnostics.take(part.diagnostics)
        self.profile.merge(part.profile)
        self.by_code.update(part.by_code)
        self.by_severity.update(part.by_severity)
        self.by_code_severity.update(part.by_code_severity)
        self.threads_with_findings += part.threads_with_findings
        self.on_dropped.update(part.on_dropped)
        for key, diagnostic in part.first_kept.items():
            self.first_kept.setdefault(key, diagnostic)
        for code, examples in part.examples.items():
            kept = self.examples.setdefault(code, [])
            kept += examples[: max(self.config.max_examples - len(kept), 0)]

    def check(self, linter: Linter, thread: Thread) -> list[Diagnostic]:
        """Lint one thread: its findings recorded (and returned), the profile updated."""
        view = linter.view(thread)
        found = linter.check_thread(view)
        self.add(found, thread)
        self.profile.observe(view)
        return found

    def check_rejection(
        self, linter: Linter, rejection: Rejection, drop_on: frozenset[str] = frozenset()
    ) -> None:
        """Record the findings of a record that never became a thread (MMS101/102/105); a
        code in `drop_on` (a run's lint.drop_on) is left out already and does not count
        for the gate."""
        found = linter.check_rejection(rejection)
        left_out = [d for d in found if d.code in drop_on]
        counted = [d for d in found if d.code not in drop_on]
        self.add_shown(counted, None, None, rejection.raw)
        self.add_shown(left_out, None, None, rejection.raw, dropped=True)

    def severity_of(self, code: str) -> str:
        """The severity of a rule's findings: `error`, `warning`, or `error+warning` for a
        rule whose findings differ (MMS104, MMS403)."""
        found = [s for s in ("error", "warning") if self.by_code_severity[code, s]]
        return "+".join(found) or RULES_BY_CODE[code].severity

    @property
    def errors(self) -> int:
        return self.by_severity["error"]

    @property
    def warnings(self) -> int:
        return self.by_severity["warning"]

    def gate_findings(self, fail_on: str | None = None) -> list[tuple[str, str, int, Diagnostic]]:
        """The findings that fail the gate at `fail_on` (default: the config's): (code,
        severity, count, first finding) of each kind on kept threads (and records), worst
        first. Findings on threads a run left out never count."""
        severities = gating_severities(fail_on or self.config.fail_on)
        found = [
            (
                code,
                severity,
                count - self.on_dropped[code, severity],
                self.first_kept[code, severity],
            )
            for (code, severity), count in self.by_code_severity.items()
            if severity in severities and count > self.on_dropped[code, severity]
        ]
        return sorted(found, key=lambda f: (f[1] != "error", -f[2], f[0]))

    def failed(self, fail_on: str | None = None) -> bool:
        """Whether findings on what is kept reach `fail_on` (default: the config's):
        error, warning, never."""
        return bool(self.gate_findings(fail_on))

    def summary(self) -> dict[str, Any]:
        """The JSON report's `summary` (schemas/lint-report.schema.json)."""
        stats = self.stats
        return {
            "records": stats.records_read,
            "records_converted": stats.records_converted,
            "records_quarantined": stats.quarantined_total,
            "threads": stats.threads,
            "threads_with_findings": self.threads_with_findings,
            "files": len(stats.files),
            "findings": len(self.diagnostics),
            "by_severity": {s: self.by_severity[s] for s in ("error", "warning")},
            "by_code": {code: self.by_code[code] for code in sorted(self.by_code)},
            "rules": [rule.code for rule in self.listed_rules],
            "on_dropped_threads": self._dropped_by_code(),
            "gate": {
                "fail_on": self.config.fail_on,
                "failed": self.failed(),
                "failed_by": {code: count for code, _, count, _ in self.gate_findings()},
            },
        }

    def _dropped_by_code(self) -> dict[str, int]:
        counts: Counter[str] = Counter()
        for (code, _), count in self.on_dropped.items():
            counts[code] += count
        return dict(sorted(counts.items()))
