"""The `mms-v0` renderer (DESIGN §4): threads to `input_ids` and `labels`.

A batch is rendered in three vectorized steps: every distinct text piece of the batch
(role names, formats, names, contents: a system prompt repeated across threads is encoded
once) goes through ONE call of the text encoder (Rust: tiktoken or `tokenizers`); each
thread becomes a list of segments (a special token or a text piece, trained or not); numpy
gathers the segments' ids into one flat array with its labels. Cost is linear in the
tokens."""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property, partial
from typing import Literal

import numpy as np
import orjson
import pyarrow as pa
from tokenizers import Tokenizer

from pipeline.mms import MEDIA_MARKER, Message, Thread, answer_start, final_turn_start
from pipeline.tokenize.loading import LoadedTokenizer, TokenizerLoadError
from pipeline.tokenize.proofs import kept_file, remembered
from pipeline.tokenize.special import (
    END_TURN,
    MEDIA_TOKEN_KEYS,
    MEDIA_TOKENS,
    MMS_SPECIAL_TOKENS,
    PAD,
    ROLE,
    augmented_json,
    media_ids,
    special_ids,
    with_post_processor,
)
from pipeline.tokenize.text_encoding import TokenizersTextEncoder, text_encoder

RENDERER_NAME = "mms-v0"
"""The rendering contract this module implements (DESIGN §4); manifests record it."""
IGNORE = -100
"""The label of a token that is not trained (the trainers' convention)."""
LabelPolicy = Literal["assistant", "last_assistant"]
LABEL_POLICIES: tuple[str, ...] = ("assistant", "last_assistant")
"""Which assistant messages are trained (DESIGN §4): every one, or only the thread's final
assistant turn. Both leave a message its source weighted 0 untrained, halt included."""

_ROLE, _NAME, _FORMAT, _CONTENT, _END_TURN, _BOS, _IMAGE, _AUDIO, _VIDEO = range(9)
"""Pool slots of the one-token pieces; text pieces follow them."""
_MEDIA_SLOTS = {"image": _IMAGE, "audio": _AUDIO, "video": _VIDEO}
SHIPPED_IDS_FACT = "mms_token_ids"
"""The proof (pipeline/tokenize/proofs.py) of the ids a shipped tokenizer.json gives the MMS
tokens when `tokenizers` parses it."""
SHIPPED_FILE = "shipped-tokenizer.json"
"""The augmented tokenizer.json as the proofs cache keeps it, per base file and settings."""
SHIPPED_MADE = 1
"""How `Renderer.shipped_tokenizer` makes the file; a change to it makes every kept one
again."""
_SPECIAL_SLOTS = 9
STOP_TOKENS: tuple[str, ...] = (END_TURN, ROLE)
"""The tokens a trained span ends with (DESIGN §4), so the ones generation stops on:
`<|end_turn|>` ends the assistant's turn; `<|role|>` is the halt after a message with
end_turn false (before a tool result), trained where the next message opens and appended
when the thread ends halted. Under both labels policies every trained span ends in one of
them; `<|end_turn|>` is the shipped eos_token."""
PAD_SOURCES = ("pad_token", "eos_token", "unk_token")
"""Where the shipped pad token comes from, in order: the base's own pad, else its eos, else
its unk (mms-v0 renders none of them: content that spells one is encoded as text), else an
added `<|pad|>`. So the pad id is never a trained id, and masking it masks nothing real."""


@dataclass(frozen=True, slots=True)
class EncodedThread:
    """One thread's tokens: `labels[i]` is `input_ids[i]` where trained, else -100;
    `message_ends[k]` is the token offset where message k ends."""

    input_ids: list[int]
    labels: list[int]
    message_ends: list[int]

    @property
    def num_tokens(self) -> int:
        return len(self.input_ids)

    @property
    def num_trained(self) -> int:
        return sum(label != IGNORE for label in self.labels)


@dataclass(frozen=True)
class EncodedBatch:
    """A batch's tokens as Arrow columns (list<int32>), ready for Parquet."""

    input_ids: pa.ListArray
    labels: pa.ListArray
    num_tokens: pa.Int32Array
    num_trained: pa.Int32Array
    message_ends: pa.ListArray

    def __len__(self) -> int:
        return len(self.input_ids)

    def __getitem__(self, index: int) -> EncodedThread:
        return EncodedThread(
            self.input_ids[index].as_py(),
            self.labels[index].as_py(),
            self.message_ends[index].as_py(),
        )


