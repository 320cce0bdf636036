"""The partition pass on the local engine: the rows whose key another row shares are found
bucket by bucket on disk, in the runner's tasks (the same rows as counting every key at
once, for any keys and any workers), and a run that partitions (`engine.partition:
always`) writes the same bytes as one whose ordered pass keeps every key, with dedup (exact
and near) and lint's duplicate rule both finding duplicates, for any number of workers."""

from __future__ import annotations

import functools
from collections import Counter
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.engine import LocalRunner, find_repeated
from pipeline.engine.keys import MAX_TASKS
from tests.realdata_mix import write_mix_config
from tests.test_run import output_files, run_cli, write_config

Keys = list[list[tuple[int, bytes]]]
"""Per source, its (row, key) pairs."""


def publish_once(folder: Path, name: str, rows: np.ndarray) -> None:
    """A source's rows to `folder/NAME.npy` (in a task's process); a second call for the same
    source fails."""
    with open(folder / f"{name}.npy", "xb") as out:
        np.save(out, rows)


def shared_by_partition(sources: Keys, workers: int, scratch: Path) -> dict[str, list[int]]:
    tables = {
        f"s{index}": pa.table(
            {
                "row": pa.array([row for row, _ in pairs], pa.int64()),
                "key": pa.array([key for _, key in pairs], pa.binary()),
            }
        )
        for index, pairs in enumerate(sources)
    }
    published = scratch.with_name("published")
    published.mkdir()
    publish = functools.partial(publish_once, published)
    find_repeated(LocalRunner(workers), list(tables), tables.__getitem__, publish, scratch)
    assert not scratch.exists()
    found = {path.stem: np.load(path).tolist() for path in published.glob("*.npy")}
    for rows in found.values():
        assert rows == sorted(set(rows))
    return found


def shared_by_counting(sources: Keys) -> dict[str, list[int]]:
    counts = Counter(key for pairs in sources for _, key in pairs)
    found = {
        f"s{index}": sorted({row for row, key in pairs if counts[key] > 1})
        for index, pairs in enumerate(sources)
    }
    return {name: rows for name, rows in found.items() if rows}


KEYS = st.lists(
    st.lists(st.tuples(st.integers(0, 40), st.binary(min_size=0, max_size=2)), max_size=30),
    min_size=1,
    max_size=6,
)


@settings(max_examples=60, deadline=None)
@given(sources=KEYS)
def test_partitioned_keys_find_the_rows_counting_every_key_finds(sources, tmp_path_factory):
    scratch = tmp_path_factory.mktemp("keys") / "scratch"
    assert shared_by_partition(sources, 1, scratch) == shared_by_counting(sources)


@pytest.mark.slow
def test_many_sources_and_two_workers(tmp_path: Path) -> None:
    """More sources than buckets: a bucket gathers several sources' keys, and a group of
    sources several sources' rows."""
    rng = np.random.default_rng(7)
    sources = [
        [(row, rng.integers(0, 4000).tobytes()) for row in range(40)] for _ in range(MAX_TASKS + 20)
    ]
    assert shared_by_partition(sources, 2, tmp_path / "scratch") == shared_by_counting(sources)


@pytest.fixture(scope="module")
def realdata_config(data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real-file mix of tests/data (duplicates, lint, exact and near dedup, three
    splits), with the partition left as a placeholder."""
    folder = tmp_path_factory.mktemp("partition")
    realdata = data / "realdata"
    return write_mix_config(folder / "template.yaml", realdata, engine="{partition: PARTITION}")


def run_with(config: Path, partition: str, out: Path, workers: str) -> dict[str, bytes]:
    chosen = out.parent / "run.yaml"  # the same name: reports name the config
    chosen.parent.mkdir(parents=True)
    chosen.write_text(config.read_text().replace("PARTITION", partition))
    result = run_cli(str(chosen), "-o", str(out), "--workers", workers)
    assert result.exit_code == 0, result.output
    files = output_files(out)
    manifest = orjson.loads(files["manifest.json"])
    assert manifest["config"]["engine"] == {"kind": "local", "partition": partition}
    del manifest["config"]["engine"]
    files["manifest.json"] = orjson.dumps(manifest)
    return files


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_partitioned_run_writes_the_same_bytes(realdata_config: Path, tmp_path: Path, workers):
    kept = run_with(realdata_config, "never", tmp_path / "never" / "out", workers)
    partitioned = run_with(realdata_config, "always", tmp_path / "always" / "out", workers)
    assert set(kept) == set(partitioned)
    for name, data in kept.items():
        assert partitioned[name] == data, f"{name} differs when the run partitions"
    counts = orjson.loads(kept["manifest.json"])["counts"]
    assert counts["threads_dropped"]["duplicate"] and counts["threads_dropped"]["near_duplicate"]
    assert b"MMS501" in kept["reports/lint.json"]


def write_spread_duplicates(folder: Path) -> tuple[Path, int]:
    """Four input files (four parts), each with threads of its own and copies of threads
    that other files hold too (one also twice in one file); gives the folder and how many
    copies exact dedup drops."""
    copied = {"a": (0, 2, 3), "b": (1, 3), "c": (1, 1, 2)}
    folder.mkdir()
    for index in range(4):
        texts = [f"only in file {index}, number {n}" for n in range(5)]
        for name, files in copied.items():
            texts += [f"shared thread {name}"] * files.count(index)
        lines = [
            orjson.dumps({"messages": [{"role": "user", "content": text},
                                       {"role": "assistant", "content": f"re: {text}"}]})
            for text in texts
        ]  # fmt: skip
        (folder / f"part{index}.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    return folder, sum(len(files) - 1 for files in copied.values())


def test_duplicates_across_parts_are_dropped_alike_by_one_and_two_workers(tmp_path: Path):
    """A partitioned run finds the copies wherever they are, and drops the same ones (the
    later ones in plan order) with one worker and two: the same bytes."""
    source, dropped = write_spread_duplicates(tmp_path / "inputs")
    config = write_config(
        tmp_path, "spread", source, "lint: {fail_on: never}", "dedup: {enabled: true}",
        engine="{partition: always}",
    )  # fmt: skip
    out = tmp_path / "out"  # the same output path: the manifest and card name it
    outputs = {}
    for workers in ("1", "2"):
        result = run_cli(str(config), "-o", str(out), "--workers", workers)
        assert result.exit_code == 0, result.output
        outputs[workers] = output_files(out)
        out.rename(tmp_path / f"out-{workers}")
        counts = orjson.loads(outputs[workers]["manifest.json"])["counts"]
        assert counts["threads_dropped"]["duplicate"] == dropped
        assert b"MMS501" in outputs[workers]["reports/lint.json"]
    assert outputs["1"] == outputs["2"]
