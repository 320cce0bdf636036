"""Personal data and secrets in text: e-mail addresses, phone numbers (validated by
libphonenumber), IP addresses (validated by `ipaddress`), credit-card numbers (Luhn and the
issuers' prefixes), and secrets: the access tokens and keys of the common providers, from
detect-secrets' own patterns (AWS, GitHub, GitLab, Slack, Stripe, SendGrid, OpenAI, JWTs,
private keys ...) plus the ones it lacks (Anthropic, Hugging Face, Google, OpenAI project
keys), and whole private-key blocks.

`find_pii(text)` gives the spans, `Redactor` replaces them with typed placeholders that stay
the same within a thread (`<EMAIL_1>` each time the same address comes back), and
`redact_json_text` does it inside the string values of JSON text only, so a tool call's
keys and its JSON stay intact.

    >>> redactor = Redactor()
    >>> redactor.redact("Mail ann@example.com or call +1 415 555 2671; ann@example.com again")
    'Mail <EMAIL_1> or call <PHONE_1>; <EMAIL_1> again'
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
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
_IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w.]|\.\d)")
_IPV6 = re.compile(r"(?<![\w:.])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?:%\w+)?(?![\w:])")
_CARD = re.compile(r"(?<![\d-])(?:\d[ -]?){12,18}\d(?![\d-])")
_PHONE_HINT = re.compile(r"\d[\d\s().\-]{6,}\d")
MIN_PHONE_DIGITS = 7
"""No phone number of any region has fewer digits with its country code (Niue, Saint
Helena, Tokelau: 3 + 4)."""
PHONE_CONTEXT = 24
"""Characters either side of a run of digits the phone matcher sees (a `+`, `tel:`, the
letters that make a run part of a word)."""
_IPV4_HINT = re.compile(r"\d\.\d+\.\d")
_IPV6_HINT = re.compile(r"[0-9A-Fa-f]:[0-9A-Fa-f]*:")
"""Seven or more digits with phone-like separators: only then is libphonenumber asked."""
_CARD_PREFIXES = re.compile(r"^(?:4|5[1-5]|2[2-7]|3[47]|3(?:0[0-5]|[68])|6(?:011|5|4[4-9])|35)")
_PRIVATE_KEY_BLOCK = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
    re.DOTALL,
)
_OWN_SECRET_PATTERNS = (
    r"sk-ant-[A-Za-z0-9_\-]{32,}",  # Anthropic
    r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{20,}",  # OpenAI project / service keys
    r"(?<![\w-])sk-[A-Za-z0-9]{40,}(?![\w-])",  # OpenAI legacy keys
    r"(?<![\w-])hf_[A-Za-z0-9]{30,}(?![\w-])",  # Hugging Face
    r"AIza[0-9A-Za-z_\-]{35}",  # Google API
)
_SECRET_DETECTORS = (
    "AWS Access Key", "Azure Storage Account access key", "Discord Bot Token",
    "GitHub Token", "GitLab Token", "JSON Web Token", "Mailchimp Access Key",
    "OpenAI Token", "PyPI Token", "SendGrid API Key", "Slack Token", "Square OAuth Secret",
    "Stripe Access Key", "Telegram Bot Token", "Twilio API Key",
)  # fmt: skip
"""detect-secrets' detectors whose patterns name a secret by its shape (the ones that
need a keyword or an entropy threshold around them are left out: they flag prose)."""


@cache
def _secret_patterns() -> re.Pattern[str]:
    """detect-secrets' patterns of the detectors above, and ours, as one expression (made
    on first use: detect-secrets takes a tenth of a second to import)."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    detectors: dict[str, Any] = get_mapping_from_secret_type_to_class()
    patterns = [
        deny.pattern
        for name in _SECRET_DETECTORS
        if name in detectors
        for deny in getattr(detectors[name](), "denylist", ())
    ]
    both = [*patterns, *_OWN_SECRET_PATTERNS]
    return re.compile("|".join(f"(?:{_without_groups(p)})" for p in both))


def _without_groups(pattern: str) -> str:
    """A pattern with its capturing groups made non-capturing (one expression holds many)."""
    return re.sub(r"(?<!\\)\((?!\?)", "(?:", pattern)


_SECRET_MARKERS = (
    "AKIA", "ASIA", "ABIA", "ACCA", "A3T", "AccountKey=", "ghp_", "gho_", "ghu_", "ghs_",
    "ghr_", "glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "GR1348941", "glcbt-", "glimt-",
    "glptt-", "glagent-", "gloas-", "eyJ", "-us", "sk-", "k_live_", "pypi-", "SG.", "xox",
    "hooks.slack.com", "sq0csp-", "hf_", "AIza",
)  # fmt: skip
"""Literal parts of the secrets' shapes: a text holding none of them (nor a shape below)
holds no secret, and the full expression is not run on it."""


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
_TWILIO = re.compile(r"(?:AC|SK)[a-z0-9]{32}")
_TELEGRAM = re.compile(r"[0-9]{8,10}:[0-9A-Za-z_-]{35}")
_DISCORD = re.compile(r"\.[a-zA-Z0-9_-]{6}\.[a-zA-Z0-9_-]{27}")
"""The shapes without a literal part (Twilio, Telegram, Discord tokens)."""


