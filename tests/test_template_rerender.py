"""Every row of every kind renders again through the shipped chat template (DESIGN §4,
§7), and `mms verify` checks it on every row: SFT rows, preference rows (prompt + chosen,
prompt + rejected), unpaired (KTO) rows, prompt rows (up to the generation prompt) and
packed rows (each packed thread on the source row it was packed from, a cut one on its
kept messages), with and without media. Built from real fixtures: LLaMA-Factory's demos
(tests/data/realdata/llamafactory) and xtuner's multimodal fixtures with their COCO
photographs (tests/data/formats/multimodal/xtuner), whose records also make the pairs
and labelled completions that hold an image. Each kind's verify is shown to fail on a
row whose ids were altered (one prompt token changed, its length kept)."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.jobs.verify import verify_output

REPO = Path(__file__).resolve().parents[1]
SAMPLE_TOKENIZER = REPO / "configs" / "sample_tokenizer"
LLAMAFACTORY = REPO / "tests" / "data" / "realdata" / "llamafactory"
XTUNER = REPO / "tests" / "data" / "formats" / "multimodal" / "xtuner"
XTUNER_SINGLE = XTUNER / "mllm_sft_single_image_example_data_new.jsonl"


def _xtuner_turns() -> list[tuple[str, str, str]]:
    """Each single-image xtuner record's first question, its image and its answer."""
    turns = []
    for line in XTUNER_SINGLE.read_bytes().splitlines():
        first, answer = orjson.loads(line)["messages"][:2]
        image = next(p["image"]["url"] for p in first["content"] if p["type"] == "image")
        text = "".join(p["text"] for p in first["content"] if p["type"] == "text")
        turns.append((text, image, answer["content"]))
    return turns


def _media_pairs(folder: Path) -> Path:
    """LLaMA-Factory ranking records from xtuner's: a question on its photograph, its own
    answer chosen, the next record's answer rejected."""
    turns = _xtuner_turns()
    records = [
        {
            "conversations": [{"from": "human", "value": f"<image>{text}"}],
            "chosen": {"from": "gpt", "value": answer},
            "rejected": {"from": "gpt", "value": turns[(n + 1) % len(turns)][2]},
            "images": [image],
        }
        for n, (text, image, answer) in enumerate(turns)
    ]
    path = folder / "media_pairs.json"
    path.write_text(json.dumps(records, ensure_ascii=False))
    return path


def _media_kto(folder: Path) -> Path:
    """LLaMA-Factory KTO records from xtuner's: each question on its photograph with its
    own answer (desirable) or the next record's (undesirable), in turn."""
    turns = _xtuner_turns()
    records = [
        {
            "messages": [
                {"role": "user", "content": f"<image>{text}"},
                {"role": "assistant", "content": turns[(n + n % 2) % len(turns)][2]},
            ],
            "label": n % 2 == 0,
            "images": [image],
        }
        for n, (text, image, _) in enumerate(turns)
    ]
    path = folder / "media_kto.json"
    path.write_text(json.dumps(records, ensure_ascii=False))
    return path


KINDS = {
    # kind: (objective, inputs (text, media), views per row)
    "sft": ("sft", 1),
    "preference": ("preference", 2),
    "unpaired_preference": ("unpaired_preference", 1),
    "prompt": ("prompt", 1),
}


def _inputs(kind: str, media: bool, folder: Path) -> list[Path]:
    if not media:
        return {
            "sft": [LLAMAFACTORY / "v1_sft_demo.jsonl"],
            "preference": [LLAMAFACTORY / "dpo_en_demo.json"],
            "unpaired_preference": [LLAMAFACTORY / "kto_en_demo.json"],
            "prompt": [LLAMAFACTORY / "alpaca_en_demo.json"],
        }[kind]
    if kind == "preference":
        return [_media_pairs(folder)]
    if kind == "unpaired_preference":
        return [_media_kto(folder)]
    return [XTUNER]


def _tokenize(tmp_path: Path, kind: str, media: bool, inputs: list[Path] | None = None) -> Path:
    out = tmp_path / f"{kind}-{'media' if media else 'text'}"
    args = ["tokenize", *map(str, inputs or _inputs(kind, media, tmp_path))]
    args += ["--tokenizer", str(SAMPLE_TOKENIZER), "-o", str(out), "--objective", kind]
    result = CliRunner().invoke(main, [*args, "--media-root", str(XTUNER)])
    assert result.exit_code == 0, result.output
    return out


def _shard(out: Path) -> Path:
    (path,) = sorted((out / "data").glob("*.parquet"))
    return path


