"""How well the quality rules do on a labelled set (tests/data/curation/quality): the share
of sound real threads each rule flags, and each rule's recall on the defects planted in
copies of them, measured by running the `quality` stage at its defaults."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import orjson

from pipeline.curation.quality import RULES
from pipeline.mms import Thread
from pipeline.stages.curate.quality import Quality, QualityStageSettings

LABELLED = Path(__file__).resolve().parent / "data" / "curation" / "quality"


def sound_threads() -> list[Thread]:
    """The sound real threads."""
    lines = (LABELLED / "sound.jsonl").read_bytes().splitlines()
    return [Thread.from_dict(orjson.loads(line)) for line in lines]


def planted_threads(sound: list[Thread]) -> list[tuple[str, Thread]]:
    """Each planted defect's rule and the sound thread it was planted in, rewritten."""
    by_id = {thread.id: thread for thread in sound}
    planted: list[tuple[str, Thread]] = []
    for line in (LABELLED / "planted.jsonl").read_bytes().splitlines():
        row = orjson.loads(line)
        planted.append((row["defect"], _rewritten(by_id[row["of"]], row)))
    return planted


def _rewritten(thread: Thread, row: dict[str, Any]) -> Thread:
    """`thread` with the message at `row["message"]` holding `row["content"]`."""
    messages = list(thread.messages)
    place = row["message"]
    messages[place] = dataclasses.replace(messages[place], content=row["content"])
    return dataclasses.replace(thread, id=f"{thread.id}-{row['defect']}", messages=messages)


def flagged_rules(threads: list[Thread]) -> list[set[str]]:
    """The rules the stage (its defaults) flags in each thread."""
    stage = Quality(QualityStageSettings())
    stage.prepare()
    return [set(finding.counts) for finding in stage.inspect_all(threads)]


def figures() -> list[dict[str, Any]]:
    """Per rule (and `all` of them), the share of sound threads flagged; per rule, the
    share of its planted defects it flags."""
    sound = sound_threads()
    planted = planted_threads(sound)
    on_sound = flagged_rules(sound)
    on_planted = flagged_rules([thread for _, thread in planted])
    rows = [_row(rule, "flagged_sound", [rule in flags for flags in on_sound]) for rule in RULES]
    rows.append(_row("all", "flagged_sound", [bool(flags) for flags in on_sound]))
    for rule in RULES:
        caught = [
            rule in flags
            for (planted_rule, _), flags in zip(planted, on_planted, strict=True)
            if planted_rule == rule
        ]
        rows.append(_row(rule, "recall", caught))
    return rows


def _row(rule: str, measure: str, hits: list[bool]) -> dict[str, Any]:
    """One figure: the share of `hits` that are true, over how many."""
    return {
        "stage": "quality",
        "name": rule,
        "measure": measure,
        "value": sum(hits) / len(hits) if hits else 0.0,
        "count": len(hits),
    }


if __name__ == "__main__":
    for figure in figures():
        print(
            f"{figure['name']:14} {figure['measure']:14} {figure['value']:.3f}  of {figure['count']}"
        )
