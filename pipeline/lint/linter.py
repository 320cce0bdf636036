"""The linter: runs the selected rules over threads (streaming), quarantined records
(MMS101/102/105) and, at the end, the dataset rules."""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from fnmatch import fnmatch
from pathlib import PurePosixPath
from typing import Any, Literal

from pipeline.lint.config import LintConfig
from pipeline.lint.diagnostic import Diagnostic, ThreadRef
from pipeline.lint.rule import DatasetCheck, Finding, Rule, ThreadCheck
from pipeline.lint.rules import RULES_BY_CODE, select_rules
from pipeline.lint.rules.structure import rejection_findings
from pipeline.lint.thread_view import ThreadView
from pipeline.mms import Thread, stable_thread_id
from pipeline.quarantine import Rejection

DatasetChecks = Literal["all", "keyed", "unkeyed"]
"""Which dataset rules `Linter.observe` feeds."""


class Linter:
    """One lint run's rule set. Feed it threads and rejections in reading order, then
    call `finish()` once for the dataset rules' findings."""

    def __init__(self, config: LintConfig | None = None, rules: list[Rule] | None = None):
        """Run the rules `config` selects, or exactly `rules` when given (custom rules)."""
        self.config = config or LintConfig()
        self.rules: list[Rule] = (
            list(rules)
            if rules is not None
            else select_rules(self.config.select, self.config.ignore)
        )
        self._codes = frozenset(rule.code for rule in self.rules)
        self._thread_checks = [
            (r, r.check) for r in self.rules if r.scope == "thread" and r.check is not None
        ]
        self._dataset: list[DatasetCheck] = [
            r.dataset(self.config, r) for r in self.rules if r.scope == "dataset" and r.dataset
        ]
        self._ignored = SourceIgnores(self.config.per_source_ignores)
        self.places: dict[str, str] = {}
        """The files being read as the user named them, by the name their threads record
        (pipeline/sources/names.py): findings point at the file a person can open, while
        the thread's id and lineage do not depend on where it lives."""

    def view(self, thread: Thread) -> ThreadView:
        """The thread as the rules see it, pointing at its file (`places`)."""
        return ThreadView(thread, self.places)

    def check_thread(self, thread: Thread | ThreadView) -> list[Diagnostic]:
        """The findings for one thread: its thread rules', and dataset rules' that can tell at once."""
        view = thread if isinstance(thread, ThreadView) else self.view(thread)
        return self.thread_findings(view) + self.observe(self.dataset_facts(view), view.ref)

    def thread_findings(self, view: ThreadView) -> list[Diagnostic]:
        """The thread rules' findings: they depend on this thread alone (any process)."""
        config = self.config
        try:  # one guard for the thread: a rule raises only on a bug
            per_rule = [(rule, list(check(view, config))) for rule, check in self._thread_checks]
        except Exception:
            per_rule = [
                (rule, _guarded(rule, check, view, config)) for rule, check in self._thread_checks
            ]
        return self._ignored.kept(
            [
                Diagnostic(
                    rule.code,
                    finding.severity or rule.severity,
                    finding.message,
                    view.id,
                    finding.message_index,
                    view.source,
                    view.locator,
                )
                for rule, findings in per_rule
                for finding in findings
            ]
        )

    @property
    def keyed_facts(self) -> list[int]:
        """The positions, in `dataset_facts`, of the keyed checks' facts (a key each)."""
        return [index for index, check in enumerate(self._dataset) if check.keyed]

    def dataset_facts(self, view: ThreadView) -> list[Any]:
        """What each dataset rule keeps of this thread (JSON-able; any process)."""
        return [check.facts(view) for check in self._dataset]

    def prefetch(self, facts: list[list[Any]]) -> None:
        """The `dataset_facts` of the threads `observe` sees next (a batch), at once: a
        keyed check looks their keys up together."""
        for position, check in enumerate(self._dataset):
            check.prefetch(kept[position] for kept in facts)

    def observe(
        self, facts: list[Any], ref: ThreadRef, checks: DatasetChecks = "all"
    ) -> list[Diagnostic]:
        """Feed one thread's `dataset_facts` to the dataset rules, in reading order; the
        findings they can tell at once (a duplicate). `checks`: only the keyed ones (a
        run's pass over the rows whose keys repeat) or only the others (a run's parts)."""
        found: list[Diagnostic] = []
        for check, kept in zip(self._dataset, facts, strict=True):
            if checks == "all" or (checks == "keyed") == check.keyed:
                found.extend(check.observe(kept, ref))
        return self._ignored.kept(found)

    def state(self) -> list[Any]:
        """The unkeyed dataset rules' state (picklable), for `merge`."""
        return [check.state() for check in self._dataset if not check.keyed]

    def merge(self, state: list[Any]) -> list[Diagnostic]:
        """Take the unkeyed rules' `state` of a linter that observed the threads after the
        ones this one did; the findings that tells at once."""
        unkeyed = [check for check in self._dataset if not check.keyed]
        found: list[Diagnostic] = []
        for check, kept in zip(unkeyed, state, strict=True):
            found.extend(check.merge(kept))
        return self._ignored.kept(found)

    def check_rejection(self, rejection: Rejection) -> list[Diagnostic]:
        """MMS101/MMS102/MMS105 for a record that never became a thread."""
        thread_id = rejection.record_id or stable_thread_id(rejection.source, rejection.locator)
        return self._ignored.kept(
            [
                Diagnostic(
                    code,
                    finding.severity or RULES_BY_CODE[code].severity,
                    finding.message,
                    thread_id,
                    finding.message_index,
                    rejection.source,
                    rejection.locator,
                )
                for code, finding in rejection_findings(rejection)
                if code in self._codes
            ]
        )

    def finish(self, checks: DatasetChecks = "all") -> Iterator[Diagnostic]:
        """The dataset rules' findings (of `checks`); call once, after the last thread."""
        for check in self._dataset:
            if checks == "all" or (checks == "keyed") == check.keyed:
                yield from self._ignored.kept(list(check.finish()))


