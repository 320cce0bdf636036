"""`mms run` means what its config says: the gate judges what is kept (drop_on works), a
failed gate publishes nothing normal-looking, an empty split is not declared, a run never
reads its own output, a tokenizer that is not one is a config error, and the output does
not depend on where the config lives."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
from click.testing import CliRunner

from pipeline.cli import main
from tests.conftest import REPO

SAMPLE_TOKENIZER = REPO / "configs" / "sample_tokenizer"


def _thread(thread_id: str, answer: str, fmt: str = "markdown") -> dict:
    return {
        "id": thread_id,
        "messages": [
            {"role": "user", "content": f"Question {thread_id}?"},
            {"role": "assistant", "format": fmt, "content": answer, "end_turn": True},
        ],
    }


def _inputs(folder: Path) -> Path:
    """Three threads; the second answers in a format nothing enables (MMS201, an error)."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = [_thread("ok-1", "Fine."), _thread("bad", '{"a": 1}', "json"), _thread("ok-2", "Yes.")]
    path = folder / "threads.jsonl"
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    return path


def _config(folder: Path, source: Path | str, output: Path | str, *stages: str) -> Path:
    config = folder / "run.yaml"
    lines = [
        "name: gate-test",
        "inputs:",
        f"  - path: {source}",
        "    format: mms",
        f"output: {output}",
        "stages:",
        *(f"  {stage}" for stage in stages),
    ]
    config.write_text("\n".join(lines) + "\n")
    return config


def _run(config: Path, *args: str):
    return CliRunner().invoke(main, ["run", str(config), *args])


def test_drop_on_drops_and_the_gate_judges_only_what_is_kept(tmp_path):
    source = _inputs(tmp_path / "in")
    config = _config(
        tmp_path, source, tmp_path / "out", "lint: {fail_on: error, drop_on: [MMS201]}"
    )
    result = _run(config)
    assert result.exit_code == 0, result.output
    manifest = orjson.loads((tmp_path / "out" / "manifest.json").read_bytes())
    assert manifest["gate"] == {"passed": True, "fail_on": "error", "failed_by": []}
    assert manifest["counts"]["threads_dropped"] == {"lint:MMS201": 1}
    summary = orjson.loads((tmp_path / "out" / "reports" / "lint.json").read_bytes())["summary"]
    assert summary["on_dropped_threads"] == {"MMS201": 1}
    assert summary["gate"] == {"fail_on": "error", "failed": False, "failed_by": {}}


def test_a_failed_gate_publishes_nothing_normal_looking(tmp_path):
    source = _inputs(tmp_path / "in")
    out = tmp_path / "out"
    passing = _config(tmp_path, source, out, "lint: {fail_on: never}")
    assert _run(passing).exit_code == 0
    assert (out / "README.md").is_file() and list((out / "data").glob("*.parquet"))

    failing = _config(tmp_path, source, out, "lint: {fail_on: error}")
    result = _run(failing)
    assert result.exit_code == 1
    assert "lint gate failed" in result.output
    assert "MMS201" in result.output and f"{source.name}:2" in result.output
    assert not list((out / "data").glob("*.parquet")), "shards of the earlier run remain"
    assert not (out / "README.md").exists() and not (out / "tokenizer").exists()
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    assert manifest["gate"]["passed"] is False
    (failed,) = manifest["gate"]["failed_by"]
    assert (failed["code"], failed["count"]) == ("MMS201", 1)
    assert failed["first"].endswith(f"{source.name}:2")
    assert manifest["splits"] == {}
    assert manifest["counts"]["threads_withheld_by_gate"] == 3
    assert (out / "reports" / "lint.md").is_file() and (out / "quarantine").is_dir()


def test_a_split_with_no_rows_is_neither_written_nor_declared(tmp_path):
    source = _inputs(tmp_path / "in")
    out = tmp_path / "out"
    config = _config(
        tmp_path,
        source,
        out,
        "lint: {fail_on: never}",
        "shard: {splits: {train: 0.999999, test: 0.000001}}",
    )
    result = _run(config)
    assert result.exit_code == 0, result.output
    assert "split test got no rows" in result.output
    assert not list((out / "data").glob("test-*"))
    card = (out / "README.md").read_text()
    front = card.split("---")[1]
    assert "split: test" not in front and "name: test" not in front and "train" in front
    from datasets import load_dataset

    loaded = load_dataset(str(out))
    assert list(loaded) == ["train"] and loaded["train"].num_rows == 3


def test_a_run_never_reads_its_own_output(tmp_path):
    folder = tmp_path / "in"
    _inputs(folder)
    config = _config(tmp_path, folder, folder / "out", "lint: {fail_on: never}")
    first = _run(config)
    assert first.exit_code == 0, first.output
    second = _run(config)
    assert second.exit_code == 0, second.output
    manifest = orjson.loads((folder / "out" / "manifest.json").read_bytes())
    assert [entry["path"] for entry in manifest["inputs"]] == [str(folder / "threads.jsonl")]
    assert manifest["counts"]["records_read"] == 3


def test_output_that_is_an_input_or_a_file_is_a_config_error(tmp_path):
    folder = tmp_path / "in"
    _inputs(folder)
    same = _run(_config(tmp_path, folder, folder, "lint: {fail_on: never}"))
    assert same.exit_code == 2
    assert "output" in same.output and "inputs[0]" in same.output and "line" in same.output
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    file_out = _run(_config(tmp_path, folder, a_file, "lint: {fail_on: never}"))
    assert file_out.exit_code == 2 and "existing file" in file_out.output
    assert "Traceback" not in same.output + file_out.output


def test_a_tokenizer_file_that_is_not_a_tokenizer_is_a_config_error(tmp_path):
    source = _inputs(tmp_path / "in")
    fake = tmp_path / "fake" / "tokenizer.json"
    fake.parent.mkdir()
    fake.write_text('{"hello": "world"}')
    config = _config(tmp_path, source, tmp_path / "out", f"tokenize: {{tokenizer: {fake.parent}}}")
    result = _run(config)
    assert result.exit_code == 2
    assert "stages.tokenize.tokenizer" in result.output and "line" in result.output
    assert not (tmp_path / "out" / ".work").exists()


def test_the_same_config_with_absolute_paths_gives_the_same_bytes_from_any_folder(
    tmp_path, monkeypatch
):
    source = _inputs(tmp_path / "data")
    out = tmp_path / "out"
    stages = (
        "lint: {fail_on: never}",
        f"tokenize: {{tokenizer: {SAMPLE_TOKENIZER}}}",
        "shard: {splits: {train: 0.5, test: 0.5}}",
    )
    outputs = []
    for place in ("a", "b/deeper"):
        folder = tmp_path / place
        folder.mkdir(parents=True)
        config = _config(folder, source, out, *stages)
        monkeypatch.chdir(folder.parent)
        result = _run(config)
        assert result.exit_code == 0, result.output
        outputs.append(
            {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
        )
        shutil.rmtree(out)
    first, second = outputs
    assert first.keys() == second.keys()
    differing = [name for name in first if first[name] != second[name]]
    assert differing == [], differing
