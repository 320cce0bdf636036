"""Personal data and secrets in text, found and redacted: e-mail addresses, phone numbers
(validated by libphonenumber), IP addresses (validated by `ipaddress`), credit-card
numbers (Luhn and the issuers' prefixes), and secrets: the access tokens and keys of the
common providers, detect-secrets' other shapes, whole private-key blocks, connection
strings holding a password, and the value given to a secret's name. Finding is
pii_find.py (with credentials.py and phones.py); this module redacts.

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

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from pipeline.curation.credentials import SECRET_FAMILIES, Family
from pipeline.curation.phones import LANGUAGE_REGIONS, phone_number
from pipeline.curation.pii_find import find_pii, load_detectors, may_hold_pii
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

__all__ = [
    "CREDIT_CARD",
    "EMAIL",
    "IP",
    "KINDS",
    "LANGUAGE_REGIONS",
    "PHONE",
    "SECRET",
    "SECRET_FAMILIES",
    "Family",
    "Redactor",
    "Regions",
    "Span",
    "find_pii",
    "json_strings",
    "json_value",
    "load_detectors",
    "may_hold_pii",
    "phone_number",
    "redact_json_text",
]


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
        spans = first_wins([*spans, *self._known_spans(text)])
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
