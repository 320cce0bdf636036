"""A model trained on the output stops by itself: a tiny LlamaForCausalLM fitted on a few
rows, then greedy `generate()` from `apply_chat_template(..., add_generation_prompt=True)`
with the shipped generation_config.json, writes the trained reply and stops on its last id,
`<|end_turn|>` at the end of a turn and `<|role|>` at a halt before a tool result, well
before `max_new_tokens`. So does the checkpoint the README's recipe saves."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from tests.conftest import REPO

torch = pytest.importorskip("torch", reason="torch (the torch extra) fits the tiny model")
transformers = pytest.importorskip("transformers", reason="transformers builds the tiny model")

SAMPLE_TOKENIZER = REPO / "configs" / "sample_tokenizer"
MAX_NEW_TOKENS = 64
STEPS = 120


def _first_trained(row: dict) -> int:
    return next(i for i, label in enumerate(row["labels"]) if label != -100)


def _first_span(row: dict) -> list[int]:
    """The ids of the row's first trained span: what the model writes after the prompt."""
    span = []
    for label in row["labels"][_first_trained(row) :]:
        if label == -100:
            break
        span.append(label)
    return span


def _halts(row: dict) -> bool:
    """Whether the row's first assistant message does not end its turn (a tool call)."""
    first = next(m for m in row["messages"] if m["role"] == "assistant")
    return first["end_turn"] is False


@pytest.fixture(scope="module")
def fitted(tmp_path_factory) -> tuple[Path, list[dict], object]:
    """The output, the rows fitted (the three shortest that end a turn and the shortest
    that halts, each with its own prompt), and the tiny model fitted on them."""
    out = tmp_path_factory.mktemp("stops") / "out"
    inputs = [str(REPO / "data_samples" / name) for name in ("mms", "openai")]
    args = ["tokenize", *inputs, "--tokenizer", str(SAMPLE_TOKENIZER), "-o", str(out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    rows = [
        r for p in sorted((out / "data").glob("*.parquet")) for r in pq.read_table(p).to_pylist()
    ]
    rows.sort(key=lambda row: (row["num_tokens"], row["id"]))
    picked: list[dict] = []
    prompts: set[tuple[int, ...]] = set()
    for halting in (False, False, False, True):
        row = next(
            r
            for r in rows
            if r["num_trained"]
            and _halts(r) is halting
            # a row with media renders placeholders the template takes from parts, which
            # `mms tokenize` rows do not carry (no media column): not this test's subject
            and not any("\ufffc" in (m["content"] or "") for m in r["messages"])
            and tuple(r["input_ids"][: _first_trained(r)]) not in prompts
        )
        picked.append(row)
        prompts.add(tuple(row["input_ids"][: _first_trained(row)]))

    tokenizer = transformers.AutoTokenizer.from_pretrained(str(out / "tokenizer"))
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=512,
    )
    model = transformers.LlamaForCausalLM(config)
    longest = max(row["num_tokens"] for row in picked)
    pad = [tokenizer.pad_token_id]

    def padded(row: dict, key: str, fill: list[int]) -> list[int]:
        return row[key] + fill * (longest - row["num_tokens"])

    batch = {
        "input_ids": torch.tensor([padded(r, "input_ids", pad) for r in picked]),
        "labels": torch.tensor([padded(r, "labels", [-100]) for r in picked]),
        "attention_mask": torch.tensor(
            [[1] * r["num_tokens"] + [0] * (longest - r["num_tokens"]) for r in picked]
        ),
    }
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
    model.train()
    for _ in range(STEPS):
        loss = model(**batch).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return out, picked, model.eval()


def _prompt(tokenizer, row: dict) -> dict:
    """The messages before the row's first assistant message, with the generation prompt:
    the row's own first ids."""
    first = next(i for i, m in enumerate(row["messages"]) if m["role"] == "assistant")
    prompt = tokenizer.apply_chat_template(
        row["messages"][:first], add_generation_prompt=True, return_dict=True, return_tensors="pt"
    )
    assert prompt["input_ids"][0].tolist() == row["input_ids"][: _first_trained(row)]
    return prompt


def _generated(model, prompt: dict, **settings) -> list[int]:
    with torch.no_grad():
        output = model.generate(**prompt, **settings)
    return output[0, prompt["input_ids"].shape[1] :].tolist()


def test_a_model_fitted_on_the_rows_stops_by_itself(fitted):
    out, rows, model = fitted
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(out / "tokenizer"))
    generation = transformers.GenerationConfig.from_pretrained(str(out / "tokenizer"))
    generation.max_new_tokens = MAX_NEW_TOKENS
    generation.do_sample = False
    end_turn, role = (tokenizer.convert_tokens_to_ids(t) for t in ("<|end_turn|>", "<|role|>"))
    for row in rows:
        written = _generated(model, _prompt(tokenizer, row), generation_config=generation)
        assert len(written) < MAX_NEW_TOKENS, row["id"]
        assert written[-1] == (role if _halts(row) else end_turn), row["id"]
        assert written == _first_span(row), row["id"]


def test_the_checkpoint_the_readme_recipe_saves_stops_by_itself(fitted, tmp_path):
    """`model.generation_config = GenerationConfig.from_pretrained(OUT/tokenizer)` before
    training: the saved checkpoint's generation_config.json carries the stop ids, and a
    plain `generate()` of the reloaded checkpoint stops."""
    out, rows, model = fitted
    model.generation_config = transformers.GenerationConfig.from_pretrained(str(out / "tokenizer"))
    model.save_pretrained(tmp_path / "ckpt")
    saved = transformers.GenerationConfig.from_pretrained(str(tmp_path / "ckpt"))
    assert saved.eos_token_id == model.generation_config.eos_token_id
    reloaded = transformers.LlamaForCausalLM.from_pretrained(str(tmp_path / "ckpt")).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(out / "tokenizer"))
    row = rows[-1]  # the halt
    written = _generated(
        reloaded, _prompt(tokenizer, row), max_new_tokens=MAX_NEW_TOKENS, do_sample=False
    )
    assert written == _first_span(row) and written[-1] in saved.eos_token_id
