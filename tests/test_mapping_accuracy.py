"""Floors on the suggested mappings of the labelled shapes (tests/curation_accuracy_mapping.py):
no label or assertion is ever taken as the answer, every real answer field is found, each
suggestion converts its file, and the Vicuna questions read as prompts in every language
of the set."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.jobs.read import detect_file
from pipeline.sources import Record, iter_file
from tests.curation_accuracy_mapping import FOLDER, figures, labels, suggested_answer, suggestion
from tests.reading import read_all

SHAPES = labels()["shapes"]
QUESTIONS = labels()["questions"]


def mms(*args: object):
    return CliRunner().invoke(main, [str(arg) for arg in args])


def test_no_label_or_assertion_is_taken_as_the_answer():
    summary = {row["measure"]: row for row in figures() if row["name"] == "summary"}
    assert summary["label_as_answer"]["value"] == 0.0
    assert summary["correct"]["value"] == 1.0 and summary["correct"]["count"] == len(SHAPES)


@pytest.mark.parametrize("name", [n for n, truth in SHAPES.items() if truth["answer"]])
def test_every_real_answer_field_is_found(name):
    assert suggested_answer(suggestion(name)) == SHAPES[name]["answer"]


@pytest.mark.parametrize("name", [n for n, truth in SHAPES.items() if truth["answer"] is None])
def test_a_file_without_an_answer_gets_prompt_only_with_the_evidence(name):
    found = suggestion(name)
    assert "response" not in found.mapping and not found.sure
    left_out = [
        key for key, role in SHAPES[name]["roles"].items() if role in ("label", "assertion")
    ]
    comments = found.to_yaml(name)
    assert all(f"#   {key}: " in comments for key in left_out), comments


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_each_suggestion_converts_its_file(tmp_path, name):
    mapping = tmp_path / "mapping.yaml"
    mapping.write_text(suggestion(name).to_yaml(name))
    out = tmp_path / "threads.jsonl"
    result = mms("convert", FOLDER / name, "--mapping", mapping, "-o", out)
    assert result.exit_code == 0, result.output
    threads = [json.loads(line) for line in out.read_text().splitlines()]
    assert threads and len(threads) == record_count(name)
    prompt_only = SHAPES[name]["answer"] is None
    assert all(bool(t["meta"].get("prompt_only")) == prompt_only for t in threads)


def record_count(name: str) -> int:
    """How many records the labelled file holds."""
    return sum(isinstance(item, Record) for item in iter_file(str(FOLDER / name)))


def test_the_label_taken_as_an_answer_is_flagged_by_mms508(tmp_path):
    mapping = tmp_path / "mapping.yaml"
    mapping.write_text(
        yaml.safe_dump({"shape": "alpaca", "prompt": "message", "response": "department"})
    )
    out = tmp_path / "threads.jsonl"
    assert (
        mms("convert", FOLDER / "support_tickets.csv", "--mapping", mapping, "-o", out).exit_code
        == 0
    )
    result = mms("lint", out, "--select", "MMS508", "--output-format", "json")
    (finding,) = json.loads(result.output)["diagnostics"]
    assert "'Billing Inquiries' (7)" in finding["message"]


@pytest.mark.parametrize("name", sorted(QUESTIONS))
def test_vicuna_questions_convert_as_prompts_in_every_language(name):
    path = FOLDER / name
    assert detect_file(str(path)).label in ("prompts", "mt-bench")
    records = [json.loads(line) for line in path.read_text().splitlines()]
    for how in ({}, {"format": "prompts"}):
        threads, rejected, _ = read_all(path, **how)
        assert rejected == [] and len(threads) == len(records)
        for thread, record in zip(threads, records, strict=True):
            text = record.get("text") or record["turns"][0]
            assert [(m.role, m.content) for m in thread.messages] == [("user", text)]
            assert thread.meta["prompt_only"]
            category = thread.meta.get("category") or thread.meta["extra_fields"]["category"]
            assert category == record["category"]


def test_the_question_files_cover_the_languages_of_the_set():
    assert set(QUESTIONS.values()) == {"en", "ja"}
