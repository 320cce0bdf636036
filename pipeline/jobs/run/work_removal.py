"""The work directory of a finished run removed on the run's engine: its parts' folders
hold a copy of the data, and deleting them grows with the parts and the bytes, so on an
engine whose workers are apart the workers delete them, a task per run of part folders,
and the run's process removes only what is left (a few files and empty folders)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from pipeline.engine import Runner, workers_apart
from pipeline.engine.workdir import PARTS_DIR

TASK_FOLDERS = 64
"""How many part folders one task deletes at most."""


@dataclass(frozen=True)
class RemoveFolders:
    """One task: delete each of its folders (picklable, for any engine); how many."""

    paths: tuple[str, ...]

    def __call__(self) -> int:
        for path in self.paths:
            shutil.rmtree(path, ignore_errors=True)
        return len(self.paths)


def engine_removal(runner: Runner) -> Callable[[Path], None]:
    """A remover of a renamed work directory (`OutputFolder.finish`) that deletes its part
    folders on `runner`'s workers when they are apart (in this process otherwise), then
    the rest here."""

    def remove(folder: Path) -> None:
        if workers_apart(runner) and (folder / PARTS_DIR).is_dir():
            folders = sorted(str(path) for path in (folder / PARTS_DIR).iterdir())
            tasks = [
                RemoveFolders(tuple(folders[start : start + TASK_FOLDERS]))
                for start in range(0, len(folders), TASK_FOLDERS)
            ]
            with suppress(Exception):  # the output is published: what failed is deleted below
                runner.map_tasks(tasks)
        shutil.rmtree(folder, ignore_errors=True)  # what the tasks left, or all of it

    return remove
