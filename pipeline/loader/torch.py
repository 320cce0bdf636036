"""The torch adapter (the `torch` extra): `TorchBatches`, an output's batches as a
`torch.utils.data.IterableDataset` of tensors, ready for a DataLoader with `batch_size=None`
(or, in 🤗 Transformers' `Trainer`, one batch per step with `collate=TorchBatches.collate`).

Each DataLoader worker reads its own share (the worker is found with `get_worker_info`),
the rank and world size come from `torch.distributed` when it is initialised, and every
worker of every rank yields the same number of batches per epoch (OutputLoader, `even`).

Resuming: `state_dict()`/`load_state_dict()` follow the protocol of torchdata's
StatefulDataLoader, so a resumed run gets the batches an uninterrupted run would have. Where
the batches were made decides who knows the position: in the main process (a DataLoader with
`num_workers=0`, or none) this object does; in DataLoader worker processes only the workers'
copies do, which StatefulDataLoader asks; this object's `state_dict()` then refuses (a plain
DataLoader cannot tell it how far the training got, and a position of 0 would replay the
epoch).

Packed batches keep their threads apart whatever the model's config: they carry
`use_cache=False` (with a cache, transformers does not look for packed sequences in
`position_ids`), and `keep_threads_apart(model)` gives a copy of the model (sharing its
weights) that refuses a packed batch that would let its threads attend to each other."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from pipeline.loader.output_loader import LoaderError, OutputLoader

PACKED_KEYS = ("cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k")
"""The varlen arguments a packed batch carries (what marks a batch as packed)."""
SEPARATING_ATTENTION = ("eager", "sdpa", "flex_attention")
"""Attention implementations transformers gives a block-diagonal mask found from restarting
`position_ids` (with no cache and no 2D attention mask); `flash_attention_*` reads the varlen
arguments, or `position_ids`, itself."""


class TorchBatches(IterableDataset[dict[str, Any]]):
    """Batches of an output folder as dicts of tensors; takes OutputLoader's settings
    (batch_size, mode, seq_len, split, seed, shuffle, even, block_mask, pad_id)."""

    def __init__(
        self,
        source: str | Path,
        *,
        rank: int | None = None,
        world_size: int | None = None,
        **settings: Any,
    ):
        distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
        self.rank = (
            rank if rank is not None else (torch.distributed.get_rank() if distributed else 0)
        )
        self.world_size = (
            world_size
            if world_size is not None
            else (torch.distributed.get_world_size() if distributed else 1)
        )
        self.source = source
        self.settings = settings
        self.epoch = 0
        self._loader: OutputLoader | None = None
        self._state: dict[str, Any] | None = None
        flag = torch.zeros(1, dtype=torch.int64)
        # torch leaves Tensor.share_memory_ unannotated (it returns the tensor)
        self._in_workers: torch.Tensor = flag.share_memory_()  # type: ignore[no-untyped-call]
        """Set by a DataLoader worker process that iterates a copy of this object (shared
        memory: the copies are pickled, or forked, into the workers)."""

    def set_epoch(self, epoch: int) -> None:
        """Start `epoch` (another shuffle) at its first batch."""
        self.epoch, self._state = epoch, None

    def state_dict(self) -> dict[str, Any]:
        """Where this copy is (see OutputLoader.state_dict). In the main process of a
        DataLoader whose workers made the batches, a LoaderError: use StatefulDataLoader."""
        if get_worker_info() is None and self._loader is None and int(self._in_workers[0]):
            raise LoaderError(
                "these batches were made in DataLoader worker processes, which alone know how "
                "far they got: resume with torchdata's StatefulDataLoader (its state_dict() "
                "asks the workers), or iterate with num_workers=0"
            )
        if self._loader is not None:
            return self._loader.state_dict()
        return self._state or {"epoch": self.epoch, "batches": 0, "seed": self._seed()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Go on from `state` at the next iteration."""
        self._state = dict(state)
        self.epoch = state["epoch"]

    def batches_per_epoch(self, num_workers: int = 0) -> int:
        """The batches this rank yields this epoch through a DataLoader with `num_workers`
        workers (0: in the main process, the DataLoader default): what its workers yield
        together, the same for every rank with `even` (OutputLoader.batches_per_epoch), what
        sizes `max_steps` or a learning-rate schedule. Without `even`, packed on the fly, the
        fewest it may yield."""
        if num_workers < 0:
            raise LoaderError(f"num_workers must be 0 or more, not {num_workers}")
        workers = max(num_workers, 1)
        loader = self._new_loader(0, workers)
        if loader.even:  # every worker of every rank yields the same
            return workers * loader.batches_per_epoch()
        total = 0
        for worker in range(workers):  # one loader: the shards' metadata read once
            loader.worker = worker
            total += loader.batches_per_epoch()
        return total

    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = get_worker_info()
        if info is not None:
            self._in_workers[0] = 1
        self._loader = self._new_loader(
            info.id if info is not None else 0, info.num_workers if info is not None else 1
        )
        if self._state is not None:
            self._loader.load_state_dict(self._state)
            self._state = None
        for batch in self._loader:
            tensors: dict[str, Any] = {key: _tensor(value) for key, value in batch.items()}
            if "cu_seq_lens_q" in tensors:
                tensors["use_cache"] = False
            yield tensors

    @staticmethod
    def collate(batches: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """A collate function for a DataLoader that asks for one item at a time (🤗
        Trainer with `per_device_train_batch_size=1`): the batch as it is."""
        if len(batches) != 1:
            raise LoaderError(
                f"TorchBatches gives whole batches: collate them one at a time "
                f"(per_device_train_batch_size=1, or DataLoader batch_size=None), not {len(batches)}"
            )
        return batches[0]

    def _new_loader(self, worker: int, num_workers: int) -> OutputLoader:
        return OutputLoader(
            self.source,
            rank=self.rank,
            world_size=self.world_size,
            worker=worker,
            num_workers=num_workers,
            epoch=self.epoch,
            **self.settings,
        )

    def _seed(self) -> int:
        return int(self.settings.get("seed", 0))


def keep_threads_apart(model: torch.nn.Module) -> torch.nn.Module:
    """`model` checked before every forward pass in training mode: a batch must reach it
    with `position_ids` and, when they show it is packed, with what keeps its threads apart,
    else PackedAttentionError (see `packed_attention_problem`). For a model trained on
    packed batches: a batch without `position_ids` is refused.

    The checked model is a copy that shares `model`'s weights, layers and config (training
    one trains the other; save either); `model` itself is left as it was, so it still
    takes batches of rows padded by any collator, with or without `position_ids`."""
    guarded = copy.copy(model)
    for name, hooks in vars(model).items():  # its own hooks: the check stays on the copy
        if "hook" in name and isinstance(hooks, dict):
            setattr(guarded, name, type(hooks)(hooks))

    def check(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if not _training(module):
            return
        problem = packed_attention_problem(module, kwargs)
        if problem is not None:
            raise PackedAttentionError(problem)

    guarded.register_forward_pre_hook(check, with_kwargs=True)
    return guarded


def _training(module: torch.nn.Module) -> bool:
    """Whether `module` is in training mode as its layers are: `train()` and `eval()` on
    the model a copy was made from set the shared layers, not the copy's own flag."""
    layers = list(module.children())
    return any(layer.training for layer in layers) if layers else module.training


class PackedAttentionError(ValueError):
    """A packed batch reached a model that would let its threads attend to each other."""


def packed_attention_problem(model: torch.nn.Module, inputs: dict[str, Any]) -> str | None:
    """Why `model` called with `inputs` (a packed batch) would let threads attend to each
    other, None when nothing says so. What can be told from outside (transformers' masking
    rules, 5.x): the batch must carry `position_ids` (a collator that drops them leaves
    nothing to find the threads in); eager and sdpa attention get a block-diagonal mask
    only from restarting `position_ids` with no cache and no 2D `attention_mask`, unless
    the batch carries a 4D mask (`block_mask=True`); flash attention reads the varlen
    arguments (or `position_ids`). An implementation not known here is refused."""
    config = getattr(model, "config", None)
    implementation = getattr(config, "_attn_implementation", None)
    if inputs.get("position_ids") is None:
        return (
            "a packed batch without position_ids: the model would take its threads for one "
            "sequence (did a collator drop them? Trainer's remove_unused_columns=True keeps "
            "them, a collator that rebuilds the batch may not)"
        )
    positions = inputs["position_ids"]
    restarts = positions.dim() == 2 and bool((positions[:, 1:] == 0).any())
    if not restarts and not any(key in inputs for key in PACKED_KEYS):
        return None  # one sequence per row: nothing to keep apart
    mask = inputs.get("attention_mask")
    if mask is not None and mask.dim() == 4:
        return None  # the block-diagonal mask keeps threads apart whatever else
    if isinstance(implementation, str) and implementation.startswith("flash_attention"):
        return None
    if implementation not in SEPARATING_ATTENTION:
        return (
            f"attention {implementation!r} is not known to keep packed threads apart: use "
            f"flash_attention_2, sdpa or eager, or block_mask=True"
        )
    if mask is not None:
        return (
            f"a 2D attention_mask with a packed batch: {implementation} attention then ignores "
            "the threads' restarting position_ids (packed batches need none)"
        )
    use_cache = inputs.get("use_cache")
    if use_cache is None:
        use_cache = getattr(config, "use_cache", False)
    if use_cache or inputs.get("past_key_values") is not None:
        return (
            f"a cache with a packed batch: {implementation} attention then ignores the "
            "threads' restarting position_ids (call the model with use_cache=False, as the "
            "batches carry it)"
        )
    return None


def _tensor(value: np.ndarray | np.int64) -> torch.Tensor | int | list[Any]:
    """A batch array as a tensor; a scalar (max_length_q/k) as the int models expect; text
    (a prompt batch's `reference` and `id`) as a list."""
    if np.ndim(value) == 0:
        return int(value)
    if value.dtype == object:
        return value.tolist()
    return torch.from_numpy(np.ascontiguousarray(value))
