"""DESIGN §5 on real tool-calling data: convert, read the MMS threads back, and check that
every tool the assistant calls was enabled by an earlier developer message (and named in
settings), and that every tool result is a context message named after its tool."""

from __future__ import annotations

import pytest

from pipeline import convert, read
from pipeline.capabilities import enabled_formats
from pipeline.jobs.read import ReadSpec

REAL_TOOL_FILES = [
    "realdata/llamafactory/glaive_toolcall_en_demo.json",
    "realdata/llamafactory/glaive_toolcall_zh_demo.json",
    "realdata/llamafactory/reason_tool_use_demo_50.jsonl",
    "realdata/functionary/test_case.json",
    "realdata/functionary/test_case_v1.json",
    "realdata/functionary/test_case_v2.json",
    "realdata/functionary/test_case_vision.json",
    "realdata/openai_finetune_examples/weather_chat_fine_tuning.jsonl",
]


@pytest.mark.parametrize("relative", REAL_TOOL_FILES)
def test_every_tool_call_is_enabled_by_an_earlier_developer_message(data, tmp_path, relative):
    out = tmp_path / "threads.jsonl"
    result = convert(str(data / relative), out)
    assert result.account.balanced and result.account.threads > 0
    assert result.account.quarantined_total == 0, relative
    calls = 0
    for thread in read(str(out), ReadSpec("mms")):
        enabled: set[str] = set()
        settings = {f.name for f in thread.settings.formats} if thread.settings else set()
        notes = " ".join(thread.meta.get("notes", []))
        for message in thread.messages:
            if message.role in ("developer", "platform"):
                enabled |= enabled_formats(message.content)
            if message.role == "assistant" and message.format.endswith(":json"):
                calls += 1
                tool = message.format.removesuffix(":json")
                if f"tool {tool!r} is called but the source never declares it" in notes:
                    continue
                assert message.format in enabled, (thread.id, message.format)
                assert message.format in settings, (thread.id, message.format)
                assert message.end_turn is False
        for previous, message in zip(thread.messages, thread.messages[1:], strict=False):
            if message.role == "context" and message.name is None:
                assert "a tool result follows no tool call" in notes, thread.id
            elif message.role == "context" and previous.role == "assistant":
                assert previous.format == f"{message.name}:json", (thread.id, message.name)
    assert calls > 0, f"{relative}: no tool calls found"
