"""Personal data and secrets in text: e-mail addresses, phone numbers (validated by
libphonenumber), IP addresses (validated by `ipaddress`), credit-card numbers (Luhn and the
issuers' prefixes), and secrets: the access tokens and keys of the common providers (AWS,
GCP, Azure, GitHub, GitLab, Slack, Stripe, OpenAI, Anthropic, Hugging Face, Google,
Twilio, SendGrid, JWTs), detect-secrets' other shapes, whole private-key blocks,
connection strings holding a password, and the value given to a secret's name
(`password = ...`, `"api_key": "..."`, `AWS_SECRET_ACCESS_KEY=...`).

A secret is found whole or not at all: each match is widened over the maximal run of its
family's characters, so no piece of it is left readable beside its placeholder.

`find_pii(text)` gives the spans, `Redactor` replaces them with typed placeholders that stay
the same within a thread (`<EMAIL_1>` each time the same address comes back, even where
it was not looked for), and `redact_json_text` does it inside the string values of JSON
text only, so a tool call's keys and its JSON stay intact.

    >>> redactor = Redactor()
    >>> redactor.redact("Mail ann@example.com or call +1 415 555 2671; ann@example.com again")
    'Mail <EMAIL_1> or call <PHONE_1>; <EMAIL_1> again'
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import orjson

from pipeline.curation.re2 import PYTHON_SPACE, matching

EMAIL, PHONE, IP, CREDIT_CARD, SECRET = "EMAIL", "PHONE", "IP", "CREDIT_CARD", "SECRET"
KINDS = (EMAIL, PHONE, IP, CREDIT_CARD, SECRET)
"""The kinds of personal data and secrets found, as their placeholders name them."""

_EMAIL = re.compile(
    r"(?<![\w.+-])[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,24}(?![\w-])"
)
_IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?!\w|\.\w)")
_IPV6 = re.compile(r"(?<![\w:.])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?:%\w+)?(?![\w:])")
_CARD = re.compile(r"(?<![\d-])(?:\d[ -]?){12,18}\d(?![\d-])")
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
_IPV4_HINT = re.compile(r"\d\.\d+\.\d")
_IPV6_HINT = re.compile(r"[0-9A-Fa-f]:[0-9A-Fa-f]*:")
_CARD_PREFIXES = re.compile(r"^(?:4|5[1-5]|2[2-7]|3[47]|3(?:0[0-5]|[68])|6(?:011|5|4[4-9])|35)")

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


@dataclass(frozen=True, slots=True)
class Family:
    """A kind of credential: its name, its shape, and the characters it is made of (a
    match is widened over them, so the whole credential is found)."""

    name: str
    pattern: str
    charset: str


SECRET_FAMILIES = (
    Family("pem", r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----", ""),
    Family("aws", r"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}", "A-Z0-9"),
    Family("github", r"gh[pousr]_[A-Za-z0-9]{30,}", "A-Za-z0-9_"),
    Family("github", r"github_pat_[A-Za-z0-9_]{30,}", "A-Za-z0-9_"),
    Family("gitlab", r"gl(?:pat|dt|ft|rt|cbt|ptt)-[A-Za-z0-9_\-]{20,}", r"A-Za-z0-9_\-"),
    Family("slack", r"xox[abposre]-[A-Za-z0-9\-]{10,}", r"A-Za-z0-9\-"),
    Family("slack", r"xapp-\d-[A-Za-z0-9\-]{10,}", r"A-Za-z0-9\-"),
    Family("slack", r"https://hooks\.slack\.com/services/[A-Za-z0-9_/]{10,}", "A-Za-z0-9_/"),
    Family("stripe", r"[srp]k_(?:live|test)_[A-Za-z0-9]{16,}", "A-Za-z0-9"),
    Family("anthropic", r"sk-ant-[A-Za-z0-9_\-]{32,}", r"A-Za-z0-9_\-"),
    Family("openai", r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{20,}", r"A-Za-z0-9_\-"),
    Family("openai", r"sk-[A-Za-z0-9]{32,}", r"A-Za-z0-9_\-"),
    Family("huggingface", r"hf_[A-Za-z0-9]{30,}", "A-Za-z0-9"),
    Family("google", r"AIza[0-9A-Za-z_\-]{35}", r"0-9A-Za-z_\-"),
    Family("gcp", r"GOCSPX-[A-Za-z0-9_\-]{20,}", r"A-Za-z0-9_\-"),
    Family("azure", r"(?:AccountKey|SharedAccessKey)=[A-Za-z0-9+/]{30,}", "A-Za-z0-9+/="),
    Family("twilio", r"(?:AC|SK)[a-f0-9]{32}", "a-f0-9"),
    Family("sendgrid", r"SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}", r"A-Za-z0-9_\-"),
    Family("jwt", r"eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]+", r"A-Za-z0-9_\-="),
    Family("connection", r"://[^\s:/@'\"<>]*:[^\s@/'\"<>]+@[^\s'\"<>]+", ""),
)
"""The credentials found by their shape, in the order they are tried. Each pattern starts
with its literal part (so the search skips, in C, every position none starts at); one
glued to a word before it is no credential. PEM blocks are taken to their END line, a
connection string from its scheme to the end of its URL."""
_FAMILIES = {f"f{index}": family for index, family in enumerate(SECRET_FAMILIES)}
_FAMILY_PATTERN = re.compile(
    "|".join(f"(?P<{key}>{family.pattern})" for key, family in _FAMILIES.items())
)
_SCHEME_BEFORE = re.compile(r"(?<![\w+.\-])[A-Za-z][A-Za-z0-9+.\-]{1,20}\Z")
"""A URL's scheme, just before its `://`."""
_PEM_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
_URL_TAIL = ".,;:!?)]}"
"""Punctuation a URL found in prose does not end with (the sentence's)."""

