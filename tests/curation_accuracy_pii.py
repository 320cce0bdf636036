"""The pii stage measured on a labelled set (tests/data/curation/pii/threads.jsonl: real
conversation excerpts with planted personal data and fake credentials of every family,
and decoys that are none), by running `mms curate --redact-pii` on it: recall and
partial redactions per family or kind, precision per kind, and the decoys left alone."""

from __future__ import annotations

import tempfile
from collections import defaultdict
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import orjson
from click.testing import CliRunner

from pipeline.cli import main

LABELLED = Path(__file__).parent / "data" / "curation" / "pii" / "threads.jsonl"
PIECE = 4
"""A planted secret with this many of its characters left readable is a partial redaction."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """One labelled thread: its record (messages, planted values, decoys) and its
    messages' texts before and after the stage."""

    record: dict
    before: list[str]
    after: list[str]


def labelled() -> list[dict]:
    """The labelled threads, as stored."""
    return [orjson.loads(line) for line in LABELLED.read_bytes().splitlines()]


def _texts(messages: list[dict]) -> list[str]:
    """Each message's text, a tool call's arguments as its text."""
    texts = []
    for message in messages:
        texts.append(message.get("content") or "")
        for call in message.get("tool_calls") or []:
            texts.append(call["function"]["arguments"])
    return texts


@cache
def outcomes() -> tuple[Outcome, ...]:
    """Every labelled thread through `mms curate --redact-pii` (the stage's defaults)."""
    records = labelled()
    with tempfile.TemporaryDirectory() as folder:
        source, out = Path(folder) / "in.jsonl", Path(folder) / "out.jsonl"
        keep = ("id", "messages", "tools", "meta")
        source.write_bytes(
            b"".join(orjson.dumps({k: r[k] for k in keep if k in r}) + b"\n" for r in records)
        )
        result = CliRunner().invoke(main, ["curate", str(source), "-o", str(out), "--redact-pii"])
        assert result.exit_code == 0, result.output
        written = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert len(written) == len(records)
    return tuple(
        Outcome(r, _texts(r["messages"]), [m["content"] or "" for m in w["messages"]])
        for r, w in zip(records, written, strict=True)
    )


def occurrences(value: str, texts: list[str]) -> int:
    """How often `value` is in `texts`, as written or escaped in a JSON string."""
    escaped = orjson.dumps(value).decode()[1:-1]
    forms = {value, escaped}
    return sum(text.count(form) for text in texts for form in forms)


def partial(secret: str, before: list[str], after: list[str]) -> bool:
    """Whether a piece of PIECE characters of `secret` is readable after redaction where
    its thread's other text does not hold that piece anyway."""
    context = " ".join(before).replace(secret, " ")
    redacted = " ".join(after)
    pieces = {secret[i : i + PIECE] for i in range(len(secret) - PIECE + 1)}
    return any(piece in redacted and piece not in context for piece in pieces)


def redacted_whole(planted: dict, outcome: Outcome) -> bool:
    """The planted value is nowhere in the thread after redaction, not even a piece."""
    gone = occurrences(planted["value"], outcome.after) == 0
    return gone and not partial(planted["secret"], outcome.before, outcome.after)


def contradicts_itself(outcome: Outcome) -> bool:
    """A planted value redacted in one message of the thread is left raw in another."""
    for planted in outcome.record["planted"]:
        held = occurrences(planted["value"], outcome.before)
        kept = occurrences(planted["value"], outcome.after)
        if 0 < kept < held:
            return True
    return False


def _placeholders(text: str, kind: str) -> int:
    return text.count(f"<{kind}_")


def figures() -> list[dict]:
    """Recall and partial redactions per family (secrets) or kind, precision per kind
    (planted values redacted among all redactions), and precision on the decoys."""
    found: dict[str, list[bool]] = defaultdict(list)
    partials: dict[str, list[bool]] = defaultdict(list)
    planted_kind: dict[str, int] = defaultdict(int)
    placed: dict[str, int] = defaultdict(int)
    decoys: list[bool] = []
    for outcome in outcomes():
        for planted in outcome.record["planted"]:
            name = planted["family"]
            found[name].append(redacted_whole(planted, outcome))
            partials[name].append(
                partial(planted["secret"], outcome.before, outcome.after)
                and occurrences(planted["value"], outcome.after) == 0
            )
            if found[name][-1]:
                planted_kind[planted["kind"]] += occurrences(planted["value"], outcome.before)
        for kind in ("EMAIL", "PHONE", "IP", "CREDIT_CARD", "SECRET"):
            placed[kind] += sum(_placeholders(text, kind) for text in outcome.after)
        for decoy in outcome.record["decoys"]:
            decoys.append(any(decoy in text for text in outcome.after))
    rows = []
    for name in found:
        rows.append(_row(name, "recall", found[name]))
        rows.append(_row(name, "partial", partials[name]))
    for kind, count in placed.items():
        if count:
            value = min(planted_kind[kind], count) / count
            rows.append(
                {
                    "stage": "pii",
                    "name": kind,
                    "measure": "precision",
                    "value": value,
                    "count": count,
                }
            )
    rows.append(_row("decoys", "precision", decoys))
    return rows


def _row(name: str, measure: str, hits: list[bool]) -> dict:
    """A figure: the share of `hits` that are true, over how many."""
    value = sum(hits) / len(hits) if hits else 1.0
    return {"stage": "pii", "name": name, "measure": measure, "value": value, "count": len(hits)}


if __name__ == "__main__":
    for row in figures():
        print(f"{row['name']:24} {row['measure']:10} {row['value']:.3f}  n={row['count']}")
