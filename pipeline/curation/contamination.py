"""Contamination with evaluation sets: training text that holds an evaluation item's text,
found by word n-gram overlap, as GPT-3 (Brown et al. 2020, appendix C: 13-grams),
Tülu and OLMo decontaminate: both sides are normalised (Unicode NFKC, lower case,
punctuation dropped, split into words), every n-gram of an evaluation item is indexed,
and a training text holding any of them is a match. An item shorter than n words is
matched as a whole (its words, in a row, anywhere in the training text).

The index holds the evaluation side only (its n-grams, to the items they come from); the
training side streams through `matches`, linear in its length. Prompts and answers are
indexed apart: user turns are checked against the evaluation prompts, assistant turns
against its reference answers.

    >>> index = NgramIndex(n=4)
    >>> index.add("mt-bench:81", "Compose an engaging travel blog post about Hawaii")
    >>> index.matches("please COMPOSE an engaging travel blog post about Hawaii, thanks")
    ['mt-bench:81']
    >>> index.matches("Write a fun post on a trip to Hawaii")
    []
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

import numpy as np

from pipeline.curation.ngrams import WordGrams

NGRAM = 13
"""GPT-3's n (words)."""
_WORD = re.compile(r"\w+", re.UNICODE)


def words(text: str) -> list[str]:
    """The text normalised to its words: NFKC, lower case, punctuation and spacing gone."""
    return _WORD.findall(unicodedata.normalize("NFKC", text).lower())


@dataclass
class NgramIndex:
    """The n-grams of evaluation texts, each to the first item that has it."""

    n: int = NGRAM
    item_ids: list[str] = field(default_factory=list)
    short_lengths: set[int] = field(default_factory=set)
    """The word counts of the items shorter than n, matched as a whole."""
    _pending: list[tuple[np.ndarray, int]] = field(default_factory=list)
    _keys: np.ndarray | None = None
    _owners: np.ndarray | None = None

    @property
    def items(self) -> int:
        return len(self.item_ids)

    def add(self, item: str, text: str) -> None:
        """Index one evaluation text under the item id `item`."""
        found = words(text)
        if not found:
            return
        size = min(len(found), self.n)
        if size < self.n:
            self.short_lengths.add(size)
        self._pending.append((WordGrams(found).windows(size), len(self.item_ids)))
        self.item_ids.append(item)
        self._keys = None

    def matches(self, text: str) -> list[str]:
        """The evaluation items the text holds an n-gram of (or the whole of), in order."""
        keys, owners = self._index()
        if not len(keys):
            return []
        grams = WordGrams(words(text))
        sizes = (self.n, *sorted(self.short_lengths))
        found = np.concatenate([grams.windows(size) for size in sizes])
        if not len(found):
            return []
        places = np.minimum(np.searchsorted(keys, found), len(keys) - 1)
        hits = owners[places[keys[places] == found]].tolist()
        return [self.item_ids[owner] for owner in dict.fromkeys(hits)]

    def _index(self) -> tuple[np.ndarray, np.ndarray]:
        """The sorted gram hashes and the item each came from first (built once)."""
        if self._keys is None or self._owners is None:
            if self._pending:
                grams = np.concatenate([g for g, _ in self._pending])
                owners = np.concatenate([np.full(len(g), o, np.int64) for g, o in self._pending])
            else:
                grams, owners = np.empty(0, np.uint64), np.empty(0, np.int64)
            keys, first = np.unique(grams, return_index=True)
            self._keys, self._owners = keys, owners[first]
        return self._keys, self._owners
