"""Media read into messages (`--multimodal keep`, the default): every adapter
that reads media keeps each one in order, at its place among the text, as the source
wrote where it is (path, URL or base64 data); a record whose media tags and lists differ
is quarantined; `drop` and `placeholder` stay as they were."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import orjson
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from pipeline import Media, Message, Thread
from pipeline.cli import main
from pipeline.formats import ConvertOptions
from pipeline.formats.harmony.render import HarmonyRenderError, thread_to_harmony
from tests.conftest import DATA, REPO
from tests.reading import read_all, read_records
from tests.test_run import SAMPLE_TOKENIZER, output_files, run_cli, write_config

NO_MEDIA_FILES = "--no-check-media"
"""The LLaMA-Factory demos' media files are not in the repository: these tests are about
their conversion, so the media are not read (tests/test_media_check.py checks media)."""

LLAMA_FACTORY = DATA / "realdata" / "llamafactory"
STAND_INS = DATA / "formats" / "multimodal"
TAG = re.compile(r"<(image|video|audio)>")
LISTS = {"image": "images", "video": "videos", "audio": "audios"}


def media_of(thread: Thread) -> list[tuple[str, str | None]]:
    """The thread's media in order: (kind, where it is)."""
    return [(m.kind, m.path or m.url or m.data) for msg in thread.messages for m in msg.media]


def tagged_media(record: dict[str, Any], texts: list[str]) -> list[tuple[str, str]]:
    """What LLaMA-Factory puts where: each tag, in text order, takes its list's next item."""
    taken = {kind: iter(record.get(key, [])) for kind, key in LISTS.items()}
    return [(kind, next(taken[kind])) for text in texts for kind in TAG.findall(text)]


def assert_markers_match(thread: Thread) -> None:
    thread.validate()
    for message in thread.messages:
        assert message.content.count("\ufffc") == len(message.media)


@pytest.mark.parametrize(
    "name",
    [
        "mllm_demo.json",
        "mllm_audio_demo.json",
        "mllm_video_demo.json",
        "mllm_video_audio_demo.json",
    ],
)
def test_llamafactory_mllm_demos_keep_every_media_in_order(name):
    records = json.loads((LLAMA_FACTORY / name).read_text())
    threads, rejected, stats = read_all(LLAMA_FACTORY / name)
    assert rejected == [] and stats.read_balanced and len(threads) == len(records)
    for record, thread in zip(records, threads, strict=True):
        texts = [m["content"] for m in record["messages"]]
        assert media_of(thread) == tagged_media(record, texts)
        assert media_of(thread), "every demo record has media"
        assert_markers_match(thread)
        assert "extra_fields" not in thread.meta  # the lists are in the messages now
        assert "notes" not in thread.meta


def test_llamafactory_v1_content_parts_keep_every_image_in_order():
    lines = [
        line
        for line in (LLAMA_FACTORY / "v1_multimodal_demo.jsonl").read_text().splitlines()
        if line.strip()
    ]
    threads, rejected, _ = read_all(LLAMA_FACTORY / "v1_multimodal_demo.jsonl")
    assert rejected == [] and len(threads) == len(lines) == 24
    for line, thread in zip(lines, threads, strict=True):
        record = json.loads(line)
        expected = [
            ("image", part["value"])
            for message in record["messages"]
            for part in message["content"]
            if part["type"] == "image_url"
        ]
        assert media_of(thread) == expected
        assert_markers_match(thread)
    first = threads[0].messages[0].to_dict()["content"]
    assert first == [
        {"type": "image", "path": "data/mllm_demo_data/1.jpg"},
        {"type": "text", "text": "Who are they?"},
    ]


def test_openai_image_url_parts_of_a_real_tool_conversation_are_kept():
    path = DATA / "realdata" / "functionary" / "test_case_vision.json"
    (thread,), rejected, _ = read_all(path)
    assert rejected == []
    assert media_of(thread) == [
        ("image", "song_pic.png"),
        ("image", "tang_pic.png"),
        ("image", "hanoi.png"),
    ]
    first = next(m for m in thread.messages if m.media)
    assert first.to_dict()["content"] == [
        {"type": "text", "text": "is the car Song more expensive than car Tang?"},
        {"type": "image", "path": "song_pic.png"},
        {"type": "image", "path": "tang_pic.png"},
    ]
    assert_markers_match(thread)


