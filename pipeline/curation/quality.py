"""Quality heuristics for chat: what is wrong with an assistant's answers, each a named rule
with its threshold (QualitySettings), judged on the answers in context (the user turn each
answers), never on a document without roles.

Rules (codes as the flags and drop reasons name them):
- `empty_answer`: an answer with fewer than `min_answer_chars` non-space characters.
- `repetition`: an answer of at least `repetition_min_words` words (split on white space, as
  Gopher splits them; its fenced code left out: code repeats itself by nature) that repeats
  itself, by Gopher's repetition rules (Rae et al. 2021, table A1) with their limits times
  `repetition_factor`: more than 30% of its lines duplicated, or its most frequent 2-, 3-
  and 4-gram covering more than 20%, 18% and 16% of its characters, or its duplicated 5-
  to 10-grams more than 15% down to 10%. Gopher's own limits (factor 1) were set for web
  pages; on 10,063 real chat answers (the benchmarks' real data) they flag 7.1%, most of
  them sound (steps, lists, songs, worked sums); twice them (the default) flag 1.7% and
  still catch all of 189 planted loops (a sentence said 3 to 30 times after a real
  answer's opening).
- `refusal`: an answer that holds a refusal or boilerplate phrase (`refusal_phrases`: "As an
  AI language model", "I cannot assist with" ...; case-insensitive).
- `copies_user`: an answer that repeats the user turn it answers (the same words, or holds
  all of them when the turn is at least `copy_min_words` words long).
- `mojibake`: text decoded with the wrong encoding ("Ã©" for "é"), as ftfy's badness
  heuristic finds it.
- `cut_off`: the thread's last answer stops mid-sentence (it ends in a letter, a digit or
  a comma, not in punctuation, a closing bracket or a code fence) after at least
  `cut_off_min_chars` characters: an answer cut at the source's own length limit.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice

import numpy as np
import pyarrow as pa

from pipeline.curation.mojibake import bad_texts
from pipeline.curation.ngrams import WordGrams
from pipeline.curation.re2 import matching

REFUSAL_PHRASES = (
    "as an ai language model",
    "as a language model",
    "as an ai assistant, i",
    "i'm sorry, but i cannot",
    "i am sorry, but i cannot",
    "i'm sorry, but i can't",
    "i cannot assist with",
    "i can't assist with",
    "i'm unable to help with",
    "i cannot fulfill",
    "i can't fulfill",
    "i cannot provide assistance",
    "my knowledge cutoff",
    "i do not have personal opinions",
    "i don't have personal opinions",
)
"""The default refusal and boilerplate phrases (lower case)."""
RULES = ("empty_answer", "repetition", "refusal", "copies_user", "mojibake", "cut_off")
_WORD = re.compile(r"\w+", re.UNICODE)
COPY_GATE_WORDS = 8
"""How many of a user turn's longest words an answer must hold to be checked for a copy."""
_NOT_SPACE = re.compile(r"\S")
_FENCED_CODE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
_LINE_REPEAT, _TOP_NGRAM, _DUP_NGRAM = 0.30, {2: 0.20, 3: 0.18, 4: 0.16}, {
    5: 0.15, 6: 0.14, 7: 0.13, 8: 0.12, 9: 0.11, 10: 0.10,
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class QualitySettings:
    """Which rules run, and their thresholds."""

    rules: tuple[str, ...] = RULES
    min_answer_chars: int = 2
    repetition_min_words: int = 50
    repetition_factor: float = 2.0
    refusal_phrases: tuple[str, ...] = REFUSAL_PHRASES
    copy_min_words: int = 8
    cut_off_min_chars: int = 200


@dataclass(frozen=True, slots=True)
class Turn:
    """An assistant answer in its context: its text and the user turn before it ("" when
    none), and whether it is the thread's last answer."""

    text: str
    user: str
    last: bool


def quality_flags(turns: Sequence[Turn], settings: QualitySettings) -> list[str]:
    """The rules the answers break, in RULES order, each once."""
    return quality_flags_many([turns], settings)[0]


def quality_flags_many(
    threads: Sequence[Sequence[Turn]], settings: QualitySettings
) -> list[list[str]]:
    """`quality_flags` of each thread's answers. The phrase and mojibake signs of all the
    answers are searched at once (Arrow's RE2), and the repetition rules counted at once
    (numpy): their cost per call is paid once per batch."""
    judge = _Judge(settings, [turn.text for turns in threads for turn in turns])
    found: list[set[str]] = [set() for _ in threads]
    place = 0
    for row, turns in enumerate(threads):
        for turn in turns:
            found[row] |= judge.answer(turn, place, row)
            place += 1
    for row in judge.repeating_rows():
        found[row].add("repetition")
    return [[rule for rule in RULES if rule in flags] if flags else [] for flags in found]


class _Judge:
    """The rules over one batch of answers: what was searched in all of them at once, the
    user turns' words, and the answers left for the n-gram count."""

    def __init__(self, settings: QualitySettings, texts: list[str]):
        self.settings = settings
        rules = settings.rules
        column = pa.array(texts, pa.string())
        phrases = _phrases(settings.refusal_phrases)
        wanted = "refusal" in rules and phrases
        self.refusals = matching(column, phrases, any_case=True) if wanted else [False] * len(texts)
        self.mojibake = bad_texts(texts, column) if "mojibake" in rules else [False] * len(texts)
        self.asked: dict[str, tuple[list[str], list[str]]] = {}
        self.counted: list[tuple[int, list[str]]] = []

    def answer(self, turn: Turn, place: int, row: int) -> set[str]:
        """The rules the answer at `place` (of thread `row`) breaks, as far as it alone
        tells (the n-gram count comes in `repeating_rows`)."""
        settings, rules, text = self.settings, self.settings.rules, turn.text
        if "empty_answer" in rules and _nearly_empty(text, settings.min_answer_chars):
            return {"empty_answer"}
        flags = {"refusal"} if self.refusals[place] else set()
        if self.mojibake[place]:
            flags.add("mojibake")
        lowered = text.lower() if "copies_user" in rules or "repetition" in rules else ""
        if "copies_user" in rules and _copies(lowered, turn.user, settings, self.asked):
            flags.add("copies_user")
        if "repetition" in rules and self._repeats(lowered, row):
            flags.add("repetition")
        if "cut_off" in rules and turn.last and _cut_off(text, settings.cut_off_min_chars):
            flags.add("cut_off")
        return flags

    def _repeats(self, lowered: str, row: int) -> bool:
        """Whether the answer's lines repeat; one long enough whose lines do not is kept
        for the n-gram count."""
        prose = _FENCED_CODE.sub("\n", lowered) if "```" in lowered else lowered
        words = prose.split()
        if len(words) < max(self.settings.repetition_min_words, 1):
            return False
        if _repeats_lines(prose, self.settings.repetition_factor):
            return True
        self.counted.append((row, words))
        return False

    def repeating_rows(self) -> list[int]:
        """The threads with an answer that breaks Gopher's n-gram rules."""
        if not self.counted:
            return []
        repeating = _repeats_ngrams(
            [words for _, words in self.counted], self.settings.repetition_factor
        )
        return [
            row
            for (row, _), repeats in zip(self.counted, repeating.tolist(), strict=True)
            if repeats
        ]


def _phrases(phrases: tuple[str, ...]) -> str:
    """The phrases as one RE2 expression of literals (empty when there are none)."""
    return "|".join(map(re.escape, phrases))


def _nearly_empty(text: str, min_chars: int) -> bool:
    """Whether `text` holds fewer than `min_chars` characters that are not white space
    (it stops counting at `min_chars`; up to 2, the stripped text's two ends tell)."""
    if min_chars <= 2 and len(text.strip()) >= min_chars:
        return False
    return sum(1 for _ in islice(_NOT_SPACE.finditer(text), min_chars)) < min_chars


def _copies(
    answer: str, user: str, settings: QualitySettings, asked: dict[str, tuple[list[str], list[str]]]
) -> bool:
    """Whether the (lower-cased) answer's words are the user turn's, or hold all of them
    in a row when there are at least `copy_min_words`. The answer's words are split only
    when it holds the user turn's COPY_GATE_WORDS longest words (`asked` keeps each user
    turn's words and those): 5% of real answers do."""
    if user not in asked:
        said = _WORD.findall(user.lower())
        asked[user] = (said, sorted(set(said), key=len, reverse=True)[:COPY_GATE_WORDS])
    said, longest = asked[user]
    if not said or not all(word in answer for word in longest):
        return False
    words = _WORD.findall(answer)
    if words == said:
        return True
    return len(said) >= settings.copy_min_words and " ".join(said) in " ".join(words)


def _cut_off(text: str, min_chars: int) -> bool:
    """Whether an answer of at least `min_chars` ends in a letter, a digit or a comma."""
    if len(text) < min_chars:
        return False
    ending = text.rstrip()[-1:]
    return ending.isalnum() or ending in ",_"


def _repeats_lines(text: str, factor: float) -> bool:
    """Gopher's duplicate-line rule: more than its share of the non-empty lines repeat."""
    lines = [line for line in map(str.strip, text.splitlines()) if line]
    return len(lines) > 1 and 1 - len(set(lines)) / len(lines) > _LINE_REPEAT * factor


def _repeats_ngrams(texts: list[list[str]], factor: float) -> np.ndarray:
    """For each text (its words, at least one), whether it breaks Gopher's n-gram rules
    (the module docstring) with their limits times `factor`."""
    grams = WordGrams(texts)
    chars = grams.chars
    totals = chars[grams.offsets[1:]] - chars[grams.offsets[:-1]]
    counted = _occurrences(grams, (*_TOP_NGRAM, 5))
    repeats = np.zeros(len(texts), bool)
    for n, limit in _TOP_NGRAM.items():
        counts, which, starts = counted[n]
        top = np.zeros(len(texts), np.int64)
        np.maximum.at(top, which, counts)
        first = np.full(len(texts), grams.count, np.int64)
        np.minimum.at(first, which, np.where(counts == top[which], starts, grams.count))
        has = top > 1
        covered = np.zeros(len(texts), np.int64)
        covered[has] = top[has] * (chars[first[has] + n] - chars[first[has]])
        repeats |= has & (covered > limit * factor * totals)
    # a duplicated (n+1)-gram holds a duplicated n-gram, so the share falls as n grows,
    # and so do the limits: below the last limit at n = 5, no n is over its own
    share = _duplicated_share(grams, counted[5], 5) / totals
    unsure = np.flatnonzero(~repeats & (share > min(_DUP_NGRAM.values()) * factor))
    if len(unsure):
        subset = WordGrams([texts[row] for row in unsure])
        sub_totals = totals[unsure]
        counted = _occurrences(subset, tuple(_DUP_NGRAM))
        for n, limit in _DUP_NGRAM.items():
            over = _duplicated_share(subset, counted[n], n) / sub_totals > limit * factor
            repeats[unsure[over]] = True
    return repeats


_SPREAD = np.uint64(0xD6E8FEB86659FD93)
"""Odd: the text's index times it, added to a gram's hash, keeps the texts' grams apart."""


def _occurrences(
    grams: WordGrams, sizes: tuple[int, ...]
) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """For each n in `sizes`, every n-gram window of every text: how often the same n-gram
    occurs in its text, the text and the window's start (all sizes and texts in one sort:
    grams of different sizes hash apart, and the text is mixed into the hash)."""
    parts = [grams.windows(n) for n in sizes]
    keys = np.concatenate(
        [hashes + which.astype(np.uint64) * _SPREAD for hashes, which, _ in parts]
    )
    _, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    ends = np.cumsum([len(part[0]) for part in parts])
    each = np.split(counts[inverse], ends[:-1])
    return {n: (each[k], parts[k][1], parts[k][2]) for k, n in enumerate(sizes)}


def _duplicated_share(
    grams: WordGrams, counted: tuple[np.ndarray, np.ndarray, np.ndarray], n: int
) -> np.ndarray:
    """For each text, its characters inside an n-gram that occurs in it more than once
    (each character counted once), from the n-grams' counts, texts and starts."""
    counts, _, starts = counted
    repeated = starts[counts > 1]
    size = grams.count + 1
    depth = np.bincount(repeated, minlength=size) - np.bincount(repeated + n, minlength=size)
    inside = np.cumsum(depth[:-1]) > 0
    word_chars = np.diff(grams.chars)
    texts = np.repeat(np.arange(len(grams.offsets) - 1), np.diff(grams.offsets))
    return np.bincount(texts, weights=word_chars * inside, minlength=len(grams.offsets) - 1)
