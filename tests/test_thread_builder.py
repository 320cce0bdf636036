"""The mapping rules every format adapter shares (ThreadBuilder): tool results named
after their call, parallel calls, end_turn, declarations, reasoning, media, errors."""

from __future__ import annotations

import inspect

import pytest

from pipeline.capabilities import ToolSpec, enabled_formats
from pipeline.formats import ConvertOptions
from pipeline.formats.builder import ThreadBuilder
from pipeline.quarantine import RecordRejected
from pipeline.sources import Record

RECORD = Record("data/x.jsonl", "data/x.jsonl:7", None, None)
WEATHER = ToolSpec("get_weather", "Weather now.", {"type": "object", "properties": {}})


def builder(**options: str) -> ThreadBuilder:
    return ThreadBuilder(RECORD, "test", ConvertOptions(**options), thread_id="t-1")


def shape(thread) -> list[tuple]:
    return [(m.role, m.format or m.name, m.content, m.end_turn) for m in thread.messages]


def parallel_weather(b: ThreadBuilder) -> None:
    b.declare_tools([WEATHER])
    b.user("Paris and Rome?")
    b.assistant("Checking both.")
    b.tool_call("get_weather", '{"city": "Paris"}', "c1")
    b.tool_call("get_weather", {"city": "Rome"}, "c2")
    b.tool_result("25C", call_id="c2")
    b.tool_result("20C", call_id="c1")
    b.assistant("Paris 20C, Rome 25C.")


def test_parallel_calls_are_sequenced_with_their_results_by_id():
    b = builder()
    parallel_weather(b)
    thread = b.build()
    assert shape(thread)[1:] == [
        ("user", None, "Paris and Rome?", None),
        ("assistant", "markdown", "Checking both.", False),
        ("assistant", "get_weather:json", '{"city":"Paris"}', False),
        ("context", "get_weather", "20C", None),
        ("assistant", "get_weather:json", '{"city":"Rome"}', False),
        ("context", "get_weather", "25C", None),
        ("assistant", "markdown", "Paris 20C, Rome 25C.", True),
    ]
    assert thread.meta["message_meta"]["3"] == {"tool_call_id": "c1"}
    assert [f.name for f in thread.settings.formats] == ["get_weather:json"]
    assert (
        thread.settings.formats[0].halt_on_completion
        and thread.settings.formats[0].sampler == "json"
    )


def test_parallel_calls_as_jsonl_option():
    b = builder(parallel_calls="jsonl")
    parallel_weather(b)
    thread = b.build()
    assert shape(thread)[3] == (
        "assistant",
        "get_weather:jsonl",
        '{"city":"Paris"}\n{"city":"Rome"}',
        False,
    )
    assert "get_weather:jsonl" in enabled_formats(thread.messages[0].content)


def test_declaration_follows_the_system_prompt_and_enables_every_call():
    b = builder()
    b.developer("You are terse.")
    parallel_weather(b)
    thread = b.build()
    assert thread.messages[0].content == "You are terse."
    assert thread.messages[1].role == "developer"
    enabled = enabled_formats(thread.messages[1].content)
    calls = {m.format for m in thread.messages if m.format and m.format.endswith(":json")}
    assert calls <= enabled


def test_result_for_an_unknown_call_id_is_rejected_with_the_id():
    b = builder()
    b.user("hi")
    b.tool_call("get_weather", "{}", "call_1")
    b.tool_result("sunny", call_id="call_7")
    with pytest.raises(RecordRejected) as err:
        b.build()
    assert err.value.code == "unknown_tool_call"
    assert "tool result for unknown call id call_7" in err.value.message


def test_results_without_ids_answer_the_oldest_pending_call():
    b = builder()
    b.user("go")
    b.tool_call("a", "{}")
    b.tool_call("b", "{}")
    b.tool_result("ra")
    b.tool_result("rb")
    names = [m.name for m in b.build().messages if m.role == "context"]
    assert names == ["a", "b"]


