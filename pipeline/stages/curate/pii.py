"""The `pii` stage: personal data and secrets (pipeline/curation/pii.py), per role. In
platform, developer, user and context text they are redacted by default, with typed
placeholders that stay the same within the thread (`<EMAIL_1>` for one address
throughout); in assistant text they are tagged by default, or redacted, or the thread is
dropped (`pii`), as the curator chooses. JSON content (a tool call's arguments, a tool's
JSON result) is redacted inside its string values only: its keys and its JSON stay whole,
so the thread still validates and every tool call still parses.

What was found goes to `meta.pii`: `{"redacted": {KIND: n}, "found": {KIND: n}}` (found:
in assistant text that was not redacted)."""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass
from typing import Literal

from pipeline.curation.pii import (
    KINDS,
    Redactor,
    find_pii,
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
    """What to do with what is found, per role; which kinds; the phone numbers' region."""

    user: RoleAction = "redact"
    developer: RoleAction = "redact"
    context: RoleAction = "redact"
    assistant: RoleAction = "tag"
    kinds: tuple[str, ...] = KINDS
    region: str = "US"

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
        load_detectors(self.settings.region)

    def inspect_all(self, threads: list[Thread]) -> list[Finding]:
        signs = iter(may_hold_pii([m.content for t in threads for m in t.messages]))
        return [self._inspect(t, [next(signs) for _ in t.messages]) for t in threads]

    def inspect(self, thread: Thread) -> Finding:
        return self.inspect_all([thread])[0]

    def _inspect(self, thread: Thread, signs: list[bool]) -> Finding:
        """What is found in `thread`; `signs` (per message, as `may_hold_pii` gives them)
        spares the messages that hold nothing to find."""
        if not any(signs):
            return Finding(thread)
        redactor = Redactor(self.settings.region, self.settings.kinds)
        found: Counter[str] = Counter()
        messages: list[Message] = []
        drop = False
        for message, sign in zip(thread.messages, signs, strict=True):
            action = self.settings.action(message.role)
            if action == "ignore" or not sign:
                messages.append(message)
            elif action == "redact":
                messages.append(self._redacted(message, redactor))
            else:
                kinds = Counter(
                    span.kind
                    for span in find_pii(message.content, self.settings.region)
                    if span.kind in self.settings.kinds
                )
                found.update(kinds)
                drop = drop or (action == "drop" and bool(kinds))
                messages.append(message)
        redacted = redactor.counts
        if not redacted and not found:
            return Finding(thread)
        meta = {**thread.meta, "pii": {"redacted": dict(redacted), "found": dict(found)}}
        changed = dataclasses.replace(thread, messages=messages, meta=meta)
        counts = Counter({f"redacted:{k}": n for k, n in redacted.items()})
        counts.update({f"found:{k}": n for k, n in found.items()})
        return Finding(changed, REASON if drop else None, counts)

    def _redacted(self, message: Message, redactor: Redactor) -> Message:
        text = message.content
        if message.media:  # each text between media on its own: no span takes a marker
            pieces = text.split(MEDIA_MARKER)
            redacted = MEDIA_MARKER.join(redactor.redact(piece) for piece in pieces)
            return message if redacted == text else dataclasses.replace(message, content=redacted)
        json_like = text.lstrip()[:1] in ("{", "[")
        content = redact_json_text(text, redactor) if json_like else None
        if content is None:
            content = redactor.redact(text)
        return message if content == text else dataclasses.replace(message, content=content)
