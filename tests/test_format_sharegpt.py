"""The ShareGPT input format through the public API: FastChat, axolotl, torchtune and
LLaMA-Factory files (tools, function calls, DPO, KTO, images), odd but honest turns,
specific rejections, options, and auto-detection that leaves other files alone."""

from __future__ import annotations

import orjson
import pytest
from click.testing import CliRunner

from pipeline.capabilities import enabled_formats
from pipeline.cli import main
from pipeline.formats import FORMATS, ConvertOptions
from tests.conftest import needs_shared
from tests.reading import read_all, read_records

SHAREGPT = FORMATS["sharegpt"]
TOOLS = '[{"name": "get_weather", "parameters": {"type": "object", "properties": {}}}]'


def shape(thread) -> list[tuple]:
    return [(m.role, m.format or m.name, m.content, m.end_turn) for m in thread.messages]


def check_fastchat(realdata, records: int) -> None:
    threads, rejected, stats = read_all(realdata / "fastchat/dummy_conversation.json")
    assert rejected == [] and len(threads) == records and stats.formats
    assert set(stats.formats.values()) == {"sharegpt"}
    assert threads[0].id == "identity_0"
    assert shape(threads[0])[:2] == [
        ("user", None, "Who are you?", None),
        (
            "assistant",
            "markdown",
            "I am Vicuna, a language model trained by researchers from Large Model Systems "
            "Organization (LMSYS).",
            True,
        ),
    ]
    assert {len(t.messages) for t in threads} == {2, 4, 6}


def test_fastchat_file_gives_one_thread_per_record_with_its_id(data):
    check_fastchat(data / "realdata", 32)  # the copy's first 32 of 500 records


def test_axolotl_empty_turn_is_left_out_and_noted(data):
    threads, rejected, _ = read_all(
        data / "realdata/axolotl_fixtures/conversation.missingturns.json"
    )
    full, _, _ = read_all(data / "realdata/axolotl_fixtures/conversation.json")
    assert rejected == [] and len(threads) == len(full) == 1
    assert len(full[0].messages) == 12 and len(threads[0].messages) == 11
    assert [m.role for m in threads[0].messages[:3]] == ["user", "user", "assistant"]
    assert threads[0].meta["notes"] == [
        "conversations[1] (gpt) is empty; left it out",
        "conversations[2] is a second user turn in a row",
    ]


def test_torchtune_system_turn_becomes_a_developer_message(data):
    threads, rejected, _ = read_all(data / "realdata/torchtune_assets/chat_tiny.json")
    assert rejected == [] and len(threads) == 1
    assert [m.role for m in threads[0].messages] == [
        "developer",
        "user",
        "assistant",
        "user",
        "assistant",
    ]


def check_glaive(path, records: int, expected_calls: int, without_tools: int) -> None:
    threads, rejected, stats = read_all(path)
    assert rejected == [] and len(threads) == stats.records_read == records
    calls = 0
    for thread in threads:
        enabled: set[str] = set()
        for index, message in enumerate(thread.messages):
            if message.role == "developer":
                enabled |= enabled_formats(message.content)
            if message.role == "assistant" and message.format != "markdown":
                calls += 1
                assert message.format in enabled and message.end_turn is False
                answer = thread.messages[index + 1]
                assert answer.role == "context" and f"{answer.name}:json" == message.format
        undeclared = [n for n in thread.meta.get("notes", []) if "never declares" in n]
        assert undeclared == []  # the demo files only call tools they define
    assert calls == expected_calls
    plain = [t for t in threads if t.settings is None]
    assert len(plain) == without_tools  # rows whose tools are "[]": plain chat, no declaration


@pytest.mark.parametrize(
    ("name", "records", "expected_calls", "without_tools"),
    # the copies: en's first 4 of 300 records; zh's first 7 and its rows 92, 197 and 293
    [("glaive_toolcall_en_demo.json", 4, 4, 2), ("glaive_toolcall_zh_demo.json", 10, 5, 3)],
)
def test_glaive_tool_calls_are_enabled_and_answered(
    data, name, records, expected_calls, without_tools
):
    check_glaive(data / "realdata/llamafactory" / name, records, expected_calls, without_tools)


def check_dpo(realdata, records: int) -> None:
    threads, rejected, stats = read_all(realdata / "llamafactory/dpo_en_demo.json")
    assert rejected == [] and stats.records_read == records and len(threads) == 2 * records
    chosen, other = threads[0], threads[1]
    base = chosen.meta["pair_id"]
    assert (chosen.id, other.id) == (f"{base}:chosen", f"{base}:rejected")
    assert other.meta["pair_id"] == base and other.meta["preference"] == "rejected"
    assert chosen.messages[:-1] == other.messages[:-1]
    assert chosen.messages[-1].role == other.messages[-1].role == "assistant"
    assert chosen.messages[-1].content != other.messages[-1].content


