"""The sample stage: every thread's content key and split group (what exact dedup, the
MMS501 rule, sampling and the split all hash) and the group it stands or falls with, and
the input's `sample` fraction applied by a stable hash of the split group, so the same
threads are kept whatever the order or workers, and a group is kept or left out whole."""

from __future__ import annotations

from typing import ClassVar

import pyarrow as pa

from pipeline.dedup import content_key, split_group
from pipeline.mms.groups import group_column
from pipeline.stages.contract import Batch, Stage
from pipeline.stages.fractions import stable_fraction

CONTENT_KEY = "content_key"
SPLIT_GROUP = "split_group"
THREAD_GROUP = "thread_group"
"""The group a thread stands or falls with (pipeline/mms/groups.py), null when alone."""


class Sample(Stage):
    """Keys every thread; keeps the threads whose group falls within `fraction`."""

    name = "sample"
    columns: ClassVar[tuple[pa.Field, ...]] = (
        pa.field(CONTENT_KEY, pa.uint64()),
        pa.field(SPLIT_GROUP, pa.string()),
        pa.field(THREAD_GROUP, pa.string()),
    )

    def __init__(self, fraction: float = 1.0):
        self.fraction = fraction

    def map(self, batch: Batch) -> Batch:
        keys = [content_key(thread) for thread in batch.threads]
        groups = [split_group(thread, key) for thread, key in zip(batch.threads, keys, strict=True)]
        batch.columns[CONTENT_KEY] = pa.array(keys, pa.uint64())
        batch.columns[SPLIT_GROUP] = pa.array(groups, pa.string())
        batch.columns[THREAD_GROUP] = pa.array(group_column(batch.threads), pa.string())
        if self.fraction >= 1.0:
            return batch
        return batch.keep(
            [stable_fraction(group) < self.fraction for group in groups], "sampled_out", self.name
        )