class _Segments:
    """A batch's segments (pool slot, trained?) and where threads and messages end."""

    def __init__(self) -> None:
        self.pieces: dict[str, int] = {}
        self.slot: list[int] = []
        self.trained: list[bool] = []
        self.thread_ends: list[int] = []  # segments per thread, cumulative
        self.message_last: list[int] = []  # index of each message's last segment

    def special(self, slot: int, trained: bool) -> None:
        self.slot.append(slot)
        self.trained.append(trained)

    def text(self, text: str, trained: bool) -> None:
        piece = self.pieces.setdefault(text, len(self.pieces))
        self.slot.append(_SPECIAL_SLOTS + piece)
        self.trained.append(trained)

    def end_message(self) -> None:
        self.message_last.append(len(self.slot) - 1)


class Renderer:
    """Renders MMS threads with the MMS special tokens added to `tokenizer`.

    `tokenizer` is a LoadedTokenizer (from `load_tokenizer`) or a `tokenizers.Tokenizer`.
    `bos` prepends the base tokenizer's BOS token (untrained). Text pieces are encoded
    without BOS/EOS and without special-token matching (DESIGN §4). Encoding needs only
    the text encoder: the augmented tokenizer is parsed when first used (decoding)."""

    def __init__(
        self,
        tokenizer: LoadedTokenizer | Tokenizer,
        *,
        bos: bool = False,
        policy: LabelPolicy = "assistant",
    ):
        if policy not in LABEL_POLICIES:
            known = ", ".join(LABEL_POLICIES)
            raise ValueError(f"unknown label policy {policy!r} (known: {known})")
        self.policy = policy
        self.name = RENDERER_NAME
        self._shipped_checked = False
        loaded = tokenizer if isinstance(tokenizer, LoadedTokenizer) else None
        self._source = loaded.path if loaded is not None else "the tokenizer"
        self._base_sha256 = loaded.sha256 if loaded is not None else None
        if loaded is not None:
            self._base_json, self._text = loaded.json_bytes, loaded.text_encoder
        else:
            assert isinstance(tokenizer, Tokenizer)
            self._base_json = tokenizer.to_str().encode()
            self._text = TokenizersTextEncoder(text_encoder(orjson.loads(self._base_json)))
        self.special_ids = special_ids(self._text)
        self.added_pad = self._added_pad(loaded)
        """The pad token added to the shipped tokenizer (token, id) when the base names none
        of pad, eos and unk; None otherwise."""
        self.bos_id = self._bos(loaded) if bos else None
        self.media_tokens = self._media_tokens(loaded)
        """Each media kind's placeholder (token, id) (DESIGN §4): the base's own when its
        config names one, else `<|image|>`, `<|audio|>`, `<|video|>` after every other id.
        Rendered where a media part stands, never trained; shipped only with media."""
        specials = self.special_ids
        self._special_pool = np.array(
            [
                specials.role,
                specials.name,
                specials.format,
                specials.content,
                specials.end_turn,
                self.bos_id if self.bos_id is not None else -1,
                *(self.media_tokens[kind][1] for kind in MEDIA_TOKENS),
            ],
            dtype=np.int64,
        )

    def token_id(self, token: str) -> int | None:
        """The id of `token` in the shipped tokenizer (the added pad included), or None."""
        if self.added_pad is not None and token == self.added_pad[0]:
            return self.added_pad[1]
        return self._text.token_to_id(token)

    def _bos(self, loaded: LoadedTokenizer | None) -> int:
        token = loaded.bos_token if loaded else None
        if token is None:
            where = f" (no bos_token in the config of {loaded.path})" if loaded else ""
            raise ValueError(f"bos was asked for, but the tokenizer names no bos_token{where}")
        found = self._text.token_to_id(token)
        if found is None:
            raise ValueError(
                f"bos was asked for, but the bos_token {token!r} its config names is not in "
                "the tokenizer's vocabulary"
            )
        return found

    def _added_pad(self, loaded: LoadedTokenizer | None) -> tuple[str, int] | None:
        if loaded is None or any(loaded.named(key) for key in PAD_SOURCES):
            return None
        existing = self._text.token_to_id(PAD)
        if existing is not None:
            return PAD, existing
        return PAD, max(self.special_ids.as_dict().values()) + 1

    def _media_tokens(self, loaded: LoadedTokenizer | None) -> dict[str, tuple[str, int]]:
        ids = [*self.special_ids.as_dict().values()]
        if self.added_pad is not None:
            ids.append(self.added_pad[1])
        added = self._text.added_tokens()
        after = max([self._text.base_vocab_size(), *(n + 1 for n in added), *(n + 1 for n in ids)])
        named = (
            {kind: _config_token(loaded.config, key) for kind, key in MEDIA_TOKEN_KEYS.items()}
            if loaded is not None
            else None
        )
        return media_ids(self._text, after, named)

    @cached_property
    def tokenizer(self) -> Tokenizer:
        """The augmented tokenizer (the base with the MMS special tokens), parsed on first use:
        a process that only encodes never pays for it."""
        return Tokenizer.from_str(self.tokenizer_json().decode("utf-8"))

    @property
    def stop_ids(self) -> list[int]:
        """The ids of STOP_TOKENS, in that order: the `eos_token_id` of the shipped
        generation_config.json."""
        found = self.special_ids.as_dict()
        return [found[token] for token in STOP_TOKENS]

    def tokenizer_json(self, media: bool = False) -> bytes:
        """The augmented tokenizer's tokenizer.json, as the dataset ships it (DESIGN §7):
        its post-processor adds the BOS exactly when the rows have it, and no EOS; with
        `media` (an output that holds media), the media placeholders too."""
        return self.shipped_tokenizer(media)[0]

    def shipped_tokenizer(self, media: bool = False) -> tuple[bytes, str]:
        """`tokenizer_json()` and its sha256. Of a loaded tokenizer it is kept in the proofs
        cache per sha256 of the base file and the settings it is made with (the MMS ids, the
        added pad, the BOS): made from a large vocabulary's file it takes a tenth of a
        second, read back a hundredth."""
        extra = dict([self.added_pad]) if self.added_pad else None
        if media:
            extra = {**(extra or {}), **dict(self.media_tokens.values())}
        bos = (self._bos_token_text(), self.bos_id) if self.bos_id is not None else None

        def make() -> bytes:
            augmented = augmented_json(self._base_json, self.special_ids, extra)
            return with_post_processor(augmented, bos)

        if self._base_sha256 is None:
            made = make()
            return made, hashlib.sha256(made).hexdigest()
        settings = {
            "made": SHIPPED_MADE,
            "special_ids": self.special_ids.as_dict(),
            "extra": extra,
            "bos": bos,
        }
        if media:  # a text-only output's kept file keeps its key
            settings["media"] = dict(self.media_tokens)
        return kept_file(self._base_sha256, SHIPPED_FILE, settings, make)

    @property
    def text_encoder_name(self) -> str:
        """Which library encodes the text pieces: `tiktoken` or `tokenizers`."""
        return self._text.name

    def check_shipped_tokenizer(
        self, shipped: bytes | None = None, sha256: str | None = None
    ) -> None:
        """When tiktoken encoded, which never parses the tokenizer.json: parse the augmented
        tokenizer with `tokenizers`, as a trainer will, and check it gives the MMS tokens the
        ids they were rendered with (TokenizerLoadError naming the file if not). Done
        once per renderer; with the `tokenizers` encoder the base was parsed already, and
        nothing is done. `shipped`: the augmented tokenizer.json, when the caller has it
        (`sha256`: its sha256, when the caller has that too)."""
        if self._text.name == "tokenizers" or self._shipped_checked:
            return
        if shipped is None:
            shipped, sha256 = self.shipped_tokenizer()
        elif sha256 is None:
            sha256 = hashlib.sha256(shipped).hexdigest()
        found = remembered(sha256, SHIPPED_IDS_FACT, partial(self._parsed_ids, shipped))
        for token, number in self.special_ids.as_dict().items():
            if found[token] != number:
                raise TokenizerLoadError(
                    f"{self._source}: the augmented tokenizer gives {token} the id "
                    f"{found[token]}, not {number} as rendered"
                )
        self._shipped_checked = True

    def _parsed_ids(self, shipped: bytes) -> dict[str, int | None]:
        """The ids the shipped tokenizer.json gives the MMS tokens, parsed by `tokenizers`."""
        try:  # not kept: a large vocabulary holds a hundred MB a worker would carry on
            tokenizer = Tokenizer.from_str(shipped.decode("utf-8"))
        except Exception as err:  # tokenizers raises a bare Exception
            raise TokenizerLoadError(
                f"{self._source}: `tokenizers` cannot load the tokenizer: {err}"
            ) from None
        found = {token: tokenizer.token_to_id(token) for token in MMS_SPECIAL_TOKENS}
        del tokenizer
        _return_freed_memory()
        return found

    # ------------------------------------------------------------------ API

    def encode(self, thread: Thread) -> EncodedThread:
        """One thread's input_ids and labels."""
        return self.encode_batch([thread])[0]

    def encode_batch(self, threads: Sequence[Thread]) -> EncodedBatch:
        """Every thread's input_ids and labels, with one tokenizer call for the batch."""
        segments = _Segments()
        for thread in threads:
            self._plan(thread, segments)
        return self._gather(segments)

    @cached_property
    def generation_prompt_ids(self) -> list[int]:
        """`<|role|>assistant<|format|>`: what the chat template's `add_generation_prompt`
        renders, where the model's answer (its format first) begins."""
        (assistant,) = self._text.encode_ids(["assistant"])
        specials = self.special_ids
        return [specials.role, *assistant, specials.format]

    def prompt_lengths(self, threads: Sequence[Thread], encoded: EncodedBatch) -> np.ndarray:
        """For each thread of `encoded`, the tokens of its prompt: everything before its
        answer (`answer_start`: its final assistant turn, when it ends with one) and the
        generation prompt that opens the answer. Past `num_tokens` for a thread that ends
        waiting for an answer: its prompt is the whole thread and the generation prompt."""
        ends = encoded.message_ends
        starts = [answer_start(thread.messages) for thread in threads]
        opening = 1 if self.bos_id is not None else 0
        lengths = [
            (ends[row][start - 1].as_py() if start else opening) for row, start in enumerate(starts)
        ]
        return np.asarray(lengths, dtype=np.int32) + len(self.generation_prompt_ids)

    def render_text(self, thread: Thread) -> str:
        """The rendered string (special tokens as text), for inspection and round trips."""
        placeholders = {kind: token for kind, (token, _) in self.media_tokens.items()}
        return "".join(_rendered(thread, self._bos_token_text(), placeholders))

    # ------------------------------------------------------------------ planning

    def _bos_token_text(self) -> str:
        if self.bos_id is None:
            return ""
        token = self._text.id_to_token(self.bos_id)
        assert token is not None  # the id was looked up by this token (_bos)
        return token

    def _content(self, message: Message, segments: _Segments, trained: bool) -> None:
        """A message's content: its text, each media part as its kind's placeholder token
        at its marker, never trained (DESIGN §4)."""
        if not message.media:
            segments.text(message.content, trained)
            return
        pieces = message.content.split(MEDIA_MARKER)
        for media, piece in zip(message.media, pieces, strict=False):
            segments.text(piece, trained)
            segments.special(_MEDIA_SLOTS[media.kind], False)
        segments.text(pieces[-1], trained)

    def _plan(self, thread: Thread, segments: _Segments) -> None:
        """The segments of one thread, labelled per §4: the `assistant` bullets, limited to
        the final assistant turn under `last_assistant`; a message weighted 0 trains nothing,
        neither its tokens nor the halt that ends it (the <|role|> that opens it is trained
        when it continues a trained message: that message's halt)."""
        if self.bos_id is not None:
            segments.special(_BOS, False)
        first_trained = final_turn_start(thread.messages) if self.policy == "last_assistant" else 0
        previous: Message | None = None
        halt_trained = False  # whether the message before, if it halted, trains its halt
        for index, message in enumerate(thread.messages):
            continuing = (
                previous is not None and previous.role == "assistant" and previous.end_turn is False
            )
            if message.role == "assistant":
                trained = message.trained and index >= first_trained
                # the header is prompt, unless the model chose to continue its own turn; its
                # <|role|> is the halt of a trained message before it, whatever its weight
                segments.special(_ROLE, continuing and (trained or halt_trained))
                segments.text("assistant", continuing and trained)
                segments.special(_FORMAT, continuing and trained)
                segments.text(message.format or "markdown", trained)
                segments.special(_CONTENT, trained)
                self._content(message, segments, trained)
                if message.end_turn:
                    segments.special(_END_TURN, trained)
                halt_trained = trained
            else:
                # after an assistant message that did not end its turn, the <|role|> that
                # opens the next message is the halt signal the model must learn
                segments.special(_ROLE, continuing and halt_trained)
                segments.text(message.role, False)
                if message.role == "context" and message.name:
                    segments.special(_NAME, False)
                    segments.text(message.name, False)
                segments.special(_CONTENT, False)
                self._content(message, segments, False)
            segments.end_message()
            previous = message
        if previous is not None and previous.role == "assistant" and previous.end_turn is False:
            segments.special(_ROLE, halt_trained)  # the halt signal at the end of the thread
        segments.thread_ends.append(len(segments.slot))

    # ------------------------------------------------------------------ gathering

    def _gather(self, segments: _Segments) -> EncodedBatch:
        texts = list(segments.pieces)
        if texts:
            flat, lengths = self._text.encode_flat(texts)
        else:
            flat, lengths = np.zeros(0, np.int64), np.zeros(0, np.int64)
        pool = np.concatenate([self._special_pool, flat])
        pool_len = np.concatenate([np.ones(_SPECIAL_SLOTS, dtype=np.int64), lengths])
        pool_start = np.concatenate([[0], np.cumsum(pool_len)[:-1]])

        slot = np.asarray(segments.slot, dtype=np.int64)
        seg_len = pool_len[slot]
        seg_end = np.cumsum(seg_len)
        total = int(seg_end[-1]) if len(seg_end) else 0
        # token t of segment s comes from pool_start[slot[s]] + (t - start of s)
        offsets = np.repeat(pool_start[slot] - (seg_end - seg_len), seg_len)
        input_ids = pool[offsets + np.arange(total, dtype=np.int64)].astype(np.int32)
        trained = np.repeat(np.asarray(segments.trained, dtype=bool), seg_len)
        labels = np.where(trained, input_ids, np.int32(IGNORE)).astype(np.int32)

        thread_end_segments = np.asarray(segments.thread_ends, dtype=np.int64)
        thread_token_ends = seg_end[thread_end_segments - 1]
        thread_offsets = np.concatenate([[0], thread_token_ends]).astype(np.int32)
        num_tokens = np.diff(thread_offsets)
        trained_cumsum = np.concatenate([[0], np.cumsum(trained)])
        num_trained = np.diff(trained_cumsum[thread_offsets])

        message_token_ends = seg_end[np.asarray(segments.message_last, dtype=np.int64)]
        messages_per_thread = np.diff(
            np.searchsorted(segments.message_last, np.concatenate([[0], thread_end_segments]))
        )
        thread_of_message = np.repeat(np.arange(len(num_tokens)), messages_per_thread)
        relative_ends = (message_token_ends - thread_offsets[:-1][thread_of_message]).astype(
            np.int32
        )
        message_offsets = np.concatenate([[0], np.cumsum(messages_per_thread)]).astype(np.int32)

        return EncodedBatch(
            input_ids=pa.ListArray.from_arrays(pa.array(thread_offsets), pa.array(input_ids)),
            labels=pa.ListArray.from_arrays(pa.array(thread_offsets), pa.array(labels)),
            num_tokens=pa.array(num_tokens.astype(np.int32)),
            num_trained=pa.array(num_trained.astype(np.int32)),
            message_ends=pa.ListArray.from_arrays(
                pa.array(message_offsets), pa.array(relative_ends)
            ),
        )


