"""The output's tokenizer/ is a complete Hugging Face tokenizer: `AutoTokenizer` loads it
with bos/eos/pad set, and its chat template renders the stored rows exactly: the
`messages` column as stored gives each row's `input_ids`, and the `{% generation %}` mask
gives its trained positions (labels != -100)."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from tests.conftest import REPO
from tests.output_rows import shard_rows
from tests.tokenizer_fixtures import tokenize_inputs, tokenizer_file

transformers = pytest.importorskip(
    "transformers", reason="transformers (the dev extra) loads the shipped tokenizer"
)

SAMPLE_TOKENIZER = REPO / "configs" / "sample_tokenizer"
FAMILIES = ("bytelevel-llama3", "bytelevel-qwen2", "sentencepiece-phi3")
"""The Llama-3, Qwen2.5 and Phi-3 tokenizers (the real ones when ../shared is present, else
the small ones of their shapes: tests/tokenizer_fixtures.py)."""
REAL_INPUTS = (
    "llamafactory/glaive_toolcall_en_demo.json",
    "openai_finetune_examples/weather_chat_fine_tuning.jsonl",
    "toolbench/answer",
)
"""Real files with tool calls, read from ../shared/realdata when present (else the
repository's threads: tokenizer_fixtures.tokenize_inputs)."""


def _tokenize(tmp_path: Path, tokenizer: Path, *inputs: Path, bos: bool = False) -> Path:
    """`mms tokenize INPUTS` into tmp_path/out, the media not read (the samples' media
    files are not in the repository; their placeholders are what these tests look at)."""
    out = tmp_path / "out"
    args = ["tokenize", *map(str, inputs), "--tokenizer", str(tokenizer), "-o", str(out)]
    args.append("--no-check-media")
    result = CliRunner().invoke(main, [*args, *(["--bos"] if bos else [])])
    assert result.exit_code == 0, result.output
    return out


def _literal_special_text(tokenizer, rows: list[dict]) -> set[int]:
    """Rows whose text spells an added token: the template's string is tokenized with
    special-token matching on, the shards keep such text as text (a known limit)."""
    added = re.compile("|".join(map(re.escape, tokenizer.get_added_vocab())))
    return {
        index
        for index, row in enumerate(rows)
        if any(
            added.search(_text(m["content"])) or added.search(m["name"] or "")
            for m in row["messages"]
        )
    }


def _text(content: str | list | None) -> str:
    """A stored message's text: its string, or the text of its parts (a shard with media
    stores every content as a list of parts)."""
    if isinstance(content, list):
        return "".join(part["text"] or "" for part in content)
    return content or ""


def _with_parts(out: Path, row: dict) -> list[dict]:
    """The row's messages as the template takes them: as stored when the shard holds them
    as lists of parts; else a message whose content holds media markers gets its list of
    parts, each marker's kind the kind of the placeholder id at its place among the row's
    placeholder ids (none of these samples has a literal U+FFFC)."""
    if any(isinstance(message["content"], list) for message in row["messages"]):
        return row["messages"]
    record = orjson.loads((out / "tokenizer" / "mms_special_tokens.json").read_bytes())
    kinds = {entry["id"]: kind for kind, entry in record.get("media_tokens", {}).items()}
    found = iter([kinds[i] for i in row["input_ids"] if i in kinds])
    messages = []
    for message in row["messages"]:
        content = message["content"] or ""
        if kinds and "\ufffc" in content:
            pieces = content.split("\ufffc")
            parts = [{"type": "text", "text": pieces[0]}]
            for piece in pieces[1:]:
                parts += [{"type": next(found)}, {"type": "text", "text": piece}]
            message = {**message, "content": parts}
        messages.append(message)
    assert next(found, None) is None
    return messages


def _check_rows(out: Path) -> int:
    """Every row's ids and labels against apply_chat_template on its stored messages;
    how many rows were compared."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(out / "tokenizer"))
    rows = shard_rows(out)
    skipped = _literal_special_text(tokenizer, rows)
    compared = 0
    for index, row in enumerate(rows):
        if index in skipped:
            continue
        rendered = tokenizer.apply_chat_template(
            _with_parts(out, row),
            tokenize=True,
            return_dict=True,
            return_assistant_tokens_mask=True,
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
        "<|image|>",  # the openai samples hold images: the placeholders ship (DESIGN §4)
        "<|audio|>",
        "<|video|>",
    ]
    assert config["extra_special_tokens"] == {
        "image_token": "<|image|>",
        "audio_token": "<|audio|>",
        "video_token": "<|video|>",
    }
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
    # five MMS tokens, the pad, then the three media placeholders (the samples hold images)
    assert record["vocabulary"]["added_ids"] == 9 and len(tokenizer) == record["vocabulary"]["size"]
    assert record["media_tokens"]["image"]["id"] == tokenizer.pad_token_id + 1
    assert all(tokenizer.pad_token_id not in row["input_ids"] for row in shard_rows(out))


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


@pytest.mark.parametrize(
    ("family", "bos"),
    [
        ("bytelevel-llama3", False),
        ("bytelevel-llama3", True),
        ("bytelevel-qwen2", False),  # Qwen2.5 names no bos_token: --bos is a usage error
        ("sentencepiece-phi3", False),
        ("sentencepiece-phi3", True),
    ],
)
def test_real_tokenizers_ship_complete_and_render_every_row(tmp_path, family, bos):
    base = tokenizer_file(family).parent
    base_config = orjson.loads((base / "tokenizer_config.json").read_bytes())
    assert bool(base_config.get("bos_token")) == (family != "bytelevel-qwen2")
    inputs = tokenize_inputs(tmp_path, *REAL_INPUTS)
    out = _tokenize(tmp_path, base, *inputs, bos=bos)
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(out / "tokenizer"))
    assert tokenizer.eos_token is not None and tokenizer.pad_token is not None
    assert (tokenizer.bos_token is not None) == bool(base_config.get("bos_token"))
    record = orjson.loads((out / "tokenizer" / "mms_special_tokens.json").read_bytes())
    vocabulary = record["vocabulary"]
    assert len(tokenizer) == vocabulary["size"] == vocabulary["base_size"] + 5
    assert vocabulary["resize_embeddings"] is True
    trained = {i for row in shard_rows(out) for i in row["labels"] if i != -100}
    assert tokenizer.pad_token_id not in trained
    assert _check_rows(out) > 200


# ---------------------------------------------------------------- how generation stops


def _span_ends(rows: list[dict]) -> list[int]:
    """The last id of every trained span (a run of labels != -100) of every row."""
    ends = []
    for row in rows:
        labels = row["labels"]
        for index, label in enumerate(labels):
            if label != -100 and (index + 1 == len(labels) or labels[index + 1] == -100):
                ends.append(label)
    return ends


@pytest.mark.parametrize("policy", ["assistant", "last_assistant"])
def test_every_trained_span_ends_in_an_eos_id_of_the_generation_config(tmp_path, policy):
    """The model learns to stop where a trained span ends: on `<|end_turn|>`, or on the
    `<|role|>` halt before a tool result (or appended after a thread that ends halted).
    generation_config.json lists every such id as eos_token_id, the tokenizer's eos is
    `<|end_turn|>`, and the pad is none of them and never trained."""
    out = tmp_path / "out"
    inputs = [str(REPO / "data_samples" / name) for name in ("mms", "openai", "hermes", "glm")]
    args = ["tokenize", *inputs, "--tokenizer", str(SAMPLE_TOKENIZER), "-o", str(out)]
    result = CliRunner().invoke(main, [*args, "--train-on", policy])
    assert result.exit_code == 0, result.output
    generation = transformers.GenerationConfig.from_pretrained(str(out / "tokenizer"))
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(out / "tokenizer"))
    end_turn, role = (tokenizer.convert_tokens_to_ids(t) for t in ("<|end_turn|>", "<|role|>"))
    assert generation.eos_token_id == [end_turn, role]
    assert tokenizer.eos_token == "<|end_turn|>" and tokenizer.eos_token_id == end_turn
    rows = shard_rows(out)
    ends = _span_ends(rows)
    assert set(ends) <= set(generation.eos_token_id)
    assert {end_turn, role} <= set(ends)  # both stops occur: the check means something
    trained = {label for row in rows for label in row["labels"] if label != -100}
    assert generation.pad_token_id == tokenizer.pad_token_id not in trained | {end_turn, role}
    listed = orjson.loads((out / "manifest.json").read_bytes())["files"]
    assert "tokenizer/generation_config.json" in {entry["path"] for entry in listed}


@pytest.mark.parametrize("family", FAMILIES)
def test_real_tokenizers_ship_the_stop_ids_of_their_rows(tmp_path, family):
    inputs = tokenize_inputs(tmp_path, *REAL_INPUTS[::2])
    out = _tokenize(tmp_path, tokenizer_file(family).parent, *inputs)
    generation = transformers.GenerationConfig.from_pretrained(str(out / "tokenizer"))
    record = orjson.loads((out / "tokenizer" / "mms_special_tokens.json").read_bytes())
    special = record["special_tokens"]
    assert generation.eos_token_id == [special["<|end_turn|>"], special["<|role|>"]]
    assert set(_span_ends(shard_rows(out))) == set(generation.eos_token_id)
    assert generation.pad_token_id == record["pad_id"] not in generation.eos_token_id


# ---------------------------------------------------------------- the BOS


def _tokenizer_with_bos(folder: Path) -> Path:
    """The sample tokenizer as Llama 3 ships: a `<|begin_of_text|>` BOS its post-processor
    adds to every encoding, and an `<|eot_id|>` eos, both named by its tokenizer_config."""
    data = orjson.loads((SAMPLE_TOKENIZER / "tokenizer.json").read_bytes())
    size = len(data["model"]["vocab"])
    special = {"<|begin_of_text|>": size, "<|eot_id|>": size + 1}
    data["added_tokens"] = [
        {
            "id": number,
            "content": token,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for token, number in special.items()
    ]
    bos = {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}
    data["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [bos, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [
            bos,
            {"Sequence": {"id": "A", "type_id": 0}},
            {"Sequence": {"id": "B", "type_id": 1}},
        ],
        "special_tokens": {
            "<|begin_of_text|>": {
                "id": "<|begin_of_text|>",
                "ids": [size],
                "tokens": ["<|begin_of_text|>"],
            }
        },
    }
    folder.mkdir()
    (folder / "tokenizer.json").write_bytes(orjson.dumps(data))
    config = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "add_bos_token": True}
    (folder / "tokenizer_config.json").write_bytes(orjson.dumps(config))
    return folder


@pytest.mark.parametrize("bos", [False, True])
def test_the_shipped_tokenizer_adds_a_bos_exactly_when_the_rows_have_one(tmp_path, bos):
    """`tokenizer(text)` of the shipped tokenizer starts with the BOS only under `bos: true`,
    as every row does, and never ends with an EOS: a server that renders the chat template
    to text and tokenizes it gets the rows' ids (under `bos: true` the template writes the
    BOS itself, so such text is tokenized without special tokens, as Llama 3's is)."""
    base = _tokenizer_with_bos(tmp_path / "base")
    out = _tokenize(tmp_path, base, REPO / "data_samples" / "mms", bos=bos)
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(out / "tokenizer"))
    bos_id = tokenizer.convert_tokens_to_ids("<|begin_of_text|>")
    plain = tokenizer("Weather in Tokyo?", add_special_tokens=False)["input_ids"]
    assert plain and bos_id not in plain
    assert tokenizer("Weather in Tokyo?")["input_ids"] == [bos_id] * bos + plain
    config = orjson.loads((out / "tokenizer" / "tokenizer_config.json").read_bytes())
    assert config["add_bos_token"] is bos and config["add_eos_token"] is False
    rows = shard_rows(out)
    assert all((row["input_ids"][0] == bos_id) is bos for row in rows)
    assert all(row["input_ids"].count(bos_id) == bos for row in rows)
    skipped = _literal_special_text(tokenizer, rows)
    compared = 0
    for index, row in enumerate(rows):
        if index in skipped:
            continue
        text = tokenizer.apply_chat_template(row["messages"], tokenize=False)
        assert tokenizer(text, add_special_tokens=not bos)["input_ids"] == row["input_ids"]
        compared += 1
    assert compared > 3
    generation = transformers.GenerationConfig.from_pretrained(str(out / "tokenizer"))
    assert generation.bos_token_id == (bos_id if bos else None)
