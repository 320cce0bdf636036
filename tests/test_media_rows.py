"""Every row kind carries its media (DESIGN §7): an objective's rows (pairs,
labelled completions, prompts), packed sequences and `mms tokenize` shards hold, per kind,
the media whose placeholders stand in their ids, in order, so a processor finds one media
per placeholder; `mms verify` checks them; text-only outputs have no media columns."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.objectives import SCHEMAS
from pipeline.packing import PACKED_SCHEMA
from tests.output_rows import shard_rows

REPO = Path(__file__).resolve().parents[1]
SAMPLE_TOKENIZER = REPO / "configs" / "sample_tokenizer"
MEDIA_COLUMNS = ("images", "audios", "videos")

PAIRS = [  # LLaMA-Factory's preference layout (ranking: a prompt, chosen and rejected)
    {
        "conversations": [{"from": "human", "value": "<image>What colour?"}],
        "chosen": {"from": "gpt", "value": "Red."},
        "rejected": {"from": "gpt", "value": "Blue."},
        "images": ["img0.png"],
    },
    {
        "conversations": [{"from": "human", "value": "<image><image>Compare these."}],
        "chosen": {"from": "gpt", "value": "Green, then blue."},
        "rejected": {"from": "gpt", "value": "They are the same."},
        "images": ["img1.png", "img2.png"],
    },
    {
        "conversations": [{"from": "human", "value": "Say hi."}],
        "chosen": {"from": "gpt", "value": "Hi!"},
        "rejected": {"from": "gpt", "value": "No."},
    },
]


def _side(side: str, answer: str, image: str) -> dict:
    """One side of an MMS pair whose prompt and answer both hold an image."""
    return {
        "id": f"draw:{side}",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Draw it like"},
                    {"type": "image", "path": "img3.png"},
                ],
            },
            {
                "role": "assistant",
                "content": [{"type": "text", "text": answer}, {"type": "image", "path": image}],
                "end_turn": True,
            },
        ],
        "meta": {"pair_id": "draw", "preference": side},
    }


THREADS = [_side("chosen", "Here:", "img0.png"), _side("rejected", "No:", "img1.png")]
PROMPTS = {  # each prompt's text: its images, then the chosen and rejected answers'
    "What colour?": (["img0.png"], [], []),
    "Compare these.": (["img1.png", "img2.png"], [], []),
    "Say hi.": ([], [], []),
    "Draw it like": (["img3.png"], ["img0.png"], ["img1.png"]),
}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pairs above, their images drawn with Pillow (each its own size and colour)."""
    from PIL import Image

    folder = tmp_path_factory.mktemp("media-rows") / "in"
    folder.mkdir()
    for number, colour in enumerate(["red", "green", "blue", "yellow"]):
        Image.new("RGB", (12 + number, 10), colour).save(folder / f"img{number}.png")
    (folder / "pairs.json").write_text(json.dumps(PAIRS))
    (folder / "threads.jsonl").write_bytes(b"".join(orjson.dumps(t) + b"\n" for t in THREADS))
    (folder / "text.json").write_text(json.dumps(PAIRS[2:]))
    return folder


def _run(
    inputs: Path, out: Path, tokenize: str, *, files: tuple[str, ...] = (), stages: str = ""
) -> Path:
    """`mms run` of the pairs (or of `files`) with the `tokenize` settings (and more
    `stages` lines); verified."""
    listed = files or ("pairs.json", "threads.jsonl")
    entries = "".join(
        f"  - path: {inputs / name}\n" + ("    format: mms\n" if name.endswith(".jsonl") else "")
        for name in listed
    )
    config = out.parent / f"{out.name}.yaml"
    config.write_text(
        f"name: media-rows\ninputs:\n{entries}output: {out}\n"
        "stages:\n  lint: {fail_on: never}\n"
        f"  tokenize: {{tokenizer: {SAMPLE_TOKENIZER}, {tokenize}}}\n{stages}"
        "  shard: {splits: {train: 1.0}, shuffle: false}\n"
    )
    result = CliRunner().invoke(main, ["run", str(config)])
    assert result.exit_code == 0, result.output
    verified = CliRunner().invoke(main, ["verify", str(out)])
    assert verified.exit_code == 0, verified.output
    return out