def test_xtuner_llava_records_keep_their_image_at_its_tag():
    threads, rejected, _ = read_all(STAND_INS / "xtuner_llava.json")
    assert rejected == [] and [t.id for t in threads] == ["000000000001", "000000000002"]
    assert [m.to_dict()["content"] for m in threads[0].messages[:1]] == [
        [
            {"type": "image", "path": "coco/train2017/000000000001.jpg"},
            {"type": "text", "text": "\nWhat colour is the kite in the picture?"},
        ]
    ]
    assert threads[1].messages[0].content == "How many boats are moored at the pier?\n\ufffc"
    assert media_of(threads[1]) == [("image", "coco/train2017/000000000002.jpg")]
    assert all("extra_fields" not in t.meta for t in threads)
    (dropped, _), _, _ = read_all(
        STAND_INS / "xtuner_llava.json", options=ConvertOptions(multimodal="drop")
    )
    assert dropped.messages[0].media == () and "<image>" in dropped.messages[0].content
    assert dropped.meta["extra_fields"] == {"image": "coco/train2017/000000000001.jpg"}


def test_ms_swift_records_keep_images_videos_and_audio_and_a_mismatch_is_quarantined():
    threads, rejected, stats = read_all(STAND_INS / "swift_messages.jsonl")
    assert stats.read_balanced and len(threads) == 2
    pets, clip = threads
    assert [m.role for m in pets.messages] == ["developer", "user", "assistant"]
    assert media_of(pets) == [("image", "/data/pets/kitten.jpg"), ("image", "/data/pets/puppy.png")]
    assert pets.messages[1].content.startswith("\ufffc\ufffcWhat is the difference")
    assert clip.messages[0].media == (Media("video", path="clips/bridge.mp4"),)
    assert clip.messages[2].media == (Media("audio", url="https://example.com/sounds/rain.wav"),)
    (rejection,) = rejected
    assert (rejection.code, rejection.message) == (
        "media_mismatch",
        "images lists 2 file(s) but the turns hold 1 <image>",
    )
    assert rejection.locator.endswith("swift_messages.jsonl:3")


def test_a_tag_past_the_end_of_its_list_is_quarantined_and_a_bad_item_named(tmp_path):
    more_tags = {
        "conversations": [
            {"from": "human", "value": "<image><image>Compare."},
            {"from": "gpt", "value": "Same."},
        ],
        "images": ["a.jpg"],
    }
    bad_item = {
        "conversations": [{"from": "human", "value": "<image>?"}, {"from": "gpt", "value": "!"}],
        "images": [7],
    }
    threads, rejected, _ = read_records(tmp_path, more_tags, bad_item)
    assert threads == []
    assert [(r.code, r.message) for r in rejected] == [
        ("media_mismatch", "images lists 1 file(s) but the turns hold 2 <image>"),
        ("missing_field", "images[0] is a number, not a path, URL or data"),
    ]
    # as before media were kept, the other modes only note the mismatch
    (noted, _), _, _ = read_records(tmp_path, more_tags, bad_item, options=drop())
    assert "images lists 1 file(s) but the turns hold 2 <image>" in noted.meta["notes"]


def drop() -> ConvertOptions:
    return ConvertOptions(multimodal="drop")


def test_openai_media_parts_of_every_shape(tmp_path):
    record = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Look:"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}},
                    {"type": "input_audio", "input_audio": {"data": "UklG", "format": "mp3"}},
                    {"type": "video_url", "video_url": {"url": "https://x.org/v.mp4"}},
                    {"type": "input_image", "file_id": "file-123"},
                    {"type": "file", "file": {"file_id": "file-456"}},
                    {"type": "text", "text": "What now?"},
                ],
            },
            {"role": "assistant", "content": "Call the tool.", "tool_calls": [call()]},
            {
                "role": "tool",
                "tool_call_id": "c1",
                "content": [{"type": "image_url", "image_url": "https://x.org/chart.png"}],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Here is a sketch:"},
                    {"type": "image", "path": "sketch.png", "mime": "image/png"},
                ],
            },
        ]
    }
    (thread,), rejected, _ = read_records(tmp_path, record)
    assert rejected == []
    user, _, _, result, answer = thread.messages
    assert user.content == "Look:\ufffc\ufffc\ufffcWhat now?"  # nothing around media
    assert user.media == (
        Media("image", data="iVBO", mime="image/png"),
        Media("audio", data="UklG", mime="audio/mpeg"),
        Media("video", url="https://x.org/v.mp4"),
    )
    assert (result.role, result.name, result.media) == (
        "context",
        "lookup",
        (Media("image", url="https://x.org/chart.png"),),
    )
    assert answer.media == (Media("image", path="sketch.png", mime="image/png"),)
    assert thread.meta["message_meta"]["0"] == {"media": ["file-123", "file-456"]}
    assert thread.meta["notes"][-2:] == [
        "dropped 1 file part(s): MMS keeps images, audio and video that name a path, URL or data",
        "dropped 1 image part(s): MMS keeps images, audio and video that name a path, URL or data",
    ]


