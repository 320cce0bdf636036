"""Word n-grams as 64-bit hashes, every window of a text at once: the words are hashed
(by Python, so hashes are compared only within one process), their prefix sums weighted by
powers of an odd base are taken once, and any window's hash is then two array operations
away, whatever its length. Decontamination and the repetition rules count n-grams by these.

    >>> grams = WordGrams(["a", "b", "a", "b"])
    >>> (grams.windows(2)[0] == grams.windows(2)[2], grams.windows(2)[0] == grams.windows(2)[1])
    (True, False)
"""

from __future__ import annotations

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
    """The n-gram hashes of one list of words."""

    def __init__(self, words: list[str]):
        self.count = len(words)
        up, self._down = _POWERS.upto(self.count + 1)
        hashes = np.fromiter(map(hash, words), np.int64, self.count).view(np.uint64)
        self._prefix = np.zeros(self.count + 1, np.uint64)
        np.cumsum(hashes * up[: self.count], out=self._prefix[1:])

    def windows(self, size: int) -> np.ndarray:
        """The hash of every run of `size` words, in order (empty when there are fewer)."""
        if size > self.count or size < 1:
            return np.empty(0, np.uint64)
        spans = self._prefix[size:] - self._prefix[: self.count - size + 1]
        return spans * self._down[: self.count - size + 1]
