"""The lint stage, configured by the `lint` slice. Map side: each thread's findings of the
thread rules, what each dataset rule keeps of it, the dataset profile and the example
threads of the part's first findings. Dataset side, in plan order: the dataset rules see
every thread, the gate drops the threads with a finding in `drop_on`, and every finding is
recorded in the run's LintReport with whether its thread was kept."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import orjson
import pyarrow as pa

from pipeline.config_slice import ConfigSlice, SliceReader
from pipeline.lint import Diagnostic, LintConfig, Linter, LintReport, UnknownRuleError, select_rules
from pipeline.lint.diagnostic import ThreadRef
from pipeline.lint.profile import DatasetProfile
from pipeline.lint.report import example_thread
from pipeline.mms import Thread
from pipeline.quarantine import Rejection
from pipeline.stages.contract import Batch, Stage, repeated_column, resolved_column, thread_as_read

FINDINGS = "lint_findings"
"""The thread rules' findings (a JSON list of diagnostics), null when there are none."""
FACTS = "lint_facts"
"""JSON [source, locator, facts of each dataset rule]."""


@dataclass(frozen=True, slots=True)
class LintSettings:
    """Which rules run, which findings fail the run (`fail_on`), which threads are dropped."""

    select: tuple[str, ...] = ("ALL",)
    ignore: tuple[str, ...] = ()
    fail_on: Literal["error", "warning", "never"] = "error"
    drop_on: tuple[str, ...] = ()
    min_phrasings: int = 3
    dataset_min_threads: int = 10
    special_tokens: tuple[str, ...] = ()
    max_examples: int = 20
    per_source_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def to_lint_config(self, source: str | None = None) -> LintConfig:
        """The LintConfig of the linter (drop_on is the stage's business, not the linter's)."""
        return LintConfig(
            select=self.select,
            ignore=self.ignore,
            fail_on=self.fail_on,
            min_phrasings=self.min_phrasings,
            dataset_min_threads=self.dataset_min_threads,
            special_tokens=self.special_tokens,
            max_examples=self.max_examples,
            per_source_ignores=self.per_source_ignores,
            source=source,
        )


def _read(raw: dict[str, Any], reader: SliceReader) -> LintSettings:
    """The settings, every rule selector known, and each `drop_on` among the selected."""
    ignores = raw.get("per_source_ignores", {})
    for glob, selectors in ignores.items():
        for index, selector in enumerate(selectors):
            try:
                select_rules([selector])
            except UnknownRuleError as err:
                raise reader.error(["per_source_ignores", glob, index], str(err)) from None
    plain: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()}
    plain["per_source_ignores"] = tuple((g, tuple(s)) for g, s in ignores.items())
    settings = LintSettings(**plain)
    for key in ("select", "ignore", "drop_on"):
        for index, selector in enumerate(getattr(settings, key)):
            try:
                select_rules([selector])
            except UnknownRuleError as err:
                raise reader.error([key, index], str(err)) from None
    selected = {rule.code for rule in select_rules(settings.select, settings.ignore)}
    for index, selector in enumerate(settings.drop_on):
        if not {rule.code for rule in select_rules([selector])} & selected:
            reason = f"{selector} is not among the selected rules, so it could drop nothing"
            raise reader.error(["drop_on", index], reason)
    return settings


CONFIG = ConfigSlice("lint", LintSettings, read=_read)


