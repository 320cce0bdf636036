"""The MMS special tokens (DESIGN §4) added to a base tokenizer, and the text encoder that
never matches a special token: content is data, so a literal `<|eot_id|>` or `</s>` in it
must become ordinary text tokens."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from pipeline.tokenize.text_encoding import TextEncoder

ROLE = "<|role|>"
NAME = "<|name|>"
FORMAT = "<|format|>"
CONTENT = "<|content|>"
END_TURN = "<|end_turn|>"
MMS_SPECIAL_TOKENS: tuple[str, ...] = (ROLE, NAME, FORMAT, CONTENT, END_TURN)
IMAGE = "<|image|>"
AUDIO = "<|audio|>"
VIDEO = "<|video|>"
MEDIA_TOKENS: dict[str, str] = {"image": IMAGE, "audio": AUDIO, "video": VIDEO}
"""The media placeholder tokens (DESIGN §4), one per kind, in id order: where a media part
stands in a message's content, one token whatever the media's size (the model's processor
expands it). Added to the shipped tokenizer only when the output holds media."""
MEDIA_TOKEN_KEYS: dict[str, str] = {
    "image": "image_token",
    "audio": "audio_token",
    "video": "video_token",
}
"""The tokenizer_config keys (top level, or in `extra_special_tokens`) a multimodal base
tokenizer names its own placeholder under; transformers' processors read them."""
PAD = "<|pad|>"
"""The pad token added when the base tokenizer names no pad, eos or unk token to pad with:
never rendered, so never a trained id (nor any id of a row)."""

_JSON = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")
"""JSON whitespace."""


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


def special_ids(encoder: TextEncoder) -> SpecialIds:
    """The ids of the MMS tokens once added to the tokenizer `encoder` encodes with (as
    `augmented_json` adds them): an id the base already gives the token as an added token is
    reused, new ones come after every existing id, numbered as `tokenizers` numbers added
    tokens when it loads a file."""
    added = encoder.added_tokens()
    present = set(added.values())
    next_id = max([encoder.base_vocab_size(), *(n + 1 for n in added)])
    ids: list[int] = []
    for token in MMS_SPECIAL_TOKENS:
        known = encoder.token_to_id(token) if token in present else None
        if known is not None:
            ids.append(known)
            continue
        ordinary = encoder.token_to_id(token)
        if ordinary is not None:
            raise ValueError(
                f"the base tokenizer has {token} as an ordinary vocabulary entry (id {ordinary}): "
                "that text in content could not be told from the MMS special token; use a "
                "tokenizer without it"
            )
        ids.append(next_id)
        next_id += 1
    return SpecialIds(*ids)


def media_ids(
    encoder: TextEncoder, after: int, named: dict[str, str | None] | None = None
) -> dict[str, tuple[str, int]]:
    """Each media kind's placeholder (token, id): the base's own when its config names one
    (`named`: kind to the token under MEDIA_TOKEN_KEYS) that is one of its added tokens
    (its processor expands it, its embedding is trained), else MEDIA_TOKENS[kind] (the
    base's id when it has that added token, else a new id counted from `after`, the first
    id past every MMS token and the added pad). Fixed by the base alone, whether or not
    the output ships them: text-only outputs keep every id they had."""
    added = set(encoder.added_tokens().values())
    found: dict[str, tuple[str, int]] = {}
    next_id = after
    for kind, token in MEDIA_TOKENS.items():
        own = (named or {}).get(kind)
        if own is not None and own in added and (number := encoder.token_to_id(own)) is not None:
            found[kind] = (own, number)
            continue
        known = encoder.token_to_id(token) if token in added else None
        if known is not None:
            found[kind] = (token, known)
            continue
        ordinary = encoder.token_to_id(token)
        if ordinary is not None:
            raise ValueError(
                f"the base tokenizer has {token} as an ordinary vocabulary entry (id {ordinary}): "
                "that text in content could not be told from the media placeholder; use a "
                "tokenizer without it"
            )
        found[kind] = (token, next_id)
        next_id += 1
    return found


def augmented_json(base_json: bytes, ids: SpecialIds, extra: dict[str, int] | None = None) -> bytes:
    """The tokenizer.json `base_json` with the MMS tokens it lacks appended to its added
    tokens as special tokens with `ids` (from `special_ids`), and the `extra` tokens (a pad)
    with theirs; every byte outside the added tokens is kept (parsing and serializing a
    large vocabulary would take a second)."""
    text = base_json.decode("utf-8")
    found = _top_level_value(text, "added_tokens")
    added = found[2] if found else []
    present = {entry.get("content") for entry in added}
    wanted = {**ids.as_dict(), **(extra or {})}
    new = [_added_entry(n, token) for token, n in wanted.items() if token not in present]
    return _with_value(text, "added_tokens", added + new, found).encode()


