"""Batches as numpy arrays: rows padded to the longest (pad id, labels -100), or packed
sequences with what attention needs to keep their threads apart; the rows of the other
objectives (pipeline/objectives) as their trainers batch them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

IGNORE = -100

Batch = dict[str, np.ndarray | np.int64]
"""A batch by name: arrays, and the scalars a packed batch carries (`max_length_q/k`)."""


def padded_batch(
    rows: Sequence[tuple[np.ndarray, np.ndarray]], pad_id: int
) -> dict[str, np.ndarray]:
    """`input_ids`, `labels`, `attention_mask` and `position_ids` [batch, longest] of
    (input_ids, labels) rows, padded on the right."""
    longest = max(len(ids) for ids, _ in rows)
    input_ids = np.full((len(rows), longest), pad_id, dtype=np.int64)
    labels = np.full((len(rows), longest), IGNORE, dtype=np.int64)
    mask = np.zeros((len(rows), longest), dtype=np.int64)
    for index, (ids, row_labels) in enumerate(rows):
        input_ids[index, : len(ids)] = ids
        labels[index, : len(ids)] = row_labels
        mask[index, : len(ids)] = 1
    positions = np.broadcast_to(np.arange(longest, dtype=np.int64), (len(rows), longest)).copy()
    return {
        "input_ids": input_ids,
        "labels": labels,
        "attention_mask": mask,
        "position_ids": positions,
    }


def packed_batch(
    sequences: Sequence[tuple[np.ndarray, np.ndarray, Sequence[int]]],
    seq_len: int,
    pad_id: int,
    *,
    block_mask: bool = False,
) -> Batch:
    """[batch, seq_len] arrays of packed (input_ids, labels, thread lengths) sequences:
    `position_ids` restart at 0 for every thread (and for a row's padding), and the
    flash-attention varlen arguments `cu_seq_lens_q/k` (int32 boundaries of every thread,
    and of every row's padding, over the flattened batch) with `max_length_q/k`. With
    `block_mask`, an additive float32 `attention_mask` [batch, 1, seq_len, seq_len]: 0 where
    a token may attend (earlier tokens of its own thread), the lowest float elsewhere."""
    count = len(sequences)
    input_ids = np.full((count, seq_len), pad_id, dtype=np.int64)
    labels = np.full((count, seq_len), IGNORE, dtype=np.int64)
    positions = np.zeros((count, seq_len), dtype=np.int64)
    segments: list[int] = []
    for index, (ids, row_labels, lengths) in enumerate(sequences):
        used = len(ids)
        if used > seq_len or sum(lengths) != used:
            raise ValueError(f"a packed sequence of {used} tokens does not fit {seq_len}")
        input_ids[index, :used] = ids
        labels[index, :used] = row_labels
        pieces = [*lengths, *([seq_len - used] if used < seq_len else [])]
        positions[index] = np.concatenate([np.arange(n, dtype=np.int64) for n in pieces])
        segments += pieces
    bounds = np.concatenate([[0], np.cumsum(segments)]).astype(np.int32)
    longest = max(segments) if segments else 0
    batch: Batch = {
        "input_ids": input_ids,
        "labels": labels,
        "position_ids": positions,
        "cu_seq_lens_q": bounds,
        "cu_seq_lens_k": bounds,
        "max_length_q": np.int64(longest),
        "max_length_k": np.int64(longest),
    }
    if block_mask:
        batch["attention_mask"] = _block_mask(positions)
    return batch


def _block_mask(positions: np.ndarray) -> np.ndarray:
    """The additive block-diagonal causal mask of rows whose segments restart positions."""
    segment = np.cumsum(positions == 0, axis=1)
    same = segment[:, :, None] == segment[:, None, :]
    causal = np.tril(np.ones((positions.shape[1],) * 2, dtype=bool))
    allowed = same & causal[None]
    mask = np.where(allowed, 0.0, np.finfo(np.float32).min).astype(np.float32)
    return mask[:, None]


def preference_batch(
    pairs: Sequence[tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]],
    pad_id: int,
) -> dict[str, np.ndarray]:
    """Both sides of each pair padded together, as DPO trainers batch them: rows 0..n-1
    are the pairs' `prompt + chosen`, rows n..2n-1 their `prompt + rejected` (labels
    -100 over the prompt)."""
    return padded_batch(
        [chosen for chosen, _ in pairs] + [rejected for _, rejected in pairs], pad_id
    )


def prompt_batch(prompts: Sequence[np.ndarray], pad_id: int) -> dict[str, np.ndarray]:
    """Prompts padded on the left, so that generation continues each from its last
    token: `input_ids` and `attention_mask` [batch, longest]."""
    longest = max(len(ids) for ids in prompts)
    input_ids = np.full((len(prompts), longest), pad_id, dtype=np.int64)
    mask = np.zeros((len(prompts), longest), dtype=np.int64)
    for index, ids in enumerate(prompts):
        input_ids[index, longest - len(ids) :] = ids
        mask[index, longest - len(ids) :] = 1
    return {"input_ids": input_ids, "attention_mask": mask}
