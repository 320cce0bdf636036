"""A video given as a list of its frame images (qwen-vl-utils' `{"type": "video", "video":
[frames]}`, LLaMA-Factory's `videos: [[frames]]`) is one `video` media (DESIGN §3): each
frame read and checked as an image is, one `<|video|>` placeholder where it stands, and
its frames in order in the shards' `video_frames` column (DESIGN §7), which `mms verify`
checks, the card declares and the loader hands over. The sample is
tests/data/formats/multimodal/video_frames (its PROVENANCE.txt)."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from pipeline.cli import main
from pipeline.formats.media import from_reference
from pipeline.loader import OutputLoader
from pipeline.mms import Media, Message, Thread, threads_from_arrow, threads_to_arrow
from pipeline.mms.validation import validate_thread_dict
from pipeline.tokenize import IGNORE
from tests.output_rows import shard_rows

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "tests" / "data" / "formats" / "multimodal" / "video_frames"
SAMPLE_TOKENIZER = REPO / "configs" / "sample_tokenizer"
FILES = ("qwen_vl_frames.jsonl", "llamafactory_frames.json")
CLIP1 = [f"frames/clip1_{k}.jpg" for k in range(4)]
CLIP2 = [f"frames/clip2_{k}.jpg" for k in range(3)]
EXPECTED = [  # per thread, in input order: each message's media, a video as its frame list
    [[CLIP1], []],
    [[CLIP1, CLIP2], []],
    [["frames/clip2_0.jpg", CLIP2], []],
    [[CLIP1], []],
    [[CLIP2], [], [CLIP1], []],
]


def _convert(folder: Path, *args: str) -> tuple[list[dict], list[dict]]:
    """`mms convert` of the sample's files in `folder`: its threads and rejected records."""
    out = folder / "out.jsonl"
    inputs = [str(folder / name) for name in FILES if (folder / name).exists()]
    result = CliRunner().invoke(main, ["convert", *inputs, "-o", str(out), *args])
    assert result.exit_code == 0, result.output
    rejected = folder / "out.rejected.jsonl"
    lines = rejected.read_bytes().splitlines() if rejected.exists() else []
    threads = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    return threads, [orjson.loads(line) for line in lines]


def _held(thread: dict) -> list[list[object]]:
    """Each message's media: an image's path, a frame-list video's frame paths."""
    held: list[list[object]] = []
    for message in thread["messages"]:
        parts = message["content"] if isinstance(message["content"], list) else []
        media = [part for part in parts if part["type"] != "text"]
        held.append(
            [[f["path"] for f in p["frames"]] if "frames" in p else p["path"] for p in media]
        )
    return held


def _copy(tmp_path: Path) -> Path:
    folder = tmp_path / "sample"
    shutil.copytree(SAMPLE, folder)
    return folder


def test_the_sample_converts_whole_each_frame_list_one_video_with_its_frames_in_order(tmp_path):
    threads, rejected = _convert(_copy(tmp_path))
    assert rejected == []
    assert [_held(thread) for thread in threads] == EXPECTED
    first = threads[0]["meta"]["media_checked"][0]
    digests = [hashlib.sha256((SAMPLE / p).read_bytes()).hexdigest() for p in CLIP1]
    assert [frame["sha256"] for frame in first["frames"]] == digests
    assert [frame["mime"] for frame in first["frames"]] == ["image/jpeg"] * 4
    assert first["bytes"] == sum((SAMPLE / p).stat().st_size for p in CLIP1)
    # the same frames are the same video, whichever record names them
    assert threads[3]["meta"]["media_checked"][0]["sha256"] == first["sha256"]


def _run(folder: Path, out: Path, *media: str) -> Path:
    """`mms run` of the sample in `folder` with tokenize (and `media` settings), verified."""
    entries = "".join(f"  - path: {folder / name}\n" for name in FILES)
    settings = f"  media: {{{', '.join(media)}}}\n" if media else ""
    config = out.parent / f"{out.name}.yaml"
    config.write_text(
        f"name: frames\ninputs:\n{entries}output: {out}\nstages:\n"
        f"  lint: {{fail_on: never}}\n{settings}"
        f"  tokenize: {{tokenizer: {SAMPLE_TOKENIZER}}}\n"
        "  shard: {splits: {train: 1.0}, shuffle: false}\n"
    )
    result = CliRunner().invoke(main, ["run", str(config)])
    assert result.exit_code == 0, result.output
    verified = CliRunner().invoke(main, ["verify", str(out)])
    assert verified.exit_code == 0, verified.output
    return out


