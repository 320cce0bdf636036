"""The shards of `mms run` are written by the engine's workers, one task per shard
(pipeline/jobs/run/shard_tasks.py): every split is cut at `rows_per_shard` (never inside a
preference pair), nothing
is lost or doubled (weighted copies included), the plan-order splits keep the plan order,
the shuffled train split keeps a preference pair's rows together and mixes the sources
throughout, and the bytes do not depend on the number of workers."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.engine import local
from pipeline.jobs.run import shard_tasks
from tests.test_run import SAMPLE_TOKENIZER

PER_SHARD = 4


def mms(*args: object):
    return CliRunner().invoke(main, [str(arg) for arg in args])


def chat(index: int, source: str) -> dict:
    return {
        "messages": [
            {"role": "user", "content": f"{source} question number {index}?"},
            {"role": "assistant", "content": f"{source} answer number {index}."},
        ]
    }


def pair(index: int) -> dict:
    prompt = f"Which is better, option {index} or not?"
    return {
        "chosen": f"\n\nHuman: {prompt}\n\nAssistant: Option {index}, clearly.",
        "rejected": f"\n\nHuman: {prompt}\n\nAssistant: No idea {index}.",
    }


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r, option=orjson.OPT_APPEND_NEWLINE) for r in records))
    return path


def rows_of(out: Path, split: str) -> list[list[dict]]:
    """Each shard of `split` (in name order): its rows' id and meta."""
    shards = []
    for path in sorted((out / "data").glob(f"{split}-*.parquet")):
        table = pq.read_table(path, columns=["id", "meta"])
        ids, metas = table["id"].to_pylist(), table["meta"].to_pylist()
        shards.append([{"id": i, "meta": orjson.loads(m)} for i, m in zip(ids, metas, strict=True)])
    return shards


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("inputs")
    write_jsonl(folder / "alpha.jsonl", [chat(n, "alpha") for n in range(40)])
    write_jsonl(folder / "beta.jsonl", [chat(n, "beta") for n in range(15)])
    write_jsonl(folder / "pairs.jsonl", [pair(n) for n in range(12)])
    return folder


def config(folder: Path, inputs: Path, *, workers: int, shuffle: bool = True) -> Path:
    path = folder / f"run-{workers}-{shuffle}.yaml"
    path.write_text(
        f"""name: writes
inputs:
  - path: {inputs / "alpha.jsonl"}
  - path: {inputs / "beta.jsonl"}
    weight: 2
  - path: {inputs / "pairs.jsonl"}
    format: hh-rlhf
output: {folder / "unused"}
stages:
  lint: {{fail_on: never}}
  shard: {{splits: {{train: 0.7, test: 0.3}}, rows_per_shard: {PER_SHARD}, shuffle: {str(shuffle).lower()}}}
engine: {{workers: {workers}}}
"""
    )
    return path


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory, inputs: Path) -> dict[int, Path]:
    folder = tmp_path_factory.mktemp("runs")
    found = {}
    for workers in (1, 2):
        out = folder / f"out-{workers}"
        with pytest.MonkeyPatch.context() as patch:  # however few rows: in the workers
            patch.setattr(local, "HERE_ROWS", 0)
            result = mms("run", config(folder, inputs, workers=workers), "-o", out)
        assert result.exit_code == 0, result.output
        found[workers] = out
    return found


def test_shards_hold_rows_per_shard_rows_and_never_cut_a_pair(outputs):
    """A shard ends at a multiple of `rows_per_shard` rows, or one row earlier where a
    preference pair would be cut (its two rows are one group; the next shard has it)."""
    for split in ("train", "test"):
        shards = rows_of(outputs[2], split)
        sizes = [len(rows) for rows in shards]
        assert sizes and all(PER_SHARD - 1 <= size <= PER_SHARD + 1 for size in sizes[:-1])
        assert 1 <= sizes[-1] <= PER_SHARD + 1
        ends = list(itertools.accumulate(sizes))[:-1]
        assert all(end % PER_SHARD in (0, PER_SHARD - 1) for end in ends), sizes
        for rows in shards:
            sides = Counter(row["meta"]["pair_id"] for row in rows if "pair_id" in row["meta"])
            assert all(count == 2 for count in sides.values()), (split, sides)


