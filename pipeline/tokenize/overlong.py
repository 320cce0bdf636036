"""Threads longer than `max_tokens`: drop them (counted, with the reason), cut them at a
message boundary (the prefix re-rendered, so its labels follow DESIGN §4 for the shorter
thread), or stop with an error that names the thread."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from pipeline.mms import Thread
from pipeline.tokenize.renderer import IGNORE, EncodedBatch, EncodedThread, Renderer

OverlongPolicy = Literal["drop", "truncate", "error"]
OVERLONG_POLICIES: tuple[str, ...] = ("drop", "truncate", "error")


def drop_codes(limit: str = "max_tokens") -> dict[str, str]:
    """Why a stage leaves a thread out: the counted code and what it means, for a stage
    whose length limit is `limit` (`max_tokens` for tokenize, `--seq-len` for pack)."""
    return {
        "overlong": f"longer than {limit} (overlong policy drop)",
        "overlong_untrainable": f"longer than {limit}, and no message boundary under it "
        "keeps a trained token (overlong policy truncate)",
    }


DROP_CODES: dict[str, str] = drop_codes()
"""Why the tokenize stage leaves a thread out: the counted code and what it means."""


class OverlongThreadError(Exception):
    """A thread longer than max_tokens under the `error` policy."""

    def __init__(self, thread: Thread, num_tokens: int, max_tokens: int):
        self.thread = thread
        self.num_tokens = num_tokens
        self.max_tokens = max_tokens
        super().__init__(
            f"thread {thread.id} ({source_of(thread)}) has {num_tokens:,} tokens, "
            f"more than the maximum of {max_tokens:,}"
        )


@dataclass(frozen=True, slots=True)
class Drop:
    """A thread left out by the tokenize stage: `code` is counted, `reason` says why."""

    thread: Thread
    code: str
    reason: str
    num_tokens: int


@dataclass(frozen=True)
class Fit:
    """A batch brought under max_tokens. `rows[j]` is where output row j comes from: a row of
    the batch, or `len(batch) + t` for `truncated[t]` (encoded in `truncated_encoded`)."""

    rows: np.ndarray
    truncated: list[Thread] = field(default_factory=list)
    truncated_encoded: EncodedBatch | None = None
    drops: list[Drop] = field(default_factory=list)
    cut_tokens: dict[int, int] = field(default_factory=dict)
    """Per batch row that was truncated: the tokens its cut left out (the whole thread's
    less the truncation's)."""
    truncated_rows: list[int] = field(default_factory=list)
    """The batch row each of `truncated` was cut from, in order (a thread's id need not
    be unique: two files of one source may number their records alike)."""


def source_of(thread: Thread) -> str:
    """Where a thread came from (its locator, else its source) for messages to people."""
    meta = thread.meta
    return str(meta.get("locator") or meta.get("source") or "source unknown")


def fit_batch(
    threads: Sequence[Thread],
    encoded: EncodedBatch,
    renderer: Renderer,
    *,
    max_tokens: int,
    policy: OverlongPolicy,
) -> Fit:
    """Apply `policy` to the threads of a batch whose `num_tokens` exceed `max_tokens`."""
    if policy not in OVERLONG_POLICIES:
        raise ValueError(f"unknown overlong policy {policy!r} (known: {OVERLONG_POLICIES})")
    num_tokens = encoded.num_tokens.to_numpy()
    overlong = np.flatnonzero(num_tokens > max_tokens)
    if not len(overlong):
        return Fit(np.arange(len(threads)))
    if policy == "error":
        first = int(overlong[0])
        raise OverlongThreadError(threads[first], int(num_tokens[first]), max_tokens)
    source = np.arange(len(threads))
    keep = np.ones(len(threads), dtype=bool)
    drops: list[Drop] = []
    truncated: list[Thread] = []
    whole: dict[int, int] = {}
    for index in overlong.tolist():
        thread, tokens = threads[index], int(num_tokens[index])
        kept = 0 if policy == "drop" else kept_messages(thread, encoded[index], max_tokens)
        if kept:
            source[index] = len(threads) + len(truncated)
            truncated.append(truncate(thread, kept, tokens, max_tokens))
            whole[index] = tokens
            continue
        keep[index] = False
        drops.append(_drop(thread, policy, tokens, max_tokens))
    truncated_encoded = renderer.encode_batch(truncated) if truncated else None
    cut_tokens: dict[int, int] = {}
    if truncated_encoded is not None:
        _check_fits(truncated, truncated_encoded, max_tokens)
        kept_tokens = truncated_encoded.num_tokens.to_pylist()
        cut_tokens = {i: n - kept for (i, n), kept in zip(whole.items(), kept_tokens, strict=True)}
    return Fit(source[keep], truncated, truncated_encoded, drops, cut_tokens, list(whole))


def kept_messages(thread: Thread, encoded: EncodedThread, max_tokens: int) -> int:
    """The most messages k such that `messages[:k]` renders in `max_tokens` tokens with a
    trained token; 0 when no k does. Read off `message_ends`: a prefix renders as the
    thread's first tokens, plus the trailing halt `<|role|>` when it ends on an assistant
    message with end_turn=false."""
    ends = np.asarray(encoded.message_ends, dtype=np.int64)
    halts = np.fromiter(
        (m.role == "assistant" and m.end_turn is False for m in thread.messages),
        dtype=np.int64,
        count=len(thread.messages),
    )
    lengths = ends + halts  # strictly increasing: every message has at least two tokens
    k = int(np.searchsorted(lengths, max_tokens, side="right"))
    if k == 0:
        return 0
    labels = np.asarray(encoded.labels[: int(ends[k - 1])], dtype=np.int64)
    trained = int(np.count_nonzero(labels != IGNORE)) + int(halts[k - 1])
    return k if trained else 0


def truncate(thread: Thread, kept: int, num_tokens: int, max_tokens: int) -> Thread:
    """`thread` cut to its first `kept` messages, with a note in `meta.notes`."""
    note = (
        f"truncated by mms tokenize to its first {kept} of {len(thread.messages)} messages "
        f"to fit max_tokens {max_tokens} (the whole thread has {num_tokens} tokens)"
    )
    notes = thread.meta.get("notes")
    notes = list(notes) if isinstance(notes, list) else [] if notes is None else [notes]
    meta = {**thread.meta, "notes": [*notes, note]}
    return Thread(thread.id, thread.messages[:kept], thread.settings, meta)


def _drop(thread: Thread, policy: OverlongPolicy, num_tokens: int, max_tokens: int) -> Drop:
    code = "overlong" if policy == "drop" else "overlong_untrainable"
    return Drop(thread, code, drop_reason(code, num_tokens, max_tokens), num_tokens)


def drop_reason(code: str, num_tokens: int, max_tokens: int) -> str:
    """Why a thread of `num_tokens` was left out under the code `code` (DROP_CODES)."""
    reason = f"overlong: {num_tokens} tokens > max {max_tokens}"
    if code == "overlong_untrainable":
        reason += f", and no message boundary under max {max_tokens} keeps a trained token"
    return reason


def _check_fits(threads: list[Thread], encoded: EncodedBatch, max_tokens: int) -> None:
    """The re-rendered prefixes must be what message_ends predicted: within the maximum,
    with a trained token. Anything else is a renderer bug, never silently written."""
    num_tokens = encoded.num_tokens.to_numpy()
    num_trained = encoded.num_trained.to_numpy()
    for thread, tokens, trained in zip(threads, num_tokens, num_trained, strict=True):
        if tokens > max_tokens or trained == 0:
            raise RuntimeError(
                f"thread {thread.id} ({source_of(thread)}) truncated to "
                f"{len(thread.messages)} messages renders as {tokens} tokens ({trained} "
                f"trained), not within max_tokens {max_tokens} with a trained token: a bug"
            )
