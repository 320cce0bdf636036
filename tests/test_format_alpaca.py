"""The Alpaca input format through the public API: instruction/input/output files from
axolotl, LLaMA-Factory and torchtune, the response variant, history and system, the
preference and visual QA variants, options, and specific rejections."""

from __future__ import annotations

import orjson
import pytest

from pipeline.formats import FORMATS, ConvertOptions
from tests.conftest import needs_shared
from tests.reading import read_all, read_records

ALPACA = FORMATS["alpaca"]


def shape(thread) -> list[tuple]:
    return [(m.role, m.content) for m in thread.messages]


REAL_FILES = [
    # path under realdata (tests/data: whole files or trimmed copies, see their
    # PROVENANCE.txt), records read, threads
    ("axolotl_fixtures/alpaca_alpaca.json", 2, 2),
    ("llamafactory/alpaca_en_demo.json", 18, 18),
    ("llamafactory/alpaca_zh_demo.json", 25, 25),
    ("llamafactory/identity.json", 91, 91),
    ("torchtune_assets/alpaca_tiny.json", 16, 16),
    ("torchtune_assets/instruct_tiny.json", 2, 2),
    ("torchtune_assets/stack_exchange_paired_tiny.json", 5, 10),
    ("torchtune_assets/vqa_tiny.json", 1, 1),
]
FULL_FILES = [
    # the large files tests/data trims: every record of them
    ("llamafactory/alpaca_en_demo.json", 999, 999),
    ("llamafactory/alpaca_zh_demo.json", 1000, 1000),
    ("torchtune_assets/alpaca_tiny.json", 100, 100),
    ("torchtune_assets/stack_exchange_paired_tiny.json", 25, 50),
]


@pytest.mark.parametrize(("name", "records", "threads_expected"), REAL_FILES)
def test_real_files_are_detected_and_convert_completely(data, name, records, threads_expected):
    check_converts_completely(data / "realdata" / name, records, threads_expected)


def test_the_full_files_convert_completely():
    """Every record of the large files tests/data trims; skips without them."""
    shared = needs_shared(*(f"realdata/{name}" for name, _, _ in FULL_FILES))
    for name, records, threads_expected in FULL_FILES:
        check_converts_completely(shared / "realdata" / name, records, threads_expected)
    check_stack_exchange_pairs(shared / "realdata", 25)


def check_converts_completely(path, records: int, threads_expected: int) -> None:
    threads, rejected, stats = read_all(path)
    assert set(stats.formats.values()) == {"alpaca"}
    assert rejected == [] and stats.records_read == records and len(threads) == threads_expected
    for thread in threads:
        assert [m.role for m in thread.messages] == ["user", "assistant"]
        assert thread.messages[-1].end_turn is True


def test_input_follows_the_instruction_after_a_blank_line(data):
    threads, _, _ = read_all(data / "realdata/axolotl_fixtures/alpaca_alpaca.json")
    assert shape(threads[0]) == [
        (
            "user",
            "You will be given a series of words. Output these words in reverse order, with "
            "each word on its own line.\n\nWords: ['Hello', 'world'].",
        ),
        ("assistant", "['world', 'Hello']"),
    ]


def test_torchtune_rendered_text_is_kept_in_extra_fields(data):
    threads, _, _ = read_all(data / "realdata/torchtune_assets/alpaca_tiny.json")
    text = threads[0].meta["extra_fields"]["text"]
    assert text.startswith("Below is an instruction that describes a task.")
    assert threads[0].messages[0].content == "Give three tips for staying healthy."


def test_identity_placeholders_are_noted(data):
    threads, _, _ = read_all(data / "realdata/llamafactory/identity.json")
    noted = [
        t for t in threads if any("template placeholders" in n for n in t.meta.get("notes", []))
    ]
    assert len(noted) == sum("{{" in t.messages[-1].content for t in threads) > 80
    assert noted[0].meta["notes"] == ["holds unfilled template placeholders: {{author}}, {{name}}"]


def test_stack_exchange_pairs_prefer_response_j(data):
    check_stack_exchange_pairs(data / "realdata", 5)  # the copy's first 5 of 25 records


def check_stack_exchange_pairs(realdata, records: int) -> None:
    threads, _, _ = read_all(realdata / "torchtune_assets/stack_exchange_paired_tiny.json")
    raw = orjson.loads((realdata / "torchtune_assets/stack_exchange_paired_tiny.json").read_bytes())
    chosen, rejected = threads[0], threads[1]
    base = chosen.meta["pair_id"]
    assert (chosen.id, rejected.id) == (f"{base}:chosen", f"{base}:rejected")
    assert chosen.meta["preference"] == "chosen" and rejected.meta["preference"] == "rejected"
    assert chosen.messages[0].content == raw[0]["question"]
    assert chosen.messages[1].content == raw[0]["response_j"]
    assert rejected.messages[1].content == raw[0]["response_k"]
    assert len({t.meta["pair_id"] for t in threads}) == records


