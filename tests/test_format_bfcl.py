"""The BFCL format: benchmark entries as prompt-only threads whose functions are declared
and enabled like every tool source, BFCL's types mapped to JSON Schema (values never
touched), multi-turn entries with their later turns in meta.follow_ups, the older string
and flat-message shapes, rejections with stable codes, and detection that takes no other
format's records."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from pipeline.capabilities import enabled_formats
from pipeline.cli import main
from pipeline.formats import FORMATS, ConvertOptions
from pipeline.formats.bfcl import BFCL_TYPES, JSON_SCHEMA_TYPES, SUBSCHEMAS
from pipeline.jobs.read import detect_file
from pipeline.sources import Record, expand_inputs, iter_file
from tests.conftest import REPO, SHARED
from tests.reading import read_all, read_records

SAMPLES = REPO / "data_samples" / "bfcl"
FORMAT = FORMATS["bfcl"]
TYPES = st.sampled_from(sorted({*BFCL_TYPES, *JSON_SCHEMA_TYPES}))


def by_id(threads):
    return {thread.id: thread for thread in threads}


def entry(question: Any, **fields: Any) -> dict[str, Any]:
    return {"id": "simple_1", "question": question, **fields}


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def test_samples_become_prompt_only_threads_that_declare_their_functions():
    threads, rejected, stats = read_all(SAMPLES)
    assert stats.read_balanced and stats.records_read == 10 and len(threads) == 8
    assert sorted(r.code for r in rejected) == ["invalid_tools", "unknown_role"]
    for thread in threads:
        assert thread.meta["prompt_only"] is True and thread.meta["source_format"] == "bfcl"
        assert thread.messages[-1].role == "user"
        declared = {f.name for f in thread.settings.formats} if thread.settings else set()
        enabled = set().union(
            *(enabled_formats(m.content) for m in thread.messages if m.role == "developer")
        )
        assert declared <= enabled


def test_bfcl_types_become_json_schema_with_a_note():
    thread = by_id(read_all(SAMPLES)[0])["simple_java_3"]
    schema = thread.meta["tool_schemas"]["ConfigCache.put"]
    assert schema["type"] == "object"
    kinds = {name: prop.get("type") for name, prop in schema["properties"].items()}
    assert kinds == {"key": "string", "value": "object", "ttlSeconds": "integer", "listener": None}
    (note,) = [n for n in thread.meta["notes"] if n.startswith("mapped BFCL")]
    assert "HashMap -> object (1)" in note and "any -> any value (1)" in note
    assert thread.meta["category"] == "simple_java"
    assert [f.name for f in thread.settings.formats] == ["ConfigCache.put:json"]


def test_system_and_earlier_exchanges_come_before_the_request():
    threads = by_id(read_all(SAMPLES)[0])
    booking = threads["live_simple_4-2-0"]
    assert [m.role for m in booking.messages] == ["developer", "developer", "user"]
    assert booking.messages[0].content.startswith("You are a booking assistant")
    assert "`book_seats:json`" in booking.messages[1].content
    chat = threads["live_irrelevance_12-5-1"]
    assert [m.role for m in chat.messages] == ["developer", "user", "assistant", "user"]
    assert chat.messages[2].end_turn is True
    assert chat.meta["category"] == "live_irrelevance"


def test_multi_turn_entries_keep_later_turns_and_their_environment():
    thread = by_id(read_all(SAMPLES)[0])["multi_turn_miss_func_7"]
    assert [m.role for m in thread.messages] == ["user"] and thread.settings is None
    assert thread.meta["follow_ups"] == [
        [user("Now show me how many lines notes.txt has.")],
        [],
        [user("Copy it back next to the folder as notes_backup.txt.")],
    ]
    extra = thread.meta["extra_fields"]
    assert extra["involved_classes"] == ["GorillaFileSystem"]
    assert extra["missed_function"] == {"2": ["cp"]} and "initial_config" in extra
    assert any("GorillaFileSystem from its multi_turn_func_doc" in n for n in thread.meta["notes"])


def test_older_string_and_flat_message_questions():
    threads, _, _ = read_all(SAMPLES / "legacy.jsonl")
    string, flat = threads
    assert string.messages[-1].content == "Convert 72 degrees Fahrenheit to Celsius."
    assert "convert_temperature" in string.meta["tool_schemas"]
    assert "category" not in string.meta  # no id to read it from
    assert flat.id == "parallel_2" and flat.messages[-1].content.startswith("Roll two")


def test_only_schema_positions_are_mapped_never_values(tmp_path):
    parameters = {
        "type": "dict",
        "properties": {
            "type": {"type": "float", "default": {"type": "dict"}, "enum": ["dict"]},
            "pairs": {"type": "list", "items": {"type": "tuple", "items": [{"type": "float"}]}},
            "either": {"anyOf": [{"type": "bool"}, {"type": "integer"}]},
        },
    }
    record = entry([[user("go")]], function=[{"name": "f", "parameters": parameters}])
    (thread,), _, _ = read_records(tmp_path, record)
    schema = thread.meta["tool_schemas"]["f"]
    assert schema["properties"]["type"] == {
        "type": "number",
        "default": {"type": "dict"},
        "enum": ["dict"],
    }
    assert schema["properties"]["pairs"]["items"] == {
        "type": "array",
        "items": [{"type": "number"}],
    }
    assert schema["properties"]["either"]["anyOf"] == [{"type": "boolean"}, {"type": "integer"}]


def test_properties_stored_as_a_json_string_are_parsed(tmp_path):
    parameters = {"type": "dict", "properties": json.dumps({"n": {"type": "float"}})}
    record = entry([[user("go")]], function=[{"name": "f", "parameters": parameters}])
    (thread,), _, _ = read_records(tmp_path, record)
    assert thread.meta["tool_schemas"]["f"]["properties"] == {"n": {"type": "number"}}
    assert "function[0].parameters.properties is a JSON string; parsed" in thread.meta["notes"]


@pytest.mark.parametrize(
    ("record", "code", "message"),
    [
        ("What is 2 + 2?", "not_an_object", "got string"),
        ({"id": "simple_1"}, "missing_field", "the entry has no question"),
        (entry(7), "missing_field", "question is a number"),
        (entry([]), "empty_conversation", "question is an empty list"),
        (entry([[], [user("hi")]]), "empty_conversation", "question[0] is an empty turn"),
        (
            entry([[user("hi"), {"role": "assistant", "content": "ok"}]]),
            "missing_field",
            "ends with",
        ),
        (entry([[{"role": "tool", "content": "x"}]]), "unknown_role", "question[0][0].role"),
        (entry([[{"role": "user", "content": None}]]), "missing_field", "question[0][0].content"),
        (entry([[user("hi")], user("hi")]), "missing_field", "mixes turns"),
        (entry([[user("hi")]], function=[{"parameters": {}}]), "invalid_tools", "has no name"),
        (
            entry([[user("hi")]], function=[{"name": "f", "parameters": {"properties": "{"}}]),
            "invalid_tools",
            "not JSON",
        ),
    ],
)
def test_bad_entries_are_quarantined_with_stable_codes(tmp_path, record, code, message):
    threads, rejected, _ = read_records(tmp_path, record, format="bfcl")
    assert threads == [] and [r.code for r in rejected] == [code]
    assert message in rejected[0].message


def test_detection_picks_bfcl_and_takes_no_other_format_record():
    for path in expand_inputs([str(SAMPLES)]).files:
        assert detect_file(path).label == "bfcl"
    roots = [REPO / "data_samples"]
    if (SHARED / "DESIGN.md").is_file():
        roots += [SHARED / "realdata", SHARED / "formats"]
    for path in expand_inputs([str(root) for root in roots]).files:
        if "/bfcl/" in path or "/expected/" in path:
            continue
        for item in iter_file(path):
            if isinstance(item, Record):
                assert FORMAT.sniff(item.value).score == 0, path


def test_sniff_reasons_explain_the_shape():
    assert "list of turns" in FORMAT.sniff(entry([[user("hi")]])).reason
    legacy = {"question": "hi", "function": {"name": "f"}}
    assert FORMAT.sniff(legacy) == (
        0.9,
        "a question string with named function declarations (BFCL v1)",
    )
    assert FORMAT.sniff({"question": "hi"}).score == 0


def test_mms_convert_writes_the_threads_and_the_quarantine(tmp_path):
    out = tmp_path / "threads.jsonl"
    result = CliRunner().invoke(main, ["convert", str(SAMPLES), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "(bfcl: 2)" in result.output
    assert len(out.read_text().splitlines()) == 8
    rejected = (tmp_path / "threads.rejected.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["code"] for line in rejected) == [
        "invalid_tools",
        "unknown_role",
    ]


def schemas(depth: int = 2) -> st.SearchStrategy[dict[str, Any]]:
    leaf = st.fixed_dictionaries({"type": TYPES})
    if depth == 0:
        return leaf
    inner = schemas(depth - 1)
    return leaf | st.fixed_dictionaries(
        {"type": TYPES},
        optional={
            "properties": st.dictionaries(st.sampled_from(["a", "type", "items"]), inner),
            "items": inner,
            "anyOf": st.lists(inner, max_size=2),
            "default": st.fixed_dictionaries({"type": TYPES}),
        },
    )


def schema_types(schema: Any) -> list[Any]:
    """Every `type` at a schema position (not inside values such as `default`)."""
    if isinstance(schema, list):
        return [kind for item in schema for kind in schema_types(item)]
    if not isinstance(schema, dict):
        return []
    found = [schema["type"]] if "type" in schema else []
    for sub in schema.get("properties", {}).values():
        found += schema_types(sub)
    for key in SUBSCHEMAS:
        found += schema_types(schema.get(key))
    return found


@given(parameters=schemas())
def test_any_bfcl_schema_declares_only_json_schema_types(parameters):
    value = entry([[user("go")]], function=[{"name": "f", "parameters": parameters}])
    (thread,) = FORMAT.to_threads(Record("b.json", "b.json:1", value), ConvertOptions())
    schema = thread.meta["tool_schemas"]["f"]
    assert set(schema_types(schema)) <= JSON_SCHEMA_TYPES
    assert schema.get("default") == parameters.get("default")
