"""The torch adapter: `TorchBatches` in a real `torch.utils.data.DataLoader` (worker
processes included) gives every row once, resumes, and its packed batches train a tiny
Llama with the loss of the threads run one by one."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from tests.test_loader import THREADS, output, stored  # noqa: F401 (fixtures)

torch = pytest.importorskip("torch", reason="torch (the torch extra) runs the adapter")
transformers = pytest.importorskip("transformers", reason="transformers builds the tiny model")

from torch.utils.data import DataLoader  # noqa: E402

from pipeline.loader.torch import TorchBatches  # noqa: E402
from tests.tiny_llama import tiny_llama  # noqa: E402


def _rows(batch) -> list[tuple[int, ...]]:
    return [
        tuple(ids[mask == 1].tolist())
        for ids, mask in zip(batch["input_ids"], batch["attention_mask"], strict=True)
    ]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_dataloader_with_workers_sees_every_row_once(output, stored, num_workers):  # noqa: F811
    seen: Counter[tuple[int, ...]] = Counter()
    for rank in range(2):
        batches = TorchBatches(output, rank=rank, world_size=2, batch_size=32, even=False)
        for batch in DataLoader(batches, batch_size=None, num_workers=num_workers):
            assert batch["input_ids"].dtype == torch.int64
            seen.update(_rows(batch))
    assert len(seen) == THREADS and max(seen.values()) == 1
    assert sorted(seen) == sorted(stored)


def test_a_resumed_dataset_gives_the_rest_of_the_epoch(output):  # noqa: F811
    settings = {"batch_size": 8, "seed": 4}
    whole = list(DataLoader(TorchBatches(output, **settings), batch_size=None))
    first = TorchBatches(output, **settings)
    head = list(itertools.islice(iter(first), 5))
    resumed = TorchBatches(output, **settings)
    resumed.load_state_dict(first.state_dict())
    rest = list(DataLoader(resumed, batch_size=None))
    assert len(head) + len(rest) == len(whole)
    for got, expected in zip(head + rest, whole, strict=True):
        assert torch.equal(got["input_ids"], expected["input_ids"])
        assert torch.equal(got["labels"], expected["labels"])


@pytest.mark.parametrize("block_mask", [False, True])
def test_packed_batches_train_with_the_loss_of_their_threads_alone(output, block_mask):  # noqa: F811
    batches = TorchBatches(output, batch_size=2, mode="packed", seq_len=256, block_mask=block_mask)
    batch = next(iter(DataLoader(batches, batch_size=None)))
    model = tiny_llama(int(batch["input_ids"].max()) + 1)
    with torch.no_grad():
        packed = model(**batch, use_cache=False).loss.item()
        total, targets = 0.0, 0
        flat_ids, flat_labels = batch["input_ids"].reshape(-1), batch["labels"].reshape(-1)
        bounds = batch["cu_seq_lens_q"].tolist()
        for start, stop in itertools.pairwise(bounds):
            labels = flat_labels[start:stop]
            count = int((labels[1:] != -100).sum())
            if not count:
                continue  # padding, or a thread with nothing to learn
            alone = model(
                input_ids=flat_ids[start:stop][None], labels=labels[None], use_cache=False
            )
            total += alone.loss.item() * count
            targets += count
    assert packed == pytest.approx(total / targets, abs=1e-4)
