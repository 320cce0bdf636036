"""What each consumer gets per epoch: every DataLoader worker of every rank the
same number of batches in every mode (padded, packed on the fly, packed output), what is
left out to get there counted; rows left out that differ from epoch to epoch; and on a run
of several sources, every consumer's rows mixed as the whole split is (the train shards
written shuffled, row groups dealt to consumers strided)."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.loader import OutputLoader
from tests.conftest import REPO
from tests.test_loader import THREADS, _thread
from tests.test_loader_sharding import output  # noqa: F401 (fixture)

SAMPLE_TOKENIZER = REPO / "configs" / "sample_tokenizer"
CONSUMERS = list(itertools.product([1, 2, 4], [0, 2]))  # world_size x DataLoader num_workers
SEQ_LEN = 128


def _invoke(*args: object) -> None:
    result = CliRunner().invoke(main, [str(arg) for arg in args])
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def packed(output, tmp_path_factory) -> Path:  # noqa: F811
    out = tmp_path_factory.mktemp("epochs") / "packed"
    _invoke("pack", output, "--seq-len", SEQ_LEN, "--overlong", "drop", "-o", out)
    return out


def _settings(mode: str) -> dict:
    if mode == "padded":
        return {"batch_size": 8}
    return {"batch_size": 3, "mode": "packed", "seq_len": SEQ_LEN}


@pytest.mark.parametrize("mode", ["padded", "packed", "prepacked"])
@pytest.mark.parametrize(("world_size", "num_workers"), CONSUMERS)
def test_every_rank_and_worker_takes_the_same_steps(
    output,  # noqa: F811
    packed,
    mode,
    world_size,
    num_workers,
):
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    from pipeline.loader.torch import TorchBatches

    folder = packed if mode == "prepacked" else output
    settings = {**_settings(mode), "seed": 5}
    per_rank = []
    for rank in range(world_size):
        batches = TorchBatches(folder, rank=rank, world_size=world_size, **settings)
        loader = DataLoader(batches, batch_size=None, num_workers=num_workers)
        per_rank.append(sum(1 for batch in loader if torch.is_tensor(batch["input_ids"])))
    workers = max(num_workers, 1)
    steps = [
        OutputLoader(
            folder, rank=r, world_size=world_size, worker=w, num_workers=workers, **settings
        ).batches_per_epoch()
        for r, w in itertools.product(range(world_size), range(workers))
    ]
    assert len(set(steps)) == 1
    assert per_rank == [steps[0] * workers] * world_size


@pytest.mark.parametrize("mode", ["padded", "packed", "prepacked"])
@pytest.mark.parametrize("consumers", [1, 3, 4])
def test_what_is_left_out_to_even_the_steps_is_counted(output, packed, mode, consumers):  # noqa: F811
    folder = packed if mode == "prepacked" else output
    total = sum(pq.ParquetFile(p).metadata.num_rows for p in (folder / "data").glob("*.parquet"))
    given, counted = 0, 0
    for worker in range(consumers):
        loader = OutputLoader(
            folder, worker=worker, num_workers=consumers, seed=2, epoch=1, **_settings(mode)
        )
        batches = list(loader)
        assert len(batches) == loader.batches_per_epoch()
        if mode == "packed":
            given += sum(_threads(batch, loader.pad_id) for batch in batches)
            counted += loader.surplus_rows + loader.overlong_rows
        else:
            given += sum(len(batch["input_ids"]) for batch in batches)
        left_over = loader.share().left_over
    assert left_over == total % consumers
    assert given + counted + left_over == total


def _threads(batch: dict, pad_id: int) -> int:
    """The threads of a packed batch: its segments but a row's trailing padding."""
    flat = batch["input_ids"].reshape(-1)
    bounds = batch["cu_seq_lens_q"].tolist()
    return sum(bool((flat[a:b] != pad_id).any()) for a, b in itertools.pairwise(bounds))


@pytest.fixture(scope="module")
def few_groups(tmp_path_factory) -> Path:
    """2,600 threads in three row groups (tests/test_loader.py's output)."""
    folder = tmp_path_factory.mktemp("few")
    rng = random.Random(7)
    threads = folder / "threads.jsonl"
    threads.write_bytes(b"".join(orjson.dumps(_thread(n, rng)) + b"\n" for n in range(THREADS)))
    _invoke("tokenize", threads, "--tokenizer", SAMPLE_TOKENIZER, "-o", folder / "out")
    return folder / "out"


