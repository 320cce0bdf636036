"""`OutputLoader` on real output folders made by the CLI (`mms run`, `mms tokenize`,
`mms pack`): each split's rows as its manifest lists them, padding with the shipped pad token
(a clear error naming the file when none is shipped), packed batches whose threads keep
their ids and labels with restarting positions, packed outputs read as they are, and
resuming mid-epoch; the same on an output of real public data (tests/data/realdata)."""

from __future__ import annotations

import itertools
import re
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import orjson
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from tokenizers import Tokenizer

from pipeline.cli import main
from pipeline.loader import LoaderError, OutputLoader
from tests.conftest import REPO
from tests.tokenizer_fixtures import tokenizer_file

SAMPLE_TOKENIZER = REPO / "configs" / "sample_tokenizer"
SAMPLES = ["openai", "sharegpt", "hermes", "anthropic", "gemini", "mms"]
SEQ_LEN = 256
_Tokens = tuple[int, ...]


def _invoke(*args: object) -> None:
    result = CliRunner().invoke(main, [str(arg) for arg in args])
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def run_output(tmp_path_factory) -> Path:
    """`mms run` on the samples: train and test splits in shards of 15 rows, a manifest."""
    folder = tmp_path_factory.mktemp("run")
    inputs = ", ".join(f"{{path: {REPO / 'data_samples' / name}}}" for name in SAMPLES)
    config = folder / "run.yaml"
    config.write_text(
        f"name: loader\noutput: {folder / 'out'}\ninputs: [{inputs}]\nstages:\n"
        "  lint: {fail_on: never}\n"
        f"  tokenize: {{tokenizer: {SAMPLE_TOKENIZER}, max_tokens: 1024, overlong: truncate}}\n"
        "  shard: {rows_per_shard: 15, splits: {train: 0.8, test: 0.2}}\n",
        encoding="utf-8",
    )
    _invoke("run", config)
    return folder / "out"


@pytest.fixture(scope="module")
def packed_output(run_output, tmp_path_factory) -> Path:
    """The run's output packed by `mms pack` into rows of SEQ_LEN."""
    packed = tmp_path_factory.mktemp("packed") / "out"
    _invoke("pack", run_output, "--seq-len", SEQ_LEN, "-o", packed)
    return packed


def _stored(output: Path, split: str) -> dict[_Tokens, list[tuple[int, ...]]]:
    """The labels of each stored row of `split`, by its input_ids (a list: rows may repeat)."""
    rows: dict[_Tokens, list[tuple[int, ...]]] = {}
    for path in sorted((output / "data").glob(f"{split}-*.parquet")):
        table = pq.read_table(path, columns=["input_ids", "labels"])
        for ids, labels in zip(
            table["input_ids"].to_pylist(), table["labels"].to_pylist(), strict=True
        ):
            rows.setdefault(tuple(ids), []).append(tuple(labels))
    return rows


def _padded_rows(batch: dict[str, np.ndarray]) -> list[tuple[_Tokens, _Tokens]]:
    return [
        (tuple(ids[mask == 1].tolist()), tuple(labels[mask == 1].tolist()))
        for ids, labels, mask in zip(
            batch["input_ids"], batch["labels"], batch["attention_mask"], strict=True
        )
    ]


def _packed_threads(batch: dict[str, np.ndarray], pad_id: int) -> list[tuple[_Tokens, _Tokens]]:
    """The threads of a packed batch, cut at its cu_seq_lens bounds, each checked to restart
    its positions; a row's trailing padding is all pad ids and untrained."""
    ids, labels = batch["input_ids"].reshape(-1), batch["labels"].reshape(-1)
    positions = batch["position_ids"].reshape(-1)
    bounds = batch["cu_seq_lens_q"]
    assert bounds.dtype == np.int32 and bounds[0] == 0 and bounds[-1] == ids.size
    assert int(batch["max_length_q"]) == int(np.diff(bounds).max())
    threads = []
    for start, stop in itertools.pairwise(bounds.tolist()):
        assert positions[start:stop].tolist() == list(range(stop - start))
        if (ids[start:stop] == pad_id).all():
            assert (labels[start:stop] == -100).all()
            continue
        threads.append((tuple(ids[start:stop].tolist()), tuple(labels[start:stop].tolist())))
    return threads


def _consumers(world_size: int, num_workers: int) -> list[dict[str, int]]:
    """Loader settings of every consumer; num_workers 0 is one in-process worker."""
    workers = max(num_workers, 1)
    return [
        {"rank": rank, "world_size": world_size, "worker": worker, "num_workers": workers}
        for rank, worker in itertools.product(range(world_size), range(workers))
    ]


