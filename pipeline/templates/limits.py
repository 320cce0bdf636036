"""Bounds on one render (output size, time, loop iterations) and the account that
enforces them while an engine runs."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from pipeline.templates.errors import UnsafeTemplate

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RenderLimits:
    """How much one render may produce and spend: characters of output, wall-clock
    seconds, and loop iterations summed over all loops of the template."""

    max_output_chars: int = 1_000_000
    max_seconds: float = 2.0
    max_iterations: int = 100_000


class Deadline:
    """When the templates of one record must be done: a record that renders several
    templates (one per message, or twice) shares one time limit, not one per render."""

    def __init__(self, limits: RenderLimits | None = None) -> None:
        self.seconds = (limits or RenderLimits()).max_seconds
        self.at = time.monotonic() + self.seconds


class Budget:
    """One render's running account: the output so far, the clock, the loop count and
    the placeholders left for variables with no value. Every engine writes through it.
    `deadline` is the record's, when it renders more than one template."""

    def __init__(self, limits: RenderLimits, deadline: Deadline | None = None) -> None:
        self.limits = limits
        self._deadline = (deadline or Deadline(limits)).at
        self._iterations = 0
        self._parts: list[str] = []
        self._size = 0
        self._missing: dict[str, None] = {}

    def tick(self) -> None:
        """Refuse the template once its time is up."""
        if time.monotonic() > self._deadline:
            raise UnsafeTemplate(
                f"rendering took longer than the {self.limits.max_seconds:g} s allowed",
                construct="time limit",
            )

    def ticking(self, items: Iterable[T]) -> Iterator[T]:
        """`items`, checking the clock before each: for a library's loop (a lexer's
        tokens, a Liquid for loop) that would otherwise run on past the time limit."""
        for item in items:
            self.tick()
            yield item

    def iterate(self) -> None:
        """Count one loop iteration against the template's iteration bound."""
        self._iterations += 1
        if self._iterations > self.limits.max_iterations:
            raise UnsafeTemplate(
                f"the template's loops ran more than the {self.limits.max_iterations} "
                "iterations allowed",
                construct="iteration limit",
            )
        self.tick()

    def check_size(self, size: int, what: str) -> None:
        """Refuse `what` when it would make more characters than the output may hold."""
        if size > self.limits.max_output_chars:
            raise UnsafeTemplate(
                f"{what} would make {size} characters, more than the "
                f"{self.limits.max_output_chars} an output may hold",
                construct="output size limit",
            )

    def write(self, text: str) -> None:
        """Append rendered text, refusing output past the size bound."""
        self.check_size(self._size + len(text), "the rendered text")
        self._size += len(text)
        self._parts.append(text)
        self.tick()

    def text(self) -> str:
        """Everything written so far."""
        return "".join(self._parts)

    def miss(self, name: str) -> None:
        """Record that `name` had no value and its placeholder was kept."""
        self._missing.setdefault(name, None)

    @property
    def missing(self) -> tuple[str, ...]:
        """Names whose placeholders were kept, in order of first appearance."""
        return tuple(self._missing)
