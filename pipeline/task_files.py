"""Files a task writes under their final names in a run's work directory: written under a
temporary name of their own and renamed into place once whole, so that a task run twice
(retried, or duplicated by an engine, on any node of a shared file system) writes the
same bytes once and a stopped one leaves no half file under the final name."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def replaced(path: Path) -> Iterator[Path]:
    """The temporary path the block writes (`.NAME.<uuid>.tmp` beside `path`: no other
    writer shares it, pid or node alike), renamed to `path` when the block completes and
    deleted when it fails."""
    temp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        yield temp
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)


def write_replacing(path: Path, data: bytes) -> None:
    """`data` at `path` (its folder made), through `replaced`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with replaced(path) as temp:
        temp.write_bytes(data)
