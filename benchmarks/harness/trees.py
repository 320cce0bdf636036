"""Two trees side by side: this tree and a git worktree of another commit, each measured
through the same interpreter and the same benchmark code, the tree chosen by PYTHONPATH.

`side_by_side.py` runs any script this way; a script's headline figures reach it through
`headline` (a JSON file named by $MMS_BENCH_FIGURES)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path

from harness import BENCHMARKS, REPO_ROOT

FIGURES_ENV = "MMS_BENCH_FIGURES"
"""Names the file a script writes its headline figures to (set by side_by_side.py)."""


def measured_tree() -> Path:
    """The tree whose `pipeline` this process imports (found, not imported: a script that
    keeps itself small for its children's RSS stays small)."""
    spec = find_spec("pipeline")
    if spec is None or spec.origin is None:
        return REPO_ROOT
    return Path(spec.origin).resolve().parents[1]


def mms_command() -> list[str]:
    """`mms` as a child process of the measured tree (run it with that tree as its working
    folder: `python -m` puts the working folder first on sys.path)."""
    return [sys.executable, "-m", "pipeline.cli"]


def tree_env(tree: Path, *, benchmarks: bool = False) -> dict[str, str]:
    """This environment with `tree` first on PYTHONPATH (and benchmarks/, for a plugin of
    this folder, when asked)."""
    paths = [str(tree), *([str(BENCHMARKS)] if benchmarks else [])]
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    ours = [p for p in inherited if Path(p).resolve() not in (REPO_ROOT, tree.resolve())]
    return {**os.environ, "PYTHONPATH": os.pathsep.join([*paths, *ours])}


def commit_of(tree: Path) -> str:
    """The tree's commit (short), `+` when it has uncommitted changes."""
    head = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(tree), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return f"{head or '?'}{'+' if dirty else ''}"


@contextlib.contextmanager
def worktree(commit: str) -> Iterator[Path]:
    """A detached git worktree of `commit` in a temporary folder, removed afterwards; a
    folder that is already a checkout is used as it is."""
    if Path(commit).is_dir():
        yield Path(commit).resolve()
        return
    with tempfile.TemporaryDirectory(prefix="mms-bench-tree-") as folder:
        tree = Path(folder) / "tree"
        done = subprocess.run(
            ["git", "worktree", "add", "--detach", str(tree), commit],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise SystemExit(f"cannot check out {commit}: {done.stderr.strip()}")
        try:
            yield tree
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(tree)],
                cwd=REPO_ROOT,
                capture_output=True,
            )


def headline(
    *, lower: dict[str, float] | None = None, higher: dict[str, float] | None = None
) -> None:
    """Hand a script's headline figures to side_by_side.py (nothing when it is not the
    caller): `lower` those where less is better (seconds, MiB), `higher` the others."""
    target = os.environ.get(FIGURES_ENV)
    if target:
        figures = {"lower": lower or {}, "higher": higher or {}}
        Path(target).write_text(json.dumps(figures, indent=2) + "\n")
