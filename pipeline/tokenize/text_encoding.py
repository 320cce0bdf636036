"""The text encoder the renderer encodes content with, behind one small interface: tiktoken
where it is proven to give the tokenizer's exact ids (four times less CPU), `tokenizers`
everywhere else. Either way no special token is ever matched in content (DESIGN §4)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import numpy as np
import orjson
import pyarrow as pa
from tokenizers import Tokenizer

TEXT_ENCODERS = ("auto", "tokenizers")
"""What a user may ask for: tiktoken where it gives the same ids (`auto`), or `tokenizers`."""


class TextEncoder(Protocol):
    """What the renderer needs of a tokenizer: ids of text, and its vocabulary's lookups."""

    name: str
    """`tokenizers` or `tiktoken`: which library encodes (manifests record it)."""

    def encode_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """The ids of every text, in order, without special tokens around them."""
        ...

    def encode_flat(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """`encode_ids` end to end as one int64 array, and each text's count of ids."""
        ...

    def token_to_id(self, token: str) -> int | None:
        """The id of `token` (an added token first, then the model's vocabulary)."""
        ...

    def id_to_token(self, number: int) -> str | None:
        """The token of id `number`."""
        ...

    def added_tokens(self) -> dict[int, str]:
        """The added tokens, id to content."""
        ...

    def base_vocab_size(self) -> int:
        """The size of the model's own vocabulary (added tokens not counted)."""
        ...


class TokenizersTextEncoder:
    """A `tokenizers.Tokenizer` built by `special.text_encoder`, behind `TextEncoder`."""

    name = "tokenizers"

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer

    def encode_ids(self, texts: Sequence[str]) -> list[list[int]]:
        encoded = self.tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return [e.ids for e in encoded]

    def encode_flat(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        return flat_ids(self.encode_ids(texts))

    def token_to_id(self, token: str) -> int | None:
        return self.tokenizer.token_to_id(token)

    def id_to_token(self, number: int) -> str | None:
        return self.tokenizer.id_to_token(number)

    def added_tokens(self) -> dict[int, str]:
        decoder = self.tokenizer.get_added_tokens_decoder()
        return {number: token.content for number, token in decoder.items()}

    def base_vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size(with_added_tokens=False)


def flat_ids(lists: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Lists of ids end to end (int64) and each list's length, built by Arrow in C++."""
    arrow = pa.array(lists, type=pa.list_(pa.int64()))
    lengths = np.diff(arrow.offsets.to_numpy()).astype(np.int64)
    return arrow.values.to_numpy(zero_copy_only=False), lengths


def build_text_encoder(data: dict[str, Any], control_tokens: Iterable[str] = ()) -> TextEncoder:
    """The `tokenizers` text encoder of the parsed tokenizer.json `data` (a parse of the
    file: about a second for a large vocabulary); where tiktoken gives the same ids, the
    loader builds that one from its recipe instead. `control_tokens` (bos/eos/... from the
    config) are plain text."""
    return TokenizersTextEncoder(text_encoder(data, tuple(control_tokens)))


def text_encoder(data: dict[str, Any], control_tokens: Iterable[str] = ()) -> Tokenizer:
    """The tokenizer of `data` (a parsed tokenizer.json, changed in place), encoding text
    with no special-token matching: every added token that is special, is one of
    `control_tokens` (bos/eos/unk/pad from the config), or stands for an entry of the
    model's own vocabulary (Phi-3's unflagged `</s>`, id 2) is flagged special, and special
    tokens are encoded as plain text. Ids never move; ordinary added words (Qwen's
    `<tool_call>`) keep their own id."""
    controls = set(control_tokens)
    model = data.get("model") or {}
    model_vocab = _model_vocab(model)
    for added in data.get("added_tokens") or []:
        content = added.get("content")
        if content in controls or content in model_vocab:
            added["special"] = True
    special = {a.get("content") for a in data.get("added_tokens") or [] if a.get("special")}
    _drop_merges_making(model, special)
    tokenizer = Tokenizer.from_str(orjson.dumps(data).decode())
    tokenizer.encode_special_tokens = True
    return tokenizer


def _model_vocab(model: dict[str, object]) -> set[str]:
    """The pieces of the model's own vocabulary (BPE/WordLevel/WordPiece map, Unigram list)."""
    vocab = model.get("vocab")
    if isinstance(vocab, dict):
        return set(vocab)
    if isinstance(vocab, list):
        return {entry[0] for entry in vocab if isinstance(entry, list) and entry}
    return set()


def _drop_merges_making(model: dict[str, object], tokens: set[str]) -> None:
    """Remove the BPE merges whose result is a special token, so plain text can never be
    merged into one (a cropped Gemma vocabulary builds `<start_of_turn>` from characters)."""
    merges = model.get("merges")
    if not isinstance(merges, list) or not tokens:
        return
    kept = []
    for merge in merges:
        parts = merge.split(" ", 1) if isinstance(merge, str) else merge
        if "".join(parts) not in tokens:
            kept.append(merge)
    model["merges"] = kept
