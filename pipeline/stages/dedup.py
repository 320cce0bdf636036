"""The dedup stage, configured by the `dedup` slice: dataset-wide exact dedup on the content
key (pipeline.stages.sample) and, with `near`, MinHash near-duplicates, in plan order."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import pyarrow as pa

from pipeline.dedup import NearDedupSettings, NearDuplicateIndex, thread_signature
from pipeline.stages.contract import Batch, Stage, repeated_column
from pipeline.stages.sample import CONTENT_KEY

NEAR_SIGNATURE = "near_signature"


@dataclass(frozen=True, slots=True)
class DedupSettings:
    """Exact dedup on the content key (`enabled`), near-duplicates by MinHash when `near`
    is set."""

    enabled: bool = True
    near: NearDedupSettings | None = None

    @classmethod
    def from_config(cls, raw: dict[str, Any]) -> DedupSettings:
        """The settings from their (schema-checked) config slice: `near: true` takes the
        defaults, `near: {...}` overrides them."""
        near = raw.get("near", False)
        if near is True:
            near = {}
        settings = NearDedupSettings(**near) if isinstance(near, dict) else None
        return cls(enabled=raw.get("enabled", True), near=settings)


class Dedup(Stage):
    """Tags each thread with its MinHash signature (when near dedup is on); drops a thread
    whose key an earlier kept thread had (`duplicate`) or that is near one
    (`near_duplicate`). Its keys are the content key and, with near dedup, the LSH band
    keys of the signature: two threads can be (near) duplicates only if they share one."""

    name = "dedup"
    columns: ClassVar[tuple[pa.Field, ...]] = (pa.field(NEAR_SIGNATURE, pa.binary()),)
    partition_columns: ClassVar[tuple[str, ...]] = (CONTENT_KEY, NEAR_SIGNATURE)

    def __init__(self, settings: DedupSettings):
        self.settings = settings
        self.seen: set[int] = set()
        self.near = NearDuplicateIndex(settings.near) if settings.near is not None else None

    def map(self, batch: Batch) -> Batch:
        near = self.settings.near
        signatures = [thread_signature(t, near) for t in batch.threads] if near else None
        batch.columns[NEAR_SIGNATURE] = pa.array(
            signatures if signatures is not None else [None] * len(batch.threads), pa.binary()
        )
        return batch

    def partition_keys(self, rows: pa.Table) -> pa.Table:
        row_ids: list[int] = []
        keys: list[bytes] = []
        if self.settings.enabled:
            content = rows[CONTENT_KEY].to_numpy().astype("<u8")
            row_ids.extend(range(rows.num_rows))
            keys.extend(b"k" + key.tobytes() for key in content)
        if self.near is not None:
            for row, signature in enumerate(rows[NEAR_SIGNATURE].to_pylist()):
                if signature is None:
                    continue
                for band, band_key in enumerate(self.near.band_keys(signature)):
                    row_ids.append(row)
                    keys.append(b"b" + band.to_bytes(2, "big") + band_key)
        return pa.table({"row": pa.array(row_ids, pa.int64()), "key": pa.array(keys, pa.binary())})

    def decide(self, rows: pa.Table, kept: list[bool]) -> list[str | None]:
        keys = rows[CONTENT_KEY].to_pylist()
        signatures = rows[NEAR_SIGNATURE].to_pylist()
        column = repeated_column(self.name)
        repeated = rows[column].to_pylist() if column in rows.column_names else None
        return [
            self._reason(key, signatures[row])
            if kept[row] and (repeated is None or repeated[row])
            else None
            for row, key in enumerate(keys)
        ]

    def _reason(self, key: int, signature: bytes | None) -> str | None:
        if self.settings.enabled:
            if key in self.seen:
                return "duplicate"
            self.seen.add(key)
        near = self.near
        if near is not None and signature is not None and near.check(signature) is not None:
            return "near_duplicate"
        return None
