"""Jobs timed in this process: each run `repeat` times, the jobs alternating (so a change
in the machine's load falls on all of them), the fastest run of each kept with its CPU
time (this process's threads and its reaped workers'); and cProfile rows."""

from __future__ import annotations

import cProfile
import pstats
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import REPO_ROOT
from harness.procs import cpu_seconds


@dataclass(frozen=True, slots=True)
class Timed:
    """A job's fastest run: wall and CPU seconds, every run's wall time, and what the
    job returned (its last run's)."""

    name: str
    seconds: float
    cpu_seconds: float
    all_seconds: tuple[float, ...]
    result: Any

    @property
    def cpu_per_wall(self) -> float:
        return round(self.cpu_seconds / self.seconds, 2) if self.seconds else 0.0


def alternate(jobs: dict[str, Callable[[], Any]], repeat: int) -> dict[str, Timed]:
    """Run every job `repeat` times, alternating; each one's fastest run."""
    wall: dict[str, list[float]] = {name: [] for name in jobs}
    cpu: dict[str, list[float]] = {name: [] for name in jobs}
    results: dict[str, Any] = {}
    for attempt in range(1, repeat + 1):
        for name, job in jobs.items():
            print(f"run {attempt}/{repeat}: {name} ...", flush=True)
            start, start_cpu = time.perf_counter(), cpu_seconds()
            results[name] = job()
            wall[name].append(time.perf_counter() - start)
            cpu[name].append(cpu_seconds() - start_cpu)
    found = {}
    for name in jobs:
        best = min(range(repeat), key=wall[name].__getitem__)
        found[name] = Timed(
            name,
            round(wall[name][best], 3),
            round(cpu[name][best], 3),
            tuple(round(s, 3) for s in wall[name]),
            results[name],
        )
    return found


def where(filename: str, lineno: int) -> str:
    """`path:line`, relative to the repository when inside it."""
    path = Path(filename)
    shown = path.relative_to(REPO_ROOT) if REPO_ROOT in path.parents else Path(*path.parts[-2:])
    return f"{shown}:{lineno}"


def profiled(call: Callable[[], Any], top: int, *, repo_cumulative: bool = False) -> dict[str, Any]:
    """cProfile of `call`: its seconds, the `top` functions by own time and (with
    `repo_cumulative`) the `top` repository functions by cumulative time."""
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.runcall(call)
    seconds = time.perf_counter() - start
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    rows = [
        {
            "where": f"{where(file, line)}({name})" if line else name,
            "calls": calls,
            "own_s": round(own, 3),
            "cumulative_s": round(cumulative, 3),
            "in_repo": str(REPO_ROOT) in file,
        }
        for (file, line, name), (_, calls, own, cumulative, _) in stats.items()
    ]
    found: dict[str, Any] = {
        "seconds": round(seconds, 2),
        "by_own": sorted(rows, key=lambda row: row["own_s"], reverse=True)[:top],
    }
    if repo_cumulative:
        repo = [row for row in rows if row["in_repo"]]
        found["by_cumulative"] = sorted(repo, key=lambda row: row["cumulative_s"], reverse=True)[
            :top
        ]
    return found


def profile_table(title: str, rows: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    """Profile rows as table lines."""
    return [(title, "calls", "own s", "cumulative s")] + [
        (p["where"], f"{p['calls']:,}", f"{p['own_s']:.3f}", f"{p['cumulative_s']:.3f}")
        for p in rows
    ]
