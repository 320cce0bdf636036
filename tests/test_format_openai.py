"""The OpenAI input format through the public API: real fine-tuning, functionary,
LLaMA-Factory and torchtune files, preference shapes, options, specific quarantine
reasons, Hugging Face Parquet rows, and the CLI."""

from __future__ import annotations

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.cli import main
from pipeline.formats import FORMATS, ConvertOptions
from pipeline.quarantine import RecordRejected
from pipeline.sources import Record
from tests.conftest import REPO, needs_shared
from tests.reading import read_all, unenabled_formats

OPENAI = FORMATS["openai"]
SAMPLES = REPO / "data_samples" / "openai"
REAL_FILES = [
    # path under realdata (tests/data: trimmed copies and two stand-ins, see their
    # PROVENANCE.txt), records read, threads (no file quarantines anything)
    ("openai_finetune_examples/toy_chat_fine_tuning.jsonl", 10, 10),
    ("openai_finetune_examples/weather_chat_fine_tuning.jsonl", 10, 10),
    ("openai_finetune_examples/evals_older_samples.jsonl", 6, 6),
    ("functionary/test_case.json", 1, 1),
    ("functionary/test_case_v1.json", 1, 1),
    ("functionary/test_case_v2.json", 1, 1),
    ("functionary/test_case_v2.llama3.json", 1, 1),
    ("functionary/test_case_vision.json", 1, 1),
    ("llamafactory/kto_en_demo.json", 5, 5),
    ("llamafactory/mllm_demo.json", 6, 6),
    ("llamafactory/mllm_audio_demo.json", 3, 3),
    ("llamafactory/mllm_video_demo.json", 3, 3),
    ("llamafactory/mllm_video_audio_demo.json", 3, 3),
    ("llamafactory/reason_tool_use_demo_50.jsonl", 3, 3),
    ("llamafactory/v1_sft_demo.jsonl", 49, 49),
    ("llamafactory/v1_multimodal_demo.jsonl", 24, 24),
    ("llamafactory/v1_dpo_demo.jsonl", 10, 20),
    ("torchtune_assets/hh_rlhf_tiny.json", 1, 2),
]
FULL_FILES = [
    # the large files of ../shared/realdata that tests/data trims: every record of them
    ("openai_finetune_examples/evals_older_samples.jsonl", 122, 122),
    ("openai_finetune_examples/weather_chat_fine_tuning.jsonl", 10, 10),
    ("llamafactory/kto_en_demo.json", 300, 300),
    ("llamafactory/reason_tool_use_demo_50.jsonl", 50, 50),
    ("llamafactory/v1_sft_demo.jsonl", 500, 500),
]
TOOL_FILES = [
    "openai_finetune_examples/weather_chat_fine_tuning.jsonl",
    "functionary/test_case.json",
    "functionary/test_case_v1.json",
    "functionary/test_case_v2.json",
    "functionary/test_case_vision.json",
    "llamafactory/reason_tool_use_demo_50.jsonl",
]


def convert_record(value, options: ConvertOptions | None = None):
    record = Record("mem.jsonl", "mem.jsonl:1", value)
    return OPENAI.to_threads(record, options or ConvertOptions())


def rejection(value) -> RecordRejected:
    with pytest.raises(RecordRejected) as info:
        convert_record(value)
    return info.value


def shape(thread) -> list[tuple[str, str | None, str]]:
    """(role, format or context name, content) per message."""
    return [
        (m.role, m.format if m.role == "assistant" else m.name, m.content) for m in thread.messages
    ]


# --------------------------------------------------------------------------- real files


@pytest.mark.parametrize(("path", "records", "threads"), REAL_FILES)
def test_real_files_are_detected_and_convert_without_loss(data, path, records, threads):
    source = str(data / "realdata" / path)
    converted, rejected, stats = read_all(source)
    assert stats.formats[source] == "openai"
    assert (stats.records_read, stats.threads, rejected) == (records, threads, [])
    assert stats.read_balanced
    for thread in converted:
        thread.validate()
        assert thread.meta["source_format"] == "openai"


