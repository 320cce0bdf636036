"""`TorchBatches.batches_per_epoch(num_workers)`: exactly the batches a rank yields in an
epoch through a DataLoader with that many workers (what its workers yield together), for
any world size, worker count, batch size and rows, padded, packed on the fly and packed
outputs read as they are; with `even` the same for every rank."""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.output.shards import shard_name

torch = pytest.importorskip("torch")

from torch.utils.data import DataLoader  # noqa: E402

from pipeline.loader.torch import TorchBatches  # noqa: E402

SEQ_LEN = 32
PAD = 0


def _write(folder: Path, lengths: list[int], *, packed: bool, group_rows: int) -> Path:
    """An output folder of one train shard of rows of `lengths` tokens (packed: rows of
    threads of those lengths, each row's threads within SEQ_LEN), in row groups of
    `group_rows`."""
    rows: list[list[int]] = [[length] for length in lengths]
    if packed:
        rows = []
        for length in lengths:
            if rows and sum(rows[-1]) + length <= SEQ_LEN:
                rows[-1].append(length)
            else:
                rows.append([length])
    ids = [list(range(1, sum(row) + 1)) for row in rows]
    columns: dict[str, pa.Array] = {
        "input_ids": pa.array(ids, pa.list_(pa.int32())),
        "labels": pa.array(ids, pa.list_(pa.int32())),
        "num_tokens": pa.array([sum(row) for row in rows], pa.int32()),
    }
    if packed:
        columns["seq_lens"] = pa.array(rows, pa.list_(pa.int32()))
    data = folder / "data"
    data.mkdir(parents=True)
    pq.write_table(pa.table(columns), data / shard_name("train", 0, 1), row_group_size=group_rows)
    return folder


def _settings(mode: str, batch_size: int, even: bool) -> dict:
    settings = {"batch_size": batch_size, "pad_id": PAD, "seed": 3, "even": even}
    if mode != "padded":
        settings |= {"mode": "packed", "seq_len": SEQ_LEN}
    return settings


def _yielded(batches: TorchBatches, num_workers: int) -> int:
    """What the rank yields through a DataLoader with `num_workers` workers, each worker's
    loader made as a worker process makes it (`get_worker_info`: its id and the count)."""
    workers = max(num_workers, 1)
    return sum(sum(1 for _ in batches._new_loader(worker, workers)) for worker in range(workers))


@settings(max_examples=60, deadline=None)
@given(
    mode=st.sampled_from(["padded", "packed", "prepacked"]),
    world_size=st.integers(1, 4),
    num_workers=st.integers(0, 3),
    batch_size=st.integers(1, 5),
    lengths=st.lists(st.integers(1, SEQ_LEN + 4), min_size=1, max_size=80),
    group_rows=st.integers(1, 20),
    even=st.booleans(),
)
def test_batches_per_epoch_is_what_each_rank_yields(
    mode, world_size, num_workers, batch_size, lengths, group_rows, even
):
    if mode == "prepacked":
        lengths = [min(length, SEQ_LEN) for length in lengths]
    with tempfile.TemporaryDirectory() as folder:
        out = _write(Path(folder), lengths, packed=mode == "prepacked", group_rows=group_rows)
        counted, yielded = [], []
        for rank in range(world_size):
            batches = TorchBatches(
                out, rank=rank, world_size=world_size, **_settings(mode, batch_size, even)
            )
            counted.append(batches.batches_per_epoch(num_workers))
            yielded.append(_yielded(batches, num_workers))
    if even:
        assert counted == yielded
        assert len(set(yielded)) == 1
    elif mode == "packed":  # every fitting thread packed: the count is the fewest
        assert all(c <= y for c, y in zip(counted, yielded, strict=True))
    else:
        assert counted == yielded


@pytest.mark.parametrize("mode", ["padded", "packed"])
def test_batches_per_epoch_with_dataloader_workers(tmp_path, mode):
    rng = np.random.default_rng(1)
    lengths = [int(n) for n in rng.integers(1, SEQ_LEN, 230)]
    out = _write(tmp_path, lengths, packed=False, group_rows=16)
    for rank, num_workers in itertools.product(range(2), [0, 2]):
        batches = TorchBatches(out, rank=rank, world_size=2, **_settings(mode, 4, True))
        loader = DataLoader(batches, batch_size=None, num_workers=num_workers)
        assert sum(1 for _ in loader) == batches.batches_per_epoch(num_workers)
    if mode == "padded":  # 115 rows a rank: 29 batches of 4, or 15 + 15 split in two
        assert (batches.batches_per_epoch(0), batches.batches_per_epoch(2)) == (29, 30)


def test_batches_per_epoch_refuses_a_negative_worker_count(tmp_path):
    from pipeline.loader import LoaderError

    out = _write(tmp_path, [3, 4, 5], packed=False, group_rows=2)
    with pytest.raises(LoaderError):
        TorchBatches(out, batch_size=2, pad_id=PAD).batches_per_epoch(-1)
