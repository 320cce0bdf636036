"""Media placeholders (DESIGN §4 and §7): each media part renders as its kind's
placeholder token where its marker stands, never trained; a run whose rows hold media
ships the placeholders in its tokenizer and chat template and carries the media beside
`input_ids` (`images` ...), as a VLM's processor and TRL read them; text-only outputs keep
their bytes (tests/test_output_bytes.py, tests/golden_outputs, tests/golden_renders)."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.mms import Thread
from pipeline.output.tokenizer import write_tokenizer
from pipeline.tokenize import IGNORE, Renderer, load_tokenizer
from tests.tiny_vlm import IMAGE_TOKENS, llava_batch, tiny_llava

REPO = Path(__file__).resolve().parents[1]
SAMPLE_TOKENIZER = REPO / "configs" / "sample_tokenizer"
MLLM_DEMO = REPO / "tests" / "data" / "realdata" / "llamafactory" / "mllm_demo.json"
"""LLaMA-Factory's data/mllm_demo.json and the images it names (mllm_demo_data/*.jpg),
byte-for-byte copies (PROVENANCE.txt beside them)."""


def _thread() -> Thread:
    return Thread.from_dict(
        {
            "id": "t",
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "image", "path": "a.png"},
                        {"type": "text", "text": "and"},
                        {"type": "audio", "url": "https://example.org/a.wav"},
                    ],
                },
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "here "},
                        {"type": "video", "data": "AAAA", "mime": "video/mp4"},
                        {"type": "text", "text": " done"},
                    ],
                    "end_turn": True,
                },
            ],
        }
    )


def test_each_media_part_is_its_placeholder_at_its_marker_never_trained():
    renderer = Renderer(load_tokenizer(SAMPLE_TOKENIZER))
    ids = {kind: number for kind, (_, number) in renderer.media_tokens.items()}
    # after the five MMS tokens and the pad: text-only ids stay as they were
    after = max([*renderer.special_ids.as_dict().values(), renderer.added_pad[1]])
    assert sorted(ids.values()) == [after + 1, after + 2, after + 3]
    encoded = renderer.encode(_thread())
    placed = [(i, t) for i, t in enumerate(encoded.input_ids) if t in ids.values()]
    assert [t for _, t in placed] == [ids["image"], ids["audio"], ids["video"]]
    assert all(encoded.labels[i] == IGNORE for i, _ in placed)
    # the trained assistant text around its video is trained
    assert encoded.num_trained > 0
    text = renderer.render_text(_thread())
    assert "<|content|><|image|>and<|audio|><|role|>assistant" in text
    assert "<|content|>here <|video|> done<|end_turn|>" in text
    # the string form, each placeholder one special id, gives the same ids
    shipped = renderer.tokenizer_json(media=True).decode()
    from tokenizers import Tokenizer

    again = Tokenizer.from_str(shipped).encode(text, add_special_tokens=False).ids
    assert again == encoded.input_ids


def test_a_text_only_tokenizer_ships_no_placeholder(tmp_path):
    loaded = load_tokenizer(SAMPLE_TOKENIZER)
    renderer = Renderer(loaded)
    write_tokenizer(tmp_path / "plain", renderer, loaded)
    write_tokenizer(tmp_path / "media", renderer, loaded, media=True)
    plain = (tmp_path / "plain" / "tokenizer.json").read_text()
    assert (
        "<|image|>" not in plain
        and "<|image|>" in (tmp_path / "media" / "tokenizer.json").read_text()
    )
    config = orjson.loads((tmp_path / "plain" / "tokenizer_config.json").read_bytes())
    assert "extra_special_tokens" not in config and "mms_content" not in config["chat_template"]
    record = orjson.loads((tmp_path / "plain" / "mms_special_tokens.json").read_bytes())
    assert "media_tokens" not in record


def _mllm_run(tmp_path: Path, *flags: str) -> tuple[Path, Path, list[dict]]:
    """`mms run` on LLaMA-Factory's mllm demo and its real images (copied to `in/`), with
    `flags`."""
    inputs = tmp_path / "in"
    (inputs / "mllm_demo_data").mkdir(parents=True)
    shutil.copy(MLLM_DEMO, inputs / MLLM_DEMO.name)
    records = json.loads(MLLM_DEMO.read_text())
    for name in sorted({path for record in records for path in record["images"]}):
        shutil.copy(MLLM_DEMO.parent / name, inputs / name)
    config = tmp_path / "run.yaml"
    config.write_text(
        f"""name: mllm
