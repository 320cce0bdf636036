"""The output's files hashed on the run's engine: `mms run` verifies what it published
(pipeline/jobs/verify/), and reading every shard again grows with the data, so the
workers read them, a task per run of files of about TASK_BYTES."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pipeline.engine import Runner, workers_apart
from pipeline.jobs.verify import HashFiles, hash_here
from pipeline.output.files import file_sha256

HASH_HERE_BYTES = 1 << 30
"""Below this many bytes in all, the files are hashed in the run's own process (about half
a second at most): starting tasks would cost more. Not on an engine whose workers are apart
(`workers_apart`): there the run's process is the cluster's one serial step, and its time
must not grow with the data."""
TASK_BYTES = 256 << 20
"""About how many bytes one task hashes (a file is never split between tasks)."""


@dataclass(frozen=True)
class HashTask:
    """One task: the sha256 of each of its files (picklable, for any engine)."""

    paths: tuple[str, ...]

    def __call__(self) -> list[str]:
        return [file_sha256(path) for path in self.paths]


def engine_hashes(runner: Runner) -> HashFiles:
    """A `verify_output` hasher that hashes on `runner`'s workers (in this process when the
    files are small and the workers are not apart)."""

    def hash_files(paths: Sequence[Path]) -> list[str]:
        sizes = [path.stat().st_size for path in paths]
        if not paths:
            return []
        if not workers_apart(runner) and sum(sizes) < HASH_HERE_BYTES:
            return hash_here(paths)
        tasks: list[HashTask] = []
        group: list[str] = []
        held = 0
        for path, size in zip(paths, sizes, strict=True):
            group.append(str(path))
            held += size
            if held >= TASK_BYTES:
                tasks.append(HashTask(tuple(group)))
                group, held = [], 0
        if group:
            tasks.append(HashTask(tuple(group)))
        return [digest for found in runner.map_tasks(tasks) for digest in found]

    return hash_files
