# ruff: noqa: RUF001 (the test texts are in Chinese, Greek and other scripts)
"""Floors for the language stage on the labelled real threads
(tests/curation_accuracy_language.py), set a little below what it measures, and the rules
those figures rest on: code is never dropped for its language, short East Asian text is
told by its script, and the converter's tool declaration never votes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pipeline.curation.language import message_language
from tests.curation_accuracy_language import figures
from tests.test_curation import dropped_of, mms, threads_of, write

FLOORS = {"en": 0.98, "zh": 0.98, "code": 0.95, "ja": 0.8, "hi": 0.8, "ar": 0.75}
"""Accuracy floors (measured: 1.0 each); a language with one or two threads must be right."""


@pytest.fixture(scope="module")
def measured() -> dict[tuple[str, str], dict[str, Any]]:
    return {(row["name"], row["measure"]): row for row in figures()}


def test_code_threads_are_never_dropped_by_a_language_list(measured):
    row = measured[("code", "code_dropped")]
    assert row["count"] >= 50
    assert row["value"] == 0


def test_each_language_is_named_right_above_its_floor(measured):
    for (name, measure), row in measured.items():
        if measure != "accuracy" or ":" in name:
            continue
        floor = FLOORS.get(name, 1.0)
        assert row["value"] >= floor, (name, row)


def test_short_chinese_prompts_are_all_chinese(measured):
    row = measured[("zh:short", "accuracy")]
    assert row["count"] >= 30
    assert row["value"] == 1.0


def test_chinese_threads_declaring_english_tools_are_chinese(measured):
    row = measured[("zh:tools", "accuracy")]
    assert row["count"] >= 30
    assert row["value"] == 1.0


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("好", "zh"),
        ("他不想来。", "zh"),
        ("什么是API？", "zh"),
        ("究極バトル!!", "ja"),
        ("東京タワー", "ja"),
        ("안녕하세요", "ko"),
        ("สวัสดีครับ", "th"),
        ("Γεια σου", "el"),
        ("Բարեւ", "hy"),
        ("გამარჯობა", "ka"),
        ("שלום", "he"),
        ("नमस्ते", "hi"),
        ("வணக்கம்", "ta"),
        ("مرحبا", None),  # Arabic script writes Persian and Urdu too: not told by script
        ("Привет", None),  # so does Cyrillic (Russian, Ukrainian, Bulgarian ...)
    ],
)
def test_short_text_is_told_by_a_script_only_one_language_writes(text, language):
    assert message_language(text) == language


def test_a_code_only_thread_is_kept_and_named_code(tmp_path: Path):
    code = "def area(r):\n    return 3.14159 * r ** 2\n\nprint(area(2))"
    record = {
        "messages": [
            {"role": "user", "content": code},
            {"role": "assistant", "content": "SELECT name, area FROM circles\nWHERE r > 1;"},
        ]
    }
    for languages in ("en", "zh"):
        out = tmp_path / f"{languages}.jsonl"
        result = mms(
            "curate", write(tmp_path / "in.jsonl", [record]), "-o", out, "--languages", languages
        )
        assert result.exit_code == 0, result.output
        assert [t["meta"]["language"] for t in threads_of(out)] == ["code"]
        assert dropped_of(out) == []


def test_the_converters_tool_declaration_does_not_vote(tmp_path: Path):
    """A glaive_toolcall_zh-like record: the converter declares its tools in English, the
    conversation is Chinese and short; the thread is Chinese."""
    tools = [
        {
            "name": "get_news",
            "description": "Get the latest news headlines for a category and country",
            "parameters": {
                "type": "object",
                "properties": {"category": {"type": "string", "description": "The category"}},
                "required": ["category"],
            },
        }
    ]
    record = {
        "conversations": [
            {"from": "human", "value": "你好，我想看新闻。"},
            {
                "from": "function_call",
                "value": json.dumps({"name": "get_news", "arguments": {"category": "政治"}}),
            },
            {"from": "observation", "value": json.dumps({"headlines": ["头条"]})},
            {"from": "gpt", "value": "这是今天的头条。"},
        ],
        "tools": json.dumps(tools),
    }
    out = tmp_path / "out.jsonl"
    result = mms("curate", write(tmp_path / "in.json", [record]), "-o", out, "--languages", "zh")
    assert result.exit_code == 0, result.output
    (kept,) = threads_of(out)
    assert "declaration" in kept["meta"]
    assert kept["meta"]["language"] == "zh"
