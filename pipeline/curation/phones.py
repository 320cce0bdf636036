"""Phone numbers in text (DESIGN §2, the `pii` stage): candidates screened by one
expression first (date-times, dates, versions, decimals, JSON numbers and digits glued to
words are none), then read by libphonenumber, a national number (no `+`, no `00`) in the
regions given, only in those whose national lengths it fits."""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from pipeline.curation.pii_spans import PHONE, Span

MIN_PHONE_DIGITS = 7
"""No phone number of any region has fewer digits with its country code (Niue, Saint
Helena, Tokelau: 3 + 4)."""
MIN_GUESSED_DIGITS = 9
"""A number libphonenumber finds possible but not valid is taken for a phone only with this
many digits after its trunk prefix (a UK 07700 number has 10, a French one 9; a range,
100-1000, has fewer)."""
_PHONE = re.compile(
    r"(?<![A-Za-z_.+#/\\-])(?<!\d)(?<!\d:)(?P<phone>(?:\+|00)?\(?\d[\d().\- \t\u00a0\u2009\u202f\u3000]{6,}\d)"
    r"(?![A-Za-z_/]|\d|[.,:]\d|-\w)"
)
"""A candidate phone number: seven or more digits with a phone's separators, not part of a
word, a path, a decimal or a longer run (the fast screen libphonenumber is asked after)."""
_NOT_PHONE = re.compile(
    r"^\d{4}[-/.]\d{1,2}[-/.]\d{1,2}\b"  # 2022-01-01, 2022/1/1
    r"|^\d{1,2}[-/.]\d{1,2}[-/.]\d{4}$"  # 01/02/2022
    r"|^\d+\.\d+$"  # a decimal number
    r"|^\d+(?:\.\d+)*\.\d(?:\.\d+)*$|^\d(?:\.\d+){2,}$"  # a version: a one-digit part
)
_JSON_NUMBER_BEFORE = re.compile(r"[\"']\s*:\s*\[?\s*$")

LANGUAGE_REGIONS = {
    "en": ("US", "GB", "CA", "AU", "IE", "NZ", "IN"),
    "fr": ("FR", "BE", "CH", "CA"),
    "de": ("DE", "AT", "CH"),
    "es": ("ES", "MX", "AR", "CO", "CL"),
    "it": ("IT",),
    "pt": ("BR", "PT"),
    "nl": ("NL", "BE"),
    "pl": ("PL",),
    "sv": ("SE",),
    "tr": ("TR",),
    "ru": ("RU",),
    "uk": ("UA",),
    "ja": ("JP",),
    "ko": ("KR",),
    "zh": ("CN", "TW", "HK"),
    "hi": ("IN",),
    "ar": ("SA", "EG", "AE"),
}
"""Where a phone number written in a language's thread without its country code is
likely from (national formats are read as these regions')."""


def phone_spans(text: str, regions: tuple[str, ...]) -> list[Span]:
    """The phone numbers among the candidates the fast screen lets through, as
    libphonenumber reads them in `regions` (or by their country code)."""
    spans: list[Span] = []
    for match in _PHONE.finditer(text):
        candidate = match.group("phone")
        if _not_a_phone(candidate, text[max(0, match.start() - 12) : match.start()]):
            continue
        if phone_number(candidate, regions) is not None:
            spans.append(Span(match.start(), match.end(), PHONE))
    return spans


def _not_a_phone(candidate: str, before: str) -> bool:
    """Dates, versions, decimal numbers and JSON numbers are no phone numbers."""
    digits = sum(c.isdigit() for c in candidate)
    if not MIN_PHONE_DIGITS <= digits <= 17:
        return True
    if _NOT_PHONE.match(candidate):
        return True
    bare = all(c.isdigit() or c in ".-" for c in candidate)
    return bare and _JSON_NUMBER_BEFORE.search(before) is not None


def phone_number(candidate: str, regions: tuple[str, ...]) -> str | None:
    """The E.164 form of `candidate` when it is a phone number: with its country code
    (`+`, `00`), a valid or possible one; else a valid one of the first region, or one
    written with a region's trunk prefix (`0`), valid or spaced as a phone of a possible
    length (a bare run of digits is read in a guessed region only so written)."""
    import phonenumbers  # imported here: only a run with the pii stage needs it

    if candidate.startswith(("+", "00")):
        number = _parsed("+" + candidate.lstrip("+")[2 if candidate[0] == "0" else 0 :], None)
        return _e164(number) if number and phonenumbers.is_possible_number(number) else None
    spaced = not candidate.isdigit()
    digits = sum(c.isdigit() for c in candidate)
    for index, region in enumerate(regions):
        trunk = _has_trunk_prefix(candidate, region)
        lengths = _national_lengths(region)
        fits = digits in lengths or (trunk and digits - 1 in lengths)
        number = _parsed(candidate, region) if fits and (index == 0 or trunk) else None
        if number is None:
            continue
        valid = phonenumbers.is_valid_number(number)
        long = len(str(number.national_number)) >= MIN_GUESSED_DIGITS
        if (valid and (index == 0 or trunk)) or (
            trunk and spaced and long and phonenumbers.is_possible_number(number)
        ):
            return _e164(number)
    return None


@cache
def _national_lengths(region: str) -> frozenset[int]:
    """The digit counts a national number of `region` may have (the cheap test before
    libphonenumber parses)."""
    import phonenumbers

    metadata = phonenumbers.PhoneMetadata.metadata_for_region(region)
    general = getattr(metadata, "general_desc", None)
    lengths = getattr(general, "possible_length", None) or range(4, 18)
    return frozenset(lengths)


def _parsed(text: str, region: str | None) -> Any:
    """libphonenumber's reading of `text` in `region`, None when it reads no number."""
    import phonenumbers

    try:
        return phonenumbers.parse(text, region)
    except phonenumbers.NumberParseException:
        return None


def _e164(number: Any) -> str:
    import phonenumbers

    return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)


def _has_trunk_prefix(text: str, region: str) -> bool:
    """Whether a national number is written with its region's trunk prefix."""
    import phonenumbers

    metadata = phonenumbers.PhoneMetadata.metadata_for_region(region)
    prefix = getattr(metadata, "national_prefix", None)
    return isinstance(prefix, str) and bool(prefix) and text.lstrip("(").startswith(prefix)
