"""Which rows each consumer reads (pipeline.loader.assignment), and the loader's shuffle:
every row exactly once per epoch across `world_size x num_workers` consumers (num_workers 0
is one in-process worker, as a DataLoader without workers is), the first `rows % consumers`
consumers taking one row more, or with `even` equal shares and the rest counted (different
rows every epoch); row groups dealt to consumers strided, not in ranges; the same
order for the same seed and epoch; a shuffle buffer that moves a row at most its size ahead."""

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
from hypothesis import given
from hypothesis import strategies as st

from pipeline.cli import main
from pipeline.loader import OutputLoader
from pipeline.loader.assignment import RowGroup, Share, row_groups, share
from tests.conftest import REPO

CONSUMERS = list(itertools.product([1, 2, 4], [0, 2]))  # world_size x num_workers
SAMPLE_TOKENIZER = REPO / "configs" / "sample_tokenizer"


def _groups(sizes: list[int]) -> list[RowGroup]:
    return [RowGroup(Path(f"train-{i:05d}.parquet"), 0, rows) for i, rows in enumerate(sizes)]


def _workers(num_workers: int) -> int:
    """Consumers per rank: DataLoader(num_workers=0) reads in the main process, as one."""
    return max(num_workers, 1)


def _shares(groups: list[RowGroup], world_size: int, num_workers: int, **settings) -> list[Share]:
    consumers = world_size * _workers(num_workers)
    return [
        share(groups, consumer=consumer, consumers=consumers, **settings)
        for consumer in range(consumers)
    ]


def _rows(part: Share) -> list[tuple[Path, int]]:
    return [(group.path, row) for group, start, stop in part.slices for row in range(start, stop)]


@pytest.mark.parametrize(("world_size", "num_workers"), CONSUMERS)
@given(
    sizes=st.lists(st.integers(0, 40), max_size=12),
    seed=st.integers(0, 2**32 - 1),
    epoch=st.integers(0, 5),
)
def test_every_row_once_with_the_extra_rows_on_the_first_consumers(
    world_size, num_workers, sizes, seed, epoch
):
    groups = _groups(sizes)
    shares = _shares(groups, world_size, num_workers, seed=seed, epoch=epoch, even=False)
    every = [(group.path, row) for group in groups for row in range(group.rows)]
    seen = [row for part in shares for row in _rows(part)]
    assert sorted(seen) == sorted(every)
    base, extra = divmod(len(every), len(shares))
    assert [part.rows for part in shares] == [base + (c < extra) for c in range(len(shares))]
    assert all(part.left_over == 0 for part in shares)
    whole = share(groups, consumer=0, consumers=1, seed=seed, epoch=epoch, even=False)
    order = [group for group, _, _ in whole.slices]  # the shuffled groups that hold rows
    for consumer, part in enumerate(shares):  # groups dealt strided, then tails handed over
        owned = order[consumer :: len(shares)]
        read = list(dict.fromkeys(group for group, _, _ in part.slices))
        mine = next((i for i, group in enumerate(read) if group not in owned), len(read))
        assert read[:mine] == owned[:mine]
        assert not set(read[mine:]) & set(owned)


