"""Conversations no specific format knows are read by their structure, never in place of a
format that reads them better; a file nothing reads is named with a mapping to start from
(`mms formats --suggest-mapping`), and a run's input that gives no row is named."""

from __future__ import annotations

from pathlib import Path

import orjson
import yaml
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline import convert
from pipeline.cli import main
from pipeline.formats.detect import detect
from pipeline.formats.field_names import PROMPT_NAMES, SPEAKER_KEYS, TEXT_KEYS
from pipeline.formats.suggest import SHOWN_KEYS, Suggestion, suggest_mapping

SPEAKERS = [("customer", "agent"), ("human", "bot"), ("user", "assistant"), ("Q", "A")]


def mms(*args: object):
    return CliRunner().invoke(main, [str(arg) for arg in args])


def lines_of(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


@settings(max_examples=60, deadline=None)
@given(
    list_key=st.sampled_from(["dialog", "turns", "chat", "exchange", "log"]),
    speaker_key=st.sampled_from(SPEAKER_KEYS),
    text_key=st.sampled_from(TEXT_KEYS),
    speakers=st.sampled_from(SPEAKERS),
    texts=st.lists(st.text(min_size=1, max_size=20).filter(str.strip), min_size=2, max_size=8),
)
def test_any_speaker_text_list_converts_turn_for_turn(
    tmp_path_factory, list_key, speaker_key, text_key, speakers, texts
):
    """A list of objects with a speaker-like and a text-like key, under any key, becomes
    the same turns in the same order, and meta.structure names the keys taken."""
    turns = [{speaker_key: speakers[index % 2], text_key: text} for index, text in enumerate(texts)]
    folder = tmp_path_factory.mktemp("structural")
    source = folder / "chats.jsonl"
    source.write_bytes(orjson.dumps({list_key: turns, "session": 7}) + b"\n")
    result = convert(str(source), folder / "out.jsonl")
    assert result.account.records_converted == 1, (folder / "out.rejected.jsonl").read_text()
    (thread,) = lines_of(folder / "out.jsonl")
    detected = result.account.formats[str(source)]
    if detected != "structural":  # a specific format took it: it must read it as well
        assert [m["content"] for m in thread["messages"]][-len(texts) :] == texts
        return
    assert [(m["role"], m["content"]) for m in thread["messages"]] == [
        ("user" if index % 2 == 0 else "assistant", text) for index, text in enumerate(texts)
    ]
    structure = thread["meta"]["structure"]
    assert (structure["messages"], structure["role"], structure["content"]) == (
        list_key,
        speaker_key,
        text_key,
    )
    assert thread["meta"]["extra_fields"] == {"session": 7}


@settings(max_examples=40, deadline=None)
@given(
    prompt_key=st.sampled_from([k for k in PROMPT_NAMES if k not in ("instruction", "query")]),
    answer_key=st.sampled_from(["answer", "targets", "reply", "target"]),
    prompt=st.text(min_size=1, max_size=30).filter(str.strip),
    answer=st.text(min_size=1, max_size=30).filter(str.strip),
)
def test_prompt_and_answer_fields_convert(tmp_path_factory, prompt_key, answer_key, prompt, answer):
    folder = tmp_path_factory.mktemp("pairs")
    source = folder / "pairs.jsonl"
    source.write_bytes(orjson.dumps({prompt_key: prompt, answer_key: answer}) + b"\n")
    result = convert(str(source), folder / "out.jsonl")
    assert result.account.records_converted == 1
    (thread,) = lines_of(folder / "out.jsonl")
    assert [m["content"] for m in thread["messages"]] == [prompt, answer]


def test_a_specific_format_keeps_its_records_and_its_reasons():
    """An MMS file with a thread of an unknown role stays an MMS file (the structural
    reading would accept that record, but the file is MMS and says why it is invalid)."""
    good = {
        "id": "a",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello", "format": "markdown", "end_turn": True},
        ],
    }
    robot = {"id": "b", "messages": [{"role": "robot", "content": "beep"}, good["messages"][1]]}
    assert detect([good, robot, good]).label == "mms"