def test_the_full_files_convert_without_loss():
    """Every record of the large files (needs ../shared; skips without it)."""
    shared = needs_shared(*(f"realdata/{path}" for path, _, _ in FULL_FILES))
    for path, records, threads in FULL_FILES:
        test_real_files_are_detected_and_convert_without_loss(shared, path, records, threads)


@pytest.mark.parametrize("path", TOOL_FILES)
def test_every_call_and_reasoning_format_is_enabled_by_an_earlier_developer_message(data, path):
    threads, _, _ = read_all(str(data / "realdata" / path))
    calls = 0
    for thread in threads:
        calls += sum(":" in m.format for m in thread.messages if m.role == "assistant")
        missing = unenabled_formats(thread)
        if missing:
            notes = thread.meta.get("notes", [])
            for fmt in missing:
                tool = fmt.split(":")[0]
                assert any(f"tool {tool!r} is called but the source never" in n for n in notes)
    assert calls > 0


def test_real_tool_files_call_only_declared_tools(data):
    for path in TOOL_FILES:
        threads, _, _ = read_all(str(data / "realdata" / path))
        assert all(unenabled_formats(t) == [] for t in threads), path


def test_weather_parallel_calls_are_answered_by_id(data):
    threads, _, _ = read_all(
        str(data / "realdata/openai_finetune_examples/weather_chat_fine_tuning.jsonl")
    )
    roles = [(role, name) for role, name, _ in shape(threads[0])]
    assert roles == [
        ("developer", None),
        ("user", None),
        *[("assistant", "get_current_weather:json"), ("context", "get_current_weather")] * 3,
        ("assistant", "markdown"),
    ]
    messages = threads[0].messages
    assert '"Lima, Peru"' in messages[4].content and '"Lima"' in messages[5].content
    assert [m.end_turn for m in messages if m.role == "assistant"] == [False] * 3 + [True]


def test_functionary_code_interpreter_calls_become_declared_python_calls(data):
    threads, _, _ = read_all(str(data / "realdata/functionary/test_case.json"))
    thread = threads[0]
    python_calls = [m for m in thread.messages if m.format == "python:json"]
    assert [orjson.loads(m.content) for m in python_calls] == [
        {"code": "l=[int('0'),int('1'),int('2'),int('3'),int('4'),int('5')]\nl.remove(3.6)"},
        {"code": "l.remove(round(3.6))\nl"},
    ]
    assert "`python:json`" in thread.messages[0].content
    assert any("code_interpreter tool as `python`" in n for n in thread.meta["notes"])
    # text and calls in one message: the text first, then the calls
    index = next(i for i, m in enumerate(thread.messages) if m.content.startswith("I will get"))
    assert [(r, n) for r, n, _ in shape(thread)[index : index + 5]] == [
        ("assistant", "markdown"),
        *[("assistant", "get_car_price:json"), ("context", "get_car_price")] * 2,
    ]
    assert thread.messages[index].end_turn is False


def test_functionary_legacy_functions(data):
    threads, _, _ = read_all(str(data / "realdata/functionary/test_case_v1.json"))
    formats = [(role, name) for role, name, _ in shape(threads[0])]
    assert formats.count(("assistant", "get_car_price:json")) == 2
    assert formats.count(("context", "get_car_price")) == 2
    assert threads[0].messages[-1].content.startswith("No, the car Tang")


def test_reason_tool_use_keeps_part_order_and_unwraps_result_lists(data):
    path = data / "realdata/llamafactory/reason_tool_use_demo_50.jsonl"
    threads, _, _ = read_all(str(path))
    second = [(role, name) for role, name, _ in shape(threads[2])][:10]
    assert second == [
        ("developer", None),
        ("developer", None),
        ("user", None),
        ("assistant", "reasoning"),
        ("assistant", "circle_area:json"),
        ("context", "circle_area"),
        ("assistant", "circle_area:json"),
        ("context", "circle_area"),
        ("assistant", "reasoning"),
        ("assistant", "markdown"),
    ]
    assert "'radius': 1.5" in threads[2].messages[5].content
    assert "'radius': 3" in threads[2].messages[7].content


