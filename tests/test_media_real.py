"""Real multimodal samples through `mms run` (issue 38's done-when): LLaMA-Factory's mllm
demos with their own images, audio and video (tests/data/realdata/llamafactory/
mllm_demo_data, PROVENANCE.txt beside it) and an OpenAI `image_url` record convert with
every media kept, in order; each placeholder id stands where its tag was; the shard's media
cells are those very files (by sha256), whether a cell embeds the bytes or names a path.
Media are checked, as a run does by default; nothing here reaches the network."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.tokenize import IGNORE

REPO = Path(__file__).resolve().parents[1]
SAMPLE_TOKENIZER = REPO / "configs" / "sample_tokenizer"
LLAMA_FACTORY = REPO / "tests" / "data" / "realdata" / "llamafactory"
DEMO_MEDIA = LLAMA_FACTORY / "mllm_demo_data"
COLUMNS = {"images": "image", "audios": "audio", "videos": "video"}
"""A shard's media column and the kind it holds."""
TAGS = {"<image>": "<|image|>", "<audio>": "<|audio|>", "<video>": "<|video|>"}
"""LLaMA-Factory's tags and the placeholder each becomes (DESIGN §4)."""


@dataclass
class Expected:
    """One source record as its row must show it: each message's (role, content) with
    the placeholders' text where the tags were, and the sha256 of each media of a
    column, in order."""

    messages: list[tuple[str, str]]
    media: dict[str, list[str]] = field(default_factory=dict)


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tagged(text: str) -> str:
    for tag, placeholder in TAGS.items():
        text = text.replace(tag, placeholder)
    return text


def llamafactory_expected(name: str, keep: list[int] | None = None) -> list[Expected]:
    """The rows LLaMA-Factory's demo `name` must become (its records `keep`, default all)."""
    records = json.loads((LLAMA_FACTORY / name).read_text())
    return [
        Expected(
            [(m["role"], tagged(m["content"])) for m in record["messages"]],
            {
                column: [sha256_of(LLAMA_FACTORY / p) for p in record.get(column, [])]
                for column in COLUMNS
            },
        )
        for number, record in enumerate(records)
        if keep is None or number in keep
    ]


def run(tmp_path: Path, source: Path, *stages: str) -> Path:
    """`mms run` of `source` (media checked, the default), one split in plan order."""
    config = tmp_path / "run.yaml"
    lines = [
        "name: media-real",
        "inputs:",
        f"  - path: {source}",
        "stages:",
        "  lint: {fail_on: never}",
        f"  tokenize: {{tokenizer: {SAMPLE_TOKENIZER}}}",
        "  shard: {splits: {train: 1.0}, shuffle: false}",
        *(f"  {stage}" for stage in stages),
        f"output: {tmp_path / 'out'}",
    ]
    config.write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(main, ["run", str(config)])
    assert result.exit_code == 0, result.output
    return tmp_path / "out"


def shard_rows(out: Path) -> list[dict]:
    return [
        row
        for shard in sorted((out / "data").glob("*.parquet"))
        for row in pq.read_table(shard).to_pylist()
    ]


def messages_of(decoded: str) -> list[tuple[str, str]]:
    """Each message's (role, content) in a row's decoded ids (DESIGN §4's rendering)."""
    messages = []
    for piece in decoded.split("<|role|>")[1:]:
        head, content = piece.split("<|content|>", 1)
        messages.append((head.split("<|", 1)[0], content.removesuffix("<|end_turn|>")))
    return messages


def cell_sha256(cell: dict, out: Path, folder: Path, listed: dict[str, str]) -> str:
    """The sha256 of the media a shard cell is: its bytes when it embeds them, else the
    file its path names, in the output's media/ (copy mode: then the manifest lists it
    with that hash) or as the source wrote it, relative to the input file's folder."""
    if cell["bytes"] is not None:
        return hashlib.sha256(cell["bytes"]).hexdigest()
    path = cell["path"]
    if path.startswith("media/"):
        digest = sha256_of(out / path)
        assert listed[path] == digest
        return digest
    return sha256_of(folder / path)


def assert_media_kept(out: Path, folder: Path, expected: list[Expected]) -> None:
    """The rows of `out` are `expected`, in order: text with each placeholder id where its
    tag was (never trained), and the media of each column, by their bytes, in order, in
    the shard's cells and in the thread's `meta.media_checked`."""
    from transformers import AutoTokenizer

    rows = shard_rows(out)
    assert len(rows) == len(expected)
    tokenizer = AutoTokenizer.from_pretrained(str(out / "tokenizer"))
    assert tokenizer.image_token == "<|image|>"
    token_ids = {kind: getattr(tokenizer, f"{kind}_token_id") for kind in COLUMNS.values()}
    assert token_ids["image"] == tokenizer.image_token_id
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    listed = {e["path"]: e["sha256"] for e in manifest["files"] if e["path"].startswith("media/")}
    for row, want in zip(rows, expected, strict=True):
        decoded = tokenizer.decode(row["input_ids"])
        assert messages_of(decoded) == want.messages
        checked = orjson.loads(row["meta"])["media_checked"]
        kinds = [media["kind"] for media in row["media"]]
        assert len(checked) == len(kinds)
        for column, kind in COLUMNS.items():
            digests = want.media.get(column, [])
            token_id = token_ids[kind]
            assert row["input_ids"].count(token_id) == len(digests)
            assert decoded.count(TAGS[f"<{kind}>"]) == len(digests)
            assert all(
                label == IGNORE
                for token, label in zip(row["input_ids"], row["labels"], strict=True)
                if token == token_id
            )
            cells = row.get(column) or []
            assert [cell_sha256(cell, out, folder, listed) for cell in cells] == digests
            of_kind = [
                entry["sha256"] for entry, k in zip(checked, kinds, strict=True) if k == kind
            ]
            assert of_kind == digests


