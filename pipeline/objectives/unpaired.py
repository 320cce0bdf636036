"""Unpaired preference rows: one per completion with its label (KTO, BCO). A KTO thread
(`meta.preference` desirable / undesirable) gives one row; each side of a pair gives one
too, chosen as desirable and rejected as not (as TRL unpairs a paired set). `prompt_ids`,
`completion_ids` and `label` are the columns TRL's KTO collator reads (TRL 1.16).

    SFT row  k1 (desirable)  [p p g g | c e]   prompt_tokens 4
    row      k1              prompt_ids [p p g g], completion_ids [c e], label true"""

from __future__ import annotations

import pyarrow as pa

from pipeline.mms import MESSAGE_ARROW_TYPE
from pipeline.objectives.lists import head, tail
from pipeline.objectives.media import thread_media, with_row_media
from pipeline.objectives.sides import GOOD, SETTINGS_TYPE, TOKEN_LIST, metas, without_side
from pipeline.tokenize.tables import PROMPT_MESSAGES, PROMPT_TOKENS

UNPAIRED_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("prompt", pa.list_(MESSAGE_ARROW_TYPE)),
        ("completion", pa.list_(MESSAGE_ARROW_TYPE)),
        ("label", pa.bool_()),
        ("prompt_ids", TOKEN_LIST),
        ("completion_ids", TOKEN_LIST),
        ("completion_labels", TOKEN_LIST),
        ("num_prompt_tokens", pa.int32()),
        ("num_completion_tokens", pa.int32()),
        ("settings", SETTINGS_TYPE),
        ("meta", pa.string()),
    ]
)
"""A completion's row: `label` true for a desirable (or chosen) one."""


def unpaired_rows(rows: pa.Table) -> pa.Table:
    """One row per row of `rows` (each with a preference side), with its media columns
    when `rows` have them."""
    parsed = metas(rows)
    cut = rows[PROMPT_TOKENS].to_numpy()
    turn = rows[PROMPT_MESSAGES].to_numpy()
    columns = {
        "id": rows["id"],
        "prompt": head(rows["messages"], turn),
        "completion": tail(rows["messages"], turn),
        "label": pa.array([meta.get("preference") in GOOD for meta in parsed], pa.bool_()),
        "prompt_ids": head(rows["input_ids"], cut),
        "completion_ids": tail(rows["input_ids"], cut),
        "completion_labels": tail(rows["labels"], cut),
        "num_prompt_tokens": pa.array(cut, pa.int32()),
        "num_completion_tokens": pa.array(rows["num_tokens"].to_numpy() - cut, pa.int32()),
        "settings": rows["settings"],
        "meta": pa.array([without_side(meta) for meta in parsed], pa.string()),
    }
    return with_row_media(pa.table(columns, schema=UNPAIRED_SCHEMA), thread_media(rows))
