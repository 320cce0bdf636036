"""When tiktoken gives exactly the ids of a SentencePiece-style BPE tokenizer.json (Llama-2,
Mistral, Phi-3, Gemma: spaces become `▁`, byte fallback for unknown characters), and the
tiktoken ranks that do it.

`tokenizers` merges the whole normalized text as one word, by merge rank, from characters.
tiktoken merges the UTF-8 bytes of each piece of a regex split, by the rank of the merged
bytes, after looking the whole piece up. They give the same ids when the file proves:

- the text is cut only where no merge can join: before a `▁` that follows another
  character (no vocabulary entry holds such a pair), so each piece merges on its own;
- each character's bytes are merged back into the character before any real merge
  (ranks below all others, mapped to the character's id afterwards); a character outside
  the vocabulary stays bytes, which are its byte-fallback ids, as in `tokenizers`;
- the merges making one entry are listed together, so the entry's rank is their place;
- every entry a merge makes is what BPE makes of its own characters (so looking a whole
  piece up first changes nothing), and every character of such an entry is an entry.

Like the byte-level family, merges making the same entry are taken left to right by
tiktoken and in list order by `tokenizers`; the tests compare the two on fuzzed text."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import orjson
from tokenizers import Tokenizer

from pipeline.tokenize.tiktoken_bytelevel import ordinary_added

FAMILY = "sentencepiece"
"""The recipe family of this module (`tiktoken_encoder.encoder_from_recipe` dispatches on it)."""
METASPACE = "\u2581"
PIECES = f"{METASPACE}*[^{METASPACE}]+|{METASPACE}+"
"""tiktoken's split: a run of `▁` and the characters up to the next `▁` (or a last run)."""
_BYTE_TOKEN = re.compile(r"<0x([0-9A-F]{2})>")
_JOINED = re.compile(f"[^{METASPACE}]{METASPACE}")
_REPLACE_SPACES = {"type": "Replace", "pattern": {"String": " "}, "content": METASPACE}


class SentencePieceRanks:
    """The tiktoken ranks of a sentencepiece recipe, and the ids they stand for."""

    def __init__(self, recipe: dict[str, Any]) -> None:
        vocab: dict[str, int] = recipe["vocab"]
        made: dict[str, int] = dict(recipe["made"])
        fallback: list[int] = recipe["fallback"]
        low: dict[bytes, int | None] = {}  # a multi-byte character and its first bytes
        for char in sorted(t for t in vocab if len(t) == 1 and len(t.encode()) > 1):
            encoded = char.encode()
            for cut in range(2, len(encoded)):
                low.setdefault(encoded[:cut], None)
            low[encoded] = vocab[char]
        first_merge = len(low)
        first_single = first_merge + (max(made.values()) + 1 if made else 0)
        self.ranks: dict[bytes, int] = {}
        self.ids: list[int] = [-1] * (first_single + len(vocab) + 256)
        """The id of each rank; -1 for the first bytes of a character left unmerged."""
        for rank, (encoded, number) in enumerate(low.items()):
            self.ranks[encoded] = rank
            if number is not None:
                self.ids[rank] = number
        for token, priority in made.items():
            self.ranks[token.encode()] = first_merge + priority
            self.ids[first_merge + priority] = vocab[token]
        for token, number in vocab.items():
            if len(token) == 1 and len(token.encode()) == 1:
                self.ranks[token.encode()] = first_single + number
                self.ids[first_single + number] = number
        for byte, number in enumerate(fallback):
            if bytes([byte]) not in self.ranks:
                rank = first_single + len(vocab) + byte
                self.ranks[bytes([byte])] = rank
                self.ids[rank] = number
        self.unmerged: dict[int, list[int]] = {
            rank: [fallback[byte] for byte in encoded]
            for encoded, rank in self.ranks.items()
            if self.ids[rank] == -1
        }
        """The byte-fallback ids of each rank of a character's first bytes."""


def sentencepiece_recipe(
    data: dict[str, Any], special: Iterable[str] = ()
) -> dict[str, Any] | None:
    """What the tiktoken encoder of the parsed SentencePiece-style tokenizer.json `data` is
    built from (JSON data: the vocabulary, each merged entry's rank, the byte-fallback ids,
    whether `▁` is prepended, the added tokens), or None when tiktoken is not known to give
    exactly its ids. `special` are the control tokens of the config (never matched)."""
    prepend = _metaspace_normalizer(data.get("normalizer"))
    model = data.get("model")
    if prepend is None or not _no_op_pre_tokenizer(data.get("pre_tokenizer")):
        return None
    if not isinstance(model, dict) or not _fallback_bpe(model):
        return None
    vocab: dict[str, int] = model["vocab"]
    added_tokens = data.get("added_tokens") or []
    contents = {a.get("content") for a in added_tokens if isinstance(a, dict)}
    never_text = {*special, *(c for c in contents if c in vocab)}  # flagged special
    ordinary = ordinary_added(added_tokens, never_text, {})
    fallback = _fallback_ids(vocab)
    if ordinary is None or fallback is None:
        return None
    specials = never_text | {a["content"] for a in added_tokens if a.get("special")}
    merges = _merges(model["merges"], vocab, specials)
    if merges is None:
        return None
    made = _merge_ranks(merges)
    excluded = specials | {token for token in vocab if _BYTE_TOKEN.fullmatch(token)}
    if made is None or not made.keys().isdisjoint(excluded) or not _separable(vocab, made):
        return None
    if not _each_made_by_its_merges(data, model, merges, made):
        return None
    return {
        "family": FAMILY,
        "vocab": vocab,
        "made": sorted(made.items(), key=lambda item: item[1]),
        "fallback": fallback,
        "prepend": prepend,
        "added": [[added["id"], added["content"]] for added in added_tokens],
        "ordinary": ordinary,
    }


