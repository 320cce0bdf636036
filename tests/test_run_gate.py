"""`mms run` means what its config says: the gate judges what is kept (drop_on works), a
failed gate publishes nothing normal-looking, an empty split is not declared, nothing of
an earlier run outlives the next, a run never reads its own output, a tokenizer that is
not one is a config error, and the output does not depend on where the config lives."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from tests.conftest import REPO

SAMPLE_TOKENIZER = REPO / "configs" / "sample_tokenizer"
NO_GATE = "lint: {fail_on: never}"


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
    assert "1 of them on what was dropped (not gated)" in result.output
    manifest = orjson.loads((tmp_path / "out" / "manifest.json").read_bytes())
    assert manifest["gate"] == {"passed": True, "fail_on": "error", "failed_by": []}
    assert manifest["counts"]["threads_dropped"] == {"lint:MMS201": 1}
    summary = orjson.loads((tmp_path / "out" / "reports" / "lint.json").read_bytes())["summary"]
    assert summary["on_dropped_threads"] == {"MMS201": 1}
    assert summary["gate"] == {"fail_on": "error", "failed": False, "failed_by": {}}
    markdown = (tmp_path / "out" / "reports" / "lint.md").read_text()
    assert "| findings on dropped threads (not gated) | 1 |" in markdown
    assert "**Gate** (fail on error): passed." in markdown


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
    assert (out / "reports" / "lint.md").is_file()
    assert not (out / "quarantine").exists()  # nothing was quarantined: no empty file
    assert (
        "**Gate** (fail on error): **failed** by MMS201 error x1"
        in (out / "reports" / "lint.md").read_text()
    )


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


@pytest.mark.parametrize("glob", [False, True], ids=["folder", "glob"])
def test_an_input_inside_the_output_is_a_config_error(tmp_path, glob):
    """Files under the output folder are never read, so an input there could never be:
    refused with the output's line, before anything runs (a dry run too)."""
    folder = tmp_path / "out" / "raw"
    _inputs(folder)
    source = f"{folder}/*.jsonl" if glob else folder
    config = _config(tmp_path, source, folder if glob else tmp_path / "out", NO_GATE)
    for args in ((), ("--dry-run",)):
        result = _run(config, *args)
        assert result.exit_code == 2, result.output
        assert "output: inputs[0]" in result.output and "inside the output folder" in result.output
        assert "(line 5)" in result.output and "Traceback" not in result.output


def test_a_dry_run_with_an_output_over_the_inputs_is_a_usage_error(tmp_path):
    folder = tmp_path / "out" / "raw"
    _inputs(folder)
    config = _config(tmp_path, folder, tmp_path / "elsewhere", NO_GATE)
    result = _run(config, "--dry-run", "-o", str(tmp_path / "out"))
    assert result.exit_code == 2, result.output
    assert "no input files outside the run's output folder" in result.output
    assert "internal error" not in result.output


@pytest.mark.parametrize(
    "text",
    [
        "not JSON at all",
        '{"hello": "world"}',
        '{"model": {"type": "BPE"}}',
        '{"model": {"type": "BPE", "vocab": {"a": 0}}}',
        '{"model": {"type": "Sentencepiece", "vocab": {"a": 0}}}',
        '{"model": {"type": "Unigram", "vocab": {"a": 0}}}',
    ],
    ids=["not-json", "no-model", "no-vocab", "no-merges", "unknown-type", "vocab-not-a-list"],
)
def test_a_tokenizer_that_no_part_could_load_is_a_config_error(tmp_path, text):
    source = _inputs(tmp_path / "in")
    fake = tmp_path / "fake" / "tokenizer.json"
    fake.parent.mkdir()
    fake.write_text(text)
    config = _config(tmp_path, source, tmp_path / "out", f"tokenize: {{tokenizer: {fake}}}")
    result = _run(config)
    assert result.exit_code == 2, result.output
    assert "stages.tokenize.tokenizer: not a usable tokenizer" in result.output
    assert "(line 7)" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def _sample_tokenizer(folder: Path, change) -> Path:
    """The sample tokenizer, its parsed tokenizer.json changed by `change`, in `folder`."""
    data = orjson.loads((SAMPLE_TOKENIZER / "tokenizer.json").read_bytes())
    change(data)
    folder.mkdir(parents=True)
    (folder / "tokenizer.json").write_bytes(orjson.dumps(data))
    return folder


