"""What the personal-data and secret detectors find (pipeline/curation/pii_find.py): the
kinds, as their placeholders name them, a found span, and which of overlapping spans is
kept. Shared by every detector and by the redaction, beneath all of them."""

from __future__ import annotations

from dataclasses import dataclass

EMAIL, PHONE, IP, CREDIT_CARD, SECRET = "EMAIL", "PHONE", "IP", "CREDIT_CARD", "SECRET"
KINDS = (EMAIL, PHONE, IP, CREDIT_CARD, SECRET)
"""The kinds of personal data and secrets found, as their placeholders name them."""


@dataclass(frozen=True, slots=True, order=True)
class Span:
    """Found text: [start, end) of the text, its kind, and for a secret its family."""

    start: int
    end: int
    kind: str
    family: str = ""


Regions = str | tuple[str, ...]
"""Where a phone number without its country code is taken to be from: one region or
several, tried in order."""


def first_wins(spans: list[Span]) -> list[Span]:
    """The spans in text order, a span overlapping an earlier kept one left out (the order
    found: secrets and cards before what they may contain)."""
    kept: list[Span] = []
    for span in spans:
        if all(span.end <= other.start or span.start >= other.end for other in kept):
            kept.append(span)
    return sorted(kept)