def call() -> dict[str, Any]:
    return {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}


def test_anthropic_image_blocks_and_tool_results_with_images(tmp_path):
    png = {"type": "base64", "media_type": "image/png", "data": "iVBO"}
    record = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Two pictures:"},
                    {"type": "image", "source": png},
                    {"type": "image", "source": {"type": "url", "url": "https://x.org/b.jpg"}},
                    {"type": "image", "source": {"type": "file", "file_id": "file_1"}},
                ],
            },
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "screenshot", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [
                            {"type": "text", "text": "Captured."},
                            {"type": "image", "source": png},
                        ],
                    }
                ],
            },
            {"role": "assistant", "content": "Both show a harbour."},
        ]
    }
    (thread,), rejected, _ = read_records(tmp_path, record, format="anthropic")
    assert rejected == []
    assert thread.messages[0].content == "Two pictures:\ufffc\ufffc"
    assert thread.messages[0].media == (
        Media("image", data="iVBO", mime="image/png"),
        Media("image", url="https://x.org/b.jpg"),
    )
    result = next(m for m in thread.messages if m.role == "context")
    assert (result.content, result.media) == (
        "Captured.\ufffc",
        (Media("image", data="iVBO", mime="image/png"),),
    )
    assert any("dropped 1 image part(s)" in note for note in thread.meta["notes"])


def test_gemini_inline_and_file_media_in_user_and_model_turns(tmp_path):
    record = {
        "contents": [
            {
                "role": "user",
                "parts": [
                    {"fileData": {"mimeType": "audio/mp3", "fileUri": "gs://b/talk.mp3"}},
                    {"text": "Summarise, then draw it."},
                ],
            },
            {
                "role": "model",
                "parts": [
                    {"text": "A talk on tides. "},
                    {"inlineData": {"mimeType": "image/png", "data": "iVBO"}},
                ],
            },
        ]
    }
    (thread,), _, _ = read_records(tmp_path, record, format="gemini")
    user, model = thread.messages
    assert (user.content, user.media) == (
        "\ufffcSummarise, then draw it.",
        (Media("audio", url="gs://b/talk.mp3", mime="audio/mp3"),),
    )
    assert (model.role, model.content) == ("assistant", "A talk on tides. \ufffc")
    assert model.media == (Media("image", data="iVBO", mime="image/png"),)


def test_alpaca_rows_keep_media_at_their_tags_or_before_the_prompt(tmp_path):
    tagged = {
        "instruction": "Compare <image> with <image>.",
        "output": "Same.",
        "images": ["a", "b"],
    }
    listed = {"instruction": "What is it?", "output": "A cat.", "videos": ["c.mp4"]}
    (first, second), rejected, _ = read_records(tmp_path, tagged, listed, format="alpaca")
    assert rejected == []
    assert first.messages[0].content == "Compare \ufffc with \ufffc."
    assert media_of(first) == [("image", "a"), ("image", "b")]
    assert second.messages[0].to_dict()["content"] == [
        {"type": "video", "path": "c.mp4"},
        {"type": "text", "text": "What is it?"},
    ]