@pytest.mark.parametrize(("world_size", "num_workers"), CONSUMERS)
@given(sizes=st.lists(st.integers(0, 40), max_size=12), seed=st.integers(0, 2**32 - 1))
def test_even_shares_are_equal_and_count_the_rows_left_over(world_size, num_workers, sizes, seed):
    groups = _groups(sizes)
    shares = _shares(groups, world_size, num_workers, seed=seed, epoch=0, even=True)
    total = sum(sizes)
    seen = Counter(row for part in shares for row in _rows(part))
    assert set(seen.values()) <= {1}
    assert {part.rows for part in shares} <= {total // len(shares)}
    assert {part.left_over for part in shares} == {total % len(shares)}
    assert total - sum(seen.values()) == total % len(shares)


@given(sizes=st.lists(st.integers(1, 40), min_size=1, max_size=12), seed=st.integers(0, 99))
def test_the_same_seed_and_epoch_give_the_same_order(sizes, seed):
    groups = _groups(sizes)
    settings = {"consumer": 1, "consumers": 3, "seed": seed}
    assert share(groups, epoch=4, **settings) == share(groups, epoch=4, **settings)


def test_epochs_and_seeds_reorder_the_groups_and_no_shuffle_keeps_file_order():
    groups = _groups([5] * 30)

    def order(**settings) -> list[Path]:
        part = share(groups, consumer=0, consumers=1, **settings)
        return [group.path for group, _, _ in part.slices]

    orders = {tuple(order(seed=0, epoch=epoch)) for epoch in range(4)}
    assert len(orders) == 4
    assert order(seed=0, epoch=0) != order(seed=1, epoch=0)
    assert order(seed=0, epoch=0, shuffle=False) == [group.path for group in groups]


def test_a_consumer_outside_the_consumers_is_refused():
    with pytest.raises(ValueError, match=r"consumer 4 is not one of 0\.\.3"):
        share(_groups([3]), consumer=4, consumers=4, seed=0, epoch=0)


@pytest.fixture(scope="module")
def output(tmp_path_factory) -> Path:
    """A tokenized output of 230 distinct threads in six shards (one row group each)."""
    folder = tmp_path_factory.mktemp("sharding")
    rng = random.Random(11)
    lines = []
    for number in range(230):
        words = " ".join(
            rng.choice(["red", "green", "blue", "y"]) for _ in range(rng.randint(1, 40))
        )
        messages = [
            {"role": "user", "content": f"item {number}: {words}"},
            {"role": "assistant", "content": f"noted {number}", "end_turn": True},
        ]
        lines.append(orjson.dumps({"id": f"s{number}", "messages": messages}))
    threads = folder / "threads.jsonl"
    threads.write_bytes(b"\n".join(lines) + b"\n")
    out = folder / "out"
    args = ["tokenize", threads, "--tokenizer", SAMPLE_TOKENIZER, "--shard-rows", 40, "-o", out]
    result = CliRunner().invoke(main, [str(arg) for arg in args])
    assert result.exit_code == 0, result.output
    assert len(list((out / "data").glob("train-*.parquet"))) == 6
    return out


def _unpadded(batch: dict[str, np.ndarray]) -> list[tuple[int, ...]]:
    return [
        tuple(ids[mask == 1].tolist())
        for ids, mask in zip(batch["input_ids"], batch["attention_mask"], strict=True)
    ]


def _share_rows(loader: OutputLoader) -> list[tuple[int, ...]]:
    """The consumer's rows in reading order, before the shuffle buffer."""
    rows = []
    for group, start, stop in loader.share().slices:
        table = pq.ParquetFile(group.path).read_row_group(group.index, columns=["input_ids"])
        rows += [tuple(ids) for ids in table["input_ids"].to_pylist()[start:stop]]
    return rows


@pytest.mark.parametrize(("world_size", "num_workers"), CONSUMERS)
def test_the_loader_reads_every_row_of_every_shard_once(output, world_size, num_workers):
    stored = [
        tuple(ids)
        for path in sorted((output / "data").glob("*.parquet"))
        for ids in pq.read_table(path, columns=["input_ids"])["input_ids"].to_pylist()
    ]
    seen: Counter[tuple[int, ...]] = Counter()
    for rank, worker in itertools.product(range(world_size), range(_workers(num_workers))):
        loader = OutputLoader(
            output,
            batch_size=7,
            rank=rank,
            world_size=world_size,
            worker=worker,
            num_workers=_workers(num_workers),
            seed=21,
            epoch=1,
            even=False,
        )
        seen.update(row for batch in loader for row in _unpadded(batch))
    assert seen == Counter(stored)


@pytest.mark.parametrize("buffer", [1, 5, 32])
def test_a_row_leaves_the_shuffle_buffer_at_most_its_size_ahead(output, buffer):
    loader = OutputLoader(
        output, batch_size=1, rank=1, world_size=2, seed=3, shuffle_buffer=buffer, even=False
    )
    before = _share_rows(loader)
    after = [row for batch in loader for row in _unpadded(batch)]
    assert sorted(after) == sorted(before)
    where = {row: index for index, row in enumerate(before)}
    assert all(where[row] <= position + buffer for position, row in enumerate(after))
    assert (after != before) == (buffer > 1)  # one held row goes out as the next comes in
    again = OutputLoader(
        output, batch_size=1, rank=1, world_size=2, seed=3, shuffle_buffer=buffer, even=False
    )
    assert [row for batch in again for row in _unpadded(batch)] == after


def test_row_groups_record_the_size_that_bounds_the_default_shuffle_buffer(output):
    groups = row_groups(sorted((output / "data").glob("*.parquet")))
    assert all(group.bytes > 0 for group in groups)