def _image_id(out: Path) -> int:
    record = orjson.loads((out / "tokenizer" / "mms_special_tokens.json").read_bytes())
    return int(record["media_tokens"]["image"]["id"])


def _names(cells: list[dict], inputs: Path) -> list[str]:
    """Which input image each cell is: its path's name, or the image with its bytes."""
    by_digest = {hashlib.sha256(p.read_bytes()).hexdigest(): p.name for p in inputs.glob("*.png")}
    return [
        Path(cell["path"]).name
        if cell["bytes"] is None
        else by_digest[hashlib.sha256(cell["bytes"]).hexdigest()]
        for cell in cells
    ]


def _prompt_text(row: dict) -> str:
    """The user text of a row's prompt (one of PROMPTS)."""
    parts = [part for m in row["prompt"] if m["role"] == "user" for part in m["content"]]
    return "".join(part["text"] for part in parts if part["type"] == "text")


def _placeholders(row: dict, image_id: int, *columns: str) -> int:
    return sum(row[column].count(image_id) for column in columns)


def test_preference_rows_hold_the_prompts_images_then_each_answers(inputs, tmp_path):
    from transformers import AutoTokenizer

    out = _run(inputs, tmp_path / "pairs", "objective: preference")
    rows, image_id = shard_rows(out), _image_id(out)
    tokenizer = AutoTokenizer.from_pretrained(str(out / "tokenizer"))
    assert len(rows) == len(PROMPTS)
    for row in rows:
        prompt, chosen, rejected = PROMPTS[_prompt_text(row)]
        assert _names(row["images"], inputs) == prompt + chosen + rejected
        ids = ("prompt_ids", "chosen_ids", "rejected_ids")
        assert _placeholders(row, image_id, *ids) == len(row["images"])
        assert row["prompt_ids"].count(image_id) == len(prompt)
        for side in ("chosen", "rejected"):  # each side through the chat template, as stored
            messages = row["prompt"] + row[side]
            rendered = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True)
            assert rendered["input_ids"] == row["prompt_ids"] + row[f"{side}_ids"]
    names = pq.read_schema(sorted((out / "data").glob("*.parquet"))[0]).names
    assert names == [*SCHEMAS["preference"].names, "images"]  # no thread, no `media` column
    card = (out / "README.md").read_text()
    assert "- name: images\n    list: image" in card


def test_unpaired_rows_hold_their_threads_images(inputs, tmp_path):
    out = _run(inputs, tmp_path / "unpaired", "objective: unpaired_preference")
    rows, image_id = shard_rows(out), _image_id(out)
    assert len(rows) == 2 * len(PROMPTS)
    for row in rows:
        prompt, chosen, rejected = PROMPTS[_prompt_text(row)]
        assert _names(row["images"], inputs) == prompt + (chosen if row["label"] else rejected)
        assert _placeholders(row, image_id, "prompt_ids", "completion_ids") == len(row["images"])


def test_prompt_rows_hold_their_prompts_images(inputs, tmp_path):
    out = _run(inputs, tmp_path / "prompts", "objective: prompt")
    rows, image_id = shard_rows(out), _image_id(out)
    assert len(rows) == 2 * len(PROMPTS)
    for row in rows:
        prompt, _, _ = PROMPTS[_prompt_text(row)]
        assert _names(row["images"], inputs) == prompt
        assert row["prompt_ids"].count(image_id) == len(prompt)


@pytest.mark.parametrize("objective", ["preference", "unpaired_preference", "prompt"])
def test_text_only_objective_rows_have_no_media_columns(inputs, tmp_path, objective):
    out = _run(inputs, tmp_path / objective, f"objective: {objective}", files=("text.json",))
    names = pq.read_schema(sorted((out / "data").glob("*.parquet"))[0]).names
    assert names == SCHEMAS[objective].names
    assert not set(MEDIA_COLUMNS) & set(names)
    assert "media_tokens" not in orjson.loads(
        (out / "tokenizer" / "mms_special_tokens.json").read_bytes()
    )