_SECRET_NAME = (
    r"(?:password|passwd|passphrase|pwd|secret|token|credentials?|api[_\-]?key|apikey"
    r"|access[_\-]?key(?:[_\-]?id)?|(?:secret|private|signing|encryption|master|auth)[_\-]?key)"
)
_ASSIGNMENT = re.compile(
    rf"{_SECRET_NAME}[\"']?[^\S\n]*(?:=>|:=|=|:)[^\S\n]*"
    r"(?:\"(?P<dq>[^\"\s]{4,})\"|'(?P<sq>[^'\s]{4,})'"
    r"|(?P<bare>[^\s\"',;{}()\[\]<>]{6,}))",
    re.IGNORECASE,
)
"""A secret's name (`aws_secret_access_key`, `password`, `api_key`, `token` ...) given a
value in code, env files, YAML or JSON: the value is the secret."""
_NOT_A_VALUE = re.compile(
    r"^(?:<[^>]*>|\$\{?.*|\{\{.*|%\(.*|\*+|x+|X+|\.+|null|none|true|false|undefined)$",
    re.IGNORECASE,
)
"""Values that hold no secret: placeholders, templates, masks and literals."""

_SECRET_MARKERS = (
    "AKIA", "ASIA", "ABIA", "ACCA", "A3T", "AccountKey=", "SharedAccessKey=", "ghp_", "gho_",
    "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "gldt-", "glft-", "glsoat-", "glrt-",
    "GR1348941", "glcbt-", "glimt-", "glptt-", "glagent-", "gloas-", "eyJ", "-us", "sk-",
    "k_live_", "k_test_", "pypi-", "SG.", "xox", "xapp-", "hooks.slack.com", "sq0csp-",
    "hf_", "AIza", "GOCSPX-", "://", "PRIVATE KEY",
)  # fmt: skip
"""Literal parts of the secrets' shapes: a text holding none of them (nor a shape below,
nor a secret's name) holds no secret, and the full expressions are not run on it."""
_SECRET_NAME_HINT = (
    r"passw|passphrase|pwd|secret|token|credential|api.?key|access.?key|private.?key|signing.?key"
)


