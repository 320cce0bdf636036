"""What a lint rule is: a stable code, a name, a default severity, docs (a one-line
summary, why it matters, a bad and a good example), and its check."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from pipeline.lint.diagnostic import Severity, ThreadRef

if TYPE_CHECKING:
    from pipeline.lint.config import LintConfig
    from pipeline.lint.diagnostic import Diagnostic
    from pipeline.lint.thread_view import ThreadView

Scope = Literal["record", "thread", "dataset"]


class Finding(NamedTuple):
    """What a thread check reports: the message at fault (None: the whole thread), the
    text, and a severity when it differs from the rule's default (MMS104)."""

    message_index: int | None
    message: str
    severity: Severity | None = None


ThreadCheck = Callable[["ThreadView", "LintConfig"], Iterable[Finding]]


class DatasetCheck:
    """A rule over the whole dataset, in two halves so that the per-thread work can run in
    parallel: `facts(view)` is what the rule keeps of one thread (small, JSON-able, and
    independent of every other thread), `observe(facts, ref)` sees those facts in reading
    order (and may report that thread at once), `finish()` reports the rest at the end. It
    may keep only hashes and counters, never the threads.

    A `keyed` check's facts are one key whose earlier copies it looks for (MMS501): a run
    that partitions the dataset by key hands it None instead for a thread whose key no
    other thread has, and the check keeps nothing of that thread. An unkeyed check's state
    merges (`state`, `merge`), so a run observes every part apart."""

    keyed: bool = False

    def facts(self, view: ThreadView) -> Any:
        raise NotImplementedError

    def observe(self, facts: Any, ref: ThreadRef) -> Iterable[Diagnostic]:
        raise NotImplementedError

    def finish(self) -> Iterator[Diagnostic]:
        raise NotImplementedError

    def prefetch(self, facts: Iterable[Any]) -> None:
        """The facts of the threads `observe` sees next (a batch), given at once first: a
        keyed check may look their keys up together. Nothing by default."""

    def state(self) -> Any:
        """What an unkeyed check kept of the threads it observed (picklable), for `merge`:
        a run observes its parts in parallel and merges their checks in part order."""
        raise NotImplementedError

    def merge(self, state: Any) -> Iterable[Diagnostic]:
        """Take the `state` of the same check over the threads after the ones this one
        observed; the findings that tells at once (a pair whose sides were in two parts)."""
        raise NotImplementedError


@dataclass(frozen=True)
class Rule:
    """A lint rule. `bad` and `good` are example datasets (MMS thread dicts, or a raw
    JSONL line for records that are not threads):
    the docs show them, and the test suite checks that `bad` fires the rule and `good`
    does not. Record rules read quarantined records; thread rules `check` one thread;
    dataset rules build a fresh `dataset(config)` per run."""

    code: str
    name: str
    severity: Severity
    summary: str
    rationale: str
    bad: Sequence[dict[str, Any] | str]
    good: Sequence[dict[str, Any] | str]
    scope: Scope = "thread"
    check: ThreadCheck | None = None
    dataset: Callable[[LintConfig, Rule], DatasetCheck] | None = None
    options: tuple[str, ...] = field(default=())
    """The config keys (`[tool.mms.lint]`) that tune this rule."""
    media: bool = False
    """A rule on media (MMS106..MMS109): reports list it among the rules that ran only when the
    data held media or it fired, so a text-only dataset's reports keep their bytes."""

    @property
    def family(self) -> str:
        return self.code[:4]
