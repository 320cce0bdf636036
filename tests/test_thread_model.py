"""The thread model: JSON round trips, validation messages naming the exact field, Arrow."""

from __future__ import annotations

import orjson
import pyarrow as pa
import pytest

from pipeline import (
    THREAD_ARROW_SCHEMA,
    Format,
    Message,
    SystemSettings,
    Thread,
    ThreadValidationError,
    threads_from_arrow,
    threads_to_arrow,
    validate_thread_dict,
)


def full_thread() -> Thread:
    return Thread(
        id="t-1",
        messages=[
            Message.platform("Be helpful."),
            Message.developer("Use the `search:json` tool."),
            Message.user("Find the tallest building."),
            Message.assistant(
                '{"query": "tallest building"}', format="search:json", end_turn=False
            ),
            Message.context("1. Burj Khalifa", name="search"),
            Message.context("unnamed"),
            Message.assistant("The **Burj Khalifa**."),
        ],
        settings=SystemSettings(
            (
                Format("search:json", halt_on_completion=True, sampler="json"),
                Format("custom", sampler={"type": "regex", "pattern": "^a+$"}),
                Format("markdown"),
            )
        ),
        meta={"source": "x.jsonl", "nested": {"k": [1, 2.5, None]}},
    )


def test_json_round_trip_keeps_every_field_in_spec_order():
    thread = full_thread()
    data = orjson.loads(thread.to_json())
    assert list(data) == ["id", "messages", "settings", "meta"]
    assert list(data["messages"][3]) == ["role", "format", "content", "end_turn"]
    assert list(data["messages"][4]) == ["role", "name", "content"]
    assert data["messages"][5]["name"] is None
    assert Thread.from_dict(data) == thread
    thread.validate()


def test_assistant_format_defaults_to_markdown_and_bare_string_formats():
    thread = Thread.from_dict(
        {
            "id": "a",
            "messages": [{"role": "assistant", "content": "hi", "end_turn": True}],
            "settings": {"formats": "json"},
        }
    )
    assert thread.messages[0].format == "markdown"
    assert thread.settings == SystemSettings((Format("json"),))


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            {
                "id": "a",
                "messages": [
                    {"role": "user", "content": "x"},
                    {"role": "user", "content": "y"},
                    {"role": "user", "content": "z"},
                    {"role": "assistant", "content": "w", "end_turn": "yes"},
                ],
            },
            ['messages[3].end_turn: expected bool, got "yes"'],
        ),
        (
            {"id": "a", "messages": [{"role": "robot", "content": "x"}]},
            [
                'messages[0].role: unknown role "robot" '
                "(expected one of platform, developer, user, assistant, context)"
            ],
        ),
        (
            {"id": "a", "messages": [{"role": "user", "content": "x", "format": "json"}]},
            ["messages[0].format: not allowed on a user message"],
        ),
        (
            {"id": "a", "messages": [{"role": "assistant", "content": 3}]},
            [
                "messages[0].content: expected string, got 3",
                "messages[0].end_turn: required field is missing",
            ],
        ),
        (
            {"messages": []},
            ["id: required field is missing", "messages: must contain at least one message"],
        ),
        (
            {
                "id": "a",
                "messages": [{"role": "context", "name": "", "content": "x"}],
                "settings": {"formats": [{"name": "j", "sampler": "bnf", "halt": True}]},
                "meta": [],
            },
            [
                "messages[0].name: must not be empty",
                "settings.formats[0].halt: unknown field",
                'settings.formats[0].sampler: expected "json", "jsonl", an object or null, got "bnf"',
                "meta: expected object, got []",
            ],
        ),
        ("just text", ['thread: expected object, got "just text"']),
    ],
)
def test_validation_names_the_exact_field(data, expected):
    assert [str(e) for e in validate_thread_dict(data)] == expected
    with pytest.raises(ThreadValidationError) as info:
        Thread.from_dict(data)
    assert str(info.value) == "; ".join(expected)


def test_validation_error_kinds_separate_roles_from_fields():
    errors = validate_thread_dict(
        {"id": "a", "messages": [{"role": "bot", "content": ""}, {"role": "user"}], "x": 1}
    )
    assert [(e.path, e.kind) for e in errors] == [
        ("x", "not_allowed"),
        ("messages[0].role", "unknown_role"),
        ("messages[1].content", "missing"),
    ]


def test_validate_catches_a_thread_built_wrongly_in_python():
    thread = Thread("a", [Message("user", "x", format="json")])
    with pytest.raises(ThreadValidationError, match=r"messages\[0\]\.format"):
        thread.validate()


def test_arrow_round_trip_uses_list_of_struct_and_json_meta():
    threads = [full_thread(), Thread("b", [Message.user("only a user")])]
    table = threads_to_arrow(threads)
    assert table.schema == THREAD_ARROW_SCHEMA
    assert table.schema.field("messages").type == pa.list_(
        pa.struct(
            [
                ("role", pa.string()),
                ("content", pa.string()),
                ("format", pa.string()),
                ("end_turn", pa.bool_()),
                ("name", pa.string()),
                ("weight", pa.float64()),
            ]
        )
    )
    assert table.column("meta").to_pylist()[0] == orjson.dumps(threads[0].meta).decode()
    assert table.column("settings").to_pylist()[1] is None
    assert threads_from_arrow(table) == threads