def _placeholder(out: Path, kind: str) -> int:
    record = orjson.loads((out / "tokenizer" / "mms_special_tokens.json").read_bytes())
    return int(record["media_tokens"][kind]["id"])


def _frame_list(row: dict, position: int) -> list[str]:
    """The sample paths of a row's `position`-th video's frames, known by their bytes."""
    names = {hashlib.sha256(p.read_bytes()).hexdigest(): p for p in SAMPLE.glob("frames/*")}
    cells = row["video_frames"][position]
    return [
        names[hashlib.sha256(c["bytes"]).hexdigest()].relative_to(SAMPLE).as_posix() for c in cells
    ]


@pytest.fixture(scope="module")
def run_output(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("frames-run")
    return _run(SAMPLE, base / "out")


def test_a_run_holds_one_untrained_video_placeholder_and_the_frames_in_order(run_output):
    rows = shard_rows(run_output)
    video, image = _placeholder(run_output, "video"), _placeholder(run_output, "image")
    assert len(rows) == len(EXPECTED)
    for row, expected in zip(rows, EXPECTED, strict=True):
        videos = [media for held in expected for media in held if isinstance(media, list)]
        images = [media for held in expected for media in held if isinstance(media, str)]
        assert row["input_ids"].count(video) == len(videos)
        assert row["input_ids"].count(image) == len(images)
        placed = [i for i, token in enumerate(row["input_ids"]) if token in (video, image)]
        assert all(row["labels"][i] == IGNORE for i in placed)
        assert row["videos"] == [None] * len(videos)  # no file: the frames are the video
        assert [_frame_list(row, n) for n in range(len(videos))] == videos
        assert len(row["images"] or []) == len(images)
        kinds = [part["type"] for m in row["messages"] for part in m["content"]]
        assert kinds.count("video") == len(videos)
    names = pq.read_schema(sorted((run_output / "data").glob("*.parquet"))[0]).names
    assert names[-4:] == ["media", "images", "videos", "video_frames"]
    card = (run_output / "README.md").read_text()
    assert "- name: video_frames\n    list:\n      list: image" in card
    assert "`video_frames`" in card


def test_datasets_and_the_loader_hand_over_the_frames(run_output):
    from PIL import Image

    datasets = pytest.importorskip("datasets")
    loaded = datasets.load_dataset(str(run_output), split="train")
    frames = loaded[0]["video_frames"][0]
    assert [frame.size for frame in frames] == [(32, 32)] * 4
    plain = OutputLoader(run_output, batch_size=5, shuffle=False)
    decoded = OutputLoader(run_output, batch_size=5, shuffle=False, decode=True)
    for cells, pictures in zip(plain, decoded, strict=True):
        for row_cells, row_pictures in zip(
            cells["video_frames"], pictures["video_frames"], strict=True
        ):
            for video_cells, video_pictures in zip(row_cells, row_pictures, strict=True):
                assert all(isinstance(p, Image.Image) for p in video_pictures)
                assert [p.tobytes() for p in video_pictures] == [
                    Image.open(io.BytesIO(c["bytes"])).tobytes() for c in video_cells
                ]


def test_copy_mode_publishes_each_frame_and_points_the_cells_there(tmp_path):
    out = _run(SAMPLE, tmp_path / "copied", "copy: true", "embed: false")
    row = shard_rows(out)[0]
    paths = [cell["path"] for cell in row["video_frames"][0]]
    assert all(cell["bytes"] is None for cell in row["video_frames"][0])
    assert [hashlib.sha256((out / p).read_bytes()).hexdigest() for p in paths] == [
        hashlib.sha256((SAMPLE / p).read_bytes()).hexdigest() for p in CLIP1
    ]
    files = orjson.loads((out / "manifest.json").read_bytes())["files"]
    listed = {entry["path"] if isinstance(entry, dict) else entry for entry in files}
    assert set(paths) <= listed


def test_a_bad_frame_quarantines_its_record_naming_the_frame_and_the_run_goes_on(tmp_path):
    folder = _copy(tmp_path)
    (folder / "frames" / "clip2_1.jpg").write_bytes(
        (SAMPLE / "frames" / "clip2_1.jpg").read_bytes()[:200]  # truncated
    )
    threads, rejected = _convert(folder)
    holding = [i for i, held in enumerate(EXPECTED) if any(CLIP2 in m for m in held)]
    assert [_held(t) for t in threads] == [e for i, e in enumerate(EXPECTED) if i not in holding]
    assert [r["code"] for r in rejected] == ["media_corrupt"] * len(holding)
    first = rejected[0]
    assert first["locator"].endswith("/qwen_vl_frames.jsonl:2")
    assert "video 2 of 2, frame 2 of 3, path 'frames/clip2_1.jpg'" in first["message"]
    out = tmp_path / "run"
    config = tmp_path / "run.yaml"
    config.write_text(
        f"name: bad\ninputs:\n  - path: {folder / FILES[0]}\noutput: {out}\nstages:\n"
        "  lint: {fail_on: never}\n  shard: {splits: {train: 1.0}, shuffle: false}\n"
    )
    result = CliRunner().invoke(main, ["run", str(config)])
    assert result.exit_code == 0, result.output
    assert "3 read = 1 converted + 2 quarantined" in result.output


def test_frames_outside_the_input_folder_are_refused_as_image_paths_are(tmp_path):
    folder = tmp_path / "records"
    folder.mkdir()
    elsewhere = f"../{SAMPLE.name}/frames"
    shutil.copytree(SAMPLE / "frames", tmp_path / SAMPLE.name / "frames")
    record = {
        "messages": [
            {"role": "user", "content": [{"type": "video", "video": [f"{elsewhere}/clip1_0.jpg"]}]},
            {"role": "assistant", "content": "A pitch."},
        ]
    }
    (folder / FILES[0]).write_text(json.dumps(record) + "\n")
    threads, rejected = _convert(folder)
    assert threads == []
    assert [r["code"] for r in rejected] == ["media_outside_input"]
    assert "frame 1 of 1" in rejected[0]["message"]
    # found under a media root, as an image path is
    record["messages"][0]["content"][0]["video"] = ["frames/clip1_0.jpg", "frames/clip1_1.jpg"]
    (folder / FILES[0]).write_text(json.dumps(record) + "\n")
    threads, rejected = _convert(folder, "--media-root", str(tmp_path / SAMPLE.name))
    assert rejected == []
    checked = threads[0]["meta"]["media_checked"][0]["frames"]
    assert [entry["root"] for entry in checked] == [str(tmp_path / SAMPLE.name)] * 2


def test_a_frame_list_is_only_a_video_and_never_empty():
    frames = [{"type": "text", "text": "Look"}, {"type": "image", "frames": [{"path": "a.jpg"}]}]
    empty = [{"type": "video", "frames": []}]
    errors = {
        str(error)
        for content in (frames, empty)
        for error in validate_thread_dict(
            {"id": "t", "messages": [{"role": "user", "content": content}]}
        )
    }
    assert "messages[0].content[1].frames: only a video is given as frames" in errors
    assert "messages[0].content[0].frames: a video given as frames holds at least one" in errors
    assert from_reference("video", []) is None
    assert from_reference("image", ["a.jpg"]) is None


SOURCES = st.one_of(
    st.builds(
        lambda p: Media("image", path=p),
        st.from_regex(r"[a-z]{1,6}/[a-z0-9]{1,6}\.jpg", fullmatch=True),
    ),
    st.builds(
        lambda u: Media("image", url=f"https://x.org/{u}.png"),
        st.from_regex(r"[a-z]{1,8}", fullmatch=True),
    ),
    st.builds(
        lambda d: Media("image", data=d, mime="image/png"),
        st.from_regex(r"[A-Za-z0-9+/]{4,12}", fullmatch=True),
    ),
)


@given(st.lists(st.lists(SOURCES, min_size=1, max_size=5), min_size=1, max_size=3))
def test_frame_lists_of_any_shape_round_trip_in_order(videos):
    media = [Media.video_frames(frames) for frames in videos]
    thread = Thread(
        "t",
        [
            Message.user("\ufffc" * len(media) + "What happens?", media),
            Message.assistant("It moves."),
        ],
    )
    thread.validate()
    again = Thread.from_dict(orjson.loads(thread.to_json()))
    assert again == thread
    assert threads_from_arrow(threads_to_arrow([thread])) == [thread]
    written = [
        [frame.path or frame.url or f"data:image/png;base64,{frame.data}" for frame in v]
        for v in videos
    ]
    read = [from_reference("video", frames) for frames in written]
    assert [video.frames if video else None for video in read] == [tuple(v) for v in videos]
