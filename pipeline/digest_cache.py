"""A bounded memo keyed by a digest of its (possibly large) key text: datasets repeat the
same developer prompts and tool schemas thousands of times, and a cache that kept each
text alive as its key would grow with their size."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Generic, TypeVar

Value = TypeVar("Value")


class DigestCache(Generic[Value]):
    """Values computed once per distinct text, at most `max_entries` of them (the cache
    starts over when full: cheap, and repeats come in runs)."""

    def __init__(self, max_entries: int = 65536):
        self.max_entries = max_entries
        self._values: dict[bytes, Value] = {}

    def get(self, text: str | bytes, make: Callable[[], Value]) -> Value:
        """The value for `text`, computed by `make()` the first time it is seen."""
        data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
        key = hashlib.blake2b(data, digest_size=16).digest()
        value = self._values.get(key)
        if value is None:
            if len(self._values) >= self.max_entries:
                self._values.clear()
            value = self._values[key] = make()
        return value