def test_suggest_mapping_writes_a_mapping_that_converts_the_file(tmp_path):
    source = tmp_path / "visits.jsonl"
    visits = [
        {"visit": n, "log": [{"who": "doc", "said": f"Hello {n}"}, {"who": "pt", "said": "Hi"}]}
        for n in range(3)
    ]
    source.write_bytes(b"".join(orjson.dumps(v) + b"\n" for v in visits))
    refused = mms("convert", source, "-o", tmp_path / "none.jsonl")
    assert refused.exit_code == 0 and "mms formats --suggest-mapping" in refused.output
    suggested = mms("formats", "--suggest-mapping", source)
    assert suggested.exit_code == 0, suggested.output
    mapping = yaml.safe_load(suggested.output)
    assert mapping == {
        "messages": "log",
        "role": "who",
        "content": "said",
        "roles": {"doc": "user", "pt": "assistant"},
    }
    assert "`doc` is guessed to be the user" in suggested.output
    (tmp_path / "mapping.yaml").write_text(suggested.output)
    converted = mms(
        "convert", source, "--mapping", tmp_path / "mapping.yaml", "-o", tmp_path / "o.jsonl"
    )
    assert converted.exit_code == 0, converted.output
    assert len(lines_of(tmp_path / "o.jsonl")) == 3


def test_suggest_mapping_of_a_file_without_objects_is_a_clear_error(tmp_path):
    source = tmp_path / "numbers.jsonl"
    source.write_text("1\n2\n")
    result = mms("formats", "--suggest-mapping", source)
    assert result.exit_code == 2 and "no object" in result.output


def test_suggest_mapping_of_a_record_with_many_keys_lists_a_few(tmp_path):
    source = tmp_path / "wide.jsonl"
    source.write_bytes(orjson.dumps({f"field{n}": f"text {n}" for n in range(200_000)}) + b"\n")
    result = mms("formats", "--suggest-mapping", source)
    assert result.exit_code == 0, result.output[:500]
    listed = [line for line in result.output.splitlines() if line.startswith("#   field")]
    assert len(listed) == SHOWN_KEYS and f"and {200_000 - SHOWN_KEYS} more keys" in result.output
    assert yaml.safe_load(result.output) == {
        "shape": "alpaca",
        "prompt": "field0",
        "response": "field100000",  # the first of the longest texts
    }


def test_a_run_names_an_input_that_gives_no_row(tmp_path):
    good, odd = tmp_path / "good", tmp_path / "odd"
    good.mkdir()
    odd.mkdir()
    (good / "t.jsonl").write_bytes(
        orjson.dumps({"conversation": [{"human": "hi", "assistant": "hello"}]}) + b"\n"
    )
    (odd / "x.jsonl").write_bytes(b'{"sample_id": 1, "steps": ["a"]}\n')
    config = tmp_path / "run.yaml"
    config.write_text(
        f"name: t\ninputs:\n  - path: {good}\n  - path: {odd}\noutput: {tmp_path / 'out'}\n"
        "stages:\n  lint: {fail_on: never}\n"
    )
    result = mms("run", config)
    assert result.exit_code == 0, result.output
    assert f"input {odd} gave no row to the output" in result.output
    assert "1 quarantined as unknown_format" in result.output
    card = (tmp_path / "out" / "README.md").read_text()
    assert f"`{odd}` gave no row" in card and "1 quarantined as unknown_format" in card


def test_a_named_answer_that_is_a_label_is_left_out_with_its_evidence():
    """{question, answer: yes/no}: the reading by structure would take the label as the
    answer; the suggestion makes prompt-only threads and says why."""
    rows = [{"question": f"Is {n} even?", "answer": ["yes", "no"][n % 2]} for n in range(10)]
    found = suggest_mapping(rows)
    assert found is not None and found.mapping == {"shape": "alpaca", "prompt": "question"}
    assert found.evidence == [
        "answer: 2 distinct values over 10 records, mean 2 chars: a label, not an answer"
    ]


def test_an_assertion_list_is_not_read_as_a_chat():
    tests = [
        {"vars": {"q": f"Route ticket {n}"}, "assert": [{"type": "contains", "value": "Sales"}]}
        for n in range(4)
    ]
    found = suggest_mapping(tests)
    assert found is not None and found.mapping == {"shape": "alpaca", "prompt": "vars.q"}
    assert any(line.startswith("assert: ") for line in found.evidence)


def test_an_unnamed_answer_is_the_longest_text_longer_than_the_prompt():
    rows = [
        {"ask": f"Explain {n}", "said": f"A long explanation of {n}, step by step."}
        for n in range(5)
    ]
    found = suggest_mapping(rows)
    assert found is not None and found.mapping["response"] == "said"
    short = [{"ask": f"Explain topic number {n} in depth", "note": f"n{n} ok"} for n in range(5)]
    assert "response" not in (suggest_mapping(short) or Suggestion({})).mapping