def _images_by_thread(out: Path, inputs: Path) -> dict[str, list[str]]:
    """Each thread's images in an output of rows of threads, by thread id."""
    return {row["id"]: _names(row["images"], inputs) for row in shard_rows(out)}


def test_packed_sequences_hold_their_threads_images_in_order(inputs, tmp_path):
    """A sequence holding several threads holds their images one thread after the other,
    one per placeholder of the sequence; `mms pack` of the threads gives the same bytes."""
    threads = _run(inputs, tmp_path / "threads", "max_tokens: 128")
    packed = _run(inputs, tmp_path / "packed", "max_tokens: 128", stages="  pack: {seq_len: 128}\n")
    images, image_id = _images_by_thread(threads, inputs), _image_id(packed)
    rows = shard_rows(packed)
    assert any(len(row["ids"]) > 1 and row["images"] for row in rows)
    assert sorted(i for row in rows for i in row["ids"]) == sorted(images)
    for row in rows:
        assert _names(row["images"], inputs) == [n for i in row["ids"] for n in images[i]]
        assert row["input_ids"].count(image_id) == len(row["images"])
    again = tmp_path / "again"
    result = CliRunner().invoke(main, ["pack", str(threads), "--seq-len", "128", "-o", str(again)])
    assert result.exit_code == 0, result.output
    for path in sorted((packed / "data").glob("*.parquet")):
        assert (again / "data" / path.name).read_bytes() == path.read_bytes()
    verified = CliRunner().invoke(main, ["verify", str(again)])
    assert verified.exit_code == 0, verified.output
    assert "- name: images\n    list: image" in (again / "README.md").read_text()


def test_a_text_only_packed_run_has_no_media_columns(inputs, tmp_path):
    out = _run(
        inputs,
        tmp_path / "text",
        "max_tokens: 128",
        files=("text.json",),
        stages="  pack: {seq_len: 128}\n",
    )
    names = pq.read_schema(sorted((out / "data").glob("*.parquet"))[0]).names
    assert names == PACKED_SCHEMA.names


@pytest.mark.parametrize("objective", ["sft", "preference"])
def test_tokenize_writes_the_media_columns_a_run_writes(inputs, tmp_path, objective):
    """`mms tokenize` shards carry the media columns of `mms run`'s: each row's images,
    one per placeholder, the same as the run's rows of the same threads."""
    ran = _run(inputs, tmp_path / "ran", f"objective: {objective}, train_on: last_assistant")
    out = tmp_path / "tokenized"
    args = ["tokenize", str(inputs / "pairs.json"), "--tokenizer", str(SAMPLE_TOKENIZER)]
    args += ["-o", str(out), "--objective", objective, "--train-on", "last_assistant"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    verified = CliRunner().invoke(main, ["verify", str(out)])
    assert verified.exit_code == 0, verified.output
    rows, image_id = shard_rows(out), _image_id(out)
    expected = {row["id"]: row for row in shard_rows(ran)}
    names = pq.read_schema(sorted((out / "data").glob("*.parquet"))[0]).names
    assert names == pq.read_schema(sorted((ran / "data").glob("*.parquet"))[0]).names
    assert len(rows) == len(PAIRS) * (2 if objective == "sft" else 1)
    for row in rows:
        assert _names(row["images"], inputs) == _names(expected[row["id"]]["images"], inputs)
        ids = [
            i
            for key in ("input_ids", "prompt_ids", "chosen_ids", "rejected_ids")
            for i in row.get(key) or []
        ]
        assert ids.count(image_id) == len(row["images"])


def test_text_only_tokenize_shards_have_no_media_columns(inputs, tmp_path):
    out = tmp_path / "text"
    args = ["tokenize", str(inputs / "text.json"), "--tokenizer", str(SAMPLE_TOKENIZER)]
    result = CliRunner().invoke(main, [*args, "-o", str(out)])
    assert result.exit_code == 0, result.output
    names = pq.read_schema(sorted((out / "data").glob("*.parquet"))[0]).names
    assert names == SCHEMAS["sft"].names
