"""Packing keeps threads apart: with a tiny randomly initialised LlamaForCausalLM, the loss
of a packed sequence equals the token-weighted loss of its threads run one by one, when
attention is told the boundaries (restarting `position_ids` with the varlen arguments, or a
block-diagonal mask), and does not when it is not (so the check can fail)."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from tests.conftest import REPO
from tests.tiny_llama import tiny_llama

torch = pytest.importorskip("torch", reason="torch (the torch extra) runs the tiny model")
transformers = pytest.importorskip("transformers", reason="transformers builds the tiny model")

SAMPLE_TOKENIZER = REPO / "configs" / "sample_tokenizer"
TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def rows(tmp_path_factory) -> list[dict]:
    """Tokenized rows of the samples with the sample tokenizer: real renderer output."""
    out = tmp_path_factory.mktemp("packing") / "out"
    inputs = [str(REPO / "data_samples" / name) for name in ("openai", "hermes", "sharegpt")]
    args = ["tokenize", *inputs, "--tokenizer", str(SAMPLE_TOKENIZER), "-o", str(out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    table = pq.read_table(sorted((out / "data").glob("*.parquet"))[0])
    trained = [row for row in table.to_pylist() if row["num_trained"] > 0]
    assert len(trained) >= 6
    return trained[:6]


@pytest.fixture(scope="module", params=["sdpa", "eager"])
def model(request, rows):
    vocabulary = max(max(row["input_ids"]) for row in rows) + 1
    return tiny_llama(vocabulary, request.param).double()


def _one_by_one(model, rows: list[dict]) -> float:
    """The loss over all trained targets of the threads, each run alone."""
    total, targets = 0.0, 0
    with torch.no_grad():
        for row in rows:
            output = model(
                input_ids=torch.tensor([row["input_ids"]]),
                labels=torch.tensor([row["labels"]]),
                use_cache=False,
            )
            count = sum(label != -100 for label in row["labels"][1:])
            total += output.loss.item() * count
            targets += count
    return total / targets


def _packed(rows: list[dict]) -> dict[str, torch.Tensor]:
    """The threads in one sequence with what attention needs to keep them apart."""
    lengths = [len(row["input_ids"]) for row in rows]
    bounds = torch.tensor([0, *lengths], dtype=torch.int32).cumsum(0, dtype=torch.int32)
    document = torch.repeat_interleave(torch.arange(len(rows)), torch.tensor(lengths))
    causal = torch.tril(torch.ones(len(document), len(document), dtype=torch.bool))
    return {
        "input_ids": torch.tensor([[i for row in rows for i in row["input_ids"]]]),
        "labels": torch.tensor([[v for row in rows for v in row["labels"]]]),
        "position_ids": torch.tensor([[p for n in lengths for p in range(n)]]),
        "cu_seq_lens": bounds,
        "max_length": max(lengths),
        "block_mask": _additive((causal & (document[:, None] == document[None, :]))[None, None]),
    }


def _additive(allowed: torch.Tensor) -> torch.Tensor:
    """A 4D mask as transformers adds it to attention scores: 0 where a query may attend,
    the lowest float elsewhere (a bool mask is read so by sdpa only, not by eager)."""
    blocked = torch.finfo(torch.float64).min
    return torch.zeros(allowed.shape, dtype=torch.float64).masked_fill(~allowed, blocked)


def test_the_first_target_of_every_thread_is_untrained(rows):
    """Packed, a thread's first token is the target of the thread before it: it must carry
    no loss, whatever attention does."""
    assert all(row["labels"][0] == -100 for row in rows)


def _loss(model, packed: dict, **attention) -> float:
    """The packed sequence's loss, the model told what `attention` says (and no cache
    unless it says so)."""
    with torch.no_grad():
        return model(
            input_ids=packed["input_ids"],
            labels=packed["labels"],
            **{"use_cache": False, **attention},
        ).loss.item()


def test_position_ids_and_varlen_arguments_keep_threads_apart(model, rows):
    packed = _packed(rows)
    loss = _loss(
        model,
        packed,
        position_ids=packed["position_ids"],
        cu_seq_lens_q=packed["cu_seq_lens"],
        cu_seq_lens_k=packed["cu_seq_lens"],
        max_length_q=packed["max_length"],
        max_length_k=packed["max_length"],
    )
    assert loss == pytest.approx(_one_by_one(model, rows), abs=TOLERANCE)


def test_a_block_diagonal_mask_keeps_threads_apart(model, rows):
    packed = _packed(rows)
    loss = _loss(
        model, packed, position_ids=packed["position_ids"], attention_mask=packed["block_mask"]
    )
    assert loss == pytest.approx(_one_by_one(model, rows), abs=TOLERANCE)


def test_without_the_boundaries_threads_attend_to_each_other(model, rows):
    loss = _loss(model, _packed(rows))
    assert abs(loss - _one_by_one(model, rows)) > 100 * TOLERANCE


def test_a_cache_hides_the_packing_from_position_ids(model, rows):
    """transformers finds packed sequences in `position_ids` only without a cache: a model
    left with `use_cache=True` lets threads attend to each other (hence the loader's
    `use_cache: False`, or the block-diagonal mask, which holds either way)."""
    packed = _packed(rows)
    positions = packed["position_ids"]
    cached = _loss(model, packed, position_ids=positions, use_cache=True)
    masked = _loss(
        model, packed, position_ids=positions, attention_mask=packed["block_mask"], use_cache=True
    )
    alone = _one_by_one(model, rows)
    assert abs(cached - alone) > 100 * TOLERANCE
    assert masked == pytest.approx(alone, abs=TOLERANCE)


def test_rows_are_unchanged_by_packing(rows):
    packed = _packed(rows)
    bounds = packed["cu_seq_lens"].tolist()
    for row, start, end in zip(rows, bounds, bounds[1:], strict=False):
        assert packed["input_ids"][0, start:end].tolist() == row["input_ids"]
        assert packed["labels"][0, start:end].tolist() == row["labels"]
        assert packed["position_ids"][0, start:end].tolist() == list(range(end - start))
