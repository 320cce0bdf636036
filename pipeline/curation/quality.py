"""Quality heuristics for chat: what is wrong with an assistant's answers, each a named rule
with its threshold (QualitySettings), judged on the answers in context (the user turn each
answers), never on a document without roles.

Rules (codes as the flags and drop reasons name them):
- `empty_answer`: an answer with fewer than `min_answer_chars` non-space characters.
- `repetition`: an answer of at least `repetition_min_words` words (its fenced code left
  out: code repeats itself by nature) that repeats itself, by Gopher's repetition rules
  (Rae et al. 2021, table A1) with their limits times `repetition_factor`: more than 30% of
  its lines duplicated, or its most frequent 2-, 3- and 4-gram covering more than 20%, 18%
  and 16% of its characters, or its duplicated 5- to 10-grams more than 15% down to 10%.
  Gopher's own limits (factor 1) were set for web pages; on the 10,063 answers of
  ../shared/realdata they flag 8.7%, most of them sound (steps, lists, songs, worked
  sums); twice them (the default) flag 2.4% and still catch all of 189 planted loops (a
  sentence said 3 to 30 times after a real answer's opening).
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

import ftfy.badness
import numpy as np

from pipeline.curation.ngrams import WordGrams

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
_FENCED_CODE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
_MAY_BE_MOJIBAKE = re.compile("[\x80-\u25ff\ufb01\ufb02\ufffd]")
"""Every sequence ftfy's badness expression matches holds one of these (Latin-1, Latin
Extended, Greek, Cyrillic, punctuation, currency, maths and box-drawing characters, the
fi and fl ligatures, the replacement character): text with none of them (ASCII, or CJK
without Western punctuation) is not searched."""
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
    found: set[str] = set()
    rules = settings.rules
    phrases = tuple(phrase.lower() for phrase in settings.refusal_phrases)
    for turn in turns:
        text = turn.text
        if "empty_answer" in rules and len("".join(text.split())) < settings.min_answer_chars:
            found.add("empty_answer")
            continue
        lowered = text.lower()
        if "refusal" in rules and any(phrase in lowered for phrase in phrases):
            found.add("refusal")
        if "copies_user" in rules and _copies(lowered, turn.user, settings.copy_min_words):
            found.add("copies_user")
        if "mojibake" in rules and _MAY_BE_MOJIBAKE.search(text) and ftfy.badness.is_bad(text):
            found.add("mojibake")
        if "repetition" in rules and _repetitive(lowered, settings):
            found.add("repetition")
        if "cut_off" in rules and turn.last and _cut_off(text, settings.cut_off_min_chars):
            found.add("cut_off")
    return [rule for rule in RULES if rule in found]


def _copies(answer_text: str, user: str, min_words: int) -> bool:
    asked = _WORD.findall(user.lower())
    if not asked:
        return False
    answer = _WORD.findall(answer_text)
    if not answer:
        return False
    if answer == asked:
        return True
    return len(asked) >= min_words and " ".join(asked) in " ".join(answer)


def _cut_off(text: str, min_chars: int) -> bool:
    """Whether an answer of at least `min_chars` ends in a letter, a digit or a comma."""
    if len(text) < min_chars:
        return False
    ending = text.rstrip()[-1:]
    return ending.isalnum() or ending in ",_"


def _repetitive(text: str, settings: QualitySettings) -> bool:
    """Gopher's repetition rules on one (lower-cased) answer (see the module docstring)."""
    if "```" in text:
        text = _FENCED_CODE.sub("\n", text)
    words = _WORD.findall(text)
    if len(words) < settings.repetition_min_words:
        return False
    factor = settings.repetition_factor
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) > 1 and 1 - len(set(lines)) / len(lines) > _LINE_REPEAT * factor:
        return True
    grams = WordGrams(words)
    lengths = np.zeros(len(words) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, words), np.int64, len(words)), out=lengths[1:])
    counts = _occurrences(grams, (*_TOP_NGRAM, 5))
    for n, limit in _TOP_NGRAM.items():
        first = int(np.argmax(counts[n]))
        top = counts[n][first]
        if top > 1 and top * (lengths[first + n] - lengths[first]) > limit * lengths[-1]:
            return True
    # a duplicated (n+1)-gram holds a duplicated n-gram, so the share falls as n grows,
    # and so do the limits: below the last limit at n = 5, no n is over its own
    if _duplicated_share(counts[5], lengths, 5) <= min(_DUP_NGRAM.values()):
        return False
    counts = _occurrences(grams, tuple(_DUP_NGRAM))
    return any(_duplicated_share(counts[n], lengths, n) > limit for n, limit in _DUP_NGRAM.items())


def _occurrences(grams: WordGrams, sizes: tuple[int, ...]) -> dict[int, np.ndarray]:
    """For each n in `sizes` and each position, how often the n-gram there occurs in the
    answer (all sizes in one sort: grams of different sizes hash apart)."""
    hashes = np.concatenate([grams.windows(n) for n in sizes])
    order = hashes.argsort()
    ordered = hashes[order]
    starts = np.empty(len(ordered) + 1, bool)
    starts[0] = starts[-1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=starts[1:-1])
    bounds = np.flatnonzero(starts)
    sizes_of_runs = bounds[1:] - bounds[:-1]
    counts = np.empty(len(ordered), np.int64)
    counts[order] = np.repeat(sizes_of_runs, sizes_of_runs)
    ends = np.cumsum([len(grams.windows(n)) for n in sizes])
    return dict(zip(sizes, np.split(counts, ends[:-1]), strict=True))


def _duplicated_share(counts: np.ndarray, lengths: np.ndarray, n: int) -> float:
    """The share of the answer's characters inside an n-gram that occurs more than once
    (each character counted once), from the n-grams' `counts` and the words' cumulative
    `lengths`."""
    starts = np.flatnonzero(counts > 1)
    if not len(starts):
        return 0.0
    depth = np.zeros(len(lengths), np.int64)
    depth[starts] += 1
    depth[starts + n] -= 1
    covered = np.cumsum(depth[:-1]) > 0
    return float((lengths[1:] - lengths[:-1])[covered].sum() / lengths[-1])
