"""The `language` stage: each thread's language (pipeline/curation/language.py) in
`meta.language`, each message's in `meta.message_languages` when the turns differ, and the
other languages holding a quarter of its letters in `meta.languages_mixed`. With
`languages: [en, zh]` a thread in another language is dropped (`language:XX`), and with
`drop_mixed` a mixed one too (`language_mixed`); a thread too short to tell is kept."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pipeline.curation.language import ThreadLanguage, load_model, thread_languages
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
        reason = None
        if self.settings.languages and found.language not in self.settings.languages:
            reason = f"language:{found.language}"
        elif self.settings.drop_mixed and found.mixed:
            reason = "language_mixed"
        return Finding(dataclasses.replace(thread, meta=meta), reason, counts)


def _prose_messages(thread: Thread) -> list[tuple[int, str]]:
    """The thread's prose messages (markdown of the prose roles): their places and texts."""
    return [
        (index, message.content)
        for index, message in enumerate(thread.messages)
        if message.role in PROSE_ROLES and (message.format or "markdown") == "markdown"
    ]