def test_llamafactory_media_tags_are_dropped_or_placeholdered(data):
    path = str(data / "realdata/llamafactory/mllm_video_audio_demo.json")
    dropped, _, _ = read_all(path, options=ConvertOptions(multimodal="drop"))
    assert dropped[0].messages[0].content == "What is the video describing?"
    assert dropped[0].meta["extra_fields"] == {
        "videos": ["mllm_demo_data/4.mp4"],
        "audios": ["mllm_demo_data/4.mp3"],
    }
    placeheld, _, _ = read_all(path, options=ConvertOptions(multimodal="placeholder"))
    assert placeheld[0].messages[0].content == "[video][audio]What is the video describing?"
    assert "replaced 1 video part(s) with a [video] placeholder" in placeheld[0].meta["notes"]


def test_kto_and_dpo_files_carry_preferences(data):
    kto, _, _ = read_all(str(data / "realdata/llamafactory/kto_en_demo.json"))
    preferences = [t.meta["preference"] for t in kto]
    assert (preferences.count("desirable"), preferences.count("undesirable")) == (3, 2)
    assert "</s>" in "".join(m.content for t in kto for m in t.messages)  # kept as plain text
    dpo, _, _ = read_all(str(data / "realdata/llamafactory/v1_dpo_demo.jsonl"))
    assert [t.meta["preference"] for t in dpo[:2]] == ["chosen", "rejected"]
    assert dpo[0].id == dpo[0].meta["pair_id"] + ":chosen"
    # the assistant's loss_weight 1.0 is the default weight; the user's 0.0 stays in meta
    assert dpo[0].messages[2].role == "assistant" and dpo[0].messages[2].weight is None
    assert dpo[0].meta["message_meta"] == {"0": {"loss_weight": 0.0}, "1": {"loss_weight": 0.0}}


# --------------------------------------------------------------------------- samples and shapes


def test_samples_cover_the_features():
    threads, rejected, stats = read_all(str(SAMPLES))
    assert stats.read_balanced and {r.code for r in rejected} == {
        "unknown_tool_call",
        "unknown_role",
        "missing_field",
        "invalid_tool_call",
    }
    formats = {m.format for t in threads for m in t.messages if m.role == "assistant"}
    assert {"reasoning", "get_weather:json", "lookup_isbn:json", "circle_area:json"} <= formats
    assert {t.meta.get("preference") for t in threads} == {
        None,
        "chosen",
        "rejected",
        "desirable",
        "undesirable",
    }


def test_parallel_calls_as_jsonl_and_reasoning_dropped():
    path = str(SAMPLES / "chat_completions.jsonl")
    threads, _, _ = read_all(path, options=ConvertOptions(parallel_calls="jsonl"))
    thread = next(t for t in threads if t.id == "parallel-calls")
    call = next(m for m in thread.messages if m.format == "get_weather:jsonl")
    assert call.content == '{"city":"Oslo"}\n{"city":"Lima","unit":"c"}'
    assert unenabled_formats(thread) == []
    threads, _, _ = read_all(path, options=ConvertOptions(reasoning="drop"))
    thread = next(t for t in threads if t.id == "reasoning-and-refusal")
    assert [m.format for m in thread.messages if m.role == "assistant"] == ["markdown"] * 2