def test_end_turn_only_before_user_or_at_the_end_never_for_calls_or_reasoning():
    b = builder()
    b.user("q")
    b.reasoning("think")
    b.assistant("a1")
    b.context("note", "doc")
    b.assistant("a2")
    b.user("q2")
    b.tool_call("t", "{}")
    thread = b.build()
    flags = [(m.format, m.end_turn) for m in thread.messages if m.role == "assistant"]
    assert flags == [
        ("reasoning", False),
        ("markdown", False),
        ("markdown", True),
        ("t:json", False),
    ]
    assert enabled_formats(thread.messages[0].content) == {"reasoning"}
    assert [f.name for f in thread.settings.formats] == ["reasoning"]


def test_reasoning_can_be_dropped_and_says_so():
    b = builder(reasoning="drop")
    b.user("q")
    b.reasoning("think")
    b.assistant("a")
    thread = b.build()
    assert [m.role for m in thread.messages] == ["user", "assistant"]
    assert thread.settings is None
    assert any("reasoning" in note for note in thread.meta["notes"])


@pytest.mark.parametrize(
    ("mode", "content"),
    [("drop", "What is this?"), ("placeholder", "[image_url]\n\nWhat is this?")],
)
def test_media_parts_are_dropped_or_replaced_and_counted(mode, content):
    b = builder(multimodal=mode)
    parts = [
        {"type": "image_url", "image_url": {"url": "x.png"}},
        {"type": "text", "text": "What is this?"},
    ]
    b.user(b.text(parts, "messages[0].content"))
    b.assistant("A cat.")
    thread = b.build()
    assert thread.messages[0].content == content
    assert any("1 image_url part(s)" in note for note in thread.meta["notes"])


def test_arguments_that_are_not_json_are_kept_raw_and_noted():
    b = builder()
    b.user("q")
    b.tool_call("t", "{city: Paris}")
    b.tool_call("t", '"{\\"a\\": 1}"')
    thread = b.build()
    assert [m.content for m in thread.messages[1:]] == ["{city: Paris}", '{"a":1}']
    notes = " ".join(thread.meta["notes"])
    assert "not valid JSON" in notes and "encoded twice" in notes


def test_empty_conversation_is_rejected():
    with pytest.raises(RecordRejected) as err:
        builder().build()
    assert err.value.code == "empty_conversation"


def test_lineage_and_kept_fields_land_in_meta():
    b = builder()
    b.user("q", meta={"weight": 0})
    b.keep("custom", {"a": 1})
    meta = b.build().meta
    assert meta["source"] == "data/x.jsonl" and meta["locator"] == "data/x.jsonl:7"
    assert meta["source_format"] == "test"
    assert meta["extra_fields"] == {"custom": {"a": 1}}
    assert meta["message_meta"] == {"0": {"weight": 0}}


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


@pytest.mark.parametrize("method", MESSAGE_METHODS)
def test_message_meta_is_one_mapping_never_keyword_arguments(method):
    """A source's keys reach a message only as its `meta` mapping, so none can
    set a parameter (format, weight, name, call_id) by name: no method takes **kwargs."""
    parameters = inspect.signature(getattr(ThreadBuilder, method)).parameters.values()
    assert all(p.kind is not inspect.Parameter.VAR_KEYWORD for p in parameters)
    assert parameters and [p.name for p in parameters][-1] == "meta"
    assert list(parameters)[-1].kind is inspect.Parameter.KEYWORD_ONLY


def test_message_meta_keys_named_like_fields_stay_meta():
    b = builder(parallel_calls="jsonl")
    stray = {"format": "evil:json", "weight": 0, "name": None, "call_id": "x", "end_turn": 1}
    b.user("q", meta=stray)
    b.tool_call("t", "{}", "c1", meta=stray)
    b.tool_call("t", "{}", "c2", meta=stray)
    b.tool_result("r", call_id="c1", meta=stray)
    b.assistant("a", meta=stray)
    thread = b.build()
    assert [(m.role, m.format, m.end_turn, m.weight, m.name) for m in thread.messages] == [
        ("user", None, None, None, None),
        ("assistant", "t:jsonl", False, None, None),
        ("context", None, None, None, "t"),
        ("assistant", "markdown", True, None, None),
    ]
    assert thread.meta["message_meta"] == {
        "0": stray,
        "1": {**stray, "tool_call_ids": ["c1", "c2"]},
        "2": {"tool_call_id": "c1", **stray},
        "3": stray,
    }
    assert "tool_call_ids" not in stray  # the caller's mapping is copied, never changed


