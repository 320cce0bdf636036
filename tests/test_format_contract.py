"""The format contract, for every registered format: `sniff` and `to_threads` are total
over any JSON value. Real records (the samples, and the real files in ../shared) get any
JSON value put at any key path, or a key deleted; every format's sniff must still give a
score in [0, 1], and to_threads must give threads or raise RecordRejected, never anything
else (which would be an `internal_error` quarantine, or a crash of detection)."""

from __future__ import annotations

import copy
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pipeline
from pipeline.formats import FORMATS, ConvertOptions
from pipeline.formats.builder import ThreadBuilder
from pipeline.formats.field_mapping import mapping_from_data
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
    """Two malformed records that once crashed an adapter: an OpenAI content part whose `type` is a list, a ShareGPT
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


# ------------------------------------------------ source keys never set message fields

MESSAGE_METHODS = (
    "platform",
    "developer",
    "user",
    "assistant",
    "context",
    "reasoning",
    "tool_call",
    "tool_result",
)
STRAY_KEYS = sorted(
    {
        parameter
        for method in MESSAGE_METHODS
        for parameter in inspect.signature(getattr(ThreadBuilder, method)).parameters
    }
    - {"self", "content"}
    | {"end_turn", "tool_call_id", "loss_weight"}
)
"""Keys named like a ThreadBuilder parameter or an MMS message field (a message's `format`,
`weight` or `name: null` key must not set the message's format or weight, nor crash the
adapter), besides random keys."""
READS = {
    "openai": {"weight", "loss_weight", "name", "tool_call_id"},
    "sharegpt": {"weight"},  # an assistant turn's training weight (axolotl)
    # a message key the mapping does not name is carried over into the ShareGPT turn, and
    # `weight` is read there as the turn's weight even when the mapping names no weight
    "mapped": {"weight"},
    "structural": {"weight"},  # read as the mapped format reads it
    "anthropic": {"name"},  # a tool_use block's tool
    "toolbench": {"name"},  # a function message's tool
    "prompt-json": {"name"},  # the prompt's name
    "glm": {"meta"},  # an entry's meta, validated
    "mms": {"format", "weight", "end_turn", "name", "meta"},  # MMS's own message fields
}
"""The stray keys a format reads itself (they may change the thread: not injected)."""
STRICT = {"mms": "an MMS message is validated as the spec says: an unknown key is invalid"}
"""Formats that may reject a record with an unknown key (never with internal_error)."""
NEVER_CONVERTS = {"dataset-registry": "registries are not data: every record is quarantined"}
"""Formats that recognise records only to quarantine them (no thread to check)."""
TOOL_LISTS = ("tools", "functions", "function")
"""Keys of tool definition lists: their entries are no messages."""
STRAY_VALUES = (
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.sampled_from(["", "evil:json", "markdown", "json", "user", "c1"])
    | st.text(max_size=6)
    | st.dictionaries(
        st.sampled_from(["a", "name", "format"]), st.none() | st.integers(), max_size=2
    )
)


def _sample_records(name: str) -> list[Record]:
    """The records of the format's golden samples (data_samples/<name>)."""
    found: list[Record] = []
    for path in expand_inputs([str(SAMPLES / name)]).files:
        found += [r for r in iter_file(path) if isinstance(r, Record)]
    return found


def _options(name: str, record: Record) -> ConvertOptions:
    """The options a sample converts with: a `mapped` sample with its dataset_info entry."""
    if name != "mapped":
        return ConvertOptions()
    registry = orjson.loads((SAMPLES / "mapped" / "dataset_info.json").read_bytes())
    entry = registry.get(Path(record.source).stem)
    return ConvertOptions(mapping=mapping_from_data(entry) if entry else None)


def _message_objects(value: Any) -> list[dict]:
    """Every message-like object of a record: the objects in its lists (of a one-key
    `{role: {...}}` entry, as GLM's, the inner object), tool definition lists left out;
    the record itself when it has none (its columns are the messages, as Alpaca's)."""
    found = list(_listed_objects(value))
    return found or ([value] if isinstance(value, dict) else [])


def _listed_objects(value: Any, key: Any = None, in_list: bool = False) -> Iterator[dict]:
    if isinstance(value, dict):
        if in_list and len(value) != 1:
            yield value
        elif in_list and isinstance(inner := next(iter(value.values())), dict):
            yield inner
        for child_key, item in value.items():
            yield from _listed_objects(item, child_key)
    elif isinstance(value, list) and key not in TOOL_LISTS:
        for item in value:
            yield from _listed_objects(item, key, in_list=True)


def _converted(name: str, record: Record) -> list[tuple] | str:
    """The fields a source key must never set, per thread message; or the rejection code.
    Anything but RecordRejected propagates (it would be an internal_error quarantine)."""
    try:
        threads = FORMATS[name].to_threads(record, _options(name, record))
    except RecordRejected as err:
        return err.code
    return [
        [(m.role, m.format, m.end_turn, m.weight) for m in thread.messages] for thread in threads
    ]


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_stray_message_keys_never_set_message_fields(name):
    """Keys the format does not read, put on every message-like object of its
    samples (named like builder parameters, or random; any JSON value), never crash the
    adapter nor change a message's role, format, end_turn or weight: they are data for
    `meta`, never builder arguments."""
    keys = [key for key in STRAY_KEYS if key not in READS.get(name, set())]
    records = [r for r in _sample_records(name) if _message_objects(r.value)]
    if name in NEVER_CONVERTS:
        pytest.skip(NEVER_CONVERTS[name])
    if not records:
        pytest.skip(f"the {name} samples hold no message objects (text scripts or columns)")
    samples = [(record, _converted(name, record)) for record in records]
    assert any(not isinstance(out, str) for _, out in samples), f"no {name} sample converts"
    random_keys = st.text(st.characters(categories=("Ll", "Nd")), max_size=6).map("x_".__add__)

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(data=st.data())
    def inject(data: st.DataObject) -> None:
        record, expected = data.draw(st.sampled_from(samples))
        value = copy.deepcopy(record.value)
        for target in _message_objects(value):
            added = data.draw(
                st.dictionaries(st.sampled_from(keys) | random_keys, STRAY_VALUES, max_size=4)
            )
            target.update({k: v for k, v in added.items() if k not in target})
        out = _converted(name, Record(record.source, record.locator, value))
        if isinstance(expected, str):
            assert isinstance(out, str), "a rejected sample converts with stray keys"
        elif name in STRICT and isinstance(out, str):
            assert out == "invalid_thread", STRICT[name]
        else:
            assert out == expected

    inject()
