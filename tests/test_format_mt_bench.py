"""The MT-Bench question format: the first turn as a prompt-only thread, later turns in
meta.follow_ups, question_id/category/reference kept; FastChat's real question files
convert without loss and are detected, other formats' records are never taken."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from pipeline.cli import main
from pipeline.formats import FORMATS, ConvertOptions
from pipeline.jobs.read import detect_file
from pipeline.sources import Record, expand_inputs, iter_file
from tests.conftest import REPO
from tests.reading import read_all, read_records

SAMPLES = REPO / "data_samples" / "mt-bench"
FORMAT = FORMATS["mt-bench"]
PROMPT = st.text(min_size=1, max_size=40).filter(str.strip)


def by_id(threads):
    return {thread.id: thread for thread in threads}


def test_samples_become_prompt_only_threads_with_follow_ups():
    threads, rejected, stats = read_all(SAMPLES)
    assert stats.read_balanced and stats.records_read == 5
    assert [(r.code, r.message) for r in rejected] == [
        ("missing_field", "turns[1] is a number (expected a prompt string)")
    ]
    threads = by_id(threads)
    assert list(threads) == ["901", "902", "903", "5f2c9a1e7b"]
    assert all(
        t.meta["prompt_only"] and t.meta["source_format"] == "mt-bench" for t in threads.values()
    )
    writing = threads["901"]
    assert [m.role for m in writing.messages] == ["user"]
    assert writing.messages[0].content.startswith("Write a short welcome note")
    assert writing.meta["follow_ups"] == [
        [{"role": "user", "content": "Now turn your note into a four-line rhyming poem."}]
    ]
    assert (writing.meta["question_id"], writing.meta["category"]) == (901, "writing")
    assert any("meta.follow_ups" in note for note in writing.meta["notes"])
    assert threads["902"].meta["reference"] == [
        "205 minutes.",
        "About 13:10 (186.4 minutes after 10:05).",
    ]
    assert "follow_ups" not in threads["903"].meta


def test_arena_hard_content_turns_keep_their_other_fields():
    arena = by_id(read_all(SAMPLES)[0])["5f2c9a1e7b"]
    assert arena.messages[0].content.startswith("Give me a spreadsheet formula")
    assert arena.meta["extra_fields"] == {"cluster": "Spreadsheet formulas"}


def test_the_real_fastchat_question_files_convert_without_loss(data):
    folder = data / "realdata" / "fastchat"
    mt_bench, rejected, _ = read_all(folder / "mt_bench_question.jsonl")
    assert rejected == [] and len(mt_bench) == 80
    assert all(len(t.meta["follow_ups"]) == 1 and len(t.messages) == 1 for t in mt_bench)
    source = [json.loads(line) for line in (folder / "mt_bench_question.jsonl").open()]
    assert [t.meta.get("reference") for t in mt_bench] == [q.get("reference") for q in source]
    assert {t.meta["category"] for t in mt_bench} >= {"writing", "math", "coding"}
    vicuna, rejected, _ = read_all(folder / "vicuna_bench_question.jsonl")
    assert rejected == [] and len(vicuna) == 80
    assert not any("follow_ups" in t.meta for t in vicuna)


def test_detection_picks_mt_bench_for_question_files_only(data):
    folder = data / "realdata" / "fastchat"
    for name in ("mt_bench_question.jsonl", "vicuna_bench_question.jsonl"):
        assert detect_file(str(folder / name)).label == "mt-bench"
    # answers (choices[].turns) and judge prompts are not questions
    for name in ("mt_bench_reference_answer_gpt-4.jsonl", "judge_prompts.jsonl"):
        assert detect_file(str(folder / name)).label != "mt-bench"
    assert detect_file(str(SAMPLES / "question.jsonl")).label == "mt-bench"


def test_no_record_of_another_format_sample_is_taken():
    for path in expand_inputs([str(REPO / "data_samples")]).files:
        if "/mt-bench/" in path or "/expected/" in path:
            continue
        for item in iter_file(path):
            if isinstance(item, Record):
                assert FORMAT.sniff(item.value).score == 0, path


@pytest.mark.parametrize(
    ("record", "code", "message"),
    [
        (["What is 2 + 2?"], "not_an_object", "got array"),
        ({"question_id": 1}, "missing_field", "turns is null"),
        ({"question_id": 1, "turns": []}, "empty_conversation", "turns is an empty list"),
        ({"question_id": 1, "turns": ["  "]}, "missing_field", "turns[0] is empty"),
        (
            {"question_id": 1, "turns": ["Hi", {"text": "x"}]},
            "missing_field",
            "turns[1].content is null",
        ),
    ],
)
def test_bad_questions_are_quarantined_with_stable_codes(tmp_path, record, code, message):
    threads, rejected, _ = read_records(tmp_path, record, format="mt-bench")
    assert threads == [] and [r.code for r in rejected] == [code]
    assert message in rejected[0].message


def test_mms_convert_writes_the_threads_and_the_quarantine(tmp_path):
    out = tmp_path / "threads.jsonl"
    result = CliRunner().invoke(main, ["convert", str(SAMPLES), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "(mt-bench: 1)" in result.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["id"] for line in lines] == ["901", "902", "903", "5f2c9a1e7b"]
    rejected = (tmp_path / "threads.rejected.jsonl").read_text().splitlines()
    assert [json.loads(line)["code"] for line in rejected] == ["missing_field"]


@given(turns=st.lists(PROMPT, min_size=1, max_size=4), question_id=st.integers(0, 10**6))
def test_any_question_keeps_every_turn_in_order(turns, question_id):
    value = {"question_id": question_id, "turns": turns}
    assert FORMAT.sniff(value).score == 1.0
    (thread,) = FORMAT.to_threads(Record("q.jsonl", "q.jsonl:1", value), ConvertOptions())
    follow_ups = thread.meta.get("follow_ups", [])
    assert [m.content for m in thread.messages] + [t[0]["content"] for t in follow_ups] == turns
    assert thread.id == str(question_id)
