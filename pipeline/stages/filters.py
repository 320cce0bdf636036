"""The filter stages, configured by the `filters` slice: bounds on the message count (as
read, before any truncation) and, once tokenized, on trained and total tokens."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import pyarrow as pa

from pipeline.config_slice import ConfigSlice, SliceReader
from pipeline.stages.contract import Batch, Stage

MESSAGE_COUNT = "message_count"


@dataclass(frozen=True, slots=True)
class FilterSettings:
    """Size filters; the token ones apply after tokenize (None: no limit)."""

    min_messages: int = 1
    max_messages: int | None = None
    min_trained_tokens: int = 1
    max_tokens: int | None = None


def _read(raw: dict[str, Any], reader: SliceReader) -> FilterSettings:
    settings = FilterSettings(**raw)
    if settings.max_messages is not None and settings.max_messages < settings.min_messages:
        reason = (
            f"max_messages {settings.max_messages} is below min_messages {settings.min_messages}"
        )
        raise reader.error(["max_messages"], reason)
    return settings


CONFIG = ConfigSlice("filters", FilterSettings, read=_read)
"""The token limits need a tokenize stage: the run config checks that (the slices agree)."""


class MessageFilter(Stage):
    """Drops threads with fewer than `min_messages` or more than `max_messages` messages."""

    name = "filters"
    columns: ClassVar[tuple[pa.Field, ...]] = (pa.field(MESSAGE_COUNT, pa.int32()),)

    def __init__(self, settings: FilterSettings):
        self.settings = settings

    def map(self, batch: Batch) -> Batch:
        counts = [len(thread.messages) for thread in batch.threads]
        batch.columns[MESSAGE_COUNT] = pa.array(counts, pa.int32())
        return batch

    def decide(self, rows: pa.Table, kept: list[bool]) -> list[str | None]:
        low, high = self.settings.min_messages, self.settings.max_messages
        reasons: list[str | None] = []
        for count, keep in zip(rows[MESSAGE_COUNT].to_pylist(), kept, strict=True):
            if keep and count < low:
                reasons.append("too_few_messages")
            elif keep and high is not None and count > high:
                reasons.append("too_many_messages")
            else:
                reasons.append(None)
        return reasons


class TokenFilter(Stage):
    """Drops tokenized threads with fewer than `min_trained_tokens` trained tokens or more
    than `max_tokens` tokens (a thread the tokenize stage left out has no counts)."""

    name = "token_filters"

    def __init__(self, settings: FilterSettings):
        self.settings = settings

    def decide(self, rows: pa.Table, kept: list[bool]) -> list[str | None]:
        low, high = self.settings.min_trained_tokens, self.settings.max_tokens
        trained, tokens = rows["num_trained"].to_pylist(), rows["num_tokens"].to_pylist()
        reasons: list[str | None] = []
        for row, keep in enumerate(kept):
            if not keep or trained[row] is None or tokens[row] is None:
                reasons.append(None)
            elif trained[row] < low:
                reasons.append("too_few_trained_tokens")
            elif high is not None and tokens[row] > high:
                reasons.append("too_many_tokens")
            else:
                reasons.append(None)
        return reasons
