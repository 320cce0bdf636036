"""`OutputLoader`: a split of an output folder as training batches (numpy), for one consumer
of `world_size x num_workers`: padded rows, sequences packed on the fly, or the rows of a
packed output as they are. Exactly once per epoch across consumers (pipeline.loader.
assignment), shuffled from the seed with bounded memory, and resumable: `state_dict()` after
n batches and `load_state_dict()` give the batches an uninterrupted run gives from n on."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import orjson
import pyarrow.parquet as pq

from pipeline.loader.assignment import Share, epoch_rng, row_groups, share
from pipeline.loader.batches import packed_batch, padded_batch
from pipeline.output.hub import HF_PREFIX, OutputNotFound, fetch_output, is_hub_output
from pipeline.output.shards import split_files
from pipeline.packing.best_fit import WINDOW, BestFitPacker

Mode = Literal["padded", "packed"]
SHUFFLE_TOKENS = 4_000_000
"""Tokens held to shuffle within a consumer's share, by default (about 32 MB of ids and
labels): 10,000 threads of 400 tokens, or 1,000 packed rows of 4,096."""
_Row = tuple[np.ndarray, np.ndarray, list[int]]


class LoaderError(ValueError):
    """The folder or the settings cannot give batches (no such split, no pad token ...)."""


@dataclass
class OutputLoader:
    """Batches of `split` of the output folder `source` (see the module docstring)."""

    source: str | Path
    batch_size: int
    mode: Mode = "padded"
    seq_len: int | None = None
    split: str = "train"
    rank: int = 0
    world_size: int = 1
    worker: int = 0
    num_workers: int = 1
    seed: int = 0
    shuffle: bool = True
    shuffle_buffer: int | None = None
    """Rows held to shuffle; None: as many as hold about SHUFFLE_TOKENS tokens."""
    even: bool = True
    block_mask: bool = False
    pad_id: int | None = None
    epoch: int = 0

    def __post_init__(self) -> None:
        if self.world_size < 1 or self.num_workers < 1 or self.batch_size < 1:
            raise LoaderError(
                "world_size, num_workers and batch_size must be at least 1 (a DataLoader's "
                "num_workers=0 is one worker: the main process)"
            )
        folder = output_folder(self.source)
        paths = split_files(folder / "data").get(self.split, [])
        if not paths:
            raise LoaderError(f"{folder} has no shards of split {self.split!r} in data/")
        self.groups = row_groups(paths)
        names = pq.read_schema(paths[0]).names
        if "input_ids" not in names:
            raise LoaderError(f"{paths[0]} holds no tokens: load an output made with a tokenizer")
        self.prepacked = "seq_lens" in names
        if self.mode == "packed" and self.seq_len is None:
            raise LoaderError("packed batches need seq_len")
        if self.prepacked and self.mode != "packed":
            raise LoaderError(f"{folder} is packed: load it with mode='packed'")
        if self.pad_id is None:
            self.pad_id = shipped_pad_id(folder)
        self._skip = 0
        self._yielded = 0
        self.overlong_rows = 0
        """Rows over seq_len left out by on-the-fly packing (this iteration)."""

    @property
    def consumers(self) -> int:
        return self.world_size * self.num_workers

    @property
    def consumer(self) -> int:
        return self.rank * self.num_workers + self.worker

    def share(self) -> Share:
        """This consumer's rows of the current epoch."""
        return share(
            self.groups,
            consumer=self.consumer,
            consumers=self.consumers,
            seed=self.seed,
            epoch=self.epoch,
            shuffle=self.shuffle,
            even=self.even,
        )

    def set_epoch(self, epoch: int) -> None:
        """Start `epoch` (another shuffle) at its first batch."""
        self.epoch, self._skip, self._yielded = epoch, 0, 0

    def state_dict(self) -> dict[str, Any]:
        """Where this consumer is: its epoch and how many batches of it were given."""
        return {"epoch": self.epoch, "batches": self._yielded, "seed": self.seed}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Go on from `state`: the next iteration skips the batches already given."""
        if state.get("seed", self.seed) != self.seed:
            raise LoaderError(f"the state was saved with seed {state['seed']}, not {self.seed}")
        self.epoch, self._skip, self._yielded = state["epoch"], state["batches"], state["batches"]

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        skip, self._yielded = self._skip, self._skip
        self._skip = self.overlong_rows = 0
        for number, batch in enumerate(self._batches()):
            if number < skip:
                continue
            self._yielded += 1
            yield batch

    # ----------------------------------------------------------------- internals

    def _batches(self) -> Iterator[dict[str, np.ndarray]]:
        rows = self._shuffled(self._rows())
        assert self.pad_id is not None
        if self.mode == "padded":
            for chunk in _chunks(rows, self.batch_size):
                yield padded_batch([(ids, labels) for ids, labels, _ in chunk], self.pad_id)
            return
        assert self.seq_len is not None
        sequences = rows if self.prepacked else self._packed(rows)
        for chunk in _chunks(sequences, self.batch_size):
            yield packed_batch(chunk, self.seq_len, self.pad_id, block_mask=self.block_mask)

    def _rows(self) -> Iterator[_Row]:
        columns = ["input_ids", "labels", *(["seq_lens"] if self.prepacked else [])]
        files: dict[Path, pq.ParquetFile] = {}
        for group, start, stop in self.share().slices:
            file = files.setdefault(group.path, pq.ParquetFile(group.path))
            table = file.read_row_group(group.index, columns=columns).slice(start, stop - start)
            ids = table["input_ids"].combine_chunks()
            labels = table["labels"].combine_chunks()
            offsets = ids.offsets.to_numpy()
            flat_ids = ids.values.to_numpy()
            flat_labels = labels.values.to_numpy()
            lengths = table["seq_lens"].to_pylist() if self.prepacked else None
            for index in range(table.num_rows):
                a, b = offsets[index], offsets[index + 1]
                row_lengths = lengths[index] if lengths is not None else [int(b - a)]
                # copies: a held view would keep its whole row group in memory
                yield flat_ids[a:b].copy(), flat_labels[a:b].copy(), row_lengths

    def _shuffled(self, rows: Iterator[_Row]) -> Iterator[_Row]:
        """`rows` through a bounded buffer: a random held row goes out as each row comes in."""
        if not self.shuffle:
            yield from rows
            return
        rng = epoch_rng(self.seed, self.epoch, self.consumer)
        size = self.shuffle_buffer or self._buffer_rows()
        buffer: list[_Row] = []
        for row in rows:
            if len(buffer) < size:
                buffer.append(row)
                continue
            index = int(rng.integers(len(buffer)))
            yield buffer[index]
            buffer[index] = row
        for index in rng.permutation(len(buffer)):
            yield buffer[index]

    def _buffer_rows(self) -> int:
        """Rows of about SHUFFLE_TOKENS tokens: packed rows are seq_len long, threads as long
        as the split's mean (from the row groups' sizes, without reading them)."""
        if self.prepacked and self.seq_len:
            return max(SHUFFLE_TOKENS // self.seq_len, 16)
        rows = sum(group.rows for group in self.groups) or 1
        mean = sum(group.bytes for group in self.groups) / rows / 8  # id + label, int32 each
        return max(int(SHUFFLE_TOKENS // max(mean, 1)), 16)

    def _packed(self, rows: Iterator[_Row]) -> Iterator[_Row]:
        """Rows packed best-fit-decreasing a window at a time (rows over seq_len are left
        out: pack with `mms pack --overlong` to truncate or count them)."""
        assert self.seq_len is not None
        packer = BestFitPacker(self.seq_len, max_open=WINDOW)
        held: dict[int, _Row] = {}
        window: list[_Row] = []

        def emit(closed: list[list[int]]) -> Iterator[_Row]:
            for sequence in closed:
                parts = [held.pop(number) for number in sequence]
                yield (
                    np.concatenate([p[0] for p in parts]),
                    np.concatenate([p[1] for p in parts]),
                    [n for p in parts for n in p[2]],
                )

        def place() -> Iterator[_Row]:
            fitting = [row for row in window if len(row[0]) <= self.seq_len]  # type: ignore[operator]
            self.overlong_rows += len(window) - len(fitting)
            start = packer.placed
            held.update(enumerate(fitting, start=start))
            yield from emit(packer.place(len(row[0]) for row in fitting))

        for row in rows:
            window.append(row)
            if len(window) == WINDOW:
                yield from place()
                window = []
        yield from place()
        yield from emit(packer.finish())


def output_folder(source: str | Path) -> Path:
    """A local output folder as it is; `hf:ORG/NAME[@REVISION]` (or plain ORG/NAME, when
    no such folder exists) names a Hub dataset, whose files huggingface_hub fetches, or
    finds in its cache (offline too, with HF_HUB_OFFLINE=1)."""
    folder = Path(source)
    if not is_hub_output(source) and folder.is_dir():
        return folder
    name = str(source)
    if not is_hub_output(name):
        if isinstance(source, Path) or name.count("/") != 1 or name.startswith("."):
            raise LoaderError(f"{source} is not a folder, nor a Hub dataset (hf:ORG/NAME)")
        name = HF_PREFIX + name
    try:
        return fetch_output(name)
    except OutputNotFound as err:
        raise LoaderError(str(err)) from None


def _chunks(items: Iterator[Any], size: int) -> Iterator[list[Any]]:
    chunk: list[Any] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def shipped_pad_id(folder: Path) -> int:
    """The id of the pad token the output's tokenizer/ names (mms_special_tokens.json)."""
    record_file = folder / "tokenizer" / "mms_special_tokens.json"
    try:
        record = orjson.loads(record_file.read_bytes())
    except (OSError, orjson.JSONDecodeError) as err:
        raise LoaderError(f"{record_file}: {err}") from None
    pad_id = record.get("pad_id")
    if not record.get("pad_token") or not isinstance(pad_id, int):
        raise LoaderError(f"{record_file} names no pad token (and id): give pad_id")
    return pad_id
