"""Media in the thread (DESIGN §3): the model's markers and media, the JSON
content parts, validation naming what is wrong, and round trips that lose nothing."""

from __future__ import annotations

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline import (
    THREAD_ARROW_SCHEMA,
    THREAD_MEDIA_ARROW_SCHEMA,
    Media,
    Message,
    Thread,
    ThreadValidationError,
    threads_from_arrow,
    threads_to_arrow,
    validate_thread_dict,
)
from pipeline.mms import media_to_arrow
from tests.reading import read_all

IMAGE = Media("image", path="mllm_demo_data/1.jpg")
AUDIO = Media("audio", data="UklGRiQAAABXQVZF", mime="audio/wav")
VIDEO = Media("video", url="https://example.com/clip.mp4", mime="video/mp4")


def media_thread() -> Thread:
    return Thread(
        "m-1",
        [
            Message.developer("Describe what you are shown."),
            Message.user("\ufffc\nWho are they?\ufffcAnd this?", [IMAGE, AUDIO]),
            Message.assistant("Two players; a whistle."),
            Message.context("\ufffc", name="camera", media=[VIDEO]),
            Message.assistant("A goal.", media=[]),
        ],
        meta={"source": "mllm.json"},
    )


def test_a_message_with_media_writes_its_parts_in_order():
    data = orjson.loads(media_thread().to_json())
    assert data["messages"][1]["content"] == [
        {"type": "image", "path": "mllm_demo_data/1.jpg"},
        {"type": "text", "text": "\nWho are they?"},
        {"type": "audio", "data": "UklGRiQAAABXQVZF", "mime": "audio/wav"},
        {"type": "text", "text": "And this?"},
    ]
    assert data["messages"][3] == {
        "role": "context",
        "name": "camera",
        "content": [{"type": "video", "url": "https://example.com/clip.mp4", "mime": "video/mp4"}],
    }
    assert data["messages"][0]["content"] == "Describe what you are shown."
    assert Thread.from_dict(data) == media_thread()
    media_thread().validate()


def test_text_only_messages_keep_todays_json_byte_for_byte():
    thread = Thread("t", [Message.user("Hi \ufffc"), Message.assistant("Hello!")])
    assert thread.to_json() == (
        b'{"id":"t","messages":[{"role":"user","content":"Hi \xef\xbf\xbc"},'
        b'{"role":"assistant","format":"markdown","content":"Hello!","end_turn":true}],'
        b'"settings":null,"meta":{}}'
    )
    assert Thread.from_dict(orjson.loads(thread.to_json())).messages[0].media == ()


def test_neighbouring_text_parts_join_and_are_written_once():
    data = {
        "id": "t",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "a"},
                    {"type": "text", "text": ""},
                    {"type": "text", "text": "b"},
                    {"type": "image", "url": "https://x/1.png"},
                ],
            }
        ],
    }
    message = Thread.from_dict(data).messages[0]
    assert (message.content, message.media) == (
        "ab\ufffc",
        (Media("image", url="https://x/1.png"),),
    )
    assert message.to_dict()["content"] == [
        {"type": "text", "text": "ab"},
        {"type": "image", "url": "https://x/1.png"},
    ]


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        (
            [{"role": "platform", "content": [{"type": "image", "path": "a.jpg"}]}],
            ['messages[0].content: expected string, got [{"type":"image","path":"a.jpg"}]'],
        ),
        (
            [{"role": "user", "content": [{"type": "text", "text": "only text"}]}],
            [
                "messages[0].content: a list of content parts holds at least one media part "
                "(text alone is a string)"
            ],
        ),
        (
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "image", "path": "a.jpg", "url": "https://x/a.jpg"},
                        {"type": "audio", "mime": "audio/wav"},
                        {"type": "file", "path": "a.pdf"},
                        {"type": "text", "text": "x\ufffc", "lang": "en"},
                    ],
                }
            ],
            [
                "messages[0].content[0]: holds path and url: a media part has exactly one",
                "messages[0].content[1]: a media part needs one of path, url, data",
                'messages[0].content[2].type: unknown part type "file" '
                "(expected text, image, audio, video)",
                "messages[0].content[3].lang: unknown field",
                "messages[0].content[3].text: holds U+FFFC, which marks where media stand in a "
                "message with media",
            ],
        ),
        (
            [{"role": "user", "content": [{"type": "image", "data": "", "mime": 3}]}],
            [
                "messages[0].content[0].data: must not be empty",
                "messages[0].content[0].mime: expected string or null, got 3",
            ],
        ),
    ],
)
def test_validation_names_the_part_at_fault(messages, expected):
    assert [str(e) for e in validate_thread_dict({"id": "t", "messages": messages})] == expected


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (Message.user("no marker", [IMAGE]), "holds 0 media marker(s) (U+FFFC) for 1 media"),
        (Message.user("\ufffc\ufffc", [IMAGE]), "holds 2 media marker(s) (U+FFFC) for 1 media"),
    ],
)
def test_validate_catches_markers_that_do_not_match_the_media(message, expected):
    with pytest.raises(ThreadValidationError) as info:
        Thread("t", [message]).validate()
    assert [str(e) for e in info.value.errors] == [f"messages[0].content: {expected}"]