def _return_freed_memory() -> None:
    """Give the heap pages a parsed tokenizer freed back to the system: glibc keeps them
    otherwise, and a worker would carry 200 MB it no longer uses. A no-op where the C
    library has no `malloc_trim`."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).malloc_trim(0)


def rendered_content(message: Message, placeholders: dict[str, str] | None = None) -> str:
    """What a message's content renders as (DESIGN §4), special tokens written as their
    text: its text, each media part as its kind's placeholder (`placeholders`: kind to
    token; without them, the U+FFFC marker that stands for it)."""
    if not message.media or placeholders is None:
        return message.content
    pieces = message.content.split(MEDIA_MARKER)
    out = [pieces[0]]
    for media, piece in zip(message.media, pieces[1:], strict=True):
        out += [placeholders[media.kind], piece]
    return "".join(out)


def _config_token(config: dict[str, object], key: str) -> str | None:
    """The token a tokenizer config names under `key`, top level or in
    `extra_special_tokens` (a string or an AddedToken dict)."""
    value = config.get(key)
    extra = config.get("extra_special_tokens")
    if value is None and isinstance(extra, dict):
        value = extra.get(key)
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) and value else None


def _rendered(thread: Thread, bos: str, placeholders: dict[str, str] | None = None) -> list[str]:
    """The rendered string's parts, special tokens written as their text."""
    parts = [bos] if bos else []
    for message in thread.messages:
        parts += ["<|role|>", message.role]
        if message.role == "context" and message.name:
            parts += ["<|name|>", message.name]
        if message.role == "assistant":
            parts += ["<|format|>", message.format or "markdown"]
        parts += ["<|content|>", rendered_content(message, placeholders)]
        if message.role == "assistant" and message.end_turn:
            parts.append("<|end_turn|>")
    last = thread.messages[-1] if thread.messages else None
    if last is not None and last.role == "assistant" and last.end_turn is False:
        parts.append("<|role|>")
    return parts
