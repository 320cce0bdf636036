"""Real multimodal samples through `mms run`, end to end: LLaMA-Factory's mllm
demos with their own images, audio and video (tests/data/realdata/llamafactory/
mllm_demo_data), xtuner's fixtures with their COCO photographs and ms-swift's (image URLs;
tests/data/formats/multimodal/xtuner and ms_swift; each folder's PROVENANCE.txt says what
and from where) and an OpenAI `image_url` record convert with every media kept, in order;
each placeholder id stands where its tag was; the shard's media cells are those very files
(by sha256), whether a cell embeds the bytes or names a path. Media are checked, as a run
does by default; nothing here reaches the network."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import shutil
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import orjson
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.tokenize import IGNORE
from tests.output_rows import shard_rows

REPO = Path(__file__).resolve().parents[1]
SAMPLE_TOKENIZER = REPO / "configs" / "sample_tokenizer"
LLAMA_FACTORY = REPO / "tests" / "data" / "realdata" / "llamafactory"
DEMO_MEDIA = LLAMA_FACTORY / "mllm_demo_data"
MULTIMODAL = REPO / "tests" / "data" / "formats" / "multimodal"
XTUNER = MULTIMODAL / "xtuner"
MS_SWIFT = MULTIMODAL / "ms_swift"
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


def run(tmp_path: Path, source: Path, *stages: str, engine: str | None = None) -> Path:
    """`mms run` of `source` (media checked, the default), one split in plan order;
    `engine`: the `engine:` mapping, as YAML flow text."""
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
        *([f"engine: {engine}"] if engine else []),
    ]
    config.write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(main, ["run", str(config)])
    assert result.exit_code == 0, result.output
    return tmp_path / "out"


def messages_of(decoded: str) -> list[tuple[str, str]]:
    """Each message's (role, content) in a row's decoded ids (DESIGN §4's rendering)."""
    messages = []
    for piece in decoded.split("<|role|>")[1:]:
        head, content = piece.split("<|content|>", 1)
        messages.append((head.split("<|", 1)[0], content.removesuffix("<|end_turn|>")))
    return messages


def cell_sha256(
    cell: dict, out: Path, folder: Path, listed: dict[str, str], served: dict[str, bytes]
) -> str:
    """The sha256 of the media a shard cell is: its bytes when it embeds them, else the
    file its path names, in the output's media/ (copy mode: then the manifest lists it
    with that hash) or as the source wrote it, relative to the input file's folder, or
    what the test's stand-in web server sends for a URL (`served`)."""
    if cell["bytes"] is not None:
        return hashlib.sha256(cell["bytes"]).hexdigest()
    path = cell["path"]
    if "://" in path:
        return hashlib.sha256(served[path]).hexdigest()
    if path.startswith("media/"):
        digest = sha256_of(out / path)
        assert listed[path] == digest
        return digest
    return sha256_of(folder / path)


def assert_media_kept(
    out: Path, folder: Path, expected: list[Expected], served: dict[str, bytes] | None = None
) -> None:
    """The rows of `out` are `expected`, in order: text with each placeholder id where its
    tag was (never trained), and the media of each column, by their bytes, in order, in
    the shard's cells and in the thread's `meta.media_checked`. `folder`: the input
    file's; `served`: the bytes a URL answers with."""
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
        checked = orjson.loads(row["meta"]).get("media_checked", [])
        kinds = [media["kind"] for media in row["media"] or []]
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
            sent = served or {}
            assert [cell_sha256(cell, out, folder, listed, sent) for cell in cells] == digests
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


def xtuner_expected(name: str) -> list[Expected]:
    """xtuner's rows: a content list's text parts as written, each image part its
    placeholder; the images by their files' sha256."""
    expected = []
    for line in (XTUNER / name).read_text().splitlines():
        record = json.loads(line)
        messages, digests = [], []
        for message in record["messages"]:
            content = message["content"]
            if isinstance(content, list):
                pieces = []
                for part in content:
                    if part["type"] == "image":
                        pieces.append("<|image|>")
                        digests.append(sha256_of(XTUNER / part["image"]["url"]))
                    else:
                        pieces.append(part["text"])
                content = "".join(pieces)
            messages.append((message["role"], content))
        expected.append(Expected(messages, {"images": digests}))
    return expected


def test_xtuner_fixtures_keep_their_real_photographs_in_order(tmp_path):
    out = run(tmp_path, XTUNER)  # the folder: its two files, in name order
    names = ["mllm_sft_multi_image_example_data_new.jsonl"]
    names.append("mllm_sft_single_image_example_data_new.jsonl")
    expected = [row for name in names for row in xtuner_expected(name)]
    assert sum(len(e.media["images"]) for e in expected) > len(expected)  # several per row
    assert_media_kept(out, XTUNER, expected)
    counts = orjson.loads((out / "manifest.json").read_bytes())["counts"]
    assert counts["records_quarantined"] == {} and counts["threads"] == len(expected)


IMG = re.compile(r"<img>(.*?)</img>")
"""Qwen-VL's inline image tag, as ms-swift's query/response rows hold it."""


def swift_expected(name: str, served: dict[str, bytes]) -> list[Expected]:
    """ms-swift's query/response/history rows: a turn per history pair and the query;
    each `<img>URL</img>` its placeholder, or, without tags, the `images` before the
    first query."""
    expected = []
    for line in (MS_SWIFT / name).read_text().splitlines():
        record = json.loads(line)
        turns = [*record.get("history", []), [record["query"], record["response"]]]
        urls = [url for query, _ in turns for url in IMG.findall(query)]
        messages = []
        for query, response in turns:
            messages += [("user", IMG.sub("<|image|>", query)), ("assistant", response)]
        if not urls and record.get("images"):
            urls = record["images"]
            messages[0] = ("user", "<|image|>" * len(urls) + messages[0][1])
        digests = [hashlib.sha256(served[url]).hexdigest() for url in urls]
        expected.append(Expected(messages, {"images": digests}))
    return expected


def stand_in_jpeg() -> bytes:
    from PIL import Image

    data = io.BytesIO()
    Image.new("RGB", (24, 16), (200, 120, 40)).save(data, "JPEG")
    return data.getvalue()


NO_DEDUP = "dedup: {enabled: false}"
"""Every row kept: the files repeat rows (the same image and words) across them."""
DEMO_URL = "https://qianwen-res.oss-cn-beijing.aliyuncs.com/Qwen-VL/assets/demo.jpeg"


def test_ms_swift_fixtures_keep_their_image_urls_in_order_unfetched(tmp_path, monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("a run fetched a URL without --fetch-media")

    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    out = run(tmp_path, MS_SWIFT, NO_DEDUP)
    names = ["multi_modal_1.jsonl", "multi_modal_2.jsonl", "multi_modal_3.jsonl"]
    expected = [row for name in names for row in swift_expected(name, {DEMO_URL: b""})]
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(out / "tokenizer"))
    rows = shard_rows(out)
    assert len(rows) == len(expected) == 9
    for row, want in zip(rows, expected, strict=True):
        assert messages_of(tokenizer.decode(row["input_ids"])) == want.messages
        count = len(want.media["images"])
        assert row["input_ids"].count(tokenizer.image_token_id) == count
        assert [cell["path"] for cell in row["images"] or []] == [DEMO_URL] * count
        meta = orjson.loads(row["meta"])
        assert meta.get("media_checked", []) == [None] * count


def test_ms_swift_fixtures_fetched_keep_each_image_in_order(tmp_path, monkeypatch):
    """With --fetch-media (config `media: {fetch: true}`), the URL answered by a stand-in
    JPEG (the repository has none of its images): every image read and kept in order."""
    served = {DEMO_URL: stand_in_jpeg()}
    asked = []

    class Response(io.BytesIO):
        headers: ClassVar[dict[str, str]] = {}

    def fake(request, timeout):
        asked.append(request.full_url)
        return Response(served[request.full_url])

    monkeypatch.setattr(urllib.request, "urlopen", fake)
    out = run(tmp_path, MS_SWIFT, NO_DEDUP, "media: {fetch: true}", engine="{workers: 1}")
    names = ["multi_modal_1.jsonl", "multi_modal_2.jsonl", "multi_modal_3.jsonl"]
    expected = [row for name in names for row in swift_expected(name, served)]
    assert_media_kept(out, MS_SWIFT, expected, served)
    assert asked and set(asked) == {DEMO_URL}


# copy mode on the Ray engine (tests/test_engine_ray.py) and into a stored output -----------

COPY_INPUTS = (
    LLAMA_FACTORY / "mllm_demo.json",
    LLAMA_FACTORY / "mllm_video_audio_demo.json",
    XTUNER,
)
"""Real media: LLaMA-Factory's images, video and audio, and xtuner's photographs."""


def write_copy_config(
    path: Path, output: str | Path, inputs: tuple[Path, ...] = COPY_INPUTS
) -> Path:
    """A copy-mode run (`stages.media.copy`) of `inputs`: two splits of small shards, so
    several shard tasks publish the same media."""
    lines = [
        "name: media-copy",
        "inputs:",
        *(f"  - path: {item}" for item in inputs),
        "stages:",
        "  lint: {fail_on: never}",
        "  media: {copy: true}",
        f"  tokenize: {{tokenizer: {SAMPLE_TOKENIZER}}}",
        "  shard: {splits: {train: 0.7, test: 0.3}, rows_per_shard: 4}",
        f"output: {output}",
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def copied_media() -> dict[str, bytes]:
    """The media/ files a copy-mode run of COPY_INPUTS publishes: each distinct file once,
    named by its sha256 and its kind's extension."""
    files = [*DEMO_MEDIA.glob("*.jpg"), DEMO_MEDIA / "4.mp4", DEMO_MEDIA / "4.mp3"]
    files += (XTUNER / "resource").glob("*.jpg")
    return {f"media/{sha256_of(p)}{p.suffix}": p.read_bytes() for p in files}


def assert_media_published(files: dict[str, bytes]) -> None:
    """An output's files (by relative path) hold copied_media() under media/, each listed
    in the manifest with its size and sha256, and every media cell of its shards names one
    of them."""
    expected = copied_media()
    assert {name: data for name, data in files.items() if name.startswith("media/")} == expected
    manifest = orjson.loads(files["manifest.json"])
    listed = {e["path"]: e for e in manifest["files"] if e["path"].startswith("media/")}
    assert set(listed) == set(expected)
    for name, data in expected.items():
        assert listed[name]["sha256"] == hashlib.sha256(data).hexdigest() == name[6:-4]
        assert listed[name]["bytes"] == len(data)
    cells = []
    for name, data in files.items():
        if name.startswith("data/"):
            table = pq.read_table(io.BytesIO(data))
            for column in COLUMNS:
                if column in table.column_names:
                    cells += [c for row in table[column].to_pylist() for c in row or []]
    assert len(cells) > len(expected)  # media used more than once
    for cell in cells:
        if cell["bytes"] is not None:
            assert f"media/{hashlib.sha256(cell['bytes']).hexdigest()}" in {
                n[:-4] for n in expected
            }
        else:
            assert cell["path"] in expected


def test_copy_mode_into_a_stored_output_publishes_each_media_once(s3, tmp_path):
    """The output on a local S3 server (tests/object_store.py): media/ lands in the bucket
    once each, the manifest hashes it, and the stored output is the local one."""
    local = tmp_path / "local" / "out"
    (tmp_path / "local").mkdir()
    config = write_copy_config(tmp_path / "local" / "run.yaml", local)
    result = CliRunner().invoke(main, ["run", str(config), "--workers", "2"])
    assert result.exit_code == 0, result.output
    local_files = {
        p.relative_to(local).as_posix(): p.read_bytes()
        for p in sorted(local.rglob("*"))
        if p.is_file() and ".work" not in p.relative_to(local).parts
    }
    assert_media_published(local_files)
    url = f"{s3.url}/runs/out"
    (tmp_path / "stored").mkdir()
    config = write_copy_config(tmp_path / "stored" / "run.yaml", url)
    result = CliRunner().invoke(main, ["run", str(config), "--workers", "2"])
    assert result.exit_code == 0, result.output
    stored = s3.files("runs/out")
    assert not [path for path in stored if path.startswith(".work")]
    assert_media_published(stored)

    def comparable(files: dict[str, bytes]) -> dict[str, bytes]:
        manifest = orjson.loads(files["manifest.json"])
        manifest["config"]["output"] = manifest["config_sha256"] = None
        rest = {k: v for k, v in files.items() if k not in ("manifest.json", "README.md")}
        return {**rest, "manifest.json": orjson.dumps(manifest)}

    assert comparable(stored) == comparable(local_files)
    verified = CliRunner().invoke(main, ["verify", url])
    assert verified.exit_code == 0, verified.output


@pytest.mark.parametrize("place", ["local", "stored"])
def test_a_copy_mode_output_published_again_holds_only_its_own_media(tmp_path, place, request):
    """media/ is one of the output's places (pipeline/output/folder.py MANAGED_DIRS): a
    run published again over an earlier copy-mode output with fewer media removes the
    media the new manifest does not list, as it does any other file, locally and on the
    store."""
    if place == "stored":
        bucket = request.getfixturevalue("s3")
        out: str | Path = f"{bucket.url}/out"
    else:
        out = tmp_path / "out"
    first = write_copy_config(tmp_path / "first.yaml", out)
    assert CliRunner().invoke(main, ["run", str(first)]).exit_code == 0
    demo = (LLAMA_FACTORY / "mllm_demo.json",)
    again = write_copy_config(tmp_path / "again.yaml", out, demo)
    result = CliRunner().invoke(main, ["run", str(again)])
    assert result.exit_code == 0, result.output
    if place == "stored":
        files = bucket.files("out")
    else:
        files = {
            p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()
        }
    media = sorted(name for name in files if name.startswith("media/"))
    assert media == sorted(f"media/{sha256_of(p)}.jpg" for p in DEMO_MEDIA.glob("*.jpg"))
    verified = CliRunner().invoke(main, ["verify", str(out)])
    assert verified.exit_code == 0, verified.output
