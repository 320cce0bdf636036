"""The output's tokenizer/ is a complete Hugging Face tokenizer: `AutoTokenizer` loads it
with bos/eos/pad set, and its chat template renders the stored rows exactly: the
`messages` column as stored gives each row's `input_ids`, and the `{% generation %}` mask
gives its trained positions (labels != -100)."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from tests.conftest import REPO

transformers = pytest.importorskip(
    "transformers", reason="transformers (the dev extra) loads the shipped tokenizer"
)

SAMPLE_TOKENIZER = REPO / "configs" / "sample_tokenizer"
REAL_TOKENIZERS = ("llama3_from_tiktoken", "qwen2.5_from_tiktoken", "phi-3-mini")


def _tokenize(tmp_path: Path, tokenizer: Path, *inputs: Path, bos: bool = False) -> Path:
    out = tmp_path / "out"
    args = ["tokenize", *map(str, inputs), "--tokenizer", str(tokenizer), "-o", str(out)]
    result = CliRunner().invoke(main, [*args, *(["--bos"] if bos else [])])
    assert result.exit_code == 0, result.output
    return out


def _rows(out: Path) -> list[dict]:
    return [
        row
        for shard in sorted((out / "data").glob("*.parquet"))
        for row in pq.read_table(shard).to_pylist()
    ]


def _literal_special_text(tokenizer, rows: list[dict]) -> set[int]:
    """Rows whose text spells an added token: the template's string is tokenized with
    special-token matching on, the shards keep such text as text (a known limit)."""
    added = re.compile("|".join(map(re.escape, tokenizer.get_added_vocab())))
    return {
        index
        for index, row in enumerate(rows)
        if any(
            added.search(m["content"] or "") or added.search(m["name"] or "")
            for m in row["messages"]
        )
    }


def _check_rows(out: Path) -> int:
    """Every row's ids and labels against apply_chat_template on its stored messages;
    how many rows were compared."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(out / "tokenizer"))
    rows = _rows(out)
    skipped = _literal_special_text(tokenizer, rows)
    compared = 0
    for index, row in enumerate(rows):
        if index in skipped:
            continue
        rendered = tokenizer.apply_chat_template(
            row["messages"], tokenize=True, return_dict=True, return_assistant_tokens_mask=True
        )
        ids, mask = rendered["input_ids"], rendered["assistant_masks"]
        assert ids == row["input_ids"], row["id"]
        assert [i if m else -100 for i, m in zip(ids, mask, strict=True)] == row["labels"], row[
            "id"
        ]
        compared += 1
    assert compared >= len(rows) - len(skipped) > 0
    return compared


def test_the_sample_tokenizer_ships_complete_and_renders_every_row(tmp_path):
    out = _tokenize(
        tmp_path,
        SAMPLE_TOKENIZER,
        REPO / "data_samples" / "openai",
        REPO / "data_samples" / "hermes",
    )
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        assert (out / "tokenizer" / name).is_file()
    config = orjson.loads((out / "tokenizer" / "tokenizer_config.json").read_bytes())
    assert config["additional_special_tokens"] == [
        "<|role|>",
        "<|name|>",
        "<|format|>",
        "<|content|>",
        "<|end_turn|>",
    ]
    assert _check_rows(out) > 5


def test_a_base_with_no_pad_eos_or_unk_gets_an_added_pad_never_rendered(tmp_path):
    """The sample tokenizer names no pad, eos or unk: the output adds `<|pad|>` after the
    MMS tokens, names it the pad, counts it in the vocabulary growth, and no row holds it."""
    base_config = SAMPLE_TOKENIZER / "tokenizer_config.json"
    assert not base_config.exists()  # nothing to take a pad from
    out = _tokenize(tmp_path, SAMPLE_TOKENIZER, REPO / "data_samples" / "openai")
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(out / "tokenizer"))
    record = orjson.loads((out / "tokenizer" / "mms_special_tokens.json").read_bytes())
    assert tokenizer.pad_token == record["pad_token"] == "<|pad|>"
    assert record["pad_id"] == tokenizer.pad_token_id
    assert tokenizer.pad_token_id == max(record["special_tokens"].values()) + 1
    assert record["vocabulary"]["added_ids"] == 6 and len(tokenizer) == record["vocabulary"]["size"]
    assert all(tokenizer.pad_token_id not in row["input_ids"] for row in _rows(out))


def test_add_generation_prompt_opens_an_assistant_turn(tmp_path):
    out = _tokenize(tmp_path, SAMPLE_TOKENIZER, REPO / "data_samples" / "mms")
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(out / "tokenizer"))
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Hi"}], tokenize=False, add_generation_prompt=True
    )
    assert text == "<|role|>user<|content|>Hi<|role|>assistant<|format|>"
    halted = [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "format": "w:json", "content": "{}", "end_turn": False},
    ]
    text = tokenizer.apply_chat_template(halted, tokenize=False, add_generation_prompt=True)
    assert text.endswith("<|content|>{}<|role|>assistant<|format|>")


@pytest.mark.parametrize("name", REAL_TOKENIZERS)
@pytest.mark.parametrize("bos", [False, True])
def test_real_tokenizers_ship_complete_and_render_every_row(tmp_path, shared, name, bos):
    base = shared / "tokenizers" / name
    base_config = orjson.loads((base / "tokenizer_config.json").read_bytes())
    if bos and not base_config.get("bos_token"):
        pytest.skip(f"{name} names no bos_token")
    realdata = shared / "realdata"
    inputs = (
        realdata / "llamafactory" / "glaive_toolcall_en_demo.json",
        realdata / "openai_finetune_examples" / "weather_chat_fine_tuning.jsonl",
        realdata / "toolbench" / "answer",
    )
    out = _tokenize(tmp_path, base, *inputs, bos=bos)
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(out / "tokenizer"))
    assert tokenizer.eos_token is not None and tokenizer.pad_token is not None
    assert (tokenizer.bos_token is not None) == bool(base_config.get("bos_token"))
    record = orjson.loads((out / "tokenizer" / "mms_special_tokens.json").read_bytes())
    vocabulary = record["vocabulary"]
    assert len(tokenizer) == vocabulary["size"] == vocabulary["base_size"] + 5
    assert vocabulary["resize_embeddings"] is True
    trained = {i for row in _rows(out) for i in row["labels"] if i != -100}
    assert tokenizer.pad_token_id not in trained
    assert _check_rows(out) > 200