def test_a_message_whose_markers_do_not_match_has_no_json_form():
    with pytest.raises(ValueError, match=r"holds 0 media marker\(s\) \(U\+FFFC\) for 1 media"):
        Thread("t", [Message.user("lost its marker", [IMAGE])]).to_json()


def test_validate_catches_media_on_a_platform_message_and_a_bad_media_built_in_python():
    with pytest.raises(ThreadValidationError, match=r"messages\[0\]\.content: expected string"):
        Thread("t", [Message("platform", "\ufffc", media=(IMAGE,))]).validate()
    with pytest.raises(ThreadValidationError, match=r"content\[0\]: a media part needs one"):
        Thread("t", [Message.user("\ufffc", [Media("image")])]).validate()


kinds = st.sampled_from(["image", "audio", "video"])
values = st.text(min_size=1, max_size=12)
media_items = st.builds(
    lambda kind, source, value, mime: Media(kind, **{source: value}, mime=mime),
    kinds,
    st.sampled_from(["path", "url", "data"]),
    values,
    st.none() | values,
)
texts = st.text(max_size=10)


@st.composite
def media_messages(draw: st.DrawFn) -> Message:
    """A valid message, with media (markers anywhere in its text) or without (where a
    literal U+FFFC is ordinary text)."""
    role = draw(st.sampled_from(["platform", "developer", "user", "assistant", "context"]))
    media = () if role == "platform" else tuple(draw(st.lists(media_items, max_size=3)))
    if media:
        pieces = [draw(texts).replace("\ufffc", "") for _ in range(len(media) + 1)]
        content = "\ufffc".join(pieces)
    else:
        content = draw(texts | st.just("a\ufffcb"))
    if role == "assistant":
        return Message.assistant(content, end_turn=draw(st.booleans()), media=media)
    if role == "context":
        return Message.context(content, name=draw(st.none() | values), media=media)
    return Message(role, content, media=media)


threads = st.builds(
    lambda i, messages: Thread(i, messages),
    values,
    st.lists(media_messages(), min_size=1, max_size=4),
)


@given(st.lists(threads, min_size=1, max_size=3))
def test_json_model_and_arrow_round_trips_are_lossless(batch):
    for thread in batch:
        thread.validate()
        data = orjson.loads(thread.to_json())
        assert validate_thread_dict(data) == []
        again = Thread.from_dict(data)
        assert again == thread and again.to_json() == thread.to_json()
    table = threads_to_arrow(batch)
    holds_media = any(m.media for t in batch for m in t.messages)
    assert table.schema == (THREAD_MEDIA_ARROW_SCHEMA if holds_media else THREAD_ARROW_SCHEMA)
    assert threads_from_arrow(table) == batch
    assert threads_from_arrow(threads_to_arrow(batch, media=True)) == batch


