"""Media where people keep them: the JSON in one folder and the images in another
(LLaVA-Instruct beside COCO's train2017/, LLaMA-Factory's media_dir). A media path not
beside its input file is looked for under each `--media-root` (a run: each input's
`media_root`) in order, and must stay inside the root it is found under; the root is
recorded in the media's `meta.media_checked` entry and in the run manifest's input entry.

The tree is built from real data: xtuner's multimodal test fixtures (their conversations
about two MS COCO photographs, tests/data/formats/multimodal/xtuner/PROVENANCE.txt) written
in LLaVA-Instruct's shape, {id, image, conversations}, the photographs moved into a sibling
`coco/train2017/` folder under their COCO file names."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.media import MediaChecker, MediaProblem, MediaRoot, MediaSettings
from pipeline.mms import Media, Message, Thread
from pipeline.tokenize import IGNORE
from tests.test_run import SAMPLE_TOKENIZER, run_cli, write_config
from tests.tiny_vlm import IMAGE_TOKENS, llava_batch, tiny_llava

XTUNER = Path(__file__).parent / "data" / "formats" / "multimodal" / "xtuner"
COCO_NAMES = {
    "resource/mscoco_dog_000000319154.jpg": "000000319154.jpg",
    "resource/mscoco_twocat_000000039769.jpg": "000000039769.jpg",
}


def llava_record(record: dict) -> dict | None:
    """An xtuner single-image record in LLaVA-Instruct's shape (None when its image is not
    the first part of its first message, which LLaVA cannot say)."""
    first, *rest = record["messages"]
    parts = first["content"]
    if not isinstance(parts, list) or parts[0]["type"] != "image":
        return None
    text = "".join(part["text"] for part in parts[1:] if part["type"] == "text")
    turns = [{"from": "human", "value": f"<image>\n{text}"}]
    for message in rest:
        if not isinstance(message["content"], str):
            return None
        turns.append(
            {"from": "human" if message["role"] == "user" else "gpt", "value": message["content"]}
        )
    image = COCO_NAMES[parts[0]["image"]["url"]]
    return {"id": str(record["id"]), "image": image, "conversations": turns}


@pytest.fixture
def apart(tmp_path: Path) -> Path:
    """tmp/llava/llava_instruct.json and, apart from it, tmp/coco/train2017/*.jpg."""
    lines = (XTUNER / "mllm_sft_single_image_example_data_new.jsonl").read_text().splitlines()
    records = [r for r in (llava_record(json.loads(line)) for line in lines) if r is not None]
    assert len(records) >= 10
    (tmp_path / "llava").mkdir()
    (tmp_path / "llava" / "llava_instruct.json").write_text(json.dumps(records, indent=1))
    train = tmp_path / "coco" / "train2017"
    train.mkdir(parents=True)
    for source, name in COCO_NAMES.items():
        shutil.copyfile(XTUNER / source, train / name)
    return tmp_path


def convert_cli(tmp_path: Path, source: Path, *args: str) -> tuple[list[dict], list[dict]]:
    out = tmp_path / "out" / "threads.jsonl"
    result = CliRunner().invoke(main, ["convert", str(source), "-o", str(out), *args])
    assert result.exit_code == 0, result.output
    rejected = out.with_suffix(".rejected.jsonl")
    lines = rejected.read_bytes().splitlines() if rejected.exists() else []
    threads = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    return threads, [orjson.loads(line) for line in lines]


def test_convert_reads_llava_with_its_images_in_another_folder_whole(apart):
    source = apart / "llava" / "llava_instruct.json"
    records = json.loads(source.read_text())
    threads, rejected = convert_cli(apart, source)  # no root: every record is quarantined
    assert not threads and {line["code"] for line in rejected} == {"media_missing"}
    root = str(apart / "coco" / "train2017")
    threads, rejected = convert_cli(apart, source, "--media-root", root)
    assert not rejected and len(threads) == len(records)
    for thread, record in zip(threads, records, strict=True):
        assert thread["messages"][0]["content"][0] == {"type": "image", "path": record["image"]}
        [entry] = thread["meta"]["media_checked"]
        assert entry["root"] == root and entry["mime"] == "image/jpeg"


def test_roots_are_searched_in_order_after_the_input_folder(apart):
    source = apart / "llava" / "llava_instruct.json"
    empty, coco = apart / "empty", apart / "coco" / "train2017"
    empty.mkdir()
    threads, rejected = convert_cli(
        apart, source, "--media-root", str(empty), "--media-root", str(coco)
    )
    assert not rejected
    assert {t["meta"]["media_checked"][0]["root"] for t in threads} == {str(coco)}
    # a file beside the input is taken from there, and no root is recorded
    shutil.copyfile(coco / "000000319154.jpg", apart / "llava" / "000000319154.jpg")
    threads, rejected = convert_cli(apart, source, "--media-root", str(coco))
    assert not rejected
    roots = {t["meta"]["media_checked"][0].get("root") for t in threads}
    dog = [t for t in threads if t["messages"][0]["content"][0]["path"] == "000000319154.jpg"]
    assert dog and all("root" not in t["meta"]["media_checked"][0] for t in dog)
    assert roots == {None, str(coco)}


def test_a_path_that_leads_out_of_its_root_is_refused(apart):
    coco = apart / "coco" / "train2017"
    (apart / "coco" / "secret.jpg").write_bytes((coco / "000000039769.jpg").read_bytes())
    os.symlink(apart / "coco" / "secret.jpg", coco / "linked.jpg")
    records = [
        {
            "id": "up",
            "image": "../secret.jpg",
            "conversations": [
                {"from": "human", "value": "<image>\nWhat?"},
                {"from": "gpt", "value": "Cats."},
            ],
        },
        {
            "id": "link",
            "image": "linked.jpg",
            "conversations": [
                {"from": "human", "value": "<image>\nWhat?"},
                {"from": "gpt", "value": "Cats."},
            ],
        },
        {
            "id": "absolute",
            "image": str(apart / "coco" / "secret.jpg"),
            "conversations": [
                {"from": "human", "value": "<image>\nWhat?"},
                {"from": "gpt", "value": "Cats."},
            ],
        },
    ]
    source = apart / "llava" / "escape.json"
    source.write_text(json.dumps(records))
    threads, rejected = convert_cli(apart, source, "--media-root", str(coco))
    assert not threads
    assert [line["code"] for line in rejected] == ["media_outside_input"] * 3


def test_a_record_of_standard_input_reads_its_paths_under_a_root(apart):
    coco = apart / "coco" / "train2017"
    thread = Thread(
        id="t",
        messages=[
            Message(
                role="user", content="\ufffcWhat?", media=(Media("image", path="000000039769.jpg"),)
            ),
            Message(role="assistant", content="Two cats."),
        ],
    )
    settings = MediaSettings()
    [unread] = MediaChecker(settings).check([thread], "-")
    assert unread.meta["media_checked"] == [None]
    [checked] = MediaChecker(settings, roots=(MediaRoot(str(coco), "coco"),)).check([thread], "-")
    assert checked.meta["media_checked"][0]["root"] == "coco"
    with pytest.raises(MediaProblem) as problem:
        missing = MediaChecker(settings, roots=(MediaRoot(str(apart / "llava"), "x"),))
        missing.check([thread], "-")
    assert problem.value.code == "media_missing"


def test_a_run_reads_each_inputs_media_root_and_records_it(apart):
    source = apart / "llava" / "llava_instruct.json"
    config = write_config(
        apart, "apart", source, "lint: {fail_on: never}", "dedup: {enabled: false}"
    )
    text = config.read_text().replace(
        f"  - path: {source}\n", f"  - path: {source}\n    media_root: coco/train2017\n"
    )
    config.write_text(text)
    out = apart / "run"
    result = run_cli(str(config), "-o", str(out))
    assert result.exit_code == 0, result.output
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    assert manifest["counts"]["records_quarantined"] == {}
    [entry] = manifest["config"]["inputs"]
    assert entry["media_root"] == ["coco/train2017"]
    records = len(json.loads(source.read_text()))
    rows = [
        row
        for shard in sorted((out / "data").glob("*.parquet"))
        for row in pq.read_table(shard).to_pylist()
    ]
    assert len(rows) == records
    for row in rows:
        [entry] = orjson.loads(row["meta"])["media_checked"]
        assert entry["root"] == "coco/train2017"  # as the config writes it
        assert row["images"][0]["bytes"]  # embedded


def test_run_media_root_option_adds_a_root_to_every_input(apart):
    source = apart / "llava" / "llava_instruct.json"
    config = write_config(
        apart, "apart", source, "lint: {fail_on: never}", "dedup: {enabled: false}"
    )
    out = apart / "run"
    result = run_cli(str(config), "-o", str(out), "--media-root", str(apart / "coco" / "train2017"))
    assert result.exit_code == 0, result.output
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    assert manifest["counts"]["records_quarantined"] == {}
    assert manifest["config"]["inputs"][0]["media_root"] == ["coco/train2017"]


def test_a_tiny_llava_trains_on_a_run_whose_images_are_in_another_folder(apart):
    """LLaVA-Instruct beside COCO's train2017/, run with `--media-root` and tokenized: every
    record becomes a row whose image is embedded, and a tiny LLaVA takes a training step on
    a batch of them, the loss finite and the weights moved."""
    torch = pytest.importorskip("torch")
    datasets = pytest.importorskip("datasets")
    transformers = pytest.importorskip("transformers")
    source = apart / "llava" / "llava_instruct.json"
    config = write_config(
        apart,
        "apart",
        source,
        "lint: {fail_on: never}",
        "dedup: {enabled: false}",
        f"tokenize: {{tokenizer: {SAMPLE_TOKENIZER}}}",
        "shard: {splits: {train: 1.0}}",
    )
    out = apart / "run"
    root = apart / "coco" / "train2017"
    result = run_cli(str(config), "-o", str(out), "--media-root", str(root))
    assert result.exit_code == 0, result.output
    assert CliRunner().invoke(main, ["verify", str(out)]).exit_code == 0
    rows = datasets.load_dataset(str(out), split="train", cache_dir=str(apart / "cache"))
    assert len(rows) == len(json.loads(source.read_text()))
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(out / "tokenizer"))
    processor, model = tiny_llava(tokenizer)
    batch = llava_batch(processor, tokenizer, rows.select(range(4)), IGNORE)
    assert (batch["input_ids"] == tokenizer.image_token_id).sum().item() == 4 * IMAGE_TOKENS
    before = [parameter.detach().clone() for parameter in model.parameters()]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = model(**batch).loss
    loss.backward()
    optimizer.step()
    assert torch.isfinite(loss)
    moved = [not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True)]
    assert sum(moved) > len(moved) // 2
