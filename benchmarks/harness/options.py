"""The options and the work folder the scripts share."""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness import DEFAULT_REALDATA, DEFAULT_TOKENIZER, REPO_ROOT


def add_data(parser: argparse.ArgumentParser, *, tokenizer: bool = True) -> None:
    """--realdata (the real files' folder) and --tokenizer (the base tokenizer)."""
    parser.add_argument(
        "--realdata", type=Path, default=DEFAULT_REALDATA, help="the real files' folder"
    )
    if tokenizer:
        parser.add_argument(
            "--tokenizer", type=Path, default=DEFAULT_TOKENIZER, help="the base tokenizer"
        )


def add_run(parser: argparse.ArgumentParser, *, repeat: int, workdir: str = "--workdir") -> None:
    """--repeat (runs of each job, the fastest kept), the work folder and --json."""
    parser.add_argument(
        "--repeat", type=int, default=repeat, help="runs of each job, alternating; fastest kept"
    )
    parser.add_argument(
        workdir, type=Path, default=None, help="build (and keep) the files here, not in a temp dir"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")


def make_workdir(workdir: Path | None) -> tuple[Path, bool]:
    """The work folder and whether this run created it (and may delete it whole)."""
    if workdir is None:
        return Path(tempfile.mkdtemp(prefix="mms-bench-")), True
    workdir = workdir.resolve()
    if workdir == REPO_ROOT or REPO_ROOT in workdir.parents:
        sys.exit(f"the work folder must be outside the repository ({REPO_ROOT})")
    created = not workdir.exists()
    workdir.mkdir(parents=True, exist_ok=True)
    return workdir, created


@contextlib.contextmanager
def work_folder(workdir: Path | None) -> Iterator[Path]:
    """A temporary work folder, deleted afterwards; or `workdir`, kept."""
    folder, created = make_workdir(workdir)
    try:
        yield folder
    finally:
        if workdir is None and created:
            shutil.rmtree(folder, ignore_errors=True)
        else:
            print(f"kept the files in {folder}")


def write_json(path: Path | None, figures: Any) -> None:
    """The figures as JSON at `path`, when one is given."""
    if path is not None:
        path.write_text(json.dumps(figures, indent=2, default=str) + "\n")


def fail(problems: list[str]) -> int:
    """Print each problem as `FAIL: ...`; the exit status."""
    for problem in problems:
        print(f"FAIL: {problem}", file=sys.stderr)
    return 1 if problems else 0