def test_nothing_is_lost_or_doubled_and_weights_make_marked_copies(outputs):
    every = [
        row for split in ("train", "test") for rows in rows_of(outputs[2], split) for row in rows
    ]
    assert len({row["id"] for row in every}) == len(every)
    copies = Counter(row["id"].partition("#")[0] for row in every)
    by_source = Counter(
        (row["meta"]["source"].rsplit("/", 1)[-1], copies[row["id"].partition("#")[0]])
        for row in every
        if "#" not in row["id"]
    )
    assert by_source == Counter(
        {("alpha.jsonl", 1): 40, ("beta.jsonl", 2): 15, ("pairs.jsonl", 1): 24}
    )
    manifest = orjson.loads((outputs[2] / "manifest.json").read_bytes())
    assert sum(manifest["counts"]["threads_written"].values()) == len(every) == 40 + 2 * 15 + 24


def test_the_bytes_do_not_depend_on_the_workers(outputs):
    one, two = (sorted((outputs[w] / "data").iterdir()) for w in (1, 2))
    assert [p.name for p in one] == [p.name for p in two]
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(one, two, strict=True))
    manifests = [orjson.loads((outputs[w] / "manifest.json").read_bytes()) for w in (1, 2)]
    for key in ("splits", "counts"):
        assert manifests[0][key] == manifests[1][key]