def test_rows_left_out_differ_from_epoch_to_epoch(few_groups):
    """2,600 rows in 3 row groups for 7 consumers: 3 rows left out each epoch, others each
    time (they were the same 3 rows in most epochs, the tail of a row group)."""
    stored = [
        tuple(ids)
        for path in sorted((few_groups / "data").glob("*.parquet"))
        for ids in pq.read_table(path, columns=["input_ids"])["input_ids"].to_pylist()
    ]
    left_out: Counter[tuple[int, ...]] = Counter()
    for epoch in range(10):
        seen: set[tuple[int, ...]] = set()
        for worker in range(7):
            loader = OutputLoader(
                few_groups, batch_size=64, worker=worker, num_workers=7, seed=0, epoch=epoch
            )
            for batch in loader:
                seen.update(
                    tuple(ids[mask == 1].tolist())
                    for ids, mask in zip(batch["input_ids"], batch["attention_mask"], strict=True)
                )
        missing = set(stored) - seen
        assert len(missing) == loader.share().left_over == THREADS % 7
        left_out.update(missing)
    assert max(left_out.values()) <= 2


SOURCES = {"big": 1800, "mid": 1200, "small": 700, "tiny": 300, "few": 200}


@pytest.fixture(scope="module")
def mixed_run(tmp_path_factory) -> Path:
    """`mms run` on five sources of different sizes (4,200 threads), in shards of 500 rows."""
    folder = tmp_path_factory.mktemp("mix")
    rng = random.Random(3)
    inputs = []
    for name, count in SOURCES.items():
        lines = []
        for number in range(count):
            words = " ".join(rng.choice(["a", "b", "c", "d"]) for _ in range(rng.randint(1, 30)))
            messages = [
                {"role": "user", "content": f"{name} {number}: {words}"},
                {"role": "assistant", "content": f"ok {number}", "end_turn": True},
            ]
            lines.append(orjson.dumps({"id": f"{name}{number}", "messages": messages}))
        path = folder / f"{name}.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")
        inputs.append(f"{{path: {path}}}")
    config = folder / "run.yaml"
    config.write_text(
        f"name: mix\noutput: {folder / 'out'}\ninputs: [{', '.join(inputs)}]\nstages:\n"
        "  lint: {fail_on: never}\n"
        f"  tokenize: {{tokenizer: {SAMPLE_TOKENIZER}}}\n"
        "  shard: {rows_per_shard: 500}\n",
        encoding="utf-8",
    )
    _invoke("run", config)
    return folder / "out"


def _sources(folder: Path) -> dict[tuple[int, ...], str]:
    """The source file name of every row, by its input_ids."""
    found = {}
    for path in sorted((folder / "data").glob("train-*.parquet")):
        table = pq.read_table(path, columns=["input_ids", "meta"])
        for ids, meta in zip(
            table["input_ids"].to_pylist(), table["meta"].to_pylist(), strict=True
        ):
            found[tuple(ids)] = Path(orjson.loads(meta)["source"]).stem
    return found


@pytest.mark.parametrize("epoch", [0, 1])
def test_every_consumer_reads_the_sources_mixed_as_the_whole_split(mixed_run, epoch):
    sources = _sources(mixed_run)
    assert Counter(sources.values()) == Counter(SOURCES)
    whole = {name: count / len(sources) for name, count in SOURCES.items()}
    for rank, worker in itertools.product(range(2), range(2)):
        loader = OutputLoader(
            mixed_run,
            batch_size=32,
            rank=rank,
            world_size=2,
            worker=worker,
            num_workers=2,
            seed=1,
            epoch=epoch,
        )
        rows = Counter(
            sources[tuple(ids[mask == 1].tolist())]
            for batch in loader
            for ids, mask in zip(batch["input_ids"], batch["attention_mask"], strict=True)
        )
        total = sum(rows.values())
        for name, share in whole.items():
            assert abs(rows[name] / total - share) <= 0.05, (rank, worker, name, rows)


def test_the_train_shards_mix_the_sources_and_keep_no_input_order(mixed_run):
    """Every shard of 500 rows holds every source, in about the whole split's shares."""
    for path in sorted((mixed_run / "data").glob("train-*.parquet")):
        metas = pq.read_table(path, columns=["meta"])["meta"].to_pylist()
        names = Counter(Path(orjson.loads(meta)["source"]).stem for meta in metas)
        assert set(names) == set(SOURCES), (path.name, names)
