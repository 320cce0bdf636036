"""The GLM / PyALM input format (seed 004): spec-shaped histories and the real files'
shapes (single-key entries, settings.settings, system.system, ConversationTracker dumps
with !ConversationRole tags), Python function calls read with ast (never run) into tool
calls enabled by a declaration, return values as context, specific errors."""

from __future__ import annotations

from collections import Counter

import orjson
from click.testing import CliRunner

from pipeline.capabilities import enabled_formats
from pipeline.cli import main
from pipeline.formats import FORMATS
from tests.conftest import REPO, needs_shared
from tests.reading import read_all, write_records

SAMPLES = REPO / "data_samples" / "glm"
GLM = "formats/glm"
FUNCTIONS = {
    "function_calls": {
        "available_functions": [
            {
                "name": "get_weather",
                "args": [{"name": "city", "type": "str"}],
                "kwargs": [{"name": "unit", "default": "celsius"}],
                "help": "Weather now.",
            }
        ]
    }
}


def one_thread(tmp_path, record):
    threads, rejected, _ = read_all(write_records(tmp_path, record), format="glm")
    assert rejected == [], rejected
    return threads[0]


def rejection(tmp_path, record):
    threads, rejected, _ = read_all(write_records(tmp_path, record), format="glm")
    assert threads == [] and len(rejected) == 1
    return rejected[0]


def roles(thread):
    return [(m.role, m.format if m.role == "assistant" else m.name) for m in thread.messages]


def assistant_says(content):
    return {"history": [{"user": "Weather in Oslo?"}, {"assistant": {"content": content}}]}


def enabled_before(thread, index):
    enabled: set[str] = set()
    for message in thread.messages[:index]:
        if message.role == "developer":
            enabled |= enabled_formats(message.content)
    return enabled


