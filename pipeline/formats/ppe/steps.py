"""The typed steps of a PPE script, as the pre-parser reads them: nothing here is run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Message:
    """`role: content` (or a bare string, a user message); `to` holds the addressees of
    `user[@dobby]:`."""

    role: str
    content: str
    line: int
    to: str | None = None


@dataclass(frozen=True, slots=True)
class Separator:
    """`---` or `***`: a new dialogue starts (the messages before the first one are the
    preamble every dialogue shares)."""

    line: int
    mark: str = "---"


@dataclass(frozen=True, slots=True)
class Chain:
    """`-> script(args) -> $print`: the last result goes to other scripts (never run)."""

    text: str
    line: int


@dataclass(frozen=True, slots=True)
class Function:
    """A `!fn` / `!fn#` block: function code, kept as text (never run)."""

    tag: str
    code: str
    line: int


@dataclass(frozen=True, slots=True)
class Directive:
    """A `$name` instruction (`$set`, `$echo`, `$AI`, `$for` ...) with its value and the
    keys written beside it in the same object (`do:`, `as:` ...); never run."""

    name: str
    value: Any
    line: int
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Conditional:
    """`$if: condition` with its `then` and `else` branches; the condition is JavaScript
    (or a function call), never evaluated."""

    condition: str
    then_steps: tuple[Step, ...]
    else_steps: tuple[Step, ...]
    line: int


Step = Message | Separator | Chain | Function | Directive | Conditional


@dataclass(frozen=True, slots=True)
class Script:
    """A parsed script: its front-matter configuration and its steps in order, and the
    notes on reading them (integers beyond 64 bits kept as text)."""

    front_matter: dict[str, Any]
    steps: tuple[Step, ...]
    notes: tuple[str, ...] = ()
