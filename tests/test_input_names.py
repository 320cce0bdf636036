"""Thread ids and lineage name each file relative to the input the user named
(pipeline/sources/names.py), so the same files in another folder give the same threads
and shard bytes; names that collide between inputs are qualified, never shared."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pyarrow.parquet as pq
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.sources.names import unique_names
from tests.conftest import REPO

OPENAI_SAMPLES = REPO / "data_samples" / "openai"
SAMPLE_TOKENIZER = REPO / "configs" / "sample_tokenizer"


def _config(folder: Path, inputs: list[Path], *stages: str) -> Path:
    """A run config in `folder` reading `inputs` (absolute paths), tokenized with the
    sample tokenizer and split in two, so ids decide the split."""
    lines = ["name: names", "inputs:", *(f"  - path: {path}" for path in inputs)]
    lines += [
        f"output: {folder / 'unused'}",
        "stages:",
        "  lint: {fail_on: never}",
        f"  tokenize: {{tokenizer: {SAMPLE_TOKENIZER}, max_tokens: 1024, overlong: truncate}}",
        "  shard: {splits: {train: 0.5, test: 0.5}}",
        *(f"  {stage}" for stage in stages),
    ]
    config = folder / "names.yaml"
    config.write_text("\n".join(lines) + "\n")
    return config


def _run(config: Path, out: Path) -> dict[str, bytes]:
    result = CliRunner().invoke(main, ["run", str(config), "-o", str(out)])
    assert result.exit_code == 0, result.output
    return {path.name: path.read_bytes() for path in sorted((out / "data").glob("*.parquet"))}


def _ids(shards: dict[str, bytes], out: Path) -> list[str]:
    return [i for name in shards for i in pq.read_table(out / "data" / name)["id"].to_pylist()]


def test_the_same_files_in_two_folders_give_the_same_shards(tmp_path):
    first, second = tmp_path / "a" / "x", tmp_path / "b" / "deeper" / "y"
    shutil.copytree(OPENAI_SAMPLES, first)
    shutil.copytree(OPENAI_SAMPLES, second)
    (tmp_path / "c1").mkdir()
    (tmp_path / "c2").mkdir()
    one = _run(_config(tmp_path / "c1", [first]), tmp_path / "out1")
    two = _run(_config(tmp_path / "c2", [second]), tmp_path / "out2")
    assert one and set(one) == {name for name in one if name.startswith(("train", "test"))}
    assert one == two  # shard names and bytes
    ids = _ids(one, tmp_path / "out1")
    assert ids == _ids(two, tmp_path / "out2") and len(set(ids)) == len(ids)
    table = pq.read_table(tmp_path / "out1" / "data")
    metas = [orjson.loads(m) for m in table.column("meta").to_pylist()]
    assert {meta["source"] for meta in metas} <= {p.name for p in OPENAI_SAMPLES.iterdir()}
    # the quarantine still points at the files as the config names them
    rejected = (tmp_path / "out2" / "quarantine" / "rejected.jsonl").read_bytes().splitlines()
    assert rejected and all(
        orjson.loads(line)["source"].startswith(str(second)) for line in rejected
    )


def test_convert_and_lint_give_the_same_ids_wherever_the_files_are(tmp_path):
    first, second = tmp_path / "a" / "x", tmp_path / "b" / "y"
    shutil.copytree(OPENAI_SAMPLES, first)
    shutil.copytree(OPENAI_SAMPLES, second)
    outputs = []
    for index, (source, workers) in enumerate([(first, "1"), (second, "2")]):
        out = tmp_path / f"threads{index}.jsonl"
        args = ["convert", str(source), "-o", str(out), "--workers", workers]
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]
    # a glob names its files under its fixed leading folder: as the folder does
    globbed = tmp_path / "globbed.jsonl"
    result = CliRunner().invoke(main, ["convert", f"{second}/*.jsonl", "-o", str(globbed)])
    assert result.exit_code == 0, result.output
    assert globbed.read_bytes() == outputs[0]
    reports = []
    for source in (first, second):
        args = ["lint", str(source), "--output-format", "json", "--fail-on", "never"]
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output
        reports.append(orjson.loads(result.stdout))
    # the findings on threads carry the same ids (a record that never became a thread is
    # still reported under a hash of its path as written, beside that path)
    threads = {orjson.loads(line)["id"] for line in outputs[0].splitlines()}
    found = [
        [(d["thread_id"], d["code"]) for d in r["diagnostics"] if d["thread_id"] in threads]
        for r in reports
    ]
    assert found[0] and found[0] == found[1]
    # findings on threads point at the file a person can open, not at the name
    assert all(
        d["source"].startswith(str(second)) for d in reports[1]["diagnostics"] if d["source"]
    )


def test_names_that_collide_between_inputs_never_share_ids(tmp_path):
    # records with no id of their own: their ids are hashes of where they come from
    lines = [
        {"messages": [{"role": "user", "content": f"q{n}"}, {"role": "assistant", "content": "a"}]}
        for n in range(3)
    ]
    inputs = [tmp_path / "a", tmp_path / "b"]
    for folder in inputs:
        folder.mkdir()
        (folder / "chat_completions.jsonl").write_bytes(b"\n".join(map(orjson.dumps, lines)))
    out = tmp_path / "threads.jsonl"
    result = CliRunner().invoke(main, ["convert", *map(str, inputs), "-o", str(out)])
    assert result.exit_code == 0, result.output
    threads = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    ids = [thread["id"] for thread in threads]
    assert len(set(ids)) == len(ids)
    sources = {thread["meta"]["source"] for thread in threads}
    assert "chat_completions.jsonl" in sources and "#2/chat_completions.jsonl" in sources
    # a run qualifies them the same way, in its shards (dedup off: the copies stay)
    (tmp_path / "config").mkdir()
    config = _config(tmp_path / "config", inputs, "dedup: {enabled: false}")
    shards = _run(config, tmp_path / "out")
    run_ids = _ids(shards, tmp_path / "out")
    assert len(set(run_ids)) == len(run_ids) and set(run_ids) <= set(ids)


def test_a_qualified_name_that_is_taken_gets_another_qualifier():
    named = [(0, "chat.jsonl"), (0, "#2/chat.jsonl"), (1, "chat.jsonl"), (2, "chat.jsonl")]
    assert unique_names(named) == ["chat.jsonl", "#2/chat.jsonl", "##2/chat.jsonl", "#3/chat.jsonl"]
