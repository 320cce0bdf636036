"""Every stage's config slice is one declaration (a `ConfigSlice` beside its settings in
pipeline/stages/, registered by its line in pipeline/jobs/run/stages.py): the run config
reads it, and the resolved config (the manifest, and the digest a resume compares) records
it. This walks every registered slice and checks the declaration against the slice's part
of schemas/pipeline-config.schema.json: the same keys, the schema's defaults, and a config
setting every key to a value other than its default read and recorded unchanged — so a
stage left out of the schema, the parser or the resolved form fails here, not silently."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipeline.jobs.run.config import RESOLVED_ORDER, load_run_config
from pipeline.jobs.run.stages import CONFIG_SLICES, RUN_STAGES, Stages
from pipeline.schemas import schema_path
from tests.conftest import REPO

SCHEMA = json.loads(schema_path("pipeline-config").read_text(encoding="utf-8"))
TOKENIZER = str(REPO / "configs" / "sample_tokenizer")

SAMPLES: dict[str, Any] = {
    "lint": {
        "select": ["MMS1", "MMS2", "MMS4"],
        "ignore": ["MMS104"],
        "fail_on": "warning",
        "drop_on": ["MMS201"],
        "min_phrasings": 4,
        "dataset_min_threads": 11,
        "special_tokens": ["<x>"],
        "max_examples": 21,
        "per_source_ignores": {"legacy/*.jsonl": ["MMS105"]},
    },
    "tokenize": {
        "tokenizer": TOKENIZER,
        "max_tokens": 100,
        "overlong": "drop",
        "bos": False,
        "encoder": "tokenizers",
        "train_on": "last_assistant",
        "objective": "sft",
    },
    "shard": {
        "rows_per_shard": 7,
        "splits": {"train": 0.75, "test": 0.25},
        "seed": 3,
        "compression": "snappy",
        "bytes_per_shard": 4096,
        "shuffle": False,
    },
    "pack": {"seq_len": 128, "strategy": "bfd", "window": 99},
    "decontaminate": {"against": ["evals.jsonl"], "ngram": 9, "action": "tag", "answers": False},
    "plugins": [{"use": "json:dumps", "action": "tag", "options": {"indent": 1}, "timeout": 5}],
    "pii": {"region": "GB", "regions": ["GB", "FR"]},
    "language": {"languages": ["de", "fr"]},
}
"""Values for the keys the schema alone cannot give a valid value other than the default
(rule selectors, a tokenizer, fractions summing to 1, a loadable plugin, a pattern); every other key
of every slice gets one from its schema (`_sample`)."""


def _fragment(key: str) -> dict[str, Any]:
    """The schema of `stages.<key>`: the object form (or, for a list, its item's)."""
    node = SCHEMA["properties"]["stages"]["properties"][key]
    if "$ref" in node:
        node = SCHEMA["$defs"][node["$ref"].rsplit("/", 1)[-1]]
    for branch in node.get("oneOf", ()):
        if branch.get("type") == "object":
            node = branch
    return node


def _object(key: str) -> dict[str, Any]:
    node = _fragment(key)
    return node["items"] if node.get("type") == "array" else node


def _other_than_default(node: dict[str, Any]) -> Any:
    """A value the schema `node` allows that is not its default."""
    for branch in node.get("oneOf", node.get("anyOf", ())):
        if branch.get("type") == "object":
            return {name: _other_than_default(sub) for name, sub in branch["properties"].items()}
    default = node.get("default")
    if "enum" in node:
        return next((value for value in node["enum"] if value != default), default)
    kinds = node.get("type", "string")
    kind = next(k for k in ([kinds] if isinstance(kinds, str) else kinds) if k != "null")
    if kind == "boolean":
        return not default
    if kind == "integer":
        return max(default or 0, node.get("minimum", 0)) + 1
    if kind == "number":
        low = node.get("minimum", node.get("exclusiveMinimum", 0))
        high = node.get("maximum", low + 1)
        value = (low + high) / 2
        return value if value != default else (value + high) / 2
    if kind == "array":
        item = node.get("items", {"type": "string"})
        return (
            [next(v for v in item["enum"] if v not in (default or ()))] if "enum" in item else ["x"]
        )
    if kind == "object":
        return {"x": 1}
    return "x"


def _sample(key: str) -> Any:
    """The slice with every key set to a value other than its default (canonical: as the
    resolved config records it)."""
    given = SAMPLES.get(key, {})
    if not isinstance(given, dict):
        return given
    node = _object(key)
    made = {name: _other_than_default(sub) for name, sub in node["properties"].items()}
    return {**made, **given}


RECORDED_AS = {
    ("lint", "per_source_ignores"): lambda value: [[glob, codes] for glob, codes in value.items()],
    ("dedup", "near"): lambda value: None if value is False else value,
}
"""Where the resolved form records a key otherwise than a config writes it (as manifests
always have: it stays so, for their bytes and digests)."""


LEFT_OUT_WHEN_DEFAULT = {"media"}
"""Slices added after outputs were pinned whose resolved form leaves out the defaults, so
that the manifests (and digests) of runs that never met them keep their bytes."""


def _as_recorded(key: str, written: Any) -> Any:
    if not isinstance(written, dict):
        return written
    return {
        name: RECORDED_AS.get((key, name), lambda value: value)(value)
        for name, value in written.items()
    }


def _fields(settings: Any) -> set[str]:
    """The names of the settings' fields, nested settings' fields included."""
    if isinstance(settings, tuple):
        return set().union(*map(_fields, settings)) if settings else set()
    if not dataclasses.is_dataclass(settings):
        return set()
    names = set()
    for field in dataclasses.fields(settings):
        names.add(field.name)
        names |= _fields(getattr(settings, field.name))
    return names


def _keys(plain: Any) -> set[str]:
    """Every key of resolved data, nested keys included."""
    if isinstance(plain, list):
        return set().union(*map(_keys, plain)) if plain else set()
    if not isinstance(plain, dict):
        return set()
    return set(plain) | set().union(*map(_keys, plain.values()))


def _load(tmp_path: Path, stages: dict[str, Any]) -> Any:
    (tmp_path / "in").mkdir(exist_ok=True)
    config = {"name": "slices", "inputs": [{"path": "in"}], "output": "out", "stages": stages}
    file = tmp_path / "job.yaml"
    file.write_text(yaml.safe_dump(config), encoding="utf-8")
    return load_run_config(file)


def test_the_registry_and_the_schema_name_the_same_slices() -> None:
    keys = [config.key for config in CONFIG_SLICES]
    assert len(keys) == len(set(keys)), "a config key registered twice"
    assert set(keys) == set(SCHEMA["properties"]["stages"]["properties"])
    assert set(RESOLVED_ORDER) <= set(keys)
    reserved = {name for name in dir(Stages) if not name.startswith("__")}
    assert not set(keys) & reserved, "a config key hides a method of Stages"


@pytest.mark.parametrize("config", CONFIG_SLICES, ids=lambda config: config.key)
def test_a_slice_setting_every_key_reads_and_resolves_as_written(
    config: Any, tmp_path: Path
) -> None:
    """Its schema's keys are the keys its resolved form records, which are its settings'
    fields, and a value other than the default for each comes back unchanged."""
    sample = _sample(config.key)
    schema_keys = set(_object(config.key)["properties"])
    stages = {config.key: sample}
    if config.key == "pack":  # pack packs tokenized rows (the slices agree)
        stages["tokenize"] = SAMPLES["tokenize"]
    if config.key == "filters":  # the token limits need a tokenize stage
        stages["tokenize"] = SAMPLES["tokenize"]
    if config.key == "decontaminate":
        (tmp_path / "evals.jsonl").write_text("{}\n", encoding="utf-8")
    for key in sample if isinstance(sample, dict) else sample[0]:
        assert key in schema_keys, f"stages.{config.key}.{key} is not in the schema"
    assert set(sample if isinstance(sample, dict) else sample[0]) == schema_keys

    loaded = _load(tmp_path, stages)
    settings = getattr(loaded.stages, config.key)
    assert settings is not None
    resolved = loaded.resolved()["stages"][config.key]
    assert resolved == _as_recorded(config.key, sample), (
        f"stages.{config.key} does not read and resolve as written"
    )
    missing = _fields(settings) - _keys(resolved) - {"rules"}  # quality: its thresholds, flat
    assert not missing, f"settings of stages.{config.key} not in its resolved form: {missing}"


@pytest.mark.parametrize("config", CONFIG_SLICES, ids=lambda config: config.key)
def test_an_omitted_slice_resolves_to_the_schemas_defaults(config: Any, tmp_path: Path) -> None:
    resolved = _load(tmp_path, {}).resolved()["stages"]
    if not config.on_by_default:
        assert resolved.get(config.key, None) in (None, False)
        return
    node = _object(config.key)
    defaults = {
        name: sub["default"] for name, sub in node["properties"].items() if "default" in sub
    }
    assert set(defaults) == set(node["properties"]), f"stages.{config.key}: a key has no default"
    if config.key in LEFT_OUT_WHEN_DEFAULT:
        assert config.key not in resolved
        loaded = getattr(_load(tmp_path, {}).stages, config.key)
        assert dataclasses.asdict(loaded) == defaults
        return
    assert resolved[config.key] == _as_recorded(config.key, defaults)


def test_every_registered_slice_is_read_into_the_run_config(tmp_path: Path) -> None:
    stages = _load(tmp_path, {}).stages
    assert [key for key, _ in stages.items()] == [config.key for config in CONFIG_SLICES]
    assert all(step.slice is not None or step.build is not None for step in RUN_STAGES)
