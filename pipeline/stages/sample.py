"""The sample stage: every thread's content key and split group (what exact dedup, the
MMS501 rule, sampling and the split all hash), and the input's `sample` fraction applied by
a stable hash of the group, so the same threads are kept whatever the order or workers."""

from __future__ import annotations

from typing import ClassVar

import pyarrow as pa

from pipeline.dedup import content_key, split_group
from pipeline.stages.contract import Batch, Stage
from pipeline.stages.fractions import stable_fraction

CONTENT_KEY = "content_key"
SPLIT_GROUP = "split_group"


class Sample(Stage):
    """Keys every thread; keeps the threads whose group falls within `fraction`."""

    name = "sample"
    columns: ClassVar[tuple[pa.Field, ...]] = (
        pa.field(CONTENT_KEY, pa.uint64()),
        pa.field(SPLIT_GROUP, pa.string()),
    )

    def __init__(self, fraction: float = 1.0):
        self.fraction = fraction

    def map(self, batch: Batch) -> Batch:
        keys = [content_key(thread) for thread in batch.threads]
        groups = [split_group(thread, key) for thread, key in zip(batch.threads, keys, strict=True)]
        batch.columns[CONTENT_KEY] = pa.array(keys, pa.uint64())
        batch.columns[SPLIT_GROUP] = pa.array(groups, pa.string())
        if self.fraction >= 1.0:
            return batch
        return batch.keep(
            [stable_fraction(group) < self.fraction for group in groups], "sampled_out"
        )