_ADDS_TOKENS = frozenset({"TemplateProcessing", "BertProcessing", "RobertaProcessing"})
"""The post-processors that add special tokens (BOS, EOS, CLS, SEP) around the text."""


def post_processor(base: dict[str, Any] | None, bos: tuple[str, int] | None) -> Any:
    """The shipped post-processor (what `tokenizer("text")` adds around the ids): the
    base's, without the processors that add special tokens (a BOS the rows do not have,
    an EOS they never end with), and with `bos` (token, id) as the rows have it, first, when
    the output renders one; pairs get it before each sequence (as transformers' own
    `update_post_processor` builds it for `add_bos_token`). Offset processors (ByteLevel)
    are kept. None: no post-processor."""
    if base is None:
        members: list[Any] = []
    elif base.get("type") == "Sequence":
        members = list(base.get("processors") or [])
    else:
        members = [base]
    kept = [p for p in members if not (isinstance(p, dict) and p.get("type") in _ADDS_TOKENS)]
    if bos is not None:
        token, number = bos
        first = {"SpecialToken": {"id": token, "type_id": 0}}
        kept.append(
            {
                "type": "TemplateProcessing",
                "single": [first, {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [
                    first,
                    {"Sequence": {"id": "A", "type_id": 0}},
                    {"SpecialToken": {"id": token, "type_id": 1}},
                    {"Sequence": {"id": "B", "type_id": 1}},
                ],
                "special_tokens": {token: {"id": token, "ids": [number], "tokens": [token]}},
            }
        )
    if not kept:
        return None
    return kept[0] if len(kept) == 1 else {"type": "Sequence", "processors": kept}


def with_post_processor(tokenizer_json: bytes, bos: tuple[str, int] | None) -> bytes:
    """`tokenizer_json` with the post-processor `post_processor` makes of its own, so the
    tokenizer adds a BOS exactly when the rows have one (`bos`: its token and id) and never
    an EOS; the bytes are unchanged when its post-processor does that already."""
    text = tokenizer_json.decode("utf-8")
    found = _top_level_value(text, "post_processor")
    current = found[2] if found else None
    wanted = post_processor(current, bos)
    if wanted == current:
        return tokenizer_json
    return _with_value(text, "post_processor", wanted, found).encode()


def _with_value(text: str, key: str, value: Any, found: tuple[int, int, Any] | None) -> str:
    """The JSON object `text` with `key` set to `value` (`found`: where its value is, from
    `_top_level_value`), written indented as the line it is on; every other byte kept."""
    written = orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
    if found:
        start, end, _ = found
        line = text[text.rfind("\n", 0, start) + 1 : start]
        written = written.replace("\n", "\n" + line[: len(line) - len(line.lstrip())])
        return text[:start] + written + text[end:]
    after_brace = text.index("{") + 1
    return text[:after_brace] + f"{json.dumps(key)}: {written}," + text[after_brace:]


def _top_level_value(text: str, key: str) -> tuple[int, int, Any] | None:
    """Where the value of `key` in the JSON object `text` starts and ends, and the value;
    None when it has no such key. Only the values before it are parsed (tokenizers writes
    `added_tokens` before the large `model`)."""
    at = _skip_space(text, _skip_space(text, 0) + 1)  # past the opening brace
    while text[at] != "}":
        name, at = _JSON.raw_decode(text, at)
        start = _skip_space(text, _skip_space(text, at) + 1)  # past the colon
        value, end = _JSON.raw_decode(text, start)
        if name == key:
            return start, end, value
        at = _skip_space(text, end)
        if text[at] == ",":
            at = _skip_space(text, at + 1)
    return None


def _skip_space(text: str, at: int) -> int:
    """The offset of the first character at or after `at` that is not JSON whitespace."""
    return _SPACE.match(text, at).end()  # type: ignore[union-attr]


def _added_entry(number: int, token: str) -> dict[str, object]:
    """The added_tokens entry of an MMS token (or the pad): special, matched as written, never stripped
    (what `add_special_tokens` records for it)."""
    return {
        "id": number,
        "content": token,
        "single_word": False,
        "lstrip": False,
        "rstrip": False,
        "normalized": False,
        "special": True,
    }