def _altered(path: Path, column: str) -> str:
    """Change one untrained text token of the first row's `column` (its length kept) and
    write the shard again; the row's id."""
    table = pq.read_table(path)
    rows = table.to_pylist()
    row = rows[0]
    ids = list(row[column])
    labels = row.get(column.replace("_ids", "_labels")) or row.get("labels")
    if column != "input_ids" or labels is None:
        labels = [-100] * len(ids)
    ordinary = [i for i, (t, label) in enumerate(zip(ids, labels, strict=True)) if label == -100]
    at = next(i for i in reversed(ordinary) if 300 < ids[i] < 1000)  # a word piece, no special
    ids[at] += 1
    row[column] = ids
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), path)
    return str(row["id"])


def _verified(out: Path, views: int, media: bool) -> dict[str, int]:
    result = CliRunner().invoke(main, ["verify", str(out)])
    assert result.exit_code == 0, result.output
    checked = verify_output(out).checked
    assert checked["rows against the chat template"] == views
    assert checked["rows rendered again"] == len(pq.read_table(_shard(out)))
    assert bool(checked.get("rows with media against the chat template")) == media
    return checked


@pytest.mark.parametrize("media", [False, True], ids=["text", "media"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_every_row_kind_renders_again_and_an_altered_row_is_caught(tmp_path, kind, media):
    out = _tokenize(tmp_path, kind, media)
    rows = pq.read_table(_shard(out)).to_pylist()
    assert rows
    _verified(out, KINDS[kind][1] * len(rows), media)

    column = "input_ids" if kind == "sft" else "prompt_ids"
    name = _altered(_shard(out), column)
    result = verify_output(out)
    where = {problem.where: problem.what for problem in result.problems}
    sides = [f"{name}:chosen", f"{name}:rejected"] if kind == "preference" else [name]
    for side in sides:
        assert where[f"train row {side}"] == "the chat template gives other input_ids"
    failed = CliRunner().invoke(main, ["verify", str(out)])
    assert failed.exit_code == 1 and "the chat template gives other input_ids" in failed.output


@pytest.mark.parametrize("media", [False, True], ids=["text", "media"])
def test_packed_threads_render_again_on_the_rows_they_were_packed_from(tmp_path, media):
    """Packed rows hold no messages: each packed thread is checked on its source row (a
    cut one on its kept messages, through the chat template too), the source found beside
    the packed output or named by --source; a packed thread whose ids were altered, or a
    source whose rows are not those packed, fails."""
    # text: single-turn threads and multi-turn tool calls, which a cut can keep a turn of
    text = [LLAMAFACTORY / "v1_sft_demo.jsonl", LLAMAFACTORY / "glaive_toolcall_en_demo.json"]
    source = _tokenize(tmp_path, "sft", media, None if media else text)
    rows = pq.read_table(_shard(source)).to_pylist()
    packed = tmp_path / "packed"
    seq_len = "160" if media else "400"
    args = ["pack", str(source), "--seq-len", seq_len, "--overlong", "truncate", "-o", str(packed)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    manifest = orjson.loads((packed / "manifest.json").read_bytes())
    cut = manifest["counts"]["threads_truncated"]
    assert cut > 0 and manifest["counts"]["threads_packed"] > cut

    checked = _verified_packed(packed, None)
    assert (
        checked["packed threads matched to their source rows"]
        == (manifest["counts"]["threads_packed"])
    )
    assert checked["rows against the chat template"] == len(rows) + cut
    assert bool(checked.get("rows with media against the chat template")) == media

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    moved = elsewhere / "packed"
    packed.rename(moved)
    assert "not rendered again" in " ".join(verify_output(moved).notes)
    _verified_packed(moved, source)

    table = pq.read_table(_shard(moved))
    packed_rows = table.to_pylist()
    first = packed_rows[0]
    token = next(
        i
        for i, label in enumerate(first["labels"])
        if label == -100 and 300 < first["input_ids"][i] < 1000
    )
    first["input_ids"][token] += 1
    pq.write_table(pa.Table.from_pylist(packed_rows, schema=table.schema), _shard(moved))
    problems = verify_output(moved, source=source).problems
    assert any("no source row's tokens" in p.what for p in problems)
    assert any("missing from the packed rows" in p.what for p in problems)


def _verified_packed(packed: Path, source: Path | None) -> dict[str, int]:
    args = ["verify", str(packed), *(["--source", str(source)] if source else [])]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return verify_output(packed, source=source).checked