def _name_spellings() -> tuple[str, ...]:
    """The parts of secrets' names as code writes them (lower, UPPER, Capitalised and
    camelCase): a case-sensitive search for them is some ten times faster than a
    case-insensitive one."""
    words = ["pass", "pwd", "secret", "token", "credential"]
    words += [f"{w}{s}key" for w in ("api", "access", "private", "signing", "encryption",
              "master", "auth") for s in ("", "_", "-")]  # fmt: skip
    spellings = {form for w in words for form in (w, w.upper(), w.capitalize())}
    camel = [w.split("_")[0] + "Key" for w in words if "_" in w]
    spellings |= {*camel, *(w.capitalize()[:-3] + "Key" for w in camel)}
    return tuple(sorted(spellings))


def _by_first_character(literals: tuple[str, ...]) -> re.Pattern[str]:
    """One expression matching any of `literals`, its branches grouped by their first
    character (so the search skips, in C, every position no literal starts at)."""
    groups: dict[str, list[str]] = {}
    for literal in literals:
        groups.setdefault(literal[0], []).append(re.escape(literal[1:]))
    return re.compile(
        "|".join(f"{re.escape(first)}(?:{'|'.join(rests)})" for first, rests in groups.items())
    )


_MARKERS = _by_first_character(_SECRET_MARKERS)
_FAMILY_STARTS = _by_first_character(
    (
        "-----BEGIN ", "AKIA", "ASIA", "ABIA", "ACCA", "A3T", "gh", "github_pat_", "gl", "xox",
        "xapp-",
        "https://hooks.slack.com/", "sk_", "rk_", "pk_", "sk-", "hf_", "AIza", "GOCSPX-",
        "AccountKey=", "SharedAccessKey=", "SG.", "eyJ", "://",
    )
)  # fmt: skip
"""The literal starts of SECRET_FAMILIES' patterns (Twilio's aside)."""
_NAME_HINT = _by_first_character(_name_spellings())
_TWILIO = re.compile(r"(?:AC|SK)[a-z0-9]{32}")
_TELEGRAM = re.compile(r"[0-9]{8,10}:[0-9A-Za-z_-]{35}")
_DISCORD = re.compile(r"\.[a-zA-Z0-9_-]{6}\.[a-zA-Z0-9_-]{27}")
"""The shapes without a literal part (Twilio, Telegram, Discord tokens)."""

_DETECT_SECRETS = (
    "Azure Storage Account access key", "Discord Bot Token", "Mailchimp Access Key",
    "PyPI Token", "Square OAuth Secret", "Telegram Bot Token",
)  # fmt: skip
"""detect-secrets' detectors for the shapes the families above do not cover (the ones
that need a keyword or an entropy threshold around them are left out: they flag prose)."""
_DETECT_SECRETS_CHARSET = r"A-Za-z0-9_\-"


