"""The torch adapter: `TorchBatches` in a real `torch.utils.data.DataLoader` (worker
processes included) gives every row once, resumes (with workers, through torchdata's
StatefulDataLoader; a plain DataLoader's copy refuses rather than replay), and its packed
batches train a tiny Llama, left with its default config (a cache), with the loss of the
threads run one by one: the README's snippets as written, the DataLoader loop and 🤗
Trainer; `keep_threads_apart` refuses the batches a model would not keep apart."""

from __future__ import annotations

import itertools
from collections import Counter

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tests.test_loader import THREADS, output, stored  # noqa: F401 (fixtures)

torch = pytest.importorskip("torch", reason="torch (the torch extra) runs the adapter")
transformers = pytest.importorskip("transformers", reason="transformers builds the tiny model")

from torch.utils.data import DataLoader  # noqa: E402

from pipeline.loader import LoaderError  # noqa: E402
from pipeline.loader.torch import (  # noqa: E402
    PackedAttentionError,
    TorchBatches,
    keep_threads_apart,
)
from tests.conftest import REPO  # noqa: E402
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
        assert batch["use_cache"] is False
        packed = model(**batch).loss.item()
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


def _same_batches(got: list[dict], expected: list[dict]) -> bool:
    return len(got) == len(expected) and all(
        torch.equal(a["input_ids"], b["input_ids"]) and torch.equal(a["labels"], b["labels"])
        for a, b in zip(got, expected, strict=True)
    )


def test_a_plain_dataloader_with_workers_refuses_to_give_a_state_that_would_replay(output):  # noqa: F811
    batches = TorchBatches(output, batch_size=8, seed=4)
    head = list(itertools.islice(iter(DataLoader(batches, batch_size=None, num_workers=2)), 5))
    assert len(head) == 5
    with pytest.raises(LoaderError, match="StatefulDataLoader"):
        batches.state_dict()


def test_a_stateful_dataloader_with_workers_resumes_where_it_stopped(output):  # noqa: F811
    stateful = pytest.importorskip("torchdata.stateful_dataloader")
    settings = {"batch_size": 8, "seed": 4}
    whole = list(DataLoader(TorchBatches(output, **settings), batch_size=None, num_workers=2))
    first = stateful.StatefulDataLoader(
        TorchBatches(output, **settings), batch_size=None, num_workers=2
    )
    iterator = iter(first)
    head = [next(iterator) for _ in range(5)]
    state = first.state_dict()
    del iterator
    resumed = stateful.StatefulDataLoader(
        TorchBatches(output, **settings), batch_size=None, num_workers=2
    )
    resumed.load_state_dict(state)
    assert _same_batches(head + list(resumed), whole)


# ------------------------------------------------ packed batches reaching a model


def _readme_blocks() -> list[str]:
    """The Python blocks of the training guide (docs/guides/train-sft.md) that use
    TorchBatches, as written but for the output's path, a small seq_len and batch, and a
    few steps."""
    text = (REPO / "docs" / "guides" / "train-sft.md").read_text(encoding="utf-8")
    blocks = [block.split("```", 1)[0] for block in text.split("```python\n")[1:]]
    return [block for block in blocks if "TorchBatches" in block]


def _runnable(block: str, output) -> str:  # noqa: F811
    replaced = block.replace('"out/quickstart"', repr(str(output))).replace(
        "seq_len=4096", "seq_len=256"
    )
    return replaced.replace("batch_size=8", "batch_size=2").replace("max_steps=1000", "max_steps=3")


class _LossCheck:
    """A forward hook comparing each packed forward's loss with the token-weighted loss
    of its threads run one by one (the same weights, cut at the restarting positions)."""

    def __init__(self, model, most: int = 4, stop: bool = False):
        self.model = model
        self.most = most
        self.stop = stop
        """Whether to end the training (raise _Enough) after `most` compared forwards."""
        self.inside = False
        self.compared = 0
        model.register_forward_hook(self, with_kwargs=True)

    def __call__(self, module, args, kwargs, result):
        if self.inside:
            return
        if self.compared == self.most:
            if self.stop:
                raise _Enough
            return
        self.inside = True
        try:
            alone = self._alone(kwargs["input_ids"], kwargs["labels"], kwargs["position_ids"])
        finally:
            self.inside = False
        assert result.loss.item() == pytest.approx(alone, abs=1e-5)
        self.compared += 1

    def _alone(self, ids, labels, positions) -> float:
        total, targets = 0.0, 0
        with torch.no_grad():
            for row in range(ids.shape[0]):
                starts = (positions[row] == 0).nonzero().flatten().tolist()
                for start, stop in itertools.pairwise([*starts, ids.shape[1]]):
                    piece = labels[row, start:stop]
                    count = int((piece[1:] != -100).sum())
                    if not count:
                        continue
                    loss = self.model(
                        input_ids=ids[row, start:stop][None],
                        labels=piece[None],
                        position_ids=torch.arange(stop - start)[None],
                        use_cache=False,
                    ).loss
                    total += loss.item() * count
                    targets += count
        return total / targets


