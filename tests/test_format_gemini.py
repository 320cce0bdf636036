"""The Gemini input format: Vertex AI tuning records and Gemini API batch lines, parts
(text, thoughts, function calls and responses, media, code execution), snake_case keys,
Gemini schema types, options and specific errors."""

from __future__ import annotations

from collections import Counter

import pytest

from pipeline.capabilities import enabled_formats
from pipeline.formats import FORMATS
from pipeline.formats.base import ConvertOptions
from pipeline.mms import Media
from tests.conftest import REPO
from tests.reading import read_all, write_records

SAMPLES = REPO / "data_samples" / "gemini"


def one_thread(tmp_path, record, **kwargs):
    threads, rejected, _ = read_all(write_records(tmp_path, record), format="gemini", **kwargs)
    assert rejected == [], rejected
    return threads[0]


def rejection(tmp_path, record):
    threads, rejected, _ = read_all(write_records(tmp_path, record), format="gemini")
    assert threads == [] and len(rejected) == 1
    return rejected[0]


def roles(thread):
    return [(m.role, m.format if m.role == "assistant" else m.name) for m in thread.messages]


def user(text):
    return {"role": "user", "parts": [{"text": text}]}


def test_samples_convert_with_the_expected_quarantine_codes():
    threads, rejected, stats = read_all(SAMPLES)
    assert stats.read_balanced and stats.records_read == 9 and len(threads) == 8
    assert set(stats.formats.values()) == {"gemini"}
    assert Counter(r.code for r in rejected) == {"unknown_role": 1}
    assert {"request-1", "request-2", "request-3"} <= {t.id for t in threads}


def test_function_declarations_with_gemini_types_render_as_typescript(tmp_path):
    thread = one_thread(
        tmp_path,
        {
            "contents": [
                user("Stock of the Pixel?"),
                {
                    "role": "model",
                    "parts": [{"functionCall": {"name": "sku", "args": {"name": "Pixel"}}}],
                },
                {
                    "role": "function",
                    "parts": [{"functionResponse": {"name": "sku", "response": {"count": 3}}}],
                },
                {"role": "model", "parts": [{"text": "3 left."}]},
            ],
            "tools": [
                {
                    "functionDeclarations": [
                        {
                            "name": "sku",
                            "parameters": {
                                "type": "OBJECT",
                                "properties": {"name": {"type": "STRING"}},
                                "required": ["name"],
                            },
                        }
                    ]
                }
            ],
        },
    )
    assert "name: string," in thread.messages[0].content
    assert roles(thread)[1:] == [
        ("user", None),
        ("assistant", "sku:json"),
        ("context", "sku"),
        ("assistant", "markdown"),
    ]
    assert thread.messages[3].content == '{"count":3}'
    assert thread.messages[-1].end_turn is True and thread.messages[2].end_turn is False


def test_call_ids_match_results_and_unknown_ids_are_rejected(tmp_path):
    call = {"role": "model", "parts": [{"function_call": {"id": "c1", "name": "f", "args": {}}}]}
    answer = {"function_response": {"id": "c1", "name": "f", "response": {"ok": True}}}
    thread = one_thread(
        tmp_path, {"contents": [user("go"), call, {"role": "user", "parts": [answer]}]}
    )
    assert thread.messages[-1].name == "f"
    assert thread.meta["message_meta"][str(len(thread.messages) - 1)] == {"tool_call_id": "c1"}
    wrong = {"function_response": {"id": "c9", "name": "f", "response": {}}}
    rejected = rejection(
        tmp_path, {"contents": [user("go"), call, {"role": "user", "parts": [wrong]}]}
    )
    assert rejected.code == "unknown_tool_call" and "c9" in rejected.message


def enabled(thread):
    return enabled_formats("\n".join(m.content for m in thread.messages if m.role == "developer"))


def test_undeclared_function_and_code_execution_are_noted_not_declared(tmp_path):
    code = {"executableCode": {"language": "PYTHON", "code": "print(1)"}}
    record = {
        "contents": [
            user("go"),
            {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}, code]},
            {"role": "user", "parts": [{"codeExecutionResult": {"output": "1\n"}}]},
        ],
        "tools": [{"functionDeclarations": [{"name": "g"}]}],
    }
    thread = one_thread(tmp_path, record)
    assert roles(thread)[-3:] == [
        ("assistant", "f:json"),
        ("assistant", "code_execution:json"),
        ("context", "code_execution"),
    ]
    assert enabled(thread) == {"g:json"}
    assert [f.name for f in thread.settings.formats] == ["g:json"]
    assert [n for n in thread.meta["notes"] if "never declares" in n] == [
        f"tool {name!r} is called but the source never declares it; its calls are not enabled "
        "by any developer message"
        for name in ("f", "code_execution")
    ]
    record["tools"].append({"codeExecution": {}})
    declared = one_thread(tmp_path, record)
    assert enabled(declared) == {"g:json", "code_execution:json"}
    assert not any("'code_execution' is called" in n for n in declared.meta.get("notes", []))


def test_thoughts_keep_their_signature_and_can_be_dropped(tmp_path):
    record = {
        "contents": [
            user("2+2?"),
            {
                "role": "model",
                "parts": [
                    {"text": "Add them.", "thought": True, "thoughtSignature": "s1"},
                    {"text": "4"},
                ],
            },
        ]
    }
    kept = one_thread(tmp_path, record)
    assert roles(kept)[-2:] == [("assistant", "reasoning"), ("assistant", "markdown")]
    assert kept.meta["message_meta"][str(len(kept.messages) - 2)] == {"thought_signature": "s1"}
    dropped = one_thread(tmp_path, record, options=ConvertOptions(reasoning="drop"))
    assert [m.content for m in dropped.messages] == ["2+2?", "4"]


