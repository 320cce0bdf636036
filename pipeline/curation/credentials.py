"""Secrets in text, each found whole: the access tokens and keys of the common providers
(AWS, GCP, Azure, GitHub, GitLab, Slack, Stripe, OpenAI, Anthropic, Hugging Face, Google,
Twilio, SendGrid, JWTs), detect-secrets' other shapes, whole private-key blocks,
connection strings holding a password, and the value given to a secret's name
(`password = ...`, `"api_key": "..."`, `AWS_SECRET_ACCESS_KEY=...`). Each match is widened
over the maximal run of its family's characters and overlapping finds are merged, so no
piece of a secret is left readable beside its placeholder (DESIGN §2, the `pii` stage)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from pipeline.curation.pii_spans import SECRET, Span


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


SECRET_NAMED_SIGNS = (
    "PRIVATE KEY",
    "PuTTY",
    *(re.escape(marker) for marker in _SECRET_MARKERS),
    f"(?i:{_SECRET_NAME_HINT})",
)
"""What a secret with a literal part or a name holds, as RE2 expressions."""
SECRET_SHAPE_SIGNS = (_TWILIO.pattern, _TELEGRAM.pattern, _DISCORD.pattern)
"""The shapes of the secrets without a literal part, as RE2 expressions. A text holding
none of these signs nor the named ones holds no secret."""


def load_secret_patterns() -> None:
    """Import detect-secrets and build its patterns now (otherwise done on first use)."""
    _detect_secrets_pattern()


def secret_spans(text: str, digits: int) -> list[Span]:
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
