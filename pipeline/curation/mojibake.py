"""Mojibake, as ftfy's badness expression finds it, searched in many texts at once: the
expression (a Python regular expression) is rewritten for RE2 and run by Arrow over a whole
batch, some six times faster a character than one Python search per text (RE2 compiles
the 14 KB expression in ~7 ms a call, so texts under RE2_FROM_CHARS in all are searched
by Python). Texts holding none of the characters the expression looks for are never
searched (one RE2 scan of all the texts tells them apart). The rewrite reads the
expression's parse tree (the standard library's own parser) and spells each node in RE2's
syntax; an expression using what RE2 lacks (look-arounds, back-references) is refused,
and the texts are then searched one by one with ftfy's own `is_bad`.

    >>> bad_texts(["naÃ¯ve cafÃ©", "naïve café", "plain ASCII"])
    [True, False, False]
"""

from __future__ import annotations

import re
import re._constants as sre  # the parser's node names (stdlib, stable since 3.11)
import re._parser as sre_parse  # the parser `re` itself uses
from functools import lru_cache
from typing import Any

import pyarrow as pa

from pipeline.curation.re2 import PYTHON_SPACE, matching

_CATEGORIES = {
    sre.CATEGORY_DIGIT: r"\p{Nd}",
    sre.CATEGORY_WORD: r"\pL\pN_",
    sre.CATEGORY_SPACE: PYTHON_SPACE,
}
"""Python's Unicode classes (`\\d`, `\\w`, `\\s`) spelled in RE2 (inside brackets)."""


class Untranslatable(ValueError):
    """A node of a Python expression that RE2 has no spelling for."""


RE2_FROM_CHARS = 64_000
"""Below this many characters to search, Python's search costs less than RE2's compile."""
MAY_BE_MOJIBAKE = r"[\x{80}-\x{25ff}\x{fb01}\x{fb02}\x{fffd}]"
"""Every sequence ftfy's badness expression matches holds one of these (Latin-1, Latin
Extended, Greek, Cyrillic, punctuation, currency, maths and box-drawing characters, the
fi and fl ligatures, the replacement character): text with none of them (ASCII, or CJK
without Western punctuation) is not searched."""


def bad_texts(texts: list[str], column: pa.Array | None = None) -> list[bool]:
    """For each text, `ftfy.badness.is_bad(text)`, the texts searched together (`column`:
    the same texts as an Arrow array, when the caller has made one)."""
    bad = [False] * len(texts)
    if not texts:
        return bad
    signs = matching(texts if column is None else column, MAY_BE_MOJIBAKE)
    suspects = [row for row, sign in enumerate(signs) if sign]
    if not suspects:
        return bad
    import ftfy.badness  # imported here: only a run with the quality stage needs it

    pattern = _re2_badness()
    if pattern is None or sum(len(texts[row]) for row in suspects) < RE2_FROM_CHARS:
        for row in suspects:
            bad[row] = ftfy.badness.is_bad(texts[row])
        return bad
    found = matching([texts[row] for row in suspects], pattern)
    for row, is_bad in zip(suspects, found, strict=True):
        bad[row] = is_bad
    return bad


def load() -> None:
    """Import ftfy and spell its expression for RE2 now (otherwise done when first used)."""
    _re2_badness()


@lru_cache(maxsize=1)
def _re2_badness() -> str | None:
    """ftfy's badness expression in RE2's syntax (None when it cannot be spelled there)."""
    import ftfy.badness

    try:
        return re2_syntax(ftfy.badness.BADNESS_RE)
    except Untranslatable:
        return None


def re2_syntax(pattern: re.Pattern[str]) -> str:
    """`pattern` spelled for RE2, matching the same texts (Python's Unicode `\\d \\w \\s`
    spelled as their Unicode categories). Raises Untranslatable for what RE2 lacks."""
    if pattern.flags & (re.IGNORECASE | re.MULTILINE | re.DOTALL):
        raise Untranslatable("flags other than VERBOSE")
    return _sequence(sre_parse.parse(pattern.pattern, pattern.flags))


def _sequence(nodes: Any) -> str:
    return "".join(_node(op, value) for op, value in nodes)


def _node(op: Any, value: Any) -> str:
    if op is sre.LITERAL:
        return _char(value)
    if op is sre.NOT_LITERAL:
        return f"[^{_char(value)}]"
    if op is sre.ANY:
        return "."
    if op is sre.AT and value in (sre.AT_BEGINNING, sre.AT_BEGINNING_STRING):
        return "^"  # without MULTILINE both mean the start of the text, in RE2 too
    if op is sre.IN:
        return _class(value)
    if op is sre.BRANCH:
        return "(?:" + "|".join(_sequence(branch) for branch in value[1]) + ")"
    if op is sre.SUBPATTERN:
        return "(?:" + _sequence(value[3]) + ")"
    if op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
        low, high, item = value
        bound = f"{{{low},}}" if high is sre.MAXREPEAT else f"{{{low},{high}}}"
        return f"(?:{_sequence(item)}){bound}{'?' if op is sre.MIN_REPEAT else ''}"
    raise Untranslatable(str(op))


def _class(items: Any) -> str:
    parts = []
    for op, value in items:
        if op is sre.NEGATE:
            parts.append("^")
        elif op is sre.LITERAL:
            parts.append(_char(value))
        elif op is sre.RANGE:
            parts.append(f"{_char(value[0])}-{_char(value[1])}")
        elif op is sre.CATEGORY and value in _CATEGORIES:
            parts.append(_CATEGORIES[value])
        else:
            raise Untranslatable(f"{op} {value} in a character class")
    return "[" + "".join(parts) + "]"


def _char(code: int) -> str:
    return f"\\x{{{code:x}}}"


def bad_sequence(text: str) -> str:
    """The first characters of `text` that ftfy's badness expression finds ("" for none):
    what a finding shows of the mojibake."""
    import ftfy.badness

    found = ftfy.badness.BADNESS_RE.search(text)
    return found.group() if found else ""
