"""Inputs on an object store (a local S3 server, tests/object_store.py): a file, a folder
prefix and a glob read through `s3://` URLs give what the same files give from local
paths, byte ranges of a big JSON Lines file included; `mms run` of such a config writes
the output the local-path run writes (rows and their order; bytes, save what names the
input's location: thread ids and the lineage `meta.source` / `meta.locator`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.sources import InputError, Record, expand_inputs, iter_file
from pipeline.sources.parts import iter_part_records, plan_parts
from tests.conftest import REPO
from tests.object_store import Bucket

SAMPLES = REPO / "data_samples"
SAMPLE_TOKENIZER = REPO / "configs" / "sample_tokenizer"


def _items(path: str, located: tuple[str, str] = ("", "")) -> list[tuple[str, str]]:
    """(kind, value or code) of every record and rejection of a file, in order, the
    location `located[0]` named as `located[1]` (a companion file's path)."""
    return [
        ("record", repr(item.value).replace(*located))
        if isinstance(item, Record)
        else ("rejected", item.code)
        for item in iter_file(path)
    ]


def test_a_folder_a_glob_and_a_file_expand_as_local_paths_do(s3: Bucket, tmp_path: Path):
    tree = tmp_path / "in"
    shutil.copytree(SAMPLES / "openai", tree / "openai")
    shutil.copytree(SAMPLES / "sharegpt", tree / "nested" / "sharegpt")
    shutil.copytree(SAMPLES / "sk-prompt", tree / "nested" / "sk")
    shutil.copy(SAMPLES / "openai" / "preference.jsonl", tree / "openai" / ".hidden.jsonl")
    (tree / "openai" / "NOTES.md").write_text("not data\n")
    stored = s3.put(tree, "in")

    def expanded(root: str, *items: str) -> tuple[list[str], list[str], dict[str, str]]:
        found = expand_inputs([root + item for item in items])
        return (
            [p.removeprefix(root) for p in found.files],
            [p.removeprefix(root) for p in found.skipped],
            {k.removeprefix(root): v.removeprefix(root) for k, v in found.companions.items()},
        )

    for items in (["/openai"], ["/**/*.json*"], ["/nested"], ["/openai/tool_calls.jsonl"], [""]):
        assert expanded(stored, *items) == expanded(str(tree), *items), items
    assert expanded(stored, "/nested")[2]  # the skprompt's config.json goes with it


def test_missing_and_unsupported_urls_are_input_errors(s3: Bucket):
    s3.put(SAMPLES / "openai" / "preference.jsonl", "in/notes.txt")
    with pytest.raises(InputError, match="no such file or folder"):
        expand_inputs([f"{s3.url}/nothing-here"])
    with pytest.raises(InputError, match="no files match"):
        expand_inputs([f"{s3.url}/in/*.parquet"])
    with pytest.raises(InputError, match="unsupported file type"):
        expand_inputs([f"{s3.url}/in/notes.txt"])


@pytest.mark.parametrize(
    "sample",
    [
        "openai/tool_calls.jsonl",
        "sharegpt/fastchat_vicuna.json",
        "sk-prompt",
        "hermes",
    ],
)
def test_every_reader_reads_a_stored_file_as_a_local_one(s3: Bucket, sample: str):
    local = SAMPLES / sample
    url = s3.put(local, f"in/{sample}")
    local_files = expand_inputs([str(local)]).files
    stored_files = expand_inputs([url]).files
    assert len(local_files) == len(stored_files)
    for local_file, stored_file in zip(local_files, stored_files, strict=True):
        assert _items(stored_file, (url, str(local))) == _items(local_file)


def test_compressed_and_parquet_inputs_read_from_the_store(s3: Bucket, tmp_path: Path):
    import gzip

    import pyarrow as pa

    lines = (SAMPLES / "openai" / "chat_completions.jsonl").read_bytes()
    (tmp_path / "a.jsonl.gz").write_bytes(gzip.compress(lines, mtime=0))
    rows = [orjson.loads(line) for line in lines.splitlines() if line.strip()]
    pq.write_table(
        pa.table({"text": [orjson.dumps(r).decode() for r in rows]}), tmp_path / "t.parquet"
    )
    for name in ("a.jsonl.gz", "t.parquet"):
        url = s3.put(tmp_path / name, f"in/{name}")
        assert _items(url) == _items(str(tmp_path / name))


def test_byte_ranges_of_a_stored_file_give_the_whole_file_records(s3: Bucket, tmp_path: Path):
    source = tmp_path / "big.jsonl"
    lines = (SAMPLES / "openai" / "chat_completions.jsonl").read_bytes()
    source.write_bytes(lines * 40 + b"{broken\n" + lines * 3)
    url = s3.put(source, "in/big.jsonl")
    local_parts = plan_parts([(str(source), "openai")], split_bytes=4096)
    stored_parts = plan_parts([(url, "openai")], split_bytes=4096)
    assert len(stored_parts) > 5
    assert [(p.start, p.end, p.first_line) for p in stored_parts] == [
        (p.start, p.end, p.first_line) for p in local_parts
    ]

    def read(parts: list) -> list[tuple[str, object]]:
        return [
            (item.locator.rsplit(":", 1)[1], getattr(item, "value", None))
            for part in parts
            for item in iter_part_records(part)
        ]

    assert read(stored_parts) == read(local_parts)


def _config(folder: Path, name: str, inputs: list[str], output: Path) -> Path:
    lines = [f"name: {name}", "inputs:"]
    lines += [f"  - path: {item}" for item in inputs]
    lines += [
        "stages:",
        "  lint: {fail_on: never}",
        f"  tokenize: {{tokenizer: {SAMPLE_TOKENIZER}, max_tokens: 1024, overlong: truncate}}",
        "  shard: {splits: {train: 0.8, test: 0.2}}",
        f"output: {output}",
    ]
    config = folder / f"{name}.yaml"
    config.write_text("\n".join(lines) + "\n")
    return config


def test_a_run_of_stored_inputs_writes_the_local_run_output(s3: Bucket, tmp_path: Path):
    openai = s3.put(SAMPLES / "openai", "in/openai")
    sharegpt = s3.put(SAMPLES / "sharegpt", "in/sharegpt")
    mms = s3.put(SAMPLES / "mms", "in/mms")
    local_inputs = [
        str(SAMPLES / "openai" / "chat_completions.jsonl"),
        str(SAMPLES / "mms"),
        str(SAMPLES / "sharegpt") + "/*.json",
    ]
    stored_inputs = [f"{openai}/chat_completions.jsonl", mms, f"{sharegpt}/*.json"]
    outputs = {}
    for name, inputs in (("local", local_inputs), ("stored", stored_inputs)):
        out = tmp_path / f"out-{name}"
        config = _config(tmp_path, "objstore", inputs, out)
        result = CliRunner().invoke(main, ["run", str(config), "--workers", "2"])
        assert result.exit_code == 0, result.output
        outputs[name] = out
    # ids name a file by its path under the input the config names, wherever it lives:
    # the same rows, ids, splits and order, so the same shard bytes
    local_shards = {p.name: p.read_bytes() for p in sorted((outputs["local"] / "data").iterdir())}
    stored = {p.name: p.read_bytes() for p in sorted((outputs["stored"] / "data").iterdir())}
    assert local_shards and stored == local_shards
    manifests = {
        name: orjson.loads((out / "manifest.json").read_bytes()) for name, out in outputs.items()
    }
    counts = {name: dict(m["counts"]) for name, m in manifests.items()}
    for each in counts.values():
        each["inputs"] = [{**i, "path": None} for i in each["inputs"]]
    assert counts["stored"] == counts["local"]
    assert counts["local"]["balanced"] is True
    assert manifests["stored"]["splits"] == manifests["local"]["splits"]
    assert [i["sha256"] for i in manifests["stored"]["inputs"]] == [
        i["sha256"] for i in manifests["local"]["inputs"]
    ]
    assert manifests["stored"]["inputs"][0]["path"] == f"{openai}/chat_completions.jsonl"


def test_convert_and_lint_read_stored_inputs(s3: Bucket, tmp_path: Path):
    url = s3.put(SAMPLES / "openai" / "chat_completions.jsonl", "in/chat.jsonl")
    local = SAMPLES / "openai" / "chat_completions.jsonl"
    converted = {}
    for name, source in (("stored", url), ("local", str(local))):
        out = tmp_path / f"{name}.jsonl"
        result = CliRunner().invoke(main, ["convert", source, "-o", str(out), "--workers", "2"])
        assert result.exit_code == 0, result.output
        threads = [orjson.loads(line) for line in out.read_bytes().splitlines()]
        converted[name] = [thread["messages"] for thread in threads]
    assert converted["stored"] == converted["local"]
    reports = {}
    for name, source in (("stored", url), ("local", str(local))):
        out = tmp_path / f"{name}-lint.json"
        result = CliRunner().invoke(
            main, ["lint", source, "--output-format", "json", "-o", str(out)]
        )
        assert result.exit_code in (0, 1), result.output
        reports[name] = sorted(d["code"] for d in orjson.loads(out.read_bytes())["diagnostics"])
    assert reports["stored"] == reports["local"] and reports["local"]


def test_hf_urls_are_stored_files_and_hf_names_are_datasets(tmp_path: Path):
    from pipeline.jobs.run.config import load_run_config
    from pipeline.output.hub import is_hub_output
    from pipeline.sources import is_hf_input

    assert is_hf_input("hf:org/name") and is_hub_output("hf:org/name")
    assert not is_hf_input("hf://datasets/org/name/chat.jsonl")
    assert not is_hub_output("hf://datasets/org/name")
    config = tmp_path / "hf.yaml"
    config.write_text(
        "name: hf\ninputs:\n  - path: hf://datasets/org/name/chat.jsonl\n"
        "  - path: s3://bucket/raw/\noutput: s3://bucket/out/\n"
    )
    loaded = load_run_config(config)
    assert [spec.path for spec in loaded.inputs] == [
        "hf://datasets/org/name/chat.jsonl",
        "s3://bucket/raw/",
    ]
    assert not loaded.inputs[0].is_hf
    assert loaded.output == "s3://bucket/out"
    assert loaded.resolved()["output"] == "s3://bucket/out"


def test_a_stored_input_inside_the_stored_output_is_a_config_error(tmp_path: Path):
    from pipeline.jobs.run.config import RunConfigError, load_run_config

    config = tmp_path / "inside.yaml"
    config.write_text("name: x\ninputs:\n  - path: s3://b/out/raw/\noutput: s3://b/out\n")
    with pytest.raises(RunConfigError, match="inside it"):
        load_run_config(config)
