"""Test helper: run `mms ARGS` and die by SIGKILL at the Nth call of one object-store
operation, as a killed machine would stop there.

`python -m tests.storage_kill WHAT N -- ARGS...`, WHAT one of:
- `publish-upload`: the uploads of a publication (each staged file to its place, and the
  plan of the work directory), pipeline/output/stored.py;
- `part-marker`: the small writes of the work directory (its marker, then each finished
  part's DONE), pipeline/engine/stored_work.py.
A fresh process (not a fork of the test's): libraries with thread pools (polars) cannot
be forked once they have run."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from pipeline import storage
from pipeline.cli import main


def _dying_at(calls: int, original: Callable[..., Any]) -> Callable[..., Any]:
    seen = [0]

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        seen[0] += 1
        if seen[0] == calls:
            os.kill(os.getpid(), signal.SIGKILL)
        return original(*args, **kwargs)

    return wrapper


def main_with_kill(what: str, calls: int, args: list[str]) -> None:
    if what == "publish-upload":
        storage.upload = _dying_at(calls, storage.upload)  # type: ignore[attr-defined]
    elif what == "part-marker":
        storage.write_bytes = _dying_at(calls, storage.write_bytes)  # type: ignore[attr-defined]
    else:
        raise SystemExit(f"unknown kill point {what}")
    main.main(args, prog_name="mms", standalone_mode=True)


if __name__ == "__main__":
    what, calls, separator, *rest = sys.argv[1:]
    assert separator == "--"
    main_with_kill(what, int(calls), rest)
