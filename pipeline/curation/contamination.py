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
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pipeline.curation.ngrams import WordGrams

NGRAM = 13
"""GPT-3's n (words)."""
_WORD = re.compile(r"\w+", re.UNICODE)


def words(text: str) -> list[str]:
    """The text normalised to its words: NFKC, lower case, punctuation and spacing gone."""
    return _WORD.findall(unicodedata.normalize("NFKC", text).lower())


HEAD = 4
"""Words a lookup checks first: only where the index holds a gram starting with the same
HEAD words (fewer when an item is shorter) are the full n-grams hashed and looked up."""


@dataclass
class NgramIndex:
    """The n-grams of evaluation texts, each to the first item that has it."""

    n: int = NGRAM
    item_ids: list[str] = field(default_factory=list)
    short_lengths: set[int] = field(default_factory=set)
    """The word counts of the items shorter than n, matched as a whole."""
    _texts: list[list[str]] = field(default_factory=list)
    _built: _Built | None = None

    @property
    def items(self) -> int:
        return len(self.item_ids)

    def add(self, item: str, text: str) -> None:
        """Index one evaluation text under the item id `item`."""
        found = words(text)
        if not found:
            return
        if len(found) < self.n:
            self.short_lengths.add(len(found))
        self._texts.append(found)
        self.item_ids.append(item)
        self._built = None

    def build(self) -> None:
        """Build the index now (it is otherwise built for the first lookup)."""
        self._index()

    def matches(self, text: str) -> list[str]:
        """The evaluation items the text holds an n-gram of (or the whole of), in order."""
        return self.matches_many([text])[0]

    def matches_many(self, texts: Sequence[str]) -> list[list[str]]:
        """`matches` of each text, all looked up at once: the texts' word heads are checked
        against the index's in one search, and the full n-grams only where a head is in it."""
        built = self._index()
        found: list[list[str]] = [[] for _ in texts]
        if not len(built.keys) or not texts:
            return found
        grams = WordGrams([words(text) for text in texts])
        heads, _, starts = grams.windows(built.head)
        starts = starts[_isin(heads, built.heads)]
        sizes = (self.n, *sorted(self.short_lengths))
        parts = [grams.at(starts, size) for size in sizes]
        hashes, which, at = (np.concatenate(part) for part in zip(*parts, strict=True))
        rank = np.repeat(np.arange(len(sizes)), [len(part[0]) for part in parts])
        places = _places(built.keys, hashes)
        hit = np.flatnonzero(built.keys[places] == hashes)
        # in each text: the items in the order their grams come (n first, then the
        # shorter items by length; each by position), each item once
        hit = hit[np.lexsort((at[hit], rank[hit], which[hit]))]
        pairs = which[hit] * len(self.item_ids) + built.owners[places[hit]]
        _, first = np.unique(pairs, return_index=True)
        first.sort()
        for text, owner in zip(
            which[hit[first]].tolist(), built.owners[places[hit[first]]].tolist(), strict=True
        ):
            found[text].append(self.item_ids[owner])
        return found

    def _index(self) -> _Built:
        """The sorted gram hashes, the item each came from first, and the sorted hashes of
        the grams' heads (built once, after the last `add`)."""
        if self._built is None:
            grams = WordGrams(self._texts)
            lengths = np.diff(grams.offsets)
            head = min(HEAD, self.n, *self.short_lengths)
            every_head = np.zeros(grams.count + 1, np.uint64)
            head_hashes, _, head_starts = grams.windows(head)
            every_head[head_starts] = head_hashes
            hashes, owners, starts = [], [], []
            for size in (self.n, *sorted(self.short_lengths)):
                gram, text, start = grams.windows(size)
                whole = lengths[text] == size if size < self.n else lengths[text] >= size
                hashes.append(gram[whole])
                owners.append(text[whole])
                starts.append(start[whole])
            keys, first = np.unique(np.concatenate(hashes), return_index=True)
            self._built = _Built(
                keys,
                np.concatenate(owners)[first],
                np.unique(every_head[np.concatenate(starts)]),
                head,
            )
        return self._built


@dataclass(frozen=True, slots=True)
class _Built:
    """An index ready for lookups: `keys` sorted, `owners[i]` the item of `keys[i]`, the
    sorted `heads` of every key's first `head` words."""

    keys: np.ndarray
    owners: np.ndarray
    heads: np.ndarray
    head: int


def _isin(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """Whether each of `values` is in `sorted_set` (sorted, not empty)."""
    found: np.ndarray = sorted_set[_places(sorted_set, values)] == values
    return found


def _places(sorted_set: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Where each of `values` is, or would be, in `sorted_set` (sorted, not empty; the
    last place for what is past its end). The values are searched for in sorted order,
    several times faster than in their own: each search starts where the last ended."""
    order = np.argsort(values)
    places = np.empty(len(values), np.int64)
    places[order] = np.searchsorted(sorted_set, values[order])
    return np.minimum(places, len(sorted_set) - 1)