@cache
def _detect_secrets_pattern() -> re.Pattern[str]:
    """detect-secrets' patterns of the detectors above as one expression (made on first
    use: detect-secrets takes a tenth of a second to import)."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    detectors: dict[str, Any] = get_mapping_from_secret_type_to_class()
    patterns = [
        deny.pattern
        for name in _DETECT_SECRETS
        if name in detectors
        for deny in getattr(detectors[name](), "denylist", ())
    ]
    return re.compile("|".join(f"(?:{_without_groups(p)})" for p in patterns))


def _without_groups(pattern: str) -> str:
    """A pattern with its capturing groups made non-capturing (one expression holds many)."""
    return re.sub(r"(?<!\\)\((?!\?)", "(?:", pattern)


_SIGNS = "|".join(
    [
        "@",
        "PRIVATE KEY",
        "PuTTY",
        *(re.escape(marker) for marker in _SECRET_MARKERS),
        f"(?i:{_SECRET_NAME_HINT})",
        # phone and card numbers, _IPV4_HINT, _IPV6_HINT with Unicode digits
        rf"\p{{Nd}}[\p{{Nd}}{PYTHON_SPACE}().\-]{{6,}}\p{{Nd}}",
        r"\p{Nd}\.\p{Nd}+\.\p{Nd}",
        _IPV6_HINT.pattern,
        _TWILIO.pattern,
        _TELEGRAM.pattern,
        _DISCORD.pattern,
    ]
)
"""What every find the detectors make holds (the signs each is run only after), as one
RE2 expression: a text holding none of them holds nothing to find."""


def may_hold_pii(texts: list[str]) -> list[bool]:
    """For each text, whether `find_pii` may find something in it: False means it finds
    nothing. Arrow's RE2 scans all texts at once, some fifty times faster than one
    Python search per text."""
    return matching(texts, _SIGNS)


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


def load_detectors(region: Regions = "US") -> None:
    """Import the detectors and load their patterns and `region`'s phone metadata now
    (otherwise done for the first text that needs them)."""
    _detect_secrets_pattern()
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
        spans += _secret_spans(text, digits)
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
        spans += _phone_spans(text, regions)
    return _first_wins(spans)


def _secret_spans(text: str, digits: int) -> list[Span]:
    """The secrets in `text`, each whole: overlapping finds merged into one span."""
    spans: list[Span] = []
    if "PuTTY" in text:
        spans += _putty_spans(text)
    if _MARKERS.search(text) or (("AC" in text or "SK" in text) and _TWILIO.search(text)):
        spans += _family_spans(text)
    if _NAME_HINT.search(text):
        spans += _assignment_spans(text)
    if _may_hold_other_secret(text, digits):
        spans += [
            _widened(text, match.start(), match.end(), _DETECT_SECRETS_CHARSET, "other")
            for match in _detect_secrets_pattern().finditer(text)
        ]
    return _merged(spans)


def _family_spans(text: str) -> list[Span]:
    """The credentials of SECRET_FAMILIES, each widened over its family's characters: the
    families' expression is tried only where one's literal start is."""
    spans: list[Span] = []
    end = 0
    for start in _starts(text):
        match = _FAMILY_PATTERN.match(text, start) if start >= end else None
        if match is None:
            continue
        span = _family_span(text, match)
        if span is not None:
            spans.append(span)
            end = span.end
    return spans


def _starts(text: str) -> list[int]:
    """Where a family's literal start is in `text`, and where a Twilio id is."""
    starts = [hit.start() for hit in _FAMILY_STARTS.finditer(text)]
    if "AC" in text or "SK" in text:
        starts = sorted([*starts, *(hit.start() for hit in _TWILIO.finditer(text))])
    return starts


def _family_span(text: str, match: re.Match[str]) -> Span | None:
    """The span of a family's match: a PEM block to its END line, a connection string from
    its scheme, a token widened; None for one glued to the word before it."""
    family = _FAMILIES[match.lastgroup or ""]
    start = match.start()
    if family.name == "pem":
        last = _PEM_END.search(text, match.end())
        return Span(start, last.end() if last else len(text), SECRET, "pem")
    if family.name == "connection":
        before = text[max(0, start - 22) : start]
        scheme = _SCHEME_BEFORE.search(before)
        if scheme is None:
            return None
        end = start + len(match.group().rstrip(_URL_TAIL))
        return Span(start - len(before) + scheme.start(), end, SECRET, "connection")
    if start and text[start - 1].isascii() and text[start - 1].isalnum():
        return None
    return _widened(text, start, match.end(), family.charset, family.name)


def _putty_spans(text: str) -> list[Span]:
    """PuTTY private-key files, from their header to their last line."""
    spans: list[Span] = []
    for match in re.finditer(
        r"PuTTY-User-Key-File-\d+:.*?(?:Private-MAC: *\S+|\Z)", text, re.DOTALL
    ):
        spans.append(Span(match.start(), match.end(), SECRET, "pem"))
    return spans