class SourceIgnores:
    """Which findings `per_source_ignores` leaves out: those of the listed rules on
    records of files matching the glob (a glob without a leading `/` at any depth)."""

    def __init__(self, entries: tuple[tuple[str, tuple[str, ...]], ...]) -> None:
        self.entries = [
            (glob, {rule.code for rule in select_rules(list(selectors), ())})
            for glob, selectors in entries
        ]
        self._decided: dict[tuple[str | None, str], bool] = {}

    def kept(self, found: list[Diagnostic]) -> list[Diagnostic]:
        if not self.entries or not found:
            return found
        return [d for d in found if not self._ignored(d.source, d.code)]

    def _ignored(self, source: str | None, code: str) -> bool:
        key = (source, code)
        if key not in self._decided:
            self._decided[key] = source is not None and any(
                code in codes and _matches(source, glob) for glob, codes in self.entries
            )
        return self._decided[key]


def _matches(source: str, glob: str) -> bool:
    """Whether the file `source` (as read) matches `glob`; a relative glob matches the
    path's end at any depth (`legacy/*.jsonl` matches `data/legacy/a.jsonl`)."""
    path = PurePosixPath(source).as_posix()
    return fnmatch(path, glob) or (not glob.startswith("/") and fnmatch(path, f"*/{glob}"))


def _guarded(
    rule: Rule,
    check: ThreadCheck,
    view: ThreadView,
    config: LintConfig,
) -> list[Finding]:
    """A rule's findings on one thread; a rule that fails (a bug) reports that as a finding
    on the thread instead of stopping the run."""
    try:
        return list(check(view, config))
    except Exception as err:
        where = traceback.extract_tb(err.__traceback__)[-1]
        return [
            Finding(
                None,
                f"{rule.code} failed on this thread: {type(err).__name__}: {err} "
                f"({where.name}:{where.lineno}); this is a bug, please report it",
                "error",
            )
        ]
