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

import numpy as np
import tiktoken

from pipeline.tokenize import tiktoken_bytelevel, tiktoken_sentencepiece
from pipeline.tokenize.text_encoding import flat_ids
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

    def encode_flat(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Every text's ids end to end, and each text's count: the ranks of a batch are
        mapped to ids in one numpy gather, not token by token."""
        if self._rank_ids is None:
            return flat_ids(self.encode_ids(texts))
        split, ranks_of = self._ordinary_split, self._part_ranks
        ranks = [
            self._ranks_with_added(text)
            if split is not None and split.search(text)
            else ranks_of(text)
            for text in texts
        ]
        flat, lengths = flat_ids(ranks)
        return self._rank_table.ids_of(flat, lengths)

    def _ranks_with_added(self, text: str) -> list[int]:
        """`_encode_with_added` in ranks: an ordinary added token as the rank past the
        model's that `_rank_table` maps to its id."""
        assert self._ordinary_split is not None
        first_added = len(self._rank_ids or ())
        ranks: list[int] = []
        for index, part in enumerate(self._ordinary_split.split(text)):
            if index % 2:
                ranks.append(first_added + self._added_order[part])
            elif part:
                ranks += self._part_ranks(part)
        return ranks

    @cached_property
    def _added_order(self) -> dict[str, int]:
        return {token: index for index, token in enumerate(self._ordinary)}

    @cached_property
    def _rank_table(self) -> RankTable:
        assert self._rank_ids is not None
        ids = list(self._rank_ids) + [self._ordinary[token] for token in self._added_order]
        return RankTable(ids, self._unmerged)

    def _part_ranks(self, text: str) -> list[int]:
        """tiktoken's ranks of text holding no ordinary added token, normalized as the
        tokenizer does."""
        normalize = self._normalize
        if normalize == "nfc":
            text = unicodedata.normalize("NFC", text)
        elif normalize is not None:
            if not text:
                return []
            text = text.replace(" ", METASPACE)
            if normalize == "metaspace_prepend":
                text = METASPACE + text
        return self._encoding.encode_ordinary(text)

    def _encode_part(self, text: str) -> list[int]:
        """The ids of text holding no ordinary added token."""
        ranks = self._part_ranks(text)
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


class RankTable:
    """tiktoken's ranks to a SentencePiece tokenizer's ids, as numpy arrays: each rank's
    id, or (-1) the byte-fallback ids its bytes expand to."""

    def __init__(self, ids: list[int], unmerged: dict[int, list[int]]) -> None:
        self.ids = np.asarray(ids, dtype=np.int64)
        self.expanded_length = np.ones(len(ids), dtype=np.int64)
        self.expanded_start = np.zeros(len(ids), dtype=np.int64)
        pool: list[int] = []
        for rank, fallback in sorted(unmerged.items()):
            self.expanded_length[rank] = len(fallback)
            self.expanded_start[rank] = len(pool)
            pool += fallback
        self.pool = np.asarray(pool or [0], dtype=np.int64)

    def ids_of(self, ranks: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The ids of `ranks` (texts of `lengths` ranks each), and each text's id count."""
        ids = self.ids[ranks]
        unmerged = ids == -1
        if not unmerged.any():
            return ids, lengths
        counts = np.where(unmerged, self.expanded_length[ranks], 1)
        source = np.repeat(np.arange(len(ranks)), counts)
        ends = np.cumsum(counts)
        within = np.arange(int(ends[-1])) - np.repeat(ends - counts, counts)
        expanded = self.pool[self.expanded_start[ranks[source]] + within]
        out = np.where(unmerged[source], expanded, ids[source])
        bounds = np.concatenate([[0], ends])[np.concatenate([[0], np.cumsum(lengths)])]
        return out, np.diff(bounds)


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