def _assignment_spans(text: str) -> list[Span]:
    """The values given to a secret's name (quoted whole, or a bare word holding a digit
    or mixed case: `password = args.password` and prose are no secret)."""
    spans: list[Span] = []
    for match in _ASSIGNMENT.finditer(text):
        group = next(name for name in ("dq", "sq", "bare") if match.group(name) is not None)
        value = match.group(group)
        if _NOT_A_VALUE.match(value) or (group == "bare" and not _bare_secret(text, match)):
            continue
        spans.append(Span(match.start(group), match.end(group), SECRET, "assignment"))
    return spans


def _bare_secret(text: str, match: re.Match[str]) -> bool:
    """Whether an unquoted value is a secret: not code (a name called or indexed,
    `response.json()`), and more than a word."""
    value, end = match.group("bare"), match.end("bare")
    if text[end : end + 1] in ("(", "[") and _IDENTIFIER.fullmatch(value):
        return False
    return _looks_secret(value)


_IDENTIFIER = re.compile(r"[A-Za-z_][\w.]*")


def _looks_secret(value: str) -> bool:
    """A bare value that is more than a word or an identifier: digits and letters, or
    mixed case, or symbols."""
    letters = any(c.isalpha() for c in value)
    if any(c.isdigit() for c in value):
        return letters or len(value) >= 8
    mixed = any(c.isupper() for c in value) and any(c.islower() for c in value)
    symbols = any(not c.isalnum() and c not in "_.-" for c in value)
    return symbols or (mixed and "." not in value and len(value) >= 12)


def _widened(text: str, start: int, end: int, charset: str, family: str) -> Span:
    """[start, end) widened over the characters of `charset` after it (a credential's
    whole length, however long its family's pattern thinks it is)."""
    if charset:
        tail = re.compile(f"[{charset}]*").match(text, end)
        end = tail.end() if tail else end
    return Span(start, end, SECRET, family)


def _merged(spans: list[Span]) -> list[Span]:
    """Overlapping secret spans made one (their union), the first's family kept."""
    merged: list[Span] = []
    for span in sorted(spans):
        if merged and span.start < merged[-1].end:
            last = merged[-1]
            merged[-1] = Span(last.start, max(last.end, span.end), SECRET, last.family)
        else:
            merged.append(span)
    return merged


def _may_hold_other_secret(text: str, digits: int) -> bool:
    """Whether one of detect-secrets' other shapes may be in the text."""
    if "-us" in text or "pypi-" in text or "sq0csp-" in text or "AccountKey" in text:
        return True
    if "." in text and _DISCORD.search(text):
        return True
    return digits >= 8 and ":" in text and _TELEGRAM.search(text) is not None


def _phone_spans(text: str, regions: tuple[str, ...]) -> list[Span]:
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


def _spans(pattern: re.Pattern[str], text: str, kind: str) -> list[Span]:
    return [Span(match.start(), match.end(), kind) for match in pattern.finditer(text)]


def _first_wins(spans: list[Span]) -> list[Span]:
    """The spans in text order, a span overlapping an earlier kept one left out (the order
    found: secrets and cards before what they may contain)."""
    kept: list[Span] = []
    for span in spans:
        if all(span.end <= other.start or span.start >= other.end for other in kept):
            kept.append(span)
    return sorted(kept)


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