def test_text_only_tables_keep_todays_schema_and_media_tables_add_one_column():
    text_only = Thread("t", [Message.user("Hi \ufffc"), Message.assistant("Hello!")])
    assert threads_to_arrow([text_only]).schema == THREAD_ARROW_SCHEMA
    table = threads_to_arrow([text_only, media_thread()])
    assert table.schema.names == ["id", "messages", "settings", "meta", "media"]
    assert table.schema.field("messages").type == THREAD_ARROW_SCHEMA.field("messages").type
    assert table.column("media").to_pylist() == [
        None,
        [
            {"message": 1, "kind": "image", "path": "mllm_demo_data/1.jpg", "url": None}
            | {"data": None, "mime": None, "frames": None},
            {"message": 1, "kind": "audio", "path": None, "url": None}
            | {"data": "UklGRiQAAABXQVZF", "mime": "audio/wav", "frames": None},
            {"message": 3, "kind": "video", "path": None, "url": "https://example.com/clip.mp4"}
            | {"data": None, "mime": "video/mp4", "frames": None},
        ],
    ]
    assert (
        table.column("messages").to_pylist()[1][1]["content"]
        == "\ufffc\nWho are they?\ufffcAnd this?"
    )
    assert threads_from_arrow(table) == [text_only, media_thread()]
    with pytest.raises(ValueError, match="need"):
        threads_to_arrow([media_thread()], media=False)


def _media_table(media: list[dict[str, object]], content: str = "\ufffc") -> pa.Table:
    row = {
        "id": "t",
        "messages": [{"role": "user", "content": content}],
        "settings": None,
        "meta": "{}",
        "media": media,
    }
    return pa.Table.from_pylist([row], schema=THREAD_MEDIA_ARROW_SCHEMA)


@pytest.mark.parametrize(
    ("media", "content", "expected"),
    [
        (
            [{"message": 0, "kind": "image", "path": "a.jpg"}] * 2,
            "\ufffc",
            "messages[0].content: holds 1 media marker(s) (U+FFFC) for 2 media",
        ),
        (
            [{"message": 4, "kind": "image", "path": "a.jpg"}],
            "\ufffc",
            "media[0].message: no message 4 to be in",
        ),
        (
            [{"message": 0, "kind": "sticker", "path": "a.jpg"}],
            "\ufffc",
            'messages[0].content[0].type: unknown part type "sticker"',
        ),
    ],
)
def test_a_media_column_that_does_not_fit_its_messages_is_named(media, content, expected):
    with pytest.raises(ThreadValidationError) as info:
        threads_from_arrow(_media_table(media, content))
    assert str(info.value).startswith(expected)


def test_mms_parquet_with_media_reads_back_and_a_broken_row_is_quarantined(tmp_path):
    good = tmp_path / "good.parquet"
    pq.write_table(threads_to_arrow([media_thread()]), good)
    (back,), rejected, _ = read_all(good.as_posix(), format="mms")
    assert rejected == [] and back.messages == media_thread().messages
    broken = tmp_path / "broken.parquet"
    pq.write_table(
        _media_table([{"message": 0, "kind": "image", "path": "a.jpg"}], "no marker"), broken
    )
    threads, (rejection,), stats = read_all(broken.as_posix(), format="mms")
    assert threads == [] and stats.read_balanced
    assert rejection.code == "invalid_thread"
    assert rejection.details[0]["message"] == "holds 0 media marker(s) (U+FFFC) for 1 media"


def test_a_json_thread_with_a_media_field_of_its_own_keeps_it_as_an_extra(tmp_path):
    path = tmp_path / "t.jsonl"
    record = {"id": "t", "messages": [{"role": "user", "content": "Hi"}], "media": "cat.png"}
    path.write_bytes(orjson.dumps(record))
    (thread,), _, _ = read_all(path.as_posix(), format="mms")
    assert thread.meta["extra_fields"] == {"media": "cat.png"}


def test_the_media_column_alone_keeps_what_a_cut_thread_keeps():
    """`media_to_arrow` (a run's part files): a thread cut at a message boundary keeps the
    media of the messages it keeps."""
    threads = [media_thread(), Thread("t", [Message.user("Hi")])]
    whole = media_to_arrow(threads).to_pylist()
    assert whole == threads_to_arrow(threads).column("media").to_pylist()
    cut = media_to_arrow(threads, [2, 1]).to_pylist()
    assert [[item["message"] for item in cut[0]], cut[1]] == [[1, 1], None]
    assert media_to_arrow(threads, [1, 1]).to_pylist() == [None, None]
