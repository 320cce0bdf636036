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


def augment(base_json: str) -> tuple[Tokenizer, SpecialIds]:
    """The tokenizer of `base_json` (a tokenizer.json text) with the MMS tokens added as
    special tokens: an id the base already gives the token (as an added token) is reused,
    new ones come after every existing id."""
    tokenizer = Tokenizer.from_str(base_json)
    missing = [t for t in MMS_SPECIAL_TOKENS if _added_id(tokenizer, t) is None]
    for token in missing:
        ordinary = tokenizer.token_to_id(token)
        if ordinary is not None:
            raise ValueError(
                f"the base tokenizer has {token} as an ordinary vocabulary entry (id {ordinary}): "
                "that text in content could not be told from the MMS special token; use a "
                "tokenizer without it"
            )
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


def text_encoder(base_json: str, control_tokens: Iterable[str] = ()) -> Tokenizer:
    """The tokenizer of `base_json`, encoding text with no special-token matching: every
    added token that is special, is one of `control_tokens` (bos/eos/unk/pad from the
    config), or stands for an entry of the model's own vocabulary (Phi-3's unflagged
    `</s>`, id 2) is flagged special, and special tokens are encoded as plain text. Ids
    never move; ordinary added words (Qwen's `<tool_call>`) keep their own id."""
    data = orjson.loads(base_json)
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
