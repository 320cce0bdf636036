"""Preference rows: one per pair (DPO, ORPO, SimPO, IPO). The shared prompt once, each
side's completion with its labels; `prompt_ids`, `chosen_ids` and `rejected_ids` are the
columns TRL's `DataCollatorForPreference` reads (TRL 1.16).

    SFT rows  a:chosen   [p p p g g | c c e]   prompt_tokens 5
              a:rejected [p p p g g | r e]     prompt_tokens 5
    pair row  a          prompt_ids [p p p g g], chosen_ids [c c e], rejected_ids [r e]

(p: the prompt, g: the generation prompt `<|role|>assistant<|format|>`, e: the stop
token). The objective stage has checked that the two sides' prompts are the same tokens."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from pipeline.mms import MESSAGE_ARROW_TYPE
from pipeline.objectives.lists import head, tail, take_rows
from pipeline.objectives.media import pair_media, with_row_media
from pipeline.objectives.sides import SETTINGS_TYPE, TOKEN_LIST, metas, without_side
from pipeline.tokenize.tables import PROMPT_MESSAGES, PROMPT_TOKENS

PREFERENCE_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("prompt", pa.list_(MESSAGE_ARROW_TYPE)),
        ("chosen", pa.list_(MESSAGE_ARROW_TYPE)),
        ("rejected", pa.list_(MESSAGE_ARROW_TYPE)),
        ("prompt_ids", TOKEN_LIST),
        ("chosen_ids", TOKEN_LIST),
        ("rejected_ids", TOKEN_LIST),
        ("chosen_labels", TOKEN_LIST),
        ("rejected_labels", TOKEN_LIST),
        ("num_prompt_tokens", pa.int32()),
        ("num_chosen_tokens", pa.int32()),
        ("num_rejected_tokens", pa.int32()),
        ("settings", SETTINGS_TYPE),
        ("meta", pa.string()),
    ]
)
"""A pair's row: `prompt`/`chosen`/`rejected` are the messages (the prompt's, and each
side's final turn), `*_labels` the completions' labels (the prompt is never trained),
`meta` the chosen thread's with `chosen_id` and `rejected_id`."""


def _pair_row_id(chosen_id: str) -> str:
    """A pair row's id: its chosen thread's without the side (`ID:chosen` -> `ID`, a
    weighted copy `ID:chosen#2` -> `ID#2`), unique as the thread ids are."""
    return chosen_id.replace(":chosen", "", 1)


def preference_rows(rows: pa.Table) -> pa.Table:
    """One row per pair of `rows` (each pair's two rows next to each other), with its
    media columns when `rows` have them (pipeline/objectives/media.py)."""
    parsed = metas(rows)
    chosen, rejected, ids, meta = [], [], [], []
    names = rows["id"].to_pylist()
    for row in range(0, rows.num_rows, 2):
        first = parsed[row]
        good, bad = (row, row + 1) if first.get("preference") == "chosen" else (row + 1, row)
        chosen.append(good)
        rejected.append(bad)
        ids.append(_pair_row_id(names[good]))
        meta.append(without_side(parsed[good], chosen_id=names[good], rejected_id=names[bad]))
    good_rows, bad_rows = np.asarray(chosen, np.int64), np.asarray(rejected, np.int64)
    good_cut = take_rows(rows[PROMPT_TOKENS], good_rows).to_numpy()
    bad_cut = take_rows(rows[PROMPT_TOKENS], bad_rows).to_numpy()
    good_turn = take_rows(rows[PROMPT_MESSAGES], good_rows).to_numpy()
    bad_turn = take_rows(rows[PROMPT_MESSAGES], bad_rows).to_numpy()
    good_ids, bad_ids = (
        take_rows(rows["input_ids"], good_rows),
        take_rows(rows["input_ids"], bad_rows),
    )
    good_labels = take_rows(rows["labels"], good_rows)
    bad_labels = take_rows(rows["labels"], bad_rows)
    good_messages = take_rows(rows["messages"], good_rows)
    columns = {
        "id": pa.array(ids, pa.string()),
        "prompt": head(good_messages, good_turn),
        "chosen": tail(good_messages, good_turn),
        "rejected": tail(take_rows(rows["messages"], bad_rows), bad_turn),
        "prompt_ids": head(good_ids, good_cut),
        "chosen_ids": tail(good_ids, good_cut),
        "rejected_ids": tail(bad_ids, bad_cut),
        "chosen_labels": tail(good_labels, good_cut),
        "rejected_labels": tail(bad_labels, bad_cut),
        "num_prompt_tokens": pa.array(good_cut, pa.int32()),
        "num_chosen_tokens": pa.array(
            take_rows(rows["num_tokens"], good_rows).to_numpy() - good_cut, pa.int32()
        ),
        "num_rejected_tokens": pa.array(
            take_rows(rows["num_tokens"], bad_rows).to_numpy() - bad_cut, pa.int32()
        ),
        "settings": take_rows(rows["settings"], good_rows),
        "meta": pa.array(meta, pa.string()),
    }
    table = pa.table(columns, schema=PREFERENCE_SCHEMA)
    return with_row_media(table, pair_media(rows, good_rows, bad_rows))