def _same(got: list[dict[str, np.ndarray]], expected: list[dict[str, np.ndarray]]) -> bool:
    return len(got) == len(expected) and all(
        a.keys() == b.keys() and all(np.array_equal(a[key], b[key]) for key in a)
        for a, b in zip(got, expected, strict=True)
    )


def _resumes_exactly(output: Path, cuts: list[int], **settings) -> None:
    """For each cut, a loader stopped after `cut` batches and another resumed from its
    state_dict (through JSON, a plain dict of ints and strings) give the whole epoch. A cut
    past the epoch's last batch is taken at its last batch (how many batches a consumer gets
    depends on the thread ids, which depend on where the samples are: the clone's folder)."""
    whole = list(OutputLoader(output, **settings))
    assert len(whole) >= 2
    for cut in sorted({min(cut, len(whole) - 1) for cut in cuts}):
        first = OutputLoader(output, **settings)
        head = list(itertools.islice(iter(first), cut))
        state = first.state_dict()
        assert all(isinstance(value, int | str) for value in state.values())
        resumed = OutputLoader(output, **settings)
        resumed.load_state_dict(orjson.loads(orjson.dumps(state)))
        assert _same(head + list(resumed), whole)


@pytest.mark.parametrize("split", ["train", "test"])
def test_each_split_gives_the_rows_its_manifest_lists(run_output, split):
    manifest = orjson.loads((run_output / "manifest.json").read_bytes())
    listed = manifest["splits"][split]
    paths = sorted(str(path.relative_to(run_output)) for path in (run_output / "data").iterdir())
    assert [shard["path"] for shard in listed["shards"]] == [p for p in paths if split in p]
    loader = OutputLoader(run_output, batch_size=4, split=split, seed=2, even=False)
    rows = [row for batch in loader for row in _padded_rows(batch)]
    assert len(rows) == listed["rows"] == sum(shard["rows"] for shard in listed["shards"])
    stored = _stored(run_output, split)
    assert Counter(ids for ids, _ in rows) == Counter(
        {ids: len(labels) for ids, labels in stored.items()}
    )
    assert all(labels in stored[ids] for ids, labels in rows)


def test_padding_is_the_shipped_pad_token_with_untrained_labels(run_output):
    config = orjson.loads((run_output / "tokenizer" / "tokenizer_config.json").read_bytes())
    tokenizer = Tokenizer.from_file(str(run_output / "tokenizer" / "tokenizer.json"))
    pad_id = tokenizer.token_to_id(config["pad_token"])
    loader = OutputLoader(run_output, batch_size=8, seed=4)
    assert loader.pad_id == pad_id
    padded = 0
    for batch in loader:
        off = batch["attention_mask"] == 0
        assert (batch["input_ids"][off] == pad_id).all() and (batch["labels"][off] == -100).all()
        assert all(batch[key].dtype == np.int64 for key in ("input_ids", "labels", "position_ids"))
        padded += int(off.sum())
    assert padded > 0


def test_no_shipped_pad_token_is_an_error_naming_the_file(run_output, tmp_path):
    copy = tmp_path / "out"
    shutil.copytree(run_output, copy)
    record_file = copy / "tokenizer" / "mms_special_tokens.json"
    record = orjson.loads(record_file.read_bytes())
    record_file.write_bytes(orjson.dumps({**record, "pad_token": None}))
    for mode in ("padded", "packed"):
        with pytest.raises(LoaderError, match=f"{re.escape(str(record_file))} names no pad token"):
            OutputLoader(copy, batch_size=2, mode=mode, seq_len=SEQ_LEN)
    given = OutputLoader(copy, batch_size=2, pad_id=0)
    assert next(iter(given))["input_ids"].shape[0] == 2


@pytest.mark.parametrize(("world_size", "num_workers"), list(itertools.product([1, 2, 4], [0, 2])))
def test_packing_on_the_fly_keeps_every_fitting_thread_once_unchanged(
    run_output, world_size, num_workers
):
    stored = _stored(run_output, "train")
    threads: Counter[_Tokens] = Counter()
    overlong = 0
    for consumer in _consumers(world_size, num_workers):
        loader = OutputLoader(
            run_output, batch_size=3, mode="packed", seq_len=SEQ_LEN, seed=9, even=False, **consumer
        )
        for batch in loader:
            assert batch["input_ids"].shape[1] == SEQ_LEN
            for ids, labels in _packed_threads(batch, loader.pad_id):
                assert labels in stored[ids]
                threads[ids] += 1
        overlong += loader.overlong_rows
    fitting = Counter({ids: len(labels) for ids, labels in stored.items() if len(ids) <= SEQ_LEN})
    assert threads == fitting
    assert overlong == sum(len(labels) for ids, labels in stored.items() if len(ids) > SEQ_LEN) > 0


