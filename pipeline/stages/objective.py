"""The objective stage (pipeline/objectives): decides which tokenized threads can make
the objective's rows, and reshapes the kept ones into them.

Dropped, each with its reason (never guessed into a row):
- `preference`: a thread in no pair (`not_a_pair`); a pair without exactly one chosen and
  one rejected side (`pair_incomplete`); a side without an answer, or whose answer trains
  no token (`pair_side_untrained`); sides whose prompts (everything before the final
  assistant turn) are not the same tokens (`pair_prompts_differ`); two sides with the same
  completion (`pair_sides_identical`: no preference to learn);
- `unpaired_preference`: a thread with no preference side (`no_preference_label`), or
  without an answer that trains a token (`completion_untrained`);
- `prompt`: a thread that opens with the assistant's turn (`no_prompt`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.mms.groups import group_runs, pair_of, side_of
from pipeline.objectives import SCHEMAS, objective_rows
from pipeline.objectives.sides import metas
from pipeline.stages.contract import Stage
from pipeline.tokenize.renderer import IGNORE
from pipeline.tokenize.tables import PROMPT_MESSAGES, PROMPT_TOKENS

REASONS: dict[str, str] = {
    "not_a_pair": "in no preference pair (meta.pair_id)",
    "pair_incomplete": "its pair has not exactly one chosen and one rejected side",
    "pair_prompts_differ": "the pair's sides differ before their final assistant turn",
    "pair_side_untrained": "a side of its pair has no answer, or one that trains no token",
    "pair_sides_identical": "the pair's two completions are the same",
    "no_preference_label": "no preference side (meta.preference)",
    "completion_untrained": "no answer, or one that trains no token",
    "no_prompt": "it opens with the assistant's turn: no prompt",
}
"""Why the objective stage leaves a thread out: the counted code and what it means."""


class ObjectiveStage(Stage):
    """See the module docstring. `generation_prompt` gives the generation prompt's ids
    (a prompt-only thread's prompt row ends with them)."""

    name = "objective"

    def __init__(self, objective: str, generation_prompt: Callable[[], list[int]]):
        self.objective = objective
        self.generation_prompt = generation_prompt
        self.reshaped_schema = SCHEMAS[objective]  # type: ignore[misc]
        self.threads_per_row = 2 if objective == "preference" else 1  # type: ignore[misc]

    def decide(self, rows: pa.Table, kept: list[bool]) -> list[str | None]:
        if self.objective == "sft" or not rows.num_rows:
            return [None] * rows.num_rows
        if self.objective == "prompt":
            turns = rows[PROMPT_MESSAGES].to_pylist()
            return [
                "no_prompt" if keep and turn == 0 else None
                for keep, turn in zip(kept, turns, strict=True)
            ]
        sides = _Sides(rows)
        if self.objective == "unpaired_preference":
            return [
                sides.unpaired_reason(row) if kept[row] else None for row in range(rows.num_rows)
            ]
        return sides.pair_reasons(kept)

    def reshape(self, split: str, rows: pa.Table) -> Iterator[pa.Table]:
        if rows.num_rows:
            yield objective_rows(self.objective, rows, self.generation_prompt())


class _Sides:
    """A batch's rows as prompts and completions, to judge pairs and completions: their
    tokens read as flat numpy arrays, not copied into Python lists."""

    def __init__(self, rows: pa.Table):
        self.meta = metas(rows)
        self.cut = pc.fill_null(rows[PROMPT_TOKENS], 0).to_numpy().astype(np.int64)  # null: dropped
        self.offsets, self.ids = _flat(rows["input_ids"])
        _, self.labels = _flat(rows["labels"])

    def _prompt(self, row: int) -> np.ndarray:
        start = self.offsets[row]
        return self.ids[start : start + self.cut[row]]

    def _answer(self, row: int, values: np.ndarray | None = None) -> np.ndarray:
        start = self.offsets[row] + self.cut[row]
        return (self.ids if values is None else values)[start : self.offsets[row + 1]]

    def trains(self, row: int) -> bool:
        """Whether the row's completion trains a token."""
        return bool((self._answer(row, self.labels) != IGNORE).any())

    def unpaired_reason(self, row: int) -> str | None:
        if side_of(self.meta[row]) is None:
            return "no_preference_label"
        return None if self.trains(row) else "completion_untrained"

    def pair_reasons(self, kept: list[bool]) -> list[str | None]:
        pairs = [pair_of(meta) for meta in self.meta]
        reasons: list[str | None] = [None] * len(pairs)
        for start, end in group_runs(pairs):
            live = [row for row in range(start, end) if kept[row]]
            if not live:
                continue
            reason = self._pair_reason(live) if pairs[start] is not None else "not_a_pair"
            for row in live:
                reasons[row] = reason
        return reasons

    def _pair_reason(self, rows: list[int]) -> str | None:
        if len(rows) != 2 or {side_of(self.meta[row]) for row in rows} != {"chosen", "rejected"}:
            return "pair_incomplete"
        first, second = rows
        if not (self.trains(first) and self.trains(second)):
            return "pair_side_untrained"
        if not np.array_equal(self._prompt(first), self._prompt(second)):
            return "pair_prompts_differ"
        if np.array_equal(self._answer(first), self._answer(second)):
            return "pair_sides_identical"
        return None


def _flat(column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """A list column's row offsets and its values, as numpy (a null row is empty)."""
    lists = pc.fill_null(column, pa.scalar([], column.type)).combine_chunks()
    offsets = lists.offsets.to_numpy().astype(np.int64)
    return offsets - offsets[0], lists.values.slice(int(offsets[0])).to_numpy(zero_copy_only=False)
