"""The local engine: runs a per-unit function over work units, in worker processes, into
a work directory where each finished unit is a directory marked `DONE`; a run that is
killed and started again redoes only the units that were not finished."""

from __future__ import annotations

import ctypes
import dataclasses
import fcntl
import json
import multiprocessing
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, TextIO

from pipeline.output.files import atomic_text_output

PLAN_FILE = "plan.json"
UNITS_DIR = "units"
PARTIAL_DIR = "partial"
DONE_FILE = "DONE"
RUN_LOCK = "run.lock"
WORKERS_LOCK = "workers.lock"
PLAN_VERSION = "mms-local-engine-1"
START_METHOD = "fork" if sys.platform.startswith("linux") else "spawn"
"""On Linux, workers are forked: they inherit the imports and whatever `prepare_workers`
loaded (a tokenizer takes a second to load, in every worker otherwise), and the engine
forks them before it starts any thread of its own. The parent's other threads (a progress
bar) are not used by workers. Elsewhere (macOS, where forking is unsafe) workers are
spawned as fresh interpreters."""
_PR_SET_PDEATHSIG = 1
WORKERS_GONE_SECONDS = 60.0
"""How long a run waits for the workers of a killed earlier run to exit."""
_HELD: list[TextIO] = []
"""Lock files a worker holds for its lifetime."""


class Part(Protocol):
    """What the engine knows of a piece of work: a stable id (its directory's name) and a
    description for messages. A part is a frozen dataclass, recorded in the plan; what it
    reads is the per-part function's business, never the engine's."""

    id: str

    def describe(self) -> str: ...


Process = Callable[[Any, Path], None]
"""Writes the outputs of one unit into the (empty) directory given. With workers > 1 it is
pickled: a module-level function, or a functools.partial of one with picklable arguments."""


class WorkdirError(RuntimeError):
    """The work directory cannot be used: it holds another plan, or another run uses it."""


class UnitFailed(RuntimeError):
    """A unit's process function raised; the message names the unit and its input."""

    def __init__(self, unit: Part, error: BaseException, others: int = 0) -> None:
        more = f" (and {others} other unit(s) failed)" if others else ""
        super().__init__(
            f"work unit {unit.id} ({unit.describe()}) failed: {type(error).__name__}: {error}{more}"
        )
        self.unit = unit


def reset_workdir(workdir: Path) -> None:
    """Forget every unit and the plan (`--fresh`); other files in `workdir` are left alone."""
    if not workdir.exists():
        return
    with _run_lock(workdir):
        for name in (UNITS_DIR, PARTIAL_DIR):
            shutil.rmtree(workdir / name, ignore_errors=True)
        (workdir / PLAN_FILE).unlink(missing_ok=True)


def run_units(units: list[Part], process: Process, workdir: Path, **options: Any) -> list[Path]:
    """Run every unit (as `iter_units`, with its keyword `options`) and return the unit
    directories in unit order."""
    return list(iter_units(units, process, workdir, **options))


def iter_units(
    units: list[Part],
    process: Process,
    workdir: Path,
    *,
    config_digest: str = "",
    workers: int = 1,
    progress: Callable[[int, int], None] | None = None,
    on_claimed: Callable[[], None] | None = None,
    prepare_workers: Callable[[], None] | None = None,
    watched: Sequence[str] = (),
) -> Iterator[Path]:
    """Run `process` for every unit not yet DONE in `workdir`, yielding the unit
    directories in unit order, each as soon as it and every unit before it are DONE (the
    later units keep running meanwhile, so a caller can reduce while the map goes on).
    `config_digest` names what the caller does with the units: a work directory planned
    with other units, inputs or digest is refused (WorkdirError). `progress(done, total)`
    is called as units finish; `on_claimed()` once this run holds the work directory,
    before any unit runs; `prepare_workers()` in this process before it starts worker
    processes (only when it does), to load what every worker needs once. `watched` names
    the files the units' output depends on (the inputs they read, a tokenizer): a change
    to one refuses the work directory. A failing unit raises UnitFailed once the units already running
    have finished; finished units stay DONE."""
    ids = [unit.id for unit in units]
    if len(set(ids)) != len(ids):
        raise ValueError("work unit ids are not unique")
    workdir.mkdir(parents=True, exist_ok=True)
    with _run_lock(workdir):
        _check_plan(workdir, plan_document(units, config_digest, watched))
        if on_claimed is not None:
            on_claimed()
        units_dir = workdir / UNITS_DIR
        units_dir.mkdir(exist_ok=True)
        _wait_for_old_workers(workdir)
        shutil.rmtree(workdir / PARTIAL_DIR, ignore_errors=True)
        pending = []
        for unit in units:
            target = units_dir / unit.id
            if not (target / DONE_FILE).is_file():
                shutil.rmtree(target, ignore_errors=True)
                pending.append(unit)
        total = len(units)
        ready = {unit.id for unit in units} - {unit.id for unit in pending}
        if progress is not None:
            progress(len(ready), total)
        finishing = _run_pending(pending, process, workdir, workers, prepare_workers)
        try:
            for unit_id in ids:
                while unit_id not in ready:
                    ready.add(next(finishing).id)
                    if progress is not None:
                        progress(len(ready), total)
                yield units_dir / unit_id
        finally:
            finishing.close()