def test_a_packed_output_is_batched_as_it_is_stored(packed_output):
    table = pq.read_table(sorted((packed_output / "data").glob("train-*.parquet"))[0])
    loader = OutputLoader(
        packed_output, batch_size=2, mode="packed", seq_len=SEQ_LEN, shuffle=False
    )
    batch = next(iter(loader))
    for index, row in enumerate(table.slice(0, 2).to_pylist()):
        used = len(row["input_ids"])
        assert batch["input_ids"][index, :used].tolist() == row["input_ids"]
        assert batch["labels"][index, :used].tolist() == row["labels"]
        assert batch["position_ids"][index, :used].tolist() == row["position_ids"]
    first_row = np.cumsum([0, *table["seq_lens"][0].as_py()]).tolist()
    assert batch["cu_seq_lens_q"][: len(first_row)].tolist() == first_row


@pytest.mark.parametrize(
    ("mode", "block_mask", "source"),
    [
        ("padded", False, "run"),
        ("packed", False, "run"),
        ("packed", True, "run"),
        ("packed", False, "packed"),
    ],
)
def test_resuming_mid_epoch_gives_the_batches_of_an_uninterrupted_run(
    run_output, packed_output, mode, block_mask, source
):
    output = run_output if source == "run" else packed_output
    settings = {"batch_size": 1, "mode": mode, "seq_len": SEQ_LEN, "block_mask": block_mask}
    settings |= {"rank": 0, "world_size": 2, "worker": 1, "num_workers": 2, "seed": 6, "epoch": 3}
    _resumes_exactly(output, [0, 1, 3], **settings)


def test_resuming_after_the_epoch_gives_nothing_until_the_next(run_output):
    loader = OutputLoader(run_output, batch_size=4, seed=1)
    epoch = list(loader)
    state = loader.state_dict()
    assert state == {"epoch": 0, "batches": len(epoch), "seed": 1}
    resumed = OutputLoader(run_output, batch_size=4, seed=1)
    resumed.load_state_dict(state)
    assert list(resumed) == []
    resumed.set_epoch(1)
    assert sum(1 for _ in resumed) == len(epoch)


@pytest.fixture(scope="module")
def real_output(data: Path, tmp_path_factory) -> Path:
    """Real public conversations (OpenAssistant, LLaMA-Factory, FastChat, ToolBench, OpenAI
    fine-tuning examples: the small copies of tests/data/realdata, ~700 threads) tokenized
    with the bytelevel-llama3 family's tokenizer (the real Llama 3 one when ../shared is
    present)."""
    realdata = data / "realdata"
    names = ["open_assistant", "llamafactory", "fastchat", "toolbench", "openai_finetune_examples"]
    inputs = [realdata / name for name in names]
    out = tmp_path_factory.mktemp("real") / "out"
    tokenizer = tokenizer_file("bytelevel-llama3").parent
    _invoke("tokenize", *inputs, "--tokenizer", tokenizer, "-o", out)
    return out


def _row_tokens(batch: dict[str, np.ndarray], pad_id: int) -> list[int]:
    """How many thread tokens each row of a packed batch holds (its padding left out)."""
    ids = batch["input_ids"].reshape(-1)
    width = batch["input_ids"].shape[1]
    tokens = [0] * batch["input_ids"].shape[0]
    for start, stop in itertools.pairwise(batch["cu_seq_lens_q"].tolist()):
        if not (ids[start:stop] == pad_id).all():
            tokens[start // width] += stop - start
    return tokens


def test_real_data_packs_at_4096_every_thread_once_unchanged_and_resumes(real_output):
    """Every fitting thread once, unchanged; rows 97% full but for each consumer's least
    full one (its share's last bin, as full as the data left over allows)."""
    stored = _stored(real_output, "train")
    seq_len = 4096
    threads: Counter[_Tokens] = Counter()
    full: list[int] = []
    for consumer in _consumers(2, 2):
        loader = OutputLoader(
            real_output, batch_size=4, mode="packed", seq_len=seq_len, even=False, **consumer
        )
        rows: list[int] = []
        for batch in loader:
            rows += _row_tokens(batch, loader.pad_id)
            for ids, labels in _packed_threads(batch, loader.pad_id):
                assert labels in stored[ids]
                threads[ids] += 1
        full += sorted(rows)[1:]
    fitting = {ids: len(labels) for ids, labels in stored.items() if len(ids) <= seq_len}
    assert threads == Counter(fitting)
    assert len(full) >= 10
    assert sum(full) / (len(full) * seq_len) >= 0.97
    settings = {"batch_size": 4, "mode": "packed", "seq_len": seq_len, "seed": 8}
    _resumes_exactly(real_output, [3], **settings, **_consumers(2, 0)[1])
