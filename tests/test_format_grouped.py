"""Formats whose record gives a group of threads: Self-Instruct tasks (one
thread per instance) and prompts with several model completions (one per completion)
carry `meta.group_id`, ids `BASE:INDEX`; AlpacaEval output rows keep their generator in
`meta.model` and are no longer read as plain Alpaca rows."""

from __future__ import annotations

from pipeline.formats import FORMATS, ConvertOptions
from pipeline.formats.detect import best_for_record
from pipeline.mms.groups import group_of
from pipeline.sources import Record
from tests.conftest import REPO
from tests.reading import read_all

SAMPLES = REPO / "data_samples"


def convert(name: str, value: dict) -> list:
    return FORMATS[name].to_threads(Record("t.jsonl", "t.jsonl:1", value), ConvertOptions())


def test_self_instruct_gives_one_grouped_thread_per_instance():
    threads = convert(
        "self-instruct",
        {
            "id": "seed_task_1",
            "name": "antonyms",
            "instruction": "Give the relation.",
            "instances": [{"input": "a : b", "output": "x"}, {"input": "", "output": "y"}],
        },
    )
    assert [t.id for t in threads] == ["seed_task_1:0", "seed_task_1:1"]
    assert {group_of(t.meta) for t in threads} == {"group:seed_task_1"}
    assert threads[0].messages[0].content == "Give the relation.\n\na : b"
    assert threads[1].messages[0].content == "Give the relation."
    assert threads[0].meta["extra_fields"] == {"name": "antonyms"}


def test_self_instruct_samples():
    threads, rejected, stats = read_all(SAMPLES / "self-instruct")
    assert stats.read_balanced and stats.records_read == 5 and len(threads) == 7
    assert [r.code for r in rejected] == ["missing_field"]


def test_completions_are_grouped_with_their_model():
    threads = convert(
        "completions",
        {
            "prompt": "P",
            "completions": [
                {"model": "m1", "completion": "a", "score": 2},
                {"model": "m2", "completion": "b"},
            ],
        },
    )
    assert [t.meta["model"] for t in threads] == ["m1", "m2"]
    assert len({group_of(t.meta) for t in threads}) == 1
    assert [t.id.rsplit(":", 1)[1] for t in threads] == ["0", "1"]
    assert threads[0].meta["extra_fields"] == {"completion.score": 2}


def test_alpaca_eval_outputs_keep_their_generator():
    row = {"dataset": "koala", "instruction": "I", "output": "O", "generator": "gpt4"}
    assert best_for_record(row).name == "completions"
    (thread,) = convert("completions", row)
    assert thread.meta["model"] == "gpt4" and thread.meta["extra_fields"] == {"dataset": "koala"}
    assert best_for_record({"instruction": "I", "output": "O"}).name == "alpaca"


def test_completions_samples():
    threads, rejected, stats = read_all(SAMPLES / "completions")
    assert stats.read_balanced and stats.records_read == 6 and len(threads) == 8
    assert [r.code for r in rejected] == ["missing_field"]
