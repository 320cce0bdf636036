"""OpenAI Batch API files: request lines become prompt-only threads, output lines the
answers (one thread per choice, grouped when several), failed requests are quarantined;
Anthropic's batch wrapper stays Anthropic's."""

from __future__ import annotations

import orjson
import pytest

from pipeline.formats import FORMATS, ConvertOptions
from pipeline.formats.detect import best_for_record
from pipeline.quarantine import RecordRejected
from pipeline.sources import Record
from tests.conftest import REPO
from tests.reading import read_all

FORMAT = FORMATS["openai-batch"]
REQUEST = {
    "custom_id": "r1",
    "method": "POST",
    "url": "/v1/chat/completions",
    "body": {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 5},
}


def convert(value: dict) -> list:
    return FORMAT.to_threads(Record("t.jsonl", "t.jsonl:1", value), ConvertOptions())


def output(*contents: str, **extra) -> dict:
    choices = [
        {"index": i, "message": {"role": "assistant", "content": c}, "finish_reason": "stop"}
        for i, c in enumerate(contents)
    ]
    body = {"model": "m", "choices": choices}
    return {"id": "b1", "custom_id": "r1", "response": {"status_code": 200, "body": body}, **extra}


def test_a_request_is_a_prompt_only_thread():
    (thread,) = convert(REQUEST)
    assert thread.id == "r1" and thread.meta["prompt_only"]
    assert [(m.role, m.content) for m in thread.messages] == [("user", "Hi")]
    assert thread.meta["extra_fields"]["body.max_tokens"] == 5


def test_an_output_gives_each_choice_as_an_answer():
    (single,) = convert(output("Hello"))
    assert single.id == "r1:0" and single.messages[0].content == "Hello"
    assert "group_id" not in single.meta and single.meta["custom_id"] == "r1"
    assert any("answer only" in note for note in single.meta["notes"])
    threads = convert(output("a", "b"))
    assert [t.id for t in threads] == ["r1:0", "r1:1"]
    assert {t.meta["group_id"] for t in threads} == {"r1"}


def test_a_failed_request_is_quarantined_with_its_error():
    failed = {
        "custom_id": "r9",
        "response": None,
        "error": {"code": "batch_expired", "message": "late"},
    }
    with pytest.raises(RecordRejected, match=r"r9 failed .*batch_expired"):
        convert(failed)
    status = output("x")
    status["response"]["status_code"] = 500
    with pytest.raises(RecordRejected, match="status 500"):
        convert(status)


def test_detection():
    assert best_for_record(REQUEST).name == "openai-batch"
    assert best_for_record(output("a")).name == "openai-batch"
    anthropic = {
        "custom_id": "a",
        "params": {"model": "c", "max_tokens": 5, "messages": [{"role": "user", "content": "Hi"}]},
    }
    assert best_for_record(anthropic).name == "anthropic"


def test_samples():
    """The output file and the request file beside it are read together: every answered
    request becomes one thread (or one per choice), its messages then its answer."""
    threads, rejected, stats = read_all(REPO / "data_samples" / "openai-batch")
    assert stats.read_balanced and stats.records_read == 8 and len(threads) == 4
    assert sorted(r.code for r in rejected) == ["empty_conversation", "missing_field"]
    ((request_file, output_file),) = stats.companion_files.items()
    assert request_file.endswith("batchinput.jsonl") and output_file.endswith("batch_output.jsonl")
    assert all(
        not t.meta.get("prompt_only") and t.messages[-1].role == "assistant" for t in threads
    )


def _write(path, *lines: dict) -> None:
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))


def test_outputs_join_their_requests_by_custom_id(tmp_path):
    """Outputs answer requests in any order; an unanswered request stays prompt-only; a
    request file of another endpoint (embeddings) with the same ids is not taken; the
    counts hold every line once."""
    second = {**REQUEST, "custom_id": "r2"}
    second["body"] = {**REQUEST["body"], "messages": [{"role": "user", "content": "Bye"}]}
    third = {**REQUEST, "custom_id": "r3"}
    _write(
        tmp_path / "a_embeddings.jsonl",
        {**REQUEST, "url": "/v1/embeddings", "body": {"input": "x"}},
    )
    _write(tmp_path / "requests.jsonl", REQUEST, second, third)
    answer_two = output("See you")
    answer_two["custom_id"] = "r2"
    answer_two["response"]["body"]["object"] = "chat.completion"
    _write(tmp_path / "results.jsonl", answer_two, output("Hello"))
    threads, rejected, stats = read_all(tmp_path / "results.jsonl", tmp_path / "requests.jsonl")
    assert not rejected and stats.records_read == 5 and stats.records_converted == 5
    assert [(t.id, [m.content for m in t.messages]) for t in threads] == [
        ("r2", ["Bye", "See you"]),
        ("r1", ["Hi", "Hello"]),
        ("r3", ["Hi"]),
    ]
    assert threads[2].meta["prompt_only"]
    assert stats.companion_files == {
        str(tmp_path / "requests.jsonl"): str(tmp_path / "results.jsonl")
    }


def test_an_output_without_its_request_file_is_the_answer_only(tmp_path):
    _write(tmp_path / "results.jsonl", output("Hello"))
    (thread,), rejected, _ = read_all(tmp_path / "results.jsonl")
    assert (
        not rejected and thread.id == "r1:0" and [m.role for m in thread.messages] == ["assistant"]
    )