def test_vqa_image_is_kept_dropped_or_placeholdered(data):
    path = data / "realdata/torchtune_assets/vqa_tiny.json"
    (image,), _, _ = read_all(path)
    assert image.messages[0].to_dict()["content"] == [
        {"type": "image", "path": "tests/assets/rgb_pytorch.png"},
        {"type": "text", "text": "What is presented on image?"},
    ]
    assert "extra_fields" not in image.meta and "notes" not in image.meta
    (dropped,), _, _ = read_all(path, options=ConvertOptions(multimodal="drop"))
    assert dropped.messages[0].content == "What is presented on image?"
    assert dropped.meta["extra_fields"] == {"image": "tests/assets/rgb_pytorch.png"}
    assert dropped.meta["notes"] == ["dropped 1 image part(s) (text-only thread)"]
    (kept,), _, _ = read_all(path, options=ConvertOptions(multimodal="placeholder"))
    assert kept.messages[0].content == "[image]\n\nWhat is presented on image?"


def test_system_and_history_come_before_the_instruction(tmp_path):
    record = {
        "id": 7,
        "system": "You translate.",
        "history": [["'hello' in German?", "Hallo."]],
        "instruction": "And in French?",
        "input": "",
        "output": "Bonjour.",
    }
    (thread,), rejected, _ = read_records(tmp_path, record)
    assert rejected == [] and thread.id == "7"
    assert shape(thread) == [
        ("developer", "You translate."),
        ("user", "'hello' in German?"),
        ("assistant", "Hallo."),
        ("user", "And in French?"),
        ("assistant", "Bonjour."),
    ]
    assert [m.end_turn for m in thread.messages if m.role == "assistant"] == [True, True]
    assert "extra_fields" not in thread.meta


def test_alpaca_preference_strings_give_two_threads(tmp_path):
    record = {"instruction": "Largest planet?", "chosen": "Jupiter.", "rejected": "Saturn."}
    threads, _, _ = read_records(tmp_path, record)
    assert [(t.meta["preference"], t.messages[-1].content) for t in threads] == [
        ("chosen", "Jupiter."),
        ("rejected", "Saturn."),
    ]


def test_empty_output_keeps_the_prompt_and_says_so(tmp_path):
    (thread,), _, _ = read_records(tmp_path, {"instruction": "Say nothing.", "output": ""})
    assert shape(thread) == [("user", "Say nothing.")]
    assert thread.meta["notes"] == ["the answer is empty; the thread ends with the user message"]


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"instruction": "x", "output": ["a", "b"]}, "output must be a string (got array)"),
        ({"instruction": "", "input": "", "output": "y"}, "instruction and input are both empty"),
        (
            {"instruction": "x", "output": "y", "history": [["q"]]},
            "history[0] is not an [instruction, response] pair",
        ),
        (
            {"instruction": "x", "output": "y", "history": "q"},
            "history must be a list (got string)",
        ),
        ({"instruction": "x", "input": "y"}, "no output, response or chosen/rejected"),
        ({"instruction": "x", "output": "y", "system": 3}, "system must be a string (got number)"),
    ],
)
def test_bad_rows_are_quarantined_with_a_specific_reason(tmp_path, record, message):
    threads, rejected, stats = read_records(tmp_path, record, format="alpaca")
    assert threads == [] and stats.read_balanced
    assert (rejected[0].code, rejected[0].message) == ("missing_field", message)


@pytest.mark.parametrize(
    ("value", "score"),
    [
        ({"instruction": "a", "output": "b"}, 0.9),
        ({"instruction": "a", "response": "b"}, 0.9),
        ({"instruction": "a", "chosen": "b", "rejected": "c"}, 0.9),
        ({"question": "a", "response_j": "b", "response_k": "c"}, 1.0),
        ({"input": "a", "output": "b", "image": "c.png"}, 0.5),
        ({"instruction": "a"}, 0.0),
        ({"input": [{"role": "user", "content": "a"}], "ideal": "b"}, 0.0),
        ({"text": "a"}, 0.0),
        ([{"instruction": "a", "output": "b"}], 0.0),
        ("instruction", 0.0),
    ],
)
def test_sniff_scores_shapes_and_never_raises(value, score):
    assert ALPACA.sniff(value).score == score


def test_dolly_rows_keep_their_context_as_the_input(tmp_path):
    """Dolly's `instruction` + `context` + `response`: the context is the input, after the
    instruction, not a field left in meta."""
    path = tmp_path / "dolly.jsonl"
    row = {
        "instruction": "Summarize the text.",
        "context": "Cats are mammals that purr.",
        "response": "Cats purr.",
        "category": "summarization",
    }
    path.write_bytes(orjson.dumps(row) + b"\n")
    (thread,), rejected, _ = read_all(str(path))
    assert not rejected
    assert [(m.role, m.content) for m in thread.messages] == [
        ("user", "Summarize the text.\n\nCats are mammals that purr."),
        ("assistant", "Cats purr."),
    ]
    assert thread.meta["extra_fields"] == {"category": "summarization"}