def test_reasoning_refusal_and_weights():
    (thread,) = convert_record(
        {
            "messages": [
                {"role": "user", "content": "q"},
                {
                    "role": "assistant",
                    "reasoning": "think",
                    "reasoning_content": "think",
                    "content": [{"type": "refusal", "refusal": "no"}],
                    "weight": 0,
                },
            ]
        }
    )
    assert (
        shape(thread)[1:]
        == [
            ("developer", None, thread.messages[1].content),
            ("user", None, "q"),
            ("assistant", "reasoning", "think"),
            ("assistant", "markdown", "no"),
        ][1:]
    )
    assert [m.weight for m in thread.messages[2:]] == [0.0, 0.0]  # every message made from it
    assert "message_meta" not in thread.meta


def test_undeclared_tool_calls_are_noted():
    (thread,) = convert_record(
        {
            "messages": [
                {"role": "user", "content": "q"},
                {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {}}}]},
                {"role": "tool", "content": "r"},
            ]
        }
    )
    assert shape(thread)[1:] == [("assistant", "f:json", "{}"), ("context", "f", "r")]
    assert unenabled_formats(thread) == ["f:json"]
    assert any("'f' is called but the source never declares it" in n for n in thread.meta["notes"])


def test_prompt_completion_and_preference_prompt_shapes():
    (thread,) = convert_record(
        {
            "prompt": [{"role": "user", "content": "q"}],
            "completion": [{"role": "assistant", "content": "a"}],
            "label": False,
        }
    )
    assert shape(thread) == [("user", None, "q"), ("assistant", "markdown", "a")]
    assert thread.meta["preference"] == "undesirable"
    chosen, rejected = convert_record(
        {
            "id": 7,
            "messages": [{"role": "user", "content": "q"}],
            "chosen": {"role": "assistant", "content": "good"},
            "rejected": {"role": "assistant", "content": "bad"},
        }
    )
    assert (chosen.id, rejected.id) == ("7:chosen", "7:rejected")
    assert shape(rejected) == [("user", None, "q"), ("assistant", "markdown", "bad")]
    full = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "good"}]
    chosen, _ = convert_record(
        {
            "prompt": "q",
            "messages": full,
            "chosen": full,
            "rejected": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "x"}],
        }
    )
    assert shape(chosen) == [("user", None, "q"), ("assistant", "markdown", "good")]
    assert chosen.meta["extra_fields"] == {"prompt": "q"}
    assert "messages repeats chosen; not kept twice" in chosen.meta["notes"]


def test_openai_image_parts_as_placeholders_keep_their_references():
    (thread,) = convert_record(
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "image_url", "image_url": {"url": "https://x/cat.png"}},
                        {"type": "text", "text": "what?"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
                    ],
                },
                {"role": "assistant", "content": "a cat"},
            ]
        },
        ConvertOptions(multimodal="placeholder"),
    )
    assert thread.messages[0].content == "[image]\n\nwhat?\n\n[image]"
    assert thread.meta["message_meta"] == {"0": {"media": ["https://x/cat.png"]}}


