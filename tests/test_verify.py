"""`mms verify` checks an output without trusting it: it passes on a fresh output and
fails, naming the row or the file, on a flipped label, a tampered card or an unlisted
file; `mms run` runs its cheap part and says so."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from tests.conftest import REPO


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> Path:
    """One mms run of the quickstart config, shared by the tests (each copies it)."""
    out = tmp_path_factory.mktemp("fresh") / "out"
    result = CliRunner().invoke(
        main, ["run", str(REPO / "configs" / "quickstart.yaml"), "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "Verified: " in result.output and "against manifest.json" in result.output
    return out


def _copy(fresh: Path, tmp_path: Path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(fresh, out)
    return out


def _verify(out: Path, *options: str):
    return CliRunner().invoke(main, ["verify", str(out), *options])


def test_a_fresh_output_verifies(fresh, tmp_path):
    result = _verify(_copy(fresh, tmp_path))
    assert result.exit_code == 0, result.output
    assert "rows rendered again" in result.output and "verified" in result.output


def test_one_flipped_label_fails_naming_the_row(fresh, tmp_path):
    out = _copy(fresh, tmp_path)
    shard = sorted((out / "data").glob("train-*.parquet"))[0]
    table = pq.read_table(shard)
    labels = table["labels"].to_pylist()
    row = next(i for i, values in enumerate(labels) if any(v != -100 for v in values))
    position = next(i for i, v in enumerate(labels[row]) if v != -100)
    labels[row][position] = -100
    table = table.set_column(
        table.schema.get_field_index("labels"), "labels", pa.array(labels, pa.list_(pa.int32()))
    )
    pq.write_table(table, shard, compression="zstd")
    result = _verify(out)
    assert result.exit_code == 1
    row_id = table["id"][row].as_py()
    assert f"train row {row_id}: labels differ" in result.output
    assert "sha256 differs" in result.output


def test_a_tampered_card_fails(fresh, tmp_path):
    out = _copy(fresh, tmp_path)
    card = out / "README.md"
    text = card.read_text()
    rows = orjson.loads((out / "manifest.json").read_bytes())["splits"]["train"]["rows"]
    card.write_text(text.replace(f"num_examples: {rows}", f"num_examples: {rows + 1}", 1))
    result = _verify(out, "--no-render", "--no-template")
    assert result.exit_code == 1
    assert "README.md: split train: num_examples" in result.output


def test_an_unlisted_or_missing_shard_fails(fresh, tmp_path):
    out = _copy(fresh, tmp_path)
    shard = sorted((out / "data").glob("*.parquet"))[0]
    shutil.copy(shard, out / "data" / "extra-00000-of-00001.parquet")
    shard.unlink()
    result = _verify(out, "--no-render", "--no-template")
    assert result.exit_code == 1
    assert "not listed in the manifest" in result.output
    assert "listed in the manifest but missing" in result.output


def test_a_changed_report_quarantine_or_tokenizer_file_fails(fresh, tmp_path):
    out = _copy(fresh, tmp_path)
    listed = [
        entry["path"] for entry in orjson.loads((out / "manifest.json").read_bytes())["files"]
    ]
    assert {
        "reports/lint.md",
        "quarantine/rejected.jsonl",
        "tokenizer/tokenizer_config.json",
    } <= set(listed)
    for path in ("reports/lint.md", "quarantine/rejected.jsonl", "tokenizer/tokenizer_config.json"):
        with open(out / path, "ab") as tampered:
            tampered.write(b"\n")
    result = _verify(out, "--no-render", "--no-template")
    assert result.exit_code == 1
    for path in ("reports/lint.md", "quarantine/rejected.jsonl", "tokenizer/tokenizer_config.json"):
        assert f"{path}: sha256 differs from the manifest's" in result.output


def test_a_folder_that_is_no_output_is_a_usage_error(tmp_path):
    result = _verify(tmp_path)
    assert result.exit_code == 2 and "no manifest.json" in result.output