@dataclass
class Redactor:
    """Replaces what `find_pii` finds with `<KIND_N>` placeholders, the same value always
    with the same placeholder (one Redactor per thread); counts what it replaced. Once a
    value is redacted, every later text it redacts has that value replaced too, found
    there or not (`remember` registers values ahead: a thread redacted alike throughout)."""

    region: Regions = "US"
    kinds: tuple[str, ...] = KINDS
    """The kinds redacted (the others are left as they are)."""
    placeholders: dict[tuple[str, str], str] = field(default_factory=dict)
    counts: Counter[str] = field(default_factory=Counter)
    families: Counter[str] = field(default_factory=Counter)
    """The secrets redacted by family (`github`, `jwt`, `assignment` ...)."""
    _values: dict[str, tuple[str, str]] = field(default_factory=dict)
    _family_of: dict[str, str] = field(default_factory=dict)
    _known: re.Pattern[str] | None = None

    def find(self, text: str) -> list[Span]:
        """The spans of the kinds redacted in `text`."""
        return find_pii(text, self.region, self.kinds)

    def remember(self, text: str, span: Span) -> None:
        """Registers a found value so every text redacted after replaces it."""
        self.placeholder(span.kind, text[span.start : span.end], span.family, count=False)

    def redact(self, text: str, find: bool = True) -> str:
        """`text` with the values found in it (when `find`) and the values already
        redacted in the thread replaced by their placeholders."""
        spans = self.find(text) if find else []
        spans = _first_wins([*spans, *self._known_spans(text)])
        if not spans:
            return text
        parts: list[str] = []
        position = 0
        for span in spans:
            parts.append(text[position : span.start])
            parts.append(self.placeholder(span.kind, text[span.start : span.end], span.family))
            position = span.end
        parts.append(text[position:])
        return "".join(parts)

    def placeholder(self, kind: str, value: str, family: str = "", count: bool = True) -> str:
        """The placeholder of `value` (a new one for a value not seen yet)."""
        key = self._values.get(value, (kind, value))
        if family:
            self._family_of.setdefault(value, family)
        family = self._family_of.get(value, "")
        found = self.placeholders.get(key)
        if found is None:
            number = sum(1 for other, _ in self.placeholders if other == kind) + 1
            found = self.placeholders[key] = f"<{kind}_{number}>"
            self._values[value] = key
            self._known = None
        if count:
            self.counts[key[0]] += 1
            if family:
                self.families[family] += 1
        return found

    def known(self, value: str) -> bool:
        """Whether `value` is redacted in this thread."""
        return value in self._values

    def holds_known(self, text: str) -> bool:
        """Whether a value redacted in this thread is in `text`, as written or escaped in
        a JSON string (texts without one are left as they are, unparsed)."""
        return any(
            value in text or orjson.dumps(value).decode()[1:-1] in text for value in self._values
        )

    def _known_spans(self, text: str) -> list[Span]:
        """Where the values already redacted come back in `text`."""
        if not self._values:
            return []
        if self._known is None:
            values = sorted(self._values, key=len, reverse=True)
            self._known = re.compile("|".join(map(re.escape, values)))
        return [
            Span(m.start(), m.end(), self._values[m.group()][0]) for m in self._known.finditer(text)
        ]


def redact_json_text(text: str, redactor: Redactor, find: bool = True) -> str | None:
    """JSON text with what `redactor` finds replaced inside its string values (never its
    keys), written back compact with sorted keys as tool calls are; None when the text is
    not JSON (the caller redacts it as text)."""
    value = json_value(text)
    if value is None:
        return None
    before = sum(redactor.counts.values())
    redacted = _map_strings(value, lambda piece: redactor.redact(piece, find))
    if sum(redactor.counts.values()) == before:
        return text
    return orjson.dumps(redacted, option=orjson.OPT_SORT_KEYS).decode()


def json_value(text: str) -> Any:
    """The JSON object or array `text` holds, None when it holds none."""
    if text.lstrip()[:1] not in ("{", "["):
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


def json_strings(value: Any) -> list[str]:
    """The string values of a JSON value (not its keys, not its numbers)."""
    if isinstance(value, str):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return [string for item in items for string in json_strings(item)]


def _map_strings(value: Any, change: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return change(value)
    if isinstance(value, list):
        return [_map_strings(item, change) for item in value]
    if isinstance(value, dict):
        return {key: _map_strings(item, change) for key, item in value.items()}
    return value
