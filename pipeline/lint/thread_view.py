"""A thread as the rules see it: the thread plus facts several rules need, computed once
(capabilities, settings by name, declared tool schemas), so the rule set stays linear in
the thread's length."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cached_property
from typing import Any, TypeVar

from pipeline.capabilities import ThreadCapabilities, thread_capabilities
from pipeline.lint.diagnostic import ThreadRef
from pipeline.mms import Format, Thread

T = TypeVar("T")


class ThreadView:
    """Read-only facts about one thread, shared by every rule that checks it."""

    def __init__(self, thread: Thread, places: Mapping[str, str] | None = None):
        """`places`: the files as the user named them, by the name their threads record
        (`Linter.places`): findings point at the file, not at the name."""
        self.thread = thread
        self.places = places
        self._shared: dict[str, Any] = {}

    def shared(self, name: str, compute: Callable[[ThreadView], T]) -> T:
        """A fact several rules take alike (`compute(view)`), computed once per thread."""
        if name not in self._shared:
            self._shared[name] = compute(self)
        return self._shared[name]  # type: ignore[no-any-return]

    @property
    def id(self) -> str:
        return self.thread.id

    @property
    def source(self) -> str | None:
        source = self.thread.meta.get("source")
        if not isinstance(source, str):
            return None
        return self.places.get(source, source) if self.places else source

    @property
    def locator(self) -> str | None:
        locator = self.thread.meta.get("locator")
        if locator is None:
            return None
        text = str(locator)
        source = self.thread.meta.get("source")
        if not self.places or not isinstance(source, str) or source not in self.places:
            return text
        if not text.startswith(source):
            return text
        return self.places[source] + text[len(source) :]

    @property
    def ref(self) -> ThreadRef:
        """Where findings on this thread point."""
        return ThreadRef(self.id, self.source, self.locator)

    @cached_property
    def capabilities(self) -> ThreadCapabilities:
        return thread_capabilities(self.thread)

    @cached_property
    def settings(self) -> dict[str, Format] | None:
        """settings.formats by name; None when the thread gives no settings."""
        if self.thread.settings is None:
            return None
        return {f.name: f for f in self.thread.settings.formats}

    @cached_property
    def tool_schemas(self) -> dict[str, Any]:
        """The JSON Schemas the source declared for its tools (`meta.tool_schemas`)."""
        schemas = self.thread.meta.get("tool_schemas")
        return schemas if isinstance(schemas, dict) else {}

    def sampler(self, format_name: str) -> str | None:
        """The syntax a format's content must have: the settings sampler if it is json or
        jsonl, else what the name says (`json`, `jsonl`, `tool:json`, `tool:jsonl`)."""
        settings = self.settings
        declared = settings.get(format_name) if settings else None
        if declared is not None and declared.sampler in ("json", "jsonl"):
            return str(declared.sampler)
        syntax = format_name.rpartition(":")[2]
        return syntax if syntax in ("json", "jsonl") else None

    def halts_on_completion(self, format_name: str) -> bool:
        settings = self.settings
        declared = settings.get(format_name) if settings else None
        return declared is not None and declared.halt_on_completion
