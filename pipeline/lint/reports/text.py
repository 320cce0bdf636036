"""The terminal reports, compact like ruff. `text`: findings grouped under their source
file, the same finding repeated in a file collapsed into one line with a count, then the
count per rule and a totals line (`statistics=True`: only the counts and totals).
`concise`: one `path:line:col: CODE message` line per finding (clickable in editors and
terminals), then the totals. Both colour severities and codes on a terminal and stop
after `max_findings` lines. What comes from the data (file names, locators, thread ids,
messages quoting content) is shown with its control characters escaped (`visible`): a
finding stays one line, and a name cannot colour or move the terminal."""

from __future__ import annotations

from collections.abc import Iterable, Sized
from dataclasses import dataclass
from typing import TextIO

from pipeline.lint.diagnostic import Diagnostic, locator_line
from pipeline.lint.report import LintReport
from pipeline.lint.rule import Rule
from pipeline.wording import plural, visible

NO_SOURCE = "(no source file)"
"""The group header of findings on threads that came from memory, not a file."""


SHOWN_POSITIONS = 3
"""Positions a collapsed line lists before `…`."""
_COLOURS = {"error": "\x1b[31m", "warning": "\x1b[33m", "code": "\x1b[1m", "path": "\x1b[36m"}
_RESET = "\x1b[0m"


@dataclass(frozen=True, slots=True)
class Look:
    """How a terminal report is drawn: in colour or not, and how many findings at most."""

    color: bool = False
    max_findings: int | None = None

    def paint(self, text: str, kind: str) -> str:
        return f"{_COLOURS[kind]}{text}{_RESET}" if self.color and text else text


def write_text(
    report: LintReport, out: TextIO, statistics: bool = False, look: Look = Look()
) -> None:
    """Write the findings, collapsed (unless `statistics`), then the per-rule counts and
    the totals."""
    if not statistics:
        write_findings(report.diagnostics, out, look)
    if len(report.diagnostics):
        if not statistics:
            out.write("\n")
        write_counts(report, out)
    out.write(totals_line(report) + "\n")


def write_concise(report: LintReport, out: TextIO, look: Look = Look()) -> None:
    """One `path:line:col: CODE message` line per finding, then the totals."""
    total = len(report.diagnostics)
    for listed, diagnostic in enumerate(report.diagnostics):
        if look.max_findings is not None and listed == look.max_findings:
            out.write(_not_shown(total - listed, look))
            break
        out.write(concise_line(diagnostic, look) + "\n")
    out.write(totals_line(report) + "\n")


def concise_line(diagnostic: Diagnostic, look: Look = Look()) -> str:
    """`data/a.jsonl:12:1: MMS201 message [thread abc, msg 3]`: a line-based locator gets
    line and column (clickable), any other its locator or source as it is."""
    line = locator_line(diagnostic.locator)
    if diagnostic.source and line is not None:
        place = f"{visible(diagnostic.source)}:{line}:1"
    else:
        place = visible(diagnostic.locator or diagnostic.source or NO_SOURCE)
    code = look.paint(diagnostic.code, "code")
    severity = look.paint(diagnostic.severity, diagnostic.severity)
    text = f"{look.paint(place, 'path')}: {code} {severity} {one_line(diagnostic.message)}"
    context = where(diagnostic)
    return f"{text} {context}" if context else text


def write_findings(diagnostics: Iterable[Diagnostic], out: TextIO, look: Look = Look()) -> None:
    """Under a header naming each file, one line per distinct finding (code, severity and
    message), the first one's position first, with how many times and where else the
    file has it. Streams: one file's distinct findings are held at a time."""
    total = len(diagnostics) if isinstance(diagnostics, Sized) else None
    listed = 0
    header: str | None = None
    alike: dict[tuple[str, str, str], _Alike] = {}

    def flush() -> bool:
        """Write the file's findings; False once max_findings stops the report."""
        nonlocal listed
        if header is None:
            return True
        out.write(look.paint(visible(header), "path") + "\n")
        for same in alike.values():
            if look.max_findings is not None and listed >= look.max_findings:
                left = total - listed if total is not None else None
                out.write(_not_shown(left, look))
                return False
            out.write(finding_line(same.first, look) + same.repeats() + "\n")
            listed += same.count
        return True

    for diagnostic in diagnostics:
        source = diagnostic.source or NO_SOURCE
        if source != header:
            if not flush():
                return
            header, alike = source, {}
        key = (diagnostic.code, diagnostic.severity, diagnostic.message)
        found = alike.get(key)
        if found is None:
            alike[key] = _Alike(diagnostic)
        else:
            found.add(diagnostic)
    flush()


class _Alike:
    """A finding a file has, and how many times and where else (the first few places)."""

    def __init__(self, first: Diagnostic) -> None:
        self.first = first
        self.count = 1
        self.others: list[str] = []

    def add(self, diagnostic: Diagnostic) -> None:
        self.count += 1
        if len(self.others) < SHOWN_POSITIONS:
            self.others.append(position(diagnostic) or f"thread {visible(diagnostic.thread_id)}")

    def repeats(self) -> str:
        """` (x300: also :7, :9, :12 …)` for a finding the file has more than once."""
        if self.count == 1:
            return ""
        more = " …" if self.count > 1 + SHOWN_POSITIONS else ""
        return f" (x{self.count:,}: also {', '.join(self.others)}{more})"


def _not_shown(count: int | None, look: Look) -> str:
    more = plural(count, "more finding") if count is not None else "more findings"
    return f"… {more} not shown (--max-findings {look.max_findings})\n"


def finding_line(diagnostic: Diagnostic, look: Look = Look()) -> str:
    """`  :12 error MMS201 [thread abc, msg 3] message` (position and brackets when known)."""
    severity = look.paint(diagnostic.severity, diagnostic.severity)
    parts = [position(diagnostic), severity, look.paint(diagnostic.code, "code"), where(diagnostic)]
    parts.append(one_line(diagnostic.message))
    return "  " + " ".join(part for part in parts if part)


def position(diagnostic: Diagnostic) -> str:
    """The locator without its source: `:12` (line), `#4` (record index), "" (whole file)."""
    locator, source = diagnostic.locator, diagnostic.source
    if not locator:
        return ""
    if source and locator.startswith(source):
        return visible(locator[len(source) :])
    return visible(locator)


def where(diagnostic: Diagnostic) -> str:
    """`[thread abc, msg 3]`, `[thread abc]` for thread- and dataset-level findings."""
    parts = []
    if diagnostic.thread_id is not None:
        parts.append(f"thread {visible(diagnostic.thread_id)}")
    if diagnostic.message_index is not None:
        parts.append(f"msg {diagnostic.message_index}")
    return f"[{', '.join(parts)}]" if parts else ""


def one_line(text: str) -> str:
    """`text` with line breaks shown as `\\n` and other control characters escaped too
    (`visible`), so one finding stays one line."""
    return visible(text.replace("\r\n", "\n").replace("\r", "\n"))


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
