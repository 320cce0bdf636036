"""The format contract, for every registered format: `sniff` and `to_threads` are total
over any JSON value. Real records (the samples, and the real files in ../shared) get any
JSON value put at any key path, or a key deleted; every format's sniff must still give a
score in [0, 1], and to_threads must give threads or raise RecordRejected, never anything
else (which would be an `internal_error` quarantine, or a crash of detection)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pipeline
from pipeline.formats import FORMATS, ConvertOptions
from pipeline.mms import Thread
from pipeline.quarantine import RecordRejected
from pipeline.sources import Record, TextDocument, expand_inputs, iter_file
from tests.conftest import REPO, SHARED

SAMPLES = REPO / "data_samples"
RECORDS_PER_FORMAT = 12
SHARED_FOLDERS = {
    "openai": ["realdata/openai_finetune_examples"],
    "sharegpt": ["realdata/llamafactory", "realdata/fastchat"],
    "hermes": ["realdata/hermes_function_calling"],
    "oasst": ["realdata/open_assistant"],
    "toolbench": ["realdata/toolbench"],
    "glm": ["formats/glm"],
    "mms": ["formats/mms"],
    "anthropic": ["realdata/anthropic_cookbook"],
    "mt-bench": ["realdata/fastchat"],
    "harmony": ["formats/harmony"],
    "prompts": ["realdata/open_assistant"],
}
"""Real files per format in ../shared, read besides the samples when they are there."""

JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(["", "user", "assistant", "tool", "function", "text", "image", "{}", "[]"])
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def _records(name: str) -> list[Record]:
    """Up to RECORDS_PER_FORMAT parsed records of the format's samples and real files."""
    folders = [SAMPLES / name]
    if (SHARED / "DESIGN.md").is_file():
        folders += [SHARED / sub for sub in SHARED_FOLDERS.get(name, []) if (SHARED / sub).is_dir()]
    found: list[Record] = []
    for folder in folders:
        for path in expand_inputs([str(folder)]).files:
            found += [r for r in iter_file(path) if isinstance(r, Record)][:RECORDS_PER_FORMAT]
    return found[: RECORDS_PER_FORMAT * len(folders)]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every key path in a JSON value, the root included."""
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


def _mutated(value: Any, path: tuple[Any, ...], new: Any, delete: bool) -> Any:
    if not path:
        return new
    root = copy.deepcopy(value)
    parent = root
    for part in path[:-1]:
        parent = parent[part]
    if delete and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = new
    return root


def _check_total(name: str, record: Record) -> None:
    """Every sniff is a score in [0, 1]; every format that accepts the record, and its
    own, converts it or rejects it with RecordRejected."""
    verdicts = {fmt_name: fmt.sniff(record.value) for fmt_name, fmt in FORMATS.items()}
    for verdict in verdicts.values():
        assert 0.0 <= verdict.score <= 1.0
    candidates = {name} | {n for n, verdict in verdicts.items() if verdict.score > 0}
    for candidate in sorted(candidates):
        try:
            threads = FORMATS[candidate].to_threads(record, ConvertOptions())
        except RecordRejected:
            continue
        assert all(isinstance(thread, Thread) for thread in threads)


def _mutation(data: st.DataObject, record: Record) -> Any:
    """The record's value with any JSON value at any key path (or a key deleted); for a
    script read whole, its text with any text spliced in."""
    value = record.value
    if isinstance(value, TextDocument):
        text = value.text
        at = data.draw(st.integers(0, len(text)))
        cut = data.draw(st.integers(0, 40))
        spliced = text[:at] + data.draw(st.text(max_size=40)) + text[at + cut :]
        return TextDocument(value.kind, spliced, value.config, value.config_path)
    path = data.draw(st.sampled_from(list(_paths(value))))
    return _mutated(value, path, data.draw(JSON_VALUES), data.draw(st.booleans()))


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_every_format_is_total_over_any_json_value_at_any_key_path(name):
    records = _records(name)
    assert records, f"no sample records for {name} in data_samples/{name}"

    @settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
    @given(data=st.data())
    def mutate(data: st.DataObject) -> None:
        record = data.draw(st.sampled_from(records))
        value = _mutation(data, record)
        _check_total(name, Record(record.source, record.locator, value))

    mutate()


@pytest.mark.parametrize("name", sorted(FORMATS))
@given(value=JSON_VALUES)
@settings(max_examples=60)
def test_every_format_is_total_over_any_json_value_as_a_record(name, value):
    _check_total(name, Record("generated.jsonl", "generated.jsonl:1", value))


def test_a_mistyped_field_costs_only_its_record(tmp_path: Path):
    """The issue's two crashes: an OpenAI content part whose `type` is a list, a ShareGPT
    turn whose `from` is an object; the valid record after each is still read."""
    good_openai = {
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    }
    bad_openai = {
        "messages": [
            {"role": "user", "content": [{"type": ["text"], "text": "hi"}]},
            {"role": "assistant", "content": "yo"},
        ]
    }
    good_sharegpt = {
        "conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "x"}]
    }
    bad_sharegpt = {
        "conversations": [{"from": {"a": 1}, "value": "hi"}, {"from": "gpt", "value": "x"}]
    }
    for bad, good in ((bad_openai, good_openai), (bad_sharegpt, good_sharegpt)):
        import orjson

        path = tmp_path / "mixed.jsonl"
        path.write_bytes(orjson.dumps(bad) + b"\n" + orjson.dumps(good) + b"\n")
        rejected: list[pipeline.Rejection] = []
        stats = pipeline.Account()
        threads = list(pipeline.read([str(path)], on_reject=rejected.append, stats=stats))
        assert len(threads) == 1 and stats.read_balanced
        assert [r.locator.rsplit(":", 1)[1] for r in rejected] == ["1"]
        assert rejected[0].code in ("missing_field", "invalid_thread", "unknown_role")
