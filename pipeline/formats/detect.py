"""Auto-detection: score every format on a file's first records and pick the best; a file
no single format covers falls back to choosing per record."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from pipeline.formats.base import InputFormat, Sniff
from pipeline.formats.registry import FORMATS


def sniff_all(value: object) -> dict[str, Sniff]:
    """Every format's verdict on one parsed record. A sniff that raises (a bug: sniffs
    are total, and tests/test_format_contract.py holds them to it) declines the record
    instead of stopping the file's detection. (A loop, not a call per format: detection
    runs every sniff on every record it looks at.)"""
    verdicts: dict[str, Sniff] = {}
    for name, fmt in FORMATS.items():
        sniff = fmt.sniff
        try:
            verdicts[name] = sniff(value)
        except Exception as err:  # a bug must not cost the file
            verdicts[name] = Sniff(0.0, f"{name} sniff raised {type(err).__name__}: {err}")
    return verdicts


def best_for_record(value: object) -> InputFormat | None:
    """The format that scores a single record highest (registry order breaks ties; a
    fallback format only when no other accepts it)."""
    verdicts = sniff_all(value)
    name = max(verdicts, key=lambda n: (not FORMATS[n].fallback, verdicts[n].score))
    if verdicts[name].score <= 0:
        name = max(verdicts, key=lambda n: verdicts[n].score)
    return FORMATS[name] if verdicts[name].score > 0 else None


@dataclass(slots=True)
class FormatScore:
    """One format's verdict over the sniffed records."""

    name: str
    total: float = 0.0
    accepted: int = 0
    given: list[str] = field(default_factory=list)
    """The reason given for each record (counted only when shown: detection is hot)."""

    @property
    def reasons(self) -> Counter[str]:
        return Counter(self.given)

    @property
    def reason(self) -> str:
        """The most common reason this format gave."""
        return self.reasons.most_common(1)[0][0] if self.given else ""


UNANIMOUS = 8
"""Records after which detection stops when they agree: one specific format accepted
every one and no other specific format any (a file's first records are sniffed by every
format: on a uniform file, eight tell as much as thirty-two, at a quarter of the cost)."""
UNKNOWN = "unknown"
"""The label of a file no format recognises."""


@dataclass(slots=True)
class Detection:
    """What detection decided for a file: one format, per-record choice, or nothing."""

    records: int
    scores: list[FormatScore]
    format: InputFormat | None
    per_record: bool

    @property
    def label(self) -> str:
        if self.format is not None:
            return self.format.name
        return "per-record" if self.per_record else UNKNOWN


def _unanimous(scores: dict[str, FormatScore], records: int) -> bool:
    """Whether exactly one specific (not fallback) format accepted records, all of them."""
    accepting = [s for s in scores.values() if s.accepted and not FORMATS[s.name].fallback]
    return len(accepting) == 1 and accepting[0].accepted == records


def detect(values: Iterable[object]) -> Detection:
    """Score every format over `values` (a file's first parsed records; the first
    UNANIMOUS when they agree) and pick the one that accepts the most records, then
    scores highest (a fallback format only when no other accepts any). If objects it
    rejects are accepted by another format, the file is mixed and each record is detected
    on its own; otherwise the rest go to the chosen format, which quarantines them with a
    specific reason (a stray string in a file of objects is not read as a prompt)."""
    scores = {name: FormatScore(name) for name in FORMATS}
    verdicts: list[dict[str, Sniff]] = []
    objects: list[bool] = []
    for value in values:
        record_verdicts = sniff_all(value)
        verdicts.append(record_verdicts)
        objects.append(isinstance(value, dict))
        for name, verdict in record_verdicts.items():
            score = scores[name]
            score.total += verdict.score
            score.accepted += verdict.score > 0
            score.given.append(verdict.reason)
        if len(verdicts) >= UNANIMOUS and _unanimous(scores, len(verdicts)):
            break
    ranked = sorted(
        scores.values(),
        key=lambda s: (s.accepted == 0, FORMATS[s.name].fallback, -s.accepted, -s.total),
    )
    if not ranked or ranked[0].accepted == 0:
        return Detection(len(verdicts), ranked, None, per_record=False)
    best = ranked[0].name

    # a record the chosen format rejects makes the file mixed when another format accepts
    # it; a fallback format counts only when the chosen one is a fallback too (a file of a
    # specific format keeps that format's reasons for the records it rejects)
    def counts(name: str) -> bool:
        return FORMATS[best].fallback or not FORMATS[name].fallback

    mixed = any(
        is_object
        and record[best].score == 0
        and any(v.score > 0 for name, v in record.items() if counts(name))
        for record, is_object in zip(verdicts, objects, strict=True)
    )
    if mixed:
        return Detection(len(verdicts), ranked, None, per_record=True)
    return Detection(len(verdicts), ranked, FORMATS[best], per_record=False)
