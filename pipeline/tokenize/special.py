"""The MMS special tokens (DESIGN §4) added to a base tokenizer, and the text encoder that
never matches a special token: content is data, so a literal `<|eot_id|>` or `</s>` in it
must become ordinary text tokens."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import orjson
from tokenizers import AddedToken, Tokenizer

ROLE = "<|role|>"
NAME = "<|name|>"
FORMAT = "<|format|>"
CONTENT = "<|content|>"
END_TURN = "<|end_turn|>"
MMS_SPECIAL_TOKENS: tuple[str, ...] = (ROLE, NAME, FORMAT, CONTENT, END_TURN)


@dataclass(frozen=True, slots=True)
class SpecialIds:
    """The ids of the five MMS special tokens in the augmented tokenizer."""

    role: int
    name: int
    format: int
    content: int
    end_turn: int

    def as_dict(self) -> dict[str, int]:
        return dict(
            zip(
                MMS_SPECIAL_TOKENS,
                (self.role, self.name, self.format, self.content, self.end_turn),
                strict=True,
            )
        )


def augment(base: Tokenizer) -> tuple[Tokenizer, SpecialIds]:
    """A copy of `base` with the MMS tokens added as special tokens: an id the base already
    gives the token (as an added token) is reused, new ones come after every existing id."""
    tokenizer = Tokenizer.from_str(base.to_str())
    missing = [t for t in MMS_SPECIAL_TOKENS if _added_id(tokenizer, t) is None]
    if missing:
        tokenizer.add_special_tokens(
            [AddedToken(t, special=True, normalized=False, single_word=False) for t in missing]
        )
    ids = [tokenizer.token_to_id(token) for token in MMS_SPECIAL_TOKENS]
    if any(i is None for i in ids) or len(set(ids)) != len(ids):
        raise ValueError(f"the MMS special tokens could not be added with distinct ids: {ids}")
    return tokenizer, SpecialIds(*ids)  # type: ignore[arg-type]


def _added_id(tokenizer: Tokenizer, token: str) -> int | None:
    for number, added in tokenizer.get_added_tokens_decoder().items():
        if added.content == token:
            return number
    return None


def text_encoder(base: Tokenizer, control_tokens: Iterable[str] = ()) -> Tokenizer:
    """A copy of `base` that encodes text with no special-token matching: every added token
    that is special, or is one of `control_tokens` (bos/eos/unk/pad, which some tokenizers
    such as Phi-3's `</s>` leave unflagged), is matched no more and becomes plain text.
    Ordinary added words (Qwen's `<tool_call>`) stay what the vocabulary says."""
    data = orjson.loads(base.to_str())
    controls = set(control_tokens)
    data["added_tokens"] = [
        added
        for added in data.get("added_tokens") or []
        if not added.get("special") and added.get("content") not in controls
    ]
    return Tokenizer.from_str(orjson.dumps(data).decode())
