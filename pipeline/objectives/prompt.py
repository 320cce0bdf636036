"""Prompt rows: one per thread, for online RL (GRPO, RLOO, online DPO) and evaluation.
The prompt is the thread up to its final assistant turn, rendered with the generation
prompt, exactly what the shipped chat template gives with `add_generation_prompt=True`;
a thread without an answer (MT-Bench, BFCL, a prompt list) is all prompt. `reference` is
what a reward function checks the generation against, as text (JSON when not a string):
the source's reference (REFERENCE_KEYS in meta or its extra fields), else the thread's
own final turn.

    thread   user "2+2?"  assistant "4"
    row      prompt_ids [<|role|> user <|content|> 2+2? <|role|> assistant <|format|>]
             reference "4"
"""

from __future__ import annotations

from typing import Any

import orjson
import pyarrow as pa

from pipeline.mms import MESSAGE_ARROW_TYPE
from pipeline.objectives.lists import head, head_extended
from pipeline.objectives.media import prompt_media, with_row_media
from pipeline.objectives.sides import SETTINGS_TYPE, TOKEN_LIST, metas
from pipeline.tokenize.tables import PROMPT_MESSAGES, PROMPT_TOKENS

PROMPT_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("prompt", pa.list_(MESSAGE_ARROW_TYPE)),
        ("prompt_ids", TOKEN_LIST),
        ("num_prompt_tokens", pa.int32()),
        ("reference", pa.string()),
        ("settings", SETTINGS_TYPE),
        ("meta", pa.string()),
    ]
)
"""A prompt's row: `settings` carries the declared tools and response formats."""
REFERENCE_KEYS = ("reference", "solution", "ground_truth", "answer", "possible_answer")
"""Where sources keep what an answer is checked against: MT-Bench's `reference`, TRL's
and the math sets' `solution` / `ground_truth` / `answer`, BFCL's `possible_answer`."""


def prompt_rows(rows: pa.Table, generation_prompt: list[int]) -> pa.Table:
    """One row per row of `rows`, with its prompt's media columns when `rows` have them."""
    cut = rows[PROMPT_TOKENS].to_numpy()
    turn = rows[PROMPT_MESSAGES].to_numpy()
    messages = rows["messages"].to_pylist()
    references = [
        _reference(meta, thread[start:])
        for meta, thread, start in zip(metas(rows), messages, turn.tolist(), strict=True)
    ]
    columns = {
        "id": rows["id"],
        "prompt": head(rows["messages"], turn),
        "prompt_ids": head_extended(rows["input_ids"], cut, generation_prompt),
        "num_prompt_tokens": pa.array(cut, pa.int32()),
        "reference": pa.array(references, pa.string()),
        "settings": rows["settings"],
        "meta": rows["meta"],
    }
    return with_row_media(pa.table(columns, schema=PROMPT_SCHEMA), prompt_media(rows))


def _reference(meta: dict[str, Any], final_turn: list[dict[str, Any]]) -> str | None:
    """The reference of one thread (module docstring)."""
    extra = meta.get("extra_fields")
    for where in (meta, extra if isinstance(extra, dict) else {}):
        for key in REFERENCE_KEYS:
            value = where.get(key)
            if value is not None and value != "" and value != []:
                return value if isinstance(value, str) else orjson.dumps(value).decode()
    answers = [m["content"] for m in final_turn if m["role"] == "assistant" and m["content"]]
    return answers[-1] if answers else None
