"""Work of `mms run` that grows with the data runs as tasks on the run's engine, not in
the process that plans and merges: a big file's lines counted to find its parts, the
inputs hashed for the manifest (by each file's first part), the output's files hashed
for its verification, the parts' lint findings kept in files the report reads."""

from __future__ import annotations

import hashlib
from pathlib import Path

import orjson
import pytest

from pipeline.engine import LocalRunner
from pipeline.jobs.run import planning
from pipeline.jobs.run.config import load_run_config
from pipeline.jobs.run.file_hashes import engine_hashes
from pipeline.jobs.verify import verify_output
from pipeline.lint.rules.examples import assistant, thread, user
from tests.test_run import run_cli

SPLIT_FILE_BYTES = 9 << 20
"""Over the run's smallest part size (8 MiB): the file is read in two parts."""


class RecordingRunner(LocalRunner):
    """The local engine, noting the kind of every task it is given."""

    def __init__(self, workers: int) -> None:
        super().__init__(workers)
        self.kinds: list[str] = []

    def map_tasks(self, tasks, done=None):
        self.kinds += [type(task).__name__ for task in tasks]
        return super().map_tasks(tasks, done)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 9 MiB MMS file (long threads, a few thousand lines) and a small one with a
    thread that has no answer (a lint finding)."""
    folder = tmp_path_factory.mktemp("big") / "data"
    folder.mkdir()
    lines, size, index = [], 0, 0
    while size < SPLIT_FILE_BYTES:
        line = orjson.dumps(
            thread(user(f"Question {index}: " + "why? " * 800), assistant(f"Answer {index}."))
        )
        lines.append(line + b"\n")
        size += len(line) + 1
        index += 1
    (folder / "big.jsonl").write_bytes(b"".join(lines))
    small = [thread(user(f"Small {n}?"), assistant(f"Yes {n}.")) for n in range(3)]
    small.append(thread(user("Nothing to answer?")))  # MMS103: a finding for the report
    (folder / "small.jsonl").write_bytes(b"".join(orjson.dumps(t) + b"\n" for t in small))
    return folder


def _config(folder: Path, inputs: Path) -> Path:
    path = folder / "run.yaml"
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"name: big\ninputs:\n  - path: {inputs}\n    format: mms\n"
        f"stages:\n  lint: {{fail_on: never}}\n  shard: {{splits: {{train: 1.0}}}}\n"
        f"output: {folder / 'out'}\n"
    )
    return path


def test_a_big_files_lines_are_counted_on_the_engine_into_the_same_parts(
    inputs, tmp_path, monkeypatch
):
    config = load_run_config(_config(tmp_path, inputs))
    here = planning.plan(config)
    assert len([part for part in here if part.path.endswith("big.jsonl")]) == 2
    monkeypatch.setattr(planning, "COUNT_HERE_BYTES", 0)
    runner = RecordingRunner(2)
    assert planning.plan(config, runner=runner) == here
    assert runner.kinds == ["LineWindow", "LineWindow"]


def test_the_manifest_hashes_every_input_whole_even_when_read_in_parts(inputs, tmp_path):
    result = run_cli(str(_config(tmp_path, inputs)), "--workers", "2")
    assert result.exit_code == 0, result.output
    manifest = orjson.loads((tmp_path / "out" / "manifest.json").read_bytes())
    assert [(Path(i["path"]).name, i["sha256"], i["bytes"]) for i in manifest["inputs"]] == [
        (name, hashlib.sha256(data).hexdigest(), len(data))
        for name in ("big.jsonl", "small.jsonl")
        for data in [(inputs / name).read_bytes()]
    ]
    report = orjson.loads((tmp_path / "out" / "reports" / "lint.json").read_bytes())
    assert [d["code"] for d in report["diagnostics"]] == ["MMS103"]
    assert not (tmp_path / "out" / ".work").exists()


def test_the_runs_output_is_hashed_on_the_engine_and_a_changed_shard_is_found(
    inputs, tmp_path, monkeypatch
):
    result = run_cli(str(_config(tmp_path, inputs)), "--workers", "2")
    assert result.exit_code == 0, result.output
    out = tmp_path / "out"
    monkeypatch.setattr("pipeline.jobs.run.file_hashes.HASH_HERE_BYTES", 0)
    runner = RecordingRunner(2)
    checked = verify_output(out, render=False, template=False, hash_files=engine_hashes(runner))
    assert checked.passed, checked.problems
    assert "HashTask" in runner.kinds
    shard = next((out / "data").glob("*.parquet"))
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    checked = verify_output(out, render=False, template=False, hash_files=engine_hashes(runner))
    assert next(p.what for p in checked.problems if p.where.endswith(shard.name)) == (
        "sha256 differs from the manifest's"
    )


class ApartRunner(RecordingRunner):
    """The local engine named as an engine whose workers are apart (Ray): what such a
    run does on its workers, it gives this runner as tasks."""

    name = "ray"


def test_a_run_whose_workers_are_apart_counts_hashes_and_removes_on_them(
    inputs, tmp_path, monkeypatch
):
    here = tmp_path / "here"
    assert run_cli(str(_config(here, inputs)), "--workers", "2").exit_code == 0
    runner = ApartRunner(2)
    monkeypatch.setattr("pipeline.jobs.run.claim.engine_runner", lambda *_: runner)
    apart = tmp_path / "apart"
    result = run_cli(str(_config(apart, inputs)), "--workers", "2")
    assert result.exit_code == 0, result.output
    assert runner.kinds.count("LineWindow") == 2  # the big file's, however few its bytes
    assert runner.kinds.count("HashTask") == 2  # the manifest's files, then the verify's
    # the parts' lists of threads left out and their resolved rows; the parts' folders
    assert runner.kinds.count("RemoveFolders") == 2
    assert [p.name for p in (apart / "out").iterdir() if p.name.startswith(".work")] == []

    def manifest_files(folder: Path) -> list[dict[str, object]]:
        return orjson.loads((folder / "out" / "manifest.json").read_bytes())["files"]

    assert manifest_files(apart) == manifest_files(here)  # the same digests, hashed apart
    for name in ("reports/lint.json", "data/train-00000-of-00001.parquet"):
        assert (apart / "out" / name).read_bytes() == (here / "out" / name).read_bytes()
