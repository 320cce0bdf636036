"""What every curation stage shares: a map side that looks at each thread on its own (and
may rewrite it), a column holding the reason its action drops the thread for, the counts
of what it tagged, and a dataset side that drops by that column."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import orjson
import pyarrow as pa

from pipeline.mms import Thread
from pipeline.stages.contract import Batch, Stage

Action = Literal["tag", "drop"]
ACTIONS = ("tag", "drop")


@dataclass(slots=True)
class Finding:
    """What a stage found in one thread: the thread (rewritten, or as it was), the reason
    to drop it (None: keep), what to count under the stage's name, and what the list of
    dropped threads says beside the reason (`details`)."""

    thread: Thread
    reason: str | None = None
    counts: Mapping[str, int] = field(default_factory=dict)
    details: dict[str, Any] | None = None


class Tagger(Stage):
    """A curation stage: `inspect` one thread; the reason column is `{name}_drop`."""

    name: ClassVar[str]

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        if "name" in cls.__dict__:
            cls.columns = (
                pa.field(f"{cls.name}_drop", pa.string()),
                pa.field(f"{cls.name}_details", pa.string()),
            )

    def inspect(self, thread: Thread) -> Finding:
        """What the stage finds in `thread` (the subclass's rule)."""
        raise NotImplementedError

    def inspect_all(self, threads: list[Thread]) -> list[Finding]:
        """What the stage finds in each thread (a stage that works on many texts at once
        overrides this)."""
        return [self.inspect(thread) for thread in threads]

    def map(self, batch: Batch) -> Batch:
        threads: list[Thread] = []
        reasons: list[str | None] = []
        details: list[str | None] = []
        counted: dict[str, int] = {}
        for finding in self.inspect_all(batch.threads):
            threads.append(finding.thread)
            reasons.append(finding.reason)
            said = finding.details if finding.reason is not None else None
            details.append(orjson.dumps(said).decode() if said else None)
            for key, n in finding.counts.items():
                counted[key] = counted.get(key, 0) + n
        batch.tagged.update({f"{self.name}:{key}": n for key, n in counted.items()})
        batch.threads = threads
        batch.columns[self.columns[0].name] = pa.array(reasons, pa.string())
        batch.columns[self.columns[1].name] = pa.array(details, pa.string())
        return batch

    def decide(self, rows: pa.Table, kept: list[bool]) -> list[str | None]:
        column = rows[self.columns[0].name].to_pylist()
        decided = [reason if keep else None for reason, keep in zip(column, kept, strict=True)]
        said = rows[self.columns[1].name].to_pylist()
        self.details = {
            row: orjson.loads(said[row])
            for row, reason in enumerate(decided)
            if reason and said[row]
        }
        return decided

    def drop_details(self) -> dict[int, dict[str, Any]]:
        return getattr(self, "details", {})