def test_dpo_demo_gives_a_chosen_and_a_rejected_thread_per_record(data):
    check_dpo(data / "realdata", 4)  # the copy's first 4 of 300 records


def test_call_of_an_undeclared_tool_is_kept_and_noted(tmp_path):
    record = {
        "conversations": [
            {"from": "human", "value": "Convert 5 USD."},
            {"from": "function_call", "value": '{"name": "convert", "arguments": {"amount": 5}}'},
            {"from": "observation", "value": "4.6 EUR"},
            {"from": "gpt", "value": "About 4.60 EUR."},
        ],
        "tools": TOOLS,
    }
    (thread,), rejected, _ = read_records(tmp_path, record)
    assert rejected == []
    enabled = enabled_formats(thread.messages[0].content)
    assert "get_weather:json" in enabled and "convert:json" not in enabled
    assert thread.meta["notes"] == [
        "tool 'convert' is called but the source never declares it; its calls are not enabled "
        "by any developer message"
    ]
    assert shape(thread)[2:4] == [
        ("assistant", "convert:json", '{"amount":5}', False),
        ("context", "convert", "4.6 EUR", None),
    ]


def test_observation_without_a_call_is_kept_unnamed_and_noted(data):
    # the copy holds rows 197 and 293 of the full file, the two with such an observation
    check_orphan_observations(data / "realdata")


def check_orphan_observations(realdata) -> None:
    threads, _, _ = read_all(realdata / "llamafactory/glaive_toolcall_zh_demo.json")
    orphans = [
        t for t in threads if any(m.role == "context" and m.name is None for m in t.messages)
    ]
    # rows 197 and 293 (0-based) write the call as prose in the gpt turn, then an observation
    assert len(orphans) == 2
    for thread in orphans:
        assert [m.role for m in thread.messages[1:5]] == [
            "user",
            "assistant",
            "context",
            "assistant",
        ]
        assert thread.messages[2].end_turn is False
        assert (
            "a tool result follows no tool call; kept as an unnamed context message"
            in (thread.meta["notes"])
        )


def test_the_full_files_convert_like_their_copies():
    """Every record of the large files tests/data trims; skips without them."""
    names = [
        "fastchat/dummy_conversation.json",
        "llamafactory/glaive_toolcall_en_demo.json",
        "llamafactory/glaive_toolcall_zh_demo.json",
        "llamafactory/dpo_en_demo.json",
    ]
    realdata = needs_shared(*(f"realdata/{name}" for name in names)) / "realdata"
    check_fastchat(realdata, 500)
    check_glaive(realdata / "llamafactory/glaive_toolcall_en_demo.json", 300, 211, 109)
    check_glaive(realdata / "llamafactory/glaive_toolcall_zh_demo.json", 300, 216, 100)
    check_dpo(realdata, 300)
    check_orphan_observations(realdata)


def parallel_record() -> dict:
    calls = [
        {"name": "get_weather", "arguments": {"city": "Paris"}},
        {"name": "get_weather", "arguments": {"city": "Rome"}},
    ]
    return {
        "conversations": [
            {"from": "human", "value": "Paris and Rome?"},
            {"from": "function_call", "value": orjson.dumps(calls).decode()},
            {"from": "observation", "value": "20C"},
            {"from": "observation", "value": "25C"},
            {"from": "gpt", "value": "20C and 25C."},
        ],
        "tools": TOOLS,
    }


def test_parallel_calls_in_one_turn_are_sequenced_or_jsonl(tmp_path):
    (thread,), _, _ = read_records(tmp_path, parallel_record())
    assert [m[1] for m in shape(thread)[2:6]] == [
        "get_weather:json",
        "get_weather",
        "get_weather:json",
        "get_weather",
    ]
    assert thread.messages[3].content == "20C" and thread.messages[5].content == "25C"
    (jsonl,), _, _ = read_records(
        tmp_path, parallel_record(), options=ConvertOptions(parallel_calls="jsonl")
    )
    assert shape(jsonl)[2] == (
        "assistant",
        "get_weather:jsonl",
        '{"city":"Paris"}\n{"city":"Rome"}',
        False,
    )


def image_record() -> dict:
    return {
        "conversations": [
            {"from": "human", "value": "<image>Who are they?"},
            {"from": "gpt", "value": "Two players."},
        ],
        "images": ["a.jpg"],
    }


def test_image_tags_are_dropped_or_placeholdered_and_the_list_kept(tmp_path):
    (dropped,), _, _ = read_records(
        tmp_path, image_record(), options=ConvertOptions(multimodal="drop")
    )
    assert dropped.messages[0].content == "Who are they?"
    assert dropped.meta["extra_fields"] == {"images": ["a.jpg"]}
    assert dropped.meta["notes"] == ["dropped 1 image part(s) (text-only thread)"]
    (kept,), _, _ = read_records(
        tmp_path, image_record(), options=ConvertOptions(multimodal="placeholder")
    )
    assert kept.messages[0].content == "[image]Who are they?"


