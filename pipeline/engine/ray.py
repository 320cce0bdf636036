"""The Ray engine (the `ray` extra): the same parts, work directory and done-markers as the
local engine, run on a Ray cluster with Ray Data, and Ray tasks for the rest of a run's
parallel work (`map_tasks`: the partition pass of pipeline/engine/keys.py, shard writes).

Ray Data schedules; our guarantees sit on top of it: a part runs in a `map_batches` actor
that loaded what every part needs once (the tokenizer), writes its directory under a
temporary name and publishes it atomically (a retried or duplicated task publishes the same
bytes, once); results are taken in plan order from the work directory, never in Ray's
arrival order, and nothing is written by Ray's own writers. Paths must mean the same on
every node (one machine, or a shared file system).

A lost worker node (its actors, tasks and object store at once) costs only the work in
flight: Ray Data restarts the actor and retries its part (an actor's task retries and
restarts are unbounded), the pool goes on with the nodes left, and a task lost with its
node is run again (tests/test_engine_ray_cluster.py).

Ray's data loss on overwrite (ray-project/ray#55043: every task of a `write_parquet` in
"overwrite" mode cleared the output folder, deleting what other tasks had written) cannot
happen here: we never use Ray's writers or save modes, no task deletes anything or writes a
name another task writes (a part's directory is written under a uuid name and renamed to
the part's own id; any other task's file, a partition file among them, is a name fixed for
that task, replaced atomically with the same bytes), and every clearing (`--fresh`,
`--overwrite`, leftovers, a partition folder, the partition pass's scratch folder) is done
by the driver before the tasks that write there start (docs/DESIGN.md §8)."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa

from pipeline.engine.threads import share_cores
from pipeline.engine.workdir import Part, PartFailed, Process, hold_workers_lock, run_part

T = TypeVar("T")
INSTALL_HINT = "pip install 'mms-pipeline[ray]'"
LOCAL = "local"
"""The address that starts a Ray instance on this machine (as no address does, unless
RAY_ADDRESS names a cluster, as `ray job submit` does)."""
_DATA_SETTINGS = ("enable_progress_bars", "print_on_execution_start")
"""The Ray Data settings a run changes for itself, restored when it ends."""
PART = "part"
"""The column of the map side's items: a part's index in the pending parts."""
TASK_RETRIES = 3
"""How often Ray runs a task again whose worker or node died (`map_tasks`)."""


class RayUnavailable(RuntimeError):
    """Ray is not installed, or the cluster cannot be reached."""


@dataclass(frozen=True, slots=True)
class RaySettings:
    """Where to run: `address` None or `local` starts a Ray instance here (with `num_cpus`
    CPUs, default all), `auto` joins the cluster this machine belongs to, `ray://host:port`
    a remote one; `workers`: the most parts run at once (default: the cluster's CPUs)."""

    address: str | None = None
    num_cpus: int | None = None
    workers: int | None = None


def _ray() -> Any:
    try:
        import ray
        import ray.data
    except ImportError:
        raise RayUnavailable(f"the ray engine needs Ray: {INSTALL_HINT}") from None
    return ray


class RayRunner:
    """Runs parts on Ray (a `Runner` of pipeline/engine/parts.py), and any other tasks.
    Use it as a context manager: it connects on entry, and stops a Ray instance it started
    on exit (a session the process already had is left running)."""

    name = "ray"

    def __init__(self, settings: RaySettings):
        self.settings = settings
        self._started = False
        self._saved: dict[str, Any] = {}

    def __enter__(self) -> RayRunner:
        ray = _ray()
        if not ray.is_initialized():
            _quiet(ray)
            try:
                with _native_stderr_silenced():
                    ray.init(**_init_arguments(self.settings))
            except Exception as err:  # Ray's own errors (RayError) share no base with OSError
                first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
                raise RayUnavailable(f"cannot start or reach Ray: {first}") from None
            self._started = True
        context = ray.data.DataContext.get_current()
        self._saved = {name: getattr(context, name) for name in _DATA_SETTINGS}
        context.enable_progress_bars = False  # the run prints its own progress
        context.print_on_execution_start = False
        return self

    def __exit__(self, *_: object) -> None:
        ray = _ray()
        context = ray.data.DataContext.get_current()
        for name, value in self._saved.items():
            setattr(context, name, value)
        if self._started:
            ray.shutdown()
            self._started = False

    def _parallelism(self, count: int) -> int:
        workers = self.settings.workers
        if workers is None:
            workers = max(1, int(_ray().cluster_resources().get("CPU", 1)))
        return max(1, min(workers, count))

    def run(
        self,
        pending: list[Part],
        process: Process,
        workdir: Path,
        prepare_workers: Callable[[], object] | None = None,
    ) -> Generator[Part, None, None]:
        """Run the parts in a pool of actors (one CPU each), yielding each as it is DONE;
        the first failure stops the rest and raises PartFailed."""
        if not pending:
            return
        ray = _ray()
        items = ray.data.from_items(
            [{PART: index} for index in range(len(pending))], override_num_blocks=len(pending)
        )
        done = items.map_batches(
            _PartWorker,
            fn_constructor_kwargs={
                "parts": pending,
                "process": process,
                "workdir": str(workdir),
                "prepare": prepare_workers,
            },
            batch_size=1,
            batch_format="pyarrow",
            # a fixed pool: every actor starts (and loads the tokenizer) at once
            compute=ray.data.ActorPoolStrategy(size=self._parallelism(len(pending))),
            num_cpus=1,
        )
        batches = done.iter_batches(batch_size=None, batch_format="pyarrow")
        try:
            for batch in batches:
                for index, error in zip(
                    batch[PART].to_pylist(), batch["error"].to_pylist(), strict=True
                ):
                    if error is not None:
                        raise PartFailed(pending[index], error)
                    yield pending[index]
        finally:
            close = getattr(batches, "close", None)
            if close is not None:
                close()

    def map_tasks(
        self, tasks: Sequence[Callable[[], T]], done: Callable[[int], None] | None = None
    ) -> list[T]:
        """Every task's result, in the tasks' order: each task a Ray task of one CPU, on any
        node (paths must mean the same on every node); a task lost with its node is run
        again by Ray (a task writes its files atomically, under names fixed before it runs,
        so a second run writes the same bytes once). `done(count)` after each finishes."""
        if not tasks:
            return []
        ray = _ray()
        remote = ray.remote(num_cpus=1, max_retries=TASK_RETRIES)(_run_task)
        pending = [remote.remote(task) for task in tasks]
        waiting = list(pending)
        finished = 0
        while waiting:
            ready, waiting = ray.wait(waiting, num_returns=1)
            finished += len(ready)
            if done is not None:
                done(finished)
        return list(ray.get(pending))


class _PartWorker:
    """A Ray Data actor: loads what every part needs once, then runs the parts it is given
    into the work directory; a part's failure is returned as its `error`, not raised, so
    the driver names the part."""

    def __init__(
        self,
        parts: list[Part],
        process: Process,
        workdir: str,
        prepare: Callable[[], None] | None,
    ) -> None:
        self.parts, self.process, self.workdir = parts, process, Path(workdir)
        share_cores(1)  # an actor holds one CPU of its node
        # a later run on this machine waits for the workers of a killed one; a network file
        # system without locks loses only that wait (publishing stays atomic)
        with suppress(OSError):
            hold_workers_lock(self.workdir)
        if prepare is not None:
            prepare()

    def __call__(self, batch: pa.Table) -> pa.Table:
        errors: list[str | None] = []
        for index in batch[PART].to_pylist():
            part = self.parts[index]
            try:
                run_part(self.process, part, self.workdir)
                errors.append(None)
            except Exception as err:
                errors.append(f"{type(err).__name__}: {err}")
        return pa.table({PART: batch[PART], "error": pa.array(errors, pa.string())})


def _run_task(task: Callable[[], T]) -> T:
    share_cores(1)  # a task holds one CPU of its node
    return task()


def _init_arguments(settings: RaySettings) -> dict[str, Any]:
    """ray.init's arguments: join a cluster, or start a quiet instance on this machine."""
    quiet: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.ERROR}
    address = settings.address
    if address is None and os.environ.get("RAY_ADDRESS"):
        return quiet  # `ray job submit` and friends name the cluster
    if address in (None, LOCAL):
        return {
            **quiet,
            "address": LOCAL,
            "num_cpus": settings.num_cpus,
            "include_dashboard": False,
        }
    return {**quiet, "address": address}


@contextmanager
def _native_stderr_silenced() -> Iterator[None]:
    """Ray's native core prints a line of its own logging setup to the process's stderr
    when it starts: hide that (errors reach us as exceptions)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _quiet(ray: Any) -> None:
    """Ray's and Ray Data's own logging down to errors: the run prints its own progress."""
    os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "fatal")
    for name in ("ray", "ray.data"):
        logging.getLogger(name).setLevel(logging.ERROR)