def test_hosted_tools_without_schema_are_kept():
    (thread,) = convert_record(
        {
            "tools": [{"type": "file_search"}],
            "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
        }
    )
    assert thread.settings is None
    assert thread.meta["extra_fields"] == {"hosted_tools": [{"type": "file_search"}]}


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("value", "code", "message"),
    [
        ("hi", "not_an_object", "expected an object with messages, got a JSON string"),
        ([{"content": "x"}], "missing_field", "messages[0].role is missing"),
        ({"conversation": []}, "missing_field", "the record has keys conversation"),
        ({"messages": "hi"}, "missing_field", "messages is string, expected a list of messages"),
        ({"messages": [{"content": "x"}]}, "missing_field", "messages[0].role is missing"),
        ({"messages": ["x"]}, "missing_field", "messages[0] is string, expected a message object"),
        (
            {"messages": [{"role": "human", "content": "x"}]},
            "unknown_role",
            "messages[0].role is 'human' (expected system, developer, user, assistant, tool, "
            "function)",
        ),
        ({"messages": []}, "empty_conversation", "the record holds no messages"),
        (
            {"messages": [{"role": "user", "content": "q"}], "tools": "[{"},
            "invalid_tools",
            "tools is a string but not JSON",
        ),
        (
            {"messages": [{"role": "user", "content": "q"}], "tools": [{"type": "x"}, {}]},
            "invalid_tools",
            "tools[1] has no name",
        ),
        (
            {"messages": [{"role": "assistant", "tool_calls": {"name": "f"}}]},
            "missing_field",
            "messages[0].tool_calls is object, expected a list of calls",
        ),
        (
            {
                "messages": [
                    {"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}
                ]
            },
            "invalid_tool_call",
            "messages[0].tool_calls[0] has no function name",
        ),
        (
            {
                "messages": [
                    {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f"}}]},
                    {"role": "tool", "tool_call_id": "b", "content": "r"},
                ]
            },
            "unknown_tool_call",
            "tool result for unknown call id b",
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": [{"type": "tool_call", "value": {"name": "f"}}]}
                ]
            },
            "invalid_thread",
            "messages[0].content[0] is a tool_call part in a user message",
        ),
        (
            {"chosen_messages": [{"role": "user", "content": "q"}]},
            "missing_field",
            "chosen_messages is present but rejected_messages is missing",
        ),
        (
            {"input": {"messages": []}, "preferred_output": []},
            "missing_field",
            "input is an object but non_preferred_output is missing",
        ),
        ({"input": [], "ideal": []}, "missing_field", "ideal is an empty list"),
    ],
)
def test_bad_records_are_rejected_with_a_specific_reason(value, code, message):
    err = rejection(value)
    assert err.code == code
    assert message in err.message


# --------------------------------------------------------------------------- detection


@pytest.mark.parametrize(
    ("value", "score"),
    [
        ({"messages": [{"role": "user", "content": "q"}]}, 0.8),
        ({"input": [{"role": "user", "content": "q"}], "ideal": "a"}, 0.8),
        ({"chosen": [{"role": "user", "content": "q"}], "rejected": []}, 0.8),
        ({"messages": [{"role": "tool", "content": "r"}]}, 1.0),
        ({"messages": [{"role": "user", "content": "q"}], "tools": "[]x"}, 1.0),
        ({"messages": [{"role": "user", "content": "q"}], "system": "s"}, 0.3),
        ({"messages": [{"from": "human", "value": "q"}]}, 0.0),
        ({"messages": [{"role": "user", "content": [{"type": "tool_result"}]}]}, 0.0),
        ({"messages": [{"role": "context", "content": "q"}]}, 0.0),
        ({"chosen": "\n\nHuman: q\n\nAssistant: a", "rejected": "x"}, 0.0),
        ([{"role": "user", "content": "q"}], 0.4),  # MMS reads user-only lists too
        ([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}], 0.8),
        ([{"role": "assistant", "content": "a", "end_turn": True}], 0.0),  # MMS's
        ([{"from": "human", "value": "q"}], 0.0),
        ([], 0.0),
    ],
)
def test_sniff_scores(value, score):
    assert OPENAI.sniff(value).score == score


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "role",
                    "content",
                    "messages",
                    "tools",
                    "tool_calls",
                    "function",
                    "name",
                    "type",
                    "value",
                    "chosen",
                    "rejected",
                    "input",
                    "ideal",
                    "id",
                    "images",
                    "arguments",
                ]
            ),
            children,
            max_size=5,
        )
    ),
    max_leaves=20,
)
ROLE_MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "user", "assistant", "tool", "function"]), "content": JSON},
    optional={"tool_calls": JSON, "name": JSON, "tool_call_id": JSON, "function_call": JSON},
)


@settings(max_examples=100)
@given(st.one_of(JSON, st.fixed_dictionaries({"messages": st.lists(ROLE_MESSAGE, max_size=4)})))
def test_any_json_is_sniffed_and_converted_or_rejected_never_crashes(value):
    assert 0.0 <= OPENAI.sniff(value).score <= 1.0
    try:
        threads = convert_record(value)
    except RecordRejected:
        return
    for thread in threads:
        thread.validate()


