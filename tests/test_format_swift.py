"""ms-swift / Firefly / Qwen chats: `conversation` of {human, assistant} turns and
`query`/`response`/`history`, with Qwen-VL `<img>` and `<image>` media tags; detection
takes neither the prompt lists' bare queries nor Alpaca's rows."""

from __future__ import annotations

from pipeline.formats import FORMATS, ConvertOptions
from pipeline.formats.detect import best_for_record
from pipeline.mms import Media
from pipeline.sources import Record
from tests.conftest import REPO
from tests.reading import read_all

SAMPLES = REPO / "data_samples" / "swift"
FORMAT = FORMATS["swift"]


def convert(value: dict, **options) -> list:
    return FORMAT.to_threads(Record("t.jsonl", "t.jsonl:1", value), ConvertOptions(**options))


def roles(thread) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in thread.messages]


def test_samples_convert_with_two_faulty_records():
    threads, rejected, stats = read_all(SAMPLES)
    assert stats.read_balanced and stats.records_read == 12 and len(threads) == 11
    assert sorted(r.locator.rsplit("/", 1)[1] for r in rejected) == [
        "firefly_conversation.jsonl:4",
        "query_response.jsonl:8",
    ]


def test_firefly_conversation_turns_system_and_fields():
    (thread,) = convert(
        {
            "conversation_id": 7,
            "category": "Brainstorming",
            "system": "Be brief.",
            "conversation": [{"human": "Hi", "assistant": "Hello"}, {"human": "Bye"}],
        }
    )
    assert thread.id == "7"
    assert roles(thread) == [
        ("developer", "Be brief."),
        ("user", "Hi"),
        ("assistant", "Hello"),
        ("user", "Bye"),
    ]
    assert thread.meta["prompt_only"] and thread.meta["extra_fields"] == {
        "category": "Brainstorming"
    }


def test_query_response_history_and_preference():
    record = {
        "system": "S",
        "query": "q2",
        "response": "r2",
        "rejected_response": "bad",
        "history": [["q1", "r1"]],
    }
    chosen, rejected = convert(record)
    assert roles(chosen)[1:] == [
        ("user", "q1"),
        ("assistant", "r1"),
        ("user", "q2"),
        ("assistant", "r2"),
    ]
    assert roles(rejected)[-1] == ("assistant", "bad")
    assert chosen.meta["pair_id"] == rejected.meta["pair_id"]


def test_qwen_img_tags_and_listed_images_follow_multimodal():
    record = {"query": "<img>http://x/a.jpg</img>What is it?", "response": "A cat."}
    (dropped,) = convert(record, multimodal="drop")
    assert dropped.messages[0].content == "What is it?"
    assert dropped.meta["message_meta"]["0"] == {"images": ["http://x/a.jpg"]}
    (placeholder,) = convert(record, multimodal="placeholder")
    assert placeholder.messages[0].content == "[image]What is it?"
    (untagged,) = convert(
        {"query": "Q", "response": "R", "images": ["a.png"]}, multimodal="placeholder"
    )
    assert untagged.messages[0].content == "[image]Q"
    (kept,) = convert(record)
    assert kept.messages[0].content == "\ufffcWhat is it?"
    assert kept.messages[0].media == (Media("image", url="http://x/a.jpg"),)
    assert "message_meta" not in kept.meta
    (untagged,) = convert({"query": "Q", "response": "R", "images": ["a.png"]})
    assert untagged.messages[0].to_dict()["content"] == [
        {"type": "image", "path": "a.png"},
        {"type": "text", "text": "Q"},
    ]
    assert "extra_fields" not in untagged.meta


def test_detection_leaves_other_formats_their_records():
    assert best_for_record({"query": "What is 2 + 2?", "id": 3}).name == "prompts"
    assert best_for_record({"instruction": "Say hi.", "output": "hi"}).name == "alpaca"
    assert best_for_record({"query": "q", "response": "r", "history": []}).name == "swift"
    assert best_for_record({"conversation": [{"human": "h", "assistant": "a"}]}).name == "swift"