def _merges_unsplittable(data: dict) -> None:
    """Merges written as text, the first with no space to split it at: the structure
    check passes it, `tokenizers` refuses it ("Merges text file invalid")."""
    merges = [" ".join(pair) for pair in data["model"]["merges"]]
    data["model"]["merges"] = [merges[0].replace(" ", ""), *merges[1:]]


def test_a_tokenizer_that_passes_the_check_but_fails_to_load_is_a_config_error(tmp_path):
    source = _inputs(tmp_path / "in")
    broken = _sample_tokenizer(tmp_path / "broken", _merges_unsplittable)
    config = _config(
        tmp_path, source, tmp_path / "out", "tokenize:", f"  tokenizer: {broken}", NO_GATE
    )
    result = _run(config)
    assert result.exit_code == 2, result.output
    assert "stages.tokenize.tokenizer: not a usable tokenizer" in result.output
    assert "Merges text file invalid" in result.output
    assert "(line 8)" in result.output and "run again" not in result.output
    assert not (tmp_path / "out").exists()


def test_bos_with_a_tokenizer_that_names_no_bos_is_a_config_error(tmp_path):
    source = _inputs(tmp_path / "in")
    stages = ("tokenize:", f"  tokenizer: {SAMPLE_TOKENIZER}", "  bos: true", NO_GATE)
    result = _run(_config(tmp_path, source, tmp_path / "out", *stages))
    assert result.exit_code == 2, result.output
    assert "stages.tokenize.bos: bos was asked for, but the tokenizer names no bos_token" in (
        result.output
    )
    assert "(line 9)" in result.output and "run again" not in result.output
    assert not (tmp_path / "out").exists()


def _with_specials(data: dict) -> None:
    size = len(data["model"]["vocab"])
    data["added_tokens"] = [
        {"id": size + n, "content": token, "special": True, "normalized": False}
        | {"single_word": False, "lstrip": False, "rstrip": False}
        for n, token in enumerate(["<s>", "<unk>"])
    ]


def test_special_token_literals_are_those_of_the_runs_tokenizer(tmp_path):
    """MMS404 flags `<s>` and `<unk>` when the run's tokenizer has them as special tokens;
    `mms lint`, which knows no tokenizer, keeps its own list (neither is on it)."""
    thread = _thread("t", "Fine.")
    thread["messages"][0]["content"] = "Is <s> the same as <unk>?"
    source = tmp_path / "in" / "threads.jsonl"
    source.parent.mkdir()
    source.write_bytes(orjson.dumps(thread) + b"\n")
    tokenizer = _sample_tokenizer(tmp_path / "tokenizer", _with_specials)
    stages = ("tokenize:", f"  tokenizer: {tokenizer}", NO_GATE)
    result = _run(_config(tmp_path, source, tmp_path / "out", *stages))
    assert result.exit_code == 0, result.output
    report = orjson.loads((tmp_path / "out" / "reports" / "lint.json").read_bytes())
    (finding,) = [d for d in report["diagnostics"] if d["code"] == "MMS404"]
    assert "`<s>`, `<unk>`" in finding["message"] and finding["message_index"] == 0
    linted = CliRunner().invoke(main, ["lint", str(source)])
    assert "MMS404" not in linted.output, linted.output


