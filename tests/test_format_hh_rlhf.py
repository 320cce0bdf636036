"""The HH-RLHF input format through the public API: chosen/rejected transcripts as
paired threads, lone sides, text transcripts, prompt/answer splits, and transcripts that
cannot be conversations rejected with the reason."""

from __future__ import annotations

import orjson
import pytest

from pipeline.formats import FORMATS
from tests.reading import read_records

HH = FORMATS["hh-rlhf"]
H, A = "\n\nHuman: ", "\n\nAssistant: "


def shape(thread) -> list[tuple]:
    return [(m.role, m.content, m.end_turn) for m in thread.messages]


def test_a_pair_becomes_two_threads_sharing_the_prompt(tmp_path):
    prompt = H + "Plants for a dark flat?" + A + "Snake plants and pothos." + H + "Least water?"
    record = {
        "chosen": prompt + A + "The ZZ plant.\n\nWater it every two weeks.",
        "rejected": prompt + A + "Cacti.",
    }
    threads, rejected, stats = read_records(tmp_path, record)
    assert rejected == [] and stats.formats and set(stats.formats.values()) == {"hh-rlhf"}
    chosen, other = threads
    base = chosen.meta["pair_id"]
    assert (chosen.id, other.id) == (f"{base}:chosen", f"{base}:rejected")
    assert (chosen.meta["preference"], other.meta["preference"]) == ("chosen", "rejected")
    assert shape(chosen) == [
        ("user", "Plants for a dark flat?", None),
        ("assistant", "Snake plants and pothos.", True),
        ("user", "Least water?", None),
        ("assistant", "The ZZ plant.\n\nWater it every two weeks.", True),
    ]
    assert chosen.messages[:3] == other.messages[:3]
    assert other.messages[3].content == "Cacti."


def test_empty_final_answer_is_kept_and_noted(tmp_path):
    record = {"chosen": H + "A joke?" + A + "Knock knock.", "rejected": H + "A joke?\n\nAssistant:"}
    _, other = read_records(tmp_path, record)[0]
    assert shape(other)[-1] == ("assistant", "", True)
    assert other.meta["notes"] == ["rejected turn 1 (Assistant) is empty"]


def test_lone_side_text_and_prompt_splits(tmp_path):
    threads, rejected, _ = read_records(
        tmp_path,
        {"id": "solo", "chosen": H + "Name a colour." + A + "Red."},
        {"text": "Human: Capital of France?" + A + "Paris."},
        {
            "prompt": H + "A book about the sea?\n\nAssistant:",
            "chosen": " The Sea Around Us.",
            "rejected": " Moby-Dick.",
            "response": " The Sea Around Us.",
        },
    )
    assert rejected == []
    solo, text, chosen, other = threads
    assert solo.id == "solo" and solo.meta["preference"] == "chosen"
    assert "pair_id" not in solo.meta
    assert shape(text) == [("user", "Capital of France?", None), ("assistant", "Paris.", True)]
    assert "preference" not in text.meta
    assert shape(chosen)[1] == ("assistant", "The Sea Around Us.", True)
    assert shape(other)[1] == ("assistant", "Moby-Dick.", True)
    assert chosen.meta["extra_fields"] == {"response": " The Sea Around Us."}


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (
            {"chosen": A + "Hi." + H + "Hello.", "rejected": H + "Hi." + A + "Hello."},
            "chosen does not start with a Human turn (starts 'Assistant:')",
        ),
        (
            {"chosen": H + "Hi." + A + "Yes.", "rejected": "Preamble." + H + "Hi." + A + "No."},
            "rejected does not start with a Human turn (starts 'Preamble.')",
        ),
        (
            {"chosen": H + "Hello?" + H + "Anyone?", "rejected": H + "Hello?" + A + "Yes."},
            "chosen has no Assistant turn",
        ),
        (
            {"chosen": H + "Hi." + A + "Yes.", "rejected": ["Hi."]},
            "rejected must be a string (got array)",
        ),
        ({"text": "no speakers at all"}, "text holds no Human:/Assistant: turns"),
        ({"prompt": H + "Hi."}, "no chosen, rejected or text transcript"),
    ],
)
def test_transcripts_that_are_not_conversations_are_quarantined(tmp_path, record, message):
    threads, rejected, stats = read_records(tmp_path, record, format="hh-rlhf")
    assert threads == [] and stats.read_balanced
    assert (rejected[0].code, rejected[0].message) == ("missing_field", message)


@pytest.mark.parametrize(
    ("value", "score"),
    [
        ({"chosen": H + "a" + A + "b", "rejected": H + "a" + A + "c"}, 1.0),
        ({"chosen": A + "b"}, 1.0),
        ({"prompt": H + "a" + "\n\nAssistant:", "chosen": " b", "rejected": " c"}, 1.0),
        ({"text": H + "a" + A + "b"}, 0.9),
        ({"text": H + "a"}, 0.0),
        ({"chosen": [{"role": "user", "content": "a"}], "rejected": []}, 0.0),
        ({"instruction": "a", "chosen": "b", "rejected": "c"}, 0.0),
        ({"chosen": H + "a" + A + "b", "rejected": {"from": "gpt"}}, 0.0),
        ([H + "a" + A + "b"], 0.0),
        (None, 0.0),
    ],
)
def test_sniff_scores_shapes_and_never_raises(value, score):
    assert HH.sniff(value).score == score


def test_torchtune_hh_rlhf_message_lists_are_not_taken(data):
    value = orjson.loads((data / "realdata/torchtune_assets/hh_rlhf_tiny.json").read_bytes())
    assert HH.sniff(value[0]).score == 0.0