def _metaspace_normalizer(normalizer: Any) -> bool | None:
    """Whether the normalizer prepends `▁`, when it is exactly spaces to `▁` (with or
    without the prepend); None for any other normalizer."""
    steps = normalizer.get("normalizers") if isinstance(normalizer, dict) else None
    if isinstance(normalizer, dict) and normalizer.get("type") != "Sequence":
        steps = [normalizer]
    if not isinstance(steps, list) or not steps or steps[-1] != _REPLACE_SPACES:
        return None
    if len(steps) == 1:
        return False
    if len(steps) == 2 and steps[0] == {"type": "Prepend", "prepend": METASPACE}:
        return True
    return None


def _no_op_pre_tokenizer(pre_tokenizer: Any) -> bool:
    """No pre-tokenizer, or Gemma's split at spaces, of which none are left once spaces
    became `▁`."""
    if pre_tokenizer is None:
        return True
    return (
        isinstance(pre_tokenizer, dict)
        and pre_tokenizer.get("type") == "Split"
        and pre_tokenizer.get("pattern") == {"String": " "}
        and pre_tokenizer.get("invert") is False
    )


def _fallback_bpe(model: dict[str, Any]) -> bool:
    """A BPE with byte fallback that merges every word from its characters (no whole-word
    lookup), with no dropout or affixes."""
    return (
        model.get("type") == "BPE"
        and model.get("dropout") is None
        and model.get("byte_fallback") is True
        and not model.get("ignore_merges")
        and not model.get("continuing_subword_prefix")
        and not model.get("end_of_word_suffix")
        and isinstance(model.get("vocab"), dict)
        and isinstance(model.get("merges"), list)
        and all(type(number) is int for number in model["vocab"].values())
    )


def _fallback_ids(vocab: dict[str, int]) -> list[int] | None:
    """The id of `<0xXX>` for every byte, or None when one is missing (`tokenizers` would
    then give the unknown token)."""
    found = {int(m.group(1), 16): n for t, n in vocab.items() if (m := _BYTE_TOKEN.fullmatch(t))}
    return [found[byte] for byte in range(256)] if len(found) == 256 else None


def _merges(merges: list[Any], vocab: dict[str, int], specials: set[str]) -> list[Any] | None:
    """The merges as pairs, without those making a special token (`tokenizers` drops them,
    see `text_encoding.text_encoder`); None when one joins or makes a non-entry."""
    pairs = []
    for merge in merges:
        pair = merge.split(" ", 1) if isinstance(merge, str) else merge
        if not isinstance(pair, list | tuple) or len(pair) != 2:
            return None
        left, right = pair
        if not (left in vocab and right in vocab and left + right in vocab):
            return None
        if left + right not in specials:
            pairs.append((left, right))
    return pairs


def _merge_ranks(merges: list[tuple[str, str]]) -> dict[str, int] | None:
    """Each merged entry's rank: the place of its merges, which must be listed together;
    None when they are not."""
    ranks: dict[str, int] = {}
    last = None
    for index, (left, right) in enumerate(merges):
        token = left + right
        if token != last and token in ranks:
            return None
        ranks.setdefault(token, index)
        last = token
    return ranks


def _separable(vocab: dict[str, int], made: dict[str, int]) -> bool:
    """No entry holds a character then `▁` (so no merge joins two pieces), and every
    character of a merged entry is an entry (so a character outside the vocabulary, left
    as bytes, never joins a merge)."""
    if any(_JOINED.search(token) for token in vocab):
        return False
    return all(char in vocab for token in made for char in token)


def _each_made_by_its_merges(
    data: dict[str, Any], model: dict[str, Any], merges: list[Any], made: dict[str, int]
) -> bool:
    """Whether BPE makes every merged entry, from its characters, into itself: then
    tiktoken's whole-piece lookup agrees with merging. Checked with `tokenizers` itself."""
    bare: dict[str, Any] = {
        **{key: data.get(key) for key in ("version", "truncation", "padding")},
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": None,
        "post_processor": None,
        "decoder": None,
        "model": {**model, "merges": [list(pair) for pair in merges]},
    }
    tokenizer = Tokenizer.from_str(orjson.dumps(bare).decode())
    tokens = list(made)
    encoded = tokenizer.encode_batch(tokens, add_special_tokens=False)
    vocab = model["vocab"]
    return all(e.ids == [vocab[token]] for token, e in zip(tokens, encoded, strict=True))
