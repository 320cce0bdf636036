"""Golden files: every `data_samples/<format>/` converts, with `--from auto`, to exactly
`data_samples/expected/<format>/threads.jsonl` and quarantines exactly `rejected.jsonl`
(a sample that no reader can parse, e.g. broken JSON, has no format: `-`).

A format whose samples show an option (prompt-json's select expansion) names it in
`data_samples/expected/<format>/options.json` (ConvertOptions fields). A folder holding a
LLaMA-Factory `dataset_info.json` (the `mapped` format, which is never detected) is read
as `mms convert --dataset-info` reads it: each dataset it names, with its mapping.

After an intended change of output, regenerate with
`MMS_UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py` and review the diff.
"""

from __future__ import annotations

import json
import os

import pytest

from pipeline import convert
from pipeline.formats import ConvertOptions
from pipeline.formats.detect import UNKNOWN
from pipeline.jobs.mappings import read_dataset_info
from pipeline.jobs.read import ReadSpec
from tests.conftest import REPO

SAMPLES = REPO / "data_samples"
FORMAT_DIRS = sorted(p.name for p in SAMPLES.iterdir() if p.is_dir() and p.name != "expected")
UPDATE = os.environ.get("MMS_UPDATE_GOLDEN") == "1"


@pytest.mark.parametrize("name", FORMAT_DIRS)
def test_sample_converts_to_the_expected_output(name, tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)  # lineage in meta holds the relative sample paths
    out, rejected = tmp_path / "threads.jsonl", tmp_path / "rejected.jsonl"
    expected = SAMPLES / "expected" / name
    chosen = expected / "options.json"
    options = ConvertOptions(**json.loads(chosen.read_text())) if chosen.is_file() else None
    spec = ReadSpec(options=options) if options else None
    inputs: str | tuple[str, ...] = f"data_samples/{name}"
    registry_file = SAMPLES / name / "dataset_info.json"
    if registry_file.is_file():
        registry = read_dataset_info(f"data_samples/{name}/dataset_info.json")
        inputs = registry.inputs()
        spec = ReadSpec("mapped", ConvertOptions(mapping=registry.mappings()))
    result = convert(inputs, out, spec, quarantine=rejected)
    assert result.account.balanced
    detected = {label for label in result.account.formats.values() if label != UNKNOWN}
    assert detected == {name}, "auto-detection picked another format"
    quarantined = rejected.read_bytes() if rejected.exists() else b""  # none: no file
    assert rejected.exists() == bool(result.account.quarantined_total)
    if UPDATE:
        expected.mkdir(parents=True, exist_ok=True)
        (expected / "threads.jsonl").write_bytes(out.read_bytes())
        (expected / "rejected.jsonl").write_bytes(quarantined)
    assert out.read_bytes() == (expected / "threads.jsonl").read_bytes()
    assert quarantined == (expected / "rejected.jsonl").read_bytes()