def _run_pending(
    pending: list[Part],
    process: Process,
    workdir: Path,
    workers: int,
    prepare_workers: Callable[[], None] | None = None,
) -> Iterator[Part]:
    """Run the units, yielding each as it is DONE; raise UnitFailed after the pool drains.
    Closing the iterator early cancels the units not yet started."""
    if workers <= 1 or len(pending) <= 1:
        with _workers_lock(workdir):
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
    pool = ProcessPoolExecutor(
        min(workers, len(pending)),
        mp_context=context,
        initializer=_start_worker,
        initargs=(os.getpid(), str(workdir)),
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


def run_unit(process: Process, unit: Part, workdir: Path) -> None:
    """Run one unit into a fresh directory under `partial/`, mark it DONE (outputs and
    marker fsync'd) and rename it into `units/`: a unit directory appears whole or not at
    all. A failed unit leaves nothing behind."""
    temp = workdir / PARTIAL_DIR / unit.id
    shutil.rmtree(temp, ignore_errors=True)
    temp.mkdir(parents=True)
    try:
        process(unit, temp)
        _sync_tree(temp)
        with open(temp / DONE_FILE, "w", encoding="utf-8") as marker:
            marker.write(f"{unit.id}\n")
            marker.flush()
            os.fsync(marker.fileno())
        _sync_path(temp)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    units_dir = workdir / UNITS_DIR
    os.rename(temp, units_dir / unit.id)
    _sync_path(units_dir)


def _sync_tree(root: Path) -> None:
    """fsync every file and directory under `root`, deepest first."""
    for directory, _, files in os.walk(root, topdown=False):
        for name in files:
            _sync_path(Path(directory, name))
        _sync_path(Path(directory))


def _sync_path(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _start_worker(parent: int, workdir: str) -> None:
    """In each worker: die with the parent (a killed run must not leave workers that go
    on writing), and hold the shared workers lock until exiting."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
    if os.getppid() != parent:
        os._exit(1)
    lock = open(Path(workdir) / WORKERS_LOCK, "a")  # noqa: SIM115 - held until the worker exits
    fcntl.flock(lock.fileno(), fcntl.LOCK_SH)
    _HELD.append(lock)


@contextmanager
def _run_lock(workdir: Path) -> Iterator[None]:
    """One run at a time per work directory."""
    with open(workdir / RUN_LOCK, "a") as lock:
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise WorkdirError(f"{workdir} is in use by another run") from None
        yield


def _wait_for_old_workers(workdir: Path) -> None:
    """Wait until no worker of an earlier run (one that was killed) holds the workers lock."""
    deadline = time.monotonic() + WORKERS_GONE_SECONDS
    with open(workdir / WORKERS_LOCK, "a") as lock:
        while True:
            try:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise WorkdirError(
                        f"worker processes of an earlier run still use {workdir}; "
                        "end them and start again"
                    ) from None
                time.sleep(0.05)


@contextmanager
def _workers_lock(workdir: Path) -> Iterator[None]:
    """Held shared by whoever runs units (this process, or each pool worker)."""
    with open(workdir / WORKERS_LOCK, "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_SH)
        yield


def plan_document(
    units: list[Part], config_digest: str, watched: Sequence[str] = ()
) -> dict[str, Any]:
    """What a work directory was planned for: the units, the config digest, and the size
    and modification time of every watched file (the job names the files its units read
    and depend on)."""
    files: dict[str, dict[str, int]] = {}
    for path in watched:
        if path not in files:
            stat = os.stat(path)
            files[path] = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    return {
        "version": PLAN_VERSION,
        "config_digest": config_digest,
        "files": files,
        "units": [dataclasses.asdict(unit) for unit in units],
    }


def _check_plan(workdir: Path, plan: dict[str, Any]) -> None:
    """Write plan.json, or refuse a work directory planned differently."""
    path = workdir / PLAN_FILE
    if not path.is_file():
        with atomic_text_output(path) as out:
            out.write(json.dumps(plan, indent=2, sort_keys=True) + "\n")
        return
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        old = {"unreadable": str(err)}
    if old != plan:
        raise WorkdirError(
            f"{workdir} holds the work of another run ({_difference(old, plan)}); "
            "start over with --fresh, or use another work directory"
        )


def _difference(old: dict[str, Any], new: dict[str, Any]) -> str:
    """The first way two plans differ, for the error message."""
    if "unreadable" in old:
        return f"its {PLAN_FILE} cannot be read: {old['unreadable']}"
    if old.get("version") != new["version"]:
        return f"it was planned by {old.get('version')}, not {new['version']}"
    if old.get("config_digest") != new["config_digest"]:
        return f"the config changed: {old.get('config_digest')} -> {new['config_digest']}"
    old_files = old.get("files", {})
    for path, stat in new["files"].items():
        if old_files.get(path) != stat:
            return f"input {path} is new or changed since"
    for path in old_files:
        if path not in new["files"]:
            return f"input {path} is no longer read"
    return f"the work units differ ({len(old.get('units', []))} then, {len(new['units'])} now)"