def _pad_id(output) -> int:  # noqa: F811
    from pipeline.loader import OutputLoader

    return int(OutputLoader(output, batch_size=1).pad_id)


class _Enough(Exception):
    """Ends a README training loop once its first steps were checked."""


def _model(output):  # noqa: F811
    """The tiny Llama in float64, its config as a real one's: use_cache=True."""
    ids = pq.read_table(next((output / "data").glob("*.parquet")), columns=["input_ids"])
    largest = max(pc.max(pc.list_flatten(ids["input_ids"])).as_py(), _pad_id(output))
    model = tiny_llama(largest + 1).double()
    assert model.config.use_cache
    return model


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_the_readme_loop_trains_packed_with_the_loss_of_the_threads_alone(output, attention):  # noqa: F811
    model = _model(output)
    model.config._attn_implementation = attention
    check = _LossCheck(model, stop=True)
    loop = next(block for block in _readme_blocks() if "for step, batch" in block)
    with pytest.raises(_Enough):
        exec(_runnable(loop, output), {"model": model.train()})
    assert check.compared == 4


def test_the_readme_trainer_trains_packed_with_the_loss_of_the_threads_alone(
    output,  # noqa: F811
    tmp_path,
    monkeypatch,
):
    pytest.importorskip("accelerate", reason="transformers' Trainer needs accelerate")
    monkeypatch.chdir(tmp_path)  # the Trainer's output_dir
    loop, trainer = _readme_blocks()[:2]
    assert "Trainer(" in trainer and "use_cache" not in trainer
    model = _model(output)
    namespace = {"model": model}
    exec(_runnable(loop, output).split("model = keep_threads_apart")[0], namespace)
    check = _LossCheck(model)
    exec(_runnable(trainer, output), namespace)
    assert check.compared == 3


def test_a_packed_batch_the_model_would_not_keep_apart_is_refused(output):  # noqa: F811
    model = _model(output)
    batch = next(iter(TorchBatches(output, batch_size=2, mode="packed", seq_len=256)))
    alone = _LossCheck(model)._alone(batch["input_ids"], batch["labels"], batch["position_ids"])
    without_cache_flag = {key: value for key, value in batch.items() if key != "use_cache"}
    with torch.no_grad():  # what the batch used to be: the config's cache on, threads mixed
        mixed = model.train()(**without_cache_flag).loss.item()
    assert abs(mixed - alone) > 1e-4
    guarded = keep_threads_apart(model)
    refused = {
        "a cache": without_cache_flag,
        "a cache asked for": {**batch, "use_cache": True},
        "without position_ids": {k: v for k, v in batch.items() if k != "position_ids"},
        "a 2D attention_mask": {**batch, "attention_mask": torch.ones_like(batch["input_ids"])},
    }
    for what, inputs in refused.items():
        with pytest.raises(PackedAttentionError):
            guarded(**inputs)
        assert what
    guarded.config._attn_implementation = "some_kernel"
    with pytest.raises(PackedAttentionError, match="some_kernel"):
        guarded(**batch)
    guarded.config._attn_implementation = "sdpa"
    with torch.no_grad():
        assert guarded(**batch).loss.item() == pytest.approx(alone, abs=1e-5)
        padded = next(iter(TorchBatches(output, batch_size=2)))  # rows, not packed: let through
        guarded(**{k: v for k, v in padded.items() if k != "use_cache"})


def test_keep_threads_apart_leaves_the_model_taking_padded_batches(output):  # noqa: F811
    model = _model(output).train()
    model.config._attn_implementation = "sdpa"
    guarded = keep_threads_apart(model)
    assert guarded is not model and not model._forward_pre_hooks
    assert all(a is b for a, b in zip(guarded.parameters(), model.parameters(), strict=True))
    padded = next(iter(TorchBatches(output, batch_size=2)))
    collated = {key: padded[key] for key in ("input_ids", "attention_mask", "labels")}
    packed = next(iter(TorchBatches(output, batch_size=2, mode="packed", seq_len=256)))
    without_positions = {key: value for key, value in packed.items() if key != "position_ids"}
    with torch.no_grad():
        model(**collated)  # rows as a padding collator gives them, no position_ids
        for inputs in (collated, without_positions):
            with pytest.raises(PackedAttentionError, match="without position_ids"):
                guarded(**inputs)
        model.eval()  # the shared layers: the copy is out of training too
        guarded(**without_positions)
        model.train()
        with pytest.raises(PackedAttentionError):
            guarded(**without_positions)
