"""Word n-grams as 64-bit hashes, every window of many texts at once: the words of all the
texts are hashed (by Python, so hashes are compared only within one process) and laid end
to end, their prefix sums weighted by powers of an odd base are taken once, and every
window's hash is then two array operations away, whatever its length; a window that would
cross from one text into the next is left out. Decontamination and the repetition rules
count n-grams by these, a batch of texts per call (numpy's cost per call is paid once per
batch, not once per message).

    >>> grams = WordGrams([["a", "b", "a", "b"], ["a", "b"]])
    >>> hashes, texts, starts = grams.windows(2)
    >>> (texts.tolist(), starts.tolist())
    ([0, 0, 0, 1], [0, 1, 2, 4])
    >>> (hashes[0] == hashes[2] == hashes[3], hashes[0] == hashes[1])
    (np.True_, np.False_)
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain

import numpy as np

_BASE = 0x9E3779B97F4A7C15
"""The polynomial's base (odd, so it has an inverse modulo 2**64)."""
_INVERSE = pow(_BASE, -1, 2**64)


class _Powers:
    """BASE**i and BASE**-i modulo 2**64 for i below a size that grows as asked."""

    def __init__(self) -> None:
        self.up = np.ones(1, np.uint64)
        self.down = np.ones(1, np.uint64)

    def upto(self, count: int) -> tuple[np.ndarray, np.ndarray]:
        if len(self.up) < count:
            size = max(count, 2 * len(self.up))
            self.up = _powers(_BASE, size)
            self.down = _powers(_INVERSE, size)
        return self.up[:count], self.down[:count]


def _powers(base: int, count: int) -> np.ndarray:
    """base**0 .. base**(count-1) modulo 2**64 (numpy's unsigned products wrap)."""
    steps = np.full(count, base, np.uint64)
    steps[0] = 1
    return np.cumprod(steps, dtype=np.uint64)


_POWERS = _Powers()


class WordGrams:
    """The n-gram hashes of a sequence of texts, each given as its list of words.

    `offsets[i]:offsets[i + 1]` are text i's words in the run of all the words; `chars`
    is the cumulative length of the words (`chars[j]` characters before word j)."""

    def __init__(self, texts: Sequence[list[str]]):
        counts = np.fromiter(map(len, texts), np.int64, len(texts))
        self.offsets = np.zeros(len(texts) + 1, np.int64)
        np.cumsum(counts, out=self.offsets[1:])
        self.count = int(self.offsets[-1])
        words = list(chain.from_iterable(texts))
        up, self._down = _POWERS.upto(self.count + 1)
        hashes = np.fromiter(map(hash, words), np.int64, self.count).view(np.uint64)
        self._prefix = np.zeros(self.count + 1, np.uint64)
        np.cumsum(hashes * up[: self.count], out=self._prefix[1:])
        self.chars = np.zeros(self.count + 1, np.int64)
        np.cumsum(np.fromiter(map(len, words), np.int64, self.count), out=self.chars[1:])
        self._text_of_word = np.repeat(np.arange(len(texts), dtype=np.int64), counts)

    def windows(self, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every run of `size` words inside one text: its hash, its text's index and the
        position of its first word in the run of all words; in text order, then word order.
        The same words give the same hash in any text."""
        if size < 1 or size > self.count:
            empty = np.empty(0, np.int64)
            return np.empty(0, np.uint64), empty, empty
        return self.at(np.arange(self.count - size + 1, dtype=np.int64), size)

    def at(self, starts: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The runs of `size` words beginning at `starts` (positions in the run of all
        words) that stay inside their text: hashes, texts and starts, as `windows` gives."""
        texts = self._text_of_word[starts]
        inside = starts + size <= self.offsets[texts + 1]
        starts, texts = starts[inside], texts[inside]
        spans = self._prefix[starts + size] - self._prefix[starts]
        return spans * self._down[starts], texts, starts
