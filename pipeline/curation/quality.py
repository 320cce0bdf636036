"""Quality heuristics for chat: what is wrong with an assistant's answers, each a named rule
with its threshold (QualitySettings), judged on the answers in context (the user turn each
answers), never on a document without roles. Each finding names the rule, the message, the
measure, its value and its limit (or the text it matched), so a flag explains itself.

Rules (codes as the flags and drop reasons name them):
- `empty_answer`: an answer with fewer than `min_answer_chars` non-space characters, unless
  it is a label (one short token: "1", "否", "B") answering a closed prompt (one that asks
  to classify, to answer with a label, number, yes or no, or lists its options).
- `repetition`: an answer of at least `repetition_min_words` words of prose (split on white
  space, as Gopher splits them; fenced code, calculator marks such as `<<6*7=42>>`, table
  rows and formula lines left out, and a JSON or YAML answer left out whole: those repeat
  themselves by nature) that repeats itself, by Gopher's repetition rules (Rae et al.
  2021, table A1) with their limits times `repetition_factor`: more than 30% of its lines
  duplicated, or its most frequent 2-, 3- and 4-gram covering more than 20%, 18% and 16%
  of its characters, or its duplicated 5- to 10-grams more than 15% down to 10%. Gopher's
  own limits (factor 1) were set for web pages; on real chat answers they flag lists,
  steps and worked sums; twice them is the default.
- `refusal`: an answer that holds a refusal or boilerplate phrase (`refusal_phrases`: "As an
  AI language model", "I cannot assist with" ...; case-insensitive).
- `copies_user`: an answer that repeats the user turn it answers (the same words, or holds
  all of them when the turn is at least `copy_min_words` words long).
- `mojibake`: text decoded with the wrong encoding ("Ã©" for "é"), as ftfy's badness
  heuristic finds it.
- `cut_off`: the thread's last answer, at least `cut_off_min_chars` characters, stops
  mid-sentence: its last line is prose (four words or more, or Chinese or Japanese text)
  ending in a letter, a digit or a comma. A last line that is a final answer (`#### 42`,
  "The answer is 42", `\\boxed{}`), a list item, a heading, a table row, a `key: value`
  line, a formula or code (fenced or indented, or holding `=`, `{` or `;`), hashtags or a
  link is no cut, nor is a JSON or YAML answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

import numpy as np
import orjson
import pyarrow as pa

from pipeline.curation.mojibake import bad_sequence, bad_texts
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
    "i can't help with that",
    "i cannot help with that",
    "i apologize, but i cannot",
    "i apologize, but i can't",
    "i apologize, but i am not able to",
    "i apologize, but i'm not able to",
    "i'm not able to help with",
    "i am not able to help with",
    "我无法提供",
    "作为一个ai",
    "my knowledge cutoff",
    "i do not have personal opinions",
    "i don't have personal opinions",
    "作为一个人工智能语言模型",
)
"""The default refusal and boilerplate phrases (lower case)."""
RULES = ("empty_answer", "repetition", "refusal", "copies_user", "mojibake", "cut_off")
_WORD = re.compile(r"\w+", re.UNICODE)
COPY_GATE_WORDS = 8
"""How many of a user turn's longest words an answer must hold to be checked for a copy."""
_NOT_SPACE = re.compile(r"\S")
_FENCED_CODE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
_CALCULATOR = re.compile(r"<<[^<>\n]*>>")
_NOT_PROSE_LINE = re.compile(r"^[ \t]*\|.*$|^.*=.*$", re.MULTILINE)
_YAML_LINE = re.compile(r"[ \t]*(?:- |---|#|[\w\"'-]+(?: [\w\"'-]+){0,2}:(?:[ \t]|$))")
_LINE_REPEAT, _TOP_NGRAM, _DUP_NGRAM = 0.30, {2: 0.20, 3: 0.18, 4: 0.16}, {
    5: 0.15, 6: 0.14, 7: 0.13, 8: 0.12, 9: 0.11, 10: 0.10,
}  # fmt: skip
_FINISHED_LINE = re.compile(
    r"""^(?:[#>|]|[\w-]+(?:\ [\w-]+){0,3}:\s)  # a heading or `#### 42`, a quote, a table, key: value
    |^\s  # indented: code
    |[={};]|\(\)|->  # a formula or code
    |\\boxed\{|\banswer\s+is\b  # a final answer
    |(?:^|\s)(?:[#@]\S+|https?://\S+)$  # hashtags, a mention, a link
    """,
    re.VERBOSE | re.IGNORECASE,
)
_LIST_ITEM = re.compile(r"\s*(?:[-*•+]|\d+[.)、]|[a-zA-Z][.)](?=\s))\s*")
_SENTENCE_BREAK = re.compile(r"[.!?:;,\u3002\uff01\uff1f\uff1a\uff1b\uff0c]\s*\S")  # and CJK's
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff]")
_LABEL = re.compile(r"[\w.,%+-]{1,20}[.!。]?")
_CLOSED_PROMPT = re.compile(
    r"classif|categor|label|sentiment|true or false|yes or no|yes/no|\boutput\s+\S+\s+for\b"
    r"|answer with|respond with|reply with|which (?:one|of)|\bchoose|\bselect|\bpick|\brate\b"
    r"|\bscore|how many|\boptions?\b|\bchoices?\b|^\s*(?:\(?[a-d1-9][.):]|[-*•])\s"
    r"|是否|判断|分类|类别|选择|选项|哪|几|多少|是不是|对还是错|吗[\uff1f?]?\s*$",
    re.IGNORECASE | re.MULTILINE,
)


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
    none), whether it is the thread's last answer, and its index among the thread's
    messages."""

    text: str
    user: str
    last: bool
    message: int = 0


@dataclass(frozen=True, slots=True)
class QualityFinding:
    """One rule an answer breaks: the answer's message index, what was measured, its value
    and the limit it passed (None when the rule matched text: the value is that text)."""

    rule: str
    message: int
    measure: str
    value: float | str
    limit: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The finding as `meta.quality` lists it."""
        return {
            "rule": self.rule,
            "message": self.message,
            "measure": self.measure,
            "value": self.value,
            "limit": self.limit,
        }


