"""The Ray engine (the `ray` extra): the same parts, work directory and done-markers as the
local engine, run on a Ray cluster as plain Ray tasks: the map side's parts (`run`) and the
rest of a run's parallel work (`map_tasks`: the partition pass of pipeline/engine/keys.py,
shard writes), a few consecutive ones per Ray task when they are many.

Ray schedules; our guarantees sit on top of it: a part's task (one CPU) runs in a worker
process that loaded what every part of the run needs once (the tokenizer), writes the
part's directory under a temporary name and publishes it atomically (a retried or
duplicated task publishes the same bytes, once). The driver only submits the tasks (no
more at once than the workers, the next as one finishes) and waits for them: a few calls
per task, at most CHUNKS_PER_WORKER tasks per worker, nothing per thread. Results are
taken in plan order from the work directory, never in Ray's arrival order, and nothing is
written by Ray's own writers. Paths must mean
the same on every node (one machine, or a shared file system).

A lost worker node (its workers, tasks and object store at once) costs only the work in
flight: a task lost with its worker or node is run again (TASK_RETRIES times), on a node
that replaces it or on the nodes left, which go on with the other parts
(tests/test_engine_ray_cluster.py).

Ray's data loss on overwrite (ray-project/ray#55043: every task of a `write_parquet` in
"overwrite" mode cleared the output folder, deleting what other tasks had written) cannot
happen here: we never use Ray's writers or save modes, no task deletes anything or writes a
name another task writes (a part's directory is written under a uuid name and renamed to
the part's own id; any other task's file, a partition file among them, is a name fixed for
that task, replaced atomically with the same bytes), and every clearing (`--fresh`,
`--overwrite`, leftovers, a partition folder, the partition pass's scratch folder) is done
by the driver before the tasks that write there start (docs/DESIGN.md §8)."""

from __future__ import annotations

import itertools
import logging
import os
import sys
import uuid
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pipeline.engine.threads import share_cores
from pipeline.engine.workdir import (
    DONE_FILE,
    PARTS_DIR,
    Part,
    PartFailed,
    Process,
    run_part,
    workers_lock,
)

T = TypeVar("T")
INSTALL_HINT = "pip install 'mms-pipeline[ray]'"
LOCAL = "local"
"""The address that starts a Ray instance on this machine (as no address does, unless
RAY_ADDRESS names a cluster, as `ray job submit` does)."""
TASKS_IN_FLIGHT = 2
"""`map_tasks` keeps this many tasks per worker submitted: one running, one queued."""
CHUNKS_PER_WORKER = 4
"""`map_tasks` runs its tasks in at most this many Ray tasks per worker, each a batch of
consecutive tasks (the driver's round trips grow with the workers, never with the tasks;
still enough batches that the workers finish together)."""
TASK_RETRIES = 3
"""How often Ray runs a task again whose worker or node died (a part's, or `map_tasks`')."""


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
        return self

    def __exit__(self, *_: object) -> None:
        if self._started:
            _ray().shutdown()
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
        """Run the parts as Ray tasks of one CPU, each a batch of consecutive parts
        (`_batches`: at most CHUNKS_PER_WORKER per worker, so the driver's round trips grow
        with the workers, not the parts), at most `_parallelism` at once (the next
        submitted as one finishes), yielding each part as its batch is DONE; the first
        failure cancels the rest and raises PartFailed; closing the generator early
        cancels the rest."""
        if not pending:
            return
        ray = _ray()
        tasks = _PartTasks(
            ray.remote(num_cpus=1, max_retries=TASK_RETRIES)(map_parts),
            ray.put(process),  # once: every task reads it from its node's object store
            ray.put(prepare_workers),
            str(workdir),
            uuid.uuid4().hex,
        )
        parallelism = self._parallelism(len(pending))
        waiting = iter(_batches(len(pending), parallelism))
        running: dict[Any, list[Part]] = {}

        def submit(batch: range | None) -> None:
            if batch is not None:
                parts = pending[batch.start : batch.stop]
                running[tasks.submit(parts)] = parts

        try:
            for batch in itertools.islice(waiting, parallelism):
                submit(batch)
            while running:
                [finished], _ = ray.wait(list(running), num_returns=1)
                parts = running.pop(finished)
                failed = _batch_error(ray, finished, len(parts))
                if failed is not None:
                    raise PartFailed(parts[failed[0]], failed[1])
                submit(next(waiting, None))
                yield from parts
        finally:
            _cancel(ray, list(running))

    def map_tasks(
        self, tasks: Sequence[Callable[[], T]], done: Callable[[int], None] | None = None
    ) -> list[T]:
        """Every task's result, in the tasks' order: the tasks run as Ray tasks of one CPU,
        on any node (paths must mean the same on every node), a few consecutive ones per
        Ray task when they are many (`_batches`: CHUNKS_PER_WORKER per worker at most, so
        the driver's round trips grow with the workers, not the tasks); a Ray task lost
        with its node is run again by Ray (a task writes its files atomically, under names
        fixed before it runs, so a second run writes the same bytes once). No more than
        TASKS_IN_FLIGHT Ray tasks per worker are submitted at once, the next as one ends,
        so each wait asks about a few whatever their number (asking about every waiting
        one costs the driver per task and per second). `done(count)` as they finish.
        After a failure no task is submitted or started, the ones in flight end, and the
        first failure in task order is raised."""
        if not tasks:
            return []
        ray = _ray()
        remote = ray.remote(num_cpus=1, max_retries=TASK_RETRIES)(_run_tasks)
        parallelism = self._parallelism(len(tasks))
        results: list[Any] = [None] * len(tasks)
        failures: dict[int, BaseException] = {}
        batches = iter(_batches(len(tasks), parallelism))
        running: dict[Any, range] = {}
        for batch in itertools.islice(batches, TASKS_IN_FLIGHT * parallelism):
            running[remote.remote([tasks[number] for number in batch])] = batch
        finished = 0
        try:
            while running:
                ready, _ = ray.wait(list(running), num_returns=1)
                for ref in ready:
                    batch = running.pop(ref)
                    try:
                        results[batch.start : batch.stop] = ray.get(ref)
                    except Exception as err:  # a task's own error (or its worker's loss)
                        failures[batch.start] = _cause(err)
                    finished += len(batch)
                    following = None if failures else next(batches, None)
                    if following is not None:
                        running[remote.remote([tasks[n] for n in following])] = following
                if done is not None:
                    done(finished)
        finally:
            _cancel(ray, list(running))
        if failures:
            raise failures[min(failures)]
        return results