@pytest.mark.parametrize("copy", [False, True], ids=["references", "copied"])
def test_the_mllm_demo_keeps_its_real_images_where_the_tags_were(tmp_path, copy):
    stages = ["media: {copy: true}"] if copy else []
    out = run(tmp_path, LLAMA_FACTORY / "mllm_demo.json", *stages)
    expected = llamafactory_expected("mllm_demo.json")
    assert_media_kept(out, LLAMA_FACTORY, expected)
    rows = shard_rows(out)
    records = json.loads((LLAMA_FACTORY / "mllm_demo.json").read_text())
    stored = sorted(p.name for p in (out / "media").iterdir()) if copy else None
    for row, record in zip(rows, records, strict=True):
        paths = [cell["path"] for cell in row["images"]]
        if copy:
            assert paths == [f"media/{sha256_of(LLAMA_FACTORY / p)}.jpg" for p in record["images"]]
        elif all(cell["bytes"] is None for cell in row["images"]):
            assert paths == record["images"]  # as the source wrote them
    if copy:
        assert stored == sorted(f"{sha256_of(p)}.jpg" for p in DEMO_MEDIA.glob("*.jpg"))
    else:
        assert not (out / "media").exists()
    verified = CliRunner().invoke(main, ["verify", str(out)])
    assert verified.exit_code == 0, verified.output


def test_the_video_audio_demo_keeps_its_real_video_and_audio(tmp_path):
    out = run(tmp_path, LLAMA_FACTORY / "mllm_video_audio_demo.json")
    assert_media_kept(out, LLAMA_FACTORY, llamafactory_expected("mllm_video_audio_demo.json"))
    checked = orjson.loads(shard_rows(out)[0]["meta"])["media_checked"]
    assert [entry["mime"] for entry in checked] == ["video/mp4", "audio/mpeg"]


def test_the_audio_demo_keeps_the_audio_it_has_and_quarantines_the_rest(tmp_path):
    """Two of its three recordings are not copied (PROVENANCE.txt): those records are
    quarantined as media_missing, the third keeps its WAV."""
    out = run(tmp_path, LLAMA_FACTORY / "mllm_audio_demo.json")
    assert_media_kept(out, LLAMA_FACTORY, llamafactory_expected("mllm_audio_demo.json", [1]))
    counts = orjson.loads((out / "manifest.json").read_bytes())["counts"]
    assert counts["records_quarantined"] == {"media_missing": 2}
    rejected = (out / "quarantine" / "rejected.jsonl").read_bytes().splitlines()
    assert [orjson.loads(line)["locator"][-2:] for line in rejected] == ["#0", "#2"]


def test_openai_image_url_parts_keep_their_images_in_order(tmp_path):
    """OpenAI chat parts: an image as a `data:` URL and two as paths beside the file (one
    twice), in two messages."""
    folder = tmp_path / "in"
    (folder / "photos").mkdir(parents=True)
    for name in ("1.jpg", "3.jpg"):
        shutil.copy(DEMO_MEDIA / name, folder / "photos" / name)
    inline = base64.b64encode((DEMO_MEDIA / "2.jpg").read_bytes()).decode()

    def image(url: str) -> dict:
        return {"type": "image_url", "image_url": {"url": url}}

    record = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Compare "},
                    image("photos/1.jpg"),
                    {"type": "text", "text": " with "},
                    image(f"data:image/jpeg;base64,{inline}"),
                ],
            },
            {"role": "assistant", "content": "Both show footballers celebrating."},
            {"role": "user", "content": [image("photos/3.jpg"), image("photos/1.jpg")]},
            {"role": "assistant", "content": "An astronaut, then the footballers again."},
        ]
    }
    source = folder / "chat.jsonl"
    source.write_bytes(orjson.dumps(record) + b"\n")
    out = run(tmp_path, source)
    digests = [sha256_of(DEMO_MEDIA / n) for n in ("1.jpg", "2.jpg", "3.jpg", "1.jpg")]
    expected = Expected(
        [
            ("user", "Compare <|image|> with <|image|>"),
            ("assistant", "Both show footballers celebrating."),
            ("user", "<|image|><|image|>"),
            ("assistant", "An astronaut, then the footballers again."),
        ],
        {"images": digests},
    )
    assert_media_kept(out, folder, [expected])
    cells = shard_rows(out)[0]["images"]
    assert cells[1]["bytes"] is not None  # the data: URL's bytes
    assert [cell["path"] for cell in cells if cell["bytes"] is None] in (
        ["photos/1.jpg", "photos/3.jpg", "photos/1.jpg"],
        [],
    )
