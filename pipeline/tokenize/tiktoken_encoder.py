"""A tiktoken encoder standing in for the `tokenizers` text encoder of the BPE tokenizers
it reproduces exactly: the same ids for a quarter (byte-level) to a half (SentencePiece
style) of the CPU time, which makes encoding, the bulk of a run, that much cheaper.

Which files it reproduces, and why, is each family's own module: `tiktoken_bytelevel`
(Llama-3, Qwen2) and `tiktoken_sentencepiece` (Llama-2, Mistral, Phi-3, Gemma). Anything
else keeps the `tokenizers` encoder."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from functools import cached_property
from typing import Any

import tiktoken

from pipeline.tokenize import tiktoken_bytelevel, tiktoken_sentencepiece
from pipeline.tokenize.tiktoken_sentencepiece import METASPACE, SentencePieceRanks


class TiktokenTextEncoder:
    """Encodes text as the `tokenizers` text encoder of the same tokenizer.json does: no
    special-token matching, the ordinary added tokens (Qwen's `<tool_call>`) matched first.
    Implements `text_encoding.TextEncoder`.

    `normalize` is what the tokenizer does to text before splitting it: `nfc`, `metaspace`
    (spaces to `▁`), `metaspace_prepend` (and a `▁` in front), or None. `rank_ids` maps
    tiktoken's ranks to ids when they differ (-1: bytes to expand by `unmerged`)."""

    name = "tiktoken"

    def __init__(
        self,
        vocab: dict[str, int],
        ranks: dict[bytes, int],
        pattern: str,
        *,
        normalize: str | None,
        added: dict[int, str],
        ordinary_added: dict[str, int],
        rank_ids: list[int] | None = None,
        unmerged: dict[int, list[int]] | None = None,
    ) -> None:
        self._vocab = vocab
        self._added = added
        self._added_ids = {content: number for number, content in added.items()}
        self._encoding = tiktoken.Encoding(
            "mms-text", pat_str=pattern, mergeable_ranks=ranks, special_tokens={}
        )
        self._normalize = normalize
        self._rank_ids = rank_ids
        self._unmerged = unmerged or {}
        self._ordinary = ordinary_added
        longest_first = sorted(ordinary_added, key=lambda token: (-len(token), token))
        self._ordinary_split = (
            re.compile("(" + "|".join(map(re.escape, longest_first)) + ")")
            if ordinary_added
            else None
        )

    def token_to_id(self, token: str) -> int | None:
        found = self._added_ids.get(token)
        return found if found is not None else self._vocab.get(token)

    def id_to_token(self, number: int) -> str | None:
        if number in self._added:
            return self._added[number]
        return self._tokens.get(number)

    @cached_property
    def _tokens(self) -> dict[int, str]:
        return {number: token for token, number in self._vocab.items()}

    def added_tokens(self) -> dict[int, str]:
        return dict(self._added)

    def base_vocab_size(self) -> int:
        return len(self._vocab)

    def encode_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """The ids of every text, in order."""
        split = self._ordinary_split
        if split is None and self._normalize is None:
            return [self._encoding.encode_ordinary(text) for text in texts]
        encode = self._encode_part
        return [
            self._encode_with_added(text)
            if split is not None and split.search(text)
            else encode(text)
            for text in texts
        ]

    def _encode_part(self, text: str) -> list[int]:
        """The ids of text holding no ordinary added token."""
        normalize = self._normalize
        if normalize == "nfc":
            text = unicodedata.normalize("NFC", text)
        elif normalize is not None:
            if not text:
                return []
            text = text.replace(" ", METASPACE)
            if normalize == "metaspace_prepend":
                text = METASPACE + text
        ranks = self._encoding.encode_ordinary(text)
        table = self._rank_ids
        if table is None:
            return ranks
        ids = [table[rank] for rank in ranks]
        if -1 not in ids:
            return ids
        expanded: list[int] = []
        for rank, number in zip(ranks, ids, strict=True):
            if number == -1:
                expanded += self._unmerged[rank]
            else:
                expanded.append(number)
        return expanded

    def _encode_with_added(self, text: str) -> list[int]:
        """Ordinary added tokens are cut out of the raw text before normalizing, as
        `tokenizers` does (leftmost, longest first); the pieces between them are encoded."""
        ids: list[int] = []
        assert self._ordinary_split is not None
        for index, part in enumerate(self._ordinary_split.split(text)):
            if index % 2:
                ids.append(self._ordinary[part])
            elif part:
                ids += self._encode_part(part)
        return ids


def tiktoken_recipe(data: dict[str, Any], special: Iterable[str] = ()) -> dict[str, Any] | None:
    """What the tiktoken encoder of the parsed tokenizer.json `data` is built from (JSON
    data, of one family), or None when tiktoken is not known to give exactly its ids. The
    proofs cache keeps it, so a later load of the same file parses no tokenizer.json.
    `special` are the control tokens of the config."""
    special = tuple(special)
    return tiktoken_bytelevel.byte_level_recipe(
        data, special
    ) or tiktoken_sentencepiece.sentencepiece_recipe(data, special)


def encoder_from_recipe(recipe: dict[str, Any]) -> TiktokenTextEncoder | None:
    """The tiktoken encoder a `tiktoken_recipe` describes."""
    added = {number: content for number, content in recipe["added"]}
    if recipe.get("family") == tiktoken_sentencepiece.FAMILY:
        ranks = SentencePieceRanks(recipe)
        return TiktokenTextEncoder(
            recipe["vocab"],
            ranks.ranks,
            tiktoken_sentencepiece.PIECES,
            normalize="metaspace_prepend" if recipe["prepend"] else "metaspace",
            added=added,
            ordinary_added=recipe["ordinary"],
            rank_ids=ranks.ids,
            unmerged=ranks.unmerged,
        )
    byte_ranks = tiktoken_bytelevel.byte_ranks(recipe["vocab"])
    if byte_ranks is None:
        return None
    return TiktokenTextEncoder(
        recipe["vocab"],
        byte_ranks,
        recipe["pattern"],
        normalize="nfc" if recipe["nfc"] else None,
        added=added,
        ordinary_added=recipe["ordinary"],
    )
