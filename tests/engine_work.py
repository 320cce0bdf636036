"""Test helpers: per-part process functions for the local engine, importable by its
worker processes. They read a part's records, convert them to MMS threads as `pipeline.read`
does, and write threads and rejections as JSON Lines."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from pipeline.quarantine import Rejection, rejection_line
from pipeline.sources.parts import InputPart, iter_part_records
from pipeline.stages.normalize import read_items


def convert_part(
    part: InputPart,
    part_dir: Path,
    *,
    log: str | None = None,
    delay: float = 0.0,
    fail: str | None = None,
) -> None:
    """Write the part's threads to `threads.jsonl` and its rejections to `rejected.jsonl`;
    append the part id to `log` (counting calls), sleep `delay` seconds first, and raise
    for the part whose id is `fail`."""
    if log is not None:
        with open(log, "a", encoding="utf-8") as out:
            out.write(part.id + "\n")
    time.sleep(delay)
    if part.id == fail:
        raise ValueError(f"refusing part {part.id}")
    rejected: list[Rejection] = []
    items = iter_part_records(part)
    threads = read_items(part.path, items, format=part.format, on_reject=rejected.append)
    with open(part_dir / "threads.jsonl", "wb") as out:
        for thread in threads:
            out.write(thread.to_json_line())
    with open(part_dir / "rejected.jsonl", "wb") as out:
        out.writelines(rejection_line(rejection) for rejection in rejected)


def note_prepared(log: str) -> None:
    """A `prepare_workers`: append this process's id to `log` (counting preparations)."""
    with open(log, "a", encoding="utf-8") as out:
        out.write(f"{os.getpid()}\n")


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every file under `root` by relative path, for byte-for-byte comparison."""
    return {
        Path(directory, name).relative_to(root).as_posix(): Path(directory, name).read_bytes()
        for directory, _, files in os.walk(root)
        for name in files
    }


def record_pool_sizes(part: InputPart, part_dir: Path) -> None:
    """Write what the worker's native thread pools are sized to (`pool_sizes.txt`)."""
    sizes = [os.environ.get(name, "") for name in ("RAYON_NUM_THREADS", "POLARS_MAX_THREADS")]
    (part_dir / "pool_sizes.txt").write_text(" ".join(sizes))


def numbered_task(log: str, number: int, fail: tuple[int, ...] = ()) -> int:
    """A task of `map_tasks`: note `number` in `log` (one line each), raise if it is in
    `fail`, else return its square."""
    with open(log, "a", encoding="utf-8") as out:
        out.write(f"{number}\n")
    if number in fail:
        raise ValueError(f"task {number} refuses")
    return number * number


@dataclass(frozen=True)
class PidTask:
    """A task of `map_tasks` that says how many rows it takes (None: says nothing) and
    returns the id of the process that ran it."""

    declared: int | None

    @property
    def rows(self) -> int | None:
        return self.declared

    def __call__(self) -> int:
        return os.getpid()