def test_mapped_format_media_keys(tmp_path):
    record = {
        "dialog": [
            {"who": "customer", "said": "<image>Is this damaged?"},
            {"who": "agent", "said": "The corner is dented."},
        ],
        "photos": ["claims/42.jpg"],
    }
    source = tmp_path / "claims.jsonl"
    source.write_bytes(orjson.dumps(record) + b"\n")
    mapping = tmp_path / "mapping.yaml"
    mapping.write_text(
        "messages: dialog\nrole: who\ncontent: said\n"
        "roles: {customer: user, agent: assistant}\nimages: photos\n"
    )
    out = tmp_path / "out.jsonl"
    args = ["convert", str(source), "--mapping", str(mapping), "-o", str(out)]
    result = CliRunner().invoke(main, [*args, "--no-check-media"])  # claims/42.jpg: none
    assert result.exit_code == 0, result.output
    thread = orjson.loads(out.read_bytes())
    assert thread["messages"][0]["content"] == [
        {"type": "image", "path": "claims/42.jpg"},
        {"type": "text", "text": "Is this damaged?"},
    ]
    assert thread["meta"]["source_format"] == "mapped" and "extra_fields" not in thread["meta"]


def test_dataset_info_registry_reads_the_real_mllm_demo_with_its_images(tmp_path):
    out = tmp_path / "mllm.jsonl"
    registry = str(LLAMA_FACTORY / "dataset_info.json")
    args = ["convert", "--dataset-info", registry, "mllm_demo", "-o", str(out)]
    result = CliRunner().invoke(main, [*args, NO_MEDIA_FILES])
    assert result.exit_code == 0, result.output
    records = json.loads((LLAMA_FACTORY / "mllm_demo.json").read_text())
    threads = [Thread.from_dict(orjson.loads(line)) for line in out.read_bytes().splitlines()]
    assert [media_of(t) for t in threads] == [
        tagged_media(r, [m["content"] for m in r["messages"]]) for r in records
    ]


def test_a_literal_object_replacement_character_never_passes_for_a_marker(tmp_path):
    with_media = {
        "conversations": [
            {"from": "human", "value": "<image>What is \ufffc?"},
            {"from": "gpt", "value": "A placeholder \ufffc glyph."},
        ],
        "images": ["a.png"],
    }
    (thread,), _, _ = read_records(tmp_path, with_media)
    assert thread.messages[0].content == "\ufffcWhat is \ufffd?"
    assert thread.messages[1].content == "A placeholder \ufffc glyph."  # no media: as written
    assert thread.meta["notes"] == [
        "a literal U+FFFC in a message with media was written as U+FFFD "
        "(U+FFFC marks where media stand)"
    ]


def test_convert_keeps_media_by_default_and_drop_and_placeholder_are_as_before(tmp_path):
    source = str(LLAMA_FACTORY / "mllm_video_audio_demo.json")
    outputs = {}
    for mode in ("keep", "drop", "placeholder", None):
        out = tmp_path / f"{mode}.jsonl"
        args = ["convert", source, "-o", str(out), NO_MEDIA_FILES]
        result = CliRunner().invoke(main, args + ([f"--multimodal={mode}"] if mode else []))
        assert result.exit_code == 0, result.output
        outputs[mode] = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert outputs[None] == outputs["keep"]
    assert outputs["keep"][0]["messages"][0]["content"] == [
        {"type": "video", "path": "mllm_demo_data/4.mp4"},
        {"type": "audio", "path": "mllm_demo_data/4.mp3"},
        {"type": "text", "text": "What is the video describing?"},
    ]
    assert outputs["drop"][0]["messages"][0]["content"] == "What is the video describing?"
    assert outputs["placeholder"][0]["messages"][0]["content"] == (
        "[video][audio]What is the video describing?"
    )


def test_text_only_inputs_convert_to_the_same_bytes_whatever_the_mode(tmp_path):
    inputs = [str(DATA / "realdata" / "llamafactory" / "glaive_toolcall_en_demo.json")]
    inputs.append(str(DATA / "realdata" / "openai_finetune_examples"))
    written: list[bytes] = []
    for mode in ("keep", "drop"):
        out: Path = tmp_path / f"{mode}.jsonl"
        result = CliRunner().invoke(
            main, ["convert", *inputs, "-o", str(out), "--multimodal", mode]
        )
        assert result.exit_code == 0, result.output
        written.append(out.read_bytes())
    assert written[0] == written[1] and written[0]


