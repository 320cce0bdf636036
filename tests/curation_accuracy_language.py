"""The language stage measured on a labelled set of real threads
(tests/data/curation/language/, PROVENANCE.txt): each language's share named right, the
short Chinese prompts' and the tool-declaring Chinese threads', and how many code threads
a language list drops. `python -m tests.curation_accuracy_language` prints the table."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pipeline.mms import Thread
from pipeline.stages.curate.language import Language, LanguageSettings

LABELLED = Path(__file__).parent / "data" / "curation" / "language" / "threads.jsonl"
FILTERS = (("en",), ("zh",))
"""The language lists a code thread must survive."""


def labelled() -> list[dict[str, Any]]:
    """The labelled rows: `label` (ISO 639 code or `code`), `source`, `tags`, `thread`."""
    return [json.loads(line) for line in LABELLED.read_text(encoding="utf-8").splitlines()]


def named(rows: list[dict[str, Any]], settings: LanguageSettings) -> list[tuple[str | None, bool]]:
    """What the stage names each row's thread (`meta.language`) and whether it drops it."""
    threads = [Thread.from_dict(row["thread"]) for row in rows]
    found = Language(settings).inspect_all(threads)
    return [(f.thread.meta.get("language"), f.reason is not None) for f in found]


def _row(name: str, measure: str, value: float, count: int) -> dict[str, Any]:
    return {"stage": "language", "name": name, "measure": measure, "value": value, "count": count}


def _accuracy(name: str, pairs: Iterable[tuple[str, str | None]]) -> dict[str, Any]:
    """The share of (label, named) pairs named right."""
    listed = list(pairs)
    right = sum(label == found for label, found in listed)
    return _row(name, "accuracy", round(right / len(listed), 4), len(listed))


def figures() -> list[dict[str, Any]]:
    """Accuracy per language (and for the short Chinese prompts, `zh:short`, and the
    Chinese threads with an English tool declaration, `zh:tools`), and the code threads
    dropped by `languages: [en]` or `[zh]` (`code_dropped`, a count)."""
    rows = labelled()
    found = [language for language, _ in named(rows, LanguageSettings())]
    pairs = [(row["label"], language) for row, language in zip(rows, found, strict=True)]
    out = [
        _accuracy(label, (p for p in pairs if p[0] == label))
        for label in sorted({row["label"] for row in rows})
    ]
    for tag in ("short", "tools"):
        tagged = [p for row, p in zip(rows, pairs, strict=True) if tag in row["tags"]]
        out.append(_accuracy(f"zh:{tag}", (p for p in tagged if p[0] == "zh")))
    code = [row for row in rows if row["label"] == "code"]
    dropped = {
        index
        for languages in FILTERS
        for index, (_, drop) in enumerate(named(code, LanguageSettings(languages)))
        if drop
    }
    out.append(_row("code", "code_dropped", float(len(dropped)), len(code)))
    return out


if __name__ == "__main__":
    for figure in figures():
        print(
            f"{figure['name']:10} {figure['measure']:13} {figure['value']:>8} {figure['count']:>5}"
        )
