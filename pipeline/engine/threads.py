"""Native thread pools in worker processes: each worker gets its share of the cores, so N
workers do not each start a pool as wide as the machine (the `tokenizers` encoder's Rayon
pool would otherwise run N times as many threads as there are cores)."""

from __future__ import annotations

import os

POOL_SIZE_VARIABLES = ("RAYON_NUM_THREADS", "POLARS_MAX_THREADS")
"""Read by the Rust libraries when their pool starts (on first use in the process)."""


def worker_threads(workers: int, cpus: int | None = None) -> int:
    """The threads each of `workers` processes should use on `cpus` cores (at least one)."""
    return max(1, (cpus or os.cpu_count() or 1) // max(1, workers))


def share_cores(threads: int) -> None:
    """Size this process's native pools to `threads`, unless the user sized them."""
    for name in POOL_SIZE_VARIABLES:
        os.environ.setdefault(name, str(threads))
