"""`OutputLoader`: a split of an output folder as training batches (numpy), for one consumer
of `world_size x num_workers`: padded rows, sequences packed on the fly, or the rows of a
packed output as they are. At most once per epoch across consumers (pipeline.loader.
assignment), shuffled from the seed with bounded memory, and resumable: `state_dict()` after
n batches and `load_state_dict()` give the batches an uninterrupted run gives from n on.

Equal steps: with `even` (the default) every consumer yields the same number of batches in
an epoch, `batches_per_epoch()`, in every mode, so data-parallel ranks never wait for each
other at the end of an epoch:

- padded, and packed outputs read as they are: every consumer gets `rows // consumers` rows
  (the `rows % consumers` left out are counted in `share().left_over`, different rows each
  epoch), so `ceil(rows // consumers / batch_size)` batches, the last one maybe smaller;
- packed on the fly: a consumer's rows make a number of sequences that depends on their
  lengths, so every consumer yields `min over consumers of ceil(ceil(T_c / seq_len) /
  batch_size)` batches, T_c the tokens of consumer c's rows that fit seq_len (from the
  shards' `num_tokens`, known to every consumer): no consumer can make fewer sequences than
  ceil(T_c / seq_len), so none repeats anything; the sequences a consumer makes beyond that
  are dropped, their threads counted in `surplus_rows` (and rows over seq_len in
  `overlong_rows`). Both are different rows each epoch (the shuffle decides which).

Without `even`, every row is read exactly once (and packed on the fly every fitting thread)
but consumers may differ by a batch or more: for evaluation, not for data-parallel steps.

The rows of the other objectives (pipeline/objectives) come padded, with the same
guarantees (a row is a pair, a completion or a prompt): a preference batch holds each
pair's `prompt + chosen` then each pair's `prompt + rejected` (2 x batch_size rows), an
unpaired one `prompt + completion` with its `label`, a prompt one the prompts padded on
the left with their `reference`.

Media (DESIGN §7): every batch row carries, per media column of the shards (`images`,
`audios`, `videos`, `video_frames`), the media whose placeholders stand in its ids, in
order: a row of threads or a packed sequence its list as the shard holds it; an
objective's batch row
the part of its row's list its id columns hold (a pair's chosen row the prompt's then the
chosen answer's media, its rejected row the prompt's then the rejected answer's), cut at
the placeholders of the tokenizer record's `media_tokens`."""

from __future__ import annotations

import io
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.loader.assignment import RowGroup, Share, epoch_rng, row_groups, shares
from pipeline.loader.batches import (
    IGNORE,
    Batch,
    packed_batch,
    padded_batch,
    preference_batch,
    prompt_batch,
)
from pipeline.mms.media_columns import COLUMN_KINDS, FRAMES_COLUMN, MEDIA_SHARD_COLUMNS
from pipeline.objectives import objective_of
from pipeline.output.hub import OutputNotFound, fetch_output, is_hub_output
from pipeline.output.shards import split_files
from pipeline.output.stored import fetch_stored_output
from pipeline.packing.best_fit import WINDOW, BestFitPacker
from pipeline.sources.paths import HF_PREFIX
from pipeline.storage import is_url

