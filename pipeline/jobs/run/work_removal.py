"""The work directory of a finished run, and the folders of a phase it is done with (one
entry per part), removed on the run's engine: they hold a copy of the data, and deleting
them grows with the parts and the bytes, so on an engine whose workers are apart the
workers delete them, a task per run of entries, and the run's process removes only what is
left (a few files and empty folders)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from pipeline.engine import Runner, workers_apart
from pipeline.engine.workdir import PARTS_DIR

TASK_FOLDERS = 64
"""How many part folders one task deletes at most."""


@dataclass(frozen=True)
class RemoveFolders:
    """One task: delete each of its folders or files (picklable, for any engine); how
    many."""

    paths: tuple[str, ...]

    def __call__(self) -> int:
        for path in self.paths:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                with suppress(FileNotFoundError):
                    os.unlink(path)
        return len(self.paths)


def remove_on(runner: Runner, folders: Sequence[Path]) -> None:
    """Remove `folders` (each may be missing): on an engine whose workers are apart, what
    each holds is deleted by the workers, a task per TASK_FOLDERS entries (a folder of a
    part each, or a file), so the run's process deletes nothing per part; then the rest
    here."""
    if workers_apart(runner):
        entries = sorted(
            str(entry) for folder in folders if folder.is_dir() for entry in folder.iterdir()
        )
        tasks = [
            RemoveFolders(tuple(entries[start : start + TASK_FOLDERS]))
            for start in range(0, len(entries), TASK_FOLDERS)
        ]
        if tasks:
            with suppress(Exception):  # what failed is deleted below
                runner.map_tasks(tasks)
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)  # what the tasks left, or all of it


def engine_removal(runner: Runner) -> Callable[[Path], None]:
    """A remover of a renamed work directory (`OutputFolder.finish`) that deletes its part
    folders on `runner`'s workers when they are apart (in this process otherwise), then
    the rest here."""

    def remove(folder: Path) -> None:
        remove_on(runner, [folder / PARTS_DIR])
        shutil.rmtree(folder, ignore_errors=True)  # what the tasks left, or all of it

    return remove