def quality_flags(turns: Sequence[Turn], settings: QualitySettings) -> list[str]:
    """The rules the answers break, in RULES order, each once."""
    return quality_flags_many([turns], settings)[0]


def quality_flags_many(
    threads: Sequence[Sequence[Turn]], settings: QualitySettings
) -> list[list[str]]:
    """`quality_flags` of each thread's answers."""
    return [
        list(dict.fromkeys(finding.rule for finding in findings))
        for findings in quality_findings_many(threads, settings)
    ]


def quality_findings_many(
    threads: Sequence[Sequence[Turn]], settings: QualitySettings
) -> list[list[QualityFinding]]:
    """What each thread's answers break, in RULES order then message order. The phrase and
    mojibake signs of all the answers are searched at once (Arrow's RE2), and the
    repetition rules counted at once (numpy): their cost per call is paid once per batch."""
    judge = _Judge(settings, [turn.text for turns in threads for turn in turns])
    found: list[list[QualityFinding]] = [[] for _ in threads]
    place = 0
    for row, turns in enumerate(threads):
        for turn in turns:
            found[row] += judge.answer(turn, place, row)
            place += 1
    for row, finding in judge.repeating():
        found[row].append(finding)
    order = {rule: rank for rank, rule in enumerate(RULES)}
    return [sorted(findings, key=lambda f: (order[f.rule], f.message)) for findings in found]


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
        self.counted: list[tuple[int, int, list[str]]] = []

    def answer(self, turn: Turn, place: int, row: int) -> list[QualityFinding]:
        """The rules the answer at `place` (of thread `row`) breaks, as far as it alone
        tells (the n-gram count comes in `repeating`)."""
        settings, rules, text, index = self.settings, self.settings.rules, turn.text, turn.message
        if "empty_answer" in rules:
            visible = _visible(text, settings.min_answer_chars)
            if visible < settings.min_answer_chars and not _label(text, turn.user):
                return [
                    QualityFinding(
                        "empty_answer", index, "visible_chars", visible, settings.min_answer_chars
                    )
                ]
        found = []
        if self.refusals[place]:
            found.append(QualityFinding("refusal", index, "phrase", self._phrase(text)))
        if self.mojibake[place]:
            found.append(QualityFinding("mojibake", index, "ftfy_badness", bad_sequence(text)))
        lowered = text.lower() if "copies_user" in rules or "repetition" in rules else ""
        if "copies_user" in rules:
            copied = _copies(lowered, turn.user, settings, self.asked)
            if copied:
                found.append(
                    QualityFinding(
                        "copies_user", index, "copied_user_words", copied, settings.copy_min_words
                    )
                )
        if "repetition" in rules:
            found += self._repeats(lowered, index, row)
        if "cut_off" in rules and turn.last:
            ending = _cut_off(text, settings.cut_off_min_chars)
            if ending:
                found.append(QualityFinding("cut_off", index, "ends_mid_sentence", ending))
        return found

    def _phrase(self, text: str) -> str:
        """The first refusal phrase `text` holds (case-insensitive)."""
        lowered = text.lower()
        return next(phrase for phrase in self.settings.refusal_phrases if phrase.lower() in lowered)

    def _repeats(self, lowered: str, message: int, row: int) -> list[QualityFinding]:
        """Whether the answer's prose lines repeat; prose long enough whose lines do not is
        kept for the n-gram count."""
        prose = _prose(lowered)
        words = prose.split()
        if len(words) < max(self.settings.repetition_min_words, 1):
            return []
        limit = _LINE_REPEAT * self.settings.repetition_factor
        share = _duplicate_lines(prose)
        if share > limit:
            return [QualityFinding("repetition", message, "duplicate_line_share", share, limit)]
        self.counted.append((row, message, words))
        return []

    def repeating(self) -> list[tuple[int, QualityFinding]]:
        """The threads with an answer that breaks Gopher's n-gram rules, and the finding."""
        if not self.counted:
            return []
        over = _repeats_ngrams(
            [words for *_, words in self.counted], self.settings.repetition_factor
        )
        return [
            (row, QualityFinding("repetition", message, *measured))
            for (row, message, _), measured in zip(self.counted, over, strict=True)
            if measured
        ]