def test_a_run_removes_what_an_earlier_run_wrote_and_it_does_not_write(tmp_path):
    """Shards of a split this run does not write, a quarantine it has no entry for, and the
    card and tokenizer of a run that writes none are removed, because the earlier run's
    manifest lists them unchanged: nothing in the output disagrees with its manifest, and
    the summary says what went."""
    source = _inputs(tmp_path / "in")
    bad = source.parent / "bad.jsonl"
    bad.write_text("{not json\n")
    out = tmp_path / "out"
    tokenize = f"tokenize: {{tokenizer: {SAMPLE_TOKENIZER}}}"
    splits = "shard: {splits: {train: 0.5, validation: 0.5}}"
    assert _run(_config(tmp_path, source.parent, out, NO_GATE, tokenize, splits)).exit_code == 0
    assert {p.name.split("-")[0] for p in (out / "data").iterdir()} == {"train", "validation"}
    assert (out / "quarantine" / "rejected.jsonl").is_file()
    bad.unlink()
    again = _run(_config(tmp_path, source, out, NO_GATE, tokenize))
    assert again.exit_code == 0, again.output
    assert [p.name for p in (out / "data").iterdir()] == ["train-00000-of-00001.parquet"]
    assert not (out / "quarantine").exists()  # this run quarantined nothing
    assert "Removed 2 files of the earlier output" in again.output
    files = orjson.loads((out / "manifest.json").read_bytes())["files"]
    assert not [entry for entry in files if entry["path"].startswith("quarantine/")]

    lint_only = _config(tmp_path, source, out, NO_GATE, "shard: false")
    result = _run(lint_only)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "reports"]
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    assert manifest["splits"] == {} and manifest["tokenizer"] is None


def test_a_file_an_earlier_run_did_not_write_is_named_and_kept(tmp_path):
    """A shard-named file the user put in data/, and a report changed since the run wrote
    it: the next run refuses, naming both, and changes nothing; --overwrite takes them
    over and says so."""
    source = _inputs(tmp_path / "in")
    out = tmp_path / "out"
    config = _config(tmp_path, source, out, NO_GATE)
    assert _run(config).exit_code == 0
    (train,) = (out / "data").glob("train-*.parquet")
    shutil.copy(train, out / "data" / "validation-00000-of-00001.parquet")
    (out / "reports" / "lint.md").write_text("my notes on the findings\n")
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    refused = _run(config, "--fresh")
    assert refused.exit_code == 2, refused.output
    assert "data/validation-00000-of-00001.parquet" in refused.output
    assert "reports/lint.md" in refused.output and "--overwrite" in refused.output
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    taken = _run(config, "--overwrite")
    assert taken.exit_code == 0, taken.output
    assert "--overwrite: replaced or removed 2 files" in taken.output
    assert [p.name for p in (out / "data").iterdir()] == [train.name]
    assert (out / "reports" / "lint.md").read_text() != "my notes on the findings\n"


def test_a_lint_only_gate_failure_does_not_speak_of_shards(tmp_path):
    source = _inputs(tmp_path / "in")
    config = _config(tmp_path, source, tmp_path / "out", "lint: {fail_on: error}", "shard: false")
    result = _run(config)
    assert result.exit_code == 1
    assert "lint gate failed (fail_on: error): manifest.json says gate.passed: false" in (
        result.output
    )
    assert "no shards" not in result.output and "MMS201" in result.output


def test_a_local_hf_dataset_is_recorded_as_written_wherever_the_checkout_lives(
    tmp_path, offline_hf
):
    """`hf:./dir` is recorded relative to the config's folder, like any relative input (a
    moved checkout writes the same bytes), and the manifest lists it with no file hash."""
    outputs = []
    for place in ("first", "second/deeper"):
        root = tmp_path / place
        _inputs(root / "dataset" / "data")
        config = _config(root, "hf:./dataset", "out", NO_GATE)
        result = _run(config)
        assert result.exit_code == 0, result.output
        out = root / "out"
        outputs.append({str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*.*")})
    assert outputs[0] == outputs[1]
    manifest = orjson.loads(outputs[0]["manifest.json"])
    assert manifest["inputs"] == [
        {"path": "hf:./dataset", "format": "mms", "bytes": None, "sha256": None}
    ]
