"""The text encoder the renderer encodes content with, behind one small interface: tiktoken
where it is proven to give the tokenizer's exact ids (four times less CPU), `tokenizers`
everywhere else. Either way no special token is ever matched in content (DESIGN §4)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from tokenizers import Tokenizer

from pipeline.tokenize.special import text_encoder
from pipeline.tokenize.tiktoken_encoder import tiktoken_encoder

TEXT_ENCODERS = ("auto", "tokenizers")
"""What a user may ask for: tiktoken where it gives the same ids (`auto`), or `tokenizers`."""


class TextEncoder(Protocol):
    """What the renderer needs of a tokenizer: ids of text, and its vocabulary's lookups."""

    name: str
    """`tokenizers` or `tiktoken`: which library encodes (manifests record it)."""

    def encode_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """The ids of every text, in order, without special tokens around them."""
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

    def token_to_id(self, token: str) -> int | None:
        return self.tokenizer.token_to_id(token)

    def id_to_token(self, number: int) -> str | None:
        return self.tokenizer.id_to_token(number)

    def added_tokens(self) -> dict[int, str]:
        decoder = self.tokenizer.get_added_tokens_decoder()
        return {number: token.content for number, token in decoder.items()}

    def base_vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size(with_added_tokens=False)


def build_text_encoder(
    data: dict[str, Any], control_tokens: Iterable[str] = (), *, fast: bool = True
) -> TextEncoder:
    """The text encoder of the parsed tokenizer.json `data`: tiktoken when `fast` and it is
    known to give the same ids, else `tokenizers` (which parses the file: about a second for
    a large vocabulary). `control_tokens` (bos/eos/... from the config) are plain text."""
    controls = tuple(control_tokens)
    found = tiktoken_encoder(data, controls) if fast else None
    return found if found is not None else TokenizersTextEncoder(text_encoder(data, controls))