def test_unread_fields_are_kept_in_their_order_under_their_path():
    b = builder()
    b.user("q")
    record = {"zeta": 1, "messages": [], "alpha": None, "id": "r-1"}
    message = {"role": "user", "name": "ann", "content": "q"}
    b.keep_unread(record, ("messages", "id"))
    b.keep_unread(message, ("role", "content"), "messages[0]")
    b.keep_unread({"wrapper": True})
    extra = b.build().meta["extra_fields"]
    assert list(extra.items()) == [
        ("zeta", 1),
        ("alpha", None),
        ("messages[0].name", "ann"),
        ("wrapper", True),
    ]


def test_calls_of_undeclared_tools_are_noted():
    b = builder()
    b.declare_tools([WEATHER])
    b.user("q")
    b.tool_call("get_weather", "{}")
    b.tool_call("lookup", "{}")
    notes = b.build().meta["notes"]
    assert [n for n in notes if "never declares" in n] == [
        "tool 'lookup' is called but the source never declares it; its calls are not enabled "
        "by any developer message"
    ]


def test_prompt_only_threads_say_so_and_why():
    b = builder()
    b.developer("Summarise the text.")
    b.user("Some text.")
    b.prompt_only("the assistant turn is to be generated ([[AI]] at line 4)")
    thread = b.build()
    assert [m.role for m in thread.messages] == ["developer", "user"]
    assert thread.meta["prompt_only"] is True
    assert thread.meta["notes"] == ["the assistant turn is to be generated ([[AI]] at line 4)"]


def test_unrenderable_constructs_are_listed_once():
    b = builder()
    b.user("Hi")
    for _ in range(2):
        b.unrenderable("$if: this.file", "line 3", "directives are never run")
    assert b.build().meta["unrenderable"] == [
        {"construct": "$if: this.file", "where": "line 3", "reason": "directives are never run"}
    ]


def test_respond_in_enables_the_format_with_its_schema_after_the_prompt():
    b = builder()
    b.developer("Extract the result.")
    b.user("1 + 1")
    b.respond_in("json", schema={"type": "object", "properties": {"result": {"type": "number"}}})
    thread = b.build()
    assert [m.role for m in thread.messages] == ["developer", "developer", "user"]
    declaration = thread.messages[1].content
    assert "json" in enabled_formats(declaration)
    assert "result?: number" in declaration and "```typescript" in declaration
    assert thread.meta["response_format"] == "json"


def test_respond_in_states_allowed_values_without_enabling_them():
    b = builder()
    b.developer("Classify the sentiment.")
    b.respond_in("plaintext", allowed_values=["positive", "negative"])
    thread = b.build()
    declaration = thread.messages[-1].content
    assert enabled_formats(declaration) == {"plaintext"}
    assert '"positive", "negative"' in declaration


def test_respond_in_adds_nothing_when_the_prompt_already_enables_the_format():
    b = builder()
    b.developer("Answer in `python` only.")
    b.user("Sort a list.")
    b.respond_in("python")
    thread = b.build()
    assert [m.content for m in thread.messages] == ["Answer in `python` only.", "Sort a list."]
    assert thread.meta["response_format"] == "python"


def test_record_notes_from_the_reader_reach_the_thread():
    record = Record("p.json", "p.json", None, None, notes=("accepted 1 trailing comma(s)",))
    b = ThreadBuilder(record, "test", ConvertOptions(), thread_id="t")
    b.developer("x")
    assert b.build().meta["notes"] == ["accepted 1 trailing comma(s)"]


@pytest.mark.parametrize(
    "arguments",
    [
        '{"n": 123456789012345678901234, "m": -9223372036854775809}',
        '"{\\"n\\": 123456789012345678901234, \\"m\\": -9223372036854775809}"',
    ],
    ids=["json", "json-encoded-twice"],
)
def test_call_arguments_keep_integers_beyond_64_bits_exact(arguments):
    b = builder()
    b.declare_tools([WEATHER])
    b.user("Count.")
    b.tool_call("get_weather", arguments, "c1")
    b.tool_result("ok", call_id="c1")
    b.assistant("Done.")
    call = next(m for m in b.build().messages if m.format == "get_weather:json")
    assert call.content == '{"m":-9223372036854775809,"n":123456789012345678901234}'
