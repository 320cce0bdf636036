"""The Anthropic Messages API input format: samples, the cookbook's real fine-tuning file,
block mapping (tool_use, tool_result, thinking, media), options and specific errors."""

from __future__ import annotations

from collections import Counter

import orjson
import pytest
from click.testing import CliRunner

import pipeline
from pipeline.capabilities import enabled_formats
from pipeline.cli import main
from pipeline.formats import FORMATS
from pipeline.formats.base import ConvertOptions
from pipeline.mms import Media
from tests.conftest import REPO, needs_shared
from tests.reading import read_all, write_records

SAMPLES = REPO / "data_samples" / "anthropic"
WEATHER = {
    "name": "get_weather",
    "description": "Weather in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def one_thread(tmp_path, record, **kwargs):
    threads, rejected, _ = read_all(write_records(tmp_path, record), format="anthropic", **kwargs)
    assert rejected == [], rejected
    return threads[0]


def rejection(tmp_path, record):
    threads, rejected, _ = read_all(write_records(tmp_path, record), format="anthropic")
    assert threads == [] and len(rejected) == 1
    return rejected[0]


def roles(thread):
    return [(m.role, m.format if m.role == "assistant" else m.name) for m in thread.messages]


def test_samples_convert_with_the_expected_quarantine_codes():
    threads, rejected, stats = read_all(SAMPLES)
    assert stats.read_balanced and stats.records_read == 9
    assert set(stats.formats.values()) == {"anthropic"}
    assert len(threads) == 7
    assert Counter(r.code for r in rejected) == {"unknown_tool_call": 1, "invalid_tool_call": 1}
    ids = {t.id for t in threads}
    assert {"batch-req-1", "CALL0000001"} <= ids  # batch custom_id / Bedrock recordId


def check_cookbook_file(realdata, records: int) -> None:
    path = realdata / "anthropic_cookbook" / "json_mode_dataset.jsonl"
    threads, rejected, stats = read_all(path)
    assert stats.records_read == records and stats.threads == len(threads) == records
    assert rejected == [] and stats.formats[str(path)] == "anthropic"
    for thread in threads:
        assert [m.role for m in thread.messages] == ["developer", "user", "assistant"]
        assert thread.messages[0].content == "JSON Mode: Enabled"
        assert thread.messages[2].end_turn is True
        orjson.loads(thread.messages[2].content)  # the answers are JSON documents, kept whole


def test_real_cookbook_file_converts_every_record(data):
    check_cookbook_file(data / "realdata", 20)  # the copy's first 20 of 500 lines


def test_the_full_cookbook_file_converts_every_record():
    """Every record of the file tests/data trims; skips without it."""
    shared = needs_shared("realdata/anthropic_cookbook/json_mode_dataset.jsonl")
    check_cookbook_file(shared / "realdata", 500)


def test_cli_detects_the_real_file(data):
    path = data / "realdata" / "anthropic_cookbook" / "json_mode_dataset.jsonl"
    result = CliRunner().invoke(main, ["formats", "--detect", str(path)])
    assert result.exit_code == 0
    assert "-> anthropic" in result.output


def test_tool_results_then_the_users_words(tmp_path):
    thread = one_thread(
        tmp_path,
        {
            "tools": [WEATHER],
            "messages": [
                {"role": "user", "content": "Weather in Rome?"},
                {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": "t1",
                            "name": "get_weather",
                            "input": {"city": "Rome"},
                        }
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "thanks"},
                        {"type": "tool_result", "tool_use_id": "t1", "content": "sunny"},
                    ],
                },
            ],
        },
    )
    assert roles(thread) == [
        ("developer", None),
        ("user", None),
        ("assistant", "get_weather:json"),
        ("user", None),
        ("context", "get_weather"),
    ]
    anthropic_order = one_thread(
        tmp_path,
        {
            "tools": [WEATHER],
            "messages": [
                {"role": "user", "content": "Weather in Rome?"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {}}
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "t1", "content": "sunny"},
                        {"type": "text", "text": "and tomorrow?"},
                    ],
                },
            ],
        },
    )
    assert roles(anthropic_order)[-2:] == [("context", "get_weather"), ("user", None)]
    assert anthropic_order.messages[2].content == "{}"


def test_undeclared_tool_is_noted_not_declared(tmp_path):
    thread = one_thread(
        tmp_path,
        {
            "messages": [
                {"role": "user", "content": "Search cats"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": "s", "name": "search", "input": {"q": "cats"}}
                    ],
                },
            ]
        },
    )
    assert roles(thread) == [("user", None), ("assistant", "search:json")]
    assert not any(m.role == "developer" for m in thread.messages)
    assert thread.settings is None
    assert "search:json" not in enabled_formats(
        "\n".join(m.content for m in thread.messages if m.role == "developer")
    )
    assert thread.meta["notes"] == [
        "tool 'search' is called but the source never declares it; its calls are not enabled "
        "by any developer message"
    ]


