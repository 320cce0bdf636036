"""xtuner's older multimodal files mark each image again in the text with its InternVL
token, `<IMG_CONTEXT>` and a newline; each marker is read as the place of the next image
part, as `<image>` is in LLaVA's text. The real older fixtures (tests/data/formats/
multimodal/xtuner_img_context, PROVENANCE.txt) then read as the same threads as their
current versions, which xtuner's own script made from them by moving the images to the
markers and dropping the markers. Their images are the photographs of the current
fixtures' folder, read through --media-root."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.formats import ConvertOptions
from tests.reading import read_records

MULTIMODAL = Path(__file__).parent / "data" / "formats" / "multimodal"
OLD, NEW = MULTIMODAL / "xtuner_img_context", MULTIMODAL / "xtuner"


def converted(tmp_path: Path, source: Path, *args: str) -> dict[str, dict]:
    out = tmp_path / f"{source.stem}.jsonl"
    result = CliRunner().invoke(main, ["convert", str(source), "-o", str(out), *args])
    assert result.exit_code == 0, result.output
    assert not out.with_suffix(".rejected.jsonl").exists()
    return {t["id"]: t for t in map(orjson.loads, out.read_bytes().splitlines())}


@pytest.mark.parametrize("kind", ["single", "multi"])
def test_img_context_markers_read_as_the_current_format(tmp_path, kind):
    old = converted(
        tmp_path, OLD / f"mllm_sft_{kind}_image_example_data.jsonl", "--media-root", str(NEW)
    )
    new = converted(tmp_path, NEW / f"mllm_sft_{kind}_image_example_data_new.jsonl")
    assert old.keys() == new.keys() and len(old) >= 10
    for key, thread in old.items():
        assert thread["messages"] == new[key]["messages"]
        checked = thread["meta"]["media_checked"]
        assert [entry["sha256"] for entry in checked] == [
            entry["sha256"] for entry in new[key]["meta"]["media_checked"]
        ]
        assert {entry["root"] for entry in checked} == {str(NEW)}
        assert "<IMG_CONTEXT>" not in json.dumps(thread, ensure_ascii=False)


def image(path: str) -> dict:
    return {"type": "image_url", "image_url": {"url": path}}


def test_each_marker_takes_the_next_image_part_where_it_stands(tmp_path):
    content = [
        image("a.png"),
        image("b.png"),
        {"type": "text", "text": "First <IMG_CONTEXT>\nthen <IMG_CONTEXT>, why?"},
    ]
    record = {
        "messages": [{"role": "user", "content": content}, {"role": "assistant", "content": "No."}]
    }
    (thread,), _, _ = read_records(tmp_path, record)
    first = thread.messages[0]
    assert first.content == "First \ufffcthen \ufffc, why?"
    assert [m.path for m in first.media] == ["a.png", "b.png"]


def test_markers_and_images_in_different_numbers(tmp_path):
    content = [image("a.png"), {"type": "text", "text": "<IMG_CONTEXT>\n<IMG_CONTEXT>\nSame?"}]
    record = {
        "messages": [{"role": "user", "content": content}, {"role": "assistant", "content": "No."}]
    }
    threads, rejected, _ = read_records(tmp_path, record)
    assert not threads and [r.code for r in rejected] == ["media_mismatch"]
    dropped, rejected, _ = read_records(tmp_path, record, options=ConvertOptions(multimodal="drop"))
    assert not rejected
    assert dropped[0].messages[0].content == "Same?"
    assert any("1 image part(s) but 2 <IMG_CONTEXT>" in n for n in dropped[0].meta["notes"])


def test_a_marker_in_a_message_without_image_parts_stays_text(tmp_path):
    record = {
        "messages": [
            {"role": "user", "content": "What is <IMG_CONTEXT>?"},
            {"role": "assistant", "content": "A token."},
        ]
    }
    (thread,), _, _ = read_records(tmp_path, record)
    assert thread.messages[0].content == "What is <IMG_CONTEXT>?"