def test_a_run_over_media_lints_tokenizes_shards_and_verifies(tmp_path):
    """Media threads go through a run, their shards' messages holding each media as a
    content part where its marker stood (DESIGN §7): no traceback, and `mms verify`
    agrees."""
    tokenize = f"tokenize: {{tokenizer: {SAMPLE_TOKENIZER}, max_tokens: 512}}"
    config = write_config(tmp_path, "media", LLAMA_FACTORY / "mllm_demo.json", tokenize)
    out = tmp_path / "out"
    result = run_cli(str(config), "-o", str(out), NO_MEDIA_FILES)
    assert result.exit_code == 0, result.output
    rows = pq.read_table(out / "data" / "train-00000-of-00001.parquet").to_pylist()
    parts = [part for row in rows for m in row["messages"] for part in m["content"]]
    assert rows and {"type": "image", "text": None} in parts
    verified = CliRunner().invoke(main, ["verify", str(out)])
    assert verified.exit_code == 0, verified.output


def test_a_text_only_run_writes_the_same_bytes_whatever_the_mode(tmp_path):
    tokenize = f"tokenize: {{tokenizer: {SAMPLE_TOKENIZER}, max_tokens: 512}}"
    source = REPO / "data_samples" / "hermes"
    written = []
    for mode in ("keep", "drop"):
        folder = tmp_path / mode
        folder.mkdir()
        stages = (f"normalize: {{multimodal: {mode}}}", "lint: {fail_on: never}", tokenize)
        config = write_config(folder, "run", source, *stages)
        result = run_cli(str(config), "-o", str(folder / "out"))
        assert result.exit_code == 0, result.output
        files = output_files(folder / "out")
        manifest = orjson.loads(files.pop("manifest.json"))
        files.pop("README.md")  # the card names the manifest's digest
        assert manifest["config"]["stages"]["normalize"]["multimodal"] == mode
        written.append(files)
    assert written[0] == written[1]


def test_a_harmony_export_leaves_out_a_thread_with_media():
    thread = Thread(
        "m",
        [
            Message.user("\ufffcWhat is it?", [Media("image", path="a.jpg")]),
            Message.assistant("A cat."),
        ],
    )
    with pytest.raises(HarmonyRenderError, match=r"message 0 \(user\) holds 1 media"):
        thread_to_harmony(thread)


def test_pii_redaction_keeps_every_media_marker(tmp_path):
    """A redaction never takes a marker with it, even a span that runs to the end of the
    text (an unterminated private key block)."""
    record = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Mail ann@example.com: -----BEGIN PRIVATE KEY-----"},
                    {"type": "image_url", "image_url": {"url": "https://x.org/a.png"}},
                    {"type": "text", "text": "and this"},
                    {"type": "image_url", "image_url": {"url": "https://x.org/b.png"}},
                ],
            },
            {"role": "assistant", "content": "Done."},
        ]
    }
    source = tmp_path / "in.jsonl"
    source.write_bytes(orjson.dumps(record) + b"\n")
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(main, ["curate", str(source), "-o", str(out), "--redact-pii"])
    assert result.exit_code == 0, result.output
    thread = Thread.from_dict(orjson.loads(out.read_bytes()))
    user = thread.messages[0]
    assert user.content == "Mail <EMAIL_1>: <SECRET_1>\ufffcand this\ufffc"
    assert [m.url for m in user.media] == ["https://x.org/a.png", "https://x.org/b.png"]
    thread.validate()


def test_trl_vision_parts_take_the_images_column_in_order(tmp_path):
    """TRL's and Hugging Face's vision rows: `{"type": "image"}` parts (other keys null, as
    a dataset's struct holds them) take the `images` column's items in order."""
    bare = {"type": "image", "text": None}
    record = {
        "images": ["a.png", "b.png"],
        "prompt": [
            {
                "role": "user",
                "content": [
                    bare,
                    {"type": "text", "text": "and"},
                    bare,
                    {"type": "text", "text": "?"},
                ],
            }
        ],
        "completion": [{"role": "assistant", "content": [{"type": "text", "text": "Cats."}]}],
    }
    (thread,), rejected, _ = read_records(tmp_path, record)
    assert rejected == []
    assert thread.messages[0].content == "\ufffcand\ufffc?"
    assert media_of(thread) == [("image", "a.png"), ("image", "b.png")]
    short = {**record, "images": ["a.png"]}
    _, (rejection,), _ = read_records(tmp_path, short)
    assert rejection.code == "media_mismatch"
