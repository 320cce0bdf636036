"""The dataset side of `mms run` decided part by part in the engine's workers: the driver
decides only the rows whose keys repeat, in plan order, and every part's task decides the
rest with those answers. The output (shards, drop list, lint report, stats, manifest) is
the same whether the run partitions or not and whatever the workers; the dataset rules
whose evidence is spread over parts (a capability always used, too few phrasings, a
pair's sides, duplicates) find what the one-process `mms lint` finds."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.lint.rules.examples import assistant, developer, thread, user
from tests.test_run import output_files, run_cli

JSON_PROMPT = "Reply in `json` when the user asks for data."


def _json_thread(index: int) -> dict:
    return thread(
        developer(JSON_PROMPT),
        user(f"Give me {index} as data."),
        assistant(f'{{"n": {index}}}', "json"),
        id=f"json-{index}",
    )


def _pair(name: str, chosen: str, rejected: str) -> list[dict]:
    return [
        thread(
            user(f"Name a colour ({name})."),
            assistant(answer),
            id=f"{name}:{side}",
            meta={"pair_id": name, "preference": side},
        )
        for side, answer in (("chosen", chosen), ("rejected", rejected))
    ]


def _plain(index: int) -> dict:
    return thread(user(f"What is {index} plus one?"), assistant(f"{index + 1}."), id=f"p-{index}")


def _write(path: Path, threads: list[dict]) -> None:
    path.write_bytes(b"".join(orjson.dumps(t) + b"\n" for t in threads))


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three files (three parts): six threads enabling `json` in each of the first two (no
    part alone has the ten the rules want), duplicates of threads and of a pair across
    files, and a pair whose answers are the same."""
    folder = tmp_path_factory.mktemp("parts") / "data"
    folder.mkdir()
    repeated = _plain(1000)
    twice = _pair("twice", "Red.", "Blue, I think.")
    _write(folder / "a.jsonl", [*map(_json_thread, range(6)), repeated, *map(_plain, range(5))])
    _write(
        folder / "b.jsonl",
        [*map(_json_thread, range(6, 12)), *twice, *_pair("same", "Red.", "Red.")],
    )
    copies = [{**t, "id": f"{t['id']}-copy"} for t in twice]
    for side in copies:
        side["meta"] = {**side["meta"], "pair_id": "twice-copy"}
    _write(folder / "c.jsonl", [{**repeated, "id": "again"}, *map(_plain, range(5, 9)), *copies])
    return folder


def _config(folder: Path, inputs: Path, partition: str, drop_on: str) -> Path:
    path = folder / "run.yaml"
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"""name: parts
inputs:
  - path: {inputs}
    format: mms
stages:
  lint: {{fail_on: never, drop_on: [{drop_on}]}}
  dedup: {{enabled: true}}
  shard: {{splits: {{train: 0.7, test: 0.3}}, seed: 5}}
output: {inputs.parent / "unused"}
engine: {{partition: {partition}}}
"""
    )
    return path


def _run(folder: Path, inputs: Path, partition: str, drop_on: str, workers: str) -> dict:
    config = _config(folder, inputs, partition, drop_on)
    result = run_cli(str(config), "-o", str(folder / "out"), "--workers", workers)
    assert result.exit_code == 0, result.output
    files = output_files(folder / "out")
    manifest = orjson.loads(files["manifest.json"])
    del manifest["config"]["engine"]
    files["manifest.json"] = orjson.dumps(manifest)
    return files


@pytest.mark.parametrize("drop_on", ["", "MMS501"])
def test_the_output_does_not_depend_on_partitioning_or_workers(inputs, tmp_path, drop_on):
    whole = _run(tmp_path / "never-1", inputs, "never", drop_on, "1")
    for partition, workers in (("always", "1"), ("always", "2"), ("never", "2")):
        other = _run(tmp_path / f"{partition}-{workers}", inputs, partition, drop_on, workers)
        assert set(other) == set(whole)
        for name, data in whole.items():
            assert other[name] == data, f"{name} differs ({partition}, {workers} workers)"
    dropped = orjson.loads(whole["manifest.json"])["counts"]["threads_dropped"]
    listed = [orjson.loads(line) for line in whole["quarantine/dropped.jsonl"].splitlines()]
    copies = ["again", "twice:chosen-copy", "twice:rejected-copy"]
    if drop_on:  # the pair whose sides are the same thread goes too, whole
        assert dropped == {"lint:MMS501": 4, "group:lint:MMS501": 1}
        assert [entry["id"] for entry in listed] == ["same:chosen", "same:rejected", *copies]
    else:  # dedup compares a pair as one unit: its sides are no copies of each other
        assert dropped == {"duplicate": 3}
        assert [entry["id"] for entry in listed] == copies


def test_dataset_rules_over_parts_find_what_one_process_finds(inputs, tmp_path):
    files = _run(tmp_path / "run", inputs, "always", "", "2")
    run_codes = orjson.loads(files["reports/lint.json"])["summary"]["by_code"]
    report = tmp_path / "lint.json"
    result = CliRunner().invoke(
        main, ["lint", str(inputs), "--from", "mms", "--output-format", "json", "-o", str(report)]
    )
    assert result.exit_code in (0, 1), result.output
    lint_codes = orjson.loads(report.read_bytes())["summary"]["by_code"]
    for code in ("MMS501", "MMS502", "MMS503", "MMS504"):
        assert run_codes.get(code) == lint_codes.get(code), code
    assert run_codes["MMS502"] == run_codes["MMS503"] == 1
    assert run_codes["MMS501"] == 4 and run_codes["MMS504"] == 1
