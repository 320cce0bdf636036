"""A work directory kept on an object store (an output at `s3://...` keeps its work at
`s3://.../.work/`), so that a stopped run resumes from any machine.

The run itself works in a local work directory (pipeline/engine/workdir.py: locks, the plan,
`parts/ID/` published by rename); the store holds its durable copy, in the same layout:
- `plan.json`, uploaded once the run holds the work directory (its plan checked);
- `parts/ID/...`, every file of a finished part, uploaded by the worker that ran it, then
  `parts/ID/DONE` last: a part without its DONE on the store is not finished, and one
  whose files are not as its DONE records them (damaged on the store) is run again.
A run starting on an empty local work directory first fetches the plan and every finished
part from the store (`fetch_work`); the local plan check then refuses a store planned for
other parts, config or inputs, as it does locally."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline import storage
from pipeline.engine.workdir import (
    DONE_FILE,
    PARTS_DIR,
    PLAN_FILE,
    Part,
    Process,
    done_record,
)

RETRIES_FILE = "storage_retries"
"""In a part's local directory: `PID COUNT`, the store operations the process that ran the
part retried while running it (written only when there were some; never uploaded)."""


@dataclass(frozen=True)
class MirroredProcess:
    """A part's process function that counts the store operations it retried and, given a
    `work_url`, copies the finished part to the store's work directory, its DONE marker
    last (picklable: workers are sent it)."""

    process: Process
    work_url: str | None = None

    def __call__(self, part: Any, directory: Path) -> None:
        before = storage.retry_count()
        self.process(part, directory)
        if self.work_url is not None:
            target = storage.join(self.work_url, PARTS_DIR, part.id)
            storage.upload_tree(directory, target, last=lambda _: False)
            marker = done_record(part.id, directory).encode()
            storage.write_bytes(storage.join(target, DONE_FILE), marker)
        made = storage.retry_count() - before
        if made:
            (directory / RETRIES_FILE).write_text(f"{os.getpid()} {made}\n", encoding="utf-8")


def worker_retries(part_dirs: Iterable[Path]) -> int:
    """The retries the parts in `part_dirs` recorded in other processes than this one (this
    process counts its own: pipeline.storage.retry_count)."""
    total = 0
    for directory in part_dirs:
        try:
            pid, count = (directory / RETRIES_FILE).read_text(encoding="utf-8").split()
        except (OSError, ValueError):
            continue
        if int(pid) != os.getpid():
            total += int(count)
    return total


def fetch_work(work_url: str, workdir: Path, parts: Sequence[Part]) -> int:
    """Copy the plan and the finished parts (those with their DONE) of the store's work
    directory into the local `workdir`; returns how many parts were finished there."""
    workdir.mkdir(parents=True, exist_ok=True)
    plan = storage.join(work_url, PLAN_FILE)
    if storage.isfile(plan):
        storage.download(plan, workdir / PLAN_FILE)
    prefix = storage.join(work_url, PARTS_DIR)
    by_part: dict[str, list[str]] = {}
    for url in storage.find(prefix):
        part_id, _, relative = storage.relative(url, prefix).partition("/")
        by_part.setdefault(part_id, []).append(relative)
    fetched = 0
    for part in parts:
        files = by_part.get(part.id, [])
        if DONE_FILE not in files:
            continue
        local = workdir / PARTS_DIR / part.id
        for relative in sorted(files, key=lambda name: name == DONE_FILE):  # DONE last
            storage.download(storage.join(prefix, part.id, relative), local / relative)
        fetched += 1
    return fetched


def upload_plan(work_url: str, workdir: Path) -> None:
    """Copy the local plan to the store (once the run holds the work directory)."""
    storage.upload(workdir / PLAN_FILE, storage.join(work_url, PLAN_FILE))


def reset_stored_work(work_url: str) -> None:
    """Forget the store's plan and finished parts (`--fresh`)."""
    storage.remove(storage.join(work_url, PLAN_FILE))
    storage.remove_tree(storage.join(work_url, PARTS_DIR))
