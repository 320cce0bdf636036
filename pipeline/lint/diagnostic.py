"""A lint finding: which rule, how bad, what is wrong, and where (thread, message, source
file and locator), in the shape of the JSON report's `diagnostics` entries."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

Severity = Literal["error", "warning"]


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One finding. `message_index` is None for thread- and dataset-level findings;
    `thread_id` is None only for records that never became a thread and had no id."""

    code: str
    severity: Severity
    message: str
    thread_id: str | None = None
    message_index: int | None = None
    source: str | None = None
    locator: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "thread_id": self.thread_id,
            "message_index": self.message_index,
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
            "source": self.source,
            "locator": self.locator,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Diagnostic:
        return cls(
            code=data["code"],
            severity=data["severity"],
            message=data["message"],
            thread_id=data.get("thread_id"),
            message_index=data.get("message_index"),
            source=data.get("source"),
            locator=data.get("locator"),
        )


def locator_line(locator: str | None) -> int | None:
    """The line number in a `path:line` locator (None for `path#index` and others)."""
    if not locator:
        return None
    head, sep, tail = locator.rpartition(":")
    return int(tail) if sep and head and tail.isdigit() else None


class ThreadRef(NamedTuple):
    """Where a thread's dataset findings point: its id, source file and locator."""

    id: str
    source: str | None
    locator: str | None
