"""Auto-detection: score every format on a file's first records and pick the best; a file
no single format covers falls back to choosing per record."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from pipeline.formats.base import InputFormat, Sniff
from pipeline.formats.registry import FORMATS


def sniff_all(value: object) -> dict[str, Sniff]:
    """Every format's verdict on one parsed record."""
    return {name: _sniff(fmt, value) for name, fmt in FORMATS.items()}


def _sniff(fmt: InputFormat, value: object) -> Sniff:
    """The format's verdict; a sniff that raises (a bug: sniffs are total, and
    tests/test_format_contract.py holds them to it) declines the record instead of
    stopping the file's detection."""
    try:
        return fmt.sniff(value)
    except Exception as err:  # a bug must not cost the file
        return Sniff(0.0, f"{fmt.name} sniff raised {type(err).__name__}: {err}")


def best_for_record(value: object) -> InputFormat | None:
    """The format that scores a single record highest (registry order breaks ties)."""
    verdicts = sniff_all(value)
    name = max(verdicts, key=lambda n: verdicts[n].score)
    return FORMATS[name] if verdicts[name].score > 0 else None


@dataclass(slots=True)
class FormatScore:
    """One format's verdict over the sniffed records."""

    name: str
    total: float = 0.0
    accepted: int = 0
    reasons: Counter[str] = field(default_factory=Counter)

    @property
    def reason(self) -> str:
        """The most common reason this format gave."""
        return self.reasons.most_common(1)[0][0] if self.reasons else ""


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
        return "per-record" if self.per_record else "-"


def detect(values: Iterable[object]) -> Detection:
    """Score every format over `values` (a file's first parsed records) and pick the one
    that accepts the most records, then scores highest. If objects it rejects are
    accepted by another format, the file is mixed and each record is detected on its
    own; otherwise the rest go to the chosen format, which quarantines them with a
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
            score.reasons[verdict.reason] += 1
    ranked = sorted(scores.values(), key=lambda s: (-s.accepted, -s.total))
    if not ranked or ranked[0].accepted == 0:
        return Detection(len(verdicts), ranked, None, per_record=False)
    best = ranked[0].name
    mixed = any(
        is_object and record[best].score == 0 and any(v.score > 0 for v in record.values())
        for record, is_object in zip(verdicts, objects, strict=True)
    )
    if mixed:
        return Detection(len(verdicts), ranked, None, per_record=True)
    return Detection(len(verdicts), ranked, FORMATS[best], per_record=False)
