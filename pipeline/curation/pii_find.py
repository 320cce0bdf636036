"""Finding personal data and secrets in text: e-mail addresses, phone numbers (validated by
libphonenumber, pipeline/curation/phones.py), IP addresses (validated by `ipaddress`),
credit-card numbers (Luhn and the issuers' prefixes) and secrets (pipeline/curation/
credentials.py). Only the kinds asked for are looked for, each detector after a cheap sign
of what it finds, and one RE2 scan over many texts spares those holding no sign."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable

from pipeline.curation.credentials import (
    SECRET_NAMED_SIGNS,
    SECRET_SHAPE_SIGNS,
    load_secret_patterns,
    secret_spans,
)
from pipeline.curation.phones import MIN_PHONE_DIGITS, phone_spans
from pipeline.curation.pii_spans import (
    CREDIT_CARD,
    EMAIL,
    IP,
    KINDS,
    PHONE,
    SECRET,
    Regions,
    Span,
    first_wins,
)
from pipeline.curation.re2 import PYTHON_SPACE, matching

_EMAIL = re.compile(
    r"(?<![\w.+-])[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,24}(?![\w-])"
)
_IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?!\w|\.\w)")
_IPV6 = re.compile(r"(?<![\w:.])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?:%\w+)?(?![\w:])")
_CARD = re.compile(r"(?<![\d-])(?:\d[ -]?){12,18}\d(?![\d-])")

_IPV4_HINT = re.compile(r"\d\.\d+\.\d")
_IPV6_HINT = re.compile(r"[0-9A-Fa-f]:[0-9A-Fa-f]*:")
_CARD_PREFIXES = re.compile(r"^(?:4|5[1-5]|2[2-7]|3[47]|3(?:0[0-5]|[68])|6(?:011|5|4[4-9])|35)")


_SIGNS = "|".join(
    [
        "@",
        *SECRET_NAMED_SIGNS,
        # phone and card numbers, _IPV4_HINT, _IPV6_HINT with Unicode digits
        rf"\p{{Nd}}[\p{{Nd}}{PYTHON_SPACE}().\-]{{6,}}\p{{Nd}}",
        r"\p{Nd}\.\p{Nd}+\.\p{Nd}",
        _IPV6_HINT.pattern,
        *SECRET_SHAPE_SIGNS,
    ]
)
"""What every find the detectors make holds (the signs each is run only after), as one
RE2 expression: a text holding none of them holds nothing to find."""


def may_hold_pii(texts: list[str]) -> list[bool]:
    """For each text, whether `find_pii` may find something in it: False means it finds
    nothing. Arrow's RE2 scans all texts at once, some fifty times faster than one
    Python search per text."""
    return matching(texts, _SIGNS)


def load_detectors(region: Regions = "US") -> None:
    """Import the detectors and load their patterns and `region`'s phone metadata now
    (otherwise done for the first text that needs them)."""
    load_secret_patterns()
    find_pii("+1 415 555 2671", region)


def find_pii(text: str, region: Regions = "US", kinds: Iterable[str] = KINDS) -> list[Span]:
    """The personal data and secrets of `kinds` in `text`, in order, none overlapping (a
    secret or a card wins over what it holds). Only the kinds asked for are looked for,
    and each detector runs only when a cheap sign of what it finds is in the text (an
    `@`, a provider's prefix, enough digits): most text has none."""
    wanted = set(kinds)
    spans: list[Span] = []
    digits = sum(map(text.count, "0123456789")) if wanted - {EMAIL} else 0
    if SECRET in wanted:
        spans += secret_spans(text, digits)
    if CREDIT_CARD in wanted and digits >= 13:
        spans += [s for s in _spans(_CARD, text, CREDIT_CARD) if _is_card(text[s.start : s.end])]
    if EMAIL in wanted and "@" in text:
        spans += _spans(_EMAIL, text, EMAIL)
    if IP in wanted and digits >= 4 and _IPV4_HINT.search(text):
        spans += [s for s in _spans(_IPV4, text, IP) if _is_ip(text[s.start : s.end], True)]
    if IP in wanted and ":" in text and _IPV6_HINT.search(text):
        spans += [s for s in _spans(_IPV6, text, IP) if _is_ip(text[s.start : s.end], False)]
    if PHONE in wanted and digits >= MIN_PHONE_DIGITS:
        regions = (region,) if isinstance(region, str) else region
        spans += phone_spans(text, regions)
    return first_wins(spans)


def _spans(pattern: re.Pattern[str], text: str, kind: str) -> list[Span]:
    return [Span(match.start(), match.end(), kind) for match in pattern.finditer(text)]


def _is_card(candidate: str) -> bool:
    digits = re.sub(r"\D", "", candidate)
    if not 13 <= len(digits) <= 19 or not _CARD_PREFIXES.match(digits):
        return False
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def _is_ip(candidate: str, public_only: bool) -> bool:
    """An address `ipaddress` accepts; an IPv4 one only when public (a private or reserved
    address, 127.0.0.1 or 10.x, is no one's data, and 1.2.3.4-looking versions are rare)."""
    try:
        address = ipaddress.ip_address(candidate.split("%")[0])
    except ValueError:
        return False
    if public_only:
        return address.is_global
    return not (address.is_loopback or address.is_unspecified)