def test_the_shuffled_split_keeps_pairs_together_and_mixes_the_sources(outputs):
    train = [row for rows in rows_of(outputs[2], "train") for row in rows]
    positions: dict[str, list[int]] = {}
    for place, row in enumerate(train):
        if "pair_id" in row["meta"]:
            positions.setdefault(row["meta"]["pair_id"], []).append(place)
    assert positions and all(b == a + 1 for a, b in positions.values()), positions
    first_half = {row["meta"]["source"].rsplit("/", 1)[-1] for row in train[: len(train) // 2]}
    assert first_half == {"alpha.jsonl", "beta.jsonl", "pairs.jsonl"}


def test_without_shuffle_every_split_keeps_the_plan_order(tmp_path, inputs, outputs):
    out = tmp_path / "plain"
    result = mms("run", config(tmp_path, inputs, workers=2, shuffle=False), "-o", out)
    assert result.exit_code == 0, result.output
    plain = {
        split: [row["id"] for rows in rows_of(out, split) for row in rows]
        for split in ("train", "test")
    }
    test_rows = [row["id"] for rows in rows_of(outputs[2], "test") for row in rows]
    assert plain["test"] == test_rows  # the test split is never shuffled
    shuffled = [row["id"] for rows in rows_of(outputs[2], "train") for row in rows]
    assert sorted(plain["train"]) == sorted(shuffled) and plain["train"] != shuffled
    lines = [
        int(row["meta"]["locator"].rsplit(":", 1)[1])
        for rows in rows_of(out, "train")
        for row in rows
        if row["meta"]["source"].endswith("alpha.jsonl")
    ]
    assert lines == sorted(lines)


def test_the_output_does_not_depend_on_the_size_of_the_parts(tmp_path, inputs, monkeypatch):
    """A run's parts are cut by size (larger for large inputs: `split_bytes_for`); the
    rows, their order, the shards and the reports are the same however they are cut."""
    import pipeline.sources.parts as parts

    config = tmp_path / "parts.yaml"
    config.write_text(
        f"name: parts\ninputs:\n  - path: {inputs / 'alpha.jsonl'}\n    format: openai\n"
        f"  - path: {inputs / 'pairs.jsonl'}\n    format: hh-rlhf\n"
        "stages:\n  lint: {fail_on: never}\n"
        f"  shard: {{splits: {{train: 0.7, test: 0.3}}, rows_per_shard: {PER_SHARD}}}\n"
        f"output: {tmp_path / 'unused'}\n"
    )
    found = {}
    for name, size in (("whole", None), ("cut", 1024)):
        if size is not None:
            monkeypatch.setattr(parts, "DEFAULT_SPLIT_BYTES", size)
        out = tmp_path / name / "out"
        result = mms("run", config, "-o", out)
        assert result.exit_code == 0, result.output
        manifest = orjson.loads((out / "manifest.json").read_bytes())
        found[name] = (
            {p.name: p.read_bytes() for p in sorted((out / "data").iterdir())},
            (out / "reports" / "stats.json").read_bytes(),
            manifest["counts"],
        )
    assert found["whole"] == found["cut"]
    planned = parts.plan_parts([(str(inputs / "alpha.jsonl"), "openai")])
    assert len(planned) > 1  # the small size did cut the file


@pytest.mark.parametrize(
    ("shuffle", "stages"),
    [
        (True, "objective: preference}"),
        (False, "objective: preference}"),
        (True, "max_tokens: 256}\n  pack: {seq_len: 256, window: 5}"),
    ],
)
def test_the_bytes_do_not_depend_on_the_rows_a_task_takes_at_a_time(
    tmp_path, inputs, monkeypatch, shuffle, stages
):
    """A shard task reads, reshapes and writes a batch of rows at a time, never cutting a
    group (a pair's rows make one row): its shards and reports are the same for batches
    of 3 rows (a shuffled shard's rows spilled after each record batch read) as for
    batches larger than the shard."""
    from pipeline.jobs.run import shard_rows

    path = tmp_path / "run.yaml"
    path.write_text(
        f"name: batches\ninputs:\n  - path: {inputs / 'alpha.jsonl'}\n"
        f"  - path: {inputs / 'pairs.jsonl'}\n    format: hh-rlhf\n"
        f"  - path: {inputs / 'beta.jsonl'}\n    weight: 2\n"
        f"output: {tmp_path / 'unused'}\nstages:\n  lint: {{fail_on: never}}\n"
        f"  tokenize: {{tokenizer: {SAMPLE_TOKENIZER}, {stages}\n"
        f"  shard: {{splits: {{train: 0.8, test: 0.2}}, shuffle: {str(shuffle).lower()}}}\n"
    )
    found = {}
    for rows in (shard_rows.BATCH_ROWS, 3):
        monkeypatch.setattr(shard_rows, "BATCH_ROWS", rows)
        monkeypatch.setattr(shard_rows, "SPILL_BYTES", 1 if rows == 3 else 1 << 30)
        out = tmp_path / f"out-{rows}"
        result = mms("run", path, "-o", out)
        assert result.exit_code == 0, result.output
        found[rows] = {
            str(file.relative_to(out)): file.read_bytes()
            for folder in ("data", "reports")
            for file in sorted((out / folder).iterdir())
        }
    assert found[3] == found[shard_rows.BATCH_ROWS]
    assert (
        sum(
            pq.ParquetFile(out / name).metadata.num_rows
            for name in found[3]
            if name.startswith("data/")
        )
        > 3 * 3
    )


ROW_GROUPS_HELD = 6
"""The most Arrow memory a shard task may allocate, in row groups of its shard: it reads,
reshapes and writes a batch of about a row group's rows at a time, a shuffled shard's
rows first gathered part by part into spill files of SPILL_BYTES sorted by place
(pipeline/jobs/run/shard_rows.py), and counts its stats a few thousand rows at a time, so
its peak follows a batch and a spill, not its shard nor the input. Measured 4.4 shuffled
(spills of 2 MiB here, a row group ~2.7 MiB) and 1.7 in plan order, on a shard of 8 row
groups; a task that gathered its whole shard from the parts joined whole held 13.6."""


@pytest.mark.parametrize("shuffle", [True, False])
def test_a_shard_task_allocates_a_few_batches_not_its_shard(tmp_path, monkeypatch, shuffle):
    """Every allocation through Arrow's memory pool while a shard task runs, against the
    size of a row group of its shard in memory (one tokenized shard of ~20 MiB, 8 row
    groups, from 3 parts)."""
    import pipeline.sources.parts as parts
    from pipeline.jobs.run import shard_rows

    text = " ".join(f"word{k % 997}" for k in range(30))
    records = [
        {
            "messages": [
                {"role": "user", "content": f"Question {n}: {text}"},
                {"role": "assistant", "content": f"Answer {n}: {text[::-1]}"},
            ]
        }
        for n in range(8000)
    ]
    source = write_jsonl(tmp_path / "long.jsonl", records)
    monkeypatch.setattr(parts, "DEFAULT_SPLIT_BYTES", source.stat().st_size // 3 + 1)
    monkeypatch.setattr(shard_rows, "SPILL_BYTES", 2 << 20)
    path = tmp_path / "run.yaml"
    path.write_text(
        f"name: memory\ninputs:\n  - path: {source}\n    format: openai\n"
        f"output: {tmp_path / 'unused'}\nstages:\n  lint: {{fail_on: never}}\n"
        f"  tokenize: {{tokenizer: {SAMPLE_TOKENIZER}, max_tokens: 4096}}\n"
        f"  shard: {{splits: {{train: 1.0}}, shuffle: {str(shuffle).lower()}}}\n"
        "engine: {workers: 1}\n"
    )
    peaks: list[tuple[str, int]] = []
    task = shard_tasks.ShardTask.__call__

    def measured(self: shard_tasks.ShardTask) -> shard_tasks.ShardDone:
        default = pa.default_memory_pool()
        pool = pa.proxy_memory_pool(default)  # counts what goes through it alone
        pa.set_memory_pool(pool)
        try:
            done = task(self)
        finally:
            pa.set_memory_pool(default)
        peaks.append((done.shard.name, pool.max_memory()))
        assert len({source.part_dir for source in self.sources}) == 3
        return done

    monkeypatch.setattr(shard_tasks.ShardTask, "__call__", measured)
    out = tmp_path / "out"
    result = mms("run", path, "-o", out)
    assert result.exit_code == 0, result.output
    assert [name for name, _ in peaks] == ["train-00000-of-00001.parquet"]
    shard = pq.ParquetFile(out / "data" / peaks[0][0])
    assert shard.metadata.num_row_groups == 8
    row_group = shard.read().nbytes / 8
    assert row_group > 2 << 20
    assert peaks[0][1] <= ROW_GROUPS_HELD * row_group, (peaks[0][1] / row_group, shuffle)


def resident_bytes(path: Path) -> int:
    """The bytes of `path` mapped into this process and resident (/proc/self/smaps)."""
    total, ours = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if "-" in fields[0] and len(fields) >= 5 and ":" in fields[3]:  # a mapping's header
            ours = fields[-1] == str(path)
        elif ours and fields[0] == "Rss:":
            total += int(fields[1]) * 1024
    return total


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="reads /proc/self/smaps")
def test_a_task_holds_the_pages_of_one_record_batch_of_the_parts(tmp_path, monkeypatch):
    """Rows gathered from every record batch of a part's threads file: the rows, in the
    order asked, and none of the file's pages left in this process by the record batches
    read before (a read maps a page's neighbours too: a few rows of each record batch would
    bring in most of the file)."""
    import numpy as np

    from pipeline.jobs.run.shard_rows import Threads

    text = pa.array([f"{n:06d}" + "x" * 500 for n in range(32_000)])
    table = pa.table({"id": pa.array([f"t{n}" for n in range(32_000)]), "text": text})
    path = tmp_path / "threads.arrow"
    with pa.ipc.new_file(path, table.schema) as writer:
        for batch in table.to_batches(max_chunksize=2_000):
            writer.write_batch(batch)
    record_batch = table.slice(0, 2_000).nbytes
    threads = Threads([str(path)], table.schema)
    held: list[int] = []
    record_batch_of = Threads._record_batch

    def measured(self: Threads, number: int) -> pa.RecordBatch:
        held.append(resident_bytes(path))  # what the record batches before left mapped
        return record_batch_of(self, number)

    monkeypatch.setattr(Threads, "_record_batch", measured)
    rows = np.random.default_rng(0).permutation(32_000)[:1_000]
    assert threads.gather(rows).equals(table.take(pa.array(rows)))
    held.append(resident_bytes(path))
    assert len(held) == 17 and max(held) <= 0.5 * record_batch, (held, record_batch)
    assert resident_bytes(path) == 0