def _phrases(phrases: tuple[str, ...]) -> str:
    """The phrases as one RE2 expression of literals (empty when there are none)."""
    return "|".join(map(re.escape, phrases))


def _visible(text: str, min_chars: int) -> int:
    """How many characters of `text` are not white space, counted up to `min_chars` (up to
    2, the stripped text's two ends tell)."""
    if min_chars <= 2 and len(text.strip()) >= min_chars:
        return min_chars
    return sum(1 for _ in islice(_NOT_SPACE.finditer(text), min_chars))


def _label(text: str, user: str) -> bool:
    """Whether `text` is one short token ("1", "否", "B.") answering a closed prompt: a
    label, a number, yes or no."""
    token = text.strip()
    return (
        any(char.isalnum() for char in token)
        and _LABEL.fullmatch(token) is not None
        and _CLOSED_PROMPT.search(user) is not None
    )


def _structured(text: str) -> bool:
    """Whether the whole (stripped) answer is a JSON document or YAML lines."""
    body = text.strip()
    if body[:1] in "{[" and body[-1:] in "}]":
        try:
            orjson.loads(body)
        except orjson.JSONDecodeError:
            return False
        return True
    lines = [line for line in body.splitlines() if line.strip()]
    return len(lines) > 1 and all(_YAML_LINE.match(line) for line in lines)


def _prose(text: str) -> str:
    """The answer's prose: fenced code, calculator marks (`<<6*7=42>>`), table rows and
    formula lines left out, and nothing of a JSON or YAML answer."""
    if _structured(text):
        return ""
    if "```" in text:
        text = _FENCED_CODE.sub("\n", text)
    if "<<" in text:
        text = _CALCULATOR.sub("", text)
    if "=" in text or "|" in text:
        text = _NOT_PROSE_LINE.sub("", text)
    return text


