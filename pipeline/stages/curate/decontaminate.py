"""The `decontaminate` stage: training threads that hold an evaluation item's text
(pipeline/curation/contamination.py: word 13-grams, GPT-3's method), checked per role: the
user turns against the evaluation prompts (with their follow-up turns), the assistant
turns against the evaluation answers and references when the set has them. The
evaluation inputs are any files mms reads (MT-Bench, Arena-Hard, BFCL, TRL prompt-only
sets, prompt lists ...), read once per process and indexed; the training side streams.

A match goes to `meta.contamination` (`{"item": ID, "source": FILE, "side": "prompt" |
"answer"}`, the evaluation item being the thread its file made) and, with `action: drop`
(the default), drops the thread (`contaminated`, the item named in the list of drops)."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from pipeline.curation.contamination import NGRAM, NgramIndex
from pipeline.mms import Thread
from pipeline.sources import ReadLimits, expand_inputs, iter_file
from pipeline.stages.curate.tagging import Action, Finding, Tagger
from pipeline.stages.normalize import read_items

REASON = "contaminated"
REFERENCE_KEYS = ("reference", "references", "answer", "ground_truth", "ideal")
"""Fields an evaluation record keeps its reference answers in (kept by the converter in
`meta.extra_fields`)."""


@dataclass(frozen=True, slots=True)
class DecontaminateSettings:
    """The evaluation inputs (paths or globs, resolved), the n of the n-grams, what a match
    does, and whether assistant turns are checked against the references."""

    against: tuple[str, ...] = ()
    ngram: int = NGRAM
    action: Action = "drop"
    answers: bool = True


@dataclass(frozen=True, slots=True)
class EvaluationIndex:
    """The evaluation prompts' and answers' n-grams, and how many items each holds."""

    prompts: NgramIndex
    answers: NgramIndex
    files: tuple[str, ...]


@lru_cache(maxsize=4)
def evaluation_index(against: tuple[str, ...], ngram: int) -> EvaluationIndex:
    """Read the evaluation inputs (every format mms reads, detected) and index them: each
    evaluation thread's user turns and follow-ups as prompts, its assistant turns and
    references as answers, under `FILE:ID` (the file's name and the thread's id)."""
    prompts, answers = NgramIndex(ngram), NgramIndex(ngram)
    files = tuple(expand_inputs(list(against)).files) if against else ()
    for path in files:
        for thread in read_items(path, iter_file(path, ReadLimits())):
            item = f"{os.path.basename(path)}:{thread.id}"
            for message in thread.messages:
                if message.role == "user":
                    prompts.add(item, message.content)
                elif message.role == "assistant":
                    answers.add(item, message.content)
            for text in _texts(thread.meta.get("follow_ups")):
                prompts.add(item, text)
            extra = thread.meta.get("extra_fields") or {}
            for key in REFERENCE_KEYS:
                for text in _texts(extra.get(key) if isinstance(extra, dict) else None):
                    answers.add(item, text)
    return EvaluationIndex(prompts, answers, files)


def _texts(value: Any) -> list[str]:
    """The texts of follow-up turns or references: strings, the `content` of message
    objects, in lists at any depth (never a key, a role or another field's value)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [text for item in value for text in _texts(item)]
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return [value["content"]]
    return []


class Decontaminate(Tagger):
    """Tags (and by default drops) the threads that hold an evaluation item's text."""

    name = "decontaminate"

    def __init__(self, settings: DecontaminateSettings):
        self.settings = settings

    def inspect(self, thread: Thread) -> Finding:
        return self.inspect_all([thread])[0]

    def prepare(self) -> None:
        index = evaluation_index(self.settings.against, self.settings.ngram)
        index.prompts.build()
        index.answers.build()

    def inspect_all(self, threads: list[Thread]) -> list[Finding]:
        """Every user and assistant turn of the batch looked up at once, per side."""
        index = evaluation_index(self.settings.against, self.settings.ngram)
        sides = {"prompt": index.prompts, "answer": index.answers}
        roles = {"user": "prompt", **({"assistant": "answer"} if self.settings.answers else {})}
        turns: dict[str, list[tuple[int, int]]] = {"prompt": [], "answer": []}
        texts: dict[str, list[str]] = {"prompt": [], "answer": []}
        for row, thread in enumerate(threads):
            for place, message in enumerate(thread.messages):
                side = roles.get(message.role)
                if side is not None:
                    turns[side].append((place, row))
                    texts[side].append(message.content)
        first: dict[int, tuple[int, str, str]] = {}
        for side, index_of_side in sides.items():
            for (place, row), found in zip(
                turns[side], index_of_side.matches_many(texts[side]), strict=True
            ):
                if found and (row not in first or place < first[row][0]):
                    first[row] = (place, side, found[0])
        return [
            self._finding(thread, *first[row][1:]) if row in first else Finding(thread)
            for row, thread in enumerate(threads)
        ]

    def _finding(self, thread: Thread, side: str, item: str) -> Finding:
        """A thread whose turn on `side` holds the evaluation item `item`."""
        match = {"item": item, "side": side}
        changed = dataclasses.replace(thread, meta={**thread.meta, "contamination": match})
        reason = REASON if self.settings.action == "drop" else None
        return Finding(changed, reason, {f"{side}s": 1}, {"matched": item})
