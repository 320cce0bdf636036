"""What a run's rows train (`objective`): `sft` writes one row per thread (input_ids and
labels); `preference` one row per pair (DPO, ORPO, SimPO: TRL's `prompt_ids`,
`chosen_ids`, `rejected_ids`); `unpaired_preference` one row per completion with its
label (KTO: `prompt_ids`, `completion_ids`, `label`); `prompt` one row per thread, its
prompt up to the generation prompt and what a reward function checks against (GRPO, RLOO,
online DPO, evaluation).

Every row of an objective is a cut of the thread's SFT row under `last_assistant`: the
prompt is the tokens before the thread's answer (its final assistant turn, when it ends
with one: `answer_start`; a thread that ends waiting for an answer is all prompt) and the
generation prompt that opens it (`Renderer.prompt_lengths`), the completion the rest, so `prompt_ids + chosen_ids` is
the chosen thread's SFT `input_ids` and `[-100] * len(prompt_ids) + chosen_labels` its
labels, on every row, by construction (`mms verify` checks it again)."""

from __future__ import annotations

from typing import Literal

import pyarrow as pa

from pipeline.objectives.preference import PREFERENCE_SCHEMA, preference_rows
from pipeline.objectives.prompt import PROMPT_SCHEMA, prompt_rows
from pipeline.objectives.unpaired import UNPAIRED_SCHEMA, unpaired_rows
from pipeline.tokenize.tables import TOKENIZED_SCHEMA

Objective = Literal["sft", "preference", "unpaired_preference", "prompt"]
OBJECTIVES: tuple[str, ...] = ("sft", "preference", "unpaired_preference", "prompt")
SCHEMAS: dict[str, pa.Schema] = {
    "sft": TOKENIZED_SCHEMA,
    "preference": PREFERENCE_SCHEMA,
    "unpaired_preference": UNPAIRED_SCHEMA,
    "prompt": PROMPT_SCHEMA,
}
"""The columns of each objective's shards."""
OBJECTIVE_PARTS = {
    "preference": ("prompt", "chosen", "rejected"),
    "unpaired_preference": ("prompt", "completion"),
    "prompt": ("prompt",),
}
"""Each objective's token parts (its `num_PART_tokens` columns)."""


def objective_of(columns: set[str] | list[str]) -> str:
    """The objective whose shard rows have `columns` (`sft` for threads and packed rows)."""
    names = set(columns)
    if "chosen_ids" in names:
        return "preference"
    if "completion_ids" in names:
        return "unpaired_preference"
    return "prompt" if "prompt_ids" in names else "sft"


def objective_rows(objective: str, rows: pa.Table, generation_prompt: list[int]) -> pa.Table:
    """The shard rows of `objective` from kept SFT rows (with `prompt_tokens` and
    `prompt_messages`; a pair's two rows next to each other, as the objective stage keeps
    them)."""
    if objective == "preference":
        return preference_rows(rows)
    if objective == "unpaired_preference":
        return unpaired_rows(rows)
    if objective == "prompt":
        return prompt_rows(rows, generation_prompt)
    return rows.select(TOKENIZED_SCHEMA.names)


__all__ = [
    "OBJECTIVES",
    "OBJECTIVE_PARTS",
    "SCHEMAS",
    "Objective",
    "objective_of",
    "objective_rows",
]