def _batches(count: int, parallelism: int) -> list[range]:
    """`count` tasks in consecutive batches, one Ray task each: no more than
    CHUNKS_PER_WORKER batches per worker, of as many tasks each (the last fewer)."""
    size = -(-count // (CHUNKS_PER_WORKER * parallelism))
    return [range(start, min(start + size, count)) for start in range(0, count, size)]


def _run_tasks(tasks: list[Callable[[], T]]) -> list[T]:
    """A Ray task of `map_tasks`: its batch's tasks in order; the first to fail raises
    (the ones after it do not run, as no task is started after a failure)."""
    share_cores(1)  # a task holds one CPU of its node
    return [task() for task in tasks]


_PREPARED: set[str] = set()
"""The runs (the driver's token for each) whose `prepare_workers` this worker process ran."""


def map_parts(
    process: Process,
    prepare: Callable[[], object] | None,
    parts: list[Part],
    workdir: str,
    run: str,
) -> tuple[int, str] | None:
    """A Ray task of the map side: its `parts` run in order into the work directory (a
    part a lost attempt of this task published already is left as it is), after this
    worker process prepared once for the run; the first failure stops the batch and is
    returned as the part's index and its error's text, never raised, so the driver names
    the part (Ray raises only when the worker or its node is lost)."""
    share_cores(1)  # a task holds one CPU of its node
    for index, part in enumerate(parts):
        try:
            with ExitStack() as held:
                # held while the part runs: a later run waits for the parts of a killed
                # one; a file system without locks loses only that wait (publishing stays
                # atomic)
                with suppress(OSError):
                    held.enter_context(workers_lock(Path(workdir)))
                _prepare_once(prepare, run)
                if not (Path(workdir) / PARTS_DIR / part.id / DONE_FILE).is_file():
                    run_part(process, part, Path(workdir))
        except Exception as err:
            return index, f"{type(err).__name__}: {err}"
    return None


def _prepare_once(prepare: Callable[[], object] | None, run: str) -> None:
    """`prepare()` the first time this worker process runs a part of `run` (a worker serves
    many parts, and the runs of one Ray session, each with its own config)."""
    if prepare is None or run in _PREPARED:
        return
    prepare()
    _PREPARED.add(run)


@dataclass(frozen=True, slots=True)
class _PartTasks:
    """The map side's tasks of one run: the remote function, and the arguments every part's
    task shares (the process and `prepare_workers` as references to the object store, the
    work directory, the run's token for `_prepare_once`)."""

    remote: Any
    process: Any
    prepare: Any
    workdir: str
    run: str

    def submit(self, parts: list[Part]) -> Any:
        """A task running `parts` in order: its reference."""
        return self.remote.remote(self.process, self.prepare, parts, self.workdir, self.run)


def _batch_error(ray: Any, finished: Any, count: int) -> tuple[int, str] | None:
    """What a finished task of `count` parts says: None, its failed part's index and
    error, or Ray's error (told of its first part) when the task was lost more often than
    it is retried."""
    try:
        error: tuple[int, str] | None = ray.get(finished)
    except ray.exceptions.RayError as err:
        return 0, f"{type(err).__name__}: {err}"
    return error


def _cancel(ray: Any, unfinished: list[Any]) -> None:
    """Stop the part tasks not finished (a queued one never starts, a running one is
    interrupted and removes its temporary directory) and wait until each has ended, so no
    part of this run writes once it has stopped."""
    for task in unfinished:
        ray.cancel(task)
    if unfinished:
        ray.wait(unfinished, num_returns=len(unfinished))


def _cause(error: Exception) -> BaseException:
    """A task's own error as it raised it (Ray wraps it in a RayTaskError, whose message
    is the remote traceback), so the job tells it as it would locally."""
    cause = getattr(error, "cause", None)
    return cause if isinstance(cause, BaseException) else error


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
    """Ray's own logging down to errors: the run prints its own progress."""
    os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "fatal")
    logging.getLogger("ray").setLevel(logging.ERROR)
