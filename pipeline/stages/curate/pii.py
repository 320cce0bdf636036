"""The `pii` stage: personal data and secrets (pipeline/curation/pii.py), per role. In
platform, developer, user and context text they are redacted by default, with typed
placeholders that stay the same within the thread (`<EMAIL_1>` for one address
throughout); in assistant text they are tagged by default, or redacted, or the thread is
dropped (`pii`), as the curator chooses. A value redacted in one message is redacted in
every message of the thread, whatever its role's action: no thread redacts a context and
trains on its contents. JSON content (a tool call's arguments, a tool's JSON result) is
searched and redacted inside its string values only: its keys, numbers and JSON stay
whole, so the thread still validates and every tool call still parses.

What was found goes to `meta.pii`: `{"redacted": {KIND: n}, "found": {KIND: n}}` (found:
in assistant text that was not redacted), and `"secrets": {FAMILY: n}` when secrets were
redacted."""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass
from typing import Literal

from pipeline.curation.language import thread_language
from pipeline.curation.pii import (
    KINDS,
    LANGUAGE_REGIONS,
    PHONE,
    Redactor,
    json_strings,
    json_value,
    load_detectors,
    may_hold_pii,
    redact_json_text,
)
from pipeline.mms import MEDIA_MARKER, Message, Thread
from pipeline.stages.curate.tagging import Finding, Tagger

RoleAction = Literal["redact", "tag", "drop", "ignore"]
REASON = "pii"


@dataclass(frozen=True, slots=True)
class PiiSettings:
    """What to do with what is found, per role; which kinds; where phone numbers written
    without their country code are from (`regions`, or else `region` and the regions of
    the thread's language)."""

    user: RoleAction = "redact"
    developer: RoleAction = "redact"
    context: RoleAction = "redact"
    assistant: RoleAction = "tag"
    kinds: tuple[str, ...] = KINDS
    region: str = "US"
    regions: tuple[str, ...] = ()

    def action(self, role: str) -> RoleAction:
        if role == "platform":
            return self.developer
        return getattr(self, role)  # type: ignore[no-any-return]


class Pii(Tagger):
    """Redacts, tags or drops for personal data and secrets, per role (module docstring)."""

    name = "pii"

    def __init__(self, settings: PiiSettings):
        self.settings = settings

    def prepare(self) -> None:
        load_detectors(self.settings.regions or self.settings.region)

    def inspect_all(self, threads: list[Thread]) -> list[Finding]:
        signs = iter(may_hold_pii([m.content for t in threads for m in t.messages]))
        return [self._inspect(t, [next(signs) for _ in t.messages]) for t in threads]

    def inspect(self, thread: Thread) -> Finding:
        return self.inspect_all([thread])[0]

    def _inspect(self, thread: Thread, signs: list[bool]) -> Finding:
        """What is found in `thread`; `signs` (per message, as `may_hold_pii` gives them)
        spares the messages that hold nothing to find. Every message is searched first,
        the values of the redacted ones remembered, then every message is rewritten with
        all of them: the thread is redacted alike throughout."""
        if not any(signs):
            return Finding(thread)
        redactor = Redactor(self.regions(thread), self.settings.kinds)
        tagged: list[tuple[RoleAction, str, str]] = []  # (action, kind, value)
        for message, sign in zip(thread.messages, signs, strict=True):
            action = self.settings.action(message.role)
            if not sign or action == "ignore":
                continue
            for piece in _pieces(message):
                for span in redactor.find(piece):
                    if action == "redact":
                        redactor.remember(piece, span)
                    else:
                        tagged.append((action, span.kind, piece[span.start : span.end]))
        messages = [_redacted(message, redactor) for message in thread.messages]
        left = [(action, kind) for action, kind, value in tagged if not redactor.known(value)]
        found = Counter(kind for _, kind in left)
        drop = any(action == "drop" for action, _ in left)
        redacted = redactor.counts
        if not redacted and not found:
            return Finding(thread)
        pii: dict[str, dict[str, int]] = {"redacted": dict(redacted), "found": dict(found)}
        if redactor.families:
            pii["secrets"] = dict(redactor.families)
        meta = {**thread.meta, "pii": pii}
        changed = dataclasses.replace(thread, messages=messages, meta=meta)
        counts = Counter({f"redacted:{k}": n for k, n in redacted.items()})
        counts.update({f"found:{k}": n for k, n in found.items()})
        return Finding(changed, REASON if drop else None, counts)

    def regions(self, thread: Thread) -> tuple[str, ...]:
        """Where the thread's phone numbers without a country code are read as from: the
        configured regions, or the configured region and the regions of the thread's
        language (`meta.language`, or else its user turns' as fastText tells it)."""
        if self.settings.regions or PHONE not in self.settings.kinds:
            return self.settings.regions or (self.settings.region,)
        language = thread.meta.get("language")
        if not isinstance(language, str):
            prose = [m.content for m in thread.messages if m.role == "user"]
            language = thread_language(prose).language if prose else None
        more = LANGUAGE_REGIONS.get(language or "", ())
        return tuple(dict.fromkeys((self.settings.region, *more)))


def _pieces(message: Message) -> list[str]:
    """The texts of a message searched: each text between its media, or the string values
    of its JSON, or its text."""
    text = message.content
    if message.media:
        return text.split(MEDIA_MARKER)
    value = json_value(text)
    return [text] if value is None else json_strings(value)


def _redacted(message: Message, redactor: Redactor) -> Message:
    """`message` with every value the thread redacts replaced (inside JSON string values
    only for JSON content; never across a media marker)."""
    text = message.content
    if not redactor.holds_known(text):
        return message
    if message.media:
        content = MEDIA_MARKER.join(redactor.redact(p, False) for p in text.split(MEDIA_MARKER))
    else:
        redacted = redact_json_text(text, redactor, False)
        content = redactor.redact(text, False) if redacted is None else redacted
    return message if content == text else dataclasses.replace(message, content=content)