inputs:
  - path: in/{MLLM_DEMO.name}
stages:
  lint:
    fail_on: never
  tokenize:
    tokenizer: {SAMPLE_TOKENIZER}
  shard:
    splits: {{train: 1.0}}
    shuffle: false
output: out
"""
    )
    result = CliRunner().invoke(main, ["run", str(config), *flags])
    assert result.exit_code == 0, result.output
    return tmp_path / "out", inputs, records


@pytest.mark.parametrize(
    ("flags", "embedded", "paths"),
    [
        (("--no-embed-media",), False, "source"),
        (("--no-embed-media", "--copy-media"), False, "copied"),
        (("--copy-media",), True, "copied"),
    ],
)
def test_media_cells_hold_bytes_or_paths_as_asked(tmp_path, flags, embedded, paths):
    out, inputs, records = _mllm_run(tmp_path, *flags)
    rows = [
        r for shard in (out / "data").glob("*.parquet") for r in pq.read_table(shard).to_pylist()
    ]
    card = (out / "README.md").read_text()
    for row, record in zip(rows, records, strict=True):
        files = [(inputs / name).read_bytes() for name in record["images"]]
        cells = row["images"]
        assert [c["bytes"] for c in cells] == (files if embedded else [None] * len(files))
        if paths == "source":
            assert [c["path"] for c in cells] == record["images"]
        else:  # each a file of the output, the same bytes as the source's
            assert [(out / c["path"]).read_bytes() for c in cells] == files
    assert (out / "media").is_dir() == (paths == "copied")
    assert ("holds the media's bytes" in card) == embedded
    assert CliRunner().invoke(main, ["verify", str(out)]).exit_code == 0


def test_a_run_on_the_mllm_demo_carries_its_images_where_the_tags_were(tmp_path):
    out, inputs, records = _mllm_run(tmp_path)
    rows = [
        row
        for shard in sorted((out / "data").glob("*.parquet"))
        for row in pq.read_table(shard).to_pylist()
    ]
    assert len(rows) == len(records)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(out / "tokenizer"))
    image_id = tokenizer.image_token_id
    assert tokenizer.image_token == "<|image|>"
    for row, record in zip(rows, records, strict=True):  # plan order: shuffle off
        # each image's bytes are in the shard (stages.media.embed, the default), its path
        # the content address, its source in meta.media_checked
        assert [cell["bytes"] for cell in row["images"]] == [
            (inputs / name).read_bytes() for name in record["images"]
        ]
        checked = orjson.loads(row["meta"])["media_checked"]
        assert [cell["path"] for cell in row["images"]] == [
            f"media/{entry['sha256']}.jpg" for entry in checked
        ]
        assert [entry["source"]["path"] for entry in checked] == record["images"]
        assert row["input_ids"].count(image_id) == len(record["images"])
        assert all(
            label == IGNORE
            for token, label in zip(row["input_ids"], row["labels"], strict=True)
            if token == image_id
        )
        text = tokenizer.decode(row["input_ids"])
        for message in record["messages"]:
            assert message["content"].replace("<image>", "<|image|>") in text
    card = (out / "README.md").read_text()
    assert "- name: images\n    list: image" in card and "## Media" in card
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    assert manifest["tokenizer"]["media_tokens"]["image"] == {"token": "<|image|>", "id": image_id}
    verified = CliRunner().invoke(main, ["verify", str(out)])
    assert verified.exit_code == 0, verified.output


def test_a_small_vlm_takes_a_batch_of_the_output_with_its_images(tmp_path, monkeypatch):
    """A randomly initialised tiny LLaVA (no weights downloaded) and its processor: the
    processor expands each `<|image|>` of the rows' ids into the image's tokens, and the
    model takes the batch, its images as `datasets` decodes them."""
    torch = pytest.importorskip("torch")
    datasets = pytest.importorskip("datasets")
    transformers = pytest.importorskip("transformers")
    out, _, _ = _mllm_run(tmp_path)
    monkeypatch.chdir(tmp_path.parent)  # the images load from the shards, from anywhere
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(out / "tokenizer"))
    rows = datasets.load_dataset(str(out), split="train").select(range(3))
    processor, model = tiny_llava(tokenizer)
    assert processor.image_token == "<|image|>"  # read from the shipped tokenizer
    batch = llava_batch(processor, tokenizer, rows, IGNORE)
    counts = (batch["input_ids"] == tokenizer.image_token_id).sum(1).tolist()
    assert counts == [IMAGE_TOKENS * len(row["images"]) for row in rows]
    loss = model(**batch).loss
    assert torch.isfinite(loss)


def test_loader_batches_carry_each_rows_images_beside_its_ids(tmp_path):
    from PIL import Image

    from pipeline.loader import OutputLoader

    out, inputs, records = _mllm_run(tmp_path)
    references = OutputLoader(out, batch_size=2, shuffle=False)
    decoded = OutputLoader(out, batch_size=2, shuffle=False, decode=True)
    seen = []
    for plain, images in zip(references, decoded, strict=True):
        assert plain["input_ids"].shape == images["input_ids"].shape
        for row, cells in enumerate(plain["images"]):
            seen.append([cell["bytes"] for cell in cells])
            assert all(isinstance(image, Image.Image) for image in images["images"][row])
            assert [image.size for image in images["images"][row]] == [
                Image.open(io.BytesIO(cell["bytes"])).size for cell in cells
            ]
            ids = plain["input_ids"][row].tolist()
            assert ids.count(references_image_id(out)) == len(cells)
    assert seen == [[(inputs / name).read_bytes() for name in r["images"]] for r in records]


def references_image_id(out: Path) -> int:
    record = orjson.loads((out / "tokenizer" / "mms_special_tokens.json").read_bytes())
    return int(record["media_tokens"]["image"]["id"])


def test_verify_finds_media_cells_that_disagree_with_the_ids_or_their_names(tmp_path):
    """A shard whose image bytes are not the media their content address names, or whose
    row holds fewer images than placeholders, fails `mms verify`, naming the row."""
    import pyarrow as pa

    from pipeline.mms.media_columns import MEDIA_CELL

    out, _, _ = _mllm_run(tmp_path)
    [shard] = sorted((out / "data").glob("*.parquet"))
    table = pq.read_table(shard)
    images = table["images"].to_pylist()
    first, second = (
        images[0][0],
        next(c for row in images for c in row if c["bytes"] != images[0][0]["bytes"]),
    )
    images[0][0] = {"bytes": second["bytes"], "path": first["path"]}
    images[1] = images[1][:-1]
    index = table.schema.get_field_index("images")
    table = table.set_column(index, "images", pa.array(images, pa.list_(MEDIA_CELL)))
    pq.write_table(table, shard, compression="zstd")
    result = CliRunner().invoke(main, ["verify", str(out)])
    assert result.exit_code == 1
    ids = table["id"].to_pylist()
    assert f"{ids[0]}: images[0]'s bytes are not the media {first['path']} names" in result.output
    held = len(images[1])
    assert f"{ids[1]}: images holds {held} media for {held + 1} placeholder(s)" in result.output


@pytest.mark.parametrize("flags", [(), ("--copy-media", "--no-embed-media")])
def test_mms_tokenize_checks_media_and_embeds_or_copies_them(tmp_path, flags):
    """`mms tokenize` reads media as `mms run` does: a missing image quarantines its
    record; the shards embed each image's bytes, or with --copy-media name the output's
    copies."""
    _, inputs, records = _mllm_run(tmp_path / "run")
    gone = ["mllm_demo_data/gone.jpg"] * len(records[0]["images"])
    broken = [*records, {**records[0], "images": gone}]
    source = inputs / "with_a_missing_image.json"
    source.write_text(json.dumps(broken))
    out = tmp_path / "tok"
    args = ["tokenize", str(source), "--tokenizer", str(SAMPLE_TOKENIZER), "-o", str(out)]
    result = CliRunner().invoke(main, [*args, *flags])
    assert result.exit_code == 0, result.output
    [line] = (out / "quarantine" / "rejected.jsonl").read_bytes().splitlines()
    assert orjson.loads(line)["code"] == "media_missing"
    rows = pq.read_table(next((out / "data").glob("*.parquet"))).to_pylist()
    for row, record in zip(rows, records, strict=True):
        files = [(inputs / name).read_bytes() for name in record["images"]]
        cells = row["images"]
        if flags:
            assert [c["bytes"] for c in cells] == [None] * len(files)
            assert [(out / c["path"]).read_bytes() for c in cells] == files
        else:
            assert [c["bytes"] for c in cells] == files
    assert (out / "media").is_dir() == bool(flags)
    assert not (out / ".work").exists()
    assert CliRunner().invoke(main, ["verify", str(out)]).exit_code == 0
