"""The local engine: parts run in worker processes on this machine (or in this process
with one worker), each into the work directory (pipeline/engine/workdir.py)."""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Generator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pipeline.engine.threads import share_cores, worker_threads
from pipeline.engine.workdir import (
    Part,
    PartFailed,
    Process,
    hold_workers_lock,
    run_part,
    workers_lock,
)

START_METHOD = "fork" if sys.platform.startswith("linux") else "spawn"
"""On Linux, workers are forked: they inherit the imports and whatever `prepare_workers`
loaded (a tokenizer takes a second to load, in every worker otherwise), and the engine
forks them before it starts any thread of its own. The parent's other threads (a progress
bar) are not used by workers. Elsewhere (macOS, where forking is unsafe) workers are
spawned as fresh interpreters."""
FORK_UNSAFE = ("polars",)
"""Libraries whose thread pool does not survive a fork of a process that started it: when
one is loaded here, `map_tasks` workers start from a fresh fork server (its tasks use polars
for the shards' stats), else they are forked as the parts' workers are."""
TASK_PRELOAD = ["pipeline.jobs.run.shard_tasks", "pipeline.jobs.stats.compute"]
"""What the fork server imports once, so each task's worker starts with it."""
HERE_ROWS = 5_000
"""Tasks that say how many rows they take (`rows`, as a shard task does) and take this many
or fewer in all run in this process whatever the workers: starting workers would cost
more than the work, which is bounded, so the process that plans still does nothing that
grows with the data."""
_PR_SET_PDEATHSIG = 1
T = TypeVar("T")


@dataclass(frozen=True)
class LocalRunner:
    """Runs parts in `workers` processes (in this process with one)."""

    workers: int = 1
    name = "local"

    def __enter__(self) -> LocalRunner:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def run(
        self,
        pending: list[Part],
        process: Process,
        workdir: Path,
        prepare_workers: Callable[[], object] | None = None,
    ) -> Generator[Part, None, None]:
        """Run the parts, yielding each as it is DONE; raise PartFailed after the pool
        drains. Closing the iterator early cancels the parts not yet started."""
        if self.workers <= 1 or len(pending) <= 1:
            with workers_lock(workdir):
                for part in pending:
                    try:
                        run_part(process, part, workdir)
                    except Exception as err:
                        raise PartFailed(part, err) from err
                    yield part
            return
        failures: list[tuple[Part, BaseException]] = []
        if prepare_workers is not None:
            prepare_workers()
        context = multiprocessing.get_context(START_METHOD)
        workers = min(self.workers, len(pending))
        pool = ProcessPoolExecutor(
            workers,
            mp_context=context,
            initializer=_start_worker,
            initargs=(os.getpid(), str(workdir), worker_threads(workers)),
        )
        try:
            futures: dict[Future[None], Part] = {
                pool.submit(run_part, process, part, workdir): part for part in pending
            }
            for future in as_completed(futures):
                if future.cancelled():
                    continue
                error = future.exception()
                if error is None:
                    yield futures[future]
                    continue
                if not failures:
                    for other in futures:
                        other.cancel()
                failures.append((futures[future], error))
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        if failures:
            part, error = min(failures, key=lambda failure: failure[0].id)
            raise PartFailed(part, error, len(failures) - 1) from error

    def map_tasks(
        self, tasks: Sequence[Callable[[], T]], done: Callable[[int], None] | None = None
    ) -> list[T]:
        """Every task's result, in the tasks' order: run in `workers` processes (in this one
        with one worker; a single task too runs in a worker, so the process that plans
        does no work that grows with the data, unless the tasks are small: HERE_ROWS);
        `done(count)` after each finishes. The first failure (in task order) is raised
        once every task has run."""
        if self.workers <= 1 or not tasks or _small(tasks):
            results = []
            for task in tasks:
                results.append(task())
                if done is not None:
                    done(len(results))
            return results
        context = multiprocessing.get_context(_task_start_method())
        if context.get_start_method() == "forkserver":
            context.set_forkserver_preload(TASK_PRELOAD)
        workers = min(self.workers, len(tasks))
        with ProcessPoolExecutor(
            workers,
            mp_context=context,
            initializer=_start_task_worker,
            initargs=(worker_threads(workers),),
        ) as pool:
            futures = [pool.submit(task) for task in tasks]
            for finished, _ in enumerate(as_completed(futures), 1):
                if done is not None:
                    done(finished)
            return [future.result() for future in futures]


def _small(tasks: Sequence[object]) -> bool:
    """Whether every task says how many rows it takes, and they take HERE_ROWS or fewer."""
    total = 0
    for task in tasks:
        rows = getattr(task, "rows", None)
        if not isinstance(rows, int):
            return False
        total += rows
    return total <= HERE_ROWS


def _task_start_method() -> str:
    """How `map_tasks` starts its workers: forked (START_METHOD), or from a fork server
    when a library in FORK_UNSAFE is loaded in this process (an earlier run's stats, or the
    caller's own use of it)."""
    if START_METHOD == "fork" and any(name in sys.modules for name in FORK_UNSAFE):
        return "forkserver"
    return START_METHOD


def _start_task_worker(threads: int) -> None:
    """In each worker: its share of the cores in native thread pools, and what it prints
    (a plugin's `print`, C code's writes to file descriptor 1) sent to standard error: a
    worker never writes data to standard output, and the command's data or summary there
    must stay whole."""
    share_cores(threads)
    sys.stdout.flush()
    os.dup2(2, 1)
    sys.stdout = sys.stderr


def _start_worker(parent: int, workdir: str, threads: int) -> None:
    """In each worker: die with the parent (a killed run must not leave workers that go
    on writing), hold the shared workers lock until exiting, and use its share of the
    cores in native thread pools."""
    _start_task_worker(threads)
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
    if os.getppid() != parent:
        os._exit(1)
    hold_workers_lock(Path(workdir))
