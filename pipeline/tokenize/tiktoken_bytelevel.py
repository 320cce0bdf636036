"""When tiktoken gives exactly the ids of a byte-level BPE tokenizer.json (the Llama-3 and
Qwen2 families, converted from tiktoken): no normalizer or NFC, the regex split of a known
pattern then byte-level mapping, a BPE that looks whole words up first (`ignore_merges`),
and merges that are exactly every split of a vocabulary entry into two entries, in the
order of the entries they make (so merging by merge rank and by token rank is the same)."""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from itertools import pairwise
from typing import Any

KNOWN_PATTERNS: frozenset[str] = frozenset(
    {
        # cl100k, which Llama-3 took over: digits in runs of up to three
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"
        r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        # Qwen2: every digit on its own
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
        r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    }
)
"""Split patterns known to match every character (their last alternatives take any run of
letters, digits, other symbols and spaces), so tiktoken, which encodes only the matches,
drops nothing; and known to split text the same way under tiktoken's regex engine and
`tokenizers`' (compared on every Unicode code point in several contexts; the tests keep the
Basic Multilingual Plane and every 7th code point beyond)."""


FAMILY = "byte_level"
"""The recipe family of this module (`tiktoken_encoder.encoder_from_recipe` dispatches on it)."""


def byte_level_recipe(data: dict[str, Any], special: Iterable[str] = ()) -> dict[str, Any] | None:
    """What the tiktoken encoder of the parsed byte-level tokenizer.json `data` is built
    from (JSON data: the vocabulary, the split pattern, NFC or not, the added tokens and
    those matched in text), or None when tiktoken is not known to give exactly its ids."""
    pattern = _split_pattern(data.get("pre_tokenizer"))
    normalizer = data.get("normalizer")
    model = data.get("model")
    if pattern is None or normalizer not in (None, {"type": "NFC"}):
        return None
    if not isinstance(model, dict) or not _plain_bpe(model):
        return None
    added_tokens = data.get("added_tokens") or []
    ordinary = ordinary_added(added_tokens, set(special), model["vocab"])
    if ordinary is None:  # before the costly checks of the vocabulary and merges
        return None
    if byte_ranks(model["vocab"]) is None:
        return None
    if not _merges_follow_ranks(model["vocab"], model["merges"]):
        return None
    return {
        "family": FAMILY,
        "vocab": model["vocab"],
        "pattern": pattern,
        "nfc": normalizer is not None,
        "added": [[added["id"], added["content"]] for added in added_tokens],
        "ordinary": ordinary,
    }


def _split_pattern(pre_tokenizer: Any) -> str | None:
    """The known pattern of a `Split` then `ByteLevel` (no prefix space, no regex of its own)."""
    if not isinstance(pre_tokenizer, dict) or pre_tokenizer.get("type") != "Sequence":
        return None
    steps = pre_tokenizer.get("pretokenizers")
    if not isinstance(steps, list) or len(steps) != 2:
        return None
    split, byte_level = steps
    if not (isinstance(split, dict) and isinstance(byte_level, dict)):
        return None
    given = split.get("pattern")
    pattern = given.get("Regex") if isinstance(given, dict) else None
    if (
        split.get("type") != "Split"
        or split.get("behavior") != "Isolated"
        or split.get("invert") is not False
        or not isinstance(pattern, str)
        or pattern not in KNOWN_PATTERNS
    ):
        return None
    if (
        byte_level.get("type") != "ByteLevel"
        or byte_level.get("add_prefix_space") is not False
        or byte_level.get("use_regex") is not False
    ):
        return None
    return pattern


def _plain_bpe(model: dict[str, Any]) -> bool:
    """A BPE with no dropout, unknown token, affixes or byte fallback, that takes a whole
    word from the vocabulary before merging (tiktoken always does)."""
    return (
        model.get("type") == "BPE"
        and model.get("dropout") is None
        and model.get("unk_token") is None
        and not model.get("continuing_subword_prefix")
        and not model.get("end_of_word_suffix")
        and model.get("byte_fallback") is False
        and model.get("ignore_merges") is True
        and isinstance(model.get("vocab"), dict)
        and isinstance(model.get("merges"), list)
    )


@lru_cache(maxsize=1)
def _byte_table() -> dict[int, int]:
    """`str.translate` table from the byte-level alphabet (GPT-2's: printable bytes stand
    for themselves, the others for the characters from 256 up) to the byte each character
    stands for; a byte that has a stand-in maps to U+FFFF when written as itself, so that
    Latin-1 refuses it."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    others = [byte for byte in range(256) if byte not in set(printable)]
    table = {byte: byte for byte in printable}
    table.update({byte: 0xFFFF for byte in others})
    table.update({256 + n: byte for n, byte in enumerate(others)})
    return table


def byte_ranks(vocab: dict[str, Any]) -> dict[bytes, int] | None:
    """Each vocabulary entry as the bytes it stands for, with its id; None when an entry is
    not byte-level text or two entries stand for the same bytes."""
    table = _byte_table()
    try:
        ranks = {
            token.translate(table).encode("latin-1"): number for token, number in vocab.items()
        }
    except (UnicodeEncodeError, AttributeError):
        return None
    if len(ranks) != len(vocab) or not all(type(number) is int for number in ranks.values()):
        return None
    return ranks if len(set(ranks.values())) == len(ranks) else None


def _merges_follow_ranks(vocab: dict[str, int], merges: list[Any]) -> bool:
    """Whether the merges are exactly the two-entry splits of vocabulary entries, listed in
    the order of the entries they make: then the pair `tokenizers` merges first is the pair
    making the lowest-ranked entry, tiktoken's choice."""
    try:
        pairs = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in merges]
        made = [vocab.get(left + right, -1) for left, right in pairs]
    except (TypeError, ValueError):
        return False
    if -1 in made or any(later < earlier for earlier, later in pairwise(made)):
        return False
    listed = set(pairs)
    lefts, rights = zip(*pairs, strict=True) if pairs else ((), ())
    if len(listed) != len(pairs) or not vocab.keys() >= {*lefts, *rights}:
        return False
    # every listed merge is a split into two entries; it remains that none is missing
    splits = sum(
        1
        for token in vocab
        for cut in range(1, len(token))
        if token[:cut] in vocab and token[cut:] in vocab
    )
    return splits == len(listed)


def ordinary_added(
    added_tokens: list[dict[str, Any]], special: set[str], vocab: dict[str, int]
) -> dict[str, int] | None:
    """The added tokens matched in text (neither special nor in `special`), by content; None
    when one would match differently here (stripping, whole words, normalized matching) or
    is also a vocabulary entry."""
    ordinary: dict[str, int] = {}
    for added in added_tokens:
        if not isinstance(added, dict):
            return None
        content = added.get("content")
        if not isinstance(added.get("id"), int) or not isinstance(content, str):
            return None
        if content in vocab:
            return None
        if added.get("special") or content in special:
            continue
        if added.get("single_word") or added.get("lstrip") or added.get("rstrip"):
            return None
        if added.get("normalized"):
            return None
        ordinary[content] = added["id"]
    return ordinary
