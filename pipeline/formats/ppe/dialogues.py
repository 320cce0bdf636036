"""Script -> dialogues. `$if` branches that hold messages fork the script into paths
(one per branch taken, the condition never evaluated, capped); each path is split at its
separators: the messages before the first are the preamble every dialogue starts with,
each separator starts a dialogue. A path without separators is one dialogue. A dialogue
that no taken branch changes is the same on every path and is kept once."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.formats.ppe.steps import Conditional, Message, Separator, Step

MAX_PATHS = 8
"""At most this many branch combinations per script (then-branches first)."""


@dataclass(frozen=True, slots=True)
class Assumption:
    """Where a path took a `$if` as true (its `then` branch) or false (`else`)."""

    condition: str
    line: int
    holds: bool

    @property
    def label(self) -> str:
        return f"if{self.line}-{'then' if self.holds else 'else'}"


PathStep = Step | Assumption


@dataclass(frozen=True, slots=True)
class Dialogue:
    """One dialogue: the preamble and its own steps (with the branches taken), the line
    of its separator (None without separators), and the label ending its thread id."""

    steps: tuple[PathStep, ...]
    start_line: int | None
    label: str

    @property
    def assumptions(self) -> tuple[Assumption, ...]:
        return tuple(step for step in self.steps if isinstance(step, Assumption))


@dataclass(frozen=True, slots=True)
class Dialogues:
    """The dialogues of a script; the empty ones; whether branch combinations were cut."""

    found: tuple[Dialogue, ...]
    empty: tuple[Dialogue, ...]
    capped: bool


def forks(step: Conditional) -> bool:
    """Whether a `$if` changes the conversation: a branch holds messages or separators."""
    return any(
        isinstance(s, (Message, Separator)) or (isinstance(s, Conditional) and forks(s))
        for s in (*step.then_steps, *step.else_steps)
    )


def _paths(steps: Sequence[Step]) -> tuple[list[tuple[PathStep, ...]], bool]:
    """Every way through the branches that hold messages, then-branches first; capped."""
    paths: list[tuple[PathStep, ...]] = [()]
    capped = False
    for step in steps:
        if not (isinstance(step, Conditional) and forks(step)):
            paths = [(*path, step) for path in paths]
            continue
        options: list[tuple[PathStep, ...]] = []
        for branch, holds in ((step.then_steps, True), (step.else_steps, False)):
            inner, inner_capped = _paths(branch)
            capped |= inner_capped
            taken = Assumption(step.condition, step.line, holds)
            options.extend((taken, *option) for option in inner)
        combined = [(*path, *option) for path in paths for option in options]
        capped |= len(combined) > MAX_PATHS
        paths = combined[:MAX_PATHS]
    return paths, capped


def _segments(path: Sequence[PathStep]) -> tuple[list[PathStep], list[tuple[int, list[PathStep]]]]:
    """The preamble and each separator's (line, steps)."""
    preamble: list[PathStep] = []
    parts: list[tuple[int, list[PathStep]]] = []
    for step in path:
        if isinstance(step, Separator):
            parts.append((step.line, []))
        elif parts:
            parts[-1][1].append(step)
        else:
            preamble.append(step)
    return preamble, parts


def _has_message(steps: Sequence[PathStep]) -> bool:
    return any(isinstance(step, Message) for step in steps)


def _path_dialogues(path: Sequence[PathStep]) -> list[tuple[Dialogue, bool]]:
    """(dialogue, holds messages of its own) for each dialogue of one path."""
    preamble, parts = _segments(path)
    if not parts:
        dialogue = Dialogue(tuple(preamble), None, "")
        return [(dialogue, _has_message(preamble))]
    return [
        (Dialogue((*preamble, *own), line, f"dialogue-{number}"), _has_message(own))
        for number, (line, own) in enumerate(parts, 1)
    ]


def _identity(dialogue: Dialogue) -> tuple[object, ...]:
    """Equal for the same dialogue reached along different paths."""
    return tuple(s if isinstance(s, Assumption) else id(s) for s in dialogue.steps)


def split_dialogues(steps: Sequence[Step]) -> Dialogues:
    """The dialogues of every path through the script's steps, each kept once."""
    paths, capped = _paths(steps)
    seen: set[tuple[object, ...]] = set()
    labels: set[str] = set()
    found: list[Dialogue] = []
    empty: list[Dialogue] = []
    for number, path in enumerate(paths, 1):
        for dialogue, has_messages in _path_dialogues(path):
            identity = _identity(dialogue)
            if identity in seen:
                continue
            seen.add(identity)
            label = "-".join(
                p for p in (dialogue.label, *(a.label for a in dialogue.assumptions)) if p
            )
            if label in labels:
                label += f"-path-{number}"
            labels.add(label)
            kept = Dialogue(dialogue.steps, dialogue.start_line, label)
            (found if has_messages else empty).append(kept)
    return Dialogues(tuple(found), tuple(empty), capped)
