"""TRL's dataset types and the string prompt/answer pairs. The standard (string)
forms are the `trl` format's (prompt-completion, prompt/response, preference with an
explicit or implicit prompt, unpaired preference, stepwise supervision, prompt-only);
the conversational forms and bare message lists are the `openai` format's; `--from
openai` reads OpenAI's legacy prompt/completion strings; `--from prompts` no longer
drops an answer into meta."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.formats import FORMATS, ConvertOptions
from pipeline.formats.detect import best_for_record
from pipeline.formats.trl import implicit_prompt_end
from pipeline.quarantine import RecordRejected
from pipeline.sources import Record

TRL = FORMATS["trl"]
SKY = [{"role": "user", "content": "What color is the sky?"}]
BLUE = [{"role": "assistant", "content": "It is blue."}]


def convert(value, format_name="trl"):
    return FORMATS[format_name].to_threads(Record("t.jsonl", "t.jsonl:1", value), ConvertOptions())


def rejection(value, format_name="trl") -> RecordRejected:
    with pytest.raises(RecordRejected) as info:
        convert(value, format_name)
    return info.value


def roles(thread) -> list[tuple[str, str, bool | None]]:
    return [(m.role, m.content, m.end_turn) for m in thread.messages]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        # TRL's standard types
        ({"prompt": "The sky is", "completion": " blue."}, "trl"),
        ({"prompt": "The sky is", "completion": " blue.", "label": True}, "trl"),
        ({"prompt": "The sky is", "chosen": " blue.", "rejected": " green."}, "trl"),
        ({"chosen": "The sky is blue.", "rejected": "The sky is green."}, "trl"),
        ({"prompt": "9.8 or 9.11?", "completions": ["a", "b"], "labels": [True, False]}, "trl"),
        ({"prompt": "Solve 1 + 1.", "solution": "2"}, "trl"),
        # llm-foundry / Dolly-derived
        ({"prompt": "Tell me about dogs.", "response": "Dogs are great pets."}, "trl"),
        # TRL's conversational types, and bare message lists
        ({"prompt": SKY}, "openai"),
        ({"prompt": SKY, "completion": BLUE}, "openai"),
        ({"prompt": SKY, "completion": BLUE, "label": False}, "openai"),
        ({"prompt": SKY, "chosen": BLUE, "rejected": BLUE}, "openai"),
        ({"chosen": SKY + BLUE, "rejected": SKY + BLUE}, "openai"),
        (SKY + BLUE, "openai"),
        # others keep their records
        ({"prompt": "The sky is"}, "prompts"),
        ({"instruction": "Say hi.", "chosen": "hi", "rejected": "no"}, "alpaca"),
        (
            {"prompt": "\n\nHuman: hi\n\nAssistant:", "chosen": " hello", "rejected": " go"},
            "hh-rlhf",
        ),
        ({"prompt": "q", "completions": [{"model": "m", "completion": "a"}]}, "completions"),
        ({"query": "q", "response": "a"}, "swift"),
        ([{"role": "assistant", "content": "a", "end_turn": True}], "mms"),
    ],
)
def test_each_shape_is_detected_by_the_format_that_reads_it(value, expected):
    fmt = best_for_record(value)
    assert fmt is not None and fmt.name == expected


def test_prompt_completion_keeps_the_exact_text_of_both():
    (thread,) = convert({"prompt": "The sky is", "completion": " blue."})
    assert roles(thread) == [("user", "The sky is", None), ("assistant", " blue.", True)]
    assert thread.meta["source_format"] == "trl" and "notes" not in thread.meta


def test_prompt_response_and_unread_keys_go_to_extra_fields():
    (thread,) = convert({"id": 4, "prompt": "p", "response": "r", "category": "open_qa"})
    assert thread.id == "4" and roles(thread)[1] == ("assistant", "r", True)
    assert thread.meta["extra_fields"] == {"category": "open_qa"}


@pytest.mark.parametrize(("label", "verdict"), [(True, "desirable"), (False, "undesirable")])
def test_unpaired_preference_label_is_the_verdict(label, verdict):
    (thread,) = convert({"prompt": "The sky is", "completion": " blue.", "label": label})
    assert thread.meta["preference"] == verdict and "extra_fields" not in thread.meta


def test_a_label_that_is_no_boolean_is_kept_and_noted():
    (thread,) = convert({"prompt": "p", "completion": "c", "label": 1})
    assert "preference" not in thread.meta and thread.meta["extra_fields"] == {"label": 1}
    assert any("not a boolean" in note for note in thread.meta["notes"])


def test_explicit_preference_gives_a_pair_of_threads():
    chosen, rejected = convert(
        {"id": "p1", "prompt": "The sky is", "chosen": " blue.", "rejected": " green."}
    )
    assert (chosen.id, rejected.id) == ("p1:chosen", "p1:rejected")
    assert chosen.meta["pair_id"] == rejected.meta["pair_id"] == "p1"
    assert (chosen.meta["preference"], rejected.meta["preference"]) == ("chosen", "rejected")
    assert roles(rejected) == [("user", "The sky is", None), ("assistant", " green.", True)]


def test_implicit_prompt_is_the_common_prefix_cut_at_a_word_boundary():
    chosen, rejected = convert({"chosen": "The sky is blue.", "rejected": "The sky is bleak."})
    assert roles(chosen) == [("user", "The sky is", None), ("assistant", " blue.", True)]
    assert roles(rejected) == [("user", "The sky is", None), ("assistant", " bleak.", True)]
    assert "implicit" in chosen.meta["notes"][0]


@pytest.mark.parametrize(
    ("chosen", "rejected", "prompt"),
    [
        ("The sky is blue.", "The sky is green.", "The sky is"),
        ("Q: 9.8 or 9.11?\nA: 9.8", "Q: 9.8 or 9.11?\nA: 9.11", "Q: 9.8 or 9.11?\nA:"),
        ("The sky is blue.", "The sky is blue. Or green.", "The sky is"),  # a prefix of the other
        ("Blue.", "Green.", ""),
        ("same text", "same text", "same"),
        ("", "x", ""),
    ],
)
def test_implicit_prompt_end(chosen, rejected, prompt):
    assert chosen[: implicit_prompt_end(chosen, rejected)] == prompt


def test_sides_without_a_common_prefix_are_kept_whole_and_noted():
    chosen, _ = convert({"chosen": "Blue.", "rejected": "Green."})
    assert roles(chosen) == [("assistant", "Blue.", True)]
    assert "share no prefix" in chosen.meta["notes"][0]


def test_stepwise_supervision_is_one_answer_in_steps():
    (thread,) = convert(
        {"prompt": "9.8 or 9.11?", "completions": ["a.", "b.", "c."], "labels": [True, True, False]}
    )
    assert roles(thread) == [
        ("user", "9.8 or 9.11?", None),
        ("assistant", "a.", False),
        ("assistant", "b.", False),
        ("assistant", "c.", True),
    ]
    assert thread.meta["step_labels"] == [True, True, False]


@pytest.mark.parametrize(
    ("value", "code", "message"),
    [
        (
            {"prompt": "p", "completions": ["a", "b"], "labels": [True]},
            "missing_field",
            "completions has 2 step(s) but labels has 1 label(s)",
        ),
        ({"prompt": "p", "completions": ["a"]}, "missing_field", "labels is null"),
        ({"prompt": "p", "completions": ["a"], "labels": ["x"]}, "missing_field", "labels[0]"),
        ({"prompt": "p", "chosen": "a"}, "missing_field", "chosen is present but rejected"),
        ({"prompt": SKY, "completion": "c"}, "missing_field", "read by --from openai"),
        ({"prompt": "p", "completion": 3}, "missing_field", "completion is a number"),
        ({"prompt": " ", "completion": "c"}, "empty_conversation", "prompt is blank"),
        ({"chosen": "", "rejected": ""}, "empty_conversation", "chosen is blank"),
        ({"text": "The sky is blue."}, "missing_field", "the record has keys text"),
        (["The sky is"], "not_an_object", "got an array"),
    ],
)
def test_bad_records_are_quarantined_with_a_clear_reason(value, code, message):
    err = rejection(value)
    assert err.code == code and message in err.message


def test_a_lone_prompt_is_a_prompt_only_thread():
    (thread,) = convert({"prompt": "Solve 1 + 1.", "solution": "2"})
    assert roles(thread) == [("user", "Solve 1 + 1.", None)]
    assert thread.meta["prompt_only"] and thread.meta["extra_fields"] == {"solution": "2"}


def test_record_keys_never_reach_builder_arguments():
    (thread,) = convert(
        {"prompt": "p", "completion": "c", "format": "json", "weight": 0, "end_turn": False}
    )
    assert roles(thread)[1] == ("assistant", "c", True) and thread.messages[1].format == "markdown"
    assert thread.meta["extra_fields"] == {"format": "json", "weight": 0, "end_turn": False}


# ------------------------------------------------------------- the openai format's side


def test_from_openai_reads_legacy_prompt_completion_strings():
    (thread,) = convert({"prompt": "The sky is", "completion": " blue."}, "openai")
    assert roles(thread) == [("user", "The sky is", None), ("assistant", " blue.", True)]
    chosen, _ = convert({"prompt": "The sky is", "chosen": " blue.", "rejected": " x"}, "openai")
    assert roles(chosen)[1] == ("assistant", " blue.", True)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"chosen": "The sky is blue.", "rejected": "The sky is green."}, "--from trl"),
        ({"prompt": "p", "response": "r"}, "--from trl"),
        ({"prompt": "p", "completions": ["a"], "labels": [True]}, "--from trl"),
    ],
)
def test_from_openai_points_string_shapes_it_does_not_read_at_trl(value, message):
    err = rejection(value, "openai")
    assert err.code == "missing_field" and message in err.message


def test_conversational_prompt_only_is_a_prompt_only_thread():
    (thread,) = convert({"prompt": SKY, "data_source": "gsm8k"}, "openai")
    assert roles(thread) == [("user", "What color is the sky?", None)]
    assert thread.meta["prompt_only"] and thread.meta["extra_fields"] == {"data_source": "gsm8k"}


def test_a_bare_message_list_converts_as_its_messages():
    (thread,) = convert(SKY + BLUE, "openai")
    assert roles(thread) == [
        ("user", "What color is the sky?", None),
        ("assistant", "It is blue.", True),
    ]


@pytest.mark.parametrize(
    "value",
    [
        {"prompt": "The sky is", "completion": " blue."},
        {"prompt": "p", "response": "r"},
        {"prompt": "p", "chosen": "a", "rejected": "b"},
        {"prompt": "p", "completions": ["a"], "labels": [True]},
    ],
)
def test_from_prompts_quarantines_records_with_an_answer_instead_of_dropping_it(value):
    err = rejection(value, "prompts")
    assert err.code == "missing_field" and "holds an answer" in err.message


def test_files_of_these_shapes_are_detected_and_converted_whole(tmp_path):
    """End to end, as a user runs them: each file is detected (no unknown_format)
    and every record converts; `mms formats --detect` names the format."""
    files = {
        "legacy.jsonl": ([{"prompt": "p", "completion": " c"}] * 2, "trl"),
        "foundry.jsonl": ([{"prompt": "p", "response": "r"}] * 2, "trl"),
        "stepwise.jsonl": ([{"prompt": "p", "completions": ["a"], "labels": [True]}] * 2, "trl"),
        "xtuner.jsonl": ([SKY + BLUE, SKY], "openai"),
        "rl_prompts.jsonl": ([{"prompt": SKY, "data_source": "gsm8k"}] * 2, "openai"),
    }
    for name, (records, expected) in files.items():
        path = tmp_path / name
        path.write_text("".join(json.dumps(record) + "\n" for record in records))
        detected = CliRunner().invoke(main, ["formats", "--detect", str(path)])
        assert detected.output.splitlines()[0].endswith(f"-> {expected}"), detected.output
        out = tmp_path / f"{name}.out.jsonl"
        result = CliRunner().invoke(main, ["convert", str(path), "-o", str(out)])
        assert result.exit_code == 0 and "Quarantined 0 records" in result.output, result.output
        formats = {
            json.loads(line)["meta"]["source_format"] for line in out.read_text().splitlines()
        }
        assert formats == {expected}
