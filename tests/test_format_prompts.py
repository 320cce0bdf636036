"""The plain prompt list format: JSON arrays and JSON Lines of strings and prompt-only
objects become prompt-only threads; detection is conservative (no `text`, no
`instruction`, no answer fields, no transcripts), so it takes no other format's records;
the real prompt lists in tests/data convert without loss."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from pipeline.cli import main
from pipeline.formats import FORMATS, ConvertOptions
from pipeline.formats.prompt_list import TRANSCRIPT
from pipeline.jobs.read import detect_file
from pipeline.sources import Record, expand_inputs, iter_file
from tests.conftest import REPO
from tests.reading import read_all, read_records

SAMPLES = REPO / "data_samples" / "prompts"
FORMAT = FORMATS["prompts"]
OPEN_ASSISTANT = ("en_100_text.jsonl", "prompt_lottery_en_250_text.jsonl")


def test_samples_become_prompt_only_threads():
    threads, rejected, stats = read_all(SAMPLES)
    assert stats.read_balanced and stats.records_read == 10 and len(threads) == 8
    assert sorted((r.code, r.locator.rsplit("/", 1)[1]) for r in rejected) == [
        ("empty_conversation", "records.jsonl:4"),
        ("not_an_object", "prompts.json#3"),
    ]
    assert all(t.meta["prompt_only"] and t.messages[-1].role == "user" for t in threads)
    limerick = next(t for t in threads if t.meta["locator"].endswith("prompts.json#2"))
    assert limerick.messages[0].content.endswith("\nKeep it friendly for children.")


def test_objects_keep_their_ids_system_prompt_and_metadata():
    threads, _, _ = read_all(SAMPLES / "records.jsonl")
    summary, onions, basil = threads
    assert summary.id == "p-001" and "extra_fields" not in summary.meta
    assert onions.id == "7"
    assert onions.meta["extra_fields"] == {"question_id": 7, "category": "science"}
    assert [(m.role, m.content) for m in basil.messages] == [
        ("developer", "You answer cooking questions briefly."),
        ("user", "best way to store fresh basil"),
    ]
    assert basil.meta["extra_fields"] == {"lang": "en"}


def test_from_prompts_reads_records_detection_declines(tmp_path):
    record = {"prompt": "Name a red fruit.", "act": "Botanist", "rating": 4}
    assert FORMAT.sniff(record).score == 0
    threads, rejected, _ = read_records(tmp_path, record, format="prompts")
    assert rejected == [] and threads[0].meta["extra_fields"] == {"act": "Botanist", "rating": 4}


@pytest.mark.parametrize(
    "value",
    [
        {"text": "A web page about heating services."},  # pretraining text
        {"instruction": "Say hi."},  # Alpaca without its output
        {"prompt": "Say hi.", "completion": "hi"},  # an answer field
        {"question": "What is 2 + 2?", "answer": "4"},
        {"prompt": "a", "question": "b"},
        {"prompt": {"text": "hi"}},
        {"prompt": "hi", "system": ["not", "text"]},
        {"query": "quotes for a party", "api_list": []},  # ToolBench instruction
        "<|im_start|>user\nhi<|im_end|>",
        "\n\nHuman: hi\n\nAssistant: hello",
        "USER: hi\nASSISTANT: hello",
        42,
        None,
    ],
)
def test_sniff_declines_what_is_not_only_a_prompt(value):
    verdict = FORMAT.sniff(value)
    assert verdict.score == 0 and verdict.reason


def test_sniff_reasons_say_what_was_seen():
    assert FORMAT.sniff("Tell me a joke.") == (0.5, "a bare string: one prompt")
    assert FORMAT.sniff({"id": 3, "query": "q", "tags": ["x"]}).reason == (
        "only a query string (with ids or metadata): one prompt"
    )


def test_the_real_prompt_lists_convert_without_loss_and_are_detected(data):
    folder = data / "realdata" / "open_assistant"
    for name in OPEN_ASSISTANT:
        path = folder / name
        threads, rejected, _ = read_all(path)
        assert rejected == [] and len(threads) == len(path.read_text().splitlines())
        assert detect_file(str(path)).label == "prompts"
    open_domain = data / "realdata/toolbench/instruction/inference_query_demo_open_domain.json"
    assert detect_file(str(open_domain)).label == "prompts"
    # pretraining `text` rows and ToolBench queries with their API lists stay undetected
    assert detect_file(str(data / "realdata/llamafactory/c4_demo.jsonl")).label == "unknown"
    assert (
        detect_file(str(data / "realdata/toolbench/instruction/G1_query.json")).label == "unknown"
    )


def test_a_transcript_among_prompts_is_still_converted_with_the_file(data):
    """One en_100_text line is a User:/Agent: log; detection declines it alone, but the
    file is a prompt list, so it converts with the rest."""
    path = data / "realdata" / "open_assistant" / "en_100_text.jsonl"
    values = [json.loads(line) for line in path.read_text().splitlines()]
    assert sum(FORMAT.sniff(v).score == 0 for v in values) == 1
    threads, rejected, _ = read_all(path)
    assert rejected == [] and len(threads) == len(values)


def test_no_record_of_another_format_sample_is_taken():
    for path in expand_inputs([str(REPO / "data_samples")]).files:
        if "/prompts/" in path or "/expected/" in path:
            continue
        for item in iter_file(path):
            if isinstance(item, Record):
                assert FORMAT.sniff(item.value).score == 0, path


@pytest.mark.parametrize(
    ("record", "code"),
    [
        ("   ", "empty_conversation"),
        ({"prompt": ""}, "empty_conversation"),
        ({"prompt": 5}, "missing_field"),
        ({"prompt": "hi", "system": 1}, "missing_field"),
        ({"note": "hi"}, "missing_field"),
        ([1, 2], "not_an_object"),
    ],
)
def test_bad_prompts_are_quarantined_with_stable_codes(tmp_path, record, code):
    threads, rejected, _ = read_records(tmp_path, record, format="prompts")
    assert threads == [] and [r.code for r in rejected] == [code]


def test_mms_convert_reads_a_json_array_of_strings(tmp_path):
    path = tmp_path / "eval.json"
    path.write_text(json.dumps(["What is a prime number?", "Name three rivers in Africa."]))
    out = tmp_path / "threads.jsonl"
    result = CliRunner().invoke(main, ["convert", str(path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "(prompts: 1)" in result.output and "Quarantined 0 records" in result.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["messages"][0]["content"] for line in lines] == [
        "What is a prime number?",
        "Name three rivers in Africa.",
    ]
    assert [line["meta"]["locator"].rsplit("#", 1)[1] for line in lines] == ["0", "1"]


@given(text=st.text(min_size=1, max_size=60).filter(str.strip))
def test_any_prompt_string_is_one_user_message_as_written(text):
    verdict = FORMAT.sniff(text)
    assert verdict.score == (0.0 if TRANSCRIPT.search(text) else 0.5)
    (thread,) = FORMAT.to_threads(Record("p.jsonl", "p.jsonl:1", text), ConvertOptions())
    assert [(m.role, m.content) for m in thread.messages] == [("user", text)]
    assert thread.meta["prompt_only"] is True


def test_vicuna_questions_are_prompts_with_their_category(data):
    """Vicuna-80's question file ({question_id, text, category}) is detected as prompts:
    beside a question_id, `text` is the question; the category stays in meta."""
    path = data / "curation" / "mapping" / "vicuna_questions_en.jsonl"
    assert detect_file(str(path)).label == "prompts"
    threads, rejected, _ = read_all(path)
    assert rejected == [] and len(threads) == len(path.read_text().splitlines())
    first = threads[0]
    assert first.id == "1" and first.meta["prompt_only"]
    assert [(m.role, m.content) for m in first.messages] == [
        ("user", "How can I improve my time management skills?")
    ]
    assert first.meta["extra_fields"] == {"question_id": 1, "category": "generic"}


def test_from_prompts_reads_mt_bench_questions_as_mt_bench_does(tmp_path):
    question = {"question_id": 81, "category": "writing", "turns": ["Write a haiku.", "Again."]}
    threads, rejected, _ = read_records(tmp_path, question, format="prompts")
    assert rejected == [] and [(m.role, m.content) for m in threads[0].messages] == [
        ("user", "Write a haiku.")
    ]
    assert threads[0].meta["category"] == "writing" and threads[0].meta["follow_ups"]


def test_text_without_a_question_id_is_still_no_prompt():
    assert FORMAT.sniff({"text": "A document.", "category": "news"}).score == 0
