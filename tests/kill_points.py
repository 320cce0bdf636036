"""Test helper: run a command and SIGKILL it at its Nth file-system change while publishing
an output and removing its work directory (pipeline/output/folder.py), for every N in turn.

`python -m tests.kill_points OUT -- ARGS...` imports mms once, then for N = 0, 1, ... forks
a child that runs `mms ARGS...` and kills itself just before its Nth rename, replace,
unlink, rmdir or tree removal (one point for the whole tree) inside publish() or
finish(); the parent waits, runs the
command again in a fresh child (the resume) and prints one JSON line per N:
`{"point": N, "killed": bool, "resumed": exit status, "files": {path: sha256}}`. It stops
after the first N the command reaches the end without being killed."""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import shutil
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipeline.cli import main
from pipeline.output import folder as output_folder

CHANGES = ("replace", "rename", "unlink", "rmdir")


def _kill_at(point: int) -> None:
    """From now on in this process, die by SIGKILL just before the `point`th change made
    inside OutputFolder.publish or OutputFolder.finish."""
    seen = [0]
    inside = [False]

    def counted(change: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not inside[0]:
                return change(*args, **kwargs)
            if seen[0] == point:
                os.kill(os.getpid(), signal.SIGKILL)
            seen[0] += 1
            inside[0] = False  # a tree removal is one point, not one per file in it
            try:
                return change(*args, **kwargs)
            finally:
                inside[0] = True

        return wrapper

    def scoped(method: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            inside[0] = True
            try:
                return method(*args, **kwargs)
            finally:
                inside[0] = False

        return wrapper

    for name in CHANGES:
        setattr(os, name, counted(getattr(os, name)))
    shutil.rmtree = counted(shutil.rmtree)
    folder = output_folder.OutputFolder
    folder.publish = scoped(folder.publish)  # type: ignore[method-assign]
    folder.finish = scoped(folder.finish)  # type: ignore[method-assign]


def _run_in_child(args: list[str], point: int | None) -> int:
    """Run `mms ARGS` in a forked child (killed at `point` if given); its wait status."""
    child = os.fork()
    if child == 0:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        if point is not None:
            _kill_at(point)
        try:
            main.main(args, prog_name="mms", standalone_mode=True)
        except SystemExit as done:
            os._exit(done.code if isinstance(done.code, int) else 1)
        os._exit(0)
    _, status = os.waitpid(child, 0)
    return status


def tree(out: Path) -> dict[str, str]:
    """Every file under `out`, by relative path, with its sha256."""
    return {
        path.relative_to(out).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(out.rglob("*"))
        if path.is_file()
    }


WARM = (
    "pandas",
    "polars",
    "pipeline.jobs.run",
    "pipeline.jobs.stats",
    "pipeline.jobs.verify",
    "pipeline.lint.reports",
    "pipeline.output.stats_html",
    "pipeline.output.stats_markdown",
    "pipeline.stages.tokenize",
)
"""Imported once by the parent, so the forked children do not each import them (no
thread pool is started by importing them, so forking stays safe)."""


def main_loop(out: Path, args: list[str], before: Path | None) -> None:
    for module in WARM:
        importlib.import_module(module)
    point = 0
    while True:
        if before is not None:
            shutil.rmtree(out, ignore_errors=True)
            shutil.copytree(before, out, symlinks=True)
        status = _run_in_child(args, point)
        killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        resumed = os.waitstatus_to_exitcode(_run_in_child(args, None))
        print(
            json.dumps({"point": point, "killed": killed, "resumed": resumed, "files": tree(out)})
        )
        sys.stdout.flush()
        if not killed:
            return
        point += 1


if __name__ == "__main__":
    separator = sys.argv.index("--")
    options = sys.argv[1:separator]
    main_loop(
        Path(options[0]),
        sys.argv[separator + 1 :],
        Path(options[1]) if len(options) > 1 else None,
    )
