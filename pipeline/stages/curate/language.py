"""The `language` stage: each thread's language (pipeline/curation/language.py) in
`meta.language`, each message's in `meta.message_languages` when the turns differ, and the
other languages holding a quarter of its letters in `meta.languages_mixed`. With
`languages: [en, zh]` a thread in another language is dropped (`language:XX`), and with
`drop_mixed` a mixed one too (`language_mixed`); a thread too short to tell is kept, and so
is one that is only code, math or markup (`meta.language` is `code`: no language to keep or
drop it by). Only the source's own text is judged: the declaration message the converter
wrote (`meta.declaration`: tools, reasoning, the response format) is left out."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pipeline.curation.language import CODE, ThreadLanguage, load_model, thread_languages
from pipeline.dedup.keys import DECLARATION_META
from pipeline.mms import Thread
from pipeline.stages.curate.tagging import Finding, Tagger

PROSE_ROLES = ("platform", "developer", "user", "assistant")


@dataclass(frozen=True, slots=True)
class LanguageSettings:
    """The languages kept (ISO 639 codes; empty: all, only tagged) and whether a thread in
    several languages is dropped."""

    languages: tuple[str, ...] = ()
    drop_mixed: bool = False


class Language(Tagger):
    """Tags every thread with its languages; keeps only the ones listed (module docstring)."""

    name = "language"

    def __init__(self, settings: LanguageSettings):
        self.settings = settings

    def inspect(self, thread: Thread) -> Finding:
        return self.inspect_all([thread])[0]

    def prepare(self) -> None:
        load_model()

    def inspect_all(self, threads: list[Thread]) -> list[Finding]:
        """The messages of the whole batch judged at once."""
        proses = [_prose_messages(thread) for thread in threads]
        judged = thread_languages([[text for _, text in prose] for prose in proses])
        return [
            self._finding(thread, prose, found)
            for thread, prose, found in zip(threads, proses, judged, strict=True)
        ]

    def _finding(
        self, thread: Thread, prose: list[tuple[int, str]], found: ThreadLanguage
    ) -> Finding:
        if found.language is None:
            return Finding(thread, None, {"unknown": 1})
        meta = {**thread.meta, "language": found.language}
        judged = {lang for lang in found.messages if lang is not None}
        if len(judged) > 1:
            meta["message_languages"] = {
                str(index): lang
                for (index, _), lang in zip(prose, found.messages, strict=True)
                if lang is not None
            }
        if found.mixed:
            meta["languages_mixed"] = list(found.mixed)
        counts = {found.language: 1, **({"mixed": 1} if found.mixed else {})}
        return Finding(dataclasses.replace(thread, meta=meta), self._reason(found), counts)

    def _reason(self, found: ThreadLanguage) -> str | None:
        """Why a thread of these languages is dropped, None when it is kept (code always)."""
        if found.language == CODE:
            return None
        if self.settings.languages and found.language not in self.settings.languages:
            return f"language:{found.language}"
        if self.settings.drop_mixed and found.mixed:
            return "language_mixed"
        return None


def _prose_messages(thread: Thread) -> list[tuple[int, str]]:
    """The thread's prose messages (markdown of the prose roles, not the converter's
    declaration): their places and texts."""
    declared = _declaration(thread)
    return [
        (index, message.content)
        for index, message in enumerate(thread.messages)
        if message.role in PROSE_ROLES
        and (message.format or "markdown") == "markdown"
        and index != declared
    ]


def _declaration(thread: Thread) -> int | None:
    """The index of the developer message the converter wrote (`meta.declaration`), if any:
    its words are the converter's, not the source's."""
    declared = thread.meta.get(DECLARATION_META) if isinstance(thread.meta, dict) else None
    index = declared.get("message") if isinstance(declared, dict) else None
    return index if isinstance(index, int) else None
