"""`pipeline.loader.OutputLoader`: every row exactly once per epoch across
`world_size x num_workers` consumers, the same batches for the same seed, resumable mid-epoch,
packed batches that keep threads apart, and the rows of a packed output as they are."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from pathlib import Path

import numpy as np
import orjson
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.loader import LoaderError, OutputLoader
from tests.conftest import REPO

SAMPLE_TOKENIZER = REPO / "configs" / "sample_tokenizer"
THREADS = 2600  # three row groups of 1,000 rows: shares cross group boundaries


def _thread(number: int, rng: random.Random) -> dict:
    words = " ".join(
        rng.choice(["alpha", "beta", "gamma", "delta", "x"]) for _ in range(rng.randint(1, 60))
    )
    return {
        "id": f"t{number}",
        "messages": [
            {"role": "user", "content": f"question {number}: {words}"},
            {"role": "assistant", "content": f"answer {number}", "end_turn": True},
        ],
    }


@pytest.fixture(scope="module")
def output(tmp_path_factory) -> Path:
    """A tokenized output of THREADS distinct threads of varied lengths."""
    folder = tmp_path_factory.mktemp("loader")
    rng = random.Random(7)
    threads = folder / "threads.jsonl"
    threads.write_bytes(b"".join(orjson.dumps(_thread(n, rng)) + b"\n" for n in range(THREADS)))
    out = folder / "out"
    args = ["tokenize", str(threads), "--tokenizer", str(SAMPLE_TOKENIZER), "-o", str(out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def stored(output) -> list[tuple[int, ...]]:
    table = pq.read_table(next((output / "data").glob("*.parquet")), columns=["input_ids"])
    return [tuple(ids) for ids in table["input_ids"].to_pylist()]


def _rows_of(batch: dict[str, np.ndarray]) -> list[tuple[int, ...]]:
    """The unpadded rows of a padded batch."""
    return [
        tuple(ids[mask == 1].tolist())
        for ids, mask in zip(batch["input_ids"], batch["attention_mask"], strict=True)
    ]


def _threads_of(batch: dict[str, np.ndarray], pad_id: int) -> list[tuple[int, ...]]:
    """The threads of a packed batch, cut at the cu_seq_lens bounds (padding dropped)."""
    flat = batch["input_ids"].reshape(-1)
    labels = batch["labels"].reshape(-1)
    bounds = batch["cu_seq_lens_q"].tolist()
    found = []
    for start, stop in itertools.pairwise(bounds):
        assert batch["position_ids"].reshape(-1)[start:stop].tolist() == list(range(stop - start))
        padding = (labels[start:stop] == -100).all() and (flat[start:stop] == pad_id).all()
        if not padding:
            found.append(tuple(flat[start:stop].tolist()))
    return found


@pytest.mark.parametrize("world_size", [1, 2, 4])
@pytest.mark.parametrize("num_workers", [1, 2])
@pytest.mark.parametrize("even", [True, False])
def test_every_row_once_per_epoch_across_ranks_and_workers(
    output, stored, world_size, num_workers, even
):
    seen: Counter[tuple[int, ...]] = Counter()
    per_consumer = []
    left_over = None
    for rank in range(world_size):
        for worker in range(num_workers):
            loader = OutputLoader(
                output,
                batch_size=16,
                rank=rank,
                world_size=world_size,
                worker=worker,
                num_workers=num_workers,
                seed=3,
                even=even,
            )
            left_over = loader.share().left_over
            rows = [row for batch in loader for row in _rows_of(batch)]
            per_consumer.append(len(rows))
            seen.update(rows)
    consumers = world_size * num_workers
    assert max(seen.values()) == 1  # no duplicates
    if even:
        assert set(per_consumer) == {THREADS // consumers}
        assert left_over == THREADS % consumers == THREADS - sum(per_consumer)
    else:
        assert sorted(seen) == sorted(stored) and max(per_consumer) - min(per_consumer) <= 1
    assert set(seen) <= set(stored)


def test_the_same_seed_gives_the_same_batches_and_epochs_differ(output):
    def first_rows(epoch: int, seed: int = 0) -> list[tuple[int, ...]]:
        loader = OutputLoader(output, batch_size=8, seed=seed, epoch=epoch)
        return _rows_of(next(iter(loader)))

    assert first_rows(0) == first_rows(0)
    assert first_rows(0) != first_rows(1)
    assert first_rows(0) != first_rows(0, seed=1)


@pytest.mark.parametrize("mode", ["padded", "packed"])
def test_a_resumed_loader_gives_the_batches_an_uninterrupted_one_gives(output, mode):
    settings = {"batch_size": 4, "mode": mode, "seq_len": 256, "seed": 5, "epoch": 2}
    settings |= {"rank": 1, "world_size": 2}
    whole = list(OutputLoader(output, **settings))
    first = OutputLoader(output, **settings)
    iterator = iter(first)
    head = [next(iterator) for _ in range(7)]
    state = first.state_dict()
    resumed = OutputLoader(output, **settings)
    resumed.load_state_dict(orjson.loads(orjson.dumps(state)))  # a plain, serializable dict
    rest = list(resumed)
    assert len(head) + len(rest) == len(whole)
    for got, expected in zip(head + rest, whole, strict=True):
        assert got.keys() == expected.keys()
        assert all(np.array_equal(got[key], expected[key]) for key in got)


@pytest.mark.parametrize("even", [False, True])
def test_packed_batches_hold_every_fitting_thread_once_and_apart(output, stored, even):
    """Every fitting thread once; with `even`, those of the sequences past the equal number
    of batches are left out, and counted."""
    loader = OutputLoader(
        output, batch_size=4, mode="packed", seq_len=128, block_mask=True, even=even
    )
    threads: Counter[tuple[int, ...]] = Counter()
    for batch in loader:
        assert batch["input_ids"].shape[1] == 128
        threads.update(_threads_of(batch, loader.pad_id))
        mask = batch["attention_mask"]
        positions = batch["position_ids"]
        for row in range(mask.shape[0]):  # a token sees itself and earlier tokens of its thread
            starts = np.flatnonzero(positions[row] == 0)
            for start, stop in zip(starts, [*starts[1:], 128], strict=True):
                allowed = mask[row, 0, start:stop, :] == 0
                assert allowed[:, start:stop].sum() == (stop - start) * (stop - start + 1) // 2
                assert allowed.sum() == allowed[:, start:stop].sum()
    fitting = [ids for ids in stored if len(ids) <= 128]
    assert max(threads.values()) == 1 and set(threads) <= set(fitting)
    assert len(threads) + loader.surplus_rows == len(fitting)
    assert (loader.surplus_rows == 0) == (not even)
    assert loader.overlong_rows == len(stored) - len(fitting)


def test_a_packed_output_is_read_as_it_is(output, tmp_path):
    packed = tmp_path / "packed"
    result = CliRunner().invoke(main, ["pack", str(output), "--seq-len", "256", "-o", str(packed)])
    assert result.exit_code == 0, result.output
    table = pq.read_table(next((packed / "data").glob("*.parquet")))
    loader = OutputLoader(packed, batch_size=2, mode="packed", seq_len=256, shuffle=False)
    got = [row for batch in loader for row in batch["input_ids"]]
    assert len(got) == table.num_rows
    for row, ids in zip(got, table["input_ids"].to_pylist(), strict=True):
        assert row[: len(ids)].tolist() == ids
    with pytest.raises(LoaderError, match="is packed"):
        OutputLoader(packed, batch_size=2)


def test_clear_errors_for_what_cannot_be_loaded(output, tmp_path):
    with pytest.raises(LoaderError, match="no shards of split 'test'"):
        OutputLoader(output, batch_size=2, split="test")
    with pytest.raises(LoaderError, match="need seq_len"):
        OutputLoader(output, batch_size=2, mode="packed")
    loader = OutputLoader(output, batch_size=2)
    with pytest.raises(LoaderError, match="seed 9"):
        loader.load_state_dict({"epoch": 0, "batches": 1, "seed": 9})


def test_a_hub_dataset_is_loaded_from_the_hub_cache_offline(output, tmp_path, monkeypatch):
    """ORG/NAME goes through huggingface_hub: here its cache holds the dataset (as a
    download leaves it) and HF_HUB_OFFLINE=1 keeps the test off the network."""
    import shutil

    import huggingface_hub.constants as hub

    cache = tmp_path / "hub"
    repo = cache / "datasets--someone--threads"
    shutil.copytree(output / "data", repo / "snapshots" / "abc123" / "data")
    shutil.copytree(output / "tokenizer", repo / "snapshots" / "abc123" / "tokenizer")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    monkeypatch.setattr(hub, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", True)
    from_hub = OutputLoader("someone/threads", batch_size=8, seed=1)
    local = OutputLoader(output, batch_size=8, seed=1)
    assert all(
        np.array_equal(a["input_ids"], b["input_ids"]) for a, b in zip(from_hub, local, strict=True)
    )
    with pytest.raises(LoaderError, match="cannot be fetched"):
        OutputLoader("someone/missing", batch_size=8)
    with pytest.raises(LoaderError, match="not a folder, nor a Hub dataset"):
        OutputLoader(tmp_path / "nowhere", batch_size=8)
