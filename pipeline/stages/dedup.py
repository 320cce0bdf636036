"""The dedup stage, configured by the `dedup` slice: dataset-wide exact dedup on the content
key (pipeline.stages.sample) and, with `near`, MinHash near-duplicates, in plan order."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import orjson
import pyarrow as pa

from pipeline.config_slice import ConfigSlice
from pipeline.dedup import (
    NearDedupSettings,
    NearDuplicateIndex,
    group_content_key,
    group_signature,
    thread_signature,
)
from pipeline.dedup.first_seen import CompactTexts, FirstSeen
from pipeline.mms.groups import group_runs
from pipeline.stages.contract import Batch, Stage, repeated_column, resolved_column
from pipeline.stages.sample import CONTENT_KEY, THREAD_GROUP

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


CONFIG = ConfigSlice(
    "dedup", DedupSettings, read=lambda raw, reader: DedupSettings.from_config(raw)
)


class Dedup(Stage):
    """Tags each thread with its MinHash signature (when near dedup is on); drops a thread
    whose key an earlier kept thread had (`duplicate`) or that is near one
    (`near_duplicate`). Its keys are the content key and, with near dedup, the LSH band
    keys of the signature: two threads can be (near) duplicates only if they share one.
    A group (a preference pair, pipeline/mms/groups.py) is compared as one unit with other
    units: its members' keys combined, its signature that of their texts together."""

    name = "dedup"
    columns: ClassVar[tuple[pa.Field, ...]] = (pa.field(NEAR_SIGNATURE, pa.binary()),)
    partition_columns: ClassVar[tuple[str, ...]] = (CONTENT_KEY, NEAR_SIGNATURE, THREAD_GROUP)

    def __init__(self, settings: DedupSettings):
        self.settings = settings
        self.seen = FirstSeen()
        """Every kept content key, with the number in `seen_ids` of the id of the thread
        (or group) that has it."""
        self.seen_ids = CompactTexts()
        self.near = NearDuplicateIndex(settings.near) if settings.near is not None else None
        self.near_ids: list[str | None] = []
        """The id of each thread (or group) the near index holds, by its ordinal."""
        self.details: dict[int, dict[str, Any]] = {}
        self.resolved: list[tuple[str, str | None] | None] = []
        """Per row of the last `decide`: what the state told (`resolutions`)."""

    def map(self, batch: Batch) -> Batch:
        near = self.settings.near
        signatures = [thread_signature(t, near) for t in batch.threads] if near else None
        batch.columns[NEAR_SIGNATURE] = pa.array(
            signatures if signatures is not None else [None] * len(batch.threads), pa.binary()
        )
        return batch

    def partition_keys(self, rows: pa.Table) -> pa.Table:
        """The keys of every thread alone and of every group (on its first row: a group's
        threads share one decision, and never count as each other's copies)."""
        row_ids: list[int] = []
        keys: list[bytes] = []
        for start, _, key, signature in self._units(rows):
            if self.settings.enabled:
                row_ids.append(start)
                keys.append(b"k" + key.to_bytes(8, "little"))
            if self.near is not None and signature is not None:
                for band, band_key in enumerate(self.near.band_keys(signature)):
                    row_ids.append(start)
                    keys.append(b"b" + band.to_bytes(2, "big") + band_key)
        return pa.table({"row": pa.array(row_ids, pa.int64()), "key": pa.array(keys, pa.binary())})

    def decide(self, rows: pa.Table, kept: list[bool]) -> list[str | None]:
        """A thread alone, or a whole group, that repeats (or is near) an earlier kept one
        is dropped; `drop_details` names the thread it repeats."""
        column = repeated_column(self.name)
        repeated = rows[column].to_pylist() if column in rows.column_names else None
        column = resolved_column(self.name)
        resolved = rows[column].to_pylist() if column in rows.column_names else None
        ids = rows["id"].to_pylist() if "id" in rows.column_names else [None] * rows.num_rows
        reasons: list[str | None] = [None] * rows.num_rows
        self.details = {}
        self.resolved = [None] * rows.num_rows
        units = self._units(rows)
        if self.settings.enabled and resolved is None:
            self.seen.prefetch(unit[2] for unit in units)
        for start, end, key, signature in units:
            if not any(kept[start:end]) or (repeated is not None and not repeated[start]):
                continue
            if resolved is not None:
                told = resolved[start]
                found = tuple(orjson.loads(told)) if told is not None else None
            else:
                found = self._reason(key, signature, ids[start])
                self.resolved[start] = found
            if found is None:
                continue
            reason, original = found
            for row in range(start, end):
                if kept[row]:
                    reasons[row] = reason
                    self.details[row] = {"duplicate_of": original}
        return reasons

    def drop_details(self) -> dict[int, dict[str, Any]]:
        return self.details

    def resolutions(self) -> list[Any]:
        """Per row: [reason, the id it repeats] where a unit starts that was dropped."""
        return [list(found) if found is not None else None for found in self.resolved]

    def _units(self, rows: pa.Table) -> list[tuple[int, int, int, bytes | None]]:
        """(first row, end row, content key, near signature) of every thread alone and every
        group of consecutive rows (a pair's sides: their keys and signatures combined)."""
        keys = rows[CONTENT_KEY].to_pylist()
        signatures = rows[NEAR_SIGNATURE].to_pylist()
        groups = (
            rows[THREAD_GROUP].to_pylist()
            if THREAD_GROUP in rows.column_names
            else [None] * rows.num_rows
        )
        units = []
        for start, end in group_runs(groups):
            if end - start == 1:
                units.append((start, end, keys[start], signatures[start]))
                continue
            members = signatures[start:end]
            signature = None if None in members else group_signature(members)
            units.append((start, end, group_content_key(keys[start:end]), signature))
        return units

    def _reason(
        self, key: int, signature: bytes | None, thread_id: str | None
    ) -> tuple[str, str | None] | None:
        """Why the thread (or group) whose first id is `thread_id` is dropped, with the id of
        the one it repeats; None: it is kept, and remembered."""
        if self.settings.enabled:
            earlier = self.seen.get(key)
            if earlier is not None:
                return "duplicate", self.seen_ids.get(earlier)
            self.seen.add(key, self.seen_ids.add(thread_id))
        near = self.near
        if near is not None and signature is not None:
            match = near.check(signature)
            if match is not None:
                return "near_duplicate", self.near_ids[match]
            self.near_ids.append(thread_id)
        return None
