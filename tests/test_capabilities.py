"""Capabilities: which formats a developer message enables, tool definitions, and the
synthesized developer declarations every tool-calling converter emits."""

from __future__ import annotations

import re

import pytest

from pipeline.capabilities import (
    ToolDefinitionError,
    ToolSpec,
    enabled_formats,
    parse_tool_definitions,
)
from pipeline.formats.tool_prompt import reasoning_declaration, tool_declaration


def test_inline_code_spans_enable_formats_but_fenced_code_does_not():
    text = (
        "Use `browser:json` to browse and ``calc:js`` to compute.\n"
        "```typescript\n// `hidden:json` is inside a fence\ntype A = {}\n```\n"
        "~~~\n`also_hidden`\n~~~\n"
        "Answer in `json`."
    )
    assert enabled_formats(text) == {"browser:json", "calc:js", "json"}


def test_unclosed_fence_hides_the_rest():
    assert enabled_formats("`a`\n```\n`b`") == {"a"}


SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


@pytest.mark.parametrize(
    "value",
    [
        [
            {
                "type": "function",
                "function": {"name": "search", "description": "d", "parameters": SCHEMA},
            }
        ],
        [{"name": "search", "description": "d", "parameters": SCHEMA}],
        [{"name": "search", "description": "d", "input_schema": SCHEMA}],
        [{"functionDeclarations": [{"name": "search", "description": "d", "parameters": SCHEMA}]}],
        '[{"name": "search", "description": "d", "parameters": {"type": "object", '
        '"properties": {"q": {"type": "string"}}, "required": ["q"]}}]',
    ],
    ids=["openai", "legacy", "anthropic", "gemini", "json-string"],
)
def test_every_ecosystem_tool_shape_parses_to_the_same_spec(value):
    assert parse_tool_definitions(value) == [ToolSpec("search", "d", SCHEMA)]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("[{", "not valid JSON"),
        (42, "must be a list"),
        ([{"description": "no name"}], "tools[0] has no name"),
        ([{"name": "a`b"}], "backtick"),
        (["search"], "tools[0] is not an object"),
    ],
)
def test_unreadable_tool_definitions_say_why(value, message):
    with pytest.raises(ToolDefinitionError, match=re.escape(message)):
        parse_tool_definitions(value)


TOOLS = [ToolSpec(f"tool_{i}", f"Tool number {i}.", SCHEMA) for i in range(4)]


def test_declaration_enables_each_tool_and_nothing_else():
    for thread_id in ("a", "b", "c", "d", "e"):
        text = tool_declaration(TOOLS, thread_id)
        assert enabled_formats(text) == {f"tool_{i}:json" for i in range(4)}
        assert text.count("```typescript") == 4
    jsonl = tool_declaration(TOOLS, "a", jsonl=True)
    assert enabled_formats(jsonl) == {f"tool_{i}:{s}" for i in range(4) for s in ("json", "jsonl")}


def test_declarations_are_deterministic_per_thread_and_varied_across_threads():
    assert tool_declaration(TOOLS, "thread-1") == tool_declaration(TOOLS, "thread-1")
    texts = {tool_declaration(TOOLS, f"thread-{i}") for i in range(40)}
    intros = {text.split("\n", 1)[0] for text in texts}
    orders = {tuple(text.index(f"tool_{i}:json") for i in range(4)) for text in texts}
    assert len(texts) >= 10 and len(intros) >= 3 and len(orders) >= 3
    reasons = {reasoning_declaration(f"thread-{i}") for i in range(40)}
    assert len(reasons) >= 2 and all(enabled_formats(r) == {"reasoning"} for r in reasons)


def test_backticks_in_descriptions_cannot_break_out_of_the_schema_block():
    tool = ToolSpec("run", "Runs ```code``` and `other:json`.", SCHEMA)
    assert enabled_formats(tool_declaration([tool], "x")) == {"run:json"}
