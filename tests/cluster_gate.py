"""Test helper: a plugin that holds back the threads of some files until a gate file exists,
so a cluster test can lose a node while parts are certainly still running, however fast
the others go (tests/test_engine_ray_cluster.py). It keeps every thread."""

from __future__ import annotations

import os
import time
from typing import Any

POLL_SECONDS = 0.02


def hold_until_open(thread: Any, gate: str, held: list[str]) -> None:
    """Wait while `gate` does not exist if the thread comes from a file named in `held`."""
    source = str(thread.meta.get("source") or "")
    if any(name in source for name in held):
        while not os.path.exists(gate):
            time.sleep(POLL_SECONDS)
