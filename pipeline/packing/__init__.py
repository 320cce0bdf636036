"""Packing (DESIGN §7): which rows share a sequence of at most `seq_len` tokens
(best_fit.py), and the packed rows built from them (rows.py). Used by the pack stage of a
run and `mms pack`, and by the trainer's loader packing on the fly."""

from pipeline.packing.best_fit import (
    STRATEGIES,
    WINDOW,
    BestFitPacker,
    OverlongRowError,
    PackingStats,
    pack_rows,
)
from pipeline.packing.rows import (
    PACKED_SCHEMA,
    SEQUENCES_PER_SHARD,
    TOKEN_COLUMNS,
    packed_columns,
    packed_table,
)

__all__ = [
    "PACKED_SCHEMA",
    "SEQUENCES_PER_SHARD",
    "STRATEGIES",
    "TOKEN_COLUMNS",
    "WINDOW",
    "BestFitPacker",
    "OverlongRowError",
    "PackingStats",
    "pack_rows",
    "packed_columns",
    "packed_table",
]
