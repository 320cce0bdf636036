"""Which side of a preference a row is, from its thread's meta: `meta.preference` is
`chosen` / `rejected` for the two sides of a pair (`meta.pair_id` names the pair), and
`desirable` / `undesirable` for a KTO completion; every adapter that reads preference
data writes these."""

from __future__ import annotations

from typing import Any

import orjson
import pyarrow as pa

from pipeline.mms import THREAD_ARROW_SCHEMA

SETTINGS_TYPE = THREAD_ARROW_SCHEMA.field("settings").type
GOOD = frozenset({"chosen", "desirable"})
BAD = frozenset({"rejected", "undesirable"})
TOKEN_LIST = pa.list_(pa.int32())
"""Token ids, and labels (-100 where not trained)."""


def metas(rows: pa.Table) -> list[dict[str, Any]]:
    """Each row's meta, parsed."""
    return [orjson.loads(text) if text else {} for text in rows["meta"].to_pylist()]


def without_side(meta: dict[str, Any], **more: Any) -> str:
    """A row's meta for an objective row: its side named by the row, not by meta."""
    kept = {key: value for key, value in meta.items() if key != "preference"}
    return orjson.dumps({**kept, **more}).decode()
