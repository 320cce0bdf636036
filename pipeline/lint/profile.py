"""What the dataset looks like, for the report's charts: counters only (messages per
thread, content length, roles, formats, capability use), so memory stays bounded."""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pipeline.capabilities import DEFAULT_CAPABILITY
from pipeline.lint.thread_view import ThreadView

LENGTH_BUCKETS: tuple[int, ...] = (0, 16, 64, 256, 1024, 4096, 16384, 65536)
"""Lower bounds (in characters) of the content-length histogram's buckets."""


def length_bucket(length: int) -> int:
    """The lower bound of the bucket `length` falls in."""
    return LENGTH_BUCKETS[max(0, bisect_right(LENGTH_BUCKETS, length) - 1)]


@dataclass
class DatasetProfile:
    """Distributions over the threads linted."""

    threads: int = 0
    messages: int = 0
    messages_per_thread: Counter[int] = field(default_factory=Counter)
    roles: Counter[str] = field(default_factory=Counter)
    formats: Counter[str] = field(default_factory=Counter)
    content_length: dict[str, Counter[int]] = field(default_factory=dict)
    """role -> length bucket -> messages."""
    capability_enabled: Counter[str] = field(default_factory=Counter)
    """threads enabling each non-default format (developer/platform or settings)."""
    capability_used: Counter[str] = field(default_factory=Counter)
    """threads using each non-default format."""
    media_threads: int = 0
    """threads holding media (images, audio, video)."""

    def observe(self, view: ThreadView) -> None:
        messages = view.thread.messages
        self.threads += 1
        self.messages += len(messages)
        self.messages_per_thread[len(messages)] += 1
        roles, lengths = self.roles, self.content_length
        if any(message.media for message in messages):
            self.media_threads += 1
        for message in messages:
            role = message.role
            roles[role] += 1
            if role == "assistant":
                self.formats[message.format or DEFAULT_CAPABILITY] += 1
            buckets = lengths.get(role)
            if buckets is None:
                buckets = lengths[role] = Counter()
            buckets[length_bucket(len(message.content))] += 1
        caps = view.capabilities
        self.capability_enabled.update(n for n in caps.enabled if n != DEFAULT_CAPABILITY)
        self.capability_used.update({use.format for use in caps.uses})

    def merge(self, other: DatasetProfile) -> None:
        """Add the counts of a profile taken over other threads (a part's)."""
        self.threads += other.threads
        self.messages += other.messages
        self.messages_per_thread.update(other.messages_per_thread)
        self.roles.update(other.roles)
        self.formats.update(other.formats)
        for role, buckets in other.content_length.items():
            self.content_length.setdefault(role, Counter()).update(buckets)
        self.capability_enabled.update(other.capability_enabled)
        self.capability_used.update(other.capability_used)
        self.media_threads += other.media_threads

    def state(self) -> dict[str, Any]:
        """Every counter, as JSON-able data (`from_state` reads it back)."""
        return {
            "threads": self.threads,
            "messages": self.messages,
            "messages_per_thread": sorted(self.messages_per_thread.items()),
            "roles": sorted(self.roles.items()),
            "formats": sorted(self.formats.items()),
            "content_length": {
                role: sorted(buckets.items())
                for role, buckets in sorted(self.content_length.items())
            },
            "capability_enabled": sorted(self.capability_enabled.items()),
            "capability_used": sorted(self.capability_used.items()),
            "media_threads": self.media_threads,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> DatasetProfile:
        return cls(
            threads=state["threads"],
            messages=state["messages"],
            messages_per_thread=Counter(dict(state["messages_per_thread"])),
            roles=Counter(dict(state["roles"])),
            formats=Counter(dict(state["formats"])),
            content_length={
                role: Counter(dict(buckets)) for role, buckets in state["content_length"].items()
            },
            capability_enabled=Counter(dict(state["capability_enabled"])),
            capability_used=Counter(dict(state["capability_used"])),
            media_threads=state["media_threads"],
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "threads": self.threads,
            "messages": self.messages,
            "messages_per_thread": {str(k): v for k, v in sorted(self.messages_per_thread.items())},
            "roles": dict(self.roles.most_common()),
            "formats": dict(self.formats.most_common()),
            "content_length": {
                role: {str(k): v for k, v in sorted(buckets.items())}
                for role, buckets in sorted(self.content_length.items())
            },
            "capabilities": self.capabilities(),
        }

    def capabilities(self) -> dict[str, dict[str, int]]:
        """Per non-default format: threads enabling it and threads using it."""
        names = sorted(set(self.capability_enabled) | set(self.capability_used))
        return {
            name: {"enabled": self.capability_enabled[name], "used": self.capability_used[name]}
            for name in names
        }
