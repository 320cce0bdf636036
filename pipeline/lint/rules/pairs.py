"""MMS504-507: the sides of preference pairs (`meta.pair_id`, `meta.preference` chosen /
rejected). A pair teaches by the difference between two answers to one prompt; these
rules find pairs that cannot (`mms tokenize --objective preference` drops them with the
same reasons). Warnings: the same threads serve SFT well. Each keeps digests of a pair's sides only until its partner comes (the
sides of a pair are read one after the other), so memory stays bounded."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from functools import partial
from typing import Any

import orjson

from pipeline.lint.config import LintConfig
from pipeline.lint.diagnostic import Diagnostic, ThreadRef
from pipeline.lint.rule import DatasetCheck, Rule
from pipeline.lint.rules.examples import assistant, thread, user
from pipeline.lint.thread_view import ThreadView
from pipeline.mms import Thread, answer_start
from pipeline.mms.groups import pair_of, side_of

SIDES = ("chosen", "rejected")


def _digest(value: Any) -> str:
    return hashlib.blake2b(orjson.dumps(value), digest_size=8).hexdigest()


def _side_facts(view_thread: Thread) -> dict[str, Any]:
    """What the pair rules keep of a side: the digests of its prompt (messages before its
    answer, `answer_start`, and its settings) and of its answer, and whether that answer
    trains anything."""
    messages = view_thread.messages
    start = answer_start(messages)
    settings = view_thread.settings.to_dict() if view_thread.settings is not None else None
    prompt = [message.to_dict() for message in messages[:start]]
    final = messages[start:]
    return {
        "prompt": _digest([prompt, settings]),
        "answer": _digest([message.to_dict() for message in final]),
        "trained": any(m.role == "assistant" and m.trained for m in final),
    }


def _pair_facts(view: ThreadView) -> dict[str, Any] | None:
    """What every pair rule keeps of a side (the same for the four: made once a thread)."""
    pair, side = pair_of(view.thread.meta), side_of(view.thread.meta)
    if pair is None or side not in SIDES:
        return None
    return {"pair": pair, "side": side, **_side_facts(view.thread)}


class PairSides(DatasetCheck):
    """One of the pair rules (module docstring): `kind` says which (a rule's `dataset` is
    a partial of this class, which workers can be sent)."""

    def __init__(self, config: LintConfig, rule: Rule, kind: str):
        self.rule, self.kind = rule, kind
        self.open: dict[str, list[tuple[str, dict[str, Any], ThreadRef]]] = {}

    def facts(self, view: ThreadView) -> dict[str, Any] | None:
        return view.shared("pair sides", _pair_facts)

    def observe(self, facts: dict[str, Any] | None, ref: ThreadRef) -> Iterator[Diagnostic]:
        if facts is None:
            return
        sides = self.open.setdefault(facts["pair"], [])
        sides.append((facts["side"], facts, ref))
        if len(sides) == 2:
            del self.open[facts["pair"]]
            yield from self._judged(sides)

    def state(self) -> dict[str, list[tuple[str, dict[str, Any], ThreadRef]]]:
        return self.open

    def merge(
        self, state: dict[str, list[tuple[str, dict[str, Any], ThreadRef]]]
    ) -> Iterator[Diagnostic]:
        for sides in state.values():
            for _, facts, ref in sides:
                yield from self.observe(facts, ref)

    def finish(self) -> Iterator[Diagnostic]:
        if self.kind != "incomplete":
            return
        for pair, sides in sorted(self.open.items()):
            for side, _, ref in sides:
                yield self._finding(ref, f"pair {pair} has its {side} side only")

    def _judged(self, sides: list[tuple[str, dict[str, Any], ThreadRef]]) -> Iterator[Diagnostic]:
        (first, a, _), (second, b, ref) = sides
        if self.kind == "incomplete" and {first, second} != set(SIDES):
            yield self._finding(ref, f"both sides of pair {a['pair']} are {first}")
        elif self.kind == "prompts" and a["prompt"] != b["prompt"]:
            yield self._finding(ref, "the sides differ before their final assistant turn")
        elif self.kind == "identical" and a["answer"] == b["answer"]:
            yield self._finding(ref, "the chosen and rejected answers are the same")
        elif self.kind == "untrained" and not (a["trained"] and b["trained"]):
            side = first if not a["trained"] else second
            yield self._finding(ref, f"the {side} side has no trained answer")

    def _finding(self, ref: ThreadRef, text: str) -> Diagnostic:
        return Diagnostic(
            self.rule.code, self.rule.severity, text, ref.id, None, ref.source, ref.locator
        )


def _pair(
    chosen: str, rejected: str, *, question: str = "Name a colour.", other: str = ""
) -> list[dict[str, Any]]:
    """A pair's two sides as example threads."""
    return [
        thread(
            user(question),
            assistant(chosen),
            id="p:chosen",
            meta={"pair_id": "p", "preference": "chosen"},
        ),
        thread(
            user(other or question),
            assistant(rejected),
            id="p:rejected",
            meta={"pair_id": "p", "preference": "rejected"},
        ),
    ]


RULES = [
    Rule(
        code="MMS504",
        name="pair-sides-identical",
        severity="warning",
        scope="dataset",
        summary="The chosen and rejected answers of a pair are the same.",
        rationale=(
            "A preference pair teaches by the difference between its answers; two identical "
            "answers carry no preference and only add a constant to the loss."
        ),
        bad=_pair("Red.", "Red."),
        good=_pair("Red.", "Blue, I think."),
        dataset=partial(PairSides, kind="identical"),
    ),
    Rule(
        code="MMS505",
        name="pair-prompts-differ",
        severity="warning",
        scope="dataset",
        summary="The two sides of a pair differ before their final assistant turn.",
        rationale=(
            "DPO compares the two answers to one prompt. Sides whose prompts differ (another "
            "system message, another question, other declared tools) compare answers to "
            "different questions; trainers that split a shared prompt silently mix them."
        ),
        bad=_pair("Red.", "Blue.", other="Name a shape."),
        good=_pair("Red.", "Blue."),
        dataset=partial(PairSides, kind="prompts"),
    ),
    Rule(
        code="MMS506",
        name="pair-side-untrained",
        severity="warning",
        scope="dataset",
        summary="A side of a pair has no trained answer (none, or only answers weighted 0).",
        rationale=(
            "The preference loss compares the log-probabilities of both answers; a side "
            "without a trained answer has nothing to compare."
        ),
        bad=[
            thread(
                user("Name a colour."), id="p:chosen", meta={"pair_id": "p", "preference": "chosen"}
            ),
            _pair("Red.", "Blue.")[1],
        ],
        good=_pair("Red.", "Blue."),
        dataset=partial(PairSides, kind="untrained"),
    ),
    Rule(
        code="MMS507",
        name="pair-incomplete",
        severity="warning",
        scope="dataset",
        summary="A pair has not exactly one chosen and one rejected side.",
        rationale=(
            "A side alone trains nothing as a preference; it usually means a filter or a "
            "split took its partner away, or the source holds a broken record."
        ),
        bad=[_pair("Red.", "Blue.")[0]],
        good=_pair("Red.", "Blue."),
        dataset=partial(PairSides, kind="incomplete"),
    ),
]
