"""Quality heuristics for chat: what is wrong with an assistant's answers, each a named rule
with its threshold (QualitySettings), judged on the answers in context (the user turn each
answers), never on a document without roles.

Rules (codes as the flags and drop reasons name them):
- `empty_answer`: an answer with fewer than `min_answer_chars` non-space characters.
- `repetition`: an answer of at least `repetition_min_words` words that repeats itself, by
  Gopher's repetition rules (Rae et al. 2021, table A1): more than 30% of its lines
  duplicated, or its most frequent 2-, 3- and 4-gram covering more than 20%, 18% and 16% of
  its characters, or its duplicated 5- to 10-grams more than 15% down to 10%.
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
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import ftfy.badness

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
_ENDS_MID_SENTENCE = re.compile(r"[\w,]\s*\Z")
_LINE_REPEAT, _TOP_NGRAM, _DUP_NGRAM = 0.30, {2: 0.20, 3: 0.18, 4: 0.16}, {
    5: 0.15, 6: 0.14, 7: 0.13, 8: 0.12, 9: 0.11, 10: 0.10,
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class QualitySettings:
    """Which rules run, and their thresholds."""

    rules: tuple[str, ...] = RULES
    min_answer_chars: int = 2
    repetition_min_words: int = 50
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
    phrases = tuple(phrase.lower() for phrase in settings.refusal_phrases)
    for turn in turns:
        text = turn.text
        if (
            "empty_answer" in settings.rules
            and len("".join(text.split())) < settings.min_answer_chars
        ):
            found.add("empty_answer")
            continue
        lowered = text.lower()
        if "refusal" in settings.rules and any(phrase in lowered for phrase in phrases):
            found.add("refusal")
        if "copies_user" in settings.rules and _copies(turn, settings.copy_min_words):
            found.add("copies_user")
        if "mojibake" in settings.rules and not text.isascii() and ftfy.badness.is_bad(text):
            found.add("mojibake")
        if "repetition" in settings.rules and _repetitive(text, settings.repetition_min_words):
            found.add("repetition")
        if (
            "cut_off" in settings.rules
            and turn.last
            and len(text) >= settings.cut_off_min_chars
            and _ENDS_MID_SENTENCE.search(text)
            and not text.rstrip().endswith("```")
        ):
            found.add("cut_off")
    return [rule for rule in RULES if rule in found]


def _copies(turn: Turn, min_words: int) -> bool:
    answer, asked = _WORD.findall(turn.text.lower()), _WORD.findall(turn.user.lower())
    if not asked or not answer:
        return False
    if answer == asked:
        return True
    return len(asked) >= min_words and " ".join(asked) in " ".join(answer)


def _repetitive(text: str, min_words: int) -> bool:
    """Gopher's repetition rules on one answer (see the module docstring)."""
    words = _WORD.findall(text.lower())
    if len(words) < min_words:
        return False
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) > 1 and 1 - len(set(lines)) / len(lines) > _LINE_REPEAT:
        return True
    characters = sum(map(len, words))
    for n, limit in _TOP_NGRAM.items():
        grams = Counter(zip(*(words[i:] for i in range(n)), strict=False))
        gram, count = grams.most_common(1)[0]
        if count > 1 and count * sum(map(len, gram)) / characters > limit:
            return True
    # a duplicated (n+1)-gram holds a duplicated n-gram, so the share falls as n grows,
    # and so do the limits: below the last limit at n = 5, no n is over its own
    if _duplicated_share(words, 5) <= min(_DUP_NGRAM.values()):
        return False
    return any(_duplicated_share(words, n) > limit for n, limit in _DUP_NGRAM.items())


def _duplicated_share(words: list[str], n: int) -> float:
    """The share of the characters of `words` inside an n-gram that occurs more than once
    (each character counted once)."""
    grams = list(zip(*(words[i:] for i in range(n)), strict=False))
    counts = Counter(grams)
    covered = [False] * len(words)
    for start, gram in enumerate(grams):
        if counts[gram] > 1:
            for index in range(start, start + n):
                covered[index] = True
    total = sum(map(len, words))
    return sum(len(word) for word, hit in zip(words, covered, strict=True) if hit) / total
