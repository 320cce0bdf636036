"""The torch adapter (the `torch` extra): `TorchBatches`, an output's batches as a
`torch.utils.data.IterableDataset` of tensors, ready for a DataLoader with `batch_size=None`.

Each DataLoader worker reads its own share (the worker is found with `get_worker_info`),
the rank and world size come from `torch.distributed` when it is initialised, and
`state_dict()`/`load_state_dict()` follow the protocol of torchdata's StatefulDataLoader,
so a resumed run gets the batches an uninterrupted one would have."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from pipeline.loader.output_loader import OutputLoader


class TorchBatches(IterableDataset):
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

    def set_epoch(self, epoch: int) -> None:
        """Start `epoch` (another shuffle) at its first batch."""
        self.epoch, self._state = epoch, None

    def state_dict(self) -> dict[str, Any]:
        """Where this worker's copy is (see OutputLoader.state_dict)."""
        if self._loader is not None:
            return self._loader.state_dict()
        return self._state or {"epoch": self.epoch, "batches": 0, "seed": self._seed()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Go on from `state` at the next iteration."""
        self._state = dict(state)
        self.epoch = state["epoch"]

    def __iter__(self) -> Iterator[dict[str, torch.Tensor | int]]:
        info = get_worker_info()
        self._loader = OutputLoader(
            self.source,
            rank=self.rank,
            world_size=self.world_size,
            worker=info.id if info is not None else 0,
            num_workers=info.num_workers if info is not None else 1,
            epoch=self.epoch,
            **self.settings,
        )
        if self._state is not None:
            self._loader.load_state_dict(self._state)
            self._state = None
        for batch in self._loader:
            yield {key: _tensor(value) for key, value in batch.items()}

    def _seed(self) -> int:
        return int(self.settings.get("seed", 0))


def _tensor(value: np.ndarray) -> torch.Tensor | int:
    """A batch array as a tensor; a scalar (max_length_q/k) as the int models expect."""
    if np.ndim(value) == 0:
        return int(value)
    return torch.from_numpy(np.ascontiguousarray(value))
