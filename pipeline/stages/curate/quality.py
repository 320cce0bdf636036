"""The `quality` stage: the quality heuristics for chat (pipeline/curation/quality.py) on
every assistant answer in its context; what a thread breaks goes to `meta.quality`, one
entry per rule and answer (`rule`, `message`, `measure`, `value`, `limit`), and with
`action: drop` the thread is dropped under the first rule (`quality:RULE`), that entry
beside it in the list of dropped threads."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from pipeline.curation import mojibake
from pipeline.curation.quality import (
    QualityFinding,
    QualitySettings,
    Turn,
    quality_findings_many,
)
from pipeline.mms import Thread
from pipeline.stages.curate.tagging import Action, Finding, Tagger


@dataclass(frozen=True, slots=True)
class QualityStageSettings:
    """The rules and their thresholds, and what breaking one does."""

    rules: QualitySettings = field(default_factory=QualitySettings)
    action: Action = "tag"


def answers(thread: Thread) -> list[Turn]:
    """The thread's text answers (tool calls and other formats aside), each with the user
    turn before it; the last one marked."""
    turns: list[Turn] = []
    user = ""
    for index, message in enumerate(thread.messages):
        if message.role == "user":
            user = message.content
        elif message.role == "assistant" and (message.format or "markdown") == "markdown":
            turns.append(Turn(message.content, user, False, index))
    if turns:
        turns[-1] = dataclasses.replace(turns[-1], last=True)
    return turns


class Quality(Tagger):
    """Flags the quality rules a thread's answers break (module docstring)."""

    name = "quality"

    def __init__(self, settings: QualityStageSettings):
        self.settings = settings

    def inspect(self, thread: Thread) -> Finding:
        return self.inspect_all([thread])[0]

    def prepare(self) -> None:
        if "mojibake" in self.settings.rules.rules:
            mojibake.load()

    def inspect_all(self, threads: list[Thread]) -> list[Finding]:
        """The answers of the whole batch judged at once."""
        every = quality_findings_many([answers(thread) for thread in threads], self.settings.rules)
        return [self._finding(thread, found) for thread, found in zip(threads, every, strict=True)]

    def _finding(self, thread: Thread, found: list[QualityFinding]) -> Finding:
        """The thread with its findings in `meta.quality`, counted once per rule."""
        if not found:
            return Finding(thread)
        listed = [finding.to_dict() for finding in found]
        changed = dataclasses.replace(thread, meta={**thread.meta, "quality": listed})
        reason = f"quality:{found[0].rule}" if self.settings.action == "drop" else None
        counts = dict.fromkeys((finding.rule for finding in found), 1)
        return Finding(changed, reason, counts, listed[0])
