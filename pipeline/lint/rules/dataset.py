"""MMS5xx: rules over the whole dataset. Each sees every thread once and keeps only
hashes and counters (bounded by distinct threads and capabilities, never by content)."""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

from pipeline.capabilities import (
    DEFAULT_CAPABILITY,
    outside_fences,
)
from pipeline.dedup import content_key
from pipeline.dedup.first_seen import CompactTexts, FirstSeen
from pipeline.lint.config import LintConfig
from pipeline.lint.diagnostic import Diagnostic, ThreadRef
from pipeline.lint.rule import DatasetCheck, Rule
from pipeline.lint.rules.examples import assistant, developer, thread, user
from pipeline.lint.thread_view import ThreadView

_CODE_SPAN = re.compile(r"`+[^`]*`+")
_PARAGRAPH = re.compile(r"\n\s*\n")
_SPACE = re.compile(r"\s+")


def _digest(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


class DuplicateThreads(DatasetCheck):
    """MMS501: threads with the same content key (pipeline.dedup.content_key, the key
    exact dedup drops on): ids, meta and the wording of converter-written tool
    declarations aside."""

    keyed = True

    def __init__(self, config: LintConfig, rule: Rule):
        self.rule = rule
        self.first_seen = FirstSeen()  # content key -> its first thread's place
        self.places = _Places()

    def facts(self, view: ThreadView) -> int:
        return content_key(view.thread)

    def prefetch(self, facts: Iterable[int | None]) -> None:
        self.first_seen.prefetch(key for key in facts if key is not None)

    def observe(self, facts: int | None, ref: ThreadRef) -> Iterator[Diagnostic]:
        if facts is None:  # no other thread has its key
            return
        first = self.first_seen.get(facts)
        if first is None:
            self.first_seen.add(facts, self.places.keep(ref))
        else:
            yield Diagnostic(
                self.rule.code,
                self.rule.severity,
                f"duplicate of {self.places.where(first)} (same messages and settings)",
                ref.id,
                None,
                ref.source,
                ref.locator,
            )

    def finish(self) -> Iterator[Diagnostic]:
        return iter(())


class _Places:
    """Where threads are, kept small: `file:line` and `file#index` as one integer (the
    file's number, the separator, the position), anything else as a negative number (its
    text kept compactly); one entry per thread of a dataset costs what an integer costs."""

    _SEPARATORS = (":", "#")
    _POSITION_BITS = 40
    _FILE_BITS = 22
    """Files numbered in a place: the place fits 63 bits (a signed 64-bit array's)."""

    def __init__(self) -> None:
        self.files: dict[str, int] = {}
        self.names: list[str] = []
        self.texts = CompactTexts()
        """The places that are not `file:line` or `file#index`, each kept as -1 - its
        number here."""

    def keep(self, ref: ThreadRef) -> int:
        locator, source = ref.locator or "", ref.source or ""
        position = locator[len(source) + 1 :]
        separator = locator[len(source) : len(source) + 1]
        compact = (
            source
            and locator.startswith(source)
            and separator in self._SEPARATORS
            and position.isascii()
            and position.isdigit()
            and int(position) < 1 << self._POSITION_BITS
            and (source in self.files or len(self.files) < 1 << self._FILE_BITS)
        )
        if not compact:
            return -1 - self.texts.add(locator or source or f"thread {ref.id}")
        number = self.files.setdefault(source, len(self.files))
        if number == len(self.names):
            self.names.append(source)
        kind = self._SEPARATORS.index(separator)
        return (number << (self._POSITION_BITS + 1)) | (kind << self._POSITION_BITS) | int(position)

    def where(self, place: int) -> str:
        if place < 0:
            return self.texts.get(-1 - place) or ""
        number, rest = divmod(place, 1 << (self._POSITION_BITS + 1))
        kind, position = divmod(rest, 1 << self._POSITION_BITS)
        return f"{self.names[number]}{self._SEPARATORS[kind]}{position}"


class _CapabilityCounts:
    """Per capability: threads enabling it, and the first of them (to point at)."""

    def __init__(self) -> None:
        self.enabled: Counter[str] = Counter()
        self.first: dict[str, ThreadRef] = {}

    def add(self, name: str, ref: ThreadRef) -> None:
        self.enabled[name] += 1
        self.first.setdefault(name, ref)

    def merge(self, other: _CapabilityCounts) -> None:
        """Add the counts of the threads after these (their first threads come later)."""
        self.enabled.update(other.enabled)
        for name, ref in other.first.items():
            self.first.setdefault(name, ref)

    def diagnostic(self, rule: Rule, name: str, message: str) -> Diagnostic:
        ref = self.first[name]
        return Diagnostic(rule.code, rule.severity, message, ref.id, None, ref.source, ref.locator)


class AlwaysUsed(DatasetCheck):
    """MMS502: a capability used in every thread that enables it."""

    def __init__(self, config: LintConfig, rule: Rule):
        self.rule = rule
        self.min_threads = config.dataset_min_threads
        self.counts = _CapabilityCounts()
        self.used: Counter[str] = Counter()

    def facts(self, view: ThreadView) -> list[tuple[str, bool]]:
        """Each non-default capability the thread enables, and whether it uses it."""
        caps = view.capabilities
        used = {use.format for use in caps.uses}
        return [(name, name in used) for name in caps.enabled if name != DEFAULT_CAPABILITY]

    def observe(self, facts: list[tuple[str, bool]], ref: ThreadRef) -> Iterator[Diagnostic]:
        for name, used in facts:
            self.counts.add(name, ref)
            self.used[name] += used
        return iter(())

    def state(self) -> tuple[_CapabilityCounts, Counter[str]]:
        return self.counts, self.used

    def merge(self, state: tuple[_CapabilityCounts, Counter[str]]) -> Iterator[Diagnostic]:
        counts, used = state
        self.counts.merge(counts)
        self.used.update(used)
        return iter(())

    def finish(self) -> Iterator[Diagnostic]:
        for name, enabled in sorted(self.counts.enabled.items()):
            if enabled >= self.min_threads and self.used[name] == enabled:
                yield self.counts.diagnostic(
                    self.rule,
                    name,
                    f"`{name}` is used in all {enabled} threads that enable it: add threads "
                    "that enable it and answer without it",
                )


def phrasing(text: str, format_name: str) -> int:
    """A hash of how a developer message words the enabling of `format_name`: the
    paragraph holding its code span plus the message's first paragraph, with code spans
    and the tool's name masked, case and spacing folded."""
    paragraphs = _PARAGRAPH.split(outside_fences(text).strip())
    span = f"`{format_name}`"
    holding = next((p for p in paragraphs if span in p), "")
    words = f"{paragraphs[0]}\n{holding}" if holding != paragraphs[0] else holding
    tool = format_name.partition(":")[0]
    words = _CODE_SPAN.sub("`_`", words)
    if tool:
        words = re.sub(re.escape(tool), "_", words, flags=re.IGNORECASE)
    return _digest(_SPACE.sub(" ", words).strip().lower().encode())


class FewPhrasings(DatasetCheck):
    """MMS503: a capability enabled with too few distinct developer phrasings."""

    def __init__(self, config: LintConfig, rule: Rule):
        self.rule = rule
        self.min_threads = config.dataset_min_threads
        self.min_phrasings = config.min_phrasings
        self.counts = _CapabilityCounts()
        self.phrasings: dict[str, set[int]] = {}

    def facts(self, view: ThreadView) -> list[tuple[str, int]]:
        """Each capability a developer or platform message enables, and its phrasing."""
        messages = view.thread.messages
        return [
            (name, phrasing(messages[index].content, name))
            for name, index in view.capabilities.enabled.items()
            if index is not None and name != DEFAULT_CAPABILITY  # settings-only: no wording
        ]

    def observe(self, facts: list[tuple[str, int]], ref: ThreadRef) -> Iterator[Diagnostic]:
        for name, worded in facts:
            self.counts.add(name, ref)
            seen = self.phrasings.setdefault(name, set())
            if len(seen) < self.min_phrasings:  # enough is enough: stay bounded
                seen.add(worded)
        return iter(())

    def state(self) -> tuple[_CapabilityCounts, dict[str, set[int]]]:
        return self.counts, self.phrasings

    def merge(self, state: tuple[_CapabilityCounts, dict[str, set[int]]]) -> Iterator[Diagnostic]:
        counts, phrasings = state
        self.counts.merge(counts)
        for name, worded in phrasings.items():
            seen = self.phrasings.setdefault(name, set())
            for phrase in sorted(worded):
                if len(seen) >= self.min_phrasings:
                    break
                seen.add(phrase)
        return iter(())

    def finish(self) -> Iterator[Diagnostic]:
        for name, enabled in sorted(self.counts.enabled.items()):
            distinct = len(self.phrasings[name])
            if enabled >= self.min_threads and distinct < self.min_phrasings:
                yield self.counts.diagnostic(
                    self.rule,
                    name,
                    f"`{name}` is enabled in {enabled} threads with only {distinct} distinct "
                    f"developer phrasing(s) (want at least {self.min_phrasings}): vary the "
                    "wording and order",
                )


LABEL_SHARE = 0.9
"""MMS508: the share of the answers a handful of short values must hold."""
LABEL_VALUES = 12
"""MMS508: at most this many distinct values make a handful ..."""
LABEL_CHARS = 40
"""... each at most this long (stripped)."""
LABEL_KEPT = 1024
"""MMS508 keeps counts of this many distinct short answers, the later ones counted apart."""
SHOWN_LABELS = 6
"""MMS508 names this many of the values, the most frequent first."""


class _ShortAnswers:
    """How many threads were answered, and how often each short final answer was given
    (up to LABEL_KEPT distinct ones, the first thread of each kept to point at)."""

    def __init__(self) -> None:
        self.answered = 0
        self.counts: Counter[str] = Counter()
        self.first: dict[str, ThreadRef] = {}

    def add(self, answer: str | None, ref: ThreadRef, times: int = 1) -> None:
        """Count one answered thread's final answer (None: not a short one)."""
        self.answered += times
        if answer is not None and (answer in self.counts or len(self.counts) < LABEL_KEPT):
            self.counts[answer] += times
            self.first.setdefault(answer, ref)

    def merge(self, other: _ShortAnswers) -> None:
        """Add the counts of the threads after these."""
        self.answered += other.answered - sum(other.counts.values())
        for answer, times in other.counts.items():
            self.add(answer, other.first[answer], times)


class LabelAnswers(DatasetCheck):
    """MMS508: the assistant's answers are a handful of short repeated values (labels)."""

    def __init__(self, config: LintConfig, rule: Rule):
        self.rule = rule
        self.min_threads = config.dataset_min_threads
        self.answers = _ShortAnswers()

    def facts(self, view: ThreadView) -> tuple[bool, str | None]:
        """Whether the thread has an answer, and its final answer when it is short."""
        answers = [m for m in view.thread.messages if m.role == "assistant"]
        if not answers:
            return False, None
        text = answers[-1].content.strip()
        return True, text if len(text) <= LABEL_CHARS else None

    def observe(self, facts: tuple[bool, str | None], ref: ThreadRef) -> Iterator[Diagnostic]:
        answered, text = facts
        if answered:
            self.answers.add(text, ref)
        return iter(())

    def state(self) -> _ShortAnswers:
        return self.answers

    def merge(self, state: _ShortAnswers) -> Iterator[Diagnostic]:
        self.answers.merge(state)
        return iter(())

    def finish(self) -> Iterator[Diagnostic]:
        answered = self.answers.answered
        top = self.answers.counts.most_common(LABEL_VALUES)
        held = sum(times for _, times in top)
        if answered < self.min_threads or not top or held < LABEL_SHARE * answered:
            return
        named = ", ".join(f"{value!r} ({times})" for value, times in top[:SHOWN_LABELS])
        more = f" and {len(top) - SHOWN_LABELS} more" if len(top) > SHOWN_LABELS else ""
        ref = self.answers.first[top[0][0]]
        yield Diagnostic(
            self.rule.code,
            self.rule.severity,
            f"{held} of {answered} answers ({held / answered:.0%}) are one of {len(top)} short "
            f"values: {named}{more}; labels, not answers (was a category or label field "
            "mapped as the answer?)",
            ref.id,
            None,
            ref.source,
            ref.locator,
        )


def _labelled(answers: tuple[str, ...]) -> list[dict[str, Any]]:
    """Ten support tickets answered in turn with `answers`."""
    return [
        thread(
            user(f"Ticket {i}: I was charged twice this month."),
            assistant(answers[i % len(answers)]),
            id=f"t{i}",
        )
        for i in range(10)
    ]


def _json_dataset(wordings: tuple[str, ...], mixed: bool = True) -> list[dict[str, Any]]:
    """Ten threads whose developer messages enable `json` (worded in turn as `wordings`):
    every other one answers in json when `mixed`, all of them otherwise."""
    threads = []
    for i in range(10):
        uses = not mixed or i % 2 == 1
        threads.append(
            thread(
                developer(wordings[i % len(wordings)]),
                user(f"Give me {i} as data." if uses else f"What is {i} plus one?"),
                assistant(f'{{"n": {i}}}', "json") if uses else assistant(f"{i + 1}"),
                id=f"t{i}",
            )
        )
    return threads


_WORDINGS = (
    "Reply in `json` when the user asks for data.",
    "You may answer with the `json` format.",
    "Structured answers: use `json`.",
)

RULES = [
    Rule(
        code="MMS501",
        name="duplicate-thread",
        severity="warning",
        scope="dataset",
        summary="Two threads have the same messages and settings.",
        rationale=(
            "Duplicates over-weight one example and leak between train and test splits. "
            "Threads that differ only in id or meta count as duplicates, and so do threads "
            "whose converter-written tool declarations are worded differently but declare "
            "the same tools with the same schemas (converters vary that wording per thread "
            "and record what it declares in `meta.declaration`); every other message, "
            "developer messages included, is compared word for word. This is the key "
            "`mms run`'s exact dedup drops on and its splits keep together. The finding is "
            "on every copy after the first."
        ),
        bad=[
            thread(user("Hi"), assistant("Hello!"), id="a"),
            thread(user("Hi"), assistant("Hello!"), id="b"),
        ],
        good=[
            thread(user("Hi"), assistant("Hello!"), id="a"),
            thread(user("Hi"), assistant("Hey there!"), id="b"),
        ],
        dataset=DuplicateThreads,
    ),
    Rule(
        code="MMS502",
        name="capability-never-absent",
        severity="warning",
        scope="dataset",
        summary="A capability is used in every thread that enables it (no negative examples).",
        rationale=(
            "If `json` is enabled only in threads that answer in JSON, the model learns "
            "'enabled means must use'. Mix in threads that enable the capability and answer "
            "without it. Judged for capabilities enabled in at least `dataset-min-threads` "
            "threads."
        ),
        bad=_json_dataset(_WORDINGS, mixed=False),
        good=_json_dataset(_WORDINGS),
        dataset=AlwaysUsed,
        options=("dataset-min-threads",),
    ),
    Rule(
        code="MMS503",
        name="few-phrasings",
        severity="warning",
        scope="dataset",
        summary="A capability is enabled by too few distinct developer phrasings.",
        rationale=(
            "The spec asks for variety in how developer messages enable capabilities. With "
            "one fixed sentence, the model keys on that sentence instead of the code span. "
            "Phrasings compare the paragraph holding the code span and the message's first "
            "paragraph, with code and tool names masked."
        ),
        bad=_json_dataset(_WORDINGS[:1]),
        good=_json_dataset(_WORDINGS),
        dataset=FewPhrasings,
        options=("min-phrasings", "dataset-min-threads"),
    ),
    Rule(
        code="MMS508",
        name="label-answers",
        severity="warning",
        scope="dataset",
        summary="The assistant's answers are a handful of short repeated values (labels).",
        rationale=(
            "When at least 90% of the threads' final answers are one of at most 12 distinct "
            "values of at most 40 characters, the answers are most likely a classification "
            "dataset's labels or a benchmark's categories, taken as the answer by a field "
            "mapping: the model would learn to reply with a category. Map the label to meta "
            "(or leave the answer out: prompt-only threads), or keep the data for a "
            "classifier. Judged over at least `dataset-min-threads` answered threads; the "
            "finding names the values and points at the first thread of the most frequent."
        ),
        bad=_labelled(("Billing Inquiries", "Technical Support")),
        good=_labelled(
            tuple(
                f"Sorry about that: I have refunded charge {n}; it shows in 3 to 5 days."
                for n in range(10)
            )
        ),
        dataset=LabelAnswers,
        options=("dataset-min-threads",),
    ),
]
