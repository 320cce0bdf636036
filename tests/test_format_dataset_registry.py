"""Dataset registries are not data: ms-swift's and LLaMA-Factory's
dataset_info.json, given as input, are recognised and every record quarantined as
`dataset_registry` with what to do instead; --dataset-info explains ms-swift's."""

from __future__ import annotations

import json

from click.testing import CliRunner

from pipeline.cli import main
from tests.conftest import REPO
from tests.reading import read_all

SAMPLES = REPO / "data_samples" / "dataset-registry"


def test_registries_are_quarantined_naming_what_to_convert():
    threads, rejected, stats = read_all(SAMPLES)
    assert not threads and stats.read_balanced and stats.records_read == 4
    assert {r.code for r in rejected} == {"dataset_registry"}
    messages = {r.locator.rsplit("/", 1)[1]: r.message for r in rejected}
    assert "convert hf:example-org/alpaca-gpt4" in messages["dataset_info.json#0"]
    assert "--mapping" in messages["dataset_info.json#1"]
    assert "convert its file data/my_chats.jsonl" in messages["dataset_info.json#2"]
    assert "mms convert --dataset-info" in messages["registry.json"]


def test_detect_names_a_registry():
    path = SAMPLES / "ms-swift" / "dataset_info.json"
    result = CliRunner().invoke(main, ["formats", "--detect", str(path)])
    assert result.output.splitlines()[0].endswith("-> dataset-registry")
    assert "an ms-swift dataset registry entry" in result.output


def test_dataset_info_explains_an_ms_swift_registry(tmp_path):
    path = tmp_path / "dataset_info.json"
    path.write_text(json.dumps([{"ms_dataset_id": "a/b", "hf_dataset_id": "c/d", "tags": []}]))
    result = CliRunner().invoke(
        main, ["convert", "--dataset-info", str(path), "-o", str(tmp_path / "o.jsonl")]
    )
    assert result.exit_code == 2
    assert "ms-swift dataset registry" in result.output