class Lint(Stage):
    """See the module docstring. `report` is given on the dataset side only."""

    name = "lint"
    sees_rejections = True
    columns: ClassVar[tuple[pa.Field, ...]] = (
        pa.field(FINDINGS, pa.binary()),
        pa.field(FACTS, pa.binary()),
    )
    partition_columns: ClassVar[tuple[str, ...]] = (FACTS,)

    def __init__(
        self,
        config: LintConfig,
        report: LintReport | None = None,
        drop_on: frozenset[str] = frozenset(),
    ):
        self.linter = Linter(config)
        self.drop_on = drop_on
        self.report = report
        self.profile = DatasetProfile()
        self.examples: dict[str, dict[str, Any]] = {}
        self.example_counts: dict[str, int] = {}
        self.mapped = 0
        """Rows mapped since the last part_state (the map side's examples are keyed by it)."""
        self.recorded = 0
        """Rows recorded since the last merge_part (the dataset side's key to those examples)."""
        self.last_mapped: list[Thread] = []
        """The threads of the batch mapped last: a streaming job records that batch next,
        in the same process, and takes the dataset rules' example threads from here."""
        self.keyed_only = False
        """For a run's pass over the rows whose keys repeat, which records nothing: without
        `drop_on`, the keyed rules are all `decide` must see there."""
        self.keyed: list[list[Diagnostic]] = []
        """Per row of the batch `decide` saw: the keyed rules' findings (`resolutions`)."""
        self.found: list[tuple[str, list[Diagnostic], int]] = []
        """Per row of the batch `decide` saw: its id, its findings, how many the map side had."""

    @classmethod
    def from_settings(
        cls,
        settings: LintSettings,
        source: str | None,
        report: LintReport | None = None,
        *,
        keyed_only: bool = False,
    ) -> Lint:
        """The stage of a run's `lint` slice; findings point at the config `source`."""
        stage = cls(settings.to_lint_config(source), report, frozenset(settings.drop_on))
        stage.keyed_only = keyed_only
        return stage

    def map(self, batch: Batch) -> Batch:
        self.last_mapped = batch.threads
        findings, facts = [], []
        for thread in batch.threads:
            view = self.linter.view(thread)
            found = self.linter.thread_findings(view)
            self._keep_examples(thread, found)
            findings.append(orjson.dumps([d.to_dict() for d in found]) if found else None)
            facts.append(
                orjson.dumps([view.source, view.locator, *self.linter.dataset_facts(view)])
            )
            self.profile.observe(view)
            self.mapped += 1
        batch.columns[FINDINGS] = pa.array(findings, pa.binary())
        batch.columns[FACTS] = pa.array(facts, pa.binary())
        return batch

    def _keep_examples(self, thread: Any, found: list[Diagnostic]) -> None:
        """The example threads of the part's first `max_examples` findings per rule, keyed
        `row:position`: the dataset side keeps the dataset's first ones, a subset of these."""
        for position, diagnostic in enumerate(found):
            seen = self.example_counts.get(diagnostic.code, 0)
            if seen < self.linter.config.max_examples:
                self.example_counts[diagnostic.code] = seen + 1
                self.examples[f"{self.mapped}:{position}"] = example_thread(
                    thread, diagnostic.message_index
                )

    def part_state(self) -> dict[str, Any]:
        state = {"profile": self.profile.state(), "examples": self.examples}
        self.profile, self.examples, self.mapped = DatasetProfile(), {}, 0
        return state

    def merge_part(self, state: dict[str, Any]) -> None:
        self._required_report().profile.merge(DatasetProfile.from_state(state["profile"]))
        self.examples = state["examples"]
        self.recorded = 0

    def rejected(self, rejection: Rejection) -> None:
        """Record the findings of a record that never became a thread (MMS101/102/105)."""
        self._required_report().check_rejection(self.linter, rejection, self.drop_on)

    def partition_keys(self, rows: pa.Table) -> pa.Table:
        """The keyed dataset rules' keys (MMS501's content key), one per rule and row."""
        positions = self.linter.keyed_facts
        row_ids: list[int] = []
        keys: list[bytes] = []
        for row, facts in enumerate(rows[FACTS].to_pylist() if positions else []):
            rule_facts = orjson.loads(facts)[2:]
            for position in positions:
                row_ids.append(row)
                keys.append(orjson.dumps([position, rule_facts[position]]))
        return pa.table({"row": pa.array(row_ids, pa.int64()), "key": pa.array(keys, pa.binary())})

    def decide(self, rows: pa.Table, kept: list[bool]) -> list[str | None]:
        ids = rows["id"].to_pylist()
        findings = rows[FINDINGS].to_pylist()
        facts = rows[FACTS].to_pylist()
        column = repeated_column(self.name)
        alone = (
            [not shared for shared in rows[column].to_pylist()]
            if column in rows.column_names
            else None
        )
        column = resolved_column(self.name)
        resolved = rows[column].to_pylist() if column in rows.column_names else None
        positions = self.linter.keyed_facts
        self.found, self.keyed = [], []
        reasons: list[str | None] = []
        places, all_facts = [], []
        for row, each in enumerate(facts):
            source, locator, *rule_facts = orjson.loads(each)
            if alone is not None and alone[row]:
                for position in positions:
                    rule_facts[position] = None  # no other thread shares its key
            places.append((source, locator))
            all_facts.append(rule_facts)
        if resolved is None or (self.keyed_only and not self.drop_on):
            self.linter.prefetch(all_facts)
        for row, thread_id in enumerate(ids):
            (source, locator), rule_facts = places[row], all_facts[row]
            ref = ThreadRef(thread_id, source, locator)
            if self.keyed_only and not self.drop_on:
                self.keyed.append(self.linter.observe(rule_facts, ref, "keyed"))
                reasons.append(None)
                continue
            found = [Diagnostic.from_dict(d) for d in orjson.loads(findings[row] or b"[]")]
            mapped = len(found)
            if resolved is None:
                keyed = self.linter.observe(rule_facts, ref, "keyed")
            else:  # the run's pass over the repeated rows found these
                keyed = [Diagnostic.from_dict(d) for d in orjson.loads(resolved[row] or b"[]")]
            self.keyed.append(keyed)
            found += keyed + self.linter.observe(rule_facts, ref, "unkeyed")
            self.found.append((thread_id, found, mapped))
            codes = sorted({d.code for d in found if d.code in self.drop_on})
            reasons.append(f"lint:{codes[0]}" if codes and kept[row] else None)
        return reasons

    def resolutions(self) -> list[Any]:
        """Per row: the keyed rules' findings (MMS501), as dicts; None when none."""
        return [[d.to_dict() for d in keyed] or None for keyed in self.keyed]

    def record(self, rows: pa.Table, reasons: list[str | None]) -> None:
        report = self._required_report()
        for row, (thread_id, found, mapped) in enumerate(self.found):
            if found:
                shown = self._examples_of(rows, row, self.recorded + row, mapped)
                report.add_shown(found, thread_id, shown, dropped=reasons[row] is not None)
        self.recorded += rows.num_rows

    def _examples_of(
        self, rows: pa.Table, row: int, part_row: int, mapped: int
    ) -> Callable[[int, Diagnostic], dict[str, Any]]:
        """The example threads of a row's findings: the part's (taken by the map side, which
        had the thread) for the first `mapped`, the thread rebuilt from its row for the
        dataset rules' findings."""

        def shown(position: int, diagnostic: Diagnostic) -> dict[str, Any]:
            if position < mapped:
                return self.examples[f"{part_row}:{position}"]
            last = self.last_mapped
            if len(last) == rows.num_rows and last[row].id == rows["id"][row].as_py():
                return example_thread(last[row], diagnostic.message_index)
            return example_thread(thread_as_read(rows, row), diagnostic.message_index)

        return shown

    def finish(self, keyed_by: Linter | None = None) -> LintReport:
        """The report, with the dataset rules' findings at the end of the data; those of
        the keyed rules from `keyed_by` when given (the linter of a run's pass over the
        rows whose keys repeat; this one merged the parts' unkeyed rules)."""
        report = self._required_report()
        if keyed_by is None:
            report.add(list(self.linter.finish()))
        else:
            report.add([*keyed_by.finish("keyed"), *self.linter.finish("unkeyed")])
        return report

    def _required_report(self) -> LintReport:
        if self.report is None:
            raise RuntimeError("the lint stage's dataset side needs the run's LintReport")
        return self.report