def _copies(
    answer: str, user: str, settings: QualitySettings, asked: dict[str, tuple[list[str], list[str]]]
) -> int:
    """How many of the user turn's words the (lower-cased) answer copies: all when its words
    are the user turn's, or hold all of them in a row when there are at least
    `copy_min_words`; 0 when it copies none. The answer's words are split only when it
    holds the user turn's COPY_GATE_WORDS longest words (`asked` keeps each user turn's
    words and those): 5% of real answers do."""
    if user not in asked:
        said = _WORD.findall(user.lower())
        asked[user] = (said, sorted(set(said), key=len, reverse=True)[:COPY_GATE_WORDS])
    said, longest = asked[user]
    if not said or not all(word in answer for word in longest):
        return 0
    words = _WORD.findall(answer)
    if words == said:
        return len(said)
    whole = len(said) >= settings.copy_min_words and " ".join(said) in " ".join(words)
    return len(said) if whole else 0


def _cut_off(text: str, min_chars: int) -> str:
    """The end of an answer of at least `min_chars` whose last line is prose stopping in a
    letter, a digit or a comma ("" when it is not cut off)."""
    if len(text) < min_chars:
        return ""
    body = text.rstrip()
    ending = body[-1:]
    if not (ending.isalnum() or ending in ",_") or "```" in body:
        return ""
    line = body[body.rfind("\n") + 1 :]
    if _FINISHED_LINE.search(line) or _structured(body):
        return ""
    item = _LIST_ITEM.match(line)
    if item and not _SENTENCE_BREAK.search(line, item.end()):
        return ""  # a list item that is one phrase
    if len(line.split()) < 4 and not _CJK.search(line):
        return ""
    return body[-40:]


def _duplicate_lines(text: str) -> float:
    """Gopher's duplicate-line measure: the share of the non-empty lines that repeat one
    before them."""
    lines = [line for line in map(str.strip, text.splitlines()) if line]
    return 1 - len(set(lines)) / len(lines) if len(lines) > 1 else 0.0


Measured = tuple[str, float, float]
"""A repetition measure over its limit: its name, value and limit."""


def _repeats_ngrams(texts: list[list[str]], factor: float) -> list[Measured | None]:
    """For each text (its words, at least one), the first of Gopher's n-gram rules (the
    module docstring, limits times `factor`) it breaks, or None."""
    grams = WordGrams(texts)
    chars = grams.chars
    totals = chars[grams.offsets[1:]] - chars[grams.offsets[:-1]]
    counted = _occurrences(grams, (*_TOP_NGRAM, 5))
    found: list[Measured | None] = [None] * len(texts)
    for n, limit in _TOP_NGRAM.items():
        counts, which, starts = counted[n]
        top = np.zeros(len(texts), np.int64)
        np.maximum.at(top, which, counts)
        first = np.full(len(texts), grams.count, np.int64)
        np.minimum.at(first, which, np.where(counts == top[which], starts, grams.count))
        has = top > 1
        covered = np.zeros(len(texts), np.int64)
        covered[has] = top[has] * (chars[first[has] + n] - chars[first[has]])
        over = has & (covered > limit * factor * totals)
        _note(found, np.flatnonzero(over), f"top_{n}gram_share", covered / totals, limit * factor)
    # a duplicated (n+1)-gram holds a duplicated n-gram, so the share falls as n grows,
    # and so do the limits: below the last limit at n = 5, no n is over its own
    share = _duplicated_share(grams, counted[5], 5) / totals
    unsure = np.array(
        [
            row
            for row in np.flatnonzero(share > min(_DUP_NGRAM.values()) * factor)
            if found[row] is None
        ],
        np.int64,
    )
    if len(unsure):
        subset = WordGrams([texts[row] for row in unsure])
        sub_totals = totals[unsure]
        counted = _occurrences(subset, tuple(_DUP_NGRAM))
        for n, limit in _DUP_NGRAM.items():
            shares = np.zeros(len(texts))
            shares[unsure] = _duplicated_share(subset, counted[n], n) / sub_totals
            longer = unsure[shares[unsure] > limit * factor]
            _note(found, longer, f"duplicate_{n}gram_share", shares, limit * factor)
    return found


def _note(
    found: list[Measured | None], rows: np.ndarray, measure: str, values: np.ndarray, limit: float
) -> None:
    """Record `measure` for each of `rows` that has no measure over its limit yet."""
    for row in rows.tolist():
        if found[row] is None:
            found[row] = (measure, round(float(values[row]), 4), round(limit, 4))


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
