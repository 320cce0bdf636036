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
from collections import Counter
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
        index = evaluation_index(self.settings.against, self.settings.ngram)
        for message in thread.messages:
            if message.role == "user":
                side, found = "prompt", index.prompts.matches(message.content)
            elif message.role == "assistant" and self.settings.answers:
                side, found = "answer", index.answers.matches(message.content)
            else:
                continue
            if found:
                match = {"item": found[0], "side": side}
                changed = dataclasses.replace(thread, meta={**thread.meta, "contamination": match})
                reason = REASON if self.settings.action == "drop" else None
                return Finding(changed, reason, Counter({f"{side}s": 1}), {"matched": found[0]})
        return Finding(thread)
