"""Packing for the trainer (pipeline.packing.best_fit) and the batches built from it
(pipeline.loader.batches): bins within seq_len holding every row once, ties kept in row order,
open bins bounded, fill at 4,096 on realistic lengths; packed batches whose threads keep
their tokens and labels, restart their positions and carry exact varlen bounds."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.loader.batches import IGNORE, packed_batch, padded_batch
from pipeline.packing.best_fit import (
    WINDOW,
    BestFitPacker,
    OverlongRowError,
    PackingStats,
    pack_rows,
)


@given(
    lengths=st.lists(st.integers(1, 300), max_size=400),
    seq_len=st.integers(300, 1200),
    window=st.integers(1, 80),
)
def test_bins_fit_hold_every_row_once_and_come_out_the_same_twice(lengths, seq_len, window):
    bins = list(pack_rows(lengths, seq_len, window=window))
    assert sorted(row for rows in bins for row in rows) == list(range(len(lengths)))
    assert all(rows and sum(lengths[row] for row in rows) <= seq_len for rows in bins)
    assert bins == list(pack_rows(list(lengths), seq_len, window=window))


@given(
    length=st.integers(1, 50),
    per_bin=st.integers(1, 8),
    rows=st.integers(0, 200),
    window=st.integers(1, 64),
)
def test_equal_lengths_fill_bins_in_row_order(length, per_bin, rows, window):
    bins = list(pack_rows([length] * rows, length * per_bin, window=window))
    assert bins == [list(range(i, min(i + per_bin, rows))) for i in range(0, rows, per_bin)]


@given(
    lengths=st.lists(st.integers(1, 100), max_size=300),
    chunk=st.integers(1, 40),
    max_open=st.integers(0, 12),
)
def test_open_bins_never_outnumber_max_open(lengths, chunk, max_open):
    """Any state is the end of some prefix: what `finish` hands out is what was held open."""
    packer = BestFitPacker(100, max_open=max_open)
    closed = []
    for start in range(0, len(lengths), chunk):
        closed += packer.place(lengths[start : start + chunk])
    held = packer.open_rows()
    still_open = packer.finish()
    assert len(still_open) <= max_open
    assert sorted(row for rows in still_open for row in rows) == held
    assert sorted(row for rows in closed + still_open for row in rows) == list(range(len(lengths)))


@pytest.mark.parametrize("median", [400, 800])
@pytest.mark.parametrize("window", [1000, WINDOW])
def test_fill_at_4096_on_lognormal_lengths_is_over_98_percent(median, window):
    rng = np.random.default_rng(median)
    lengths = np.clip(rng.lognormal(np.log(median), 1.0, 40_000).astype(np.int64), 1, 4096)
    bins = list(pack_rows(lengths.tolist(), 4096, window=window))
    stats = PackingStats(len(bins), len(lengths), int(lengths.sum()), 4096)
    assert stats.fill >= 0.98
    assert stats.padding == len(bins) * 4096 - int(lengths.sum())


def test_a_row_over_seq_len_is_refused_not_packed():
    with pytest.raises(OverlongRowError, match="row 2 has 11 tokens, over 10"):
        list(pack_rows([4, 6, 11, 1], 10))


@st.composite
def _sequences(draw) -> tuple[int, list[list[int]]]:
    """seq_len and, per packed row, the lengths of its threads (at least one, within seq_len)."""
    seq_len = draw(st.integers(1, 48))
    rows = []
    for _ in range(draw(st.integers(1, 4))):
        lengths = draw(st.lists(st.integers(1, seq_len), min_size=1, max_size=6))
        fitting = int((np.cumsum(lengths) <= seq_len).sum())  # at least the first
        rows.append(lengths[:fitting])
    return seq_len, rows


@given(shape=_sequences(), seed=st.integers(0, 2**16), pad_id=st.integers(0, 9))
def test_packed_batches_keep_threads_whole_and_apart(shape, seed, pad_id):
    seq_len, rows = shape
    rng = np.random.default_rng(seed)
    threads = [
        [(rng.integers(10, 99, n), np.where(rng.random(n) < 0.5, IGNORE, 7)) for n in lengths]
        for lengths in rows
    ]
    sequences = [
        (
            np.concatenate([ids for ids, _ in row]),
            np.concatenate([labels for _, labels in row]),
            lengths,
        )
        for row, lengths in zip(threads, rows, strict=True)
    ]
    batch = packed_batch(sequences, seq_len, pad_id, block_mask=True)
    assert batch["input_ids"].shape == batch["labels"].shape == (len(rows), seq_len)
    segments = []
    for index, (row, lengths) in enumerate(zip(threads, rows, strict=True)):
        start = 0
        for ids, labels in row:
            stop = start + len(ids)
            assert batch["input_ids"][index, start:stop].tolist() == ids.tolist()
            assert batch["labels"][index, start:stop].tolist() == labels.tolist()
            assert batch["position_ids"][index, start:stop].tolist() == list(range(len(ids)))
            start = stop
        assert (batch["input_ids"][index, start:] == pad_id).all()
        assert (batch["labels"][index, start:] == IGNORE).all()
        segments += [*lengths, *([seq_len - start] if start < seq_len else [])]
    bounds = batch["cu_seq_lens_q"]
    assert bounds.dtype == np.int32 and bounds.tolist() == [0, *itertools.accumulate(segments)]
    assert np.array_equal(bounds, batch["cu_seq_lens_k"])
    assert int(batch["max_length_q"]) == int(batch["max_length_k"]) == max(segments)
    flat_segment = np.repeat(np.arange(len(segments)), segments).reshape(len(rows), seq_len)
    causal = np.tril(np.ones((seq_len, seq_len), dtype=bool))
    allowed = (flat_segment[:, :, None] == flat_segment[:, None, :]) & causal
    assert batch["attention_mask"].shape == (len(rows), 1, seq_len, seq_len)
    assert np.array_equal(batch["attention_mask"][:, 0] == 0, allowed)


@given(
    lengths=st.lists(st.integers(1, 30), min_size=1, max_size=8),
    pad_id=st.integers(0, 9),
)
def test_padded_batches_pad_ids_labels_and_mask_on_the_right(lengths, pad_id):
    rows = [(np.arange(n) + 100, np.arange(n) % 3 - 1) for n in lengths]
    batch = padded_batch(rows, pad_id)
    longest = max(lengths)
    for index, (ids, labels) in enumerate(rows):
        n = len(ids)
        assert batch["input_ids"][index, :n].tolist() == ids.tolist()
        assert batch["labels"][index, :n].tolist() == labels.tolist()
        assert (batch["input_ids"][index, n:] == pad_id).all()
        assert (batch["labels"][index, n:] == IGNORE).all()
        assert batch["attention_mask"][index].tolist() == [1] * n + [0] * (longest - n)
        assert batch["position_ids"][index].tolist() == list(range(longest))
