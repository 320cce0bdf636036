"""A row holding media renders again through the shipped chat template (DESIGN §7): its
stored `messages` hold each media as a content part (`{"type": "image"}` ...), so
`AutoTokenizer.from_pretrained(OUT/tokenizer).apply_chat_template(row["messages"])` is
the row's `input_ids`, for every row of the real multimodal fixtures
(tests/data/formats/multimodal), through `mms run` and `mms tokenize`; text-only
messages of those shards are one text part; `mms verify` applies the template to every
row with media as stored."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.jobs.verify import verify_output

REPO = Path(__file__).resolve().parents[1]
SAMPLE_TOKENIZER = REPO / "configs" / "sample_tokenizer"
MULTIMODAL = REPO / "tests" / "data" / "formats" / "multimodal"
FIXTURES = {
    "xtuner": (MULTIMODAL / "xtuner", ()),
    "ms_swift": (MULTIMODAL / "ms_swift", ()),
    "swift_messages": (MULTIMODAL / "swift_messages.jsonl", ("--no-check-media",)),
    "xtuner_llava": (MULTIMODAL / "xtuner_llava.json", ("--no-check-media",)),
}
"""Each fixture and what it needs: the stand-ins name media files that do not exist."""


def _run(tmp_path: Path, source: Path, unchecked: bool) -> Path:
    media = "  media: {check: false}\n" if unchecked else ""
    config = tmp_path / "run.yaml"
    config.write_text(
        f"name: rerender\ninputs:\n  - path: {source}\noutput: {tmp_path / 'out'}\n"
        f"stages:\n  lint: {{fail_on: never}}\n  dedup: {{enabled: false}}\n{media}"
        f"  tokenize: {{tokenizer: {SAMPLE_TOKENIZER}}}\n"
        "  shard: {splits: {train: 1.0}, shuffle: false}\n"
    )
    result = CliRunner().invoke(main, ["run", str(config)])
    assert result.exit_code == 0, result.output
    return tmp_path / "out"


def _tokenize(tmp_path: Path, source: Path, flags: tuple[str, ...]) -> Path:
    out = tmp_path / "tokenized"
    args = ["tokenize", str(source), "--tokenizer", str(SAMPLE_TOKENIZER), "-o", str(out)]
    result = CliRunner().invoke(main, [*args, *flags])
    assert result.exit_code == 0, result.output
    return out


def _assert_rerenders(out: Path) -> int:
    """Every row's stored messages through the shipped template give its input_ids (and
    its labels through the assistant mask); `mms verify` agrees. The rows with media."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(out / "tokenizer"))
    rows = [
        row
        for path in sorted((out / "data").glob("*.parquet"))
        for row in pq.read_table(path).to_pylist()
    ]
    with_media = 0
    for row in rows:
        contents = [message["content"] for message in row["messages"]]
        assert all(isinstance(content, list) for content in contents)  # one type per column
        kinds = [part["type"] for content in contents for part in content]
        media = [kind for kind in kinds if kind != "text"]
        with_media += bool(media)
        assert media == [entry["kind"] for entry in row["media"] or []]
        ids = tokenizer.apply_chat_template(row["messages"], tokenize=True, return_dict=True)
        assert ids["input_ids"] == row["input_ids"], row["id"]
        for kind in set(media):
            placeholder = getattr(tokenizer, f"{kind}_token_id")
            assert row["input_ids"].count(placeholder) == media.count(kind)
    verified = CliRunner().invoke(main, ["verify", str(out)])
    assert verified.exit_code == 0, verified.output
    checked = verify_output(out).checked
    assert checked.get("rows with media against the chat template", 0) == with_media
    return with_media


@pytest.mark.parametrize("name", list(FIXTURES))
def test_run_rows_with_media_render_again_through_the_chat_template(tmp_path, name):
    source, flags = FIXTURES[name]
    assert _assert_rerenders(_run(tmp_path, source, bool(flags))) > 0


@pytest.mark.parametrize("name", list(FIXTURES))
def test_tokenize_rows_with_media_render_again_through_the_chat_template(tmp_path, name):
    source, flags = FIXTURES[name]
    assert _assert_rerenders(_tokenize(tmp_path, source, flags)) > 0


def test_prompt_rows_with_media_render_again_through_the_chat_template(tmp_path):
    """An objective's messages hold their media as parts too: a prompt row's `prompt`
    with the generation prompt is its `prompt_ids`."""
    from transformers import AutoTokenizer

    source, _ = FIXTURES["xtuner"]
    out = _tokenize(tmp_path, source, ("--objective", "prompt"))
    tokenizer = AutoTokenizer.from_pretrained(str(out / "tokenizer"))
    rows = [row for path in sorted((out / "data").glob("*.parquet")) for row in _rows_of(path)]
    assert rows
    for row in rows:
        assert any(part["type"] == "image" for m in row["prompt"] for part in m["content"])
        ids = tokenizer.apply_chat_template(
            row["prompt"], tokenize=True, return_dict=True, add_generation_prompt=True
        )["input_ids"]
        assert ids == row["prompt_ids"], row["id"]
    verified = CliRunner().invoke(main, ["verify", str(out)])
    assert verified.exit_code == 0, verified.output


def _rows_of(path: Path) -> list[dict]:
    return pq.read_table(path).to_pylist()