Mode = Literal["padded", "packed"]
SHUFFLE_TOKENS = 4_000_000
"""Tokens held to shuffle within a consumer's share, by default (about 32 MB of ids and
labels): 10,000 threads of 400 tokens, or 1,000 packed rows of 4,096."""
_Row = tuple[np.ndarray, np.ndarray, list[int]]
_THREADS = "_threads"
"""The threads of a batch, counted on the way (removed before it is given)."""


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
    """Packed batches also carry an additive block-diagonal `attention_mask` [batch, 1,
    seq_len, seq_len] float32, for attention that reads neither `position_ids` nor the
    varlen arguments: quadratic in seq_len (512 MiB per batch of 8 at 4,096) and about 60x
    slower than the varlen path; leave it off unless the model needs it."""
    pad_id: int | None = None
    epoch: int = 0
    decode: bool = False
    """Rows with media (DESIGN §7): their batches carry `images` (`audios`, `videos`), a
    list per batch row of the media whose placeholders its ids hold, in order, as the
    shards hold them (`{bytes, path}` references); with `decode`, images as PIL images
    (audio and video stay references: their decoding is the processor's)."""
    media_root: str | Path | None = None
    """The folder a relative media path resolves against, for `decode`: the output folder
    by default (where its `media/` is), the input's folder for paths as a source wrote
    them."""

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
        self.objective = objective_of(names)
        if "input_ids" not in names and self.objective == "sft":
            raise LoaderError(f"{paths[0]} holds no tokens: load an output made with a tokenizer")
        if self.objective != "sft" and self.mode != "padded":
            raise LoaderError(
                f"{folder} holds {self.objective} rows, batched padded: load it with "
                "mode='padded' (they are not packed)"
            )
        self.prepacked = "seq_lens" in names
        self.media_columns = [name for name in COLUMN_KINDS if name in names]
        self._media_root = Path(self.media_root) if self.media_root is not None else folder
        if self.mode == "packed" and self.seq_len is None:
            raise LoaderError("packed batches need seq_len")
        if self.prepacked and self.mode != "packed":
            raise LoaderError(f"{folder} is packed: load it with mode='packed'")
        if self.pad_id is None:
            self.pad_id = shipped_pad_id(folder)
        self._placeholders: dict[str, int] = {}
        """Each media column's placeholder id, to cut an objective row's media per batch
        row (rows of threads and packed sequences hold theirs as they are)."""
        if self.objective != "sft" and self.media_columns:
            self._placeholders = shipped_placeholders(folder, self.media_columns)
        self._skip = 0
        self._yielded = 0
        self.overlong_rows = 0
        """Rows of this consumer's share over seq_len, left out by on-the-fly packing (set
        when an epoch's iteration starts)."""
        self.surplus_rows = 0
        """Fitting rows of this consumer's share left out by on-the-fly packing so that every
        consumer yields the same number of batches (set when an epoch's iteration ends)."""
        self._fitting: dict[RowGroup, np.ndarray] = {}

    @property
    def consumers(self) -> int:
        return self.world_size * self.num_workers

    @property
    def consumer(self) -> int:
        return self.rank * self.num_workers + self.worker

    def share(self) -> Share:
        """This consumer's rows of the current epoch."""
        return self._shares()[self.consumer]

    def batches_per_epoch(self) -> int:
        """The batches this consumer yields in the current epoch: with `even`, the same for
        every consumer (see the module docstring); without it, packed on the fly, the fewest
        it may yield."""
        if self.mode == "packed" and not self.prepacked:
            per_consumer = [self._packed_batches_at_least(part) for part in self._shares()]
            return min(per_consumer) if self.even else per_consumer[self.consumer]
        return -(-self.share().rows // self.batch_size)

    def _shares(self) -> list[Share]:
        return shares(
            self.groups,
            consumers=self.consumers,
            seed=self.seed,
            epoch=self.epoch,
            shuffle=self.shuffle,
            even=self.even,
        )

    def _packed_batches_at_least(self, part: Share) -> int:
        """The fewest batches packing `part` on the fly can give: ceil(fitting tokens /
        seq_len) sequences at least, in batches of batch_size."""
        assert self.seq_len is not None
        tokens = sum(
            int(self._fitting_tokens(group)[start:stop].sum()) for group, start, stop in part.slices
        )
        sequences = -(-tokens // self.seq_len)
        return -(-sequences // self.batch_size)

    def _fitting_tokens(self, group: RowGroup) -> np.ndarray:
        """The tokens of each row of `group`, 0 for a row over seq_len (read once)."""
        if group not in self._fitting:
            assert self.seq_len is not None
            file = pq.ParquetFile(group.path)
            if "num_tokens" in file.schema_arrow.names:
                column = file.read_row_group(group.index, columns=["num_tokens"])["num_tokens"]
                lengths = column.to_numpy(zero_copy_only=False).astype(np.int64)
            else:
                ids = file.read_row_group(group.index, columns=["input_ids"])["input_ids"]
                lengths = pc.list_value_length(ids).to_numpy(zero_copy_only=False).astype(np.int64)
            self._fitting[group] = np.where(lengths <= self.seq_len, lengths, 0)
        return self._fitting[group]

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

    def __iter__(self) -> Iterator[Batch]:
        skip, self._yielded = self._skip, self._skip
        self._skip = self.overlong_rows = self.surplus_rows = 0
        on_the_fly = self.mode == "packed" and not self.prepacked
        steps = self.batches_per_epoch() if self.even or not on_the_fly else None
        part = self.share()
        if on_the_fly:
            self.overlong_rows = sum(
                int((self._fitting_tokens(group)[start:stop] == 0).sum())
                for group, start, stop in part.slices
            )
        threads = 0
        for number, batch in enumerate(itertools.islice(self._batches(), steps)):
            threads += int(batch.pop(_THREADS))
            if number < skip:
                continue
            self._yielded += 1
            yield batch
        if on_the_fly:
            self.surplus_rows = part.rows - self.overlong_rows - threads

    # ----------------------------------------------------------------- internals

    def _batches(self) -> Iterator[Batch]:
        assert self.pad_id is not None
        if self.objective != "sft":
            width = len(OBJECTIVE_COLUMNS[self.objective])
            rows = self._shuffled(self._objective_rows())
            for chunk in _chunks(rows, self.batch_size):
                batch = _objective_batch(
                    self.objective, [row[:width] for row in chunk], self.pad_id
                )
                sides = OBJECTIVE_SIDES[self.objective]
                for number, name in enumerate(self.media_columns):
                    media = [
                        _sides_media(row, sides, row[width + number], self._placeholders[name])
                        for row in chunk
                    ]
                    cells = [row_media[side] for side in range(len(sides)) for row_media in media]
                    batch[name] = self._media_cells(cells, name)
                yield {**batch, _THREADS: np.int64(0)}
            return
        rows = self._shuffled(self._rows())
        if self.mode == "padded":
            for chunk in _chunks(rows, self.batch_size):
                batch = padded_batch([(row[0], row[1]) for row in chunk], self.pad_id)
                for number, name in enumerate(self.media_columns):
                    batch[name] = self._media_cells([row[3][number] for row in chunk], name)
                yield {**batch, _THREADS: np.int64(len(chunk))}
            return
        assert self.seq_len is not None
        sequences = rows if self.prepacked else self._packed(rows)
        for chunk in _chunks(sequences, self.batch_size):
            packed = packed_batch(
                [row[:3] for row in chunk], self.seq_len, self.pad_id, block_mask=self.block_mask
            )
            for number, name in enumerate(self.media_columns):
                packed[name] = self._media_cells([row[3][number] for row in chunk], name)
            yield {**packed, _THREADS: np.int64(sum(len(row[2]) for row in chunk))}

    def _media_cells(self, cells: list[list[Any]], column: str) -> np.ndarray:
        """A batch's media of one column: a list per row (an object array), decoded to PIL
        images with `decode` for `images`, and for `video_frames` each video's frames (a
        list of PIL images; None for a video that is one file)."""
        out = np.empty(len(cells), dtype=object)
        root = self._media_root
        for index, row in enumerate(cells):
            if self.decode and column == MEDIA_SHARD_COLUMNS["image"]:
                out[index] = [open_image(cell, root) for cell in row]
            elif self.decode and column == FRAMES_COLUMN:
                out[index] = [
                    None if frames is None else [open_image(frame, root) for frame in frames]
                    for frames in row
                ]
            else:
                out[index] = row
        return out

    def _rows(self) -> Iterator[_Row]:
        columns = ["input_ids", "labels", *(["seq_lens"] if self.prepacked else [])]
        columns += self.media_columns
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
            media = [table[name].to_pylist() for name in self.media_columns]
            for index in range(table.num_rows):
                a, b = offsets[index], offsets[index + 1]
                row_lengths = lengths[index] if lengths is not None else [int(b - a)]
                # copies: a held view would keep its whole row group in memory
                row = flat_ids[a:b].copy(), flat_labels[a:b].copy(), row_lengths
                if media:  # its media, one list per column
                    yield (*row, [column[index] for column in media])  # type: ignore[misc]
                else:
                    yield row

    def _objective_rows(self) -> Iterator[Any]:
        """This consumer's rows of another objective than sft, as `_objective_batch` takes
        them."""
        columns = [*OBJECTIVE_COLUMNS[self.objective], *self.media_columns]
        files: dict[Path, pq.ParquetFile] = {}
        for group, start, stop in self.share().slices:
            file = files.setdefault(group.path, pq.ParquetFile(group.path))
            table = file.read_row_group(group.index, columns=columns)
            yield from zip(*(_cells(table[name], start, stop) for name in columns), strict=True)

    def _shuffled(self, rows: Iterator[Any]) -> Iterator[Any]:
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
        out, counted in `overlong_rows`: pack with `mms pack --overlong` to truncate them)."""
        assert self.seq_len is not None
        packer = BestFitPacker(self.seq_len, max_open=WINDOW)
        held: dict[int, _Row] = {}
        window: list[_Row] = []

        def emit(closed: list[list[int]]) -> Iterator[_Row]:
            for sequence in closed:
                parts = [held.pop(number) for number in sequence]
                packed = (
                    np.concatenate([p[0] for p in parts]),
                    np.concatenate([p[1] for p in parts]),
                    [n for p in parts for n in p[2]],
                )
                if self.media_columns:  # each column's media, thread after thread
                    media = [
                        [cell for p in parts for cell in p[3][column]]  # type: ignore[misc]
                        for column in range(len(self.media_columns))
                    ]
                    yield (*packed, media)  # type: ignore[misc]
                else:
                    yield packed

        def place() -> Iterator[_Row]:
            fitting = [row for row in window if len(row[0]) <= self.seq_len]  # type: ignore[operator]
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
    finds in its cache (offline too, with HF_HUB_OFFLINE=1); a URL (`s3://bucket/prefix`)
    an output on an object store, whose manifest and the files it lists are fetched into
    the mms cache (pipeline/output/stored.py: a prefix without its manifest is refused)."""
    if is_url(source):
        try:
            return fetch_stored_output(str(source))
        except OutputNotFound as err:
            raise LoaderError(str(err)) from None
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


OBJECTIVE_COLUMNS = {
    "preference": ("prompt_ids", "chosen_ids", "chosen_labels", "rejected_ids", "rejected_labels"),
    "unpaired_preference": ("prompt_ids", "completion_ids", "completion_labels", "label"),
    "prompt": ("prompt_ids", "reference", "id"),
}
"""The columns the loader reads for each objective's batches."""
OBJECTIVE_SIDES: dict[str, tuple[tuple[int, ...], ...]] = {
    "preference": ((0, 1), (0, 3)),
    "unpaired_preference": ((0, 1),),
    "prompt": ((0,),),
}
"""The batch rows an objective's row gives, in batch order, each as the positions (in
OBJECTIVE_COLUMNS) of the id columns it joins: a pair's `prompt + chosen` rows come before
its `prompt + rejected` rows (`preference_batch`). A row's media lists follow its id
columns in position order (pipeline/objectives/media.py), each column's placeholders in
turn."""


def open_image(cell: dict[str, Any], root: Path) -> Any:
    """A shard's image cell (`{bytes, path}`) as a PIL image: its bytes, else its path (a
    relative one against `root`)."""
    from PIL import Image

    if cell.get("bytes") is not None:
        image = Image.open(io.BytesIO(cell["bytes"]))
    else:
        path = cell.get("path")
        if not path:
            raise LoaderError("an image cell with neither bytes nor a path")
        if "://" in path:
            raise LoaderError(f"{path}: the loader opens files, not URLs (fetch them first)")
        image = Image.open(root / path)
    image.load()
    return image


def _cells(column: Any, start: int, stop: int) -> Iterator[Any]:
    """A column's values of rows [start, stop): int lists as numpy copies (a held view
    would keep its row group in memory), other values (media lists too) as Python's."""
    column = column.combine_chunks().slice(start, stop - start)
    if not pa.types.is_list(column.type) or not pa.types.is_integer(column.type.value_type):
        yield from column.to_pylist()
        return
    offsets = column.offsets.to_numpy()
    flat = column.values.to_numpy()
    for index in range(len(column)):
        yield flat[offsets[index] : offsets[index + 1]].copy()


def _objective_batch(objective: str, rows: list[Any], pad_id: int) -> dict[str, np.ndarray]:
    """One batch of an objective's rows (read as OBJECTIVE_COLUMNS name them)."""
    if objective == "prompt":
        batch = prompt_batch([row[0] for row in rows], pad_id)
        references = np.array([row[1] for row in rows], dtype=object)
        ids = np.array([row[2] for row in rows], dtype=object)
        return {**batch, "reference": references, "id": ids}
    untrained = [np.full(len(row[0]), IGNORE, dtype=np.int32) for row in rows]
    if objective == "preference":
        pairs = [
            (
                (np.concatenate([prompt, chosen]), np.concatenate([blank, chosen_labels])),
                (np.concatenate([prompt, rejected]), np.concatenate([blank, rejected_labels])),
            )
            for (prompt, chosen, chosen_labels, rejected, rejected_labels), blank in zip(
                rows, untrained, strict=True
            )
        ]
        return preference_batch(pairs, pad_id)
    batch = padded_batch(
        [
            (np.concatenate([prompt, ids]), np.concatenate([blank, labels]))
            for (prompt, ids, labels, _), blank in zip(rows, untrained, strict=True)
        ],
        pad_id,
    )
    return {**batch, "label": np.array([row[3] for row in rows], dtype=bool)}


def _sides_media(
    row: tuple[Any, ...],
    sides: tuple[tuple[int, ...], ...],
    cells: list[Any] | None,
    placeholder: int,
) -> list[list[Any]]:
    """The media of `cells` (an objective row's list of one kind) for each batch row of
    `sides` (OBJECTIVE_SIDES): the list cut at each id column's placeholders, in position
    order as the row holds them, and each side's parts joined."""
    cells = cells or []
    held: dict[int, list[Any]] = {}
    first = 0
    for position in sorted({position for side in sides for position in side}):
        count = int(np.count_nonzero(row[position] == placeholder))
        held[position] = cells[first : first + count]
        first += count
    return [[cell for position in side for cell in held[position]] for side in sides]


def _chunks(items: Iterator[Any], size: int) -> Iterator[list[Any]]:
    chunk: list[Any] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def shipped_placeholders(folder: Path, columns: list[str]) -> dict[str, int]:
    """The placeholder id of each media column of `columns`, from the output's tokenizer
    record (`media_tokens`): what cuts an objective row's media per batch row."""
    record_file, record = _tokenizer_record(folder)
    media = record.get("media_tokens") or {}
    placeholders = {}
    for column, kind in COLUMN_KINDS.items():
        number = (media.get(kind) or {}).get("id")
        if column in columns:
            if not isinstance(number, int):
                raise LoaderError(f"{record_file} names no {kind} placeholder for {column}")
            placeholders[column] = number
    return placeholders


def _tokenizer_record(folder: Path) -> tuple[Path, dict[str, Any]]:
    """The output's tokenizer/mms_special_tokens.json, its path and its record."""
    record_file = folder / "tokenizer" / "mms_special_tokens.json"
    try:
        record = orjson.loads(record_file.read_bytes())
    except (OSError, orjson.JSONDecodeError) as err:
        raise LoaderError(f"{record_file}: {err}") from None
    return record_file, record


def shipped_pad_id(folder: Path) -> int:
    """The id of the pad token the output's tokenizer/ names (mms_special_tokens.json)."""
    record_file, record = _tokenizer_record(folder)
    pad_id = record.get("pad_id")
    if not record.get("pad_token") or not isinstance(pad_id, int):
        raise LoaderError(f"{record_file} names no pad token (and id): give pad_id")
    return pad_id