def test_image_tags_without_an_images_list_are_text(tmp_path):
    record = {"conversations": [{"from": "human", "value": "Is <image> an HTML tag?"}]}
    (thread,), _, _ = read_records(tmp_path, record)
    assert thread.messages[0].content == "Is <image> an HTML tag?"


def test_kto_tag_marks_desirable_and_undesirable(tmp_path):
    turns = [{"from": "human", "value": "2+2?"}, {"from": "gpt", "value": "4"}]
    threads, rejected, _ = read_records(
        tmp_path,
        {"id": "a", "conversations": turns, "kto_tag": True},
        {"id": "b", "conversations": turns, "label": False},
    )
    assert rejected == []
    assert [(t.id, t.meta["preference"]) for t in threads] == [
        ("a", "desirable"),
        ("b", "undesirable"),
    ]
    assert "extra_fields" not in threads[1].meta


@pytest.mark.parametrize(
    ("record", "code", "message"),
    [
        (
            {"conversations": [{"from": "human", "value": "hi"}, {"from": "robot", "value": "x"}]},
            "unknown_role",
            "conversations[1].from is 'robot' (expected one of human, user, gpt, assistant, "
            "chatgpt, bard, bing, system, function_call, observation, tool)",
        ),
        (
            {"conversations": [{"from": "human"}]},
            "missing_field",
            "conversations[0] has no value",
        ),
        (
            {"conversations": [{"from": "human", "value": "hi"}], "tools": "[{"},
            "invalid_tools",
            "tools is a string but not valid JSON",
        ),
        (
            {"conversations": [{"from": "function_call", "value": "f(1)"}]},
            "invalid_tool_call",
            "conversations[0].value of a function_call turn is not JSON",
        ),
        (
            {"conversations": [{"from": "function_call", "value": '{"arguments": {}}'}]},
            "invalid_tool_call",
            "conversations[0].value is not a {name, arguments} call with a tool name",
        ),
        (
            {
                "conversations": [{"from": "human", "value": "hi"}],
                "chosen": {"from": "gpt", "value": "a"},
            },
            "missing_field",
            "rejected is missing (a DPO record needs both sides)",
        ),
        (
            {"conversations": [{"from": "gpt", "value": ""}]},
            "empty_conversation",
            "the record holds no messages",
        ),
    ],
)
def test_bad_records_are_quarantined_with_a_specific_reason(tmp_path, record, code, message):
    threads, rejected, stats = read_records(tmp_path, record, format="sharegpt")
    assert threads == [] and stats.read_balanced
    assert rejected[0].code == code
    assert rejected[0].message.startswith(message)


@pytest.mark.parametrize(
    ("value", "score"),
    [
        ({"conversations": [{"from": "human", "value": "hi"}]}, 0.9),
        ({"messages": [{"from": "user", "value": "hi"}], "tools": "[]"}, 1.0),
        ({"conversations": [{"from": "gpt", "value": "<tool_call>{}</tool_call>"}]}, 0.5),
        ({"messages": [{"role": "user", "content": "hi"}]}, 0.0),
        ({"conversations": [{"from": "human", "value": "hi"}, "text"]}, 0.0),
        ({"conversations": "hi"}, 0.0),
        (["conversations"], 0.0),
        (None, 0.0),
        (3.5, 0.0),
    ],
)
def test_sniff_scores_shapes_and_never_raises(value, score):
    assert SHAREGPT.sniff(value).score == score


NOT_CONVERSATIONS = [
    "fastchat/mt_bench_question.jsonl",
    "fastchat/judge_prompts.jsonl",
    "fastchat/vicuna_bench_question.jsonl",
    "llamafactory/c4_demo.jsonl",
    "llamafactory/dataset_info.json",
    "toolbench/instruction/G1_query.json",
    "toolbench/instruction/G2_query.json",
    "toolbench/instruction/G3_query.json",
    "toolbench/instruction/inference_query_demo.json",
]


@pytest.mark.parametrize("name", NOT_CONVERSATIONS)
def test_files_that_are_not_conversations_are_not_taken(data, name):
    result = CliRunner().invoke(main, ["formats", "--detect", str(data / "realdata" / name)])
    assert result.exit_code == 0
    label = result.output.splitlines()[0].rsplit("-> ", 1)[1]
    assert label not in ("sharegpt", "alpaca", "hh-rlhf")
    for line in result.output.splitlines()[1:]:
        fields = line.split()
        if fields and fields[0] in ("sharegpt", "alpaca", "hh-rlhf"):
            assert fields[3].startswith("0/"), line
