"""The Hermes function-calling input format: ShareGPT turns and raw ChatML / SYSTEM:-USER:
transcripts with <tools>, <tool_call> and <tool_response> tags; the system prompt's tool
section cut; the real few-shot file; specific errors."""

from __future__ import annotations

import re
from collections import Counter

import orjson
import pytest
from click.testing import CliRunner

from pipeline.capabilities import enabled_formats
from pipeline.cli import main
from pipeline.formats import FORMATS
from pipeline.formats.base import ConvertOptions
from tests.conftest import REPO
from tests.reading import read_all, unenabled_formats, write_records

SAMPLES = REPO / "data_samples" / "hermes"
TOOLS = (
    '<tools>\n[{"type": "function", "function": {"name": "get_weather", "description": '
    '"Weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]'
    "\n</tools>"
)
SYSTEM = (
    "You are a function calling AI model. You are provided with function signatures within "
    "<tools> </tools> XML tags. Be concise.\n" + TOOLS + "\nFor each function call return a "
    "json object within <tool_call> </tool_call> tags:\n<tool_call>\n"
    "{'arguments': <args-dict>, 'name': <function-name>}\n</tool_call>\n"
)


def one_thread(tmp_path, record, **kwargs):
    threads, rejected, _ = read_all(write_records(tmp_path, record), format="hermes", **kwargs)
    assert rejected == [], rejected
    return threads[0]


def rejection(tmp_path, record):
    threads, rejected, _ = read_all(write_records(tmp_path, record), format="hermes")
    assert threads == [] and len(rejected) == 1
    return rejected[0]


def roles(thread):
    return [(m.role, m.format if m.role == "assistant" else m.name) for m in thread.messages]


def sharegpt(*turns):
    return {"conversations": [{"from": f, "value": v} for f, v in turns]}


def test_samples_convert_with_the_expected_quarantine_codes():
    threads, rejected, stats = read_all(SAMPLES)
    assert stats.read_balanced and stats.records_read == 6 and len(threads) == 4
    assert set(stats.formats.values()) == {"hermes"}
    assert Counter(r.code for r in rejected) == {"invalid_tool_call": 1, "unknown_role": 1}
    for thread in threads:
        assert unenabled_formats(thread) == []


def test_real_few_shot_examples(data):
    path = data / "realdata" / "hermes_function_calling" / "few_shot.json"
    threads, rejected, stats = read_all(path)
    assert stats.records_read == 2 and stats.threads == len(threads) == 2 and rejected == []
    assert stats.formats[str(path)] == "hermes"
    expected_calls = [
        (
            "calculate_distance:json",
            {"origin": "New York", "destination": "Los Angeles", "mode": "car"},
        ),
        ("generate_password:json", {"length": 8}),
    ]
    for thread, (fmt, arguments) in zip(threads, expected_calls, strict=True):
        assert unenabled_formats(thread) == []
        assert thread.messages[0].content.endswith("Use them if required")
        assert "<tools>" not in thread.messages[0].content
        call = thread.messages[-1]
        assert (call.format, orjson.loads(call.content), call.end_turn) == (fmt, arguments, False)
        assert {f.name for f in thread.settings.formats} == {
            "calculate_distance:json",
            "generate_password:json",
        }


def test_real_system_prompt_template_is_not_hermes(data):
    path = data / "realdata" / "hermes_function_calling" / "sys_prompt.yml"
    result = CliRunner().invoke(main, ["formats", "--detect", str(path)])
    assert result.exit_code == 0
    assert "-> hermes" not in result.output
    assert re.search(r"hermes\s+0\.00", result.output)


def test_system_tool_prompt_is_cut_and_kept_in_meta(tmp_path):
    thread = one_thread(
        tmp_path,
        sharegpt(
            ("system", SYSTEM),
            ("human", "Weather in Oslo?"),
            (
                "gpt",
                "<tool_call>\n{'arguments': {'city': 'Oslo'}, 'name': 'get_weather'}\n</tool_call>",
            ),
        ),
    )
    assert thread.messages[0].content == "You are a function calling AI model. Be concise."
    assert thread.meta["extra_fields"]["conversations[0] original system prompt"] == SYSTEM
    assert any(note.startswith("cut the Hermes tool prompt") for note in thread.meta["notes"])
    assert thread.messages[-1].content == '{"city":"Oslo"}'


def test_text_before_calls_parallel_calls_and_named_results(tmp_path):
    thread = one_thread(
        tmp_path,
        sharegpt(
            ("system", SYSTEM),
            ("human", "Oslo and Rome?"),
            (
                "gpt",
                'Checking both.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}'
                '\n</tool_call>\n<tool_call>\n{"name": "get_weather", "arguments": "{\\"city\\": '
                '\\"Rome\\"}"}\n</tool_call>',
            ),
            (
                "tool",
                '<tool_response>\n{"name": "get_weather", "content": "2 C"}\n</tool_response>\n'
                '<tool_response>\n{"name": "get_weather", "content": {"temp": 20}}\n</tool_response>',
            ),
            ("gpt", "Oslo 2 C, Rome 20 C."),
        ),
    )
    assert roles(thread)[2:] == [
        ("user", None),
        ("assistant", "markdown"),
        ("assistant", "get_weather:json"),
        ("context", "get_weather"),
        ("assistant", "get_weather:json"),
        ("context", "get_weather"),
        ("assistant", "markdown"),
    ]
    assert [m.content for m in thread.messages[4:8]] == [
        '{"city":"Oslo"}',
        "2 C",
        '{"city":"Rome"}',
        '{"temp":20}',
    ]
    assert thread.messages[3].end_turn is False and thread.messages[-1].end_turn is True
    jsonl = one_thread(
        tmp_path,
        sharegpt(
            ("system", SYSTEM),
            ("human", "Oslo and Rome?"),
            (
                "gpt",
                '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
                '<tool_call>{"name": "get_weather", "arguments": {"city": "Rome"}}</tool_call>',
            ),
        ),
        options=ConvertOptions(parallel_calls="jsonl"),
    )
    assert jsonl.messages[-1].format == "get_weather:jsonl"
    assert jsonl.messages[-1].content == '{"city":"Oslo"}\n{"city":"Rome"}'