# --------------------------------------------------------------------------- parquet and CLI


def test_hf_parquet_rows_with_null_fields_and_tools_as_string_or_list(tmp_path):
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}
    message_type = pa.struct(
        [
            ("role", pa.string()),
            ("content", pa.string()),
            (
                "tool_calls",
                pa.list_(
                    pa.struct(
                        [
                            ("id", pa.string()),
                            ("type", pa.string()),
                            (
                                "function",
                                pa.struct([("name", pa.string()), ("arguments", pa.string())]),
                            ),
                        ]
                    )
                ),
            ),
            ("tool_call_id", pa.string()),
        ]
    )
    messages = [
        {"role": "user", "content": "q", "tool_calls": None, "tool_call_id": None},
        {"role": "assistant", "content": None, "tool_calls": [call], "tool_call_id": None},
        {"role": "tool", "content": "2", "tool_call_id": "c1", "tool_calls": None},
        {"role": "assistant", "content": "two", "tool_calls": None, "tool_call_id": None},
    ]
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    string_tools = pa.table(
        {
            "messages": pa.array([messages], pa.list_(message_type)),
            "tools": [orjson.dumps([tool]).decode()],
            "source": [None],
        }
    )
    pq.write_table(string_tools, tmp_path / "a.parquet")
    list_tools = pa.table(
        {"messages": pa.array([messages], pa.list_(message_type)), "tools": [[tool]]}
    )
    pq.write_table(list_tools, tmp_path / "b.parquet")
    threads, rejected, stats = read_all(str(tmp_path))
    assert rejected == [] and set(stats.formats.values()) == {"openai"}
    for thread in threads:
        assert shape(thread)[1:] == [
            ("user", None, "q"),
            ("assistant", "f:json", '{"x":1}'),
            ("context", "f", "2"),
            ("assistant", "markdown", "two"),
        ]
        assert unenabled_formats(thread) == []
        assert "extra_fields" not in thread.meta  # null columns are not kept


def test_cli_converts_with_the_named_format(tmp_path):
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(
        main,
        [
            "convert",
            str(SAMPLES / "evals_samples.jsonl"),
            "-o",
            str(out),
            "--from",
            "openai",
            "--multimodal",
            "placeholder",
        ],
    )
    assert result.exit_code == 0, result.output
    lines = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert [t["messages"][-1]["content"] for t in lines] == ["Y", "Canberra"]
    assert lines[1]["meta"]["extra_fields"] == {"ideal": ["Canberra, ACT"]}


def test_ms_swift_dpo_rows_become_a_pair(tmp_path):
    """ms-swift's DPO rows: `messages` ending in the chosen answer, `rejected_response`
    the rejected one: a chosen and a rejected thread, paired."""
    path = tmp_path / "dpo.jsonl"
    messages = [
        {"role": "system", "content": "Be kind."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"},
    ]
    path.write_bytes(orjson.dumps({"messages": messages, "rejected_response": "Go away."}) + b"\n")
    (chosen, rejected), quarantined, _ = read_all(str(path))
    assert not quarantined
    assert [m.content for m in chosen.messages][-2:] == ["Hi", "Hello!"]
    assert [m.content for m in rejected.messages][-2:] == ["Hi", "Go away."]
    assert chosen.meta["pair_id"] == rejected.meta["pair_id"]
    assert (chosen.meta["preference"], rejected.meta["preference"]) == ("chosen", "rejected")


def test_a_json_file_holding_one_chat_is_one_conversation(tmp_path):
    """A .json file whose top level is one conversation's messages is one record, not a
    record per message."""
    path = tmp_path / "chat.json"
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
    path.write_bytes(orjson.dumps(messages))
    (thread,), rejected, _ = read_all(str(path))
    assert not rejected
    assert [(m.role, m.content) for m in thread.messages] == [
        ("user", "Hi"),
        ("assistant", "Hello"),
    ]