def test_options_keep_or_drop_reasoning_and_media(tmp_path):
    record = {
        "system": "Be brief.",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}},
                    {"type": "text", "text": "What is it?"},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Looks like a dog.", "signature": "sig"},
                    {"type": "text", "text": "A dog."},
                ],
            },
        ],
    }
    kept = one_thread(tmp_path, record)
    assert roles(kept)[-2:] == [("assistant", "reasoning"), ("assistant", "markdown")]
    assert kept.meta["message_meta"][str(len(kept.messages) - 2)] == {"signature": "sig"}
    assert kept.messages[-3].content == "\ufffcWhat is it?"
    assert kept.messages[-3].media == (Media("image", url="https://x/y.png"),)
    options = ConvertOptions(reasoning="drop", multimodal="placeholder")
    dropped = one_thread(tmp_path, record, options=options)
    assert [m.format for m in dropped.messages if m.role == "assistant"] == ["markdown"]
    assert dropped.messages[1].content == "[image]\n\nWhat is it?"


def test_parallel_calls_as_jsonl(tmp_path):
    calls = [
        {"type": "tool_use", "id": f"t{i}", "name": "get_weather", "input": {"city": c}}
        for i, c in enumerate(["Rome", "Oslo"])
    ]
    results = [{"type": "tool_result", "tool_use_id": f"t{i}", "content": "ok"} for i in range(2)]
    record = {
        "tools": [WEATHER],
        "messages": [
            {"role": "user", "content": "Rome and Oslo?"},
            {"role": "assistant", "content": calls},
            {"role": "user", "content": results},
        ],
    }
    thread = one_thread(tmp_path, record, options=ConvertOptions(parallel_calls="jsonl"))
    jsonl = [m for m in thread.messages if m.format == "get_weather:jsonl"]
    assert len(jsonl) == 1 and jsonl[0].content.splitlines() == [
        '{"city":"Rome"}',
        '{"city":"Oslo"}',
    ]


@pytest.mark.parametrize(
    ("record", "code", "words"),
    [
        (
            {"system": "x", "messages": [{"role": "system", "content": "hi"}]},
            "unknown_role",
            "messages[0].role is 'system' (expected user or assistant)",
        ),
        (
            {"system": "x", "messages": [{"role": "user", "content": 7}]},
            "missing_field",
            "messages[0].content is a number",
        ),
        (
            {
                "system": "x",
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}],
                    }
                ],
            },
            "invalid_thread",
            "messages[0].content[0] is a tool_use block in a user message",
        ),
        ({"system": "x", "messages": []}, "empty_conversation", "messages is an empty list"),
        (
            {
                "system": "x",
                "tools": [{"input_schema": {}}],
                "messages": [{"role": "user", "content": "a"}],
            },
            "invalid_tools",
            "tools[0] has no name",
        ),
        ({"system": "x", "messages": "hi"}, "missing_field", "messages is a str"),
    ],
)
def test_specific_errors(tmp_path, record, code, words):
    rejected = rejection(tmp_path, record)
    assert rejected.code == code and words in rejected.message


def test_unknown_blocks_and_extra_fields_are_kept(tmp_path):
    thread = one_thread(
        tmp_path,
        {
            "system": "x",
            "temperature": 0.5,
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "hologram", "beam": 1}, {"type": "text", "text": "hi"}],
                },
                {"role": "assistant", "content": "hello", "stop_reason": "end_turn"},
            ],
        },
    )
    extra = thread.meta["extra_fields"]
    assert extra["temperature"] == 0.5
    assert extra["messages[0].content[0]"] == {"type": "hologram", "beam": 1}
    assert extra["messages[1].stop_reason"] == "end_turn"


@pytest.mark.parametrize(
    ("value", "score"),
    [
        (
            {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]},
            0.3,
        ),
        ({"system": "s", "messages": [{"role": "user", "content": "a"}]}, 1.0),
        (
            {
                "messages": [
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x"}]}
                ]
            },
            1.0,
        ),
        ({"custom_id": "a", "params": {"messages": [{"role": "user", "content": "a"}]}}, 0.9),
        ({"messages": [{"from": "human", "value": "a"}]}, 0.0),
        ({"messages": [{"role": "tool", "content": "a"}]}, 0.0),
        ([1, 2], 0.0),
        ("text", 0.0),
        (None, 0.0),
        ({"messages": [None, 3]}, 0.0),
    ],
)
def test_sniff(value, score):
    assert FORMATS["anthropic"].sniff(value).score == score


def test_conversion_is_deterministic(tmp_path):
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    pipeline.convert(str(SAMPLES), first)
    pipeline.convert(str(SAMPLES), second)
    assert first.read_bytes() == second.read_bytes()
