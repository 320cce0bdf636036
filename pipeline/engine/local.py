"""The local engine: parts run in worker processes on this machine (or in this process
with one worker), each into the work directory (pipeline/engine/workdir.py)."""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from pipeline.engine.threads import share_cores, worker_threads
from pipeline.engine.workdir import (
    Part,
    Process,
    UnitFailed,
    hold_workers_lock,
    run_unit,
    workers_lock,
)

START_METHOD = "fork" if sys.platform.startswith("linux") else "spawn"
"""On Linux, workers are forked: they inherit the imports and whatever `prepare_workers`
loaded (a tokenizer takes a second to load, in every worker otherwise), and the engine
forks them before it starts any thread of its own. The parent's other threads (a progress
bar) are not used by workers. Elsewhere (macOS, where forking is unsafe) workers are
spawned as fresh interpreters."""
_PR_SET_PDEATHSIG = 1


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
        prepare_workers: Callable[[], None] | None = None,
    ) -> Iterator[Part]:
        """Run the parts, yielding each as it is DONE; raise UnitFailed after the pool
        drains. Closing the iterator early cancels the parts not yet started."""
        if self.workers <= 1 or len(pending) <= 1:
            with workers_lock(workdir):
                for unit in pending:
                    try:
                        run_unit(process, unit, workdir)
                    except Exception as err:
                        raise UnitFailed(unit, err) from err
                    yield unit
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
                pool.submit(run_unit, process, unit, workdir): unit for unit in pending
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
            unit, error = min(failures, key=lambda failure: failure[0].id)
            raise UnitFailed(unit, error, len(failures) - 1) from error


def _start_worker(parent: int, workdir: str, threads: int) -> None:
    """In each worker: die with the parent (a killed run must not leave workers that go
    on writing), hold the shared workers lock until exiting, and use its share of the
    cores in native thread pools."""
    share_cores(threads)
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
    if os.getppid() != parent:
        os._exit(1)
    hold_workers_lock(Path(workdir))
