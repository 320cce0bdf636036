"""What a run's driver remembers of every thread it decides: each 64-bit content key with
the value it was first seen with, and the ids it names. Kept in numpy arrays and byte
buffers (about 16 bytes a key and an id's UTF-8 bytes), not dict entries and str objects
(about 200 bytes a thread), so a run that does not partition its keys holds little more
per thread than the keys themselves."""

from __future__ import annotations

from array import array
from collections.abc import Iterable

import numpy as np

SETTLE_KEYS = 4096
"""Recent keys held in a dict before they are merged into the sorted arrays, at least (a
sixteenth of the keys settled, past that: each key is copied a bounded number of times).
Few: a long-lived dict's small objects between a run's short-lived ones keep the memory
they are spread over from being given back."""


class FirstSeen:
    """64-bit keys, each with the value (an integer) it was first added with. Recent keys
    are in a dict; every SETTLE_KEYS or so they are merged into sorted arrays, which
    `prefetch` looks up for a batch of keys at once before that batch's `get`s."""

    def __init__(self) -> None:
        self._keys = np.empty(0, np.uint64)
        self._values = np.empty(0, np.int64)
        self._recent: dict[int, int] = {}
        self._fetched: dict[int, int] = {}
        self._asked: set[int] = set()

    def __len__(self) -> int:
        return len(self._keys) + len(self._recent)

    def prefetch(self, keys: Iterable[int]) -> None:
        """Look up `keys` (the next batch's) in the settled arrays, in one search: `get`
        answers from those found and the recent dict until the next prefetch."""
        if len(self._recent) >= max(SETTLE_KEYS, len(self._keys) // 16):
            self._settle()
        wanted = np.fromiter(keys, np.uint64)
        self._fetched = {}
        self._asked = set(wanted.tolist())
        if not len(self._keys) or not len(wanted):
            return
        at = np.searchsorted(self._keys, wanted)
        inside = at < len(self._keys)
        hits = np.flatnonzero(inside)[self._keys[at[inside]] == wanted[inside]]
        found = self._values[at[hits]].tolist()
        self._fetched = dict(zip(wanted[hits].tolist(), found, strict=True))

    def get(self, key: int) -> int | None:
        """The value `key` was first added with, or None: from the recent keys and those
        prefetched, else (a key not prefetched) searched alone."""
        found = self._recent.get(key)
        if found is not None or key in self._asked:
            return found if found is not None else self._fetched.get(key)
        if not len(self._keys):
            return None
        at = int(np.searchsorted(self._keys, np.uint64(key)))
        if at < len(self._keys) and int(self._keys[at]) == key:
            return int(self._values[at])
        return None

    def add(self, key: int, value: int) -> None:
        """Remember `key` with `value` (a key not seen before: `get` gave None)."""
        self._recent[key] = value

    def _settle(self) -> None:
        """Merge the recent keys into the sorted arrays (linear in the keys held)."""
        keys = np.fromiter(self._recent.keys(), np.uint64, len(self._recent))
        values = np.fromiter(self._recent.values(), np.int64, len(self._recent))
        order = np.argsort(keys)
        keys, values = keys[order], values[order]
        at = np.searchsorted(self._keys, keys)
        self._keys = np.insert(self._keys, at, keys)
        self._values = np.insert(self._values, at, values)
        self._recent = {}


class CompactTexts:
    """Texts (or None) kept as UTF-8 in one buffer, each by its number: what an id costs
    is its bytes and 8."""

    def __init__(self) -> None:
        self._data = bytearray()
        self._ends = array("q")

    def add(self, text: str | None) -> int:
        """Keep `text`; its number (-1 for None)."""
        if text is None:
            return -1
        self._data += text.encode("utf-8", "surrogatepass")
        self._ends.append(len(self._data))
        return len(self._ends) - 1

    def get(self, number: int) -> str | None:
        """The text kept as `number`."""
        if number < 0:
            return None
        start = self._ends[number - 1] if number else 0
        return self._data[start : self._ends[number]].decode("utf-8", "surrogatepass")