def convert_file(path, tmp_path):
    """The one thread `mms convert` writes for the GLM file at `path`."""
    out = tmp_path / f"{path.stem}.jsonl"
    result = CliRunner().invoke(main, ["convert", str(path), "--from", "auto", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert not (tmp_path / f"{path.stem}.rejected.jsonl").exists()  # nothing quarantined
    (line,) = out.read_text().splitlines()
    return orjson.loads(line)


# tests/data/formats/glm holds hand-written stand-ins of the real files' shapes (see its
# PROVENANCE.txt); the originals, in ../shared, are converted by the last test here.


def test_evaluation_chat_shape_is_a_prompt_with_tools_and_system_info(data, tmp_path):
    thread = convert_file(data / GLM / "chat_prompt.yaml", tmp_path)
    messages = thread["messages"]
    assert [(m["role"], m.get("name")) for m in messages] == [
        ("developer", None),
        ("developer", None),
        ("context", "session"),
        ("context", "user_info"),
        ("user", None),
    ]
    system = messages[0]["content"]
    assert "Start every call with ➡️ and finish it with ⬅️, like this:" in system
    assert "➡️bar(1)⬅️\ncalls bar with 1." in system
    # [[LIST_OF_FUNCTIONS]] is the declared functions' names
    assert system.endswith("the right types:\nfeature_importance\npartial_dependence")
    assert "[[MODEL_PATH]]" in system
    enabled = enabled_formats(messages[1]["content"])
    assert {"feature_importance:json", "partial_dependence:json"} <= enabled
    assert messages[2]["content"] == "model_status: Loaded"
    assert messages[3]["content"] == "name: Amara\nrole: Analyst"
    assert messages[4]["content"] == (
        "Which features matter most for the loan decisions of applicants under 30?"
    )
    meta = thread["meta"]
    assert meta["source_format"] == "glm" and meta["prompt_only"] is True
    assert meta["message_meta"] == {"4": {"meta": {"token_count": 5}}}
    assert meta["chat_settings"]["function_calls"]["enabled"] is True
    assert any("[[MODEL_PATH]]: filled in at run time" in note for note in meta["notes"])
    assert (
        "[[FUNC_DELIMITER_START]]" in meta["extra_fields"]["system.content (before substitution)"]
    )
    assert {f["name"] for f in thread["settings"]["formats"]} == {
        "feature_importance:json",
        "partial_dependence:json",
    }


def test_tracker_dump_reads_the_conversation_role_tags(data, tmp_path):
    thread = convert_file(data / GLM / "tracker.yaml", tmp_path)
    assert [(m["role"], m["content"]) for m in thread["messages"]] == [
        ("user", "hi there"),
        (
            "assistant",
            "Hi! I can help with the lab's measurements, their plots or the papers behind "
            "them. What do you need?",
        ),
    ]
    assert thread["messages"][1]["end_turn"] is True
    meta = thread["meta"]
    assert meta["glm_shape"] == "tracker" and "prompt_only" not in meta
    assert meta["message_meta"]["1"]["metadata"]["tokens"]["total_tokens"] == 234
    assert meta["message_meta"]["1"]["processing"]["allow_response"] == "normal"


def test_samples_convert_with_the_expected_quarantine_codes():
    threads, rejected, stats = read_all(SAMPLES)
    assert stats.read_balanced and stats.records_read == 10 and len(threads) == 6
    assert set(stats.formats.values()) == {"glm"}
    assert Counter(r.code for r in rejected) == {
        "unknown_role": 2,
        "invalid_tool_call": 1,
        "invalid_tools": 1,
    }
    for thread in threads:
        for index, message in enumerate(thread.messages):
            if message.role == "assistant" and message.format != "markdown":
                assert message.format in enabled_before(thread, index) or any(
                    "never declares it" in note for note in thread.meta["notes"]
                )


def test_a_call_between_delimiters_and_its_return_value(tmp_path):
    thread = one_thread(
        tmp_path,
        {
            "settings": {"settings": FUNCTIONS},
            **assistant_says('Checking. ➡️get_weather("Oslo")⬅️\n⬅️-2 C➡️ Cold!'),
        },
    )
    assert roles(thread)[2:] == [
        ("assistant", "markdown"),
        ("assistant", "get_weather:json"),
        ("context", "get_weather"),
        ("assistant", "markdown"),
    ]
    call, result, after = thread.messages[3:]
    assert orjson.loads(call.content) == {"city": "Oslo"} and call.end_turn is False
    assert result.content == "-2 C" and after.content == "Cold!"
    assert "get_weather:json" in enabled_before(thread, 3)
    assert thread.meta["message_meta"]["3"] == {"call_code": 'get_weather("Oslo")'}


def test_positional_arguments_are_named_after_the_declared_parameters(tmp_path):
    thread = one_thread(
        tmp_path,
        {"settings": FUNCTIONS, **assistant_says("➡️get_weather('Oslo', 'kelvin')⬅️")},
    )
    assert orjson.loads(thread.messages[-1].content) == {"city": "Oslo", "unit": "kelvin"}
    declaration = thread.messages[0].content
    assert "unit?: string" in declaration or "unit?: unknown" in declaration


def test_undeclared_positional_arguments_are_kept_as_args_and_kwargs(tmp_path):
    thread = one_thread(tmp_path, assistant_says("+++lookup(1, [2, 3], key=None)---"))
    assert orjson.loads(thread.messages[-1].content) == {
        "args": [1, [2, 3]],
        "kwargs": {"key": None},
    }
    assert any("never declares it" in note for note in thread.meta["notes"])


def test_a_call_that_is_not_plain_literals_stays_text_and_is_listed(tmp_path):
    content = "Here: ➡️plot(df.head(), color=pick())⬅️ done"
    thread = one_thread(tmp_path, assistant_says(content))
    assert roles(thread)[1:] == [("assistant", "markdown")]
    assert thread.messages[1].content == content
    (entry,) = thread.meta["unrenderable"]
    assert entry["construct"] == "df.head()"
    assert entry["where"] == "history[1].assistant.content"


def test_call_code_is_parsed_never_run(tmp_path):
    marker = tmp_path / "ran"
    thread = one_thread(
        tmp_path,
        assistant_says(f"➡️__import__('os').system('touch {marker}')⬅️ and ➡️open('{marker}', 'w')⬅️"),
    )
    assert not marker.exists()
    assert thread.meta["unrenderable"][0]["reason"] == (
        "function call not read: not a call of a named function"
    )
    assert thread.messages[-1].format == "open:json"
    assert orjson.loads(thread.messages[-1].content) == {"args": [str(marker), "w"], "kwargs": {}}


def test_listed_function_calls_and_pyalm_duplicates(tmp_path):
    record = {
        "history": [
            {"user": "Weather?"},
            {
                "assistant": {
                    "content": "➡️get_weather('Oslo')⬅️\n⬅️-2 C➡️",
                    "function_calls": {"original_call": "get_weather('Oslo')", "return": "-2 C"},
                }
            },
            {
                "assistant": {
                    "content": "And Rome:",
                    "function_calls": [
                        {"name": "get_weather", "parameters": {"city": "Rome"}, "return": 18}
                    ],
                }
            },
        ],
        "settings": FUNCTIONS,
    }
    thread = one_thread(tmp_path, record)
    assert roles(thread)[2:] == [
        ("assistant", "get_weather:json"),
        ("context", "get_weather"),
        ("assistant", "markdown"),
        ("assistant", "get_weather:json"),
        ("context", "get_weather"),
    ]
    assert thread.messages[-1].content == "18"
    assert (
        "history[1].assistant.function_calls repeats calls written in the text; kept once"
        in (thread.meta["notes"])
    )


def test_sentiment_feedback_and_user_interactions(tmp_path):
    record = {
        "history": [
            {"role": "user", "content": "Hi", "sentiment": "curious"},
            {"role": "user_interaction", "clicked": "pricing"},
            {"role": "assistant", "content": "Hello", "feedback": {"stars": 4}},
            {"user_interaction": {"content": "Opened the FAQ", "meta": {"page": 2}}},
        ]
    }
    thread = one_thread(tmp_path, record)
    assert roles(thread) == [
        ("user", None),
        ("context", "user_interaction"),
        ("assistant", "markdown"),
        ("context", "user_interaction"),
    ]
    assert thread.messages[1].content == "clicked: pricing"
    assert thread.meta["message_meta"] == {
        "0": {"sentiment": "curious"},
        "2": {"feedback": {"stars": 4}},
        "3": {"meta": {"page": 2}},
    }


def test_user_initiated_calls_become_context(tmp_path):
    record = {
        "history": [
            {
                "user": {
                    "content": "Show my orders",
                    "function_calls": {"name": "orders", "parameters": {}, "return": "[]"},
                }
            }
        ]
    }
    thread = one_thread(tmp_path, record)
    assert roles(thread) == [("user", None), ("context", "orders"), ("context", "orders")]
    assert orjson.loads(thread.messages[1].content) == {"called_by": "user", "arguments": {}}
    assert thread.meta["prompt_only"] is True


def test_delimiters_named_in_settings_replace_the_defaults(tmp_path):
    record = {
        "settings": {"atomic_sequences": {"functions": ["<f>", "</f>"]}},
        "system": {"content": "Call with [[FUNC_DELIMITER_START]]f()[[FUNC_DELIMITER_END]]."},
        **assistant_says("➡️a()⬅️ <f>b(x=1)</f>"),
    }
    thread = one_thread(tmp_path, record)
    assert thread.messages[0].content == "Call with <f>f()</f>."
    assert roles(thread)[-2:] == [("assistant", "markdown"), ("assistant", "b:json")]
    assert thread.messages[-2].content == "➡️a()⬅️"


def test_disabled_function_calls_declare_nothing(tmp_path):
    settings = {"function_calls": {**FUNCTIONS["function_calls"], "enabled": False}}
    record = {
        "settings": settings,
        "system": "Tools: [[LIST_OF_FUNCTIONS]]",
        **assistant_says("Hi"),
    }
    thread = one_thread(tmp_path, record)
    assert thread.messages[0].content == "Tools: No functions available"
    assert thread.settings is None
    assert any("function calls are disabled" in note for note in thread.meta["notes"])


def test_tracker_roles_code_and_included_functions(tmp_path):
    record = {
        "system_message": "Be brief. [[LIST_OF_FUNCTIONS]]",
        "tracker": [
            {"role": "USER", "content": "2+2?", "index": 0},
            {
                "role": "ASSISTANT",
                "content": "Computing.",
                "code": "add(2, 2)",
                "index": 1,
                "processing": {"included_functions": ["add"]},
            },
            {"role": "FUNCTION", "content": "4", "index": 2},
            {"role": "SYSTEM", "content": "Answer now.", "index": 3},
            {"role": "assistant", "content": "4", "index": 7},
        ],
    }
    thread = one_thread(tmp_path, record)
    assert roles(thread) == [
        ("developer", None),
        ("developer", None),
        ("user", None),
        ("assistant", "markdown"),
        ("assistant", "add:json"),
        ("context", "add"),
        ("developer", None),
        ("assistant", "markdown"),
    ]
    assert thread.messages[0].content == "Be brief. add"
    assert "add:json" in enabled_formats(thread.messages[1].content)
    assert thread.meta["extra_fields"]["tracker[4].index"] == 7


def test_bad_records_name_the_exact_place(tmp_path):
    robot = rejection(tmp_path, {"history": [{"user": "hi"}, {"robot": {"content": "beep"}}]})
    assert (robot.code, robot.message) == (
        "unknown_role",
        "history[1] has role 'robot' (expected user, assistant, user_interaction)",
    )
    role = rejection(tmp_path, {"history": [{"role": "bot", "content": "x"}]})
    assert role.message == "history[0] has role 'bot' (expected user, assistant, user_interaction)"
    two = rejection(tmp_path, {"history": [{"user": "a", "assistant": "b"}]})
    assert two.code == "missing_field" and two.message.startswith("history[0]: ")
    content = rejection(tmp_path, {"history": [{"user": {"content": 5}}]})
    assert content.message == "history[0].user.content: 5 is not of type 'string', 'null'"
    tools = rejection(
        tmp_path,
        {"history": [{"user": "x"}], "settings": {"function_calls": {"available_functions": [3]}}},
    )
    assert tools.code == "invalid_tools"
    assert tools.message.startswith("settings.function_calls.available_functions[0]: ")


def test_sniff_claims_glm_shapes_only():
    sniff = FORMATS["glm"].sniff
    assert sniff({"history": [{"user": {"content": "x"}}]}).score == 1.0
    assert sniff({"tracker": [{"role": "USER", "content": "x"}]}).score == 1.0
    assert sniff({"history": [["instruction", "response"]]}).score == 0.0
    assert sniff({"history": [{"from": "human", "value": "x"}]}).score == 0.0
    assert sniff({"messages": [{"role": "user", "content": "x"}]}).score == 0.0


def test_the_original_files_convert_with_nothing_quarantined(tmp_path):
    """The real PyALM and RIXA files the stand-ins copy the shape of: each is one thread,
    the chat a prompt with its two functions declared, the tracker dump a conversation."""
    originals = ("Evaluation__chat.yaml", "tracker.yaml")
    shared = needs_shared(*(f"{GLM}/{name}" for name in originals))
    chat, tracker = (convert_file(shared / GLM / name, tmp_path) for name in originals)
    assert chat["meta"]["prompt_only"] is True
    assert {f["name"] for f in chat["settings"]["formats"]} == {
        "ask_weather:json",
        "find_recipe:json",
    }
    assert "➡️foo()⬅️" in chat["messages"][0]["content"]
    assert [m["role"] for m in tracker["messages"]] == ["user", "assistant"]
    assert tracker["meta"]["glm_shape"] == "tracker"