def test_media_kept_dropped_or_placeholdered_and_file_uris_kept(tmp_path):
    record = {
        "contents": [
            {
                "role": "user",
                "parts": [
                    {"text": "Compare "},
                    {"text": "these:"},
                    {"fileData": {"mimeType": "video/mp4", "fileUri": "gs://b/v.mp4"}},
                    {"inline_data": {"mime_type": "application/pdf", "data": "JVBER"}},
                ],
            },
            {"role": "model", "parts": [{"text": "Same."}]},
        ]
    }
    dropped = one_thread(tmp_path, record, options=ConvertOptions(multimodal="drop"))
    assert dropped.messages[0].content == "Compare these:"
    assert dropped.meta["message_meta"]["0"] == {"file_uris": ["gs://b/v.mp4"]}
    assert "dropped 1 document part(s) (text-only thread)" in dropped.meta["notes"]
    shown = one_thread(tmp_path, record, options=ConvertOptions(multimodal="placeholder"))
    assert shown.messages[0].content == "Compare these:\n\n[video]\n\n[document]"
    kept = one_thread(tmp_path, record)
    assert kept.messages[0].content == "Compare these:\ufffc"
    assert kept.messages[0].media == (Media("video", url="gs://b/v.mp4", mime="video/mp4"),)
    assert "message_meta" not in kept.meta
    assert kept.meta["notes"] == [
        "dropped 1 document part(s): MMS keeps images, audio and video that name a path, URL "
        "or data"
    ]


def test_only_media_keeps_an_empty_user_turn(tmp_path):
    record = {
        "contents": [
            {"role": "user", "parts": [{"inlineData": {"mimeType": "image/png", "data": "x"}}]},
            {"role": "model", "parts": [{"text": "A cat."}]},
        ]
    }
    thread = one_thread(tmp_path, record, options=ConvertOptions(multimodal="drop"))
    assert roles(thread) == [("user", None), ("assistant", "markdown")]
    assert thread.messages[0].content == ""
    kept = one_thread(tmp_path, record)
    assert kept.messages[0].to_dict()["content"] == [
        {"type": "image", "data": "x", "mime": "image/png"}
    ]


def test_parallel_calls_as_jsonl(tmp_path):
    calls = [{"functionCall": {"name": "f", "args": {"n": n}}} for n in (1, 2)]
    results = [{"functionResponse": {"name": "f", "response": {"n": n}}} for n in (1, 2)]
    record = {
        "contents": [
            user("go"),
            {"role": "model", "parts": calls},
            {"role": "user", "parts": results},
        ],
        "tools": [{"functionDeclarations": [{"name": "f"}]}],
    }
    thread = one_thread(tmp_path, record, options=ConvertOptions(parallel_calls="jsonl"))
    assert [m.content for m in thread.messages if m.format == "f:jsonl"] == ['{"n":1}\n{"n":2}']
    sequenced = one_thread(tmp_path, record)
    assert roles(sequenced)[2:] == [
        ("assistant", "f:json"),
        ("context", "f"),
        ("assistant", "f:json"),
        ("context", "f"),
    ]


@pytest.mark.parametrize(
    ("record", "code", "words"),
    [
        ({"contents": [{"role": "bot", "parts": []}]}, "unknown_role", "contents[0].role is 'bot'"),
        (
            {"contents": [{"role": "user", "parts": "hi"}]},
            "missing_field",
            "contents[0].parts is a str",
        ),
        (
            {
                "contents": [
                    {"role": "user", "parts": [{"text": "a", "functionCall": {"name": "f"}}]}
                ]
            },
            "missing_field",
            "contents[0].parts[0] holds 2 part payloads",
        ),
        (
            {"contents": [{"role": "user", "parts": [{"functionCall": {"name": "f"}}]}]},
            "invalid_thread",
            "contents[0].parts[0] is a functionCall part in a user content",
        ),
        ({"contents": []}, "empty_conversation", "contents is an empty list"),
        (
            {"contents": [user("a")], "tools": [{"functionDeclarations": [{"description": "x"}]}]},
            "invalid_tools",
            "has no name",
        ),
        ({"contents": [user("a")], "tools": "f"}, "invalid_tools", "tools is a str"),
    ],
)
def test_specific_errors(tmp_path, record, code, words):
    rejected = rejection(tmp_path, record)
    assert rejected.code == code and words in rejected.message


def test_builtin_tools_and_request_fields_are_kept(tmp_path):
    thread = one_thread(
        tmp_path,
        {
            "key": "k1",
            "request": {
                "contents": [user("hi")],
                "tools": [{"googleSearch": {}}],
                "safetySettings": [],
            },
            "metadata": {"run": 2},
        },
    )
    assert thread.id == "k1"
    assert thread.meta["extra_fields"] == {
        "tools[0]": {"googleSearch": {}},
        "safetySettings": [],
        "metadata": {"run": 2},
    }


@pytest.mark.parametrize(
    ("value", "score"),
    [
        ({"contents": [{"role": "user", "parts": [{"text": "a"}]}]}, 1.0),
        ({"key": "k", "request": {"contents": [{"parts": [{"text": "a"}]}]}}, 1.0),
        ({"contents": [{"role": "user", "content": "a"}]}, 0.0),
        ({"contents": []}, 0.0),
        ({"messages": [{"role": "user", "content": "a"}]}, 0.0),
        ([{"parts": []}], 0.0),
        ("contents", 0.0),
        (None, 0.0),
    ],
)
def test_sniff(value, score):
    assert FORMATS["gemini"].sniff(value).score == score
