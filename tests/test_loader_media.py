"""The loader's media on an objective's rows (DESIGN §7): every batch row of a
preference, unpaired_preference or prompt output carries exactly the media whose
placeholders stand in its ids, in order (a pair's chosen row the prompt's then the chosen
answer's, its rejected row the prompt's then the rejected answer's), as references or,
with `decode=True`, PIL images; the torch wrapper passes them on as lists."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import orjson
import pytest

from pipeline.loader import OutputLoader
from pipeline.mms.media_columns import MEDIA_SHARD_COLUMNS
from tests.output_rows import shard_rows
from tests.test_media_rows import (
    PROMPTS,
    _names,
    _prompt_text,
    _run,
    inputs,  # noqa: F401 (fixture)
)

SIDES = {  # each objective's batch rows of a shard row: its id columns, the answer's images
    "preference": (
        (("prompt_ids", "chosen_ids"), "chosen"),
        (("prompt_ids", "rejected_ids"), "rejected"),
    ),
    "unpaired_preference": ((("prompt_ids", "completion_ids"), "label"),),
    "prompt": ((("prompt_ids",), None),),
}


def _placeholders(out: Path) -> dict[str, int]:
    """Each media column's placeholder id, from the output's tokenizer record."""
    record = orjson.loads((out / "tokenizer" / "mms_special_tokens.json").read_bytes())
    return {
        MEDIA_SHARD_COLUMNS[kind]: entry["id"] for kind, entry in record["media_tokens"].items()
    }


def _ids_of(row: dict, columns: tuple[str, ...]) -> tuple[int, ...]:
    return tuple(i for column in columns for i in row[column])


def _expected(out: Path, objective: str) -> dict[tuple[int, ...], list[str]]:
    """Each batch row the output gives, by its ids: the input images it must carry (its
    prompt's, then its answer's)."""
    expected: dict[tuple[int, ...], list[str]] = {}
    for row in shard_rows(out):
        prompt, chosen, rejected = PROMPTS[_prompt_text(row)]
        for columns, answer in SIDES[objective]:
            if answer == "label":
                answer = "chosen" if row["label"] else "rejected"
            answers = {"chosen": chosen, "rejected": rejected, None: []}
            expected[_ids_of(row, columns)] = prompt + answers[answer]
    return expected


def _batch_rows(batch: dict) -> list[tuple[int, ...]]:
    """Each batch row's ids without its padding (right or left)."""
    return [
        tuple(ids[mask == 1].tolist())
        for ids, mask in zip(batch["input_ids"], batch["attention_mask"], strict=True)
    ]


@pytest.fixture(scope="module", params=list(SIDES))
def objective_output(request, inputs, tmp_path_factory):  # noqa: F811
    """An objective's output of the media pairs (the prompts', chosen and rejected answers'
    images), and its objective."""
    out = tmp_path_factory.mktemp("loader-media") / request.param
    return _run(inputs, out, f"objective: {request.param}"), request.param


def test_each_batch_row_carries_the_media_of_its_placeholders(objective_output, inputs):  # noqa: F811
    out, objective = objective_output
    expected, placeholders = _expected(out, objective), _placeholders(out)
    seen = []
    for batch in OutputLoader(out, batch_size=2, seed=3):
        assert [c for c in placeholders if c in batch] == ["images"]  # the kinds the rows hold
        rows = _batch_rows(batch)
        for number, ids in enumerate(rows):
            for column, placeholder in placeholders.items():
                held = batch[column][number] if column in batch else []
                assert len(held) == ids.count(placeholder)
            assert _names(batch["images"][number], inputs) == expected[ids]
        seen += rows
    assert sorted(seen) == sorted(
        _ids_of(row, columns) for row in shard_rows(out) for columns, _ in SIDES[objective]
    )
    assert any(len(expected[ids]) > 1 for ids in seen)


def test_decode_gives_the_images_as_pil_images(objective_output, inputs):  # noqa: F811
    from PIL import Image

    out, objective = objective_output
    expected = _expected(out, objective)
    sizes = {path.name: Image.open(path).size for path in inputs.glob("*.png")}
    references = OutputLoader(out, batch_size=3, shuffle=False)
    decoded = OutputLoader(out, batch_size=3, shuffle=False, decode=True)
    for plain, images in zip(references, decoded, strict=True):
        assert np.array_equal(plain["input_ids"], images["input_ids"])
        for ids, row, cells in zip(
            _batch_rows(plain), images["images"], plain["images"], strict=True
        ):
            assert all(isinstance(image, Image.Image) for image in row)
            assert [image.size for image in row] == [sizes[n] for n in expected[ids]]
            assert [image.size for image in row] == [
                Image.open(io.BytesIO(cell["bytes"])).size for cell in cells
            ]


def test_torch_batches_carry_an_objectives_media_as_lists(objective_output, inputs):  # noqa: F811
    pytest.importorskip("torch", reason="torch (the torch extra) runs the adapter")
    from pipeline.loader.torch import TorchBatches

    out, objective = objective_output
    expected = _expected(out, objective)
    for batch in TorchBatches(out, batch_size=2, shuffle=False):
        rows = [
            tuple(ids[mask == 1].tolist())
            for ids, mask in zip(batch["input_ids"], batch["attention_mask"], strict=True)
        ]
        assert isinstance(batch["images"], list) and len(batch["images"]) == len(rows)
        for ids, cells in zip(rows, batch["images"], strict=True):
            assert _names(cells, inputs) == expected[ids]