_SIGNS = "|".join(
    [
        "@",
        "PRIVATE KEY",
        "PuTTY",
        *(re.escape(marker) for marker in _SECRET_MARKERS),
        # _PHONE_HINT (and card numbers), _IPV4_HINT, _IPV6_HINT with Unicode digits
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
    """Found text: [start, end) of the text, and its kind."""

    start: int
    end: int
    kind: str


def load_detectors(region: str = "US") -> None:
    """Import the detectors and load their patterns and `region`'s phone metadata now
    (otherwise done for the first text that needs them)."""
    _secret_patterns()
    find_pii("+1 415 555 2671", region)


def find_pii(text: str, region: str = "US") -> list[Span]:
    """The personal data and secrets in `text`, in order, none overlapping (a secret or a
    card wins over what it holds). `region` is where a phone number without its country
    code is taken to be from. Each detector runs only when a cheap sign of what it finds
    is in the text (an `@`, a provider's prefix, enough digits): most text has none."""
    spans: list[Span] = []
    if "PRIVATE KEY" in text or "PuTTY" in text:
        spans += _spans(_PRIVATE_KEY_BLOCK, text, SECRET)
    digits = sum(map(text.count, "0123456789"))
    if _may_hold_secret(text, digits):
        spans += _spans(_secret_patterns(), text, SECRET)
    if digits >= 13:
        spans += [s for s in _spans(_CARD, text, CREDIT_CARD) if _is_card(text[s.start : s.end])]
    if "@" in text:
        spans += _spans(_EMAIL, text, EMAIL)
    if digits >= 4 and _IPV4_HINT.search(text):
        spans += [s for s in _spans(_IPV4, text, IP) if _is_ip(text[s.start : s.end], True)]
    if ":" in text and _IPV6_HINT.search(text):
        spans += [s for s in _spans(_IPV6, text, IP) if _is_ip(text[s.start : s.end], False)]
    if digits >= MIN_PHONE_DIGITS:
        spans += _phone_spans(text, region)
    return _first_wins(spans)


def _phone_spans(text: str, region: str) -> list[Span]:
    """The phone numbers libphonenumber finds in the stretches of `text` around runs of
    MIN_PHONE_DIGITS digits or more (its matcher is slow: it is not run on the rest)."""
    import phonenumbers  # imported here: only a run with the pii stage needs it

    spans: list[Span] = []
    for start, end in _phone_windows(text):
        for found in phonenumbers.PhoneNumberMatcher(text[start:end], region):
            spans.append(Span(start + found.start, start + found.end, PHONE))
    return spans


def _phone_windows(text: str) -> list[tuple[int, int]]:
    """[start, end) of each run of digits and a phone number's separators holding enough
    digits, PHONE_CONTEXT characters either side; overlapping ones merged."""
    windows: list[tuple[int, int]] = []
    for match in _PHONE_HINT.finditer(text):
        if sum(map(match.group().count, "0123456789")) < MIN_PHONE_DIGITS:
            continue
        start = max(0, match.start() - PHONE_CONTEXT)
        end = min(len(text), match.end() + PHONE_CONTEXT)
        if windows and start <= windows[-1][1]:
            windows[-1] = (windows[-1][0], end)
        else:
            windows.append((start, end))
    return windows


def _may_hold_secret(text: str, digits: int) -> bool:
    """Whether a secret's literal part or one of the shapes without one is in the text."""
    if _MARKERS.search(text) or ("." in text and _DISCORD.search(text)):
        return True
    if ("AC" in text or "SK" in text) and _TWILIO.search(text):
        return True
    return digits >= 8 and ":" in text and _TELEGRAM.search(text) is not None


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
    with the same placeholder (one Redactor per thread); counts what it replaced."""

    region: str = "US"
    kinds: tuple[str, ...] = KINDS
    """The kinds redacted (the others are left as they are)."""
    placeholders: dict[tuple[str, str], str] = field(default_factory=dict)
    counts: Counter[str] = field(default_factory=Counter)

    def redact(self, text: str) -> str:
        spans = [span for span in find_pii(text, self.region) if span.kind in self.kinds]
        if not spans:
            return text
        parts: list[str] = []
        position = 0
        for span in spans:
            parts.append(text[position : span.start])
            parts.append(self.placeholder(span.kind, text[span.start : span.end]))
            position = span.end
        parts.append(text[position:])
        return "".join(parts)

    def placeholder(self, kind: str, value: str) -> str:
        key = (kind, value)
        found = self.placeholders.get(key)
        if found is None:
            number = sum(1 for other, _ in self.placeholders if other == kind) + 1
            found = self.placeholders[key] = f"<{kind}_{number}>"
        self.counts[kind] += 1
        return found


def redact_json_text(text: str, redactor: Redactor) -> str | None:
    """JSON text with what `redactor` finds replaced inside its string values (never its
    keys), written back compact with sorted keys as tool calls are; None when the text is
    not JSON (the caller redacts it as text)."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    before = sum(redactor.counts.values())
    redacted = _redact_values(value, redactor)
    if sum(redactor.counts.values()) == before:
        return text
    return orjson.dumps(redacted, option=orjson.OPT_SORT_KEYS).decode()


def _redact_values(value: Any, redactor: Redactor) -> Any:
    if isinstance(value, str):
        return redactor.redact(value)
    if isinstance(value, list):
        return [_redact_values(item, redactor) for item in value]
    if isinstance(value, dict):
        return {key: _redact_values(item, redactor) for key, item in value.items()}
    return value