def test_chatml_transcript_with_reasoning_and_results_in_a_user_turn(tmp_path):
    text = (
        f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\nOslo?<|im_end|>\n"
        "<|im_start|>assistant\n<think>Need the weather.</think>\n"
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call><|im_end|>\n'
        "<|im_start|>user\n<tool_response>2 C</tool_response>\nThanks, and tomorrow?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    thread = one_thread(tmp_path, {"text": text, "source": "synthetic"})
    assert roles(thread)[2:] == [
        ("user", None),
        ("assistant", "reasoning"),
        ("assistant", "get_weather:json"),
        ("context", "get_weather"),
        ("user", None),
    ]
    assert thread.messages[-1].content == "Thanks, and tomorrow?"
    assert thread.meta["extra_fields"]["source"] == "synthetic"
    dropped = one_thread(tmp_path, {"text": text}, options=ConvertOptions(reasoning="drop"))
    assert "reasoning" not in {m.format for m in dropped.messages}


def test_undeclared_tool_is_noted_not_declared(tmp_path):
    thread = one_thread(
        tmp_path,
        sharegpt(
            ("system", SYSTEM),
            ("human", "Hi"),
            ("gpt", '<tool_call>{"name": "ping", "arguments": {}}</tool_call>'),
        ),
    )
    assert roles(thread)[-1] == ("assistant", "ping:json")
    enabled = enabled_formats(
        "\n".join(m.content for m in thread.messages if m.role == "developer")
    )
    assert "get_weather:json" in enabled and "ping:json" not in enabled
    assert {f.name for f in thread.settings.formats} == {"get_weather:json"}
    assert (
        "tool 'ping' is called but the source never declares it; its calls are not enabled "
        "by any developer message"
    ) in thread.meta["notes"]


@pytest.mark.parametrize(
    ("record", "code", "words"),
    [
        (
            sharegpt(("robot", "<tool_call>{}</tool_call>")),
            "unknown_role",
            "conversations[0].from is 'robot'",
        ),
        (
            sharegpt(("gpt", "<tool_call>{'arguments': {}}</tool_call>")),
            "invalid_tool_call",
            "conversations[0] <tool_call> #1 has no string name",
        ),
        (
            sharegpt(("gpt", "<tool_call>get_weather(city='Oslo')</tool_call>")),
            "invalid_tool_call",
            "conversations[0] <tool_call> #1 is not a JSON object",
        ),
        (
            sharegpt(("system", "<tools>[{'description': 'x'}]</tools>")),
            "invalid_tools",
            "conversations[0] <tools> block: tools[0] has no name",
        ),
        (
            sharegpt(("system", "<tools>not json at all</tools>")),
            "invalid_tools",
            "conversations[0] <tools> block",
        ),
        (
            {"text": "Preamble\nUSER: hi <tool_call>{}</tool_call>"},
            "missing_field",
            "text has text before its first SYSTEM:/USER:/ASSISTANT: marker",
        ),
        (
            {"conversations": [{"from": "gpt", "value": ["<tool_call>"]}]},
            "missing_field",
            "conversations[0].value is an array, not a string",
        ),
        ({"prompt": "<tool_call>"}, "missing_field", "no conversations/messages list"),
    ],
)
def test_specific_errors(tmp_path, record, code, words):
    rejected = rejection(tmp_path, record)
    assert rejected.code == code and words in rejected.message


@pytest.mark.parametrize(
    ("value", "score"),
    [
        (sharegpt(("human", "hi"), ("gpt", "<tool_call>{}</tool_call>")), 1.0),
        ({"messages": [{"role": "tool", "content": "<tool_response>x</tool_response>"}]}, 1.0),
        ({"text": "<|im_start|>system\n<tools>[]</tools><|im_end|>"}, 1.0),
        ({"example": "SYSTEM: x <tools>[]</tools>\nUSER: hi"}, 1.0),
        ("USER: hi\nASSISTANT: <tool_call>{}</tool_call>", 1.0),
        (sharegpt(("human", "hi"), ("gpt", "hello")), 0.0),
        ({"text": "plain prose mentioning <tool_call> tags"}, 0.0),
        ({"Tools": "Here are the available tools:\n<tools> {tools} </tools>"}, 0.0),
        (None, 0.0),
        ([{"from": "gpt"}], 0.0),
    ],
)
def test_sniff(value, score):
    assert FORMATS["hermes"].sniff(value).score == score
